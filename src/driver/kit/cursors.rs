//! Per-conversation sync positions, for the drivers whose server numbers each
//! conversation's messages (`native`, `ws-json`): the state a user keeps between
//! connections so that pushes and fetched pages merge as a real client merges them.
//!
//! - A fetch of missed messages pages each conversation after the sequence number up to
//!   which the user has everything.
//! - A push is judged against what was seen and pushed before (`Seen::push`): new, the
//!   copy of a message a sync already returned (dropped), or a message pushed again or out
//!   of order (passed on for the ledger to count as duplicated or reordered).

use std::collections::BTreeSet;

/// What a user remembers between connections: per conversation, the sequence numbers
/// seen and the highest one pushed.
///
/// A fetch of missed messages pages each conversation after `upto`, the sequence number up
/// to which everything is accounted for: seen in this run, covered by an earlier sync page
/// (a page holds every message between its ends, whether the server's numbers skip or
/// not), or held by the server before the run
/// ([`Session::skip_history`](crate::driver::Session::skip_history)).
#[derive(Debug, Default)]
pub struct Cursors {
    convs: foldhash::HashMap<String, Seen>,
}

/// Sequence numbers seen in one conversation: everything up to `upto` (seen, or covered by
/// a sync or the run's start), plus a few above it; and `pushed`, the highest sequence
/// number the server pushed to this user.
#[derive(Debug, Default)]
pub(in crate::driver) struct Seen {
    pub(in crate::driver) upto: u64,
    above: BTreeSet<u64>,
    pushed: u64,
}

/// What a push is to the user who receives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::driver) enum Push {
    /// Not seen before: a delivery.
    New,
    /// A sync already returned it: the same message both ways, not handed out again.
    Synced,
    /// At or below the highest sequence number pushed before: the server sent it again or
    /// out of order; handed out as it is for the ledger to judge.
    Again,
}

impl Seen {
    /// Marks `seq` seen; returns false when it already was.
    pub(in crate::driver) fn mark(&mut self, seq: u64) -> bool {
        if seq <= self.upto {
            return false;
        }
        if seq != self.upto + 1 {
            return self.above.insert(seq);
        }
        self.upto = seq;
        while self.above.remove(&(self.upto + 1)) {
            self.upto += 1;
        }
        true
    }

    /// Marks everything up to `seq` accounted for: a sync page covered it, or the server
    /// held it before the run. Sequence numbers above it seen before are kept.
    pub(in crate::driver) fn cover(&mut self, seq: u64) {
        if seq <= self.upto {
            return;
        }
        self.upto = seq;
        self.above = self.above.split_off(&(seq + 1));
        while self.above.remove(&(self.upto + 1)) {
            self.upto += 1;
        }
    }

    /// Marks a push of `seq` seen and says what it is.
    pub(in crate::driver) fn push(&mut self, seq: u64) -> Push {
        if seq <= self.pushed {
            self.mark(seq);
            return Push::Again;
        }
        self.pushed = seq;
        if self.mark(seq) {
            Push::New
        } else {
            Push::Synced
        }
    }
}

impl Cursors {
    /// The sequence number up to which everything in `conv` was seen (0: nothing).
    pub(in crate::driver) fn upto(&self, conv: &str) -> u64 {
        self.convs.get(conv).map_or(0, |s| s.upto)
    }

    /// Marks everything up to `seq` in `conv` accounted for ([`Seen::cover`]). Covering
    /// nothing (0) leaves an unknown conversation unknown: a user with no history to note
    /// (every idle user at its login) holds no table.
    pub(in crate::driver) fn cover(&mut self, conv: &str, seq: u64) {
        if seq > 0 {
            self.with(conv, |s| s.cover(seq));
        }
    }

    /// Runs `f` on what was seen in `conv` (one lookup when the conversation is known).
    pub(in crate::driver) fn with<R>(&mut self, conv: &str, f: impl FnOnce(&mut Seen) -> R) -> R {
        match self.convs.get_mut(conv) {
            Some(seen) => f(seen),
            None => f(self.convs.entry(conv.to_owned()).or_default()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn covering_nothing_leaves_a_conversation_unknown() {
        let mut c = Cursors::default();
        c.cover("a", 0);
        assert!(c.convs.is_empty(), "no table for nothing to note");
        assert_eq!(c.upto("a"), 0);
        c.cover("a", 5);
        c.cover("a", 0);
        assert_eq!(c.upto("a"), 5);
        assert_eq!(c.convs.len(), 1);
    }

    #[test]
    fn seen_tracks_holes_and_compacts() {
        let mut s = Seen::default();
        assert!(s.mark(1));
        assert!(s.mark(3));
        assert!(!s.mark(3));
        assert!(s.upto < 2 && !s.above.contains(&2));
        assert!(s.mark(2));
        assert_eq!(s.upto, 3);
        assert!(s.above.is_empty());
        assert!(!s.mark(1));
    }

    /// A sync page (or the run's start) covers everything up to its last seq,
    /// whether the numbers skip or not; what was seen above it stays seen.
    #[test]
    fn covering_accounts_for_everything_below_whatever_the_numbers() {
        let mut s = Seen::default();
        assert!(s.mark(3) && s.mark(9) && s.mark(12));
        assert_eq!(s.upto, 0, "skipping numbers never join up by themselves");
        s.cover(9);
        assert_eq!(s.upto, 9);
        assert!(!s.mark(5), "covered by the page");
        assert!(!s.mark(12), "seen above the page");
        assert!(s.mark(10));
        s.cover(11);
        assert_eq!(s.upto, 12, "joined up with what was seen above");
        assert!(s.above.is_empty());
        s.cover(4);
        assert_eq!(s.upto, 12, "never goes back");
    }

    /// A push above the pushed mark is new unless synced; at or below it, it is passed on.
    #[test]
    fn pushes_are_judged_against_the_pushed_mark() {
        let mut s = Seen::default();
        assert!(s.mark(1) && s.mark(2)); // returned by a sync
        assert_eq!(s.push(1), Push::Synced);
        assert_eq!(s.push(2), Push::Synced);
        assert_eq!(s.push(2), Push::Again); // the server sent it twice
        assert_eq!(s.push(4), Push::New);
        assert_eq!(s.push(3), Push::Again); // overtaken by 4: new to the ledger, reordered
        assert_eq!((s.upto, s.pushed), (4, 4));
    }
}
