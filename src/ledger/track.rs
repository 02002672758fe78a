//! The received set of one track and the sender side of one stream.

/// Sender side of a stream.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Stream {
    /// One past the highest sequence number sent or refused.
    pub(super) sent: u64,
    /// Refused sequence numbers, sorted, distinct, all below `sent`.
    pub(super) refused: Vec<u64>,
    /// The refused ones that were never sent because their sender was offline when they
    /// were due: sorted, distinct, a subset of `refused`. Not planned deliveries.
    pub(super) dropped: Vec<u64>,
    /// With chaos steps: `cuts[k]` is the first seq due at or after the ledger's bound `k`
    /// (`u64::MAX`: none seen), so a seq's span is the number of cuts at or below it.
    pub(super) cuts: Vec<u64>,
    /// With a login wave: `wave[k]` is the first seq due at or after the ledger's wave
    /// bound `k`, like `cuts`; a seq past an odd number of them was due in the wave.
    pub(super) wave: Vec<u64>,
    /// Sends the schedule made due on it (0: not known, e.g. a pattern without a count or
    /// an end): the deliveries planned count these, sent or not.
    pub(super) due: u64,
}

/// Notes in `cuts` (one per bound of `n`) that `seq` was due after the first `past` of
/// the bounds: it is the first seq at or after each of them unless a lower one came before.
pub(super) fn cut(cuts: &mut Vec<u64>, n: usize, seq: u64, past: usize) {
    if past == 0 || n == 0 {
        return;
    }
    if cuts.len() < n {
        cuts.resize(n, u64::MAX);
    }
    for c in &mut cuts[..past.min(n)] {
        *c = (*c).min(seq);
    }
}

/// Adds the cuts another process noted (the lower first seq of each bound wins).
pub(super) fn merge_cuts(cuts: &mut Vec<u64>, other: &[u64]) {
    if cuts.len() < other.len() {
        cuts.resize(other.len(), u64::MAX);
    }
    for (a, &b) in cuts.iter_mut().zip(other) {
        *a = (*a).min(b);
    }
}

/// How many of the bounds `cuts` were noted for a seq was due after.
pub(super) fn past(cuts: &[u64], seq: u64) -> usize {
    cuts.partition_point(|&c| c <= seq)
}

/// Receiver side of a stream × recipient.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Track {
    /// Registered with `expect`.
    pub(super) expected: bool,
    /// Every seq below this was received.
    pub(super) next: u64,
    /// Half-open ranges received above `next`: sorted, disjoint, not adjacent, and the
    /// first starts above `next`.
    pub(super) above: Vec<(u64, u64)>,
}

impl Track {
    /// One past the highest seq received (0: none).
    pub(super) fn end(&self) -> u64 {
        self.above.last().map_or(self.next, |r| r.1)
    }

    /// Adds `seq` to the received set; false when it was already there.
    pub(super) fn insert(&mut self, seq: u64) -> bool {
        if seq < self.next {
            return false;
        }
        let i = self.above.partition_point(|r| r.1 < seq);
        if self.above.get(i).is_some_and(|r| r.0 <= seq && seq < r.1) {
            return false;
        }
        let after = seq.saturating_add(1);
        if seq == self.next {
            self.next = after;
            if self.above.first().is_some_and(|r| r.0 == self.next) {
                self.next = self.above.remove(0).1;
                if self.above.is_empty() {
                    self.above = Vec::new();
                }
            }
            return true;
        }
        let joins_left = self.above.get(i).is_some_and(|r| r.1 == seq);
        let right = if joins_left { i + 1 } else { i };
        let joins_right = self.above.get(right).is_some_and(|r| r.0 == after);
        match (joins_left, joins_right) {
            (true, true) => {
                self.above[i].1 = self.above[right].1;
                self.above.remove(right);
            }
            (true, false) => self.above[i].1 = after,
            (false, true) => self.above[i].0 = seq,
            (false, false) => self.above.insert(i, (seq, after)),
        }
        true
    }

    /// The track a result file wrote as `next` and the ranges received above it; `None`
    /// unless they are sorted, disjoint, not adjacent and above `next`.
    pub(super) fn from_parts(expected: bool, next: u64, above: Vec<(u64, u64)>) -> Option<Track> {
        let ok = above.iter().all(|r| r.0 < r.1)
            && above.first().is_none_or(|r| r.0 > next)
            && above.windows(2).all(|w| w[0].1 < w[1].0);
        ok.then_some(Track {
            expected,
            next,
            above,
        })
    }

