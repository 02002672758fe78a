//! The WebSocket transport of the `native`, `echo`, `ws-json` and `socketio` drivers, built
//! to hold many connections cheaply and never to stall a load test.
//!
//! - The HTTP upgrade is done here with a transient buffer: tungstenite's own client
//!   handshake keeps a 4 KiB buffer for the connection's life, which at tens of thousands
//!   of connections is most of a generator's memory.
//! - After the upgrade, [`Ws`] ([`conn`]) reads into one buffer per worker thread and
//!   keeps no buffer of its own while idle; frames queued between two flushes go out in
//!   one write.
//! - The connection itself (source address, `wss://` over rustls, the time limit) is the
//!   drivers' connect skeleton ([`super::connect`]); `[target.<driver>]` takes `ca_file`
//!   and `server_name` for `wss://`.
//! - A connection keeps reading while a write waits for room. A server stops reading when
//!   it cannot write its replies, so a generator that only wrote would wait on a server
//!   that waits on it.

mod conn;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::error::ProtocolError;
use tokio_tungstenite::tungstenite::handshake::client::generate_key;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::{self, Message};

pub use conn::Ws;

use super::connect::{Connector, Stream};
use super::io_error;
use super::options::Table;
use crate::driver::{Config, Endpoint, Event, Failure, OptionError, Scheme};
use crate::metrics::wires::Wire;
use crate::metrics::ErrorKind;

/// The longest upgrade response accepted.
const MAX_RESPONSE: usize = 8 << 10;

/// The URL schemes of the WebSocket drivers.
pub const SCHEMES: &[Scheme] = &[
    Scheme {
        name: "ws",
        default_port: 80,
        tls: false,
        example: "ws://127.0.0.1:7700/ws",
    },
    Scheme {
        name: "wss",
        default_port: 443,
        tls: true,
        example: "wss://chat.example.com/ws",
    },
];

/// The keys of `[target.<driver>]` that every WebSocket driver takes (for `wss://`).
pub const TLS_KEYS: [&str; 2] = ["ca_file", "server_name"];

/// Refuses any key of `[target.<driver>]` but [`TLS_KEYS`], for the WebSocket drivers
/// that take no options of their own.
pub fn only_tls_options(config: &Config) -> Result<(), OptionError> {
    Table::of(config).only(&TLS_KEYS)
}

/// Classifies a WebSocket failure for the error taxonomy: socket failures by
/// [`io_error::classify`], a stream that ends without a WebSocket close as the server
/// closing the connection (a killed server's connections end so), a frame the protocol
/// does not allow as `protocol`.
pub fn classify(e: &tungstenite::Error) -> Failure {
    match e {
        tungstenite::Error::Io(io) => io_error::classify(io),
        tungstenite::Error::Http(resp) => Failure::new(
            ErrorKind::HttpStatus,
            format!("HTTP {} on upgrade", resp.status()),
        ),
        tungstenite::Error::ConnectionClosed
        | tungstenite::Error::AlreadyClosed
        | tungstenite::Error::Protocol(ProtocolError::ResetWithoutClosingHandshake) => {
            Failure::new(ErrorKind::ClosedByPeer, e.to_string())
        }
        other => Failure::new(ErrorKind::Protocol, other.to_string()),
    }
}

/// Why [`read_text`] returned no text.
#[derive(Debug)]
pub enum NotText {
    /// A frame the JSON drivers do not take (binary): a protocol error; the connection
    /// stays.
    Frame(Failure),
    /// The connection ended — closed, reset, or broken by a frame the protocol does not
    /// allow — and nothing more comes: one failure for the whole end.
    Ended(Failure),
}

impl NotText {
    /// The engine's event for it: a protocol error, or the connection's end.
    pub fn event(self) -> Event {
        match self {
            NotText::Frame(f) => Event::ProtocolError(f),
            NotText::Ended(f) => Event::Closed(f),
        }
    }
}

impl From<NotText> for Failure {
    fn from(n: NotText) -> Failure {
        match n {
            NotText::Frame(f) | NotText::Ended(f) => f,
        }
    }
}

