//! The native protocol of the reference server: one JSON object per WebSocket text frame.
//!
//! These types are the single definition shared by `serve` (the reference server) and
//! `driver::native` (the load generator's client), so the two cannot drift. Every frame
//! carries a `"type"` tag; `docs/protocol.md` shows an example of each.
//!
//! This module imports nothing else from the crate.

mod scan;
pub mod signal;
mod spell;

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

pub use signal::{
    ContactsAdd, Presence, PresencePush, Receipt, ReceiptPage, ReceiptPush, ReceiptsQuery, Status,
    Typing, TypingPush, TypingState,
};

/// Version of this protocol; a client sends it in [`ClientFrame::Login`] and the server
/// refuses a version it does not speak with [`ErrorCode::BadVersion`].
pub const PROTOCOL_VERSION: u32 = 1;

/// The login token of `user` under the server's `secret`: hex HMAC-SHA256 of the user id.
/// The server checks it at login; load generators mint it from the shared secret. It
/// never expires; [`token_until`] mints one that does.
pub fn token(user: &str, secret: &str) -> String {
    hmac_hex(user, secret)
}

/// A login token of `user` that the server refuses from `expires` (Unix seconds) on:
/// `<hex HMAC-SHA256 of "USER|EXPIRES">.<EXPIRES>`.
pub fn token_until(user: &str, secret: &str, expires: u64) -> String {
    format!(
        "{}.{expires}",
        hmac_hex(&format!("{user}|{expires}"), secret)
    )
}

fn hmac_hex(text: &str, secret: &str) -> String {
    use hmac::{Hmac, Mac};
    use std::fmt::Write;
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes())
        .expect("HMAC accepts keys of any length");
    mac.update(text.as_bytes());
    let mut out = String::with_capacity(64);
    for byte in mac.finalize().into_bytes() {
        let _ = write!(out, "{byte:02x}");
    }
    out
}

/// A client-chosen number that ties a reply to its request; echoed by the server.
pub type Ref = u64;

/// Where a message goes: one user (a direct conversation) or a group.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dest {
    /// A direct (1:1) message to this user id.
    User(String),
    /// A message to every member of this group.
    Group(String),
}

/// A conversation id as the server names it: `d:<a>:<b>` (a < b) for a direct pair,
/// `g:<group>` for a group. Sequence numbers are per conversation.
pub type ConvId = String;

/// The conversation id of a direct conversation between two users (order-independent).
pub fn direct_conv(a: &str, b: &str) -> ConvId {
    if a <= b {
        format!("d:{a}:{b}")
    } else {
        format!("d:{b}:{a}")
    }
}

/// The conversation id of a group.
pub fn group_conv(group: &str) -> ConvId {
    format!("g:{group}")
}

/// A stored message as pushed to members or returned by a sync.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Msg {
    /// The conversation it belongs to.
    pub conv: ConvId,
    /// Its sequence number in that conversation: 1, 2, 3, … without gaps.
    pub seq: u64,
    /// The sending user id (set by the server from the login, never by the client).
    pub from: String,
    /// The body exactly as the sender sent it.
    pub body: String,
    /// Server time of the commit, milliseconds since the Unix epoch.
    pub ts: u64,
}

/// The frames a client reads most, borrowed from the frame's text: a push and an ack,
/// with the fields of [`ServerFrame::Msg`] and [`ServerFrame::Ack`] (strings borrowed
/// unless they hold JSON escapes). [`Hot::parse`] reads one without building the owned
/// frame, so a load generator reads a push without copying its conversation or sender.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hot<'a> {
    /// A pushed message.
    Msg(MsgRef<'a>),
    /// A send was committed.
    Ack(AckRef<'a>),
}

/// [`Msg`] borrowed from a frame's text.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct MsgRef<'a> {
    /// The conversation it belongs to.
    #[serde(borrow)]
    pub conv: Cow<'a, str>,
    /// Its sequence number in that conversation.
    pub seq: u64,
    /// The sending user id.
    #[serde(borrow)]
    pub from: Cow<'a, str>,
    /// The body exactly as the sender sent it.
    #[serde(borrow)]
    pub body: Cow<'a, str>,
    /// Server time of the commit, milliseconds since the Unix epoch.
    pub ts: u64,
}

