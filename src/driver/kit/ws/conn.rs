//! One client WebSocket connection (RFC 6455 framing after the upgrade), built so that an
//! idle connection holds no buffer at all.
//!
//! tokio-tungstenite keeps a read buffer, a write buffer and two waker proxies per
//! connection for its whole life; at 10,000 idle users that was a quarter of the
//! generator's memory (issue #17). Here every connection of a worker thread reads into
//! one shared scratch buffer ([`SCRATCH`]) and keeps bytes of its own only while a frame
//! is incomplete or unread; the write buffer is freed as soon as it drains. Frames are
//! parsed and encoded with tungstenite's public [`FrameHeader`]; what is written by hand
//! is the read/write loop around it, which no crate offers without a buffer per stream.
//!
//! Behaves as tungstenite's client does: pings are answered, a server's close is
//! answered (with 1002 when its code is one no endpoint may send) and ends the stream,
//! fragmented messages are reassembled, and a stream that ends without a close is
//! `ResetWithoutClosingHandshake`. A frame the protocol does not allow — masked, with
//! reserved bits or opcode, a fragmented or oversized control frame, a fragment out of
//! place — and a message above the limit ([`Ws::fit`]) are errors as soon as the frame's
//! header shows them, answered with a close (1002, 1007 or 1009) before the read ends.

use std::cell::RefCell;
use std::future::poll_fn;
use std::io::{self, Cursor};
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_tungstenite::tungstenite::error::{CapacityError, ProtocolError};
use tokio_tungstenite::tungstenite::protocol::frame::coding::{CloseCode, Control, Data, OpCode};
use tokio_tungstenite::tungstenite::protocol::frame::{CloseFrame, FrameHeader, Utf8Bytes};
use tokio_tungstenite::tungstenite::{Bytes, Error, Message};

use super::Stream;
use crate::driver::kit::io_error;
use crate::metrics::ErrorKind;

/// Bytes read from the socket at most per read, into the worker's shared buffer.
const READ_CHUNK: usize = 64 << 10;
/// Frames queue up to this many bytes before they are written without a flush, so the
/// frames of one wake-up go out in one write.
const WRITE_COALESCE: usize = 64 << 10;
/// Room the write buffer starts with when frames are queued after it drained.
const WRITE_START: usize = 4 << 10;
/// The largest message accepted from a server whatever the run's bodies.
const MAX_MESSAGE: usize = 16 << 20;
/// Room in a message for what wraps the run's largest body (a JSON frame, a template).
const BODY_SLACK: usize = 64 << 10;
/// The longest reason a close frame carries (its payload is at most 125 bytes).
const MAX_REASON: usize = 123;
/// The largest control frame payload (RFC 6455 §5.5).
const MAX_CONTROL: u64 = 125;

thread_local! {
    /// The read buffer all connections polled on this thread share: a read lands here and
    /// only what is left after whole frames were taken is copied to the connection.
    static SCRATCH: RefCell<Box<[u8]>> = RefCell::new(vec![0; READ_CHUNK].into_boxed_slice());
}

/// Where a connection's reading stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReadState {
    /// Frames may come.
    Open,
    /// The socket ended (or failed) after the bytes in `rd`; the end is reported once
    /// they are taken.
    Eof,
    /// The server's close was handed out, or the end was: nothing more comes.
    Done,
}

/// A reassembled fragmented message: its kind and the payload so far.
#[derive(Debug)]
struct Fragments {
    text: bool,
    payload: Vec<u8>,
}

/// One WebSocket connection, client side, over a socket (any byte stream for the fuzz
/// target, [`crate::fuzzing::ws_frames`]).
#[derive(Debug)]
pub struct Ws<S = Stream> {
    io: S,
    /// Bytes read and not yet taken as frames, from `rd_at`; no allocation while none.
    rd: Vec<u8>,
    rd_at: usize,
    /// Why reading ended, once it has (an I/O error is reported as such).
    rd_error: Option<io::Error>,
    state: ReadState,
    /// Encoded frames not yet written, from `wr_at`; no allocation while none.
    wr: Vec<u8>,
    wr_at: usize,
    /// A pong or close reply is waiting in `wr`: pushed out when reading.
    reply: bool,
    /// A close frame was queued: nothing more may be sent.
    closing: bool,
    /// A fragmented message in progress (rare: boxed).
    frag: Option<Box<Fragments>>,
    /// The largest message accepted, bytes.
    max_message: usize,
}

