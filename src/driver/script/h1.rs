//! HTTP/1.1 exchanges on one keep-alive connection, run by the task that uses it: a request
//! written in one write, the answer's head parsed by httparse (hyper's own parser) and its
//! body framed by `Content-Length`, by chunked transfer coding (httparse reads the chunk
//! sizes) or by the connection's close (RFC 9112 §6).
//!
//! Written here rather than taken whole from hyper's client because that client runs every
//! connection in a task of its own and hands each request and answer across it, through
//! its dispatcher, and no crate does HTTP/1.1 in the task that holds the connection. On the
//! HTTP budget (`bench/results/2026-11-28-script-http-budget.md`) hyper's connection task
//! alone was 21.5 k of the script side's 75 k instructions a delivery (sixth pass); this
//! module took the script side from 76.1 k to 58.6 k and from 106.8 to 88.3 µs of CPU a
//! delivery (ninth pass). What is here is only the framing around httparse; HTTP/2 stays on
//! hyper.

use std::task::Context;

use http::{HeaderMap, HeaderName, HeaderValue};
use hyper::body::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, ReadBuf};

use crate::driver::kit::connect::Stream;
use crate::driver::Failure;
use crate::metrics::ErrorKind;

/// The most bytes of an answer's head (status line and headers).
pub const MAX_HEAD: usize = 64 << 10;

/// The most headers of an answer's head (hyper's default, too).
const MAX_HEADERS: usize = 100;

/// Bytes asked of the socket per read: also what an idle connection holds once it has read
/// an answer (hyper's first read buffer is as large).
const READ_SIZE: usize = 8 << 10;

/// How an answer's body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// This many bytes are left (`Content-Length`).
    Length(u64),
    /// Chunked: a chunk's size line comes next.
    ChunkSize,
    /// Chunked: this many bytes of the chunk are left, then its CRLF.
    ChunkData(u64),
    /// Chunked: the CRLF after a chunk's data.
    ChunkEnd,
    /// Chunked: the trailer section after the last chunk.
    Trailers,
    /// Until the server closes the connection.
    Close,
    /// The body has ended.
    Done,
}

/// The head of an answer: its status and headers.
#[derive(Debug)]
pub struct Head {
    /// The status code.
    pub status: u16,
    /// The headers.
    pub headers: HeaderMap,
}

/// One HTTP/1.1 connection: the socket, what was read from it and not yet taken, and how
/// the answer being read ends.
#[derive(Debug)]
pub struct Connection {
    stream: Stream,
    /// Bytes read; `buf[at..]` are not taken yet.
    buf: Vec<u8>,
    at: usize,
    framing: Framing,
    /// The server keeps the connection open for the next request.
    keep_alive: bool,
}

impl Connection {
    /// A connection over `stream`, no request sent yet.
    pub fn new(stream: Stream) -> Connection {
        Connection {
            stream,
            buf: Vec::new(),
            at: 0,
            framing: Framing::Done,
            keep_alive: true,
        }
    }

    /// Whether the connection can carry no further request: an answer is being read, the
    /// server said it closes, or — looked at without waiting — it closed the connection or
    /// sent what no request asked for while the connection was idle.
    pub fn is_closed(&mut self) -> bool {
        if !self.reusable() {
            return true;
        }
        let mut probe = [0u8; 1];
        let mut read = ReadBuf::new(&mut probe);
        let mut cx = Context::from_waker(std::task::Waker::noop());
        // Pending: nothing has come, the connection is idle and open. Anything else
        // (the end, an error, a byte) ends it.
        let idle = std::pin::Pin::new(&mut self.stream)
            .poll_read(&mut cx, &mut read)
            .is_pending();
        if !idle {
            self.keep_alive = false;
        }
        !idle
    }

    /// Whether the last answer left the connection fit for the next request: read whole,
    /// nothing after it, and the server keeps the connection open.
    pub fn reusable(&self) -> bool {
        self.framing == Framing::Done && self.keep_alive && self.at == self.buf.len()
    }

