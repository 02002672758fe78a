//! The frames of signals, what clients send besides messages: contacts, presence, typing
//! notices and read receipts (the variants of [`ClientFrame`](super::ClientFrame) and
//! [`ServerFrame`](super::ServerFrame) that carry them). Each signal carries a short
//! `note` the server passes on unchanged ([`valid_note`]).

use serde::{Deserialize, Serialize};

use super::{ConvId, Dest, Ref};

/// Most user ids one [`ContactsAdd`] may list.
pub const MAX_CONTACTS: usize = 1000;
/// Longest `note`, in bytes.
pub const MAX_NOTE: usize = 128;
/// Most receipts one [`ReceiptPage`] holds.
pub const RECEIPT_PAGE_MAX: u32 = 1000;

/// Whether `note` is at most [`MAX_NOTE`] bytes of `A-Z a-z 0-9 : . _ -` (empty allowed).
pub fn valid_note(note: &str) -> bool {
    note.len() <= MAX_NOTE
        && note
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b':' | b'.' | b'_' | b'-'))
}

/// Online or offline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Available.
    Online,
    /// Gone.
    Offline,
}

/// Typing started or stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TypingState {
    /// The user started typing.
    Start,
    /// The user stopped typing.
    Stop,
}

/// `contacts`: the caller and each listed user become contacts of each other (mutual,
/// idempotent, stored); answered by `ok` once durable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContactsAdd {
    /// Echoed in the reply.
    #[serde(rename = "ref")]
    pub r#ref: Ref,
    /// User ids, at most [`MAX_CONTACTS`].
    pub add: Vec<String>,
}

/// `presence`: the caller's status, pushed to its contacts online (not stored).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Presence {
    /// When present, answered by `ok` once the pushes are queued.
    #[serde(rename = "ref", default, skip_serializing_if = "Option::is_none")]
    pub r#ref: Option<Ref>,
    /// Online or offline.
    pub status: Status,
    /// Passed on unchanged.
    #[serde(default)]
    pub note: String,
}

/// `typing`: pushed to the other members of the conversation online (not stored, no reply).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Typing {
    /// The peer of a direct conversation or a group.
    pub to: Dest,
    /// Started or stopped.
    pub state: TypingState,
    /// Passed on unchanged.
    #[serde(default)]
    pub note: String,
}

/// `receipt`: the caller read messages of `conv` from `to`; stored in `to`'s receipt inbox,
/// answered by `ok` after the commit, then pushed to `to`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Receipt {
    /// Echoed in the reply.
    #[serde(rename = "ref")]
    pub r#ref: Ref,
    /// The sender of the messages read.
    pub to: String,
    /// Their conversation.
    pub conv: ConvId,
    /// Passed on unchanged.
    #[serde(default)]
    pub note: String,
}

/// `receipts`: the caller's stored receipts with `rseq > after`, answered by a
/// [`ReceiptPage`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReceiptsQuery {
    /// Echoed in the reply.
    #[serde(rename = "ref")]
    pub r#ref: Ref,
    /// Return receipts after this receipt sequence number.
    pub after: u64,
    /// Page size (capped at [`RECEIPT_PAGE_MAX`]; 0 means the cap).
    pub limit: u32,
}

/// A presence pushed to a contact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PresencePush {
    /// Whose presence.
    pub from: String,
    /// Online or offline.
    pub status: Status,
    /// As the user sent it (empty when the server publishes `offline` itself).
    pub note: String,
    /// Server time, ms since the Unix epoch.
    pub ts: u64,
}

/// A typing notice pushed to a member of the conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TypingPush {
    /// Who types.
    pub from: String,
    /// Where.
    pub conv: ConvId,
    /// Started or stopped.
    pub state: TypingState,
    /// As the user sent it.
    pub note: String,
    /// Server time, ms since the Unix epoch.
    pub ts: u64,
}

/// A stored receipt, as pushed to its recipient and returned by a [`ReceiptPage`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReceiptPush {
    /// Who read.
    pub from: String,
    /// The conversation read.
    pub conv: ConvId,
    /// As the reader sent it.
    pub note: String,
    /// Its number in the recipient's receipt inbox: 1, 2, 3, … without gaps.
    pub rseq: u64,
    /// Server commit time, ms since the Unix epoch.
    pub ts: u64,
}

/// Reply to [`ReceiptsQuery`]: one page of stored receipts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReceiptPage {
    /// The client's `ref`.
    #[serde(rename = "ref")]
    pub r#ref: Ref,
    /// Receipts with `rseq > after`, ascending.
    pub receipts: Vec<ReceiptPush>,
    /// True when more receipts follow after the last one in this page.
    pub more: bool,
    /// The highest `rseq` of the caller's inbox (0: empty).
    pub last_rseq: u64,
}

#[cfg(test)]
mod tests {
    use super::super::{ClientFrame, ServerFrame};
    use super::*;

    #[test]
    fn signal_frames_use_the_documented_shape() {
        let text = r#"{"type":"receipt","ref":3,"to":"alice","conv":"d:alice:bob","note":"R1"}"#;
        let f: ClientFrame = serde_json::from_str(text).unwrap();
        assert_eq!(serde_json::to_string(&f).unwrap(), text);
        let extra = r#"{"type":"typing","to":{"user":"b"},"state":"start","from":"x"}"#;
        assert!(serde_json::from_str::<ClientFrame>(extra).is_err());
        let bare: ClientFrame =
            serde_json::from_str(r#"{"type":"presence","status":"online"}"#).unwrap();
        let ClientFrame::Presence(p) = bare else {
            panic!("not presence: {bare:?}");
        };
        assert_eq!((p.r#ref, p.note.as_str()), (None, ""));
        let push = ServerFrame::Receipt(ReceiptPush {
            from: "bob".into(),
            conv: "d:alice:bob".into(),
            note: "R1".into(),
            rseq: 5,
            ts: 9,
        });
        assert_eq!(
            serde_json::to_string(&push).unwrap(),
            r#"{"type":"receipt","from":"bob","conv":"d:alice:bob","note":"R1","rseq":5,"ts":9}"#
        );
    }

    #[test]
    fn notes_are_short_plain_tokens() {
        assert!(valid_note(""));
        assert!(valid_note("Rms1:abc.d_e-f"));
        assert!(valid_note(&"x".repeat(MAX_NOTE)));
        assert!(!valid_note(&"x".repeat(MAX_NOTE + 1)));
        assert!(!valid_note("a b"));
        assert!(!valid_note("é"));
    }
}
