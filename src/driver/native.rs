//! The `native` driver: the reference server's JSON-over-WebSocket protocol ([`crate::wire`]).
//!
//! Fetching missed messages lists the user's conversations and pages through each one after
//! the last sequence number this user saw. The user's own messages and pushes already seen
//! through a sync are not handed to the engine twice; duplicate pushes are passed through
//! untouched so the ledger can catch a server that duplicates. The transport (cheap
//! upgrade, coalesced writes, reading while a write waits) is [`super::ws`].

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use tokio_tungstenite::tungstenite::Message;

use super::ws::{classify, Dialer, Ws};
use super::{
    Auth, AuthForm, Caps, Config, Connected, Dest, Event, Failure, OptionError, Session, Spec,
    UserCtx,
};
use crate::metrics::ErrorKind;
use crate::wire::{self, ClientFrame, ConvId, ErrorCode, ServerFrame};

/// Requests the driver makes for itself (join, sync) use refs with this bit set, so they
/// never collide with the engine's tags.
const INTERNAL_REF: u64 = 1 << 63;
/// Messages per sync page.
const SYNC_PAGE: u32 = 500;
/// How long pushes are checked against what a sync already returned.
const SYNC_OVERLAP_WINDOW: Duration = Duration::from_secs(10);

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
        schemes: super::ws::SCHEMES,
        embedded_path: Some("/ws"),
        kinds: &["direct", "group", "idle", "request"],
        requests: &[REQUEST_TIME, REQUEST_KV_GET],
        auth: &[AuthForm::Secret],
        source_addresses: true,
        caps: Caps {
            acceptance: true,
            presence: false,
            fetch_missed: true,
            filters_own_echoes: true,
        },
    };

    type Session = NativeSession;

    fn new(config: &Config) -> Result<Self, OptionError> {
        super::ws::no_options(config)?;
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
            user: user.id.clone(),
            pending: VecDeque::new(),
            cursors: resume,
            recent_sync: HashSet::new(),
            recent_sync_until: Instant::now(),
            next_ref: 0,
            reply_timeout: self.dialer.timeout(),
        };
        let login = self.login(&mut session, user);
        let outcome = match tokio::time::timeout(self.dialer.timeout(), login).await {
            Ok(outcome) => outcome,
            Err(_) => Err(timed_out("login reply", self.dialer.timeout())),
        };
        match outcome {
            Ok(()) => Ok(Connected {
                session,
                handshake,
                login: started.elapsed() - handshake,
            }),
            Err(f) => Err((f, session.cursors)),
        }
    }
}

