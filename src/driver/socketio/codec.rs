//! The Engine.IO v4 / Socket.IO v5 text packet codec (no binary attachments).
//!
//! Written by hand: the Rust client crates are weak (`rust_socketio`'s async API is alpha
//! and pulls in OpenSSL, a second reqwest and the unmaintained `backoff`), and over a
//! WebSocket the text protocol is one line of framing per packet:
//!
//! ```text
//! <engine type>[<socket type>[<namespace>,][<ack id>][<JSON data>]]
//! 4 2 /chat, 12 ["dm",{"to":"u2"}]   →   42/chat,12["dm",{"to":"u2"}]
//! ```
//!
//! Engine types: 0 open, 1 close, 2 ping, 3 pong, 4 message, 6 noop. Socket types inside a
//! message: 0 connect, 1 disconnect, 2 event, 3 ack, 4 connect error (5 and 6, the binary
//! ones, are refused: this driver sends and expects text only). Decoding borrows from the
//! frame; the data stays unparsed JSON text for the caller's paths.

use std::fmt::Write as _;

use crate::driver::kit::json_map::template::Template;

/// An event the driver emits: its name (as JSON text, with the opening of the argument
/// array) and the template of its one argument.
#[derive(Debug, Clone)]
pub struct Emit {
    /// `["name",` — the packet's data up to the argument.
    pub open: String,
    /// The argument.
    pub payload: Template,
}

/// A Socket.IO packet type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `0`: connect (client: with auth; server: `{sid, pid}`).
    Connect,
    /// `1`: disconnect from a namespace.
    Disconnect,
    /// `2`: an event, `["name", args…]`.
    Event,
    /// `3`: the answer to an event with an ack id, `[args…]`.
    Ack,
    /// `4`: the server refused the connect (`{"message": …}`).
    ConnectError,
}

const KINDS: [Kind; 5] = [
    Kind::Connect,
    Kind::Disconnect,
    Kind::Event,
    Kind::Ack,
    Kind::ConnectError,
];

/// A Socket.IO packet, borrowed from a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sio<'a> {
    /// Its type.
    pub kind: Kind,
    /// The namespace (`/` when the packet names none).
    pub nsp: &'a str,
    /// The ack id.
    pub id: Option<u64>,
    /// The JSON data, unparsed (empty: none).
    pub data: &'a str,
}

/// An Engine.IO packet, borrowed from a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Packet<'a> {
    /// `0{…}`: the handshake (sid, ping interval…), JSON text.
    Open(&'a str),
    /// `1`: the server closes the session.
    Close,
    /// `2`: a ping; answered with a pong.
    Ping,
    /// `3`: a pong.
    Pong,
    /// `4…`: a Socket.IO packet.
    Message(Sio<'a>),
    /// `6`: nothing.
    Noop,
}

/// Why a frame is not a packet.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The frame is empty.
    #[error("empty packet")]
    Empty,
    /// An Engine.IO type that is not 0–4 or 6.
    #[error("unknown Engine.IO packet type `{0}`")]
    Engine(char),
    /// A Socket.IO type that is not 0–4.
    #[error("unknown or binary Socket.IO packet type `{0}`")]
    Socket(char),
    /// A message without a Socket.IO type.
    #[error("message without a Socket.IO packet type")]
    NoType,
    /// A namespace without its closing comma.
    #[error("namespace without a `,`")]
    Namespace,
    /// An ack id out of range.
    #[error("ack id out of range")]
    AckId,
}

/// Decodes one text frame.
pub fn decode(text: &str) -> Result<Packet<'_>, DecodeError> {
    let mut chars = text.chars();
    let engine = chars.next().ok_or(DecodeError::Empty)?;
    let rest = chars.as_str();
    match engine {
        '0' => Ok(Packet::Open(rest)),
        '1' => Ok(Packet::Close),
        '2' => Ok(Packet::Ping),
        '3' => Ok(Packet::Pong),
        '6' => Ok(Packet::Noop),
        '4' => decode_sio(rest).map(Packet::Message),
        other => Err(DecodeError::Engine(other)),
    }
}

fn decode_sio(text: &str) -> Result<Sio<'_>, DecodeError> {
    let mut chars = text.chars();
    let t = chars.next().ok_or(DecodeError::NoType)?;
    let kind = t
        .to_digit(10)
        .and_then(|d| KINDS.get(d as usize).copied())
        .ok_or(DecodeError::Socket(t))?;
    let mut rest = chars.as_str();
    let mut nsp = "/";
    if rest.starts_with('/') {
        let comma = rest.find(',').ok_or(DecodeError::Namespace)?;
        nsp = &rest[..comma];
        rest = &rest[comma + 1..];
    }
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let id = if digits == 0 {
        None
    } else {
        Some(rest[..digits].parse().map_err(|_| DecodeError::AckId)?)
    };
    Ok(Sio {
        kind,
        nsp,
        id,
        data: &rest[digits..],
    })
}

