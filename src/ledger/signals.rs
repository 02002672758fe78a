//! Signal accounting ([`SignalBook`]): read receipts are verified like messages — every
//! receipt sent and not refused reaches its message's sender exactly once, live or when the
//! sender fetches what it missed — and typing notices and presence changes per recipient
//! that was owed one: a recipient online before it was sent that stayed online for
//! `within` after it. A signal arriving where none was owed (a contact that had just left) is
//! counted as extra, never as a fault.
//!
//! Like the ledger, the book is fed events, reads no clocks and merges exactly across
//! shards: the sender side (receipts sent, signals published) and the recipient side
//! (arrivals, the recipient's online intervals) may be recorded in different processes.

use foldhash::{HashMap, HashMapExt};
use serde::{Deserialize, Serialize};

use super::track::{Stream, Track};
use super::Via;
use crate::vocab::{SignalKind, UserIx};

/// `to` of a publication that goes to the publisher's contacts (presence).
const CONTACTS: UserIx = UserIx::MAX;

/// Who a typing notice or presence change goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Audience {
    /// One peer (a typing notice in a 1:1 conversation).
    Peer(UserIx),
    /// The other members of a group, by the run's group number (a typing notice in a group).
    Group(u32),
    /// The publisher's contacts (presence).
    Contacts,
}

/// One typing notice or presence change as published.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Published {
    kind: SignalKind,
    from: UserIx,
    seq: u64,
    /// When it was due, µs since the Unix epoch.
    at_us: u64,
    /// The peer of a typing notice ([`CONTACTS`] for presence and group typing).
    to: UserIx,
    /// The group of a typing notice in a group: the run's group number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    group: Option<u32>,
}

impl Published {
    /// Who it goes to.
    fn audience(&self) -> Audience {
        match (self.group, self.to) {
            (Some(g), _) => Audience::Group(g),
            (None, CONTACTS) => Audience::Contacts,
            (None, peer) => Audience::Peer(peer),
        }
    }
}

/// What happened to one kind of signal in the run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignalDelivery {
    /// Sent (receipts) or published (typing, presence).
    pub sent: u64,
    /// Receipts the server refused or that failed to go out.
    pub refused: u64,
    /// Deliveries owed: every receipt not refused; each typing notice or presence change
    /// to each recipient online when it was sent and for `within` after.
    pub expected: u64,
    /// Owed deliveries that arrived (first copies, intact).
    pub arrived: u64,
    /// Of those, arrived by fetching what was missed (receipts of a sender that was away).
    pub via_sync: u64,
    /// Owed and never arrived: lost receipts, missed typing notices and presence changes.
    pub missing: u64,
    /// Arrived where none was owed (a recipient that came or went around it).
    pub extra: u64,
    /// Extra copies.
    pub duplicated: u64,
    /// Arrived with a token that failed its checksum.
    pub corrupted: u64,
}

/// What happened to one kind of signal, as reports show it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct SignalRow {
    /// The kind.
    pub kind: SignalKind,
    /// What happened to it.
    #[serde(flatten)]
    pub delivery: SignalDelivery,
}

/// Counters of one kind, as they happen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Counts {
    published: u64,
    duplicated: u64,
    corrupted: u64,
    via_sync: u64,
}

/// Signal accounting; see the module documentation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Repr", into = "Repr")]
pub struct SignalBook {
    /// Receipts sent, per (reader, sender): the sender side of a stream of receipts.
    sent: HashMap<(UserIx, UserIx), Stream>,
    /// Typing notices and presence changes published.
    published: Vec<Published>,
    /// What arrived, per (kind, from, to).
    arrived: HashMap<(SignalKind, UserIx, UserIx), Track>,
    /// When users were online: (user, from µs, to µs).
    online: Vec<(UserIx, u64, u64)>,
    /// Per kind, indexed as [`SignalKind::ALL`].
    counts: [Counts; 3],
}

/// What an arrival was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignalArrival {
    /// The first copy: its latency counts.
    First,
    /// A copy already counted, or a corrupt one.
    Again,
}

impl SignalBook {
    /// `reader` sent its receipt `seq` (dense from 0 per reader × sender) to `sender`.
    pub fn receipt_sent(&mut self, reader: UserIx, sender: UserIx, seq: u64) {
        let s = self.sent.entry((reader, sender)).or_default();
        s.sent = s.sent.max(seq.saturating_add(1));
    }

