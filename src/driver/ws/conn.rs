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
//! answered and ends the stream, masked or malformed server frames and messages above
//! [`MAX_MESSAGE`] are protocol errors, fragmented messages are reassembled, and a stream
//! that ends without a close is `ResetWithoutClosingHandshake`.

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
use crate::driver::io_error;
use crate::metrics::ErrorKind;

/// Bytes read from the socket at most per read, into the worker's shared buffer.
const READ_CHUNK: usize = 64 << 10;
/// Frames queue up to this many bytes before they are written without a flush, so the
/// frames of one wake-up go out in one write.
const WRITE_COALESCE: usize = 64 << 10;
/// Room the write buffer starts with when frames are queued after it drained.
const WRITE_START: usize = 4 << 10;
/// The largest message accepted from a server.
const MAX_MESSAGE: usize = 16 << 20;
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

/// One WebSocket connection, client side.
#[derive(Debug)]
pub struct Ws {
    io: Stream,
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
}

impl Ws {
    /// A connection over `io` after its upgrade; `rest` holds bytes read past the
    /// upgrade response.
    pub(super) fn new(io: Stream, rest: Vec<u8>) -> Ws {
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
        }
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
            match self.take_frame() {
                Ok(Some(msg)) => {
                    self.push_reply(cx);
                    return Poll::Ready(Some(Ok(msg)));
                }
                Ok(None) => {}
                Err(e) => {
                    self.end();
                    return Poll::Ready(Some(Err(e)));
                }
            }
            if self.state == ReadState::Eof {
                self.end();
                return Poll::Ready(Some(Err(match self.rd_error.take() {
                    Some(e) => Error::Io(e),
                    None => Error::Protocol(ProtocolError::ResetWithoutClosingHandshake),
                })));
            }
            ready!(self.poll_fill(cx));
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

    /// Nothing more is read; the read buffer goes.
    fn end(&mut self) {
        self.state = ReadState::Done;
        self.rd = Vec::new();
        self.rd_at = 0;
        self.frag = None;
    }

    /// Reads once from the socket into the shared buffer and keeps what came; ready
    /// when something came or the stream ended (then `state` is `Eof`).
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        SCRATCH.with_borrow_mut(|scratch| {
            let mut buf = ReadBuf::new(&mut scratch[..]);
            match ready!(Pin::new(&mut self.io).poll_read(cx, &mut buf)) {
                Ok(()) if buf.filled().is_empty() => self.state = ReadState::Eof,
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
            Poll::Ready(())
        })
    }

    /// Reads everything already received, so a server blocked writing to us can go on
    /// and read what we write. Pending once nothing more is there (the task then wakes
    /// on new data as well).
    fn read_while_blocked(&mut self, cx: &mut Context<'_>) {
        while self.state == ReadState::Open && self.poll_fill(cx).is_ready() {}
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
    /// when more bytes are needed. Control frames are answered here.
    fn take_frame(&mut self) -> Result<Option<Message>, Error> {
        loop {
            let buf = &self.rd[self.rd_at..];
            let mut cursor = Cursor::new(buf);
            let Some((header, len)) = FrameHeader::parse(&mut cursor)? else {
                return Ok(None);
            };
            let head = cursor.position() as usize;
            let so_far = self.frag.as_ref().map_or(0, |f| f.payload.len());
            if len > (MAX_MESSAGE - so_far) as u64 {
                return Err(Error::Capacity(CapacityError::MessageTooLong {
                    size: so_far + len as usize,
                    max_size: MAX_MESSAGE,
                }));
            }
            let len = len as usize;
            if buf.len() - head < len {
                return Ok(None);
            }
            let payload = head..head + len;
            let msg = self.frame(&header, payload.start, payload.end);
            self.rd_at += payload.end;
            if self.rd_at == self.rd.len() {
                self.rd = Vec::new();
                self.rd_at = 0;
            }
            if let Some(msg) = msg? {
                return Ok(Some(msg));
            }
        }
    }

    /// What the frame at `self.rd[rd_at + start..rd_at + end]` with `header` is.
    fn frame(
        &mut self,
        header: &FrameHeader,
        start: usize,
        end: usize,
    ) -> Result<Option<Message>, Error> {
        let protocol = |e| Err(Error::Protocol(e));
        if header.mask.is_some() {
            return protocol(ProtocolError::MaskedFrameFromServer);
        }
        if header.rsv1 || header.rsv2 || header.rsv3 {
            return protocol(ProtocolError::NonZeroReservedBits);
        }
        let payload = &self.rd[self.rd_at + start..self.rd_at + end];
        match header.opcode {
            OpCode::Control(c) => {
                if !header.is_final {
                    return protocol(ProtocolError::FragmentedControlFrame);
                }
                if payload.len() as u64 > MAX_CONTROL {
                    return protocol(ProtocolError::ControlFrameTooBig);
                }
                match c {
                    Control::Ping => {
                        let data = Bytes::copy_from_slice(payload);
                        if !self.closing {
                            self.encode(OpCode::Control(Control::Pong), &data);
                            self.reply = true;
                        }
                        Ok(Some(Message::Ping(data)))
                    }
                    Control::Pong => Ok(Some(Message::Pong(Bytes::copy_from_slice(payload)))),
                    Control::Close => {
                        let frame = close_frame(payload)?;
                        if !self.closing {
                            self.closing = true;
                            self.encode_close(frame.as_ref());
                            self.reply = true;
                        }
                        self.state = ReadState::Done;
                        Ok(Some(Message::Close(frame)))
                    }
                    Control::Reserved(i) => protocol(ProtocolError::UnknownControlFrameType(i)),
                }
            }
            OpCode::Data(Data::Continue) => {
                let Some(mut frag) = self.frag.take() else {
                    return protocol(ProtocolError::UnexpectedContinueFrame);
                };
                frag.payload.extend_from_slice(payload);
                if !header.is_final {
                    self.frag = Some(frag);
                    return Ok(None);
                }
                message(frag.text, Bytes::from(frag.payload)).map(Some)
            }
            OpCode::Data(d @ (Data::Text | Data::Binary)) => {
                if self.frag.is_some() {
                    return protocol(ProtocolError::ExpectedFragment(d));
                }
                let text = d == Data::Text;
                if header.is_final {
                    return message(text, Bytes::copy_from_slice(payload)).map(Some);
                }
                self.frag = Some(Box::new(Fragments {
                    text,
                    payload: payload.to_vec(),
                }));
                Ok(None)
            }
            OpCode::Data(Data::Reserved(i)) => protocol(ProtocolError::UnknownDataFrameType(i)),
        }
    }
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
    use futures_util::{SinkExt, StreamExt};
    use tokio::net::{TcpListener, TcpStream};
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
        let ws = super::super::upgrade(super::Stream::Plain(tcp), &ep)
            .await
            .expect("open");
        (ws, server)
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
}
