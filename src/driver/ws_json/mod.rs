//! The `ws-json` driver: any JSON-over-WebSocket protocol, described in the scenario by
//! frame templates and JSON paths (`[target.ws-json]`, [`options`]; the guide with worked
//! examples is `docs/drivers/ws-json.md`).
//!
//! Everything is compiled once in [`Driver::new`](super::Driver::new): templates into
//! literal and placeholder segments ([`template`](crate::driver::kit::json_map::template)), paths into
//! steps ([`path`]). A frame sent is one buffer filled
//! from its template; a frame received is checked once as JSON, its top-level keys that the
//! rules need are found in one more pass, and it is matched rule by rule (error, ack, push,
//! ping, ignore) by walking paths on from them over the borrowed text, so a frame costs no
//! allocation beyond the body it delivers. A frame no rule matches is
//! reported as a protocol error "unmatched frame: …", with the frame as the example.
//!
//! Requests the driver waits on (login, `after_login`, join, sync) are tied to their reply
//! by `{req_id}` and the `reply_id` path; frames arriving meanwhile are kept unread and
//! judged after, and pushes merge with fetched pages by conversation and sequence number
//! exactly as in the native driver ([`Cursors`]). Pages are read after the sequence number
//! up to which the user has everything, following `page_more` (a flag or a cursor); a login
//! before traffic notes where each conversation stands ([`Session::skip_history`]).

pub mod options;
mod sync;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_tungstenite::tungstenite::Message;

use self::options::{Options, NAME};
use super::{
    Auth, AuthForm, Caps, Config, Connected, Dest, Event, Failure, OptionError, Session, Spec,
    UserCtx,
};
use crate::driver::kit::connect::within;
use crate::driver::kit::cursors::{Cursors, Push};
use crate::driver::kit::json_map::path::{self, as_str, Doc, Frame};
use crate::driver::kit::json_map::template::{Template, Values};
use crate::driver::kit::json_map::{clip, credentials, now_ms, text_of};
use crate::driver::kit::ws::{read_text, Dialer, Ws};
use crate::metrics::ErrorKind;
use crate::scenario::TrafficKind;

/// The declarative JSON-over-WebSocket driver.
#[derive(Debug, Clone)]
pub struct WsJsonDriver {
    dialer: Dialer,
    opts: Arc<Options>,
    auth: Auth,
}

impl super::Driver for WsJsonDriver {
    const SPEC: Spec = Spec {
        name: NAME,
        schemes: crate::driver::kit::ws::SCHEMES,
        embedded_path: Some("/ws"),
        kinds: &[TrafficKind::Direct, TrafficKind::Group, TrafficKind::Idle],
        requests: &[],
        auth: &[AuthForm::Secret, AuthForm::Password],
        source_addresses: true,
        files: &[],
        caps: Caps {
            acceptance: true,
            presence: false,
            fetch_missed: true,
            filters_own_echoes: true,
            fetch_needs_receipt: false,
            group_history: None,
            skips_history: true,
        },
    };

    type Session = WsJsonSession;

    fn new(config: &Config) -> Result<Self, OptionError> {
        Ok(WsJsonDriver {
            opts: Arc::new(Options::parse(&config.options, &config.kinds)?),
            dialer: Dialer::new(config)?,
            auth: config.auth.clone(),
        })
    }

    fn caps(&self) -> Caps {
        Caps {
            acceptance: self.opts.ack.is_some(),
            presence: false,
            fetch_missed: self.opts.sync.is_some(),
            filters_own_echoes: self.opts.push.as_ref().is_some_and(|p| p.from.is_some()),
            fetch_needs_receipt: false,
            group_history: None,
            skips_history: self.opts.sync.is_some(),
        }
    }

    async fn connect(
        &self,
        user: &UserCtx,
        resume: Cursors,
    ) -> Result<Connected<WsJsonSession>, (Failure, Cursors)> {
        let started = Instant::now();
        let ws = match self.dialer.dial(user.ix).await {
            Ok(ws) => ws,
            Err(f) => return Err((f, resume)),
        };
        let handshake = started.elapsed();
        let mut session = WsJsonSession {
            ws,
            opts: Arc::clone(&self.opts),
            st: State {
                user: user.id.clone(),
                next_id: 0,
                pending: VecDeque::new(),
                unread: VecDeque::new(),
                ready: VecDeque::new(),
                cursors: resume,
                groups: Vec::new(),
                pongs_owed: 0,
            },
            reply_timeout: self.dialer.timeout(),
        };
        let login = self.login(&mut session, user);
        match within(self.dialer.timeout(), "login reply", login).await {
            Ok(()) => Ok(Connected {
                session,
                handshake,
                login: started.elapsed() - handshake,
                account: None,
                no_resume_point: false,
            }),
            Err(f) => Err((f, session.st.cursors)),
        }
    }
}

