//! One user's Socket.IO connection ([`SocketIoSession`]): Engine.IO pings answered,
//! emits matched with their acks, events that arrive while a reply is awaited held for
//! later, connection state recovery's replay collected until it goes quiet.

use std::collections::VecDeque;
use std::sync::Arc;

use serde_json::value::RawValue;
use tokio_tungstenite::tungstenite::Message;

use super::codec::{Emit, Kind, Packet, Sio};
use super::options::{Options, NAME};
use super::{codec, Recovery, OFFSET_WAIT};
use crate::driver::kit::exchange::{self, until_answer, Interpret};
use crate::driver::kit::inbox::Inbox;
use crate::driver::kit::json_map::path::as_str;
use crate::driver::kit::json_map::template::Values;
use crate::driver::kit::json_map::{clip, now_ms, text_of};
use crate::driver::kit::ws::{read_text, Ws};
use crate::driver::{Dest, Event, Failure, Session, Signal};
use crate::metrics::ErrorKind;

/// What a session keeps besides its socket.
#[derive(Debug)]
pub(super) struct State {
    pub(super) user: String,
    pub(super) nsp: String,
    /// Request ids, sends waiting for their ack, frames held, pongs owed.
    pub(super) inbox: Inbox,
    /// Events interpreted and not handed out yet, each with the offset it carried: the offset
    /// counts as received only once the event is handed out, so a connection closed with
    /// events still here gets them replayed.
    pub(super) ready: VecDeque<(Option<Event>, Option<String>)>,
    /// Bodies the server replayed on recovery, for [`Session::fetch_missed`].
    pub(super) missed: Vec<String>,
    pub(super) recovery: Recovery,
}