impl Ws {
    /// When the bytes the last message came in reached this machine's kernel, when the
    /// socket stamps arrivals ([`crate::driver::kit::stamp`]).
    pub fn arrived(&self) -> Option<std::time::Instant> {
        self.io.arrived()
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> Ws<S> {
    /// A connection over `io` after its upgrade; `rest` holds bytes read past the
    /// upgrade response.
    pub(crate) fn new(io: S, rest: Vec<u8>) -> Ws<S> {
        Ws {
            io,
            rd: rest,
            rd_at: 0,
            rd_error: None,
            state: ReadState::Open,
            wr: Vec::new(),
            wr_at: 0,
            reply: false,
            closing: false,
            frag: None,
            max_message: MAX_MESSAGE,
        }
    }

    /// Accepts messages as large as a body of `max_body` bytes and what wraps it (at least
    /// [`MAX_MESSAGE`]), so every `size` a scenario allows comes through.
    pub(super) fn fit(&mut self, max_body: usize) {
        self.max_message = MAX_MESSAGE.max(max_body.saturating_add(BODY_SLACK));
    }

    /// Queues `msg` (written at the next flush, or at once when the queue is full),
    /// reading meanwhile.
    pub async fn write(&mut self, msg: Message) -> Result<(), super::Failure> {
        if self.closing {
            return Err(super::Failure::new(
                ErrorKind::SendFailed,
                Error::Protocol(ProtocolError::SendAfterClosing).to_string(),
            ));
        }
        if self.wr.len() >= WRITE_COALESCE {
            poll_fn(|cx| self.poll_write_out(cx))
                .await
                .map_err(|e| io_error::classify(&e))?;
        }
        match msg {
            Message::Text(t) => self.encode(OpCode::Data(Data::Text), t.as_bytes()),
            Message::Binary(b) => self.encode(OpCode::Data(Data::Binary), &b),
            Message::Ping(p) => self.encode(OpCode::Control(Control::Ping), &p),
            Message::Pong(p) => self.encode(OpCode::Control(Control::Pong), &p),
            Message::Close(frame) => {
                self.closing = true;
                self.encode_close(frame.as_ref());
            }
            Message::Frame(f) => self.encode(f.header().opcode, f.payload()),
        }
        Ok(())
    }

    /// Writes everything queued, reading meanwhile.
    pub async fn flush(&mut self) -> Result<(), super::Failure> {
        poll_fn(|cx| {
            ready!(self.poll_write_out(cx))?;
            match Pin::new(&mut self.io).poll_flush(cx) {
                Poll::Pending => {
                    self.read_while_blocked(cx);
                    Poll::Pending
                }
                done => done,
            }
        })
        .await
        .map_err(|e| io_error::classify(&e))
    }

    /// The next message (`None` when the stream ended). Cancel-safe: everything read is
    /// kept in the connection.
    pub async fn next(&mut self) -> Option<Result<Message, Error>> {
        poll_fn(|cx| self.poll_next(cx)).await
    }

    /// Whether bytes were read that no message was taken from yet (a whole frame or a
    /// part of one).
    pub fn holds_unread(&self) -> bool {
        self.rd_at < self.rd.len()
    }

    /// Closes the connection, waiting at most one second for the close frame to go out.
    pub async fn close(mut self) {
        let close = async {
            if !self.closing {
                self.closing = true;
                self.encode_close(None);
            }
            let _ = self.flush().await;
        };
        let _ = tokio::time::timeout(std::time::Duration::from_secs(1), close).await;
    }

    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Message, Error>>> {
        self.push_reply(cx);
        loop {
            if self.state == ReadState::Done {
                return Poll::Ready(None);
            }
            let taken = self.take_frame();
            if let Some(handed) = self.hand_out(taken, cx) {
                return Poll::Ready(handed);
            }
            if self.state == ReadState::Eof {
                self.end();
                return Poll::Ready(Some(Err(match self.rd_error.take() {
                    Some(e) => Error::Io(e),
                    None => Error::Protocol(ProtocolError::ResetWithoutClosingHandshake),
                })));
            }
            let taken = ready!(self.poll_fill(cx, true));
            if let Some(handed) = self.hand_out(taken, cx) {
                return Poll::Ready(handed);
            }
        }
    }

    /// What `poll_next` hands out for a frame taken: the message, or the error (answered
    /// with a close, and nothing read after it); `None` when no message was taken.
    fn hand_out(
        &mut self,
        taken: Result<Option<Message>, Error>,
        cx: &mut Context<'_>,
    ) -> Option<Option<Result<Message, Error>>> {
        match taken {
            Ok(Some(msg)) => {
                self.push_reply(cx);
                Some(Some(Ok(msg)))
            }
            Ok(None) => None,
            Err(e) => {
                self.refuse(&e, cx);
                self.end();
                Some(Some(Err(e)))
            }
        }
    }

    /// Writes a queued pong or close reply as far as the socket takes it now. A failed
    /// write is not reported here: the message just read is handed out, and the broken
    /// connection shows at the next read or write.
    fn push_reply(&mut self, cx: &mut Context<'_>) {
        if self.reply && self.poll_write_out(cx).is_ready() {
            self.reply = false;
        }
    }

    /// Answers a frame the protocol does not allow with a close saying why (1009 for a
    /// message over the limit, 1007 for text that is not UTF-8, 1002 otherwise), written as
    /// far as the socket takes it now; nothing is sent after it.
    fn refuse(&mut self, e: &Error, cx: &mut Context<'_>) {
        if !self.closing {
            let code = match e {
                Error::Capacity(_) => CloseCode::Size,
                Error::Utf8(_) => CloseCode::Invalid,
                _ => CloseCode::Protocol,
            };
            let mut reason = e.to_string();
            let mut cut = reason.len().min(MAX_REASON);
            while !reason.is_char_boundary(cut) {
                cut -= 1;
            }
            reason.truncate(cut);
            self.closing = true;
            self.encode_close(Some(&CloseFrame {
                code,
                reason: reason.into(),
            }));
            self.reply = true;
        }
        self.push_reply(cx);
    }

    /// Nothing more is read; the read buffer goes.
    fn end(&mut self) {
        self.state = ReadState::Done;
        self.rd = Vec::new();
        self.rd_at = 0;
        self.frag = None;
    }

    /// Reads once from the socket into the shared buffer; ready when something came or
    /// the stream ended (then `state` is `Eof`). With `take`, and nothing unread before
    /// the read, the first message is taken from the shared buffer itself: only what
    /// follows it is kept in the connection, so a read of one frame copies nothing but
    /// the message. Without `take` everything read is kept.
    fn poll_fill(
        &mut self,
        cx: &mut Context<'_>,
        take: bool,
    ) -> Poll<Result<Option<Message>, Error>> {
        SCRATCH.with_borrow_mut(|scratch| {
            let mut buf = ReadBuf::new(&mut scratch[..]);
            match ready!(Pin::new(&mut self.io).poll_read(cx, &mut buf)) {
                Ok(()) if buf.filled().is_empty() => self.state = ReadState::Eof,
                Ok(()) if take && !self.holds_unread() => {
                    let read = buf.filled();
                    let (msg, used) = self.take_from(read)?;
                    self.rd.clear();
                    self.rd_at = 0;
                    self.rd.extend_from_slice(&read[used..]);
                    return Poll::Ready(Ok(msg));
                }
                Ok(()) => {
                    if self.rd_at > 0 {
                        self.rd.drain(..self.rd_at);
                        self.rd_at = 0;
                    }
                    self.rd.extend_from_slice(buf.filled());
                }
                Err(e) => {
                    self.rd_error = Some(e);
                    self.state = ReadState::Eof;
                }
            }
            Poll::Ready(Ok(None))
        })
    }

    /// Reads everything already received, so a server blocked writing to us can go on
    /// and read what we write. Pending once nothing more is there (the task then wakes
    /// on new data as well).
    fn read_while_blocked(&mut self, cx: &mut Context<'_>) {
        while self.state == ReadState::Open && self.poll_fill(cx, false).is_ready() {}
    }

    /// Writes the queued frames, reading meanwhile; frees the queue once it drained.
    fn poll_write_out(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.wr_at < self.wr.len() {
            match Pin::new(&mut self.io).poll_write(cx, &self.wr[self.wr_at..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => self.wr_at += n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => {
                    self.read_while_blocked(cx);
                    return Poll::Pending;
                }
            }
        }
        self.wr = Vec::new();
        self.wr_at = 0;
        Poll::Ready(Ok(()))
    }

    /// Appends one masked frame with `payload`.
    fn encode(&mut self, opcode: OpCode, payload: &[u8]) {
        if self.wr.capacity() == 0 {
            // The first frame after a drain: room for a burst of them at once, rather than
            // growing the buffer frame by frame after every flush.
            self.wr.reserve(WRITE_START.max(payload.len() + 14));
        }
        let mask = fastrand::u32(..).to_ne_bytes();
        let header = FrameHeader {
            is_final: true,
            rsv1: false,
            rsv2: false,
            rsv3: false,
            opcode,
            mask: Some(mask),
        };
        // Formatting into a Vec cannot fail.
        let _ = header.format(payload.len() as u64, &mut self.wr);
        let start = self.wr.len();
        self.wr.extend_from_slice(payload);
        // Four bytes at a time (the mask repeats every four bytes of the payload).
        let key = u32::from_ne_bytes(mask);
        let mut words = self.wr[start..].chunks_exact_mut(4);
        for w in &mut words {
            let masked = u32::from_ne_bytes([w[0], w[1], w[2], w[3]]) ^ key;
            w.copy_from_slice(&masked.to_ne_bytes());
        }
        for (b, m) in words.into_remainder().iter_mut().zip(mask) {
            *b ^= m;
        }
    }

    /// Appends a close frame (with `frame`'s code and reason, if any).
    fn encode_close(&mut self, frame: Option<&CloseFrame>) {
        let mut payload = Vec::new();
        if let Some(f) = frame {
            payload.extend_from_slice(&u16::from(f.code).to_be_bytes());
            payload.extend_from_slice(f.reason.as_bytes());
        }
        self.encode(OpCode::Control(Control::Close), &payload);
    }

    /// Takes the next whole frame from the read buffer: a message to hand out, or `None`
    /// when more bytes are needed ([`Ws::take_from`]).
    fn take_frame(&mut self) -> Result<Option<Message>, Error> {
        if !self.holds_unread() {
            return Ok(None);
        }
        let rd = std::mem::take(&mut self.rd);
        let taken = self.take_from(&rd[self.rd_at..]);
        self.rd = rd;
        let (msg, used) = taken?;
        self.rd_at += used;
        if self.rd_at == self.rd.len() {
            self.rd = Vec::new();
            self.rd_at = 0;
        }
        Ok(msg)
    }

    /// Takes whole frames from the start of `buf` until one is a message to hand out: that
    /// message (`None` when more bytes are needed) and the bytes the frames taken used.
    /// Control frames are answered here. A frame is judged by its header before its
    /// payload is waited for: a header the protocol does not allow fails at once, however
    /// long the payload it declares.
    fn take_from(&mut self, buf: &[u8]) -> Result<(Option<Message>, usize), Error> {
        let mut used = 0;
        loop {
            let rest = &buf[used..];
            let mut cursor = Cursor::new(rest);
            let Some((header, len)) = FrameHeader::parse(&mut cursor)? else {
                return Ok((None, used));
            };
            let head = cursor.position() as usize;
            let kind = self.check_header(&header, len)?;
            // Within the message limit, which is a `usize`.
            let len = len as usize;
            if rest.len() - head < len {
                return Ok((None, used));
            }
            let msg = self.frame(kind, header.is_final, &rest[head..head + len])?;
            used += head + len;
            if msg.is_some() {
                return Ok((msg, used));
            }
        }
    }

    /// What a frame with `header` and a payload of `len` bytes is, or why the protocol
    /// does not allow it (RFC 6455 §5.2, §5.4, §5.5): a masked server frame, reserved bits
    /// without an extension, a fragmented or oversized control frame, a fragment out of
    /// place, or a message over the limit.
    fn check_header(&self, header: &FrameHeader, len: u64) -> Result<Kind, Error> {
        let protocol = |e| Err(Error::Protocol(e));
        if header.mask.is_some() {
            return protocol(ProtocolError::MaskedFrameFromServer);
        }
        if header.rsv1 || header.rsv2 || header.rsv3 {
            return protocol(ProtocolError::NonZeroReservedBits);
        }
        let kind = match header.opcode {
            OpCode::Control(_) if !header.is_final => {
                return protocol(ProtocolError::FragmentedControlFrame)
            }
            OpCode::Control(_) if len > MAX_CONTROL => {
                return protocol(ProtocolError::ControlFrameTooBig)
            }
            OpCode::Control(Control::Ping) => return Ok(Kind::Ping),
            OpCode::Control(Control::Pong) => return Ok(Kind::Pong),
            OpCode::Control(Control::Close) => return Ok(Kind::Close),
            OpCode::Control(Control::Reserved(i)) => {
                return protocol(ProtocolError::UnknownControlFrameType(i))
            }
            OpCode::Data(Data::Reserved(i)) => {
                return protocol(ProtocolError::UnknownDataFrameType(i))
            }
            OpCode::Data(Data::Continue) if self.frag.is_none() => {
                return protocol(ProtocolError::UnexpectedContinueFrame)
            }
            OpCode::Data(d @ (Data::Text | Data::Binary)) if self.frag.is_some() => {
                return protocol(ProtocolError::ExpectedFragment(d))
            }
            OpCode::Data(Data::Continue) => Kind::Continue,
            OpCode::Data(d) => Kind::Data {
                text: d == Data::Text,
            },
        };
        let so_far = self.frag.as_ref().map_or(0, |f| f.payload.len());
        let size = (so_far as u64).checked_add(len);
        match size {
            Some(size) if size <= self.max_message as u64 => Ok(kind),
            _ => Err(Error::Capacity(CapacityError::MessageTooLong {
                size: usize::try_from(size.unwrap_or(u64::MAX)).unwrap_or(usize::MAX),
                max_size: self.max_message,
            })),
        }
    }

    /// What the frame of `kind` with `payload` is, its header checked
    /// ([`Ws::check_header`]).
    fn frame(
        &mut self,
        kind: Kind,
        is_final: bool,
        payload: &[u8],
    ) -> Result<Option<Message>, Error> {
        match kind {
            Kind::Ping => {
                let data = Bytes::copy_from_slice(payload);
                if !self.closing {
                    self.encode(OpCode::Control(Control::Pong), &data);
                    self.reply = true;
                }
                Ok(Some(Message::Ping(data)))
            }
            Kind::Pong => Ok(Some(Message::Pong(Bytes::copy_from_slice(payload)))),
            Kind::Close => {
                let frame = close_frame(payload)?;
                if !self.closing {
                    self.closing = true;
                    // A code no endpoint may send (RFC 6455 §7.4) is not echoed.
                    let reply = match &frame {
                        Some(f) if !f.code.is_allowed() => Some(CloseFrame {
                            code: CloseCode::Protocol,
                            reason: Utf8Bytes::from_static("Protocol violation"),
                        }),
                        other => other.clone(),
                    };
                    self.encode_close(reply.as_ref());
                    self.reply = true;
                }
                self.state = ReadState::Done;
                Ok(Some(Message::Close(frame)))
            }
            Kind::Continue => {
                let Some(mut frag) = self.frag.take() else {
                    return Err(Error::Protocol(ProtocolError::UnexpectedContinueFrame));
                };
                frag.payload.extend_from_slice(payload);
                if !is_final {
                    self.frag = Some(frag);
                    return Ok(None);
                }
                message(frag.text, Bytes::from(frag.payload)).map(Some)
            }
            Kind::Data { text } => {
                if is_final {
                    return message(text, Bytes::copy_from_slice(payload)).map(Some);
                }
                self.frag = Some(Box::new(Fragments {
                    text,
                    payload: payload.to_vec(),
                }));
                Ok(None)
            }
        }
    }
}

/// What a frame whose header passed [`Ws::check_header`] is.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Ping,
    Pong,
    Close,
    /// A continuation of the fragmented message in progress.
    Continue,
    /// The first (or only) frame of a message.
    Data {
        text: bool,
    },
}

/// A whole text or binary message.
fn message(text: bool, payload: Bytes) -> Result<Message, Error> {
    Ok(if text {
        Message::Text(Utf8Bytes::try_from(payload)?)
    } else {
        Message::Binary(payload)
    })
}

/// The code and reason of a close frame's payload (none when it is empty).
fn close_frame(payload: &[u8]) -> Result<Option<CloseFrame>, Error> {
    match payload {
        [] => Ok(None),
        [_] => Err(Error::Protocol(ProtocolError::InvalidCloseSequence)),
        [a, b, reason @ ..] => Ok(Some(CloseFrame {
            code: CloseCode::from(u16::from_be_bytes([*a, *b])),
            reason: Utf8Bytes::try_from(Bytes::copy_from_slice(reason))?,
        })),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures_util::{SinkExt, StreamExt};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};
    use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
    use tokio_tungstenite::tungstenite::protocol::frame::Frame;

    use super::*;
    use crate::driver::echo::EchoDriver;
    use crate::driver::{Driver, Endpoint};

    /// A tokio-tungstenite server on 127.0.0.1 that runs `script` on its one connection,
    /// and a [`Ws`] connected to it.
    async fn pair<F, Fut>(script: F) -> (Ws, tokio::task::JoinHandle<()>)
    where
        F: FnOnce(tokio_tungstenite::WebSocketStream<TcpStream>) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send,
    {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let server = tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.expect("accept");
            script(tokio_tungstenite::accept_async(tcp).await.expect("upgrade")).await;
        });
        let ep = Endpoint::parse(&format!("ws://{addr}/"), &EchoDriver::SPEC).expect("url");
        let tcp = TcpStream::connect(addr).await.expect("connect");
        let ws = super::super::upgrade(super::Stream::unmetered(tcp), &ep)
            .await
            .expect("open");
        (ws, server)
    }