impl WsJsonDriver {
    /// Sends the login frame and waits for the frame that says it succeeded, then sends
    /// the `after_login` requests one by one.
    async fn login(&self, s: &mut WsJsonSession, user: &UserCtx) -> Result<(), Failure> {
        let (username, password) = credentials(&self.auth, &user.id);
        let vals = Values {
            user: &user.id,
            token: &password,
            username: &username,
            password: &password,
            ..Values::default()
        };
        let opts = Arc::clone(&self.opts);
        if let (Some(login), Some(ok)) = (&opts.login, &opts.login_ok) {
            let id = s.st.next_id();
            s.write(login, &Values { req_id: id, ..vals }).await?;
            s.ws.flush().await?;
            loop {
                let text = read_text(&mut s.ws).await?;
                let mut outcome = None;
                for doc in docs(&text, opts.lines) {
                    if outcome.is_some() {
                        s.st.unread.push_back(doc.to_owned());
                        continue;
                    }
                    // Frames that are not JSON (a ping of some protocols) are judged later.
                    let Ok(root) = path::parse(doc) else {
                        s.st.unread.push_back(doc.to_owned());
                        continue;
                    };
                    if ok.matches(doc, root) {
                        outcome = Some(Ok(()));
                    } else if let Some(reason) = opts.error_reason(doc, root) {
                        outcome = Some(Err(Failure::new(
                            ErrorKind::AuthFailed,
                            format!("login refused: {reason}"),
                        )));
                    } else {
                        s.st.unread.push_back(doc.to_owned());
                    }
                }
                match outcome {
                    Some(Ok(())) => break,
                    Some(Err(f)) => return Err(f),
                    None => continue,
                }
            }
        }
        for t in &opts.after_login {
            let reply = s.call(t, vals).await?;
            if let Some(reason) = opts.error_of(&reply) {
                return Err(Failure::new(
                    ErrorKind::AuthFailed,
                    format!("after login: {reason}"),
                ));
            }
        }
        Ok(())
    }
}

impl Options {
    /// The reason of `doc` when it is an error frame.
    fn error_reason<D: Doc + ?Sized>(&self, doc: &str, root: &D) -> Option<String> {
        let rule = self.error.as_ref()?;
        if !rule.matcher.matches(doc, root) {
            return None;
        }
        Some(
            rule.reason
                .as_ref()
                .and_then(|p| p.with(root, |v| v.map(text_of)))
                .unwrap_or_else(|| clip(doc).to_owned()),
        )
    }

    /// The reason of the reply `doc` when it is an error frame (or not JSON at all).
    fn error_of(&self, doc: &str) -> Option<String> {
        match path::parse(doc) {
            Ok(root) => self.error_reason(doc, root),
            Err(e) => Some(format!("unreadable reply ({e}): {}", clip(doc))),
        }
    }
}

/// What a session keeps besides its socket.
#[derive(Debug)]
struct State {
    user: String,
    next_id: u64,
    /// Sends waiting for their ack: (request id, tag), oldest first.
    pending: VecDeque<(u64, u64)>,
    /// Documents read while waiting for a reply, not judged yet.
    unread: VecDeque<String>,
    /// Events judged and not handed out yet (a frame may hold several documents).
    ready: VecDeque<Event>,
    cursors: Cursors,
    /// Groups joined on this connection (their conversations are synced).
    groups: Vec<String>,
    /// Server pings not answered yet.
    pongs_owed: u32,
}

impl State {
    fn next_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// The tag of the pending send with request id `id`, removed.
    fn take_pending(&mut self, id: u64) -> Option<u64> {
        let i = self.pending.iter().position(|(r, _)| *r == id)?;
        self.pending.remove(i).map(|(_, tag)| tag)
    }