/// The fields of [`ServerFrame::Ack`] borrowed from a frame's text.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct AckRef<'a> {
    /// The client's `ref` from [`ClientFrame::Send`].
    #[serde(rename = "ref")]
    pub r#ref: Ref,
    /// Its conversation.
    #[serde(borrow)]
    pub conv: Cow<'a, str>,
    /// Its sequence number in the conversation.
    pub seq: u64,
    /// Server commit time, ms since the Unix epoch.
    pub ts: u64,
}

/// How a push starts as [`ServerFrame`] writes it (the tag first).
const MSG_START: &str = r#"{"type":"msg","#;
/// How an ack starts as [`ServerFrame`] writes it.
const ACK_START: &str = r#"{"type":"ack","#;

impl<'a> Hot<'a> {
    /// Reads a push or an ack written the way [`ServerFrame`] writes them (the `type` tag
    /// first, no spaces); `None` for any other frame, which the caller reads as an owned
    /// [`ServerFrame`]. (Serde's internally tagged enums buffer every field of a frame
    /// into owned values before they pick the variant; this dispatches on the tag first
    /// and then borrows.) The server's exact spelling is read without a JSON parser
    /// (`scan`); anything else after the tag, with serde_json.
    pub fn parse(text: &'a str) -> Option<Result<Hot<'a>, serde_json::Error>> {
        if let Some(rest) = text.strip_prefix(MSG_START) {
            Some(
                scan::msg(rest)
                    .map_or_else(|| serde_json::from_str(text), Ok)
                    .map(Hot::Msg),
            )
        } else {
            let rest = text.strip_prefix(ACK_START)?;
            Some(
                scan::ack(rest)
                    .map_or_else(|| serde_json::from_str(text), Ok)
                    .map(Hot::Ack),
            )
        }
    }
}

/// One conversation in a [`ServerFrame::ConvList`]: its id and latest sequence number.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConvInfo {
    /// The conversation id.
    pub conv: ConvId,
    /// The highest committed sequence number in it.
    pub last_seq: u64,
}

/// Frames a client sends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ClientFrame {
    /// Log in; must be the first frame. `token` is `msgstorm token USER --secret S`.
    Login {
        /// Protocol version the client speaks ([`PROTOCOL_VERSION`]).
        v: u32,
        /// The user id.
        user: String,
        /// HMAC token of the user id.
        token: String,
    },
    /// Send a message; answered by [`ServerFrame::Ack`] once durably stored, or an error.
    Send {
        /// Echoed in the ack.
        #[serde(rename = "ref")]
        r#ref: Ref,
        /// Recipient user or group.
        to: Dest,
        /// Opaque body, at most the server's `--max-body` bytes.
        body: String,
    },
    /// Create a group; the creator becomes its first member. Answered by [`ServerFrame::Ok`].
    GroupCreate {
        /// Echoed in the reply.
        #[serde(rename = "ref")]
        r#ref: Ref,
        /// Group name.
        group: String,
    },
    /// Join an existing group (idempotent).
    GroupJoin {
        /// Echoed in the reply.
        #[serde(rename = "ref")]
        r#ref: Ref,
        /// Group name.
        group: String,
    },
    /// Add a user to a group; only the group's creator may (the way in to an invite-only
    /// group). Idempotent; answered by [`ServerFrame::Ok`].
    GroupAdd {
        /// Echoed in the reply.
        #[serde(rename = "ref")]
        r#ref: Ref,
        /// Group name.
        group: String,
        /// The user id to add.
        user: String,
    },
    /// Leave a group (idempotent).
    GroupLeave {
        /// Echoed in the reply.
        #[serde(rename = "ref")]
        r#ref: Ref,
        /// Group name.
        group: String,
    },
    /// List the caller's conversations with their latest sequence numbers.
    Convs {
        /// Echoed in the reply.
        #[serde(rename = "ref")]
        r#ref: Ref,
    },
    /// Fetch messages of a conversation with `seq > after`, oldest first, at most `limit`.
    Sync {
        /// Echoed in the reply.
        #[serde(rename = "ref")]
        r#ref: Ref,
        /// The conversation.
        conv: ConvId,
        /// Return messages after this sequence number.
        after: u64,
        /// Page size (the server caps it).
        limit: u32,
    },
    /// Heartbeat; answered by [`ServerFrame::Pong`].
    Ping {
        /// Opaque value echoed in the pong.
        #[serde(default)]
        ts: u64,
    },
    /// The cheap request of the request/response workload: the server's clock.
    Time {
        /// Echoed in the reply.
        #[serde(rename = "ref")]
        r#ref: Ref,
    },
    /// The expensive request: a lookup through the worker pool and the simulated backend.
    KvGet {
        /// Echoed in the reply.
        #[serde(rename = "ref")]
        r#ref: Ref,
        /// The key to look up.
        key: String,
    },
    /// Make the caller and each listed user contacts of each other ([`signal`]).
    Contacts(ContactsAdd),
    /// Publish the caller's presence to its contacts online.
    Presence(Presence),
    /// Tell the other members of a conversation online that the caller types.
    Typing(Typing),
    /// Store a read receipt for the sender of the messages read, and push it.
    Receipt(Receipt),
    /// Fetch the caller's stored receipts, paged.
    Receipts(ReceiptsQuery),
}