    #[tokio::test]
    async fn frames_read_together_show_as_unread_until_the_last_is_taken() {
        let (sent, written) = tokio::sync::oneshot::channel();
        let (mut ws, server) = pair(|mut s| async move {
            // Nothing before the client asks: the upgrade's read takes no frame with it.
            let _ = s.next().await;
            for text in ["one", "two"] {
                s.feed(Message::text(text)).await.expect("feed");
            }
            s.flush().await.expect("flush");
            let _ = sent.send(());
            let _ = s.next().await;
        })
        .await;
        assert!(!ws.holds_unread(), "nothing read yet");
        ws.write(Message::text("go")).await.expect("queued");
        ws.flush().await.expect("written");
        written.await.expect("the server wrote both");
        let first = ws.next().await.expect("a message").expect("text");
        assert_eq!(first, Message::text("one"));
        assert!(ws.holds_unread(), "the second came in the same read");
        let second = ws.next().await.expect("a message").expect("text");
        assert_eq!(second, Message::text("two"));
        assert!(!ws.holds_unread(), "both taken");
        drop(ws);
        server.await.expect("server");
    }

    #[tokio::test]
    async fn fragments_pings_and_close_are_handled_as_tungstenite_does() {
        let (mut ws, server) = pair(|mut s| async move {
            let part =
                |text: &str, op, fin| Message::Frame(Frame::message(text.to_owned(), op, fin));
            s.send(part("hel", OpCode::Data(Data::Text), false))
                .await
                .expect("1");
            s.send(Message::Ping(Bytes::from_static(b"p1")))
                .await
                .expect("ping");
            s.send(part("lo", OpCode::Data(Data::Continue), true))
                .await
                .expect("2");
            // The client answers the ping by itself, and echoes what it is sent.
            assert_eq!(
                s.next().await.expect("pong").expect("ok"),
                Message::Pong(Bytes::from_static(b"p1"))
            );
            let big = s.next().await.expect("big").expect("ok");
            s.send(big).await.expect("echo");
            s.close(Some(CloseFrame {
                code: CloseCode::Away,
                reason: "bye".into(),
            }))
            .await
            .expect("close");
            // The client answers the close with its own.
            while let Some(Ok(m)) = s.next().await {
                if let Message::Close(f) = m {
                    assert_eq!(f.expect("code").code, CloseCode::Away);
                    return;
                }
            }
            panic!("no close reply");
        })
        .await;
        assert_eq!(
            ws.next().await.expect("ping").expect("ok"),
            Message::Ping(Bytes::from_static(b"p1"))
        );
        assert_eq!(
            ws.next().await.expect("text").expect("ok"),
            Message::text("hello")
        );
        assert_eq!(ws.rd.capacity(), 0, "no read buffer is kept between frames");
        // Larger than the shared read buffer and the write coalescing: read in pieces.
        let big = "x".repeat(3 * READ_CHUNK + 7);
        ws.write(Message::text(big.clone())).await.expect("write");
        ws.flush().await.expect("flush");
        assert_eq!(
            ws.wr.capacity(),
            0,
            "the write buffer is freed once drained"
        );
        assert_eq!(
            ws.next().await.expect("big").expect("ok"),
            Message::text(big)
        );
        match ws.next().await.expect("close").expect("ok") {
            Message::Close(Some(f)) => assert_eq!(f.reason, "bye"),
            other => panic!("expected the close, got {other:?}"),
        }
        assert!(ws.next().await.is_none());
        assert!(ws.write(Message::text("late")).await.is_err());
        server.await.expect("server");
    }