    /// Judges one document: queues the event it is (if any).
    fn judge(&mut self, opts: &Options, doc: &str) {
        if opts
            .ping
            .as_ref()
            .is_some_and(|p| p.matcher.matches_text(doc))
        {
            self.pongs_owed += 1;
            return;
        }
        if opts.ignore.iter().any(|m| m.matches_text(doc)) {
            return;
        }
        let root = match path::parse(doc) {
            Ok(root) => root,
            Err(e) => {
                return self.ready.push_back(Event::ProtocolError(Failure::new(
                    ErrorKind::Protocol,
                    format!("unreadable frame ({e}): {}", clip(doc)),
                )))
            }
        };
        let frame = &Frame::new(root, &opts.index);
        let id = || opts.reply_id.as_ref().and_then(|p| p.u64(frame));
        if let Some(reason) = opts.error_reason(doc, frame) {
            let ev = match id().and_then(|id| self.take_pending(id)) {
                Some(tag) => Event::Refused {
                    tag,
                    failure: Failure::new(ErrorKind::SendFailed, reason),
                },
                None => Event::ProtocolError(Failure::new(
                    ErrorKind::Protocol,
                    format!("error frame: {reason}"),
                )),
            };
            return self.ready.push_back(ev);
        }
        if let Some(ack) = opts.ack.as_ref().filter(|a| a.matcher.matches(doc, frame)) {
            if let Some(tag) = id().and_then(|id| self.take_pending(id)) {
                if let (Some(conv), Some(seq)) = (&ack.conv, &ack.seq) {
                    if let Some(seq) = seq.u64(frame) {
                        let cursors = &mut self.cursors;
                        conv.with(frame, |v| {
                            if let Some(c) = v.and_then(as_str) {
                                cursors.with(&c, |s| s.mark(seq));
                            }
                        });
                    }
                }
                return self.ready.push_back(Event::Accepted { tag });
            }
        }
        if let Some(push) = opts.push.as_ref().filter(|p| p.matcher.matches(doc, frame)) {
            let own = push.from.as_ref().is_some_and(|from| {
                from.with(frame, |v| {
                    v.and_then(as_str).is_some_and(|f| f == self.user)
                })
            });
            let mut kind = Push::New;
            if let (Some(conv), Some(seq)) = (&push.conv, &push.seq) {
                let cursors = &mut self.cursors;
                if let Some(seq) = seq.u64(frame) {
                    conv.with(frame, |v| {
                        if let Some(c) = v.and_then(as_str) {
                            kind = cursors.with(&c, |s| s.push(seq));
                        }
                    });
                }
            }
            if own || kind == Push::Synced {
                return;
            }
            let ev = match push.body.with(frame, |v| v.map(text_of)) {
                Some(body) => Event::Delivered { body: body.into() },
                None => Event::ProtocolError(Failure::new(
                    ErrorKind::Protocol,
                    format!("push without a body at `{}`: {}", push.body, clip(doc)),
                )),
            };
            return self.ready.push_back(ev);
        }
        if opts
            .ping
            .as_ref()
            .is_some_and(|p| p.matcher.matches(doc, frame))
        {
            self.pongs_owed += 1;
            return;
        }
        if opts.ignore.iter().any(|m| m.matches(doc, frame)) {
            return;
        }
        self.ready.push_back(Event::ProtocolError(Failure::new(
            ErrorKind::Protocol,
            format!("unmatched frame: {}", clip(doc)),
        )));
    }
}

/// The documents of a text frame: the frame (even empty: a ping of some protocols), or its
/// non-empty lines.
fn docs(text: &str, lines: bool) -> impl Iterator<Item = &str> {
    let sep = if lines { '\n' } else { '\0' };
    // Without `lines` the frame is one document: a raw NUL cannot occur in JSON text, so
    // splitting on it yields the frame whole.
    text.split(sep)
        .filter(move |d| !lines || !d.trim().is_empty())
}

/// One user's connection.
#[derive(Debug)]
pub struct WsJsonSession {
    ws: Ws,
    opts: Arc<Options>,
    st: State,
    /// Longest wait for the reply to a join or sync request.
    reply_timeout: Duration,
}

impl WsJsonSession {
    /// Queues `template` filled with `vals`.
    async fn write(&mut self, template: &Template, vals: &Values<'_>) -> Result<(), Failure> {
        let text = template.fill(vals, now_ms());
        self.ws.write(Message::text(text)).await
    }