fn timed_out(what: &str, limit: Duration) -> Failure {
    Failure::new(
        ErrorKind::ConnectTimeout,
        format!("no {what} within {limit:?}"),
    )
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

/// What a native user remembers between connections: per conversation, the sequence
/// numbers seen.
#[derive(Debug, Default)]
pub struct Cursors {
    convs: HashMap<ConvId, Seen>,
}

/// Sequence numbers seen in one conversation: everything up to `upto`, plus a few above it.
#[derive(Debug, Default)]
struct Seen {
    upto: u64,
    above: BTreeSet<u64>,
}

impl Seen {
    /// Marks `seq` seen; returns false when it already was.
    fn mark(&mut self, seq: u64) -> bool {
        if seq <= self.upto {
            return false;
        }
        if seq != self.upto + 1 {
            return self.above.insert(seq);
        }
        self.upto = seq;
        while self.above.remove(&(self.upto + 1)) {
            self.upto += 1;
        }
        true
    }

    fn contains(&self, seq: u64) -> bool {
        seq <= self.upto || self.above.contains(&seq)
    }
}

impl Cursors {
    fn mark(&mut self, conv: &str, seq: u64) -> bool {
        match self.convs.get_mut(conv) {
            Some(seen) => seen.mark(seq),
            None => self.convs.entry(conv.to_owned()).or_default().mark(seq),
        }
    }
}

/// One user's connection to the reference server.
#[derive(Debug)]
pub struct NativeSession {
    ws: Ws,
    user: String,
    pending: VecDeque<Event>,
    cursors: Cursors,
    /// Messages a recent sync returned: a push of one of them is the same message again.
    recent_sync: HashSet<(ConvId, u64)>,
    recent_sync_until: Instant,
    next_ref: u64,
    /// Longest wait for the reply to a join or sync request.
    reply_timeout: Duration,
}

impl NativeSession {
    async fn write(&mut self, frame: &ClientFrame) -> Result<(), Failure> {
        let text = serde_json::to_string(frame)
            .map_err(|e| Failure::new(ErrorKind::Other, format!("cannot encode frame: {e}")))?;
        self.ws.write(Message::text(text)).await
    }

    async fn flush_ws(&mut self) -> Result<(), Failure> {
        self.ws.flush().await
    }

    /// Reads the next protocol frame, skipping WebSocket control frames.
    async fn read_frame(&mut self) -> Result<ServerFrame, Failure> {
        loop {
            match self.ws.next().await {
                None => return Err(Failure::new(ErrorKind::ClosedByPeer, "connection closed")),
                Some(Err(e)) => return Err(classify(&e)),
                Some(Ok(Message::Text(text))) => {
                    return serde_json::from_str(text.as_str()).map_err(|e| {
                        Failure::new(
                            ErrorKind::Protocol,
                            format!("unreadable frame ({e}): {}", clip(text.as_str())),
                        )
                    })
                }
                Some(Ok(Message::Close(frame))) => {
                    let why = frame.map(|f| f.reason.to_string()).unwrap_or_default();
                    return Err(Failure::new(
                        ErrorKind::ClosedByPeer,
                        format!("closed by server: {why}"),
                    ));
                }
                Some(Ok(Message::Binary(_))) => {
                    return Err(Failure::new(ErrorKind::Protocol, "unexpected binary frame"))
                }
                Some(Ok(_)) => continue,
            }
        }
    }

    /// Turns a frame into an engine event, or `None` when it is not one (control replies).
    fn event_of(&mut self, frame: ServerFrame) -> Option<Event> {
        match frame {
            ServerFrame::Ack {
                r#ref, conv, seq, ..
            } => {
                self.cursors.mark(&conv, seq);
                Some(Event::Accepted { tag: r#ref })
            }
            ServerFrame::Msg(msg) => {
                let fresh = self.cursors.mark(&msg.conv, msg.seq);
                if msg.from == self.user {
                    return None;
                }
                if !fresh && self.was_synced(&msg.conv, msg.seq) {
                    return None;
                }
                Some(Event::Delivered { body: msg.body })
            }
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

    /// True when a recent sync already returned this message (once: a second push of it is
    /// a real duplicate).
    fn was_synced(&mut self, conv: &str, seq: u64) -> bool {
        if self.recent_sync.is_empty() {
            return false;
        }
        if Instant::now() > self.recent_sync_until {
            self.recent_sync.clear();
            return false;
        }
        self.recent_sync.remove(&(conv.to_owned(), seq))
    }

    fn internal_ref(&mut self) -> u64 {
        self.next_ref += 1;
        INTERNAL_REF | self.next_ref
    }

    /// Sends an internal request and waits for the reply with that ref; every other frame
    /// meanwhile becomes a pending event.
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
                if let Some(ev) = self.event_of(reply) {
                    self.pending.push_back(ev);
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

/// The first 120 characters of a frame, for error examples.
fn clip(text: &str) -> &str {
    match text.char_indices().nth(120) {
        Some((i, _)) => &text[..i],
        None => text,
    }
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
            Dest::User(u) => wire::Dest::User(u.to_owned()),
            Dest::Group(g) => wire::Dest::Group(g.to_owned()),
        };
        self.write(&ClientFrame::Send {
            r#ref: tag,
            to,
            body: body.to_owned(),
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

    async fn fetch_missed(&mut self, out: &mut Vec<String>) -> Result<(), Failure> {
        let r = self.internal_ref();
        let convs = match self.call(ClientFrame::Convs { r#ref: r }, r).await? {
            ServerFrame::ConvList { convs, .. } => convs,
            other => return Err(unexpected("convs", &other)),
        };
        for info in convs {
            let mut after = self.cursors.convs.get(&info.conv).map_or(0, |s| s.upto);
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
                    let seen = self
                        .cursors
                        .convs
                        .get(&msg.conv)
                        .is_some_and(|s| s.contains(msg.seq));
                    if seen {
                        continue;
                    }
                    self.cursors.mark(&msg.conv, msg.seq);
                    if msg.from != self.user {
                        self.recent_sync.insert((msg.conv, msg.seq));
                        out.push(msg.body);
                    }
                }
                after = last;
                if !more {
                    break;
                }
            }
        }
        self.recent_sync_until = Instant::now() + SYNC_OVERLAP_WINDOW;
        Ok(())
    }

    async fn next_event(&mut self) -> Event {
        if let Some(ev) = self.pending.pop_front() {
            return ev;
        }
        loop {
            match self.read_frame().await {
                Ok(frame) => {
                    if let Some(ev) = self.event_of(frame) {
                        return ev;
                    }
                }
                Err(f) if f.kind == ErrorKind::Protocol => return Event::ProtocolError(f),
                Err(f) => return Event::Closed(f),
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
    use super::*;

    #[test]
    fn seen_tracks_holes_and_compacts() {
        let mut s = Seen::default();
        assert!(s.mark(1));
        assert!(s.mark(3));
        assert!(!s.mark(3));
        assert!(!s.contains(2));
        assert!(s.mark(2));
        assert_eq!(s.upto, 3);
        assert!(s.above.is_empty());
        assert!(!s.mark(1));
    }
}