    /// The server refused receipt `seq` of `reader` to `sender`, or it failed to go out.
    pub fn receipt_refused(&mut self, reader: UserIx, sender: UserIx, seq: u64) {
        let s = self.sent.entry((reader, sender)).or_default();
        s.sent = s.sent.max(seq.saturating_add(1));
        if let Err(i) = s.refused.binary_search(&seq) {
            s.refused.insert(i, seq);
        }
    }

    /// `from` published typing notice or presence change `seq` at `at_us` to `to`.
    pub fn published(
        &mut self,
        kind: SignalKind,
        from: UserIx,
        seq: u64,
        at_us: u64,
        to: Audience,
    ) {
        self.counts[kind as usize].published += 1;
        let (to, group) = match to {
            Audience::Peer(peer) => (peer, None),
            Audience::Group(g) => (CONTACTS, Some(g)),
            Audience::Contacts => (CONTACTS, None),
        };
        self.published.push(Published {
            kind,
            from,
            seq,
            at_us,
            to,
            group,
        });
    }

    /// The groups typing notices went to, ascending, each once.
    pub fn groups_typed(&self) -> Vec<u32> {
        let mut groups: Vec<u32> = self.published.iter().filter_map(|p| p.group).collect();
        groups.sort_unstable();
        groups.dedup();
        groups
    }

    /// `user` was online from `from_us` to `to_us`.
    pub fn online(&mut self, user: UserIx, from_us: u64, to_us: u64) {
        if to_us > from_us {
            self.online.push((user, from_us, to_us));
        }
    }

    /// Signal `seq` of kind `kind` from `from` arrived at `to`, `via` a push or a fetch;
    /// `corrupt` when its token failed its checksum.
    pub fn arrived(
        &mut self,
        kind: SignalKind,
        from: UserIx,
        to: UserIx,
        seq: u64,
        via: Via,
        corrupt: bool,
    ) -> SignalArrival {
        let c = &mut self.counts[kind as usize];
        if corrupt {
            c.corrupted += 1;
            return SignalArrival::Again;
        }
        if !self
            .arrived
            .entry((kind, from, to))
            .or_default()
            .insert(seq)
        {
            // The final verification re-reads what the server stored.
            if via != Via::Repair {
                c.duplicated += 1;
            }
            return SignalArrival::Again;
        }
        if via != Via::Push {
            c.via_sync += 1;
        }
        SignalArrival::First
    }

    /// Adds `other`'s events.
    pub fn merge(&mut self, other: &SignalBook) {
        for (key, o) in &other.sent {
            let s = self.sent.entry(*key).or_default();
            s.sent = s.sent.max(o.sent);
            for &seq in &o.refused {
                if let Err(i) = s.refused.binary_search(&seq) {
                    s.refused.insert(i, seq);
                }
            }
        }
        self.published.extend_from_slice(&other.published);
        self.published
            .sort_unstable_by_key(|p| (p.kind, p.from, p.seq));
        for (key, o) in &other.arrived {
            self.arrived.entry(*key).or_default().union(o);
        }
        self.online.extend_from_slice(&other.online);
        self.online.sort_unstable();
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            a.published += b.published;
            a.duplicated += b.duplicated;
            a.corrupted += b.corrupted;
            a.via_sync += b.via_sync;
        }
    }

    /// Nothing recorded.
    pub fn is_empty(&self) -> bool {
        *self == SignalBook::default()
    }

    /// What happened to each kind of signal, in [`SignalKind::ALL`]'s order: a recipient is
    /// owed a typing notice or presence change when it was online from before its due time
    /// (strictly: one that came online in the same microsecond may have come after it) to
    /// `within_us` after it; `contacts` gives a publisher's contacts and `members` a group's
    /// members (the publisher among them is owed nothing).
    pub fn summary(
        &self,
        within_us: u64,
        contacts: &dyn Fn(UserIx) -> Vec<UserIx>,
        members: &dyn Fn(u32) -> Vec<UserIx>,
    ) -> [SignalDelivery; 3] {
        let mut out = [SignalDelivery::default(); 3];
        for (d, c) in out.iter_mut().zip(&self.counts) {
            d.duplicated = c.duplicated;
            d.corrupted = c.corrupted;
            d.via_sync = c.via_sync;
        }
        let read = &mut out[SignalKind::Read as usize];
        for ((reader, sender), s) in &self.sent {
            read.sent += s.sent;
            read.refused += s.refused.len() as u64;
            let expected = s.sent - s.refused.len() as u64;
            let got = self
                .arrived
                .get(&(SignalKind::Read, *reader, *sender))
                .map_or(0, |t| t.received_of(s));
            read.expected += expected;
            read.arrived += got;
            read.missing += expected - got;
        }
        let received: u64 = self
            .arrived
            .iter()
            .filter(|(k, _)| k.0 == SignalKind::Read)
            .map(|(_, t)| t.ranges().map(|(a, b)| b - a).sum::<u64>())
            .sum();
        read.extra = received.saturating_sub(read.arrived);
        let online = self.online_index();
        let owed = |user: UserIx, at: u64| {
            online.get(&user).is_some_and(|spans| {
                spans
                    .iter()
                    .any(|&(from, to)| from < at && to >= at.saturating_add(within_us))
            })
        };
        for p in &self.published {
            let d = &mut out[p.kind as usize];
            d.sent += 1;
            let audience = match p.audience() {
                Audience::Peer(peer) => vec![peer],
                Audience::Group(g) => members(g),
                Audience::Contacts => contacts(p.from),
            };
            for r in audience.into_iter().filter(|&r| r != p.from) {
                let got = self
                    .arrived
                    .get(&(p.kind, p.from, r))
                    .is_some_and(|t| t.has(p.seq));
                match (owed(r, p.at_us), got) {
                    (true, true) => {
                        d.expected += 1;
                        d.arrived += 1;
                    }
                    (true, false) => {
                        d.expected += 1;
                        d.missing += 1;
                    }
                    (false, true) => d.extra += 1,
                    (false, false) => {}
                }
            }
        }
        out
    }

    /// Each user's online intervals.
    fn online_index(&self) -> HashMap<UserIx, Vec<(u64, u64)>> {
        let mut index: HashMap<UserIx, Vec<(u64, u64)>> = HashMap::new();
        for &(user, from, to) in &self.online {
            index.entry(user).or_default().push((from, to));
        }
        index
    }
}