    /// Sends `request` (a whole request, as [`encode`] writes it) and reads its answer's
    /// head; the body is read by [`Connection::piece`] or [`Connection::body`]. `head_only`:
    /// the request was a `HEAD`, whose answer has no body.
    pub async fn start(&mut self, request: &[u8], head_only: bool) -> Result<Head, Failure> {
        let written = match self.stream.write_all(request).await {
            Ok(()) => self.stream.flush().await,
            Err(e) => Err(e),
        };
        if let Err(e) = written {
            return Err(self.broken(ErrorKind::ClosedByPeer, &format!("the request: {e}")));
        }
        loop {
            let (len, head, version, close) = self.head().await?;
            self.at += len;
            if (100..200).contains(&head.status) && head.status != 101 {
                continue;
            }
            // After 101 the connection speaks another protocol.
            self.keep_alive = keeps_alive(version, close) && head.status != 101;
            self.framing =
                framing(head_only, &head).map_err(|e| self.broken(ErrorKind::Protocol, &e))?;
            if self.framing == Framing::Close {
                self.keep_alive = false;
            }
            return Ok(head);
        }
    }

    /// The whole body of the answer [`Connection::start`] began, at most `max` bytes.
    pub async fn body(&mut self, max: usize) -> Result<Bytes, Failure> {
        let over = |f: &mut Self| {
            f.broken(
                ErrorKind::Protocol,
                &format!("its body is over {max} bytes"),
            )
        };
        if matches!(self.framing, Framing::Length(n) if n > max as u64) {
            return Err(over(self));
        }
        let mut whole: Option<Vec<u8>> = None;
        let mut first = None;
        while let Some(piece) = self.piece().await? {
            let had = whole.as_ref().map_or(0, Vec::len) + first.as_ref().map_or(0, Bytes::len);
            if had + piece.len() > max {
                return Err(over(self));
            }
            match (&mut whole, first.take()) {
                (Some(w), _) => w.extend_from_slice(&piece),
                (None, None) => first = Some(piece),
                (None, Some(f)) => whole = Some([f, piece].concat()),
            }
        }
        Ok(whole.map_or_else(|| first.unwrap_or_default(), Bytes::from))
    }

    /// The next piece of the answer's body, `None` at its end.
    pub async fn piece(&mut self) -> Result<Option<Bytes>, Failure> {
        loop {
            match self.framing {
                Framing::Done => return Ok(None),
                Framing::Length(0) => self.framing = Framing::Done,
                Framing::Length(left) => {
                    let piece = self.take_up_to(left).await?;
                    self.framing = Framing::Length(left - piece.len() as u64);
                    return Ok(Some(piece));
                }
                Framing::ChunkData(0) => self.framing = Framing::ChunkEnd,
                Framing::ChunkData(left) => {
                    let piece = self.take_up_to(left).await?;
                    self.framing = Framing::ChunkData(left - piece.len() as u64);
                    return Ok(Some(piece));
                }
                Framing::Close => {
                    if self.at == self.buf.len() && self.fill().await? == 0 {
                        self.framing = Framing::Done;
                        return Ok(None);
                    }
                    let piece = Bytes::copy_from_slice(&self.buf[self.at..]);
                    self.at = self.buf.len();
                    return Ok(Some(piece));
                }
                Framing::ChunkSize | Framing::ChunkEnd | Framing::Trailers => {
                    self.chunk_line().await?;
                }
            }
        }
    }

    /// Reads the line the chunked framing is at: a chunk's size, the CRLF after its data,
    /// or a trailer (the empty line ends the body).
    async fn chunk_line(&mut self) -> Result<(), Failure> {
        loop {
            let unread = &self.buf[self.at..];
            match self.framing {
                Framing::ChunkSize => match httparse::parse_chunk_size(unread) {
                    Ok(httparse::Status::Complete((len, size))) => {
                        self.at += len;
                        self.framing = if size == 0 {
                            Framing::Trailers
                        } else {
                            Framing::ChunkData(size)
                        };
                        return Ok(());
                    }
                    Ok(httparse::Status::Partial) => {}
                    Err(_) => return Err(self.garbled("a chunk's size is not hexadecimal")),
                },
                Framing::ChunkEnd if unread.len() >= 2 => {
                    if &unread[..2] != b"\r\n" {
                        return Err(self.garbled("a chunk does not end with CRLF"));
                    }
                    self.at += 2;
                    self.framing = Framing::ChunkSize;
                    return Ok(());
                }
                Framing::Trailers => {
                    if let Some(end) = memchr::memchr(b'\n', unread) {
                        self.at += end + 1;
                        if end == 0 || (end == 1 && unread[0] == b'\r') {
                            self.framing = Framing::Done;
                        }
                        return Ok(());
                    }
                }
                _ => {}
            }
            if self.buf.len() - self.at > MAX_HEAD {
                return Err(self.garbled("a chunk's line is over 64 KiB"));
            }
            if self.fill().await? == 0 {
                return Err(self.closed("within the body"));
            }
        }
    }

