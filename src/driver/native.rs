//! The `native` driver: the reference server's JSON-over-WebSocket protocol ([`crate::wire`]).
//!
//! Fetching missed messages lists the user's conversations and pages through each one after
//! the sequence number up to which this user has everything ([`Cursors`]); a login before
//! traffic notes where each conversation stands, so a reused server's earlier messages are
//! never fetched ([`Session::skip_history`]). The transport (cheap upgrade, coalesced
//! writes, reading while a write waits) is [`crate::driver::kit::ws`].
//!
//! Sync and pushes merge as a real client merges them, per conversation by sequence number
//! ([`Cursors`]):
//! - Frames that arrive while the driver waits for one of its own replies (a join, a sync
//!   page) are kept as they came, unread, and judged only when the engine takes them
//!   ([`Session::next_event`]), after the sync that overlapped them. So a push that a sync
//!   also returned is handed out once (the sync's copy), and the engine sees each
//!   conversation in sequence order: the sync's messages first, then the pushes above them.
//! - A push above the highest sequence number pushed so far in its conversation is new
//!   unless a sync already returned it (the same message both ways: dropped).
//! - A push at or below that mark was pushed before, or overtaken by a later push: it is
//!   passed on as it is, so the ledger counts a server that sends a message twice as
//!   duplicated and a server that pushes out of order as reordered. (One case cannot be told
//!   apart: a push the server held back behind a later one, of a message a sync already
//!   returned, counts as duplicated.)

use std::borrow::Cow;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};

use super::{
    Auth, AuthForm, Body, Caps, Config, Connected, Dest, Event, Failure, OptionError, Session,
    Spec, UserCtx,
};
use crate::driver::kit::connect::within;
use crate::driver::kit::cursors::{Cursors, Push};
use crate::driver::kit::json_map::clip;
use crate::driver::kit::ws::{read_text, Dialer, Ws};
use crate::metrics::ErrorKind;
use crate::scenario::TrafficKind;
use crate::wire::{self, ClientFrame, ErrorCode, ServerFrame};

/// Requests the driver makes for itself (join, sync) use refs with this bit set, so they
/// never collide with the engine's tags.
const INTERNAL_REF: u64 = 1 << 63;
/// Messages per sync page.
const SYNC_PAGE: u32 = 500;

/// The native protocol driver.
#[derive(Debug, Clone)]
pub struct NativeDriver {
    dialer: Dialer,
    secret: Option<String>,
}

/// The request the `time` request pattern sends: the server's clock, cheap.
const REQUEST_TIME: &str = "time";
/// The request the `kv_get` request pattern sends: a lookup through the server's worker
/// pool and simulated backend.
const REQUEST_KV_GET: &str = "kv_get";