    #[tokio::test]
    async fn bad_frames_and_a_reset_are_errors() {
        let (mut ws, server) = pair(|mut s| async move {
            let mut masked = Frame::message("m", OpCode::Data(Data::Text), true);
            masked.header_mut().mask = Some([1, 2, 3, 4]);
            s.send(Message::Frame(masked)).await.expect("send");
        })
        .await;
        match ws.next().await {
            Some(Err(Error::Protocol(ProtocolError::MaskedFrameFromServer))) => {}
            other => panic!("expected a masked-frame error, got {other:?}"),
        }
        assert!(ws.next().await.is_none());
        server.await.expect("server");

        let (mut ws, server) = pair(|s| async move { drop(s) }).await;
        server.await.expect("server");
        match ws.next().await {
            Some(Err(Error::Protocol(ProtocolError::ResetWithoutClosingHandshake))) => {}
            other => panic!("expected a reset, got {other:?}"),
        }
    }

    /// The longest a test waits for anything.
    const WAIT: Duration = Duration::from_secs(5);

    /// A hand-written server on 127.0.0.1 playing a peer no real server plays: it upgrades
    /// its one connection, writes `bytes` and then stays silent, reading until the client's
    /// close frame. Its handle gives that close's code and reason (`None`: the client
    /// ended without one).
    async fn hostile(bytes: Vec<u8>) -> (Ws, tokio::task::JoinHandle<Option<(u16, String)>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let server = tokio::spawn(async move {
            let (mut tcp, _) = listener.accept().await.expect("accept");
            let mut request = Vec::new();
            while !request.ends_with(b"\r\n\r\n") {
                request.push(tcp.read_u8().await.expect("request"));
            }
            let request = String::from_utf8(request).expect("text");
            let key = request
                .lines()
                .find_map(|l| l.strip_prefix("Sec-WebSocket-Key: "))
                .expect("key");
            let accept = derive_accept_key(key.as_bytes());
            let head = format!(
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\
                 Connection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
            );
            tcp.write_all(head.as_bytes()).await.expect("upgrade");
            tcp.write_all(&bytes).await.expect("frames");
            client_close(&mut tcp).await
        });
        let ep = Endpoint::parse(&format!("ws://{addr}/"), &EchoDriver::SPEC).expect("url");
        let tcp = TcpStream::connect(addr).await.expect("connect");
        let ws = super::super::upgrade(super::Stream::unmetered(tcp), &ep)
            .await
            .expect("open");
        (ws, server)
    }