/// [`ClientFrame::Send`] with its recipient and body borrowed: what a client writes per
/// message, serialized exactly as the owned frame without copying the body into one first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename = "send")]
pub struct SendRef<'a> {
    /// Echoed in the ack.
    #[serde(rename = "ref")]
    pub r#ref: Ref,
    /// Recipient user or group.
    pub to: DestRef<'a>,
    /// Opaque body.
    pub body: &'a str,
}

impl SendRef<'_> {
    /// The frame's JSON, as [`serde_json::to_string`] writes it (faster for strings that
    /// need no escape, see `spell`).
    pub fn to_json(&self) -> serde_json::Result<String> {
        spell::send(self).map_or_else(|| serde_json::to_string(self), Ok)
    }
}

/// [`Dest`] borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DestRef<'a> {
    /// A direct (1:1) message to this user id.
    User(&'a str),
    /// A message to every member of this group.
    Group(&'a str),
}

/// Frames the server sends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerFrame {
    /// Login accepted.
    Welcome {
        /// Protocol version the server speaks.
        v: u32,
        /// The logged-in user id.
        user: String,
        /// Server time, ms since the Unix epoch.
        ts: u64,
    },
    /// A sent message is durably committed.
    Ack {
        /// The client's `ref` from [`ClientFrame::Send`].
        #[serde(rename = "ref")]
        r#ref: Ref,
        /// Its conversation.
        conv: ConvId,
        /// Its sequence number in the conversation.
        seq: u64,
        /// Server commit time, ms since the Unix epoch.
        ts: u64,
    },
    /// A message pushed to an online member.
    Msg(Msg),
    /// A request without a payload succeeded (group create/join/leave, contacts, receipt).
    Ok {
        /// The client's `ref`.
        #[serde(rename = "ref")]
        r#ref: Ref,
    },
    /// Reply to [`ClientFrame::Convs`].
    ConvList {
        /// The client's `ref`.
        #[serde(rename = "ref")]
        r#ref: Ref,
        /// The caller's conversations.
        convs: Vec<ConvInfo>,
    },
    /// Reply to [`ClientFrame::Sync`]: one page of messages.
    SyncPage {
        /// The client's `ref`.
        #[serde(rename = "ref")]
        r#ref: Ref,
        /// The conversation.
        conv: ConvId,
        /// Messages with `seq > after`, ascending.
        msgs: Vec<Msg>,
        /// True when more messages follow after the last one in this page.
        more: bool,
    },
    /// Heartbeat reply.
    Pong {
        /// The value from the ping.
        ts: u64,
    },
    /// Reply to [`ClientFrame::Time`].
    TimeReply {
        /// The client's `ref`.
        #[serde(rename = "ref")]
        r#ref: Ref,
        /// Server time, microseconds since the Unix epoch.
        ts_us: u64,
    },
    /// Reply to [`ClientFrame::KvGet`].
    KvValue {
        /// The client's `ref`.
        #[serde(rename = "ref")]
        r#ref: Ref,
        /// The key.
        key: String,
        /// The value the simulated backend holds for it.
        value: String,
    },
    /// A contact's presence ([`signal`]).
    Presence(PresencePush),
    /// A member of a conversation types.
    Typing(TypingPush),
    /// A read receipt for the caller.
    Receipt(ReceiptPush),
    /// Reply to [`ClientFrame::Receipts`].
    ReceiptPage(ReceiptPage),
    /// Something went wrong. With a `ref` it answers that request; without one it concerns
    /// the connection, and when `fatal` is true the server closes the connection after it.
    Error {
        /// The request it answers, if any.
        #[serde(rename = "ref", default, skip_serializing_if = "Option::is_none")]
        r#ref: Option<Ref>,
        /// Machine-readable reason.
        code: ErrorCode,
        /// Human-readable detail.
        message: String,
        /// True when the server closes the connection after this frame.
        #[serde(default)]
        fatal: bool,
    },
}