/// A Socket.IO event's arguments, the offset (when recovery is on) taken off the end.
pub(super) fn event_args(
    data: &str,
    recovery: bool,
) -> Result<(Vec<&RawValue>, Option<String>), String> {
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
    pub(super) fn protocol(&mut self, what: impl Into<String>) {
        self.push(Event::ProtocolError(Failure::new(
            ErrorKind::Protocol,
            what.into(),
        )));
    }

    /// Queues `ev`.
    pub(super) fn push(&mut self, ev: Event) {
        self.ready.push_back((Some(ev), None));
    }

    /// The body an event delivers (when it is the message event and not the user's own, or
    /// the token of a signal event), and the offset it carries.
    pub(super) fn message(
        &self,
        opts: &Options,
        data: &str,
    ) -> Result<(Option<String>, Option<String>), String> {
        let (args, offset) = event_args(data, opts.recovery)?;
        let name = as_str(args[0]);
        if name.as_deref().is_some_and(|n| opts.signals.is_signal(n)) {
            let Some(payload) = args.get(1) else {
                return Err(format!("signal `{}` without an argument", clip(data)));
            };
            return Ok((opts.signals.token(payload)?, offset));
        }
        if name.as_deref() != Some(opts.message_event.as_str()) {
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

    /// Interprets one frame: queues the event it is (if any).
    pub(super) fn interpret_packet(&mut self, opts: &Options, text: &str) {
        let sio = match codec::decode(text) {
            Ok(Packet::Message(s)) => s,
            Ok(Packet::Ping) => {
                self.inbox.pongs_owed += 1;
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
                let tag = sio.id.and_then(|id| self.inbox.take_ack(id));
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
    pub(super) ws: Ws,
    pub(super) opts: Arc<Options>,
    pub(super) st: State,
    /// Longest wait for a join's ack.
    pub(super) reply_timeout: std::time::Duration,
}

impl SocketIoSession {
    /// Engine.IO open, then `CONNECT` with `auth` until the server answers it. Events
    /// before the answer are the recovered session's missed packets when the server
    /// recovered it (same `pid`), ordinary pushes otherwise.
    pub(super) async fn login(&mut self, auth: &str) -> Result<(), Failure> {
        let text = read_text(&mut self.ws).await?;
        if !matches!(codec::decode(&text), Ok(Packet::Open(_))) {
            return Err(Failure::new(
                ErrorKind::Protocol,
                format!("expected the Engine.IO open packet, got {}", clip(&text)),
            ));
        }
        let mut connect = String::with_capacity(auth.len() + 16);
        codec::head(Kind::Connect, &self.st.nsp, None, &mut connect);
        connect.push_str(auth);
        self.ws.write(Message::text(connect)).await?;
        self.ws.flush().await?;
        let (data, early) = self.until_connected().await?;
        let pid = serde_json::from_str::<serde_json::Value>(&data)
            .ok()
            .and_then(|v| v.get("pid").and_then(|p| p.as_str()).map(str::to_owned));
        let recovered = pid.is_some() && pid == self.st.recovery.pid;
        if !recovered {
            self.st.recovery = Recovery { pid, offset: None };
        }
        self.take_early(early, recovered);
        Ok(())
    }

    /// Reads until the namespace's CONNECT answers ours, answering pings: its data, and
    /// the packets that came before it.
    async fn until_connected(&mut self) -> Result<(String, Vec<String>), Failure> {
        let mut early = Vec::new();
        loop {
            let text = read_text(&mut self.ws).await?;
            match codec::decode(&text) {
                Ok(Packet::Ping) => {
                    self.ws.write(Message::text("3")).await?;
                    self.ws.flush().await?;
                }
                Ok(Packet::Message(Sio {
                    kind: Kind::Connect,
                    nsp,
                    data,
                    ..
                })) if nsp == self.st.nsp => return Ok((data.to_owned(), early)),
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
        }
    }

    /// The packets that came before CONNECT: held for later, or, when the session was
    /// recovered, its replayed events taken as missed messages now.
    fn take_early(&mut self, early: Vec<String>, recovered: bool) {
        for text in early {
            if !recovered {
                self.st.inbox.hold(text);
                continue;
            }
            // A replayed packet: an event in this namespace; anything else is interpreted later.
            match codec::decode(&text) {
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
                _ => self.st.inbox.hold(text),
            }
        }
    }

    /// Waits for a first offset, so that a user closing right after its first connect (a
    /// late user's presence) can be recovered: a session is only restored from an offset.
    /// With a `welcome_event` it waits for that event (up to the reply timeout), recording
    /// the offsets of other events on the way; without one, at most [`OFFSET_WAIT`] for any
    /// event with an offset. Stops at a message or receipt event, whose offset would skip it.
    pub(super) async fn await_offset(&mut self) {
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
                let Ok(Packet::Message(s)) = codec::decode(&text) else {
                    continue;
                };
                if s.kind != Kind::Event || s.nsp != self.st.nsp {
                    continue;
                }
                let Ok((args, offset)) = event_args(s.data, true) else {
                    continue;
                };
                let name = as_str(args[0]);
                // Typing and presence are owed to no user going offline: passed over.
                let delivers =
                    |n: &str| n == self.opts.message_event || self.opts.signals.is_receipt(n);
                if name.as_deref().is_some_and(delivers) {
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

    /// Queues the event `emit` with `vals`, asking for an ack when `ack`; returns the ack
    /// id.
    pub(super) async fn emit(
        &mut self,
        emit: &Emit,
        vals: &Values<'_>,
        ack: bool,
    ) -> Result<Option<u64>, Failure> {
        let id = ack.then(|| self.st.inbox.next_id());
        let mut text = String::with_capacity(emit.open.len() + vals.body.len() + 64);
        codec::head(Kind::Event, &self.st.nsp, id, &mut text);
        text.push_str(&emit.open);
        emit.payload.render(vals, now_ms(), &mut text);
        text.push(']');
        self.ws.write(Message::text(text)).await?;
        Ok(id)
    }

    /// Waits for the ack of emit `id` (`what` it did, for the error), up to the reply
    /// timeout; everything else meanwhile is kept unread.
    pub(super) async fn await_ack(
        &mut self,
        id: u64,
        kind: ErrorKind,
        what: &str,
    ) -> Result<(), Failure> {
        let limit = self.reply_timeout;
        let nsp = self.st.nsp.clone();
        let wait = until_answer(&mut self.ws, &mut self.st.inbox, |text, inbox| {
            let ours = matches!(
                codec::decode(text),
                Ok(Packet::Message(Sio { kind: Kind::Ack, id: Some(got), nsp: n, .. }))
                    if got == id && n == nsp
            );
            if !ours {
                inbox.hold(text.to_owned());
            }
            ours.then_some(())
        });
        match tokio::time::timeout(limit, wait).await {
            Ok(r) => r,
            Err(_) => Err(Failure::new(
                kind,
                format!("no ack of {what} within {limit:?}"),
            )),
        }
    }
}

impl Interpret for State {
    type Opts = Options;

    fn inbox(&mut self) -> &mut Inbox {
        &mut self.inbox
    }

    /// The oldest event interpreted, its offset now counted as received; an offset that came
    /// without an event (one the session does not hand out) counts on the way.
    fn take_ready(&mut self) -> Option<Event> {
        while let Some((ev, offset)) = self.ready.pop_front() {
            if offset.is_some() {
                self.recovery.offset = offset;
            }
            if ev.is_some() {
                return ev;
            }
        }
        None
    }

    fn interpret(&mut self, opts: &Options, frame: &str) {
        self.interpret_packet(opts, frame);
    }

    /// Engine.IO's pong.
    fn pong(&mut self, _opts: &Options) -> Option<String> {
        Some("3".to_owned())
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
        if let Some(id) = self.emit(emit, &vals, opts.ack).await? {
            self.st.inbox.expect_ack(id, tag);
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
        let id = self.emit(&opts.join, &vals, opts.ack).await?;
        self.ws.flush().await?;
        match id {
            Some(id) => {
                let what = format!("joining {group}");
                self.await_ack(id, ErrorKind::JoinFailed, &what).await
            }
            None => Ok(()),
        }
    }

    async fn contacts(&mut self, ids: &[&str]) -> Result<(), Failure> {
        self.send_contacts(ids).await
    }

    async fn signal(&mut self, tag: u64, signal: Signal<'_>, token: &str) -> Result<(), Failure> {
        self.send_signal(tag, signal, token).await
    }

    async fn fetch_missed(&mut self, out: &mut Vec<String>) -> Result<(), Failure> {
        out.append(&mut self.st.missed);
        Ok(())
    }

    async fn next_event(&mut self) -> Event {
        exchange::next_event(&mut self.ws, &*self.opts, &mut self.st).await
    }

    fn arrived(&self) -> Option<std::time::Instant> {
        self.ws.arrived()
    }

    async fn close(mut self) -> Recovery {
        // Packets held while an ack was awaited (a `welcome` behind the contacts' ack) are
        // judged now, for their offsets.
        let opts = Arc::clone(&self.opts);
        while let Some(text) = self.st.inbox.take_unread() {
            self.st.interpret_packet(&opts, &text);
        }
        // Offsets interpreted but not handed out count up to the first delivery not handed out.
        while let Some((ev, offset)) = self.st.ready.pop_front() {
            if matches!(ev, Some(Event::Delivered { .. })) {
                break;
            }
            if offset.is_some() {
                self.st.recovery.offset = offset;
            }
        }
        if self.opts.recovery && self.st.recovery.offset.is_none() {
            self.await_offset().await;
        }
        if !self.opts.recovery {
            let mut text = String::new();
            codec::head(Kind::Disconnect, &self.st.nsp, None, &mut text);
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
