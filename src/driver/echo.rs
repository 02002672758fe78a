//! The `echo` driver: round trips through a WebSocket endpoint that returns every frame
//! (the reference server's `/echo`). Each connection is its own recipient: a frame's
//! end-to-end latency is due time → echoed back, and the ledger still checks that every
//! frame came back once, in order and intact. There is no login and no acceptance.
//!
//! Built to hold many connections cheaply: the HTTP upgrade is done here with a transient
//! buffer (tungstenite's own handshake keeps a 4 KiB buffer for the connection's life), the
//! read buffer is small, and frames sent between two flushes go out in one write.
//!
//! A session keeps reading while a write waits for room: the endpoint stops reading when
//! its replies cannot be written, so a generator that only wrote would wait on a server
//! that waits on it. Frames read meanwhile are handed out by [`Session::next_event`] first.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures_util::{Sink, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::handshake::client::generate_key;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

use super::native::classify_connect;
use super::{Connected, Dest, Event, Failure, Session, UserCtx};
use crate::metrics::ErrorKind;
use crate::scenario::RequestKind;

/// Bytes read from the socket at most per read. Small, because an idle connection keeps
/// its read buffer; a busy one still gets about ten 100-byte frames per read.
const READ_CHUNK: usize = 1024;
/// Frames queue up to this many bytes before they are written without a flush, so the
/// frames of one wake-up go out in one write.
const WRITE_COALESCE: usize = 64 << 10;
/// The longest upgrade response accepted.
const MAX_RESPONSE: usize = 8 << 10;

/// Per-connection WebSocket settings of the echo driver.
fn echo_ws_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .read_buffer_size(READ_CHUNK)
        .write_buffer_size(WRITE_COALESCE)
        .max_write_buffer_size(WRITE_COALESCE + (1 << 20))
        .max_message_size(Some(16 << 20))
}

/// Where the endpoint is: the address to connect to, the `Host` header and the request
/// target.
#[derive(Debug, Clone)]
struct Endpoint {
    addr: String,
    host: String,
    path: String,
}

