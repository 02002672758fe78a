//! [`Inbox`]: what a session of a request/reply protocol over one socket keeps besides the
//! socket — request ids, sends waiting for their ack, frames read while a reply was awaited
//! (held for the engine, judged later in the order they came), and pings the server sent
//! that are not answered yet. Shared by the drivers that map an application's protocol
//! (`ws-json`, `socketio`), which used to keep a copy each.

use std::collections::VecDeque;

/// Request ids, acks owed, held frames and pongs owed of one connection.
#[derive(Debug, Default)]
pub(crate) struct Inbox {
    /// The last request id handed out (the first is 1).
    pub(crate) next_id: u64,
    /// Sends waiting for their ack: (request id, tag), oldest first.
    pub(crate) pending: VecDeque<(u64, u64)>,
    /// Frames (or documents of a frame) read while waiting for a reply, not judged yet.
    pub(crate) unread: VecDeque<String>,
    /// Server pings not answered yet.
    pub(crate) pongs_owed: u32,
}

impl Inbox {
    /// A new request id.
    pub(crate) fn next_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// Notes that the send `tag` went out as request `id` and waits for its ack.
    pub(crate) fn expect_ack(&mut self, id: u64, tag: u64) {
        self.pending.push_back((id, tag));
    }

    /// The tag of the send waiting for the ack of request `id`, no longer waiting.
    pub(crate) fn take_ack(&mut self, id: u64) -> Option<u64> {
        let i = self.pending.iter().position(|(r, _)| *r == id)?;
        self.pending.remove(i).map(|(_, tag)| tag)
    }

    /// Holds `frame`, read while waiting for a reply, to be judged later.
    pub(crate) fn hold(&mut self, frame: String) {
        self.unread.push_back(frame);
    }

    /// The oldest frame held, if any.
    pub(crate) fn take_unread(&mut self) -> Option<String> {
        self.unread.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acks_match_their_request_whatever_the_order() {
        let mut inbox = Inbox::default();
        let (a, b) = (inbox.next_id(), inbox.next_id());
        assert_eq!((a, b), (1, 2));
        inbox.expect_ack(a, 10);
        inbox.expect_ack(b, 20);
        assert_eq!(inbox.take_ack(b), Some(20));
        assert_eq!(inbox.take_ack(b), None);
        assert_eq!(inbox.take_ack(a), Some(10));
        assert!(inbox.pending.is_empty());
    }
}
