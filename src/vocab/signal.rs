//! The signals users send besides messages: read receipts, typing notices and presence.

use serde::{Deserialize, Serialize};

/// A kind of signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SignalKind {
    /// A read receipt, from a message's reader to its sender.
    Read,
    /// A typing notice, to the peer or the group.
    Typing,
    /// Presence at login and logout, to the user's contacts online.
    Presence,
}

impl SignalKind {
    /// Every kind, in report order.
    pub const ALL: [SignalKind; 3] = [SignalKind::Read, SignalKind::Typing, SignalKind::Presence];

    /// The name in reports and `result.json`.
    pub fn name(self) -> &'static str {
        match self {
            SignalKind::Read => "receipts",
            SignalKind::Typing => "typing",
            SignalKind::Presence => "presence",
        }
    }

    /// The letter a signal's token starts with (see `crate::envelope::token`).
    pub fn letter(self) -> u8 {
        match self {
            SignalKind::Read => b'R',
            SignalKind::Typing => b'T',
            SignalKind::Presence => b'P',
        }
    }

    /// The kind whose token starts with `letter`.
    pub fn of_letter(letter: u8) -> Option<SignalKind> {
        SignalKind::ALL.into_iter().find(|k| k.letter() == letter)
    }
}
