//! One virtual user's connection to the reference server ([`NativeSession`]): login,
//! sends, joins, syncs merged with pushes (see the driver's documentation), heartbeats.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::time::Duration;

use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};

use super::codec::{parse, reply_ref, signal_frame, unexpected, unreadable};
use super::{NativeDriver, INTERNAL_REF, RECEIPTS, REQUEST_KV_GET, REQUEST_TIME, SYNC_PAGE};
use crate::driver::kit::cursors::{Cursors, Push};
use crate::driver::kit::json_map::clip;
use crate::driver::kit::ws::{read_text, Ws};
use crate::driver::{Body, Dest, Event, Failure, Session, Signal, UserCtx};
use crate::metrics::ErrorKind;
use crate::wire::signal::MAX_CONTACTS;
use crate::wire::{self, ClientFrame, ErrorCode, ServerFrame};

impl NativeDriver {
    pub(super) async fn login(
        &self,
        session: &mut NativeSession,
        user: &UserCtx,
    ) -> Result<(), Failure> {
        {
            let token = self.token(&user.id);
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

/// A frame serde_json could not write.
fn cannot_encode(e: serde_json::Error) -> Failure {
    Failure::new(ErrorKind::Other, format!("cannot encode frame: {e}"))
}

/// One user's connection to the reference server.
#[derive(Debug)]
pub struct NativeSession {
    pub(super) ws: Ws,
    /// This user's id (a boxed str: a word less than a `String` in every idle user).
    pub(super) user: Box<str>,
    /// Frames that arrived while waiting for a reply (join, sync), not judged yet: a push
    /// among them is compared with what the sync returned only when the engine takes it.
    pub(super) unread: VecDeque<ServerFrame>,
    pub(super) cursors: Cursors,
    pub(super) next_ref: u64,
    /// Longest wait for the reply to a join or sync request.
    pub(super) reply_timeout: Duration,
}

impl NativeSession {
    async fn write(&mut self, frame: &(impl serde::Serialize + Sync)) -> Result<(), Failure> {
        let text = serde_json::to_string(frame).map_err(cannot_encode)?;
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
    /// place ([`wire::Hot`]), a push's body handed on as a part of the frame (the frame
    /// itself moves into the body: no copy, no reference taken); anything else is read as
    /// an owned frame.
    fn event_of_text(&mut self, text: Utf8Bytes) -> Option<Event> {
        let part = match wire::Hot::parse(&text) {
            Some(Ok(wire::Hot::Msg(m))) => {
                if !self.is_delivery(&m.conv, m.seq, &m.from) {
                    return None;
                }
                match m.body {
                    Cow::Borrowed(part) => Body::place(&text, part),
                    Cow::Owned(body) => Err(body),
                }
            }
            Some(Ok(wire::Hot::Ack(a))) => return Some(self.acked(a.r#ref, &a.conv, a.seq)),
            Some(Err(e)) => return Some(Event::ProtocolError(unreadable(&e, &text))),
            None => {
                return match parse(&text) {
                    Ok(frame) => self.event_of(frame),
                    Err(f) => Some(Event::ProtocolError(f)),
                }
            }
        };
        let body = match part {
            Ok(place) => Body::within(text, place),
            Err(owned) => Body::from(owned),
        };
        Some(Event::Delivered { body })
    }

    /// The server committed the send `tag` as `seq` of `conv`.
    fn acked(&mut self, tag: u64, conv: &str, seq: u64) -> Event {
        self.cursors.with(conv, |s| s.mark(seq));
        Event::Accepted { tag }
    }

    /// Whether a push of `seq` in `conv` from `from` is a delivery: not when a sync
    /// returned it already or it is the user's own message.
    fn is_delivery(&mut self, conv: &str, seq: u64, from: &str) -> bool {
        let push = self.cursors.with(conv, |s| s.push(seq));
        push != Push::Synced && from != &*self.user
    }

    /// Turns a frame into an engine event, or `None` when it is not one (control replies).
    fn event_of(&mut self, frame: ServerFrame) -> Option<Event> {
        match frame {
            ServerFrame::Ack {
                r#ref, conv, seq, ..
            } => Some(self.acked(r#ref, &conv, seq)),
            ServerFrame::Msg(msg) => {
                self.is_delivery(&msg.conv, msg.seq, &msg.from)
                    .then(|| Event::Delivered {
                        body: msg.body.into(),
                    })
            }
            ServerFrame::TimeReply { r#ref, .. } | ServerFrame::KvValue { r#ref, .. } => {
                Some(Event::Reply { tag: r#ref })
            }
            ServerFrame::Ok { r#ref } if r#ref & INTERNAL_REF == 0 => {
                Some(Event::Accepted { tag: r#ref })
            }
            ServerFrame::Receipt(r) => {
                let push = self.cursors.with(RECEIPTS, |s| s.push(r.rseq));
                (push != Push::Synced).then(|| Event::Delivered {
                    body: r.note.into(),
                })
            }
            ServerFrame::Typing(t) => Some(Event::Delivered {
                body: t.note.into(),
            }),
            // The server's own `offline` at an abrupt close carries no token.
            ServerFrame::Presence(p) if p.note.is_empty() => None,
            ServerFrame::Presence(p) => Some(Event::Delivered {
                body: p.note.into(),
            }),
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

    /// One page of the stored receipts after `after`: the receipts, whether more follow,
    /// and the highest rseq stored.
    async fn receipt_page(
        &mut self,
        after: u64,
        limit: u32,
    ) -> Result<(Vec<wire::ReceiptPush>, bool, u64), Failure> {
        let r = self.internal_ref();
        let query = ClientFrame::Receipts(wire::ReceiptsQuery {
            r#ref: r,
            after,
            limit,
        });
        match self.call(query, r).await? {
            ServerFrame::ReceiptPage(p) => Ok((p.receipts, p.more, p.last_rseq)),
            other => Err(unexpected("receipts", &other)),
        }
    }

    /// Appends the notes of the stored receipts not seen yet to `out`.
    async fn fetch_receipts(&mut self, out: &mut Vec<String>) -> Result<(), Failure> {
        loop {
            let after = self.cursors.upto(RECEIPTS);
            let (receipts, more, _) = self.receipt_page(after, SYNC_PAGE).await?;
            let Some(last) = receipts.last().map(|r| r.rseq) else {
                return Ok(());
            };
            for r in receipts {
                if self.cursors.with(RECEIPTS, |s| s.mark(r.rseq)) {
                    out.push(r.note);
                }
            }
            self.cursors.cover(RECEIPTS, last);
            if !more {
                return Ok(());
            }
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

impl Session for NativeSession {
    type Resume = Cursors;

    async fn send(&mut self, tag: u64, dest: Dest<'_>, body: &str) -> Result<(), Failure> {
        let to = match dest {
            Dest::User(u) => wire::DestRef::User(u),
            Dest::Group(g) => wire::DestRef::Group(g),
        };
        let frame = wire::SendRef {
            r#ref: tag,
            to,
            body,
        };
        let text = frame.to_json().map_err(cannot_encode)?;
        self.ws.write(Message::text(text)).await
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
            self.cursors.cover(&info.conv, info.last_seq);
        }
        let (_, _, last) = self.receipt_page(0, 1).await?;
        self.cursors.cover(RECEIPTS, last);
        Ok(())
    }

    async fn contacts(&mut self, ids: &[&str]) -> Result<(), Failure> {
        for chunk in ids.chunks(MAX_CONTACTS) {
            let r = self.internal_ref();
            let add = chunk.iter().map(|id| (*id).to_owned()).collect();
            let frame = ClientFrame::Contacts(wire::ContactsAdd { r#ref: r, add });
            match self.call(frame, r).await? {
                ServerFrame::Ok { .. } => {}
                other => return Err(unexpected("contacts", &other)),
            }
        }
        Ok(())
    }

    async fn signal(&mut self, tag: u64, signal: Signal<'_>, token: &str) -> Result<(), Failure> {
        self.write(&signal_frame(&self.user, tag, signal, token))
            .await
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
                self.cursors.cover(&info.conv, last);
                after = last;
                if !more {
                    break;
                }
            }
        }
        self.fetch_receipts(out).await
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
                    if let Some(ev) = self.event_of_text(text) {
                        return ev;
                    }
                }
                Err(e) => return e.event(),
            }
        }
    }

    fn holds_unread(&self) -> bool {
        !self.unread.is_empty() || self.ws.holds_unread()
    }

    fn arrived(&self) -> Option<std::time::Instant> {
        self.ws.arrived()
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
    use crate::driver::{Auth, Config, Driver, Endpoint};
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
                    ClientFrame::Receipts(q) => vec![ServerFrame::ReceiptPage(wire::ReceiptPage {
                        r#ref: q.r#ref,
                        receipts: Vec::new(),
                        more: false,
                        last_rseq: 0,
                    })],
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
            wires: Default::default(),
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