    /// Up to `left` bytes of the body, reading when none is unread.
    async fn take_up_to(&mut self, left: u64) -> Result<Bytes, Failure> {
        if self.at == self.buf.len() && self.fill().await? == 0 {
            return Err(self.closed("within the body"));
        }
        let unread = self.buf.len() - self.at;
        let take = usize::try_from(left).map_or(unread, |l| l.min(unread));
        let piece = Bytes::copy_from_slice(&self.buf[self.at..self.at + take]);
        self.at += take;
        Ok(piece)
    }

    /// Reads the next answer head: its length, the head, its HTTP minor version and
    /// whether it said `Connection: close` (or, over HTTP/1.0, not `keep-alive`).
    async fn head(&mut self) -> Result<(usize, Head, u8, Option<bool>), Failure> {
        loop {
            if self.at < self.buf.len() {
                let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
                let mut answer = httparse::Response::new(&mut headers);
                let read = match answer.parse(&self.buf[self.at..]) {
                    Ok(httparse::Status::Complete(len)) => Some(
                        read_head(&answer)
                            .map(|(head, close)| (len, head, answer.version.unwrap_or(1), close)),
                    ),
                    Ok(httparse::Status::Partial) => None,
                    Err(e) => Some(Err(format!("it is not HTTP/1.1 ({e})"))),
                };
                if let Some(read) = read {
                    return read.map_err(|e| self.garbled(&e));
                }
            }
            if self.buf.len() - self.at > MAX_HEAD {
                return Err(self.garbled("its head is over 64 KiB"));
            }
            if self.fill().await? == 0 {
                let before = self.at == self.buf.len();
                return Err(self.closed(if before {
                    "before answering"
                } else {
                    "within the head"
                }));
            }
        }
    }

    /// Reads what the socket has (waiting for something); 0 at its end.
    async fn fill(&mut self) -> Result<usize, Failure> {
        if self.at == self.buf.len() {
            self.buf.clear();
            self.at = 0;
        } else if self.at > self.buf.capacity() / 2 {
            self.buf.drain(..self.at);
            self.at = 0;
        }
        self.buf.reserve(READ_SIZE);
        match self.stream.read_buf(&mut self.buf).await {
            Ok(n) => Ok(n),
            Err(e) => Err(self.broken(ErrorKind::ClosedByPeer, &e.to_string())),
        }
    }

    /// The server closed the connection at `when` in the answer.
    fn closed(&mut self, when: &str) -> Failure {
        self.broken(
            ErrorKind::ClosedByPeer,
            &format!("the server closed the connection {when}"),
        )
    }

    /// The answer breaks HTTP/1.1 as `what` says.
    fn garbled(&mut self, what: &str) -> Failure {
        self.broken(ErrorKind::Protocol, what)
    }

    /// A failure of `kind`, the connection being unusable from now on.
    fn broken(&mut self, kind: ErrorKind, what: &str) -> Failure {
        self.keep_alive = false;
        self.framing = Framing::Done;
        Failure::new(kind, what)
    }
}

/// The head of a parsed `answer`, and whether its `Connection` header said `close`
/// (`Some(true)`), `keep-alive` (`Some(false)`) or nothing.
fn read_head(answer: &httparse::Response) -> Result<(Head, Option<bool>), String> {
    let status = answer.code.unwrap_or_default();
    let mut headers = HeaderMap::with_capacity(answer.headers.len());
    let mut close = None;
    for h in answer.headers.iter() {
        let name = HeaderName::from_bytes(h.name.as_bytes())
            .map_err(|_| format!("the answer has a bad header name `{}`", h.name))?;
        let value = HeaderValue::from_bytes(h.value)
            .map_err(|_| format!("the answer's header `{}` has a bad value", h.name))?;
        if name == http::header::CONNECTION {
            for token in h.value.split(|&b| b == b',') {
                let token = token.trim_ascii();
                if token.eq_ignore_ascii_case(b"close") {
                    close = Some(true);
                } else if token.eq_ignore_ascii_case(b"keep-alive") && close.is_none() {
                    close = Some(false);
                }
            }
        }
        headers.append(name, value);
    }
    Ok((Head { status, headers }, close))
}