/// Machine-readable error reasons of [`ServerFrame::Error`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The token does not match the user id.
    BadToken,
    /// The client speaks a protocol version the server does not.
    BadVersion,
    /// A frame other than login arrived before login.
    NotLoggedIn,
    /// A second login on a logged-in connection.
    AlreadyLoggedIn,
    /// The frame is not valid JSON or misses a field.
    Malformed,
    /// The frame's `type` is not one this server knows.
    UnknownType,
    /// The frame is larger than the server's maximum frame size.
    FrameTooLarge,
    /// The message body is larger than the server's maximum body size.
    BodyTooLarge,
    /// A binary frame arrived; the protocol is text only.
    BinaryFrame,
    /// The group does not exist.
    NoSuchGroup,
    /// The group already exists.
    GroupExists,
    /// The caller is not a member of the group.
    NotMember,
    /// The recipient user id is invalid.
    BadRecipient,
    /// The server holds its maximum number of connections.
    TooManyConnections,
    /// The client did not read its pushes fast enough; its queue overflowed.
    SlowConsumer,
    /// Nothing arrived within the idle timeout.
    IdleTimeout,
    /// The connection did not log in within the login timeout.
    LoginTimeout,
    /// The caller may not do this (join an invite-only group it was not added to, add
    /// members to a group it did not create).
    Forbidden,
    /// The server is shutting down.
    ShuttingDown,
    /// The request could not be served now (worker pool full).
    Overloaded,
    /// An internal failure (storage); the message was not stored.
    Internal,
}

impl ErrorCode {
    /// The snake_case name used on the wire and in metrics labels.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadToken => "bad_token",
            ErrorCode::BadVersion => "bad_version",
            ErrorCode::NotLoggedIn => "not_logged_in",
            ErrorCode::AlreadyLoggedIn => "already_logged_in",
            ErrorCode::Malformed => "malformed",
            ErrorCode::UnknownType => "unknown_type",
            ErrorCode::FrameTooLarge => "frame_too_large",
            ErrorCode::BodyTooLarge => "body_too_large",
            ErrorCode::BinaryFrame => "binary_frame",
            ErrorCode::NoSuchGroup => "no_such_group",
            ErrorCode::GroupExists => "group_exists",
            ErrorCode::NotMember => "not_member",
            ErrorCode::BadRecipient => "bad_recipient",
            ErrorCode::TooManyConnections => "too_many_connections",
            ErrorCode::SlowConsumer => "slow_consumer",
            ErrorCode::IdleTimeout => "idle_timeout",
            ErrorCode::LoginTimeout => "login_timeout",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::ShuttingDown => "shutting_down",
            ErrorCode::Overloaded => "overloaded",
            ErrorCode::Internal => "internal",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_depend_on_user_and_secret() {
        let t = token("u1", "s");
        assert_eq!(t.len(), 64);
        assert_ne!(t, token("u2", "s"));
        assert_ne!(t, token("u1", "t"));
        assert_eq!(t, token("u1", "s"));
    }