    /// Reads the client's frames until its close: the close's code and reason, or `None`
    /// when the stream ends first.
    async fn client_close(tcp: &mut TcpStream) -> Option<(u16, String)> {
        let mut buf = Vec::new();
        loop {
            let mut cursor = Cursor::new(&buf);
            if let Some((header, len)) = FrameHeader::parse(&mut cursor).expect("a client frame") {
                let at = cursor.position() as usize;
                let end = at + len as usize;
                if buf.len() >= end {
                    let mask = header.mask.expect("client frames are masked");
                    let payload: Vec<u8> = (at..end).map(|i| buf[i] ^ mask[(i - at) % 4]).collect();
                    if header.opcode == OpCode::Control(Control::Close) {
                        let code = u16::from_be_bytes([payload[0], payload[1]]);
                        let reason = String::from_utf8(payload[2..].to_vec()).expect("reason");
                        return Some((code, reason));
                    }
                    buf.drain(..end);
                    continue;
                }
            }
            if tcp.read_buf(&mut buf).await.ok()? == 0 {
                return None;
            }
        }
    }

    /// A frame header from the server: first byte, then the length as the client must
    /// read it (7-bit, 16-bit or 64-bit form), unmasked.
    fn header(first: u8, len: u64) -> Vec<u8> {
        let mut out = vec![first];
        match len {
            0..=125 => out.push(len as u8),
            126..=0xFFFF => {
                out.push(126);
                out.extend_from_slice(&(len as u16).to_be_bytes());
            }
            _ => {
                out.push(127);
                out.extend_from_slice(&len.to_be_bytes());
            }
        }
        out
    }