impl super::Driver for NativeDriver {
    const SPEC: Spec = Spec {
        name: "native",
        schemes: crate::driver::kit::ws::SCHEMES,
        embedded_path: Some("/ws"),
        kinds: &[
            TrafficKind::Direct,
            TrafficKind::Group,
            TrafficKind::Idle,
            TrafficKind::Request,
        ],
        requests: &[REQUEST_TIME, REQUEST_KV_GET],
        auth: &[AuthForm::Secret],
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

    type Session = NativeSession;

    fn new(config: &Config) -> Result<Self, OptionError> {
        crate::driver::kit::ws::only_tls_options(config)?;
        let secret = match &config.auth {
            Auth::Secret(s) => Some(s.clone()),
            Auth::None | Auth::Password { .. } => None,
        };
        Ok(NativeDriver {
            dialer: Dialer::new(config)?,
            secret,
        })
    }

    async fn connect(
        &self,
        user: &UserCtx,
        resume: Cursors,
    ) -> Result<Connected<NativeSession>, (Failure, Cursors)> {
        let started = Instant::now();
        let ws = match self.dialer.dial(user.ix).await {
            Ok(ws) => ws,
            Err(f) => return Err((f, resume)),
        };
        let handshake = started.elapsed();
        let mut session = NativeSession {
            ws,
            user: user.id.as_str().into(),
            unread: VecDeque::new(),
            cursors: resume,
            next_ref: 0,
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
            Err(f) => Err((f, session.cursors)),
        }
    }
}

impl NativeDriver {
    async fn login(&self, session: &mut NativeSession, user: &UserCtx) -> Result<(), Failure> {
        {
            let token = match &self.secret {
                Some(secret) => wire::token(&user.id, secret),
                None => String::new(),
            };
            session
                .write(&ClientFrame::Login {
                    v: wire::PROTOCOL_VERSION,
                    user: user.id.clone(),
                    token,
                })
                .await?;
            session.flush_ws().await?;
            match session.read_frame().await? {
                ServerFrame::Welcome { .. } => Ok(()),
                ServerFrame::Error { code, message, .. } => Err(Failure::new(
                    match code {
                        ErrorCode::BadToken => ErrorKind::AuthFailed,
                        ErrorCode::TooManyConnections => ErrorKind::ServerFull,
                        _ => ErrorKind::Protocol,
                    },
                    format!("login refused: {}: {message}", code.as_str()),
                )),
                other => Err(Failure::new(
                    ErrorKind::Protocol,
                    format!("expected welcome, got {}", clip(&format!("{other:?}"))),
                )),
            }
        }
    }
}

/// One user's connection to the reference server.
#[derive(Debug)]
pub struct NativeSession {
    ws: Ws,
    /// This user's id (a boxed str: a word less than a `String` in every idle user).
    user: Box<str>,
    /// Frames that arrived while waiting for a reply (join, sync), not judged yet: a push
    /// among them is compared with what the sync returned only when the engine takes it.
    unread: VecDeque<ServerFrame>,
    cursors: Cursors,
    next_ref: u64,
    /// Longest wait for the reply to a join or sync request.
    reply_timeout: Duration,
}

impl NativeSession {
    async fn write(&mut self, frame: &(impl serde::Serialize + Sync)) -> Result<(), Failure> {
        let text = serde_json::to_string(frame)
            .map_err(|e| Failure::new(ErrorKind::Other, format!("cannot encode frame: {e}")))?;
        self.ws.write(Message::text(text)).await
    }

    async fn flush_ws(&mut self) -> Result<(), Failure> {
        self.ws.flush().await
    }

    /// Reads the next protocol frame, skipping WebSocket control frames.
    async fn read_frame(&mut self) -> Result<ServerFrame, Failure> {
        let text = read_text(&mut self.ws).await?;
        parse(&text)
    }

