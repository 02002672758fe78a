//! XEP-0198 stream management: a session's counts and unacknowledged sends, what resuming
//! it takes, and how counts compare across their wrap.

use std::collections::VecDeque;

/// What resuming an XEP-0198 session takes.
#[derive(Debug)]
pub(super) struct SmResume {
    /// The session id the server gave.
    pub(super) id: String,
    /// Stanzas of the server the engine took: the server retransmits the rest.
    pub(super) handed: u32,
    /// Our messages the server had not acknowledged when the connection broke: those past
    /// the `h` of its `<resumed/>` are sent again.
    pub(super) unacked: VecDeque<Unacked>,
}

/// A message sent and not acknowledged yet (XEP-0198).
#[derive(Debug)]
pub(super) struct Unacked {
    /// Its stanza count.
    pub(super) n: u32,
    /// The engine's tag of the send.
    pub(super) tag: u64,
    /// The stanza, kept to send it again after a resumption (only when the session can be
    /// resumed).
    pub(super) xml: Option<String>,
}

/// Whether stanza count `n` is at or before `h` (XEP-0198 counts wrap at 2^32).
pub(super) fn acked(n: u32, h: u32) -> bool {
    h.wrapping_sub(n) < 1 << 31
}

/// XEP-0198 state of a session.
#[derive(Debug, Default)]
pub(super) struct Sm {
    /// The id to resume the session with, when the server allows resumption.
    pub(super) id: Option<String>,
    /// Stanzas sent since `<enable/>`.
    pub(super) sent: u32,
    /// Stanzas received since `<enable/>`.
    pub(super) received: u32,
    /// Sends not acknowledged yet, oldest first.
    pub(super) tags: VecDeque<Unacked>,
    /// `sent` when the last `<r/>` went out.
    pub(super) requested: u32,
    /// The server asked for an ack.
    pub(super) ack_owed: bool,
}