    /// Every violation a frame's header shows fails the read at once — the declared
    /// payload never comes, and the server stays silent — and is answered with a close
    /// naming it: 1002 for the protocol, 1009 for a message over the limit.
    #[tokio::test]
    async fn a_forbidden_header_fails_at_once_and_is_answered_with_a_close() {
        let text_start = [&header(0x01, 3)[..], b"abc"].concat();
        let mut masked = header(0x81, 1 << 20);
        masked[1] |= 0x80;
        masked.extend_from_slice(&[1, 2, 3, 4]);
        let cases: Vec<(&str, Vec<u8>, u16)> = vec![
            ("a 1 MiB ping", header(0x89, 1 << 20), 1002),
            ("a 126-byte close", header(0x88, 126), 1002),
            ("a fragmented ping", header(0x09, 4), 1002),
            ("a reserved data opcode", header(0x83, 1 << 20), 1002),
            ("a reserved control opcode", header(0x8B, 0), 1002),
            ("RSV1 without an extension", header(0xC1, 1 << 20), 1002),
            ("RSV3 on a ping", header(0x99, 0), 1002),
            ("a masked frame", masked, 1002),
            ("a continuation of nothing", header(0x80, u64::MAX), 1002),
            (
                "a new message inside a fragmented one",
                [&text_start[..], &header(0x81, 1 << 20)].concat(),
                1002,
            ),
            ("a message of 2^64-1 bytes", header(0x82, u64::MAX), 1009),
            (
                "a continuation of 2^64-1 bytes",
                [&text_start[..], &header(0x80, u64::MAX)].concat(),
                1009,
            ),
            ("a message over 16 MiB", header(0x82, (16 << 20) + 1), 1009),
        ];
        for (what, bytes, code) in cases {
            let (mut ws, server) = hostile(bytes).await;
            let got = tokio::time::timeout(WAIT, ws.next())
                .await
                .unwrap_or_else(|_| panic!("{what}: the read hangs"));
            let kind = classify_read(got);
            let want = if code == 1009 { "capacity" } else { "protocol" };
            assert_eq!(kind, want, "{what}");
            assert!(ws.next().await.is_none(), "{what}: the read ended");
            let close = tokio::time::timeout(WAIT, server)
                .await
                .expect("the close arrives")
                .expect("server");
            let (got_code, reason) = close.unwrap_or_else(|| panic!("{what}: no close sent"));
            assert_eq!(got_code, code, "{what}: {reason}");
            assert!(ws.write(Message::text("after")).await.is_err(), "{what}");
        }
    }

