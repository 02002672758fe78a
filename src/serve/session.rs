//! One WebSocket connection: login, then a loop that reads client frames, writes what
//! its outbox holds (coalesced, many frames per write), and enforces the login, idle and
//! write timeouts (the last while a write waits on a client that does not read).
//! Every failure of the client's input becomes an error frame, never a panic.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket};
use futures_util::SinkExt;
use serde::Deserialize;
use tokio::time::{sleep, timeout, Instant};

use super::auth::{now_secs, valid_id, verify, Refused};
use super::gateway::Shared;
use super::guard::Pass;
use super::hub::encode;
use super::outbox::Outbox;
use super::rpc::now_us;
use super::signals::{self, Refusal};
use super::store::{self, Access};
use super::writer::{now_ms, Cmd, GroupOp};
use crate::wire::{
    ClientFrame, ContactsAdd, Dest, ErrorCode, Receipt, ReceiptsQuery, Ref, ServerFrame,
    PROTOCOL_VERSION,
};

/// Most messages one sync page returns.
pub const SYNC_PAGE_MAX: u32 = 1000;
/// Most frames written per flush.
const WRITE_CHUNK: usize = 64;
/// Most bytes taken from the outbox per flush (at least one frame): bounds what a write
/// blocked on a peer that does not read holds outside the outbox.
const WRITE_BYTES: usize = 64 * 1024;
/// How long a closing error frame may take to go out.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// Every frame type a client may send, for telling `unknown_type` from `malformed`.
const CLIENT_TYPES: &[&str] = &[
    "login",
    "send",
    "group_create",
    "group_join",
    "group_leave",
    "group_add",
    "convs",
    "sync",
    "ping",
    "time",
    "kv_get",
    "contacts",
    "presence",
    "typing",
    "receipt",
    "receipts",
];

/// Why the connection ends, when the server ends it.
struct Close(ErrorCode, String);

struct Session {
    id: u64,
    user: Option<String>,
    pass: Pass,
    outbox: Arc<Outbox>,
    shared: Arc<Shared>,
}

/// Serves one upgraded WebSocket until either side closes it.
pub async fn serve(ws: WebSocket, pass: Pass, shared: Arc<Shared>) {
    let id = shared.next_conn.fetch_add(1, Ordering::Relaxed);
    let cfg = &shared.config;
    let outbox = Arc::new(Outbox::new(
        cfg.queue,
        cfg.queue_bytes,
        shared.metrics.clone(),
    ));
    shared.hub.add_conn(id, outbox.clone());
    shared.metrics.connections.inc();
    if shared.stopping.load(Ordering::Acquire) {
        outbox.close(ErrorCode::ShuttingDown);
    }
    let mut s = Session {
        id,
        user: None,
        pass,
        outbox,
        shared,
    };
    s.run(ws).await;
    if s.shared.hub.remove_conn(s.id, s.user.as_deref()) {
        if let Some(user) = &s.user {
            signals::vanished(&s.shared, user);
        }
    }
    if s.user.is_some() {
        s.shared.metrics.online.dec();
    }
    s.shared.metrics.connections.dec();
}

impl Session {
    async fn run(&mut self, mut ws: WebSocket) {
        let idle = self.shared.config.idle_timeout;
        let deadline = sleep(idle);
        tokio::pin!(deadline);
        // Pings reset the idle timer, never this one: a connection must log in.
        let login_by = sleep(self.shared.config.login_timeout);
        tokio::pin!(login_by);
        loop {
            tokio::select! {
                biased;
                () = self.outbox.changed() => {
                    if let Err(close) = self.flush_outbox(&mut ws).await {
                        return self.close(ws, close).await;
                    }
                }
                incoming = ws.recv() => {
                    deadline.as_mut().reset(Instant::now() + idle);
                    let close = match incoming {
                        None | Some(Ok(Message::Close(_))) => return,
                        Some(Err(e)) => {
                            if !is_too_large(e) {
                                return;
                            }
                            let max = self.shared.config.max_frame;
                            Close(ErrorCode::FrameTooLarge, format!("frame larger than {max} bytes"))
                        }
                        Some(Ok(Message::Text(text))) => match self.on_text(&text).await {
                            Some(close) => close,
                            None => continue,
                        },
                        Some(Ok(Message::Binary(_))) => {
                            self.error(None, ErrorCode::BinaryFrame, "frames are JSON text");
                            continue;
                        }
                        Some(Ok(_)) => continue,
                    };
                    return self.close(ws, close).await;
                }
                () = &mut login_by, if self.user.is_none() => {
                    let t = humantime::format_duration(self.shared.config.login_timeout);
                    let msg = format!("no login within {t} of connecting");
                    return self.close(ws, Close(ErrorCode::LoginTimeout, msg)).await;
                }
                () = &mut deadline => {
                    let msg = format!("nothing received for {}", humantime::format_duration(idle));
                    return self.close(ws, Close(ErrorCode::IdleTimeout, msg)).await;
                }
            }
        }
    }