    /// Sends `template` with a fresh `{req_id}` and returns the document that answers it;
    /// every other document meanwhile is kept unread. Bounded by the connect timeout.
    async fn call(&mut self, template: &Template, vals: Values<'_>) -> Result<String, Failure> {
        let limit = self.reply_timeout;
        let id = self.st.next_id();
        let Some(reply_id) = self.opts.reply_id.clone() else {
            return Err(Failure::new(ErrorKind::Other, "no reply_id to wait on"));
        };
        let lines = self.opts.lines;
        let exchange = async {
            self.write(template, &Values { req_id: id, ..vals }).await?;
            self.ws.flush().await?;
            loop {
                let text = read_text(&mut self.ws).await?;
                let mut reply = None;
                for doc in docs(&text, lines) {
                    let ours = reply.is_none()
                        && path::parse(doc).is_ok_and(|root| reply_id.u64(root) == Some(id));
                    if ours {
                        reply = Some(doc.to_owned());
                    } else {
                        self.st.unread.push_back(doc.to_owned());
                    }
                }
                if let Some(r) = reply {
                    return Ok(r);
                }
            }
        };
        match tokio::time::timeout(limit, exchange).await {
            Ok(result) => result,
            Err(_) => Err(Failure::new(
                ErrorKind::Timeout,
                format!("no reply within {limit:?}"),
            )),
        }
    }
}

impl Session for WsJsonSession {
    type Resume = Cursors;

    async fn send(&mut self, tag: u64, dest: Dest<'_>, body: &str) -> Result<(), Failure> {
        let (template, to) = match dest {
            Dest::User(u) => (self.opts.direct.as_ref(), u),
            Dest::Group(g) => (self.opts.group.as_ref(), g),
        };
        let Some(template) = template else {
            return Err(Failure::new(
                ErrorKind::SendFailed,
                "no template for this kind of message",
            ));
        };
        let id = self.st.next_id();
        let text = template.fill(
            &Values {
                user: &self.st.user,
                req_id: id,
                to,
                body,
                ..Values::default()
            },
            now_ms(),
        );
        if self.opts.ack.is_some() {
            self.st.pending.push_back((id, tag));
        }
        self.ws.write(Message::text(text)).await
    }

    async fn request(&mut self, _tag: u64, name: &'static str) -> Result<(), Failure> {
        Err(Failure::new(
            ErrorKind::RequestFailed,
            format!("driver `{NAME}` sends no request `{name}`"),
        ))
    }

    async fn heartbeat(&mut self) -> Result<(), Failure> {
        let msg = match &self.opts.heartbeat {
            Some(t) => {
                let req_id = self.st.next_id();
                let vals = Values {
                    user: &self.st.user,
                    req_id,
                    ..Values::default()
                };
                Message::text(t.fill(&vals, now_ms()))
            }
            None => Message::Ping(Default::default()),
        };
        self.ws.write(msg).await
    }

    async fn flush(&mut self) -> Result<(), Failure> {
        self.ws.flush().await
    }

    async fn join(&mut self, group: &str) -> Result<(), Failure> {
        let opts = Arc::clone(&self.opts);
        let user = self.st.user.clone();
        let mut refused = None;
        for t in &opts.join {
            let vals = Values {
                user: &user,
                group,
                ..Values::default()
            };
            let reply = self.call(t, vals).await?;
            match opts.error_of(&reply) {
                Some(reason) => refused = Some(reason),
                None => {
                    refused = None;
                    break;
                }
            }
        }
        if let Some(reason) = refused {
            return Err(Failure::new(
                ErrorKind::Protocol,
                format!("join refused: {reason}"),
            ));
        }
        if !self.st.groups.iter().any(|g| g == group) {
            self.st.groups.push(group.to_owned());
        }
        Ok(())
    }

    async fn skip_history(&mut self) -> Result<(), Failure> {
        self.note_history().await
    }

    async fn fetch_missed(&mut self, out: &mut Vec<String>) -> Result<(), Failure> {
        self.fetch(out).await
    }