    /// Whether `seq` was received.
    pub(super) fn has(&self, seq: u64) -> bool {
        seq < self.next || {
            let i = self.above.partition_point(|r| r.1 <= seq);
            self.above.get(i).is_some_and(|r| r.0 <= seq)
        }
    }

    /// Whether any seq above `seq` and below `to` was received.
    pub(super) fn received_within(&self, seq: u64, to: u64) -> bool {
        let from = seq.saturating_add(1);
        if from >= to {
            return false;
        }
        if from < self.next {
            return true;
        }
        let i = self.above.partition_point(|r| r.1 <= from);
        self.above.get(i).is_some_and(|r| r.0 < to)
    }

    /// Every received range, `[0, next)` first.
    pub(super) fn ranges(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        std::iter::once((0, self.next))
            .filter(|r| r.1 > 0)
            .chain(self.above.iter().copied())
    }

    /// Adds everything `other` received.
    pub(super) fn union(&mut self, other: &Track) {
        self.expected |= other.expected;
        let mut all: Vec<(u64, u64)> = self.ranges().chain(other.ranges()).collect();
        all.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(all.len());
        for r in all {
            match merged.last_mut() {
                Some(last) if r.0 <= last.1 => last.1 = last.1.max(r.1),
                _ => merged.push(r),
            }
        }
        self.next = 0;
        if merged.first().is_some_and(|r| r.0 == 0) {
            self.next = merged.remove(0).1;
        }
        merged.shrink_to_fit();
        self.above = merged;
    }

    /// How many of the seqs `s` expects were received.
    pub(super) fn received_of(&self, s: &Stream) -> u64 {
        self.ranges()
            .map(|(a, b)| {
                let b = b.min(s.sent);
                if a >= b {
                    return 0;
                }
                let lo = s.refused.partition_point(|&x| x < a);
                let hi = s.refused.partition_point(|&x| x < b);
                (b - a) - (hi - lo) as u64
            })
            .sum()
    }

    /// The seqs `s` expects that were never received, ascending.
    pub(super) fn missing<'a>(&'a self, s: &'a Stream) -> impl Iterator<Item = u64> + 'a {
        let starts = std::iter::once(self.next).chain(self.above.iter().map(|r| r.1));
        let ends = self
            .above
            .iter()
            .map(|r| r.0)
            .chain(std::iter::once(u64::MAX));
        starts
            .zip(ends)
            .flat_map(move |(a, b)| a.min(s.sent)..b.min(s.sent))
            .filter(move |seq| s.refused.binary_search(seq).is_err())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    #[test]
    fn holes_fill_and_compact() {
        let mut t = Track::default();
        for seq in [5, 3, 9, 4, 7, 8] {
            assert!(t.insert(seq));
        }
        assert_eq!((t.next, t.above.clone()), (0, vec![(3, 6), (7, 10)]));
        assert!(!t.insert(8));
        assert!(t.insert(6));
        assert_eq!(t.above, vec![(3, 10)]);
        for seq in 0..3 {
            assert!(t.insert(seq));
        }
        assert_eq!((t.next, t.above.capacity()), (10, 0));
    }

    proptest! {
        #[test]
        fn received_set_is_exact(seqs in prop::collection::vec(0u64..40, 0..80)) {
            let mut t = Track::default();
            let mut model = BTreeSet::new();
            for s in seqs {
                prop_assert_eq!(t.insert(s), model.insert(s));
                let got: BTreeSet<u64> = t.ranges().flat_map(|(a, b)| a..b).collect();
                prop_assert_eq!(&got, &model);
            }
            let stream = Stream {
                sent: 40,
                refused: vec![3, 17],
                ..Stream::default()
            };
            let missing: Vec<u64> = t.missing(&stream).collect();
            let want: Vec<u64> =
                (0..40).filter(|s| !model.contains(s) && *s != 3 && *s != 17).collect();
            prop_assert_eq!(missing, want);
            for (seq, to) in [(0, 40), (3, 9), (17, 18), (20, 5), (39, u64::MAX)] {
                let any = model.iter().any(|&x| x > seq && x < to);
                prop_assert_eq!(t.received_within(seq, to), any, "({}, {})", seq, to);
            }
        }
    }
}
