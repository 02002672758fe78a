//! The `socketio` driver: Socket.IO v5 over Engine.IO v4, on the shared WebSocket
//! transport (`ws://` and `wss://`), with the app's chat events mapped in the scenario
//! (`[target.socketio]`, [`options`]; the guide is `docs/drivers/socketio.md`).
//!
//! | operation | Socket.IO |
//! |---|---|
//! | connect + login | WebSocket upgrade to `/socket.io/?EIO=4&transport=websocket`, Engine.IO open, `CONNECT` with the templated `auth` object; `CONNECT_ERROR` is `auth_failed` |
//! | send | an event (`dm` / `group` by default) with an ack id; the ack is the acceptance |
//! | join group | the `join` event, waiting for its ack |
//! | receive | the `message` event; the body at a JSON path of its first argument |
//! | heartbeat | the server pings (`2`), the driver answers (`3`); its own heartbeat is a WebSocket ping |
//! | fetch missed | connection state recovery: `pid` and `offset` in the reconnect's `auth`; the packets the server replays before `CONNECT` are the missed messages |
//! | close | the WebSocket closes without a namespace `DISCONNECT`, so the server keeps the session for recovery (with recovery off: `DISCONNECT` first) |
//!
//! The packet codec is this driver's own ([`packet`], why in its doc); templates and JSON
//! paths are `ws-json`'s.

pub mod options;
pub mod packet;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use serde_json::value::RawValue;
use tokio_tungstenite::tungstenite::Message;

use self::options::{Emit, Options, NAME};
use self::packet::{Kind, Packet, Sio};
use super::{
    Auth, AuthForm, Caps, Config, Connected, Dest, Event, Failure, OptionError, Session, Spec,
    UserCtx,
};
use crate::driver::kit::connect::within;
use crate::driver::kit::json_map::path::as_str;
use crate::driver::kit::json_map::template::Values;
use crate::driver::kit::json_map::{clip, credentials, now_ms, text_of};
use crate::driver::kit::ws::{read_text, Dialer, Ws};
use crate::metrics::ErrorKind;
use crate::scenario::TrafficKind;

/// The longest a user closing without an offset waits for one when the scenario names no
/// `welcome_event` (see [`SocketIoSession::await_offset`]).
const OFFSET_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// The Socket.IO driver.
#[derive(Debug, Clone)]
pub struct SocketIoDriver {
    /// One dialer per node of the app (`target.url`, then `urls`).
    dialers: Vec<Dialer>,
    opts: Arc<Options>,
    auth: Auth,
}

/// What a user keeps between connections for connection state recovery.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Recovery {
    /// The private session id of the last connection (`pid` of its `CONNECT`).
    pub pid: Option<String>,
    /// The offset of the last packet received.
    pub offset: Option<String>,
}

impl super::Driver for SocketIoDriver {
    const SPEC: Spec = Spec {
        name: NAME,
        schemes: crate::driver::kit::ws::SCHEMES,
        embedded_path: None,
        kinds: &[TrafficKind::Direct, TrafficKind::Group, TrafficKind::Idle],
        requests: &[],
        auth: &[AuthForm::Password],
        source_addresses: true,
        files: &[],
        caps: Caps {
            acceptance: true,
            presence: true,
            fetch_missed: true,
            filters_own_echoes: true,
            fetch_needs_receipt: true,
            group_history: None,
            skips_history: false,
        },
    };

    type Session = SocketIoSession;

    fn new(config: &Config) -> Result<Self, OptionError> {
        let opts = Options::parse(&config.options, &Self::SPEC)?;
        let mut dialers = Vec::new();
        for ep in config.endpoint.iter().chain(&opts.urls) {
            let mut ep = ep.clone();
            ep.path = opts.request_path(&ep);
            let node = Config {
                endpoint: Some(ep),
                ..config.clone()
            };
            dialers.push(Dialer::new(&node)?);
        }
        if dialers.is_empty() {
            // Validation before the endpoint is known: the transport's options still count.
            dialers.push(Dialer::new(config)?);
        }
        Ok(SocketIoDriver {
            dialers,
            opts: Arc::new(opts),
            auth: config.auth.clone(),
        })
    }