    #[test]
    fn client_frames_use_the_documented_shape() {
        let f = ClientFrame::Send {
            r#ref: 7,
            to: Dest::Group("g1".into()),
            body: "hi".into(),
        };
        let s = serde_json::to_string(&f).unwrap();
        assert_eq!(
            s,
            r#"{"type":"send","ref":7,"to":{"group":"g1"},"body":"hi"}"#
        );
        let back: ClientFrame = serde_json::from_str(&s).unwrap();
        assert_eq!(back, f);
        let borrowed = SendRef {
            r#ref: 7,
            to: DestRef::Group("g1"),
            body: "hi",
        };
        assert_eq!(serde_json::to_string(&borrowed).unwrap(), s);
        let direct = SendRef {
            to: DestRef::User("u\"2"),
            ..borrowed
        };
        let owned = ClientFrame::Send {
            r#ref: 7,
            to: Dest::User("u\"2".into()),
            body: "hi".into(),
        };
        assert_eq!(
            serde_json::to_string(&direct).unwrap(),
            serde_json::to_string(&owned).unwrap()
        );
    }

    #[test]
    fn server_msg_is_flat() {
        let f = ServerFrame::Msg(Msg {
            conv: direct_conv("b", "a"),
            seq: 3,
            from: "a".into(),
            body: "x".into(),
            ts: 1,
        });
        let s = serde_json::to_string(&f).unwrap();
        assert_eq!(
            s,
            r#"{"type":"msg","conv":"d:a:b","seq":3,"from":"a","body":"x","ts":1}"#
        );
    }

    /// The borrowed reading of a push and an ack agrees with the owned frame the server
    /// writes; other frames and other spellings are left to the owned reading.
    #[test]
    fn hot_frames_borrow_what_the_server_writes() {
        let msg = Msg {
            conv: group_conv("g1"),
            seq: 9,
            from: "u\"1".into(),
            body: "ms1:body".into(),
            ts: 5,
        };
        let text = serde_json::to_string(&ServerFrame::Msg(msg.clone())).unwrap();
        let Some(Ok(Hot::Msg(m))) = Hot::parse(&text) else {
            panic!("not a push: {text}");
        };
        assert!(matches!(m.body, Cow::Borrowed(_)));
        assert_eq!(
            (
                m.conv.as_ref(),
                m.seq,
                m.from.as_ref(),
                m.body.as_ref(),
                m.ts
            ),
            (msg.conv.as_str(), 9, msg.from.as_str(), "ms1:body", 5)
        );
        let ack = ServerFrame::Ack {
            r#ref: 3,
            conv: "d:a:b".into(),
            seq: 4,
            ts: 1,
        };
        let text = serde_json::to_string(&ack).unwrap();
        let Some(Ok(Hot::Ack(a))) = Hot::parse(&text) else {
            panic!("not an ack: {text}");
        };
        assert_eq!((a.r#ref, a.conv.as_ref(), a.seq, a.ts), (3, "d:a:b", 4, 1));
        let pong = serde_json::to_string(&ServerFrame::Pong { ts: 1 }).unwrap();
        assert!(Hot::parse(&pong).is_none());
        assert!(Hot::parse(r#"{ "type":"msg"}"#).is_none());
        assert!(matches!(
            Hot::parse(r#"{"type":"msg","seq":"x"}"#),
            Some(Err(_))
        ));
    }

    #[test]
    fn unknown_fields_and_types_are_rejected() {
        assert!(serde_json::from_str::<ClientFrame>(r#"{"type":"nope"}"#).is_err());
        assert!(serde_json::from_str::<ClientFrame>(r#"{"type":"time","ref":1,"x":2}"#).is_err());
    }
}