/// Appends the head of a Socket.IO packet (`4`, type, namespace, ack id); the JSON data
/// follows it.
pub fn head(kind: Kind, nsp: &str, id: Option<u64>, out: &mut String) {
    let digit = KINDS.iter().position(|k| *k == kind).unwrap_or(0);
    let _ = write!(out, "4{digit}");
    if nsp != "/" {
        out.push_str(nsp);
        out.push(',');
    }
    if let Some(id) = id {
        let _ = write!(out, "{id}");
    }
}

/// Encodes a packet.
pub fn encode(p: &Packet<'_>, out: &mut String) {
    match p {
        Packet::Open(data) => {
            out.push('0');
            out.push_str(data);
        }
        Packet::Close => out.push('1'),
        Packet::Ping => out.push('2'),
        Packet::Pong => out.push('3'),
        Packet::Noop => out.push('6'),
        Packet::Message(s) => {
            head(s.kind, s.nsp, s.id, out);
            if s.nsp == "/" && s.id.is_none() && s.data.starts_with('/') {
                // Data that would read as a namespace follows the root one, named.
                out.push_str("/,");
            }
            out.push_str(s.data);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn decodes_what_socket_io_sends() {
        assert_eq!(
            decode(r#"0{"sid":"x","pingInterval":25000}"#),
            Ok(Packet::Open(r#"{"sid":"x","pingInterval":25000}"#))
        );
        assert_eq!(decode("2"), Ok(Packet::Ping));
        assert_eq!(
            decode(r#"40{"sid":"a","pid":"b"}"#),
            Ok(Packet::Message(Sio {
                kind: Kind::Connect,
                nsp: "/",
                id: None,
                data: r#"{"sid":"a","pid":"b"}"#
            }))
        );
        assert_eq!(
            decode(r#"43/chat,12[{"ok":true}]"#),
            Ok(Packet::Message(Sio {
                kind: Kind::Ack,
                nsp: "/chat",
                id: Some(12),
                data: r#"[{"ok":true}]"#
            }))
        );
        assert_eq!(decode("41/chat,").map(|_| ()), Ok(()));
        assert_eq!(decode(""), Err(DecodeError::Empty));
        assert_eq!(decode("4"), Err(DecodeError::NoType));
        assert_eq!(decode("45-[]"), Err(DecodeError::Socket('5')));
        assert_eq!(decode("42/chat[]"), Err(DecodeError::Namespace));
        assert_eq!(decode("9"), Err(DecodeError::Engine('9')));
        assert_eq!(decode("4299999999999999999999[]"), Err(DecodeError::AckId));
    }

    /// Found by the fuzz target: the root namespace written out, then data that starts
    /// with `/`; re-encoded without the namespace, the data read as one.
    #[test]
    fn data_starting_with_a_slash_round_trips() {
        let p = decode("42/,/,00").expect("decodes");
        let mut text = String::new();
        encode(&p, &mut text);
        assert_eq!(text, "42/,/,00");
        assert_eq!(decode(&text), Ok(p));
    }

    fn kind() -> impl Strategy<Value = Kind> {
        prop::sample::select(KINDS.to_vec())
    }

    proptest! {
        #[test]
        fn socket_packets_round_trip(
            kind in kind(),
            nsp in prop_oneof![Just("/".to_owned()), "/[a-z]{1,8}"],
            id in proptest::option::of(any::<u64>()),
            data in prop_oneof![Just(String::new()), r#"\[("[a-z ]{0,12}",?){0,3}\]"#, r#"\{"[a-z]{1,5}":[0-9]{1,4}\}"#],
        ) {
            let p = Packet::Message(Sio { kind, nsp: &nsp, id, data: &data });
            let mut text = String::new();
            encode(&p, &mut text);
            prop_assert_eq!(decode(&text), Ok(p));
        }

        #[test]
        fn engine_packets_round_trip(data in r#"\{[^\n]{0,30}\}"#) {
            for p in [Packet::Open(&data), Packet::Close, Packet::Ping, Packet::Pong, Packet::Noop] {
                let mut text = String::new();
                encode(&p, &mut text);
                prop_assert_eq!(decode(&text), Ok(p));
            }
        }

        #[test]
        fn garbage_never_panics(text in "\\PC{0,40}", prefix in "[0-9/,]{0,6}") {
            let _ = decode(&text);
            let _ = decode(&format!("{prefix}{text}"));
        }
    }
}