    fn caps(&self) -> Caps {
        Caps {
            acceptance: self.opts.ack,
            // A session is kept for recovery only once a user has connected.
            presence: self.opts.recovery,
            fetch_missed: self.opts.recovery,
            filters_own_echoes: self.opts.from.is_some(),
            // A session is only restored from the offset of a packet the user received;
            // an app that welcomes every new connection gives each user one.
            fetch_needs_receipt: self.opts.recovery && self.opts.welcome_event.is_none(),
            group_history: None,
            skips_history: false,
        }
    }

    async fn connect(
        &self,
        user: &UserCtx,
        resume: Recovery,
    ) -> Result<Connected<SocketIoSession>, (Failure, Recovery)> {
        let started = Instant::now();
        // A user that connected before but never received a packet has no offset: the
        // server cannot restore its session, and what it missed is gone.
        let no_resume_point = self.opts.recovery && resume.pid.is_some() && resume.offset.is_none();
        let (dialer, ws) = match self.dial(user.ix).await {
            Ok(found) => found,
            Err(f) => return Err((f, resume)),
        };
        let handshake = started.elapsed();
        let mut session = SocketIoSession {
            ws,
            opts: Arc::clone(&self.opts),
            st: State {
                user: user.id.clone(),
                nsp: self.opts.namespace.clone(),
                next_id: 0,
                pending: VecDeque::new(),
                unread: VecDeque::new(),
                ready: VecDeque::new(),
                missed: Vec::new(),
                recovery: resume,
                pongs_owed: 0,
            },
            reply_timeout: dialer.timeout(),
        };
        let auth = self.auth_object(user, &session.st.recovery);
        match within(dialer.timeout(), "Socket.IO CONNECT", session.login(&auth)).await {
            Ok(()) => Ok(Connected {
                session,
                handshake,
                login: started.elapsed() - handshake,
                account: None,
                no_resume_point,
            }),
            Err(f) => Err((f, session.st.recovery)),
        }
    }
}

impl SocketIoDriver {
    /// Connects user `ix` to its node (`ix` modulo the nodes); when that node refuses the
    /// connection (it is down), to the next ones in turn, as a load balancer would.
    async fn dial(&self, ix: u32) -> Result<(&Dialer, Ws), Failure> {
        let n = self.dialers.len();
        let mut first = None;
        for k in 0..n {
            let dialer = &self.dialers[(ix as usize + k) % n];
            match dialer.dial(ix).await {
                Ok(ws) => return Ok((dialer, ws)),
                Err(f) if f.kind == ErrorKind::ConnectRefused => {
                    first.get_or_insert(f);
                }
                Err(f) => return Err(first.unwrap_or(f)),
            }
        }
        Err(first.unwrap_or_else(|| Failure::new(ErrorKind::Other, "no target URL")))
    }

    /// The connect packet's `auth` object for `user`, with `pid` and `offset` when the
    /// connection is to be recovered.
    fn auth_object(&self, user: &UserCtx, rec: &Recovery) -> String {
        let (username, password) = credentials(&self.auth, &user.id);
        let vals = Values {
            user: &user.id,
            token: &password,
            username: &username,
            password: &password,
            ..Values::default()
        };
        let auth = self.opts.auth.fill(&vals, now_ms());
        let (Some(pid), Some(offset), true) = (&rec.pid, &rec.offset, self.opts.recovery) else {
            return auth;
        };
        // Checked to be an object when the options were read.
        let inner = auth.trim_start().trim_start_matches('{');
        let sep = if inner.trim_start().starts_with('}') {
            ""
        } else {
            ","
        };
        format!(
            "{{\"pid\":{},\"offset\":{}{sep}{inner}",
            serde_json::Value::from(pid.as_str()),
            serde_json::Value::from(offset.as_str())
        )
    }
}