    /// Writes everything queued; a close of the outbox (slow consumer, shutdown) while
    /// a write waits on the peer ends the connection.
    async fn flush_outbox(&self, ws: &mut WebSocket) -> Result<(), Close> {
        // Allocated per flush, so an idle connection keeps no batch buffer.
        let mut batch = Vec::new();
        loop {
            if let Some(reason) = self.outbox.drain(WRITE_CHUNK, WRITE_BYTES, &mut batch) {
                return Err(close_reason(reason));
            }
            if batch.is_empty() {
                return Ok(());
            }
            let write = write_all(ws, &mut batch);
            tokio::pin!(write);
            // The idle timer is not polled while a write waits on the peer, so the write
            // has its own bound: a client that stops reading is closed, not held.
            let stalled = sleep(self.shared.config.write_timeout);
            tokio::pin!(stalled);
            loop {
                tokio::select! {
                    r = &mut write => {
                        r.map_err(|_| Close(ErrorCode::Internal, String::new()))?;
                        break;
                    }
                    () = &mut stalled => {
                        self.shared.metrics.slow_consumers.inc();
                        let t = humantime::format_duration(self.shared.config.write_timeout);
                        let msg = format!("a write waited {t} for you to read");
                        return Err(Close(ErrorCode::SlowConsumer, msg));
                    }
                    () = self.outbox.changed() => {
                        if let Some(reason) = self.outbox.closed() {
                            return Err(close_reason(reason));
                        }
                    }
                }
            }
        }
    }

    /// Sends the fatal error frame and a close frame, bounded in time.
    async fn close(&self, mut ws: WebSocket, Close(code, message): Close) {
        if message.is_empty() {
            return;
        }
        self.shared.metrics.error(code);
        let frame = encode(&ServerFrame::Error {
            r#ref: None,
            code,
            message,
            fatal: true,
        });
        let close_code = match code {
            ErrorCode::ShuttingDown => 1001,
            ErrorCode::FrameTooLarge => 1009,
            _ => 1008,
        };
        let bye = async {
            ws.send(Message::Text(frame)).await?;
            ws.send(Message::Close(Some(CloseFrame {
                code: close_code,
                reason: Utf8Bytes::from_static(code.as_str()),
            })))
            .await
        };
        let _ = timeout(CLOSE_GRACE, bye).await;
    }

    fn reply(&self, frame: &ServerFrame) {
        self.outbox.push(encode(frame));
    }

    fn error(&self, r#ref: Option<Ref>, code: ErrorCode, message: impl Into<String>) {
        self.shared.metrics.error(code);
        self.reply(&ServerFrame::Error {
            r#ref,
            code,
            message: message.into(),
            fatal: false,
        });
    }

