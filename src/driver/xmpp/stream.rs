//! One XMPP connection's transport: the socket ([`connect::Stream`], TCP or TLS), a write
//! buffer, and the [`Framer`] that turns what is read into elements.
//!
//! Both directions are cancel-safe: a read appends to the framer's buffer and an element
//! leaves it only once complete; a write hands the socket a slice of the buffer and drops
//! only the bytes the socket took. So [`Stream::next`] and [`Stream::flush`] can be raced
//! against timers without losing or repeating a byte.

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::codec::{Element, Framer, Item};
use crate::driver::kit::{connect, io_error, tls};
use crate::driver::Failure;
use crate::metrics::ErrorKind;

/// Bytes asked of the socket per read.
const READ_CHUNK: usize = 8 * 1024;

/// One XMPP connection.
#[derive(Debug)]
pub struct Stream {
    io: connect::Stream,
    framer: Framer,
    out: Vec<u8>,
    max_body: usize,
}

impl Stream {
    /// A stream over a connected socket.
    pub fn new(io: connect::Stream, max_body: usize) -> Stream {
        Stream {
            io,
            framer: Framer::default(),
            out: Vec::new(),
            max_body,
        }
    }

    /// Runs TLS over the socket (STARTTLS after `<proceed/>`); the next element read is a
    /// new stream header.
    pub async fn tls(self, client: &tls::Client) -> Result<Stream, Failure> {
        Ok(Stream {
            io: self.io.start_tls(client).await?,
            framer: Framer::default(),
            out: Vec::new(),
            max_body: self.max_body,
        })
    }

    /// Queues `text` for the next [`Stream::flush`].
    pub fn queue(&mut self, text: &str) {
        self.out.extend_from_slice(text.as_bytes());
    }

    /// Bytes queued and not written yet.
    pub fn queued(&self) -> usize {
        self.out.len()
    }

    /// Expects a new stream header (after SASL success).
    pub fn restart(&mut self) {
        self.framer.restart();
    }

    /// Writes everything queued. Cancel-safe.
    pub async fn flush(&mut self) -> Result<(), Failure> {
        while !self.out.is_empty() {
            let n = self
                .io
                .write(&self.out)
                .await
                .map_err(|e| io_error::classify(&e))?;
            if n == 0 {
                return Err(Failure::new(
                    ErrorKind::ClosedByPeer,
                    "the server closed the connection",
                ));
            }
            self.out.drain(..n);
        }
        self.io.flush().await.map_err(|e| io_error::classify(&e))
    }

    /// The next item the server sent. Cancel-safe.
    pub async fn next(&mut self) -> Result<Item, Failure> {
        loop {
            if let Some(item) = self
                .framer
                .next(self.max_body)
                .map_err(|e| Failure::new(ErrorKind::Protocol, e))?
            {
                return Ok(item);
            }
            let buf = self.framer.buffer();
            buf.reserve(READ_CHUNK);
            let n = self
                .io
                .read_buf(buf)
                .await
                .map_err(|e| io_error::classify(&e))?;
            if n == 0 {
                return Err(Failure::new(
                    ErrorKind::ClosedByPeer,
                    "the server closed the connection",
                ));
            }
        }
    }

    /// The next element, the end of the stream and a stream error being failures.
    pub async fn element(&mut self) -> Result<Element, Failure> {
        match self.next().await? {
            Item::Element(e) if e.name == "error" => Err(stream_error(&e)),
            Item::Element(e) => Ok(e),
            Item::End => Err(Failure::new(
                ErrorKind::ClosedByPeer,
                "the server ended the stream",
            )),
            Item::Header(_) => Err(Failure::new(
                ErrorKind::Protocol,
                "a second stream header without a restart",
            )),
        }
    }
}

/// A `<stream:error>` classified: the server closing the stream on a policy or load
/// ground is a closed connection; a complaint about what we sent is a protocol error.
pub fn stream_error(e: &Element) -> Failure {
    let condition = e
        .children
        .iter()
        .find(|c| c.name != "text")
        .map_or("undefined-condition", |c| c.name.as_str());
    let kind = match condition {
        "not-authorized" => ErrorKind::AuthFailed,
        "bad-format"
        | "bad-namespace-prefix"
        | "invalid-namespace"
        | "invalid-xml"
        | "not-well-formed"
        | "restricted-xml"
        | "unsupported-encoding"
        | "unsupported-stanza-type"
        | "unsupported-version"
        | "invalid-from"
        | "improper-addressing"
        | "host-unknown"
        | "unsupported-feature" => ErrorKind::Protocol,
        _ => ErrorKind::ClosedByPeer,
    };
    let text = e.child("text").map(|t| t.text.as_str()).unwrap_or_default();
    let detail = match text {
        "" => format!("stream error: {condition}"),
        t => format!("stream error: {condition}: {t}"),
    };
    Failure::new(kind, detail)
}