/// What a session keeps besides its socket.
#[derive(Debug)]
struct State {
    user: String,
    nsp: String,
    next_id: u64,
    /// Sends waiting for their ack: (ack id, tag), oldest first.
    pending: VecDeque<(u64, u64)>,
    /// Frames read while waiting for a reply, not judged yet.
    unread: VecDeque<String>,
    /// Events judged and not handed out yet, each with the offset it carried: the offset
    /// counts as received only once the event is handed out, so a connection closed with
    /// events still here gets them replayed.
    ready: VecDeque<(Option<Event>, Option<String>)>,
    /// Bodies the server replayed on recovery, for [`Session::fetch_missed`].
    missed: Vec<String>,
    recovery: Recovery,
    /// Server pings not answered yet.
    pongs_owed: u32,
}

/// A Socket.IO event's arguments, the offset (when recovery is on) taken off the end.
fn event_args(data: &str, recovery: bool) -> Result<(Vec<&RawValue>, Option<String>), String> {
    let mut args: Vec<&RawValue> =
        serde_json::from_str(data).map_err(|e| format!("unreadable event ({e})"))?;
    if args.is_empty() {
        return Err("an event without a name".to_owned());
    }
    let mut offset = None;
    if recovery && args.len() > 1 {
        if let Some(o) = args.last().and_then(|v| as_str(v)) {
            offset = Some(o.into_owned());
            args.pop();
        }
    }
    Ok((args, offset))
}

impl State {
    fn next_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    fn protocol(&mut self, what: impl Into<String>) {
        self.push(Event::ProtocolError(Failure::new(
            ErrorKind::Protocol,
            what.into(),
        )));
    }

    /// Queues `ev`.
    fn push(&mut self, ev: Event) {
        self.ready.push_back((Some(ev), None));
    }

    /// The body an event delivers (when it is the message event and not the user's own),
    /// and the offset it carries.
    fn message(
        &self,
        opts: &Options,
        data: &str,
    ) -> Result<(Option<String>, Option<String>), String> {
        let (args, offset) = event_args(data, opts.recovery)?;
        if as_str(args[0]).as_deref() != Some(opts.message_event.as_str()) {
            return Ok((None, offset));
        }
        let Some(payload) = args.get(1) else {
            return Err(format!("`{}` without an argument", opts.message_event));
        };
        let own = opts.from.as_ref().is_some_and(|p| {
            p.with(*payload, |v| {
                v.and_then(as_str).is_some_and(|f| f == self.user)
            })
        });
        if own {
            return Ok((None, offset));
        }
        match &opts.body {
            None => Ok((Some(text_of(payload)), offset)),
            Some(p) => p
                .with(*payload, |v| v.map(text_of))
                .map(|body| (Some(body), offset))
                .ok_or_else(|| format!("`{}` without a body at `{p}`", opts.message_event)),
        }
    }

    /// Judges one frame: queues the event it is (if any).
    fn judge(&mut self, opts: &Options, text: &str) {
        let sio = match packet::decode(text) {
            Ok(Packet::Message(s)) => s,
            Ok(Packet::Ping) => {
                self.pongs_owed += 1;
                return;
            }
            Ok(Packet::Pong | Packet::Noop) => return,
            Ok(Packet::Close) => {
                return self.push(Event::Closed(Failure::new(
                    ErrorKind::ClosedByPeer,
                    "the server closed the Engine.IO session",
                )))
            }
            Ok(Packet::Open(_)) => return self.protocol(format!("a second open: {}", clip(text))),
            Err(e) => return self.protocol(format!("{e}: {}", clip(text))),
        };
        if sio.nsp != self.nsp {
            return;
        }
        match sio.kind {
            Kind::Event => match self.message(opts, sio.data) {
                Ok((body, offset)) => self.ready.push_back((
                    body.map(|body| Event::Delivered { body: body.into() }),
                    offset,
                )),
                Err(e) => self.protocol(format!("{e}: {}", clip(text))),
            },
            Kind::Ack => {
                let tag = sio.id.and_then(|id| {
                    let i = self.pending.iter().position(|(r, _)| *r == id)?;
                    self.pending.remove(i).map(|(_, tag)| tag)
                });
                if let Some(tag) = tag {
                    self.push(Event::Accepted { tag });
                }
            }
            Kind::Disconnect => self.push(Event::Closed(Failure::new(
                ErrorKind::ClosedByPeer,
                format!("the server disconnected namespace {}", self.nsp),
            ))),
            Kind::ConnectError => self.protocol(format!("connect error: {}", clip(sio.data))),
            Kind::Connect => {}
        }
    }
}

