//! What an adapter script's frames travel over: a WebSocket (`ws://`, `wss://`; text and
//! binary messages), a TCP stream (`tcp://`, `tls://`) cut into frames by a length
//! prefix or a delimiter (`[target.script] framing`), or HTTP (`http://`, `https://`:
//! [`super::http`]).

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;

use super::frame::Frame;
use crate::driver::kit::connect::Stream;
use crate::driver::kit::io_error;
use crate::driver::kit::ws::{classify, Ws};
use crate::driver::Failure;
use crate::metrics::ErrorKind;

/// How a TCP stream is cut into frames.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Framing {
    /// A length prefix of `bytes` (2 or 4), big- or little-endian, then the frame.
    Length {
        /// Size of the prefix.
        bytes: usize,
        /// Big-endian (network order).
        big: bool,
    },
    /// A protobuf varint32 length prefix (Netty's `ProtobufVarint32FrameDecoder`).
    Varint32,
    /// Frames end with this delimiter (not part of the frame).
    Delimiter(Vec<u8>),
}

/// The values `framing` takes.
pub const FRAMINGS: &str = "u16be, u16le, u32be, u32le, varint32, line, delimiter";

impl Framing {
    /// `framing` (and `delimiter` for `framing = "delimiter"`).
    pub fn parse(framing: &str, delimiter: Option<&str>) -> Result<Framing, String> {
        Ok(match framing {
            "u16be" => Framing::Length {
                bytes: 2,
                big: true,
            },
            "u16le" => Framing::Length {
                bytes: 2,
                big: false,
            },
            "u32be" => Framing::Length {
                bytes: 4,
                big: true,
            },
            "u32le" => Framing::Length {
                bytes: 4,
                big: false,
            },
            "varint32" => Framing::Varint32,
            "line" => Framing::Delimiter(b"\n".to_vec()),
            "delimiter" => match delimiter {
                Some(d) if !d.is_empty() => Framing::Delimiter(d.as_bytes().to_vec()),
                _ => {
                    return Err(
                        "`delimiter` must be set (non-empty) with framing = \"delimiter\"".into(),
                    )
                }
            },
            other => return Err(format!("unknown framing `{other}`; one of {FRAMINGS}")),
        })
    }

    /// Whether frames are text (delimited) rather than binary (length-prefixed).
    fn text(&self) -> bool {
        matches!(self, Framing::Delimiter(_))
    }

    /// Appends `frame` with its prefix or delimiter to `out`.
    pub fn encode(&self, frame: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        match self {
            Framing::Length { bytes, big } => {
                let n = frame.len();
                let too_long =
                    || format!("a frame of {n} bytes does not fit a {bytes}-byte length");
                if *bytes == 2 {
                    let n = u16::try_from(n).map_err(|_| too_long())?;
                    out.extend_from_slice(&if *big {
                        n.to_be_bytes()
                    } else {
                        n.to_le_bytes()
                    });
                } else {
                    let n = u32::try_from(n).map_err(|_| too_long())?;
                    out.extend_from_slice(&if *big {
                        n.to_be_bytes()
                    } else {
                        n.to_le_bytes()
                    });
                }
            }
            Framing::Varint32 => {
                let mut n = u32::try_from(frame.len())
                    .map_err(|_| format!("a frame of {} bytes is over a varint32", frame.len()))?;
                while n >= 0x80 {
                    out.push((n as u8 & 0x7f) | 0x80);
                    n >>= 7;
                }
                out.push(n as u8);
            }
            Framing::Delimiter(d) => {
                if memchr::memmem::find(frame, d).is_some() {
                    return Err("a frame holds its own delimiter".into());
                }
                out.extend_from_slice(frame);
                out.extend_from_slice(d);
                return Ok(());
            }
        }
        out.extend_from_slice(frame);
        Ok(())
    }