/// Whether a connection stays open after an answer of HTTP/1.`minor` whose `Connection`
/// header said `close` (see [`read_head`]).
fn keeps_alive(minor: u8, close: Option<bool>) -> bool {
    match close {
        Some(close) => !close,
        None => minor >= 1,
    }
}

/// How the body of an answer with `head` ends (RFC 9112 §6.3); `head_only` for the answer
/// to a `HEAD`.
fn framing(head_only: bool, head: &Head) -> Result<Framing, String> {
    if head_only || head.status == 204 || head.status == 304 || (100..200).contains(&head.status) {
        return Ok(Framing::Length(0));
    }
    if let Some(coding) = head
        .headers
        .get_all(http::header::TRANSFER_ENCODING)
        .iter()
        .next_back()
    {
        let last = coding
            .as_bytes()
            .rsplit(|&b| b == b',')
            .next()
            .unwrap_or_default();
        return Ok(if last.trim_ascii().eq_ignore_ascii_case(b"chunked") {
            Framing::ChunkSize
        } else {
            Framing::Close
        });
    }
    let mut lengths = head.headers.get_all(http::header::CONTENT_LENGTH).iter();
    let Some(first) = lengths.next() else {
        return Ok(Framing::Close);
    };
    let length = |v: &HeaderValue| {
        std::str::from_utf8(v.as_bytes())
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
    };
    let n = length(first).ok_or("the answer's Content-Length is not a number")?;
    if lengths.any(|other| length(other) != Some(n)) {
        return Err("the answer has Content-Lengths that disagree".into());
    }
    Ok(Framing::Length(n))
}