/// The next text frame on `ws`, skipping WebSocket control frames (tungstenite answers
/// pings itself). Shared by the drivers that speak JSON text frames.
pub async fn read_text(ws: &mut Ws) -> Result<tungstenite::Utf8Bytes, NotText> {
    loop {
        match ws.next().await {
            None => {
                return Err(NotText::Ended(Failure::new(
                    ErrorKind::ClosedByPeer,
                    "connection closed",
                )))
            }
            Some(Err(e)) => return Err(NotText::Ended(classify(&e))),
            Some(Ok(Message::Text(text))) => return Ok(text),
            Some(Ok(Message::Close(frame))) => {
                let why = frame.map(|f| f.reason.to_string()).unwrap_or_default();
                return Err(NotText::Ended(Failure::new(
                    ErrorKind::ClosedByPeer,
                    format!("closed by server: {why}"),
                )));
            }
            Some(Ok(Message::Binary(_))) => {
                return Err(NotText::Frame(Failure::new(
                    ErrorKind::Protocol,
                    "unexpected binary frame",
                )))
            }
            Some(Ok(_)) => continue,
        }
    }
}

/// The WebSocket upgrade to `ep` over a connected `tcp`.
async fn upgrade(mut tcp: Stream, ep: &Endpoint) -> Result<Ws, Failure> {
    let key = generate_key();
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: {key}\r\n\r\n",
        ep.path,
        ep.host_header()
    );
    tcp.write_all(request.as_bytes())
        .await
        .map_err(|e| io_error::classify(&e))?;
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
        if tcp
            .read_buf(&mut buf)
            .await
            .map_err(|e| io_error::classify(&e))?
            == 0
        {
            return Err(Failure::new(
                ErrorKind::ClosedByPeer,
                "connection closed during the WebSocket upgrade",
            ));
        }
    };
    check_upgrade(&buf[..head_end], &derive_accept_key(key.as_bytes()))?;
    Ok(Ws::new(tcp, buf.split_off(head_end)))
}

/// How the WebSocket drivers reach their target: the endpoint (its path and host for the
/// upgrade), the [`Connector`] (source addresses, TLS, connect time limit), and the run's
/// largest body (which sizes the largest message a connection takes).
#[derive(Debug, Clone)]
pub struct Dialer {
    endpoint: Option<Endpoint>,
    connector: Connector,
    max_body: usize,
}

impl Dialer {
    /// A dialer for the configured endpoint, source addresses and connect timeout, with
    /// TLS for `wss://` from the [`TLS_KEYS`] of `[target.<driver>]` (other keys are the
    /// driver's to check).
    pub fn new(config: &Config) -> Result<Self, OptionError> {
        Ok(Dialer {
            endpoint: config.endpoint.clone(),
            connector: connector(config)?,
            max_body: config.max_body,
        })
    }

    /// The connect time limit (drivers bound their login exchange by it too).
    pub fn timeout(&self) -> std::time::Duration {
        self.connector.timeout()
    }

    /// The same dialer with `path` (path and query) in its upgrade request: a per-user URL.
    pub fn with_path(&self, path: String) -> Dialer {
        let mut d = self.clone();
        if let Some(ep) = d.endpoint.as_mut() {
            ep.path = path;
        }
        d
    }

    /// TCP connect and WebSocket upgrade for user `ix`, within the connect timeout.
    pub async fn dial(&self, ix: u32) -> Result<Ws, Failure> {
        let ep = self
            .endpoint
            .as_ref()
            .ok_or_else(|| Failure::new(ErrorKind::Other, "no target URL to connect to"))?;
        let open = async { upgrade(self.connector.connect(ix).await?, ep).await };
        let mut ws = self.connector.within("WebSocket upgrade", open).await?;
        ws.fit(self.max_body);
        Ok(ws)
    }
}

/// The connector: TLS for a `wss://` endpoint, plain otherwise.
#[cfg(feature = "tls")]
fn connector(config: &Config) -> Result<Connector, OptionError> {
    Ok(Connector::new(config)?.carrying(Wire::Ws))
}

/// Plain only: `wss://` (and its options) need the `tls` feature.
#[cfg(not(feature = "tls"))]
fn connector(config: &Config) -> Result<Connector, OptionError> {
    if let Some(ep) = config.endpoint.as_ref().filter(|ep| ep.tls()) {
        return Err(OptionError::url(format!(
            "`{}`: this msgstorm was built without TLS (feature `tls`); use ws://",
            ep.url
        )));
    }
    match TLS_KEYS.iter().find(|k| config.options.contains_key(**k)) {
        Some(key) => Err(OptionError::option(
            config.spec.name,
            key,
            "only for wss://, which this msgstorm was built without (feature `tls`)",
        )),
        None => Ok(Connector::plain(config).carrying(Wire::Ws)),
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

#[cfg(test)]
mod tests {
    use super::*;

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