    /// The first whole frame in `buf` (taken out of it), `None` when more bytes are
    /// needed. An error is a frame over `max` bytes or a prefix that is no length.
    pub fn decode(&self, buf: &mut Vec<u8>, max: usize) -> Result<Option<Vec<u8>>, String> {
        let (start, len) = match self {
            Framing::Length { bytes, big } => {
                let Some(prefix) = buf.get(..*bytes) else {
                    return Ok(None);
                };
                let len = match (bytes, big) {
                    (2, true) => u16::from_be_bytes([prefix[0], prefix[1]]) as usize,
                    (2, false) => u16::from_le_bytes([prefix[0], prefix[1]]) as usize,
                    (_, true) => {
                        u32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]) as usize
                    }
                    (_, false) => {
                        u32::from_le_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]) as usize
                    }
                };
                (*bytes, len)
            }
            // By hand: prost's length decoder does not tell a cut prefix from a bad one.
            Framing::Varint32 => {
                let mut len = 0usize;
                let mut used = None;
                for (i, b) in buf.iter().take(5).enumerate() {
                    len |= usize::from(b & 0x7f) << (7 * i);
                    if b & 0x80 == 0 {
                        used = Some(i + 1);
                        break;
                    }
                }
                match used {
                    Some(used) => (used, len),
                    None if buf.len() >= 5 => {
                        return Err("a varint32 length longer than 5 bytes".into())
                    }
                    None => return Ok(None),
                }
            }
            Framing::Delimiter(d) => {
                return match memchr::memmem::find(buf, d) {
                    Some(at) => {
                        let frame = buf[..at].to_vec();
                        buf.drain(..at + d.len());
                        Ok(Some(frame))
                    }
                    None if buf.len() > max => Err(format!(
                        "no delimiter in {} bytes (frames are at most {max})",
                        buf.len()
                    )),
                    None => Ok(None),
                }
            }
        };
        if len > max {
            return Err(format!("a frame of {len} bytes announced (at most {max})"));
        }
        if buf.len() < start + len {
            return Ok(None);
        }
        let frame = buf[start..start + len].to_vec();
        buf.drain(..start + len);
        Ok(Some(frame))
    }
}

/// A framed TCP connection.
#[derive(Debug)]
pub struct Framed {
    stream: Stream,
    framing: Framing,
    read: Vec<u8>,
    write: Vec<u8>,
    max: usize,
}

/// The connection of one user.
#[derive(Debug)]
pub enum Link {
    /// A WebSocket.
    Ws(Ws),
    /// A framed TCP stream.
    Tcp(Box<Framed>),
    /// HTTP requests, long polls and event streams.
    Http(Box<super::http::Http>),
}

impl Link {
    /// A TCP stream cut by `framing`, frames at most `max` bytes.
    pub fn tcp(stream: Stream, framing: Framing, max: usize) -> Link {
        Link::Tcp(Box::new(Framed {
            stream,
            framing,
            read: Vec::new(),
            write: Vec::new(),
            max,
        }))
    }

    /// Queues `frame` (binary, or text).
    pub async fn write(&mut self, frame: Frame) -> Result<(), Failure> {
        match self {
            Link::Ws(ws) => {
                let msg = if frame.text {
                    match String::from_utf8(frame.bytes.into()) {
                        Ok(text) => Message::text(text),
                        Err(_) => return Err(Failure::new(
                            ErrorKind::Script,
                            "u:send of a text frame that is not UTF-8 (send it with \"binary\")",
                        )),
                    }
                } else {
                    Message::binary(frame.bytes)
                };
                ws.write(msg).await
            }
            Link::Tcp(t) => t
                .framing
                .encode(&frame.bytes, &mut t.write)
                .map_err(|why| Failure::new(ErrorKind::Script, why)),
            Link::Http(_) => Err(Failure::new(
                ErrorKind::Script,
                "u:send over HTTP: send requests with u:request or u:http",
            )),
        }
    }

    /// Writes what was queued.
    pub async fn flush(&mut self) -> Result<(), Failure> {
        match self {
            Link::Ws(ws) => ws.flush().await,
            Link::Http(_) => Ok(()),
            Link::Tcp(t) => {
                if t.write.is_empty() {
                    return Ok(());
                }
                t.stream
                    .write_all(&t.write)
                    .await
                    .map_err(|e| io_error::classify(&e))?;
                t.write.clear();
                Ok(())
            }
        }
    }

    /// A heartbeat of the transport itself (a WebSocket ping; nothing on TCP or HTTP).
    pub async fn ping(&mut self) -> Result<(), Failure> {
        match self {
            Link::Ws(ws) => ws.write(Message::Ping(Default::default())).await,
            Link::Tcp(_) | Link::Http(_) => Ok(()),
        }
    }