/// One user's connection.
#[derive(Debug)]
pub struct SocketIoSession {
    ws: Ws,
    opts: Arc<Options>,
    st: State,
    /// Longest wait for a join's ack.
    reply_timeout: std::time::Duration,
}

impl SocketIoSession {
    /// Engine.IO open, then `CONNECT` with `auth` until the server answers it. Events
    /// before the answer are the recovered session's missed packets when the server
    /// recovered it (same `pid`), ordinary pushes otherwise.
    async fn login(&mut self, auth: &str) -> Result<(), Failure> {
        let text = read_text(&mut self.ws).await?;
        if !matches!(packet::decode(&text), Ok(Packet::Open(_))) {
            return Err(Failure::new(
                ErrorKind::Protocol,
                format!("expected the Engine.IO open packet, got {}", clip(&text)),
            ));
        }
        let mut connect = String::with_capacity(auth.len() + 16);
        packet::head(Kind::Connect, &self.st.nsp, None, &mut connect);
        connect.push_str(auth);
        self.ws.write(Message::text(connect)).await?;
        self.ws.flush().await?;
        let mut early = Vec::new();
        let data = loop {
            let text = read_text(&mut self.ws).await?;
            match packet::decode(&text) {
                Ok(Packet::Ping) => {
                    self.ws.write(Message::text("3")).await?;
                    self.ws.flush().await?;
                }
                Ok(Packet::Message(Sio {
                    kind: Kind::Connect,
                    nsp,
                    data,
                    ..
                })) if nsp == self.st.nsp => break data.to_owned(),
                Ok(Packet::Message(Sio {
                    kind: Kind::ConnectError,
                    nsp,
                    data,
                    ..
                })) if nsp == self.st.nsp => {
                    let why = serde_json::from_str::<serde_json::Value>(data)
                        .ok()
                        .and_then(|v| v.get("message").and_then(|m| m.as_str()).map(str::to_owned))
                        .unwrap_or_else(|| clip(data).to_owned());
                    return Err(Failure::new(
                        ErrorKind::AuthFailed,
                        format!("connect refused: {why}"),
                    ));
                }
                Ok(Packet::Close) => {
                    return Err(Failure::new(
                        ErrorKind::ClosedByPeer,
                        "the server closed the session before CONNECT",
                    ))
                }
                _ => early.push(text.to_string()),
            }
        };
        let pid = serde_json::from_str::<serde_json::Value>(&data)
            .ok()
            .and_then(|v| v.get("pid").and_then(|p| p.as_str()).map(str::to_owned));
        let recovered = pid.is_some() && pid == self.st.recovery.pid;
        if !recovered {
            self.st.recovery = Recovery { pid, offset: None };
        }
        for text in early {
            if !recovered {
                self.st.unread.push_back(text);
                continue;
            }
            // A replayed packet: an event in this namespace; anything else is judged later.
            match packet::decode(&text) {
                Ok(Packet::Message(s)) if s.kind == Kind::Event && s.nsp == self.st.nsp => {
                    match self.st.message(&self.opts, s.data) {
                        Ok((body, offset)) => {
                            self.st.missed.extend(body);
                            if offset.is_some() {
                                self.st.recovery.offset = offset;
                            }
                        }
                        Err(e) => self.st.protocol(format!("{e}: {}", clip(&text))),
                    }
                }
                _ => self.st.unread.push_back(text),
            }
        }
        Ok(())
    }