    /// Which error a read gave: "protocol", "capacity", or what else came.
    fn classify_read(got: Option<Result<Message, Error>>) -> String {
        match got {
            Some(Err(Error::Protocol(_))) => "protocol".into(),
            Some(Err(Error::Capacity(CapacityError::MessageTooLong { .. }))) => "capacity".into(),
            other => format!("{other:?}"),
        }
    }

    /// Close codes no endpoint may send (RFC 6455 §7.4: 1005, 1006, 1015, below 1000,
    /// the reserved 1016–2999) are answered with 1002, not echoed; allowed ones are
    /// echoed.
    #[tokio::test]
    async fn a_forbidden_close_code_is_answered_with_1002() {
        for (code, answer) in [
            (1005, 1002),
            (999, 1002),
            (1006, 1002),
            (1015, 1002),
            (2000, 1002),
            (1000, 1000),
            (4000, 4000),
        ] {
            let frame = [&header(0x88, 2)[..], &u16::to_be_bytes(code)].concat();
            let (mut ws, server) = hostile(frame).await;
            match tokio::time::timeout(WAIT, ws.next()).await.expect("close") {
                Some(Ok(Message::Close(Some(f)))) => assert_eq!(u16::from(f.code), code),
                other => panic!("{code}: expected the close, got {other:?}"),
            }
            ws.close().await;
            let (got, _) = tokio::time::timeout(WAIT, server)
                .await
                .expect("the reply arrives")
                .expect("server")
                .expect("a close reply");
            assert_eq!(got, answer, "close {code}");
        }
    }