    /// The next frame from the server. Cancel-safe: bytes read stay buffered.
    pub async fn next(&mut self) -> Result<Frame, Failure> {
        match self {
            Link::Ws(ws) => loop {
                match ws.next().await {
                    None => return Err(Failure::new(ErrorKind::ClosedByPeer, "connection closed")),
                    Some(Err(e)) => return Err(classify(&e)),
                    Some(Ok(Message::Close(frame))) => {
                        let why = frame.map(|f| f.reason.to_string()).unwrap_or_default();
                        return Err(Failure::new(
                            ErrorKind::ClosedByPeer,
                            format!("closed by server: {why}"),
                        ));
                    }
                    Some(Ok(Message::Text(t))) => {
                        return Ok(Frame {
                            bytes: t.into(),
                            text: true,
                            meta: None,
                        })
                    }
                    Some(Ok(Message::Binary(b))) => {
                        return Ok(Frame {
                            bytes: b,
                            text: false,
                            meta: None,
                        })
                    }
                    Some(Ok(_)) => continue,
                }
            },
            Link::Tcp(t) => loop {
                match t.framing.decode(&mut t.read, t.max) {
                    Ok(Some(bytes)) => {
                        return Ok(Frame {
                            bytes: bytes.into(),
                            text: t.framing.text(),
                            meta: None,
                        })
                    }
                    Ok(None) => {}
                    Err(why) => return Err(Failure::new(ErrorKind::Protocol, why)),
                }
                t.read.reserve(4096);
                match t.stream.read_buf(&mut t.read).await {
                    Ok(0) => {
                        return Err(Failure::new(ErrorKind::ClosedByPeer, "connection closed"))
                    }
                    Ok(_) => {}
                    Err(e) => return Err(io_error::classify(&e)),
                }
            },
            Link::Http(h) => h.next().await,
        }
    }

    /// Waits until what the user sent so far has reached the server: over HTTP, the
    /// answers of the requests made (they go out on a connection of their own, behind one
    /// another, and a waiting call would overtake them); a socket's frames go out in order
    /// with whatever follows them.
    pub async fn sent(&self) {
        if let Link::Http(h) = self {
            h.requests_answered().await;
        }
    }

    /// Closes the connection.
    pub async fn close(self) {
        match self {
            Link::Ws(ws) => ws.close().await,
            Link::Tcp(mut t) => {
                let _ = t.stream.shutdown().await;
            }
            Link::Http(h) => drop(h),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_through_every_framing_cut_anywhere() {
        let frames: [&[u8]; 4] = [b"", b"a", &[7u8; 300], b"hello world"];
        for name in ["u16be", "u16le", "u32be", "u32le", "varint32", "line"] {
            let framing = Framing::parse(name, None).expect(name);
            let mut wire = Vec::new();
            for f in frames {
                framing.encode(f, &mut wire).expect("encodes");
            }
            // Fed one byte at a time, the frames come out whole and in order.
            let mut buf = Vec::new();
            let mut got = Vec::new();
            for b in wire {
                buf.push(b);
                while let Some(f) = framing.decode(&mut buf, 1000).expect("decodes") {
                    got.push(f);
                }
            }
            let want: Vec<Vec<u8>> = frames.iter().map(|f| f.to_vec()).collect();
            assert_eq!(got, want, "{name}");
            assert!(buf.is_empty(), "{name}");
        }
    }

    #[test]
    fn known_prefixes_and_bad_input() {
        let mut out = Vec::new();
        Framing::Varint32
            .encode(&[0; 300], &mut out)
            .expect("encodes");
        assert_eq!(&out[..2], &[0xac, 0x02], "300 as a varint");
        let mut out = Vec::new();
        let be = Framing::parse("u16be", None).expect("u16be");
        be.encode(b"ab", &mut out).expect("encodes");
        assert_eq!(out, [0, 2, b'a', b'b']);
        let mut big = vec![0, 0, 0x10, 0];
        let err = Framing::parse("u32be", None)
            .expect("u32be")
            .decode(&mut big, 1000)
            .unwrap_err();
        assert!(err.contains("4096 bytes announced"), "{err}");
        let mut endless = vec![0xff; 5];
        assert!(Framing::Varint32.decode(&mut endless, 1000).is_err());
        assert!(be.encode(&[0; 70_000], &mut Vec::new()).is_err());
        assert!(Framing::parse("delimiter", None).is_err());
        assert!(Framing::parse("u24", None).unwrap_err().contains("one of"));
        let crlf = Framing::parse("delimiter", Some("\r\n")).expect("crlf");
        let mut buf = b"a\r\nb".to_vec();
        assert_eq!(crlf.decode(&mut buf, 10).expect("a"), Some(b"a".to_vec()));
        assert_eq!(crlf.decode(&mut buf, 10).expect("b"), None);
    }
}