    /// Waits for a first offset, so that a user closing right after its first connect (a
    /// late user's presence) can be recovered: a session is only restored from an offset.
    /// With a `welcome_event` it waits for that event (up to the reply timeout), recording
    /// the offsets of other events on the way; without one, at most [`OFFSET_WAIT`] for any
    /// event with an offset. Stops at a message event, whose offset would skip it.
    async fn await_offset(&mut self) {
        let welcome = self.opts.welcome_event.clone();
        let limit = match welcome {
            Some(_) => self.reply_timeout,
            None => OFFSET_WAIT,
        };
        let wait = async {
            loop {
                let Ok(text) = read_text(&mut self.ws).await else {
                    return;
                };
                let Ok(Packet::Message(s)) = packet::decode(&text) else {
                    continue;
                };
                if s.kind != Kind::Event || s.nsp != self.st.nsp {
                    continue;
                }
                let Ok((args, offset)) = event_args(s.data, true) else {
                    continue;
                };
                let name = as_str(args[0]);
                if name.as_deref() == Some(self.opts.message_event.as_str()) {
                    return;
                }
                if offset.is_some() {
                    self.st.recovery.offset = offset;
                }
                let done = match &welcome {
                    Some(w) => name.as_deref() == Some(w.as_str()),
                    None => self.st.recovery.offset.is_some(),
                };
                if done {
                    return;
                }
            }
        };
        let _ = tokio::time::timeout(limit, wait).await;
    }

    /// Queues the event `emit` with `vals`, asking for an ack when acks are on; returns
    /// the ack id.
    async fn emit(&mut self, emit: &Emit, vals: &Values<'_>) -> Result<Option<u64>, Failure> {
        let id = self.opts.ack.then(|| self.st.next_id());
        let mut text = String::with_capacity(emit.open.len() + vals.body.len() + 64);
        packet::head(Kind::Event, &self.st.nsp, id, &mut text);
        text.push_str(&emit.open);
        emit.payload.render(vals, now_ms(), &mut text);
        text.push(']');
        self.ws.write(Message::text(text)).await?;
        Ok(id)
    }
}

impl Session for SocketIoSession {
    type Resume = Recovery;

    async fn send(&mut self, tag: u64, dest: Dest<'_>, body: &str) -> Result<(), Failure> {
        let opts = Arc::clone(&self.opts);
        let (emit, to) = match dest {
            Dest::User(u) => (&opts.direct, u),
            Dest::Group(g) => (&opts.group, g),
        };
        let vals = Values {
            user: &self.st.user.clone(),
            to,
            body,
            ..Values::default()
        };
        if let Some(id) = self.emit(emit, &vals).await? {
            self.st.pending.push_back((id, tag));
        }
        Ok(())
    }

    async fn request(&mut self, _tag: u64, name: &'static str) -> Result<(), Failure> {
        Err(Failure::new(
            ErrorKind::RequestFailed,
            format!("driver `{NAME}` sends no request `{name}`"),
        ))
    }

    async fn heartbeat(&mut self) -> Result<(), Failure> {
        self.ws.write(Message::Ping(Default::default())).await
    }

    async fn flush(&mut self) -> Result<(), Failure> {
        self.ws.flush().await
    }

    async fn join(&mut self, group: &str) -> Result<(), Failure> {
        let opts = Arc::clone(&self.opts);
        let user = self.st.user.clone();
        let vals = Values {
            user: &user,
            group,
            ..Values::default()
        };
        let id = self.emit(&opts.join, &vals).await?;
        self.ws.flush().await?;
        let Some(id) = id else {
            return Ok(());
        };
        let limit = self.reply_timeout;
        let nsp = self.st.nsp.clone();
        let wait = async {
            loop {
                let text = read_text(&mut self.ws).await?;
                let ours = matches!(
                    packet::decode(&text),
                    Ok(Packet::Message(Sio { kind: Kind::Ack, id: Some(got), nsp: n, .. }))
                        if got == id && n == nsp
                );
                if ours {
                    return Ok(());
                }
                self.st.unread.push_back(text.to_string());
            }
        };
        match tokio::time::timeout(limit, wait).await {
            Ok(r) => r,
            Err(_) => Err(Failure::new(
                ErrorKind::JoinFailed,
                format!("no ack of joining {group} within {limit:?}"),
            )),
        }
    }

    async fn fetch_missed(&mut self, out: &mut Vec<String>) -> Result<(), Failure> {
        out.append(&mut self.st.missed);
        Ok(())
    }