/// `method`, the target's `base` path and `path`, `Host: host`, `headers` and `body` as one
/// HTTP/1.1 request (`Content-Length` set here, so a script's own is left out, as `Host` is).
/// Fails on a method that is not an HTTP token, or a path that does not start with `/` or
/// has a space, a control or a non-ASCII byte.
pub fn encode(
    method: &str,
    base: &str,
    path: &str,
    host: &HeaderValue,
    headers: &[(HeaderName, HeaderValue)],
    body: &[u8],
) -> Result<Vec<u8>, String> {
    http::Method::from_bytes(method.as_bytes()).map_err(|e| e.to_string())?;
    if !base.starts_with('/') && !path.starts_with('/') {
        return Err("the path must start with `/`".to_owned());
    }
    if let Some(b) = base
        .bytes()
        .chain(path.bytes())
        .find(|b| !(0x21..0x7f).contains(b))
    {
        return Err(format!(
            "the path has the byte {b:#04x}, which HTTP does not allow there"
        ));
    }
    let size = method.len() + base.len() + path.len() + host.len() + body.len() + 64;
    let size = headers
        .iter()
        .fold(size, |n, (k, v)| n + k.as_str().len() + v.len() + 4);
    let mut out = Vec::with_capacity(size);
    for part in [method.as_bytes(), b" ", base.as_bytes(), path.as_bytes()] {
        out.extend_from_slice(part);
    }
    out.extend_from_slice(b" HTTP/1.1\r\nhost: ");
    out.extend_from_slice(host.as_bytes());
    out.extend_from_slice(b"\r\n");
    for (name, value) in headers {
        if name == http::header::HOST || name == http::header::CONTENT_LENGTH {
            continue;
        }
        for part in [name.as_str().as_bytes(), b": ", value.as_bytes(), b"\r\n"] {
            out.extend_from_slice(part);
        }
    }
    if !body.is_empty() || matches!(method, "POST" | "PUT" | "PATCH") {
        out.extend_from_slice(b"content-length: ");
        out.extend_from_slice(body.len().to_string().as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    /// A connection to a listener on 127.0.0.1 that reads one request and answers with
    /// `answer` (then closes when `close`), and the request it read.
    async fn answered(
        answer: &'static [u8],
        close: bool,
    ) -> (Connection, tokio::task::JoinHandle<Vec<u8>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let server = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.expect("accept");
            let mut request = vec![0; 4096];
            let n = socket.read(&mut request).await.expect("read");
            request.truncate(n);
            socket.write_all(answer).await.expect("write");
            if !close {
                // Holds the connection open until the client goes.
                let _ = socket.read(&mut [0; 1]).await;
            }
            request
        });
        let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
        (Connection::new(Stream::unmetered(tcp)), server)
    }

    /// The status, body and reusability of the answer `answer` to one `GET` (`HEAD`).
    async fn exchange(
        answer: &'static [u8],
        method: &str,
        close: bool,
    ) -> Result<(u16, Bytes, bool), Failure> {
        let (mut c, _server) = answered(answer, close).await;
        let host = HeaderValue::from_static("h");
        let request = encode(method, "", "/", &host, &[], b"").expect("a request");
        let head = c.start(&request, method == "HEAD").await?;
        let body = c.body(1 << 10).await?;
        Ok((head.status, body, c.reusable()))
    }

    #[tokio::test]
    async fn bodies_end_by_length_by_chunks_with_trailers_or_by_the_close() {
        // An answer, the request's method, whether the server closes after it, the body
        // read and whether the connection can carry the next request.
        type Case = (&'static [u8], &'static str, bool, &'static [u8], bool);
        let cases: [Case; 6] = [
            (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", "GET", false, b"hello", true),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n1\r\n!\r\n0\r\nT: 1\r\n\r\n",
                "GET", false, b"hello!", true,
            ),
            (b"HTTP/1.1 200 OK\r\n\r\nuntil the end", "GET", true, b"until the end", false),
            (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n", "GET", false, b"", true),
            (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", "HEAD", false, b"", true),
            (b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", "GET", false, b"ok", false),
        ];
        for (answer, method, close, body, reusable) in cases {
            let got = exchange(answer, method, close).await.expect("an answer");
            assert_eq!(got.1, body, "{}", String::from_utf8_lossy(answer));
            assert_eq!(got.2, reusable, "{}", String::from_utf8_lossy(answer));
        }
    }

    #[tokio::test]
    async fn a_garbled_or_cut_answer_is_a_clear_failure_and_ends_the_connection() {
        let cases: [(&[u8], ErrorKind, &str); 7] = [
            (
                b"SSH-2.0-OpenSSH\r\n\r\n",
                ErrorKind::Protocol,
                "it is not HTTP/1.1",
            ),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nshort",
                ErrorKind::ClosedByPeer,
                "the server closed the connection within the body",
            ),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
                ErrorKind::Protocol,
                "Content-Length is not a number",
            ),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                ErrorKind::Protocol,
                "a chunk's size is not hexadecimal",
            ),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 2000\r\n\r\n",
                ErrorKind::Protocol,
                "its body is over 8 bytes",
            ),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n5\r\nworld\r\n0\r\n\r\n",
                ErrorKind::Protocol,
                "its body is over 8 bytes",
            ),
            (
                b"",
                ErrorKind::ClosedByPeer,
                "the server closed the connection before answering",
            ),
        ];
        for (answer, kind, says) in cases {
            let (mut c, _server) = answered(answer, true).await;
            let request = encode("GET", "", "/", &HeaderValue::from_static("h"), &[], b"")
                .expect("a request");
            let failed = match c.start(&request, false).await {
                Ok(_) => c.body(8).await.expect_err("a cut body"),
                Err(f) => f,
            };
            assert_eq!(failed.kind, kind, "{}", failed.detail);
            assert!(failed.detail.contains(says), "{}", failed.detail);
            assert!(c.is_closed(), "{}", failed.detail);
        }
    }

    #[tokio::test]
    async fn a_connection_the_server_closed_while_idle_is_seen_closed_without_waiting() {
        let (mut c, server) = answered(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", true).await;
        let request = encode(
            "POST",
            "/b",
            "/p?q=1",
            &HeaderValue::from_static("h:1"),
            &[],
            b"",
        )
        .expect("a request");
        c.start(&request, false).await.expect("an answer");
        c.body(0).await.expect("a body");
        assert_eq!(
            server.await.expect("the server"),
            b"POST /b/p?q=1 HTTP/1.1\r\nhost: h:1\r\ncontent-length: 0\r\n\r\n"
        );
        assert!(c.reusable());
        // The close is seen once the runtime's I/O driver has taken it from the kernel; a
        // yield lets the driver look.
        let seen = async {
            while !c.is_closed() {
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(10), seen)
            .await
            .expect("the close seen within 10 s");
        assert!(c.is_closed());
    }
}