/// The arrivals of one kind from one user at another, as the ledger writes a track:
/// (kind, from, to, every seq below this received, the ranges received above it).
type ArrivedRow = (SignalKind, UserIx, UserIx, u64, Vec<(u64, u64)>);

/// How a [`SignalBook`] is written in result files: lists instead of maps.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Repr {
    /// (reader, sender, one past the highest receipt seq sent, refused seqs)
    receipts_sent: Vec<(UserIx, UserIx, u64, Vec<u64>)>,
    published: Vec<Published>,
    arrived: Vec<ArrivedRow>,
    online: Vec<(UserIx, u64, u64)>,
    counts: [Counts; 3],
}

impl From<SignalBook> for Repr {
    fn from(b: SignalBook) -> Repr {
        let mut receipts_sent: Vec<_> = b
            .sent
            .into_iter()
            .map(|((r, s), st)| (r, s, st.sent, st.refused))
            .collect();
        receipts_sent.sort_unstable();
        let mut arrived: Vec<_> = b
            .arrived
            .into_iter()
            .map(|((k, f, t), tr)| (k, f, t, tr.next, tr.above))
            .collect();
        arrived.sort_unstable();
        Repr {
            receipts_sent,
            published: b.published,
            arrived,
            online: b.online,
            counts: b.counts,
        }
    }
}

impl TryFrom<Repr> for SignalBook {
    type Error = String;

    fn try_from(r: Repr) -> Result<SignalBook, String> {
        let mut b = SignalBook {
            published: r.published,
            online: r.online,
            counts: r.counts,
            ..SignalBook::default()
        };
        for (reader, sender, sent, refused) in r.receipts_sent {
            if refused.iter().any(|&s| s >= sent) || !refused.is_sorted() {
                return Err(format!(
                    "receipts of {reader} to {sender}: refused seqs must be sorted and below {sent}"
                ));
            }
            let s = b.sent.entry((reader, sender)).or_default();
            s.sent = sent;
            s.refused = refused;
        }
        for (kind, from, to, next, above) in r.arrived {
            let t = Track::from_parts(false, next, above).ok_or_else(|| {
                format!(
                    "signals: {} from {from} to {to}: bad received ranges",
                    kind.name()
                )
            })?;
            if b.arrived.insert((kind, from, to), t).is_some() {
                return Err(format!(
                    "signals: {} from {from} to {to} listed twice",
                    kind.name()
                ));
            }
        }
        Ok(b)
    }
}

#[cfg(test)]
mod tests;