    /// The engine event of one frame's text, if it is one: pushes and acks are read in
    /// place ([`wire::Hot`]), a push's body handed on as a part of the frame; anything
    /// else is read as an owned frame.
    fn event_of_text(&mut self, text: &Utf8Bytes) -> Option<Event> {
        match wire::Hot::parse(text) {
            Some(Ok(wire::Hot::Msg(m))) => {
                let body = || match m.body {
                    Cow::Borrowed(part) => Body::within(text, part),
                    Cow::Owned(body) => Body::from(body),
                };
                self.pushed(&m.conv, m.seq, &m.from, body)
            }
            Some(Ok(wire::Hot::Ack(a))) => Some(self.acked(a.r#ref, &a.conv, a.seq)),
            Some(Err(e)) => Some(Event::ProtocolError(unreadable(&e, text))),
            None => match parse(text) {
                Ok(frame) => self.event_of(frame),
                Err(f) => Some(Event::ProtocolError(f)),
            },
        }
    }

    /// The server committed the send `tag` as `seq` of `conv`.
    fn acked(&mut self, tag: u64, conv: &str, seq: u64) -> Event {
        self.cursors.with(conv, |s| s.mark(seq));
        Event::Accepted { tag }
    }

    /// A push of `seq` in `conv` from `from`: a delivery unless a sync returned it already
    /// or it is the user's own message.
    fn pushed(
        &mut self,
        conv: &str,
        seq: u64,
        from: &str,
        body: impl FnOnce() -> Body,
    ) -> Option<Event> {
        let push = self.cursors.with(conv, |s| s.push(seq));
        if push == Push::Synced || from == &*self.user {
            return None;
        }
        Some(Event::Delivered { body: body() })
    }

    /// Turns a frame into an engine event, or `None` when it is not one (control replies).
    fn event_of(&mut self, frame: ServerFrame) -> Option<Event> {
        match frame {
            ServerFrame::Ack {
                r#ref, conv, seq, ..
            } => Some(self.acked(r#ref, &conv, seq)),
            ServerFrame::Msg(msg) => self.pushed(&msg.conv, msg.seq, &msg.from, || msg.body.into()),
            ServerFrame::TimeReply { r#ref, .. } | ServerFrame::KvValue { r#ref, .. } => {
                Some(Event::Reply { tag: r#ref })
            }
            ServerFrame::Error {
                r#ref: Some(r),
                code,
                message,
                ..
            } if r & INTERNAL_REF == 0 => Some(Event::Refused {
                tag: r,
                failure: Failure::new(
                    ErrorKind::SendFailed,
                    format!("{}: {message}", code.as_str()),
                ),
            }),
            ServerFrame::Error {
                r#ref: None,
                code,
                message,
                fatal,
            } => {
                let failure = Failure::new(
                    match code {
                        ErrorCode::SlowConsumer => ErrorKind::SlowConsumer,
                        ErrorCode::IdleTimeout => ErrorKind::Timeout,
                        ErrorCode::ShuttingDown => ErrorKind::ClosedByPeer,
                        _ => ErrorKind::Protocol,
                    },
                    format!("{}: {message}", code.as_str()),
                );
                Some(if fatal {
                    Event::Closed(failure)
                } else {
                    Event::ProtocolError(failure)
                })
            }
            _ => None,
        }
    }

    /// The user's conversations and their latest sequence numbers (`convs`).
    async fn conversations(&mut self) -> Result<Vec<wire::ConvInfo>, Failure> {
        let r = self.internal_ref();
        match self.call(ClientFrame::Convs { r#ref: r }, r).await? {
            ServerFrame::ConvList { convs, .. } => Ok(convs),
            other => Err(unexpected("convs", &other)),
        }
    }

    fn internal_ref(&mut self) -> u64 {
        self.next_ref += 1;
        INTERNAL_REF | self.next_ref
    }

    /// Sends an internal request and waits for the reply with that ref; every other frame
    /// meanwhile is kept unread, as it came.
    /// Bounded by the connect timeout: a server that stops answering fails the call
    /// instead of stalling the user.
    async fn call(&mut self, frame: ClientFrame, r: u64) -> Result<ServerFrame, Failure> {
        let limit = self.reply_timeout;
        let exchange = async {
            self.write(&frame).await?;
            self.flush_ws().await?;
            loop {
                let reply = self.read_frame().await?;
                if reply_ref(&reply) == Some(r) {
                    return Ok(reply);
                }
                self.unread.push_back(reply);
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

/// The `ref` a server frame answers, if any.
fn reply_ref(frame: &ServerFrame) -> Option<u64> {
    match frame {
        ServerFrame::Ok { r#ref }
        | ServerFrame::ConvList { r#ref, .. }
        | ServerFrame::SyncPage { r#ref, .. } => Some(*r#ref),
        ServerFrame::Error { r#ref, .. } => *r#ref,
        _ => None,
    }
}

/// Reads a frame that is not one of the [`wire::Hot`] ones.
fn parse(text: &str) -> Result<ServerFrame, Failure> {
    serde_json::from_str(text).map_err(|e| unreadable(&e, text))
}

fn unreadable(e: &serde_json::Error, text: &str) -> Failure {
    Failure::new(
        ErrorKind::Protocol,
        format!("unreadable frame ({e}): {}", clip(text)),
    )
}

fn unexpected(what: &str, frame: &ServerFrame) -> Failure {
    Failure::new(
        ErrorKind::Protocol,
        format!("{what}: unexpected reply {}", clip(&format!("{frame:?}"))),
    )
}

impl Session for NativeSession {
    type Resume = Cursors;

    async fn send(&mut self, tag: u64, dest: Dest<'_>, body: &str) -> Result<(), Failure> {
        let to = match dest {
            Dest::User(u) => wire::DestRef::User(u),
            Dest::Group(g) => wire::DestRef::Group(g),
        };
        self.write(&wire::SendRef {
            r#ref: tag,
            to,
            body,
        })
        .await
    }

    async fn request(&mut self, tag: u64, name: &'static str) -> Result<(), Failure> {
        let frame = match name {
            REQUEST_TIME => ClientFrame::Time { r#ref: tag },
            REQUEST_KV_GET => ClientFrame::KvGet {
                r#ref: tag,
                key: format!("k{}", tag % 1024),
            },
            other => {
                return Err(Failure::new(
                    ErrorKind::RequestFailed,
                    format!("the native protocol has no request `{other}`"),
                ))
            }
        };
        self.write(&frame).await
    }

    async fn heartbeat(&mut self) -> Result<(), Failure> {
        self.write(&ClientFrame::Ping { ts: 0 }).await
    }

    async fn flush(&mut self) -> Result<(), Failure> {
        self.flush_ws().await
    }

    async fn join(&mut self, group: &str) -> Result<(), Failure> {
        let r = self.internal_ref();
        let create = ClientFrame::GroupCreate {
            r#ref: r,
            group: group.to_owned(),
        };
        match self.call(create, r).await? {
            ServerFrame::Ok { .. } => return Ok(()),
            ServerFrame::Error {
                code: ErrorCode::GroupExists,
                ..
            } => {}
            other => return Err(unexpected("group_create", &other)),
        }
        let r = self.internal_ref();
        let join = ClientFrame::GroupJoin {
            r#ref: r,
            group: group.to_owned(),
        };
        match self.call(join, r).await? {
            ServerFrame::Ok { .. } => Ok(()),
            other => Err(unexpected("group_join", &other)),
        }
    }

    async fn skip_history(&mut self) -> Result<(), Failure> {
        for info in self.conversations().await? {
            self.cursors.with(&info.conv, |s| s.cover(info.last_seq));
        }
        Ok(())
    }

    async fn fetch_missed(&mut self, out: &mut Vec<String>) -> Result<(), Failure> {
        for info in self.conversations().await? {
            let mut after = self.cursors.upto(&info.conv);
            while after < info.last_seq {
                let r = self.internal_ref();
                let req = ClientFrame::Sync {
                    r#ref: r,
                    conv: info.conv.clone(),
                    after,
                    limit: SYNC_PAGE,
                };
                let (msgs, more) = match self.call(req, r).await? {
                    ServerFrame::SyncPage { msgs, more, .. } => (msgs, more),
                    other => return Err(unexpected("sync", &other)),
                };
                let Some(last) = msgs.last().map(|m| m.seq) else {
                    break;
                };
                for msg in msgs {
                    if self.cursors.with(&msg.conv, |s| s.mark(msg.seq)) && *msg.from != *self.user
                    {
                        out.push(msg.body);
                    }
                }
                self.cursors.with(&info.conv, |s| s.cover(last));
                after = last;
                if !more {
                    break;
                }
            }
        }
        Ok(())
    }

    async fn next_event(&mut self) -> Event {
        while let Some(frame) = self.unread.pop_front() {
            if let Some(ev) = self.event_of(frame) {
                return ev;
            }
        }
        loop {
            match read_text(&mut self.ws).await {
                Ok(text) => {
                    if let Some(ev) = self.event_of_text(&text) {
                        return ev;
                    }
                }
                Err(e) => return e.event(),
            }
        }
    }

    async fn close(self) -> Cursors {
        self.ws.close().await;
        self.cursors
    }

    fn into_resume(self) -> Cursors {
        self.cursors
    }
}

#[cfg(test)]
mod tests {
    use futures_util::{SinkExt, StreamExt};
    use tokio::net::TcpListener;

    use super::*;
    use crate::driver::{Driver, Endpoint};
    use crate::wire::{ConvInfo, Msg};

    fn msg(seq: u64) -> ServerFrame {
        ServerFrame::Msg(Msg {
            conv: "c".to_owned(),
            seq,
            from: "peer".to_owned(),
            body: format!("m{seq}"),
            ts: 0,
        })
    }

    /// Issue 10: pushes that arrive while a sync is under way and a sync page that also
    /// holds them give every message once, in sequence order, while a push the server
    /// really sends twice still comes out twice. A scripted server pushes seq 1–3 before
    /// answering `convs`, returns 1–4 in the sync page, then pushes 4 twice.
    #[tokio::test]
    async fn sync_and_pushes_racing_give_each_message_once_in_order() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let server = tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.expect("accept");
            let mut ws = tokio_tungstenite::accept_async(tcp).await.expect("upgrade");
            let send = |f: &ServerFrame| Message::text(serde_json::to_string(f).expect("json"));
            while let Some(Ok(Message::Text(text))) = ws.next().await {
                let frame: ClientFrame = serde_json::from_str(text.as_str()).expect("frame");
                let replies = match frame {
                    ClientFrame::Login { user, .. } => vec![ServerFrame::Welcome {
                        v: wire::PROTOCOL_VERSION,
                        user,
                        ts: 0,
                    }],
                    ClientFrame::Convs { r#ref } => vec![
                        msg(1),
                        msg(2),
                        msg(3),
                        ServerFrame::ConvList {
                            r#ref,
                            convs: vec![ConvInfo {
                                conv: "c".to_owned(),
                                last_seq: 4,
                            }],
                        },
                    ],
                    ClientFrame::Sync { r#ref, .. } => {
                        let page = ServerFrame::SyncPage {
                            r#ref,
                            conv: "c".to_owned(),
                            msgs: (1..=4)
                                .map(|i| match msg(i) {
                                    ServerFrame::Msg(m) => m,
                                    _ => unreachable!(),
                                })
                                .collect(),
                            more: false,
                        };
                        vec![page, msg(4), msg(4), msg(5)]
                    }
                    _ => vec![],
                };
                for r in &replies {
                    ws.send(send(r)).await.expect("send");
                }
            }
        });
        let spec = &<NativeDriver as Driver>::SPEC;
        let config = Config {
            spec,
            endpoint: Some(Endpoint::parse(&format!("ws://{addr}/ws"), spec).expect("url")),
            auth: Auth::Secret("s".to_owned()),
            connect_timeout: Duration::from_secs(5),
            heartbeat: None,
            source_addrs: Vec::new(),
            max_body: 100,
            run_id: 1,
            kinds: vec!["direct"],
            options: toml::Table::new(),
            dir: Default::default(),
            directory: None,
            relay: None,
        };
        let driver = NativeDriver::new(&config).expect("driver");
        let user = UserCtx {
            ix: 0,
            id: "u".to_owned(),
        };
        let Ok(connected) = driver.connect(&user, Cursors::default()).await else {
            panic!("login failed");
        };
        let mut session = connected.session;
        let mut out = Vec::new();
        session.fetch_missed(&mut out).await.expect("sync");
        let mut pushed = Vec::new();
        while pushed.len() < 2 {
            let ev = tokio::time::timeout(Duration::from_secs(5), session.next_event())
                .await
                .expect("events");
            match ev {
                Event::Delivered { body } => pushed.push(String::from(body)),
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(out, ["m1", "m2", "m3", "m4"]);
        // The first push of 4 is the synced copy; the second is the server's duplicate.
        assert_eq!(pushed, ["m4", "m5"]);
        server.abort();
    }
}