/// Splits a `ws://host[:port][/path]` URL; `wss` needs TLS, which the echo driver lacks.
fn parse_url(url: &str) -> Result<Endpoint, String> {
    let rest = match url.split_once("://") {
        Some(("ws", rest)) => rest,
        Some(("wss", _)) => return Err(format!("`{url}`: the echo driver speaks ws:// only")),
        _ => return Err(format!("`{url}`: not a ws:// URL")),
    };
    let (authority, path) = match rest.find(['/', '?']) {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if authority.is_empty() || authority.contains('@') {
        return Err(format!("`{url}`: expected ws://host[:port]/path"));
    }
    let has_port = authority
        .rsplit_once(':')
        .is_some_and(|(h, p)| !h.is_empty() && !p.contains(']') && p.parse::<u16>().is_ok());
    let addr = if has_port {
        authority.to_owned()
    } else {
        format!("{authority}:80")
    };
    let path = if path.starts_with('?') {
        format!("/{path}")
    } else {
        path.to_owned()
    };
    Ok(Endpoint {
        addr,
        host: authority.to_owned(),
        path,
    })
}

/// The echo driver.
#[derive(Debug, Clone)]
pub struct EchoDriver {
    endpoint: Result<Endpoint, String>,
    connect_timeout: Duration,
}

impl EchoDriver {
    /// A driver for the echo endpoint at `url` (`ws://…`).
    pub fn new(url: String, connect_timeout: Duration) -> Self {
        EchoDriver {
            endpoint: parse_url(&url),
            connect_timeout,
        }
    }

    /// TCP connect and WebSocket upgrade.
    async fn open(&self, ep: &Endpoint) -> Result<WebSocketStream<TcpStream>, Failure> {
        let io = |e: std::io::Error| classify_connect(&e.into());
        let mut tcp = TcpStream::connect(&ep.addr).await.map_err(io)?;
        // Frames are coalesced per flush already: send each write at once.
        tcp.set_nodelay(true).map_err(io)?;
        let key = generate_key();
        let request = format!(
            "GET {} HTTP/1.1\r\nHost: {}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
             Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: {key}\r\n\r\n",
            ep.path, ep.host
        );
        tcp.write_all(request.as_bytes()).await.map_err(io)?;
        let mut buf = Vec::with_capacity(512);
        let head_end = loop {
            if let Some(i) = find_head_end(&buf) {
                break i;
            }
            if buf.len() >= MAX_RESPONSE {
                return Err(Failure::new(
                    ErrorKind::Protocol,
                    format!("upgrade response longer than {MAX_RESPONSE} bytes"),
                ));
            }
            buf.reserve(512);
            if tcp.read_buf(&mut buf).await.map_err(io)? == 0 {
                return Err(Failure::new(
                    ErrorKind::ClosedByPeer,
                    "connection closed during the WebSocket upgrade",
                ));
            }
        };
        check_upgrade(&buf[..head_end], &derive_accept_key(key.as_bytes()))?;
        let rest = buf.split_off(head_end);
        let config = Some(echo_ws_config());
        Ok(if rest.is_empty() {
            WebSocketStream::from_raw_socket(tcp, Role::Client, config).await
        } else {
            WebSocketStream::from_partially_read(tcp, rest, Role::Client, config).await
        })
    }
}

/// The end of the response head (after its blank line), if it is all there.
fn find_head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

/// Checks that `head` is a `101` upgrade carrying the expected `Sec-WebSocket-Accept`.
fn check_upgrade(head: &[u8], accept: &str) -> Result<(), Failure> {
    let text = String::from_utf8_lossy(head);
    let mut lines = text.split("\r\n");
    let status = lines.next().unwrap_or_default();
    let code = status.split(' ').nth(1).unwrap_or_default();
    if code != "101" {
        return Err(Failure::new(
            ErrorKind::HttpStatus,
            format!(
                "HTTP {} on upgrade",
                status.split_once(' ').map_or("", |s| s.1)
            ),
        ));
    }
    let accepted = lines.any(|l| {
        l.split_once(':').is_some_and(|(name, value)| {
            name.trim().eq_ignore_ascii_case("sec-websocket-accept") && value.trim() == accept
        })
    });
    if !accepted {
        return Err(Failure::new(
            ErrorKind::Protocol,
            "upgrade answered without the right Sec-WebSocket-Accept",
        ));
    }
    Ok(())
}

impl super::Driver for EchoDriver {
    type Session = EchoSession;

    fn has_acceptance(&self) -> bool {
        false
    }

    async fn connect(
        &self,
        _user: &UserCtx,
        resume: (),
    ) -> Result<Connected<EchoSession>, (Failure, ())> {
        let ep = match &self.endpoint {
            Ok(ep) => ep,
            Err(e) => return Err((Failure::new(ErrorKind::Protocol, e.clone()), resume)),
        };
        let started = Instant::now();
        match tokio::time::timeout(self.connect_timeout, self.open(ep)).await {
            Ok(Ok(ws)) => Ok(Connected {
                session: EchoSession {
                    ws,
                    early: VecDeque::new(),
                },
                handshake: started.elapsed(),
                login: Duration::ZERO,
            }),
            Ok(Err(f)) => Err((f, resume)),
            Err(_) => Err((
                Failure::new(
                    ErrorKind::ConnectTimeout,
                    format!("no WebSocket upgrade within {:?}", self.connect_timeout),
                ),
                resume,
            )),
        }
    }
}

/// One connection to an echo endpoint.
#[derive(Debug)]
pub struct EchoSession {
    ws: WebSocketStream<TcpStream>,
    /// Events read while a write was waiting, oldest first.
    early: VecDeque<Event>,
}

/// What one read from the socket gives the engine, if anything.
fn event_of(item: Option<Result<Message, tokio_tungstenite::tungstenite::Error>>) -> Option<Event> {
    match item {
        Some(Ok(Message::Text(t))) => Some(Event::Delivered {
            body: t.as_str().to_owned(),
        }),
        Some(Ok(Message::Close(_))) | None => Some(Event::Closed(Failure::new(
            ErrorKind::ClosedByPeer,
            "echo closed",
        ))),
        Some(Ok(_)) => None,
        Some(Err(e)) => Some(Event::Closed(classify_connect(&e))),
    }
}

impl EchoSession {
    /// Reads every frame already received into `early`, so the endpoint can write again.
    /// Pending once nothing more is there (the task then wakes on new data as well).
    fn read_while_blocked(&mut self, cx: &mut Context<'_>) {
        if matches!(self.early.back(), Some(Event::Closed(_))) {
            return;
        }
        while let Poll::Ready(item) = self.ws.poll_next_unpin(cx) {
            let closed =
                item.is_none() || matches!(item, Some(Ok(Message::Close(_))) | Some(Err(_)));
            if let Some(ev) = event_of(item) {
                self.early.push_back(ev);
            }
            if closed {
                return;
            }
        }
    }

    /// Waits until a frame can be queued, reading meanwhile.
    fn poll_writable(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Failure>> {
        match Pin::new(&mut self.ws).poll_ready(cx) {
            Poll::Ready(r) => Poll::Ready(r.map_err(send_failed)),
            Poll::Pending => {
                self.read_while_blocked(cx);
                Poll::Pending
            }
        }
    }

    /// Queues `msg` once there is room.
    async fn write(&mut self, msg: Message) -> Result<(), Failure> {
        poll_fn(|cx| self.poll_writable(cx)).await?;
        Pin::new(&mut self.ws).start_send(msg).map_err(send_failed)
    }
}

fn send_failed(e: impl std::fmt::Display) -> Failure {
    Failure::new(ErrorKind::SendFailed, e.to_string())
}

impl Session for EchoSession {
    type Resume = ();

    async fn send(&mut self, _tag: u64, _dest: Dest<'_>, body: &str) -> Result<(), Failure> {
        self.write(Message::text(body)).await
    }

    async fn request(&mut self, _tag: u64, _kind: RequestKind) -> Result<(), Failure> {
        Err(Failure::new(
            ErrorKind::RequestFailed,
            "the echo endpoint has no requests",
        ))
    }

    async fn heartbeat(&mut self) -> Result<(), Failure> {
        self.write(Message::Ping(Default::default())).await
    }

    async fn flush(&mut self) -> Result<(), Failure> {
        poll_fn(|cx| match Pin::new(&mut self.ws).poll_flush(cx) {
            Poll::Ready(r) => Poll::Ready(r.map_err(send_failed)),
            Poll::Pending => {
                self.read_while_blocked(cx);
                Poll::Pending
            }
        })
        .await
    }

    async fn join(&mut self, _group: &str) -> Result<(), Failure> {
        Ok(())
    }

    async fn fetch_missed(&mut self, _out: &mut Vec<String>) -> Result<(), Failure> {
        Ok(())
    }

    async fn next_event(&mut self) -> Event {
        if let Some(ev) = self.early.pop_front() {
            return ev;
        }
        loop {
            if let Some(ev) = event_of(self.ws.next().await) {
                return ev;
            }
        }
    }

    async fn close(mut self) {
        let _ = tokio::time::timeout(Duration::from_secs(1), self.ws.close(None)).await;
    }

    fn into_resume(self) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_into_address_host_and_path() {
        let ep = parse_url("ws://127.0.0.1:7700/echo").unwrap();
        assert_eq!(
            (ep.addr.as_str(), ep.host.as_str(), ep.path.as_str()),
            ("127.0.0.1:7700", "127.0.0.1:7700", "/echo")
        );
        let ep = parse_url("ws://example.test?x=1").unwrap();
        assert_eq!(
            (ep.addr.as_str(), ep.path.as_str()),
            ("example.test:80", "/?x=1")
        );
        let ep = parse_url("ws://[::1]:9/e").unwrap();
        assert_eq!(ep.addr, "[::1]:9");
        let ep = parse_url("ws://[::1]/e").unwrap();
        assert_eq!(ep.addr, "[::1]:80");
        assert!(parse_url("wss://h/echo").is_err());
        assert!(parse_url("http://h/echo").is_err());
        assert!(parse_url("ws:///echo").is_err());
    }

    #[test]
    fn upgrade_responses_are_checked() {
        let accept = derive_accept_key(b"dGhlIHNhbXBsZSBub25jZQ==");
        let ok = format!(
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nsec-websocket-accept: {accept}\r\n\r\n"
        );
        assert!(check_upgrade(ok.as_bytes(), &accept).is_ok());
        let wrong = ok.replace(&accept, "bogus");
        assert_eq!(
            check_upgrade(wrong.as_bytes(), &accept).unwrap_err().kind,
            ErrorKind::Protocol
        );
        let refused = b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n";
        let f = check_upgrade(refused, &accept).unwrap_err();
        assert_eq!(f.kind, ErrorKind::HttpStatus);
        assert_eq!(f.detail, "HTTP 404 Not Found on upgrade");
        assert_eq!(find_head_end(b"HTTP/1.1 101\r\n\r\nxy"), Some(16));
        assert_eq!(find_head_end(b"HTTP/1.1 101\r\n"), None);
    }
}