    async fn next_event(&mut self) -> Event {
        loop {
            if let Some(ev) = self.st.ready.pop_front() {
                return ev;
            }
            if let Some(doc) = self.st.unread.pop_front() {
                self.st.judge(&self.opts, &doc);
                continue;
            }
            if self.st.pongs_owed > 0 {
                if let Some(ping) = &self.opts.ping {
                    let id = self.st.next_id();
                    let text = ping.reply.fill(
                        &Values {
                            user: &self.st.user,
                            req_id: id,
                            ..Values::default()
                        },
                        now_ms(),
                    );
                    self.st.pongs_owed -= 1;
                    if let Err(f) = self.ws.write(Message::text(text)).await {
                        return Event::Closed(f);
                    }
                    if let Err(f) = self.ws.flush().await {
                        return Event::Closed(f);
                    }
                }
                continue;
            }
            match read_text(&mut self.ws).await {
                Ok(text) => {
                    for doc in docs(&text, self.opts.lines) {
                        self.st.judge(&self.opts, doc);
                    }
                }
                Err(e) => return e.event(),
            }
        }
    }

    async fn close(mut self) -> Cursors {
        let opts = Arc::clone(&self.opts);
        if let Some(t) = &opts.logout {
            let user = self.st.user.clone();
            let vals = Values {
                user: &user,
                ..Values::default()
            };
            if self.write(t, &vals).await.is_ok() {
                let _ = self.ws.flush().await;
            }
        }
        self.ws.close().await;
        self.st.cursors
    }

    fn into_resume(self) -> Cursors {
        self.st.cursors
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> Options {
        let text = include_str!("../../../scenarios/ws-json-native.toml");
        let root: toml::Table = toml::from_str(text).expect("scenario");
        let table = root["target"]["ws-json"]
            .as_table()
            .expect("ws-json")
            .clone();
        Options::parse(&table, &["direct", "group"]).expect("options")
    }

    fn state() -> State {
        State {
            user: "me".to_owned(),
            next_id: 0,
            pending: VecDeque::from([(7, 70), (8, 80)]),
            unread: VecDeque::new(),
            ready: VecDeque::new(),
            cursors: Cursors::default(),
            groups: Vec::new(),
            pongs_owed: 0,
        }
    }

    fn judged(st: &mut State, opts: &Options, doc: &str) -> Option<String> {
        st.judge(opts, doc);
        st.ready.pop_front().map(|ev| format!("{ev:?}"))
    }

    #[test]
    fn frames_become_events_by_their_rules() {
        let opts = options();
        let mut st = state();
        let ack = r#"{"type":"ack","ref":8,"conv":"d:a:me","seq":1,"ts":0}"#;
        assert_eq!(
            judged(&mut st, &opts, ack).as_deref(),
            Some("Accepted { tag: 80 }")
        );
        let refused = r#"{"type":"error","ref":7,"code":"x","message":"too big","fatal":false}"#;
        let ev = judged(&mut st, &opts, refused).expect("event");
        assert!(
            ev.starts_with("Refused { tag: 70") && ev.contains("too big"),
            "{ev}"
        );
        let msg = |seq: u64, from: &str| {
            format!(
                r#"{{"type":"msg","conv":"d:a:me","seq":{seq},"from":"{from}","body":"b{seq}","ts":0}}"#
            )
        };
        // Seq 1 was the user's own message (acked): a push of it is not new.
        assert_eq!(
            judged(&mut st, &opts, &msg(2, "a")).as_deref(),
            Some(r#"Delivered { body: "b2" }"#)
        );
        assert_eq!(
            judged(&mut st, &opts, &msg(2, "a")).as_deref(),
            Some(r#"Delivered { body: "b2" }"#),
            "a server duplicate is passed on"
        );
        assert_eq!(
            judged(&mut st, &opts, &msg(3, "me")),
            None,
            "own messages are no deliveries"
        );
        assert_eq!(judged(&mut st, &opts, r#"{"type":"pong","ts":1}"#), None);
        for odd in [
            "",
            "not json",
            "[1,2]",
            "7",
            r#"{"type":"ack","ref":99}"#,
            r#"{"type":{"deep":[[[]]]}}"#,
        ] {
            let ev = judged(&mut st, &opts, odd).unwrap_or_else(|| panic!("{odd:?} gave nothing"));
            assert!(ev.starts_with("ProtocolError"), "{odd:?}: {ev}");
        }
        assert!(st.pending.is_empty());
    }
}