    async fn next_event(&mut self) -> Event {
        loop {
            if let Some((ev, offset)) = self.st.ready.pop_front() {
                if offset.is_some() {
                    self.st.recovery.offset = offset;
                }
                match ev {
                    Some(ev) => return ev,
                    None => continue,
                }
            }
            if let Some(text) = self.st.unread.pop_front() {
                self.st.judge(&self.opts, &text);
                continue;
            }
            if self.st.pongs_owed > 0 {
                self.st.pongs_owed -= 1;
                if let Err(f) = self.ws.write(Message::text("3")).await {
                    return Event::Closed(f);
                }
                if let Err(f) = self.ws.flush().await {
                    return Event::Closed(f);
                }
                continue;
            }
            match read_text(&mut self.ws).await {
                Ok(text) => self.st.judge(&self.opts, &text),
                Err(e) => return e.event(),
            }
        }
    }

    async fn close(mut self) -> Recovery {
        // Offsets judged but not handed out count up to the first delivery not handed out.
        while let Some((ev, offset)) = self.st.ready.pop_front() {
            if matches!(ev, Some(Event::Delivered { .. })) {
                break;
            }
            if offset.is_some() {
                self.st.recovery.offset = offset;
            }
        }
        if self.opts.recovery && self.st.recovery.offset.is_none() && self.st.unread.is_empty() {
            self.await_offset().await;
        }
        if !self.opts.recovery {
            let mut text = String::new();
            packet::head(Kind::Disconnect, &self.st.nsp, None, &mut text);
            if self.ws.write(Message::text(text)).await.is_ok() {
                let _ = self.ws.flush().await;
            }
        }
        self.ws.close().await;
        self.st.recovery
    }

    fn into_resume(self) -> Recovery {
        self.st.recovery
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> State {
        State {
            user: "me".to_owned(),
            nsp: "/".to_owned(),
            next_id: 0,
            pending: VecDeque::from([(7, 70)]),
            unread: VecDeque::new(),
            ready: VecDeque::new(),
            missed: Vec::new(),
            recovery: Recovery::default(),
            pongs_owed: 0,
        }
    }

    fn judged(st: &mut State, text: &str) -> Option<String> {
        let opts = Options::parse(
            &toml::Table::new(),
            &<SocketIoDriver as super::super::Driver>::SPEC,
        )
        .expect("defaults");
        st.judge(&opts, text);
        while let Some((ev, offset)) = st.ready.pop_front() {
            if offset.is_some() {
                st.recovery.offset = offset;
            }
            if let Some(ev) = ev {
                return Some(format!("{ev:?}"));
            }
        }
        None
    }

    #[test]
    fn packets_become_events() {
        let mut st = state();
        assert_eq!(
            judged(&mut st, "43/x,7[]"),
            None,
            "other namespaces are not ours"
        );
        assert_eq!(
            judged(&mut st, r#"437[{"ok":true}]"#).as_deref(),
            Some("Accepted { tag: 70 }")
        );
        assert_eq!(
            judged(&mut st, r#"42["message",{"from":"a","body":"hi"},"17-0"]"#).as_deref(),
            Some(r#"Delivered { body: "hi" }"#)
        );
        assert_eq!(st.recovery.offset.as_deref(), Some("17-0"));
        assert_eq!(
            judged(&mut st, r#"42["message",{"from":"me","body":"x"},"18-0"]"#),
            None
        );
        assert_eq!(st.recovery.offset.as_deref(), Some("18-0"));
        assert_eq!(judged(&mut st, r#"42["welcome","19-0"]"#), None);
        assert_eq!(st.recovery.offset.as_deref(), Some("19-0"));
        assert_eq!(judged(&mut st, "2"), None);
        assert_eq!(st.pongs_owed, 1);
        for bad in [
            "",
            "x",
            "42[",
            "42[]",
            r#"42["message"]"#,
            r#"42["message",{"nobody":1}]"#,
            "45-[]",
        ] {
            let ev = judged(&mut st, bad).unwrap_or_else(|| panic!("{bad:?} gave nothing"));
            assert!(ev.starts_with("ProtocolError"), "{bad:?}: {ev}");
        }
        let ev = judged(&mut st, "41").expect("closed");
        assert!(ev.starts_with("Closed"), "{ev}");
    }
}