    /// Text that is not UTF-8 is an error answered with 1007.
    #[tokio::test]
    async fn text_that_is_not_utf8_is_answered_with_1007() {
        let (mut ws, server) = hostile([&header(0x81, 2)[..], &[0xC3, 0x28]].concat()).await;
        assert!(matches!(ws.next().await, Some(Err(Error::Utf8(_)))));
        let close = tokio::time::timeout(WAIT, server).await.expect("close");
        assert_eq!(close.expect("server").expect("a close").0, 1007);
    }

    /// Messages up to the run's largest body come through (past the 16 MiB floor), from
    /// a real tungstenite server.
    #[tokio::test]
    async fn a_message_as_large_as_the_largest_body_comes_through() {
        let size = (16 << 20) + 5;
        let (mut ws, server) = pair(move |mut s| async move {
            s.send(Message::binary(vec![7u8; size]))
                .await
                .expect("send");
            // The client refuses this one and closes: the rest of it may not go out.
            let _ = s
                .send(Message::binary(vec![7u8; size + BODY_SLACK + 1]))
                .await;
        })
        .await;
        ws.fit(size);
        match ws.next().await {
            Some(Ok(Message::Binary(b))) => assert_eq!(b.len(), size),
            other => panic!(
                "expected the message, got {:?}",
                other.map(|m| m.map(|m| m.len()))
            ),
        }
        match ws.next().await {
            Some(Err(Error::Capacity(CapacityError::MessageTooLong { max_size, .. }))) => {
                assert_eq!(max_size, size + BODY_SLACK);
            }
            other => panic!(
                "expected too long, got {:?}",
                other.map(|m| m.map(|m| m.len()))
            ),
        }
        ws.close().await;
        server.await.expect("server");
    }
}