    async fn on_text(&mut self, text: &str) -> Option<Close> {
        match serde_json::from_str::<ClientFrame>(text) {
            Ok(frame) => self.on_frame(frame).await,
            Err(e) => {
                let probe: Option<Probe> = serde_json::from_str(text).ok();
                let (r#ref, kind) = probe.map_or((None, None), |p| (p.r#ref, p.kind));
                match kind {
                    Some(k) if !CLIENT_TYPES.contains(&k.as_str()) => {
                        self.error(r#ref, ErrorCode::UnknownType, format!("unknown type `{k}`"));
                    }
                    _ => self.error(r#ref, ErrorCode::Malformed, e.to_string()),
                }
                None
            }
        }
    }

    async fn on_frame(&mut self, frame: ClientFrame) -> Option<Close> {
        let Some(user) = self.user.clone() else {
            return self.login(frame);
        };
        let cfg = &self.shared.config;
        match frame {
            ClientFrame::Login { .. } => {
                self.error(None, ErrorCode::AlreadyLoggedIn, "already logged in");
            }
            ClientFrame::Send { r#ref, to, body } => {
                if body.len() > cfg.max_body {
                    let msg = format!("body of {} bytes exceeds {}", body.len(), cfg.max_body);
                    self.error(Some(r#ref), ErrorCode::BodyTooLarge, msg);
                    return None;
                }
                let bad = match &to {
                    Dest::User(u) => (!valid_id(u)).then_some(ErrorCode::BadRecipient),
                    Dest::Group(g) => (!valid_id(g)).then_some(ErrorCode::NoSuchGroup),
                };
                if let Some(code) = bad {
                    self.error(Some(r#ref), code, "invalid recipient id");
                    return None;
                }
                let reply = self.outbox.clone();
                self.to_writer(
                    r#ref,
                    Cmd::Send {
                        user,
                        r#ref,
                        to,
                        body,
                        reply,
                    },
                )
                .await;
            }
            ClientFrame::GroupCreate { r#ref, group } => {
                self.group(GroupOp::Create, user, r#ref, group).await;
            }
            ClientFrame::GroupJoin { r#ref, group } => {
                self.group(GroupOp::Join, user, r#ref, group).await;
            }
            ClientFrame::GroupLeave { r#ref, group } => {
                self.group(GroupOp::Leave, user, r#ref, group).await;
            }
            ClientFrame::GroupAdd {
                r#ref,
                group,
                user: member,
            } => {
                if valid_id(&member) {
                    self.group(GroupOp::Add(member), user, r#ref, group).await;
                } else {
                    self.error(Some(r#ref), ErrorCode::BadRecipient, "invalid user id");
                }
            }
            ClientFrame::Convs { r#ref } => {
                match self
                    .shared
                    .readers
                    .with(move |c| store::convs(c, &user))
                    .await
                {
                    Ok(convs) => self.reply(&ServerFrame::ConvList { r#ref, convs }),
                    Err(e) => self.error(Some(r#ref), ErrorCode::Internal, e.to_string()),
                }
            }
            ClientFrame::Sync {
                r#ref,
                conv,
                after,
                limit,
            } => self.sync(user, r#ref, conv, after, limit).await,
            ClientFrame::Ping { ts } => self.reply(&ServerFrame::Pong { ts }),
            ClientFrame::Time { r#ref } => self.reply(&ServerFrame::TimeReply {
                r#ref,
                ts_us: now_us(),
            }),
            ClientFrame::KvGet { r#ref, key } => {
                let m = &self.shared.metrics;
                if !self.shared.kv.submit(r#ref, key, self.outbox.clone(), m) {
                    self.error(Some(r#ref), ErrorCode::Overloaded, "kv worker pool is full");
                }
            }
            ClientFrame::Contacts(c) => {
                let done = signals::contacts(&self.shared, user, c, self.outbox.clone()).await;
                self.refused(done);
            }
            ClientFrame::Presence(p) => {
                self.refused(signals::presence(&self.shared, &user, p, &self.outbox));
            }
            ClientFrame::Typing(t) => self.refused(signals::typing(&self.shared, user, t).await),
            ClientFrame::Receipt(r) => {
                let done = signals::receipt(&self.shared, user, r, self.outbox.clone()).await;
                self.refused(done);
            }
            ClientFrame::Receipts(q) => match signals::receipts(&self.shared, user, q).await {
                Ok(page) => self.reply(&page),
                Err(refusal) => self.refused(Err(refusal)),
            },
        }
        None
    }

    /// Answers a refused signal frame with its error.
    fn refused(&self, done: Result<(), Refusal>) {
        if let Err(Refusal(r#ref, code, message)) = done {
            self.error(r#ref, code, message);
        }
    }

    fn login(&mut self, frame: ClientFrame) -> Option<Close> {
        let ClientFrame::Login { v, user, token } = frame else {
            self.error(frame_ref(&frame), ErrorCode::NotLoggedIn, "log in first");
            return None;
        };
        let metrics = &self.shared.metrics;
        if v != PROTOCOL_VERSION {
            metrics.login(false);
            let msg = format!(
                "protocol version {v} is not spoken; this server speaks {PROTOCOL_VERSION}"
            );
            return Some(Close(ErrorCode::BadVersion, msg));
        }
        let verdict = if valid_id(&user) {
            verify(&user, &token, &self.shared.secret, now_secs())
        } else {
            Err(Refused::Invalid)
        };
        if let Err(refused) = verdict {
            metrics.login(false);
            let msg = match refused {
                Refused::Invalid => format!("bad token for `{user}`"),
                Refused::Expired(at) => format!("the token of `{user}` expired at {at} (Unix s)"),
            };
            return Some(Close(ErrorCode::BadToken, msg));
        }
        if !self.pass.logged_in() {
            // Evicted under `--max-unauthenticated` just before: the stream is failing.
            metrics.login(false);
            return Some(Close(ErrorCode::TooManyConnections, String::new()));
        }
        metrics.login(true);
        metrics.online.inc();
        // `welcome` is queued before the hub knows this connection as `user`, so no push
        // can be queued ahead of it: the outbox is FIFO and `welcome` is always first.
        self.reply(&ServerFrame::Welcome {
            v: PROTOCOL_VERSION,
            user: user.clone(),
            ts: now_ms(),
        });
        self.shared.hub.login(&user, self.id, self.outbox.clone());
        self.user = Some(user);
        None
    }

    async fn group(&self, op: GroupOp, user: String, r#ref: Ref, group: String) {
        if !valid_id(&group) {
            let msg = "group names are 1-64 characters of A-Z a-z 0-9 _ - .";
            self.error(Some(r#ref), ErrorCode::Malformed, msg);
            return;
        }
        let reply = self.outbox.clone();
        self.to_writer(
            r#ref,
            Cmd::Group {
                op,
                user,
                r#ref,
                group,
                reply,
            },
        )
        .await;
    }

    async fn to_writer(&self, r#ref: Ref, cmd: Cmd) {
        if self.shared.writer.send(cmd).await.is_err() {
            self.error(Some(r#ref), ErrorCode::ShuttingDown, "the store is closed");
        }
    }

    async fn sync(&self, user: String, r#ref: Ref, conv: String, after: u64, limit: u32) {
        let limit = if limit == 0 {
            SYNC_PAGE_MAX
        } else {
            limit.min(SYNC_PAGE_MAX)
        };
        // A page stops before its frame would pass `--max-frame`: the frame around the
        // messages costs `overhead` bytes (with `more: true`, the longer form).
        let overhead = store::json_len(&ServerFrame::SyncPage {
            r#ref,
            conv: conv.clone(),
            msgs: Vec::new(),
            more: true,
        });
        let max_bytes = self.shared.config.max_frame.saturating_sub(overhead);
        let c = conv.clone();
        let page = self
            .shared
            .readers
            .with(move |db| match store::access(db, &user, &c)? {
                Access::Allowed => store::sync(db, &c, after, limit, max_bytes).map(Ok),
                denied => Ok(Err(denied)),
            })
            .await;
        match page {
            Ok(Ok((msgs, more))) => {
                self.shared.metrics.synced.inc_by(msgs.len() as u64);
                self.reply(&ServerFrame::SyncPage {
                    r#ref,
                    conv,
                    msgs,
                    more,
                });
            }
            Ok(Err(denied)) => {
                let (code, msg) = match denied {
                    Access::NoSuchGroup => (ErrorCode::NoSuchGroup, "no such group"),
                    Access::BadConv => {
                        (ErrorCode::Malformed, "conversation ids are d:A:B or g:NAME")
                    }
                    _ => (ErrorCode::NotMember, "not a member of this conversation"),
                };
                self.error(Some(r#ref), code, msg);
            }
            Err(e) => self.error(Some(r#ref), ErrorCode::Internal, e.to_string()),
        }
    }
}

/// The `type` and `ref` of a frame that did not parse.
#[derive(Deserialize)]
struct Probe {
    #[serde(rename = "type")]
    kind: Option<String>,
    #[serde(rename = "ref")]
    r#ref: Option<Ref>,
}

fn frame_ref(f: &ClientFrame) -> Option<Ref> {
    match f {
        ClientFrame::Send { r#ref, .. }
        | ClientFrame::GroupCreate { r#ref, .. }
        | ClientFrame::GroupJoin { r#ref, .. }
        | ClientFrame::GroupLeave { r#ref, .. }
        | ClientFrame::GroupAdd { r#ref, .. }
        | ClientFrame::Convs { r#ref }
        | ClientFrame::Sync { r#ref, .. }
        | ClientFrame::Time { r#ref }
        | ClientFrame::KvGet { r#ref, .. }
        | ClientFrame::Contacts(ContactsAdd { r#ref, .. })
        | ClientFrame::Receipt(Receipt { r#ref, .. })
        | ClientFrame::Receipts(ReceiptsQuery { r#ref, .. }) => Some(*r#ref),
        ClientFrame::Presence(p) => p.r#ref,
        ClientFrame::Login { .. } | ClientFrame::Ping { .. } | ClientFrame::Typing(_) => None,
    }
}

fn close_reason(code: ErrorCode) -> Close {
    let msg = match code {
        ErrorCode::SlowConsumer => "outbound queue overflowed: read your pushes faster",
        ErrorCode::ShuttingDown => "the server is shutting down",
        _ => "connection closed by the server",
    };
    Close(code, msg.to_owned())
}

async fn write_all(ws: &mut WebSocket, batch: &mut Vec<Utf8Bytes>) -> Result<(), axum::Error> {
    for frame in batch.drain(..) {
        ws.feed(Message::Text(frame)).await?;
    }
    ws.flush().await
}

fn is_too_large(e: axum::Error) -> bool {
    use tokio_tungstenite::tungstenite::Error as WsError;
    matches!(
        e.into_inner().downcast_ref::<WsError>(),
        Some(WsError::Capacity(_))
    )
}
