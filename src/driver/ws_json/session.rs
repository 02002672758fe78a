//! One user's connection to a JSON-over-WebSocket server ([`WsJsonSession`]): the login
//! and `after_login` requests, sends matched with their acks, frames that arrive while a
//! reply is awaited held for later, syncs merged with pushes, pings answered.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio_tungstenite::tungstenite::Message;

use super::options::{AckRule, Options, PushRule, NAME};
use super::signals::{SignalRule, RECEIPTS};
use super::WsJsonDriver;
use crate::driver::kit::cursors::{Cursors, Push};
use crate::driver::kit::exchange::{self, until_answer, Interpret};
use crate::driver::kit::inbox::Inbox;
use crate::driver::kit::json_map::path::{self, as_str, Frame};
use crate::driver::kit::json_map::template::{Template, Values};
use crate::driver::kit::json_map::{clip, credentials, now_ms, text_of};
use crate::driver::kit::ws::Ws;
use crate::driver::{Dest, Event, Failure, Session, Signal, UserCtx};
use crate::metrics::ErrorKind;

impl WsJsonDriver {
    /// Sends the login frame and waits for the frame that says it succeeded, then sends
    /// the `after_login` requests one by one.
    pub(super) async fn login(&self, s: &mut WsJsonSession, user: &UserCtx) -> Result<(), Failure> {
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
            let id = s.st.inbox.next_id();
            s.write(login, &Values { req_id: id, ..vals }).await?;
            s.ws.flush().await?;
            until_answer(&mut s.ws, &mut s.st.inbox, |text, inbox| {
                let mut outcome = None;
                for doc in docs(text, opts.lines) {
                    if outcome.is_some() {
                        inbox.hold(doc.to_owned());
                        continue;
                    }
                    // Frames that are not JSON (a ping of some protocols) are interpreted later.
                    let Ok(root) = path::parse(doc) else {
                        inbox.hold(doc.to_owned());
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
                        inbox.hold(doc.to_owned());
                    }
                }
                outcome
            })
            .await??;
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
/// What a session keeps besides its socket.
#[derive(Debug)]
pub(super) struct State {
    pub(super) user: String,
    /// Request ids, sends waiting for their ack, frames held, pongs owed.
    pub(super) inbox: Inbox,
    /// Events interpreted and not handed out yet (a frame may hold several documents).
    pub(super) ready: VecDeque<Event>,
    pub(super) cursors: Cursors,
    /// Groups joined on this connection (their conversations are synced).
    pub(super) groups: Vec<String>,
}

impl State {
    /// Interprets one document of a frame: queues the event it is (if any).
    pub(super) fn interpret_doc(&mut self, opts: &Options, doc: &str) {
        if opts
            .ping
            .as_ref()
            .is_some_and(|p| p.matcher.matches_text(doc))
        {
            self.inbox.pongs_owed += 1;
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
            let ev = self.refusal(id(), reason);
            return self.ready.push_back(ev);
        }
        if let Some(ack) = opts.ack.as_ref().filter(|a| a.matcher.matches(doc, frame)) {
            if let Some(tag) = id().and_then(|id| self.inbox.take_ack(id)) {
                self.mark_acked(ack, frame);
                return self.ready.push_back(Event::Accepted { tag });
            }
        }
        let receipt_ok = opts.signals.receipt_ok.as_ref();
        if receipt_ok.is_some_and(|m| m.matches(doc, frame)) {
            if let Some(tag) = id().and_then(|id| self.inbox.take_ack(id)) {
                return self.ready.push_back(Event::Accepted { tag });
            }
        }
        if let Some(push) = opts.push.as_ref().filter(|p| p.matcher.matches(doc, frame)) {
            return self.pushed(push, doc, frame);
        }
        let signal = opts.signals.push.as_ref();
        if let Some(rule) = signal.filter(|r| r.matcher.matches(doc, frame)) {
            return self.pushed_signal(rule, doc, frame);
        }
        if opts
            .ping
            .as_ref()
            .is_some_and(|p| p.matcher.matches(doc, frame))
        {
            self.inbox.pongs_owed += 1;
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

    /// An error frame: the refusal of the send it answers, else a protocol error.
    fn refusal(&mut self, id: Option<u64>, reason: String) -> Event {
        match id.and_then(|id| self.inbox.take_ack(id)) {
            Some(tag) => Event::Refused {
                tag,
                failure: Failure::new(ErrorKind::SendFailed, reason),
            },
            None => Event::ProtocolError(Failure::new(
                ErrorKind::Protocol,
                format!("error frame: {reason}"),
            )),
        }
    }

    /// Marks the sequence number an ack gives as the user's own in its conversation.
    fn mark_acked(&mut self, ack: &AckRule, frame: &Frame<'_>) {
        let (Some(conv), Some(seq)) = (&ack.conv, &ack.seq) else {
            return;
        };
        if let Some(seq) = seq.u64(frame) {
            let cursors = &mut self.cursors;
            conv.with(frame, |v| {
                if let Some(c) = v.and_then(as_str) {
                    cursors.with(&c, |s| s.mark(seq));
                }
            });
        }
    }

    /// A pushed message: queued as delivered unless it is the user's own or one a sync
    /// already gave.
    fn pushed(&mut self, push: &PushRule, doc: &str, frame: &Frame<'_>) {
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
        self.ready.push_back(ev);
    }
}

impl Interpret for State {
    type Opts = Options;

    fn inbox(&mut self) -> &mut Inbox {
        &mut self.inbox
    }

    fn take_ready(&mut self) -> Option<Event> {
        self.ready.pop_front()
    }

    /// Each document of the frame (a held one is a document already, which splits into
    /// itself).
    fn interpret(&mut self, opts: &Options, frame: &str) {
        for doc in docs(frame, opts.lines) {
            self.interpret_doc(opts, doc);
        }
    }

    fn pong(&mut self, opts: &Options) -> Option<String> {
        let ping = opts.ping.as_ref()?;
        let vals = Values {
            user: &self.user,
            req_id: self.inbox.next_id(),
            ..Values::default()
        };
        Some(ping.reply.fill(&vals, now_ms()))
    }
}

/// The documents of a text frame: the frame (even empty: a ping of some protocols), or its
/// non-empty lines.
pub(super) fn docs(text: &str, lines: bool) -> impl Iterator<Item = &str> {
    let sep = if lines { '\n' } else { '\0' };
    // Without `lines` the frame is one document: a raw NUL cannot occur in JSON text, so
    // splitting on it yields the frame whole.
    text.split(sep)
        .filter(move |d| !lines || !d.trim().is_empty())
}

/// One user's connection.
#[derive(Debug)]
pub struct WsJsonSession {
    pub(super) ws: Ws,
    pub(super) opts: Arc<Options>,
    pub(super) st: State,
    /// Longest wait for the reply to a join or sync request.
    pub(super) reply_timeout: Duration,
}

impl WsJsonSession {
    /// Queues `template` filled with `vals`.
    pub(super) async fn write(
        &mut self,
        template: &Template,
        vals: &Values<'_>,
    ) -> Result<(), Failure> {
        let text = template.fill(vals, now_ms());
        self.ws.write(Message::text(text)).await
    }

    /// Sends `template` with a fresh `{req_id}` and returns the document that answers it;
    /// every other document meanwhile is kept unread. Bounded by the connect timeout.
    pub(super) async fn call(
        &mut self,
        template: &Template,
        vals: Values<'_>,
    ) -> Result<String, Failure> {
        let limit = self.reply_timeout;
        let id = self.st.inbox.next_id();
        let Some(reply_id) = self.opts.reply_id.clone() else {
            return Err(Failure::new(ErrorKind::Other, "no reply_id to wait on"));
        };
        let lines = self.opts.lines;
        let exchange = async {
            self.write(template, &Values { req_id: id, ..vals }).await?;
            self.ws.flush().await?;
            until_answer(&mut self.ws, &mut self.st.inbox, |text, inbox| {
                let mut reply = None;
                for doc in docs(text, lines) {
                    let ours = reply.is_none()
                        && path::parse(doc).is_ok_and(|root| reply_id.u64(root) == Some(id));
                    if ours {
                        reply = Some(doc.to_owned());
                    } else {
                        inbox.hold(doc.to_owned());
                    }
                }
                reply
            })
            .await
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
        let id = self.st.inbox.next_id();
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
            self.st.inbox.expect_ack(id, tag);
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
                let req_id = self.st.inbox.next_id();
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

    async fn contacts(&mut self, ids: &[&str]) -> Result<(), Failure> {
        self.send_contacts(ids).await
    }

    async fn signal(&mut self, tag: u64, signal: Signal<'_>, token: &str) -> Result<(), Failure> {
        self.send_signal(tag, signal, token).await
    }

    async fn skip_history(&mut self) -> Result<(), Failure> {
        self.note_history().await
    }

    async fn fetch_missed(&mut self, out: &mut Vec<String>) -> Result<(), Failure> {
        self.fetch(out).await
    }

    async fn next_event(&mut self) -> Event {
        exchange::next_event(&mut self.ws, &*self.opts, &mut self.st).await
    }

    fn arrived(&self) -> Option<std::time::Instant> {
        self.ws.arrived()
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

impl State {
    /// A pushed signal: its token is delivered unless it is empty (nobody's) or a stored
    /// receipt a fetch already gave.
    pub(super) fn pushed_signal(&mut self, rule: &SignalRule, doc: &str, frame: &Frame<'_>) {
        if let Some(seq) = rule.seq.as_ref().and_then(|p| p.u64(frame)) {
            if self.cursors.with(RECEIPTS, |s| s.push(seq)) == Push::Synced {
                return;
            }
        }
        match rule.token.with(frame, |v| v.map(text_of)) {
            Some(token) if token.is_empty() => {}
            Some(token) => self
                .ready
                .push_back(Event::Delivered { body: token.into() }),
            None => self.ready.push_back(Event::ProtocolError(Failure::new(
                ErrorKind::Protocol,
                format!("signal without a token at `{}`: {}", rule.token, clip(doc)),
            ))),
        }
    }
}
