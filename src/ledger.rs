//! Delivery accounting per stream × recipient ("track"): what should have arrived, what
//! did, and how (lost, duplicated, reordered, corrupted, late, repaired by sync).
//!
//! The ledger is fed events and reads no clocks. Per track it keeps `next` (every sequence
//! number below it was received) plus the sorted, disjoint ranges received above `next`, so
//! memory per track is O(1) while delivery is in order and O(holes) otherwise. Lost
//! messages are computed only in [`Ledger::summary`], once the sender side (`sent`,
//! `refused`) and the receiver side of every shard have been merged.
//!
//! Sampling is deterministic: a stream is tracked when a fixed hash of its id falls under
//! the sample rate, so separate processes agree without talking.
//!
//! Merging is exact ([`Ledger::merge`] of shard ledgers equals one ledger fed every event)
//! when every track's `received` events are fed to one ledger, as they are when ledgers are
//! kept per recipient range (shard or worker) for the whole run. Sender-side events and
//! `expect` may be spread over any number of ledgers.

use std::collections::BTreeSet;

use foldhash::{HashMap, HashMapExt};

use serde::{Deserialize, Serialize};

use crate::vocab::{LedgerOpts, StreamId, UserIx};

pub mod signals;
mod track;

use track::{Stream, Track};

/// Where in the run a message was due: how many of the chaos bounds and how many of the
/// login wave's bounds were at or before its due time ([`Ledger::span_of`] of each).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct When {
    /// Its span between the chaos bounds.
    pub span: usize,
    /// Its place between the login wave's bounds: odd when it was due in the wave.
    pub wave: usize,
}

/// How a message reached its recipient.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Via {
    /// Live delivery to an online user.
    Push,
    /// Catch-up of an offline or late user after it logged in: a normal delivery.
    Sync,
    /// The final verification sync of a user that was online: anything new it brings was
    /// lost by push and is counted as repaired.
    Repair,
}

impl Via {
    /// The name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            Via::Push => "push",
            Via::Sync => "sync",
            Via::Repair => "repair",
        }
    }

    fn code(self) -> u64 {
        self as u64
    }
}

/// The name of a via stored as its code in an example.
fn via_name(code: u64) -> &'static str {
    match code {
        0 => Via::Push.name(),
        1 => Via::Sync.name(),
        _ => Via::Repair.name(),
    }
}

/// A kind of delivery failure reported with examples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Problem {
    /// Expected and never received.
    Lost,
    /// Pushed again after a first copy.
    Duplicated,
    /// Pushed after a later message of the same stream.
    Reordered,
    /// Received with a body that failed its checksum.
    Corrupted,
    /// Pushed later than the deadline after its due time.
    Late,
    /// Received by a recipient that was never registered for the stream.
    Unexpected,
    /// Expected by a recipient the run never had a session for at the end (its logins
    /// failed up to the final verification): neither shown delivered nor shown lost.
    Unverified,
}

impl Problem {
    /// Every kind, in report order.
    pub const ALL: [Problem; 7] = [
        Problem::Lost,
        Problem::Duplicated,
        Problem::Reordered,
        Problem::Corrupted,
        Problem::Late,
        Problem::Unexpected,
        Problem::Unverified,
    ];

    /// Computed by `summary` from the tracks, never recorded as they happen.
    fn computed(self) -> bool {
        matches!(self, Problem::Lost | Problem::Unverified)
    }

    /// The name used in reports and result files.
    pub fn name(self) -> &'static str {
        match self {
            Problem::Lost => "lost",
            Problem::Duplicated => "duplicated",
            Problem::Reordered => "reordered",
            Problem::Corrupted => "corrupted",
            Problem::Late => "late",
            Problem::Unexpected => "unexpected",
            Problem::Unverified => "unverified",
        }
    }
}

/// One example of a delivery failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Example {
    /// What went wrong.
    pub kind: Problem,
    /// The stream of the message.
    pub stream: StreamId,
    /// The recipient it concerns.
    pub recipient: UserIx,
    /// The message's sequence number in its stream.
    pub seq: u64,
    /// One line of detail, e.g. `arrived after seq 12`.
    pub detail: String,
}

/// The delivery verdict of a ledger. Counts are of messages × recipients on sampled
/// streams (except `damaged`, which cannot be attributed to a stream).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Delivery {
    /// Sampled streams seen (registered or sent on).
    pub streams: u64,
    /// Registered stream × recipient pairs.
    pub tracks: u64,
    /// Sequence numbers used by senders (accepted and refused).
    pub sent: u64,
    /// Sequence numbers the server refused or that failed to send.
    pub refused: u64,
    /// Σ over tracks of the messages sent on their stream, accepted or not: the deliveries
    /// the traffic asked for.
    #[serde(default)]
    pub planned: u64,
    /// Σ over tracks of the messages the schedule made due that the generator never sent
    /// (it fell behind, or its users were stopped first): planned, not expected.
    #[serde(default)]
    pub unsent: u64,
    /// Σ over tracks of the messages that should arrive (sent − refused).
    pub expected: u64,
    /// Intact first copies received, by any path (`via_push + via_sync + repaired`).
    pub delivered: u64,
    /// Delivered live.
    pub via_push: u64,
    /// Delivered by the catch-up sync of an offline or late user.
    pub via_sync: u64,
    /// Lost by push but found by the final verification sync.
    pub repaired: u64,
    /// Expected and never received, by recipients that had a session at the end.
    pub lost: u64,
    /// Expected and not received by recipients the run never reached at the end: their
    /// logins failed up to the final verification, so whether the server kept these
    /// messages is unknown. Not counted in `lost`; it fails `max_lost` all the same.
    #[serde(default)]
    pub unverified: u64,
    /// Extra copies pushed (copies re-fetched by a sync are not counted).
    pub duplicated: u64,
    /// Pushed after a later message of the same stream (still delivered).
    pub reordered: u64,
    /// Received with a failed checksum (not delivered, not lost).
    pub corrupted: u64,
    /// Pushed later than the deadline (still delivered).
    pub late: u64,
    /// Bodies that carried our marker but could not be attributed.
    pub damaged: u64,
    /// Received by a recipient never registered for the stream.
    pub unexpected: u64,
    /// Up to the configured number of examples per problem, the smallest by
    /// (stream, recipient, seq), grouped by kind.
    pub examples: Vec<Example>,
}

/// What one reception was to the ledger, so the engine can tell when everything it waits
/// for has arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// The first copy of an expected message (intact or not).
    First,
    /// A copy already seen, or a message this recipient does not expect.
    Again,
    /// A stream outside the sample: the ledger cannot tell.
    Untracked,
}

/// Delivery accounting; see the module documentation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Repr", into = "Repr")]
pub struct Ledger {
    sample: f64,
    late_after_us: u64,
    max_examples: usize,
    streams: HashMap<StreamId, Stream>,
    tracks: HashMap<(StreamId, UserIx), Track>,
    counts: Counts,
    /// Examples recorded as they happen, indexed by `Problem as usize` (the slots of
    /// computed kinds stay empty). Each is sorted, holds distinct entries and at most
    /// `max_examples` of them.
    noted: [Vec<Noted>; Problem::ALL.len()],
    /// Recipients the run had no session for at its end (see [`Ledger::unreached`]).
    unreached: BTreeSet<UserIx>,
    /// The chaos steps' bounds, µs from traffic start ([`LedgerOpts::bounds_us`]).
    bounds_us: Vec<u64>,
    /// With bounds: the event counters per span between them, by due time (`bounds + 1`
    /// spans; empty without bounds).
    spans: Vec<Counts>,
    /// The login wave's bounds, µs from traffic start ([`LedgerOpts::wave_us`]).
    wave_us: Vec<u64>,
}

/// What happened to the messages due in one span between chaos bounds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SpanDelivery {
    /// Delivered (first copies, intact).
    pub delivered: u64,
    /// Never received.
    pub lost: u64,
    /// Extra copies.
    pub duplicated: u64,
    /// Out of order.
    pub reordered: u64,
    /// Later than `late_after`.
    pub late: u64,
}

impl std::ops::Add for SpanDelivery {
    type Output = SpanDelivery;

    /// The sum of `self` and `o`.
    fn add(self, o: SpanDelivery) -> SpanDelivery {
        SpanDelivery {
            delivered: self.delivered + o.delivered,
            lost: self.lost + o.lost,
            duplicated: self.duplicated + o.duplicated,
            reordered: self.reordered + o.reordered,
            late: self.late + o.late,
        }
    }
}

/// An example as recorded: (stream, recipient, seq, detail number). The detail number is
/// the via code for duplicated, corrupted and unexpected, the highest seq seen before for
/// reordered, and the latency in µs for late.
type Noted = (StreamId, UserIx, u64, u64);

/// The ledger's tallies that are certain as soon as they are counted (a loss is known only
/// at the end): what a live view shows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Running {
    /// First intact copies received (pushed, synced or repaired).
    pub delivered: u64,
    /// Extra copies.
    pub duplicated: u64,
    /// Out of order.
    pub reordered: u64,
    /// Checksum mismatches.
    pub corrupted: u64,
    /// Later than `late_after`.
    pub late: u64,
    /// For a recipient not registered for their stream.
    pub unexpected: u64,
}

impl Running {
    /// Adds `o`'s tallies.
    pub fn add(&mut self, o: &Running) {
        self.delivered += o.delivered;
        self.duplicated += o.duplicated;
        self.reordered += o.reordered;
        self.corrupted += o.corrupted;
        self.late += o.late;
        self.unexpected += o.unexpected;
    }
}

/// Event counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Counts {
    via_push: u64,
    via_sync: u64,
    repaired: u64,
    duplicated: u64,
    reordered: u64,
    corrupted: u64,
    late: u64,
    damaged: u64,
    unexpected: u64,
}

impl Counts {
    /// Adds `o`'s counts.
    fn add(&mut self, o: &Counts) {
        self.via_push += o.via_push;
        self.via_sync += o.via_sync;
        self.repaired += o.repaired;
        self.duplicated += o.duplicated;
        self.reordered += o.reordered;
        self.corrupted += o.corrupted;
        self.late += o.late;
        self.damaged += o.damaged;
        self.unexpected += o.unexpected;
    }

    /// What was counted since `before` (an earlier copy of these counts).
    fn since(&self, before: &Counts) -> Counts {
        Counts {
            via_push: self.via_push - before.via_push,
            via_sync: self.via_sync - before.via_sync,
            repaired: self.repaired - before.repaired,
            duplicated: self.duplicated - before.duplicated,
            reordered: self.reordered - before.reordered,
            corrupted: self.corrupted - before.corrupted,
            late: self.late - before.late,
            damaged: self.damaged - before.damaged,
            unexpected: self.unexpected - before.unexpected,
        }
    }
}

impl Ledger {
    /// An empty ledger with the plan's settings.
    pub fn new(opts: &LedgerOpts) -> Self {
        Ledger {
            sample: opts.sample,
            late_after_us: u64::try_from(opts.late_after.as_micros()).unwrap_or(u64::MAX),
            max_examples: opts.examples,
            streams: HashMap::new(),
            tracks: HashMap::new(),
            counts: Counts::default(),
            noted: Default::default(),
            unreached: BTreeSet::new(),
            spans: if opts.bounds_us.is_empty() {
                Vec::new()
            } else {
                vec![Counts::default(); opts.bounds_us.len() + 1]
            },
            bounds_us: opts.bounds_us.clone(),
            wave_us: opts.wave_us.clone(),
        }
    }

    /// The span of a message due `due_us` after traffic start: how many of `bounds_us` are
    /// at or before it (0 without chaos steps; for the login wave's bounds, its place).
    pub fn span_of(bounds_us: &[u64], due_us: u64) -> usize {
        bounds_us.partition_point(|&b| b <= due_us)
    }

    /// The chaos bounds this ledger counts spans by, µs from traffic start.
    pub fn bounds_us(&self) -> &[u64] {
        &self.bounds_us
    }

    /// `seq` of `stream`, sent, was due `when`: it is the first of its span (and of its
    /// place in the login wave) the ledger hears of unless a lower one came before.
    pub fn sent_in(&mut self, stream: StreamId, seq: u64, when: When) {
        self.sent(stream, seq);
        if !self.sampled(stream) {
            return;
        }
        let (chaos, wave) = (self.bounds_us.len(), self.wave_us.len());
        let s = self.streams.entry(stream).or_default();
        track::cut(&mut s.cuts, chaos, seq, when.span);
        track::cut(&mut s.wave, wave, seq, when.wave);
    }

    /// [`Ledger::received`] of a message due in span `span`: also counted in that span.
    #[allow(clippy::too_many_arguments)]
    pub fn received_in(
        &mut self,
        recipient: UserIx,
        stream: StreamId,
        seq: u64,
        latency_us: u64,
        via: Via,
        corrupt: bool,
        span: usize,
    ) -> Arrival {
        if self.spans.is_empty() {
            return self.received(recipient, stream, seq, latency_us, via, corrupt);
        }
        let before = self.counts;
        let arrival = self.received(recipient, stream, seq, latency_us, via, corrupt);
        let i = span.min(self.spans.len() - 1);
        self.spans[i].add(&self.counts.since(&before));
        arrival
    }

    /// What happened to the messages due in each span between the chaos bounds (empty
    /// without bounds). A lost message is charged to the span in which it was last seen
    /// safe: placed by its stream's cuts in the span it was due in, unless the next bound
    /// is a step's start (one of `starts_us`) and its recipient received nothing later of
    /// its stream due before that bound — it was still on its way when the step began,
    /// and the step is where it went: charged to the span from that bound.
    pub fn spans(&self, starts_us: &[u64]) -> Vec<SpanDelivery> {
        let mut out: Vec<SpanDelivery> = self
            .spans
            .iter()
            .map(|c| SpanDelivery {
                delivered: c.via_push + c.via_sync + c.repaired,
                lost: 0,
                duplicated: c.duplicated,
                reordered: c.reordered,
                late: c.late,
            })
            .collect();
        if out.is_empty() {
            return out;
        }
        let none = Stream::default();
        for (key, t) in self.tracks.iter().filter(|(_, t)| t.expected) {
            if self.unreached.contains(&key.1) {
                continue;
            }
            let s = self.streams.get(&key.0).unwrap_or(&none);
            let last = out.len() - 1;
            for seq in t.missing(s) {
                let due = track::past(&s.cuts, seq).min(last);
                let next = self.bounds_us.get(due).filter(|b| starts_us.contains(b));
                let cut = s.cuts.get(due).copied().unwrap_or(u64::MAX);
                let at = if next.is_some() && !t.received_within(seq, cut) {
                    due + 1
                } else {
                    due
                };
                out[at.min(last)].lost += 1;
            }
        }
        out
    }

    /// Whether `stream` is tracked: a fixed hash of its id, mapped to `[0, 1)`, is below
    /// the sample rate. The same in every process.
    pub fn sampled(&self, stream: StreamId) -> bool {
        let h = splitmix64(u64::from(stream));
        ((h >> 11) as f64) * (1.0 / (1u64 << 53) as f64) < self.sample
    }

    /// Registers that `recipient` should receive every message of `stream`. Call it at
    /// the start, in the ledger that will see the recipient's deliveries: a delivery to an
    /// unregistered recipient counts as unexpected.
    pub fn expect(&mut self, stream: StreamId, recipient: UserIx) {
        if self.sampled(stream) {
            self.tracks.entry((stream, recipient)).or_default().expected = true;
        }
    }

    /// The schedule makes `n` sends due on `stream`: planned deliveries count them whether
    /// the generator made them or not (one that fell behind did not offer them).
    pub fn due(&mut self, stream: StreamId, n: u64) {
        if self.sampled(stream) {
            let s = self.streams.entry(stream).or_default();
            s.due = s.due.max(n);
        }
    }

    /// The sender sent `seq` (dense from 0 in send order) on `stream`.
    pub fn sent(&mut self, stream: StreamId, seq: u64) {
        if self.sampled(stream) {
            let s = self.streams.entry(stream).or_default();
            s.sent = s.sent.max(seq.saturating_add(1));
        }
    }

    /// `seq` was due while its sender was offline and was not sent: expected nowhere, as
    /// if refused, and not a delivery the traffic planned (`Delivery::planned`).
    pub fn dropped(&mut self, stream: StreamId, seq: u64) {
        self.refused(stream, seq);
        if let Some(s) = self.streams.get_mut(&stream) {
            insert_sorted(&mut s.dropped, seq);
        }
    }

    /// The server refused `seq` or sending it failed: it is expected nowhere. Implies
    /// [`Ledger::sent`].
    pub fn refused(&mut self, stream: StreamId, seq: u64) {
        if self.sampled(stream) {
            let s = self.streams.entry(stream).or_default();
            s.sent = s.sent.max(seq.saturating_add(1));
            if let Err(i) = s.refused.binary_search(&seq) {
                s.refused.insert(i, seq);
            }
        }
    }

    /// `recipient` received `seq` of `stream`, `latency_us` after it was due; `corrupt`
    /// when the body failed its checksum.
    ///
    /// The first copy of a seq counts: corrupt → corrupted (received, so not lost, but not
    /// delivered); otherwise delivered, by push, sync or repair. Only pushes are judged for
    /// order (a seq below the highest seen: reordered) and deadline (late). A pushed copy
    /// or synced copy of a seq already received is duplicated (a driver's catch-up never
    /// returns what it handed out before: `Session::fetch_missed`, so a second copy there
    /// is one the server stored twice); a repaired one is ignored, since the final
    /// verification re-reads what the server stored, pushed or not. Events for streams that are not
    /// sampled are ignored. A seq of `u64::MAX` was never sent (a track cannot even hold
    /// it): the body is counted as damaged.
    pub fn received(
        &mut self,
        recipient: UserIx,
        stream: StreamId,
        seq: u64,
        latency_us: u64,
        via: Via,
        corrupt: bool,
    ) -> Arrival {
        if seq == u64::MAX {
            self.damaged();
            return Arrival::Again;
        }
        if !self.sampled(stream) {
            return Arrival::Untracked;
        }
        let track = self.tracks.entry((stream, recipient)).or_default();
        let highest = track.end();
        let new = track.insert(seq);
        let expected = track.expected;
        let key = (stream, recipient, seq);
        let c = &mut self.counts;
        if !expected {
            if new {
                c.unexpected += 1;
                self.note(Problem::Unexpected, key, via.code());
            }
            return Arrival::Again;
        }
        if !new {
            if via == Via::Repair {
                // The final verification re-reads what the server stored, pushed or not.
                return Arrival::Again;
            }
            c.duplicated += 1;
            self.note(Problem::Duplicated, key, via.code());
            return Arrival::Again;
        }
        if corrupt {
            c.corrupted += 1;
            self.note(Problem::Corrupted, key, via.code());
            return Arrival::First;
        }
        match via {
            Via::Push => c.via_push += 1,
            Via::Sync => c.via_sync += 1,
            Via::Repair => c.repaired += 1,
        }
        if via != Via::Push {
            // Catch-up and repair are out of band: neither reordered nor late.
            return Arrival::First;
        }
        if seq.saturating_add(1) < highest {
            c.reordered += 1;
            self.note(Problem::Reordered, key, highest - 1);
        }
        if latency_us > self.late_after_us {
            self.counts.late += 1;
            self.note(Problem::Late, key, latency_us);
        }
        Arrival::First
    }

    /// Stops expecting anything for `recipient`, whose virtual user failed inside the
    /// generator: its tracks no longer count as expected or lost (what it received before
    /// stays counted as delivered).
    pub fn abandon(&mut self, recipient: UserIx) {
        for (_, t) in self.tracks.iter_mut().filter(|((_, r), _)| *r == recipient) {
            t.expected = false;
        }
    }

    /// `recipient` could not join the group `streams` go to (a setup failure, counted as
    /// an error): like [`Ledger::abandon`] for those tracks alone, its messages are no
    /// longer expected of it.
    pub fn unjoined(&mut self, recipient: UserIx, streams: &[StreamId]) {
        for &stream in streams {
            if let Some(t) = self.tracks.get_mut(&(stream, recipient)) {
                t.expected = false;
            }
        }
    }

    /// The run ends without a session for `recipient`: its logins failed up to the final
    /// verification. What it has not received counts as unverified instead of lost.
    pub fn unreached(&mut self, recipient: UserIx) {
        self.unreached.insert(recipient);
    }

    /// A body that carried our marker but could not be attributed to a stream (counted
    /// whatever the sampling).
    pub fn damaged(&mut self) {
        self.counts.damaged += 1;
    }

    /// Adds `other`'s events to this ledger (settings are this ledger's).
    pub fn merge(&mut self, other: &Ledger) {
        for (id, o) in &other.streams {
            let s = self.streams.entry(*id).or_default();
            s.sent = s.sent.max(o.sent);
            s.due = s.due.max(o.due);
            for &seq in &o.refused {
                insert_sorted(&mut s.refused, seq);
            }
            for &seq in &o.dropped {
                insert_sorted(&mut s.dropped, seq);
            }
            track::merge_cuts(&mut s.cuts, &o.cuts);
            track::merge_cuts(&mut s.wave, &o.wave);
        }
        for (key, o) in &other.tracks {
            match self.tracks.get_mut(key) {
                Some(t) => t.union(o),
                None => {
                    self.tracks.insert(*key, o.clone());
                }
            }
        }
        self.counts.add(&other.counts);
        if self.spans.len() < other.spans.len() {
            self.spans.resize(other.spans.len(), Counts::default());
            self.bounds_us.clone_from(&other.bounds_us);
        }
        if self.wave_us.is_empty() {
            self.wave_us.clone_from(&other.wave_us);
        }
        for (a, b) in self.spans.iter_mut().zip(&other.spans) {
            a.add(b);
        }
        self.unreached.extend(other.unreached.iter().copied());
        for kind in Problem::ALL {
            for &n in &other.noted[kind as usize] {
                self.note(kind, (n.0, n.1, n.2), n.3);
            }
        }
    }

    /// Nothing recorded at all.
    pub fn is_empty(&self) -> bool {
        self.streams.is_empty()
            && self.tracks.is_empty()
            && self.counts == Counts::default()
            && self.spans.iter().all(|s| *s == Counts::default())
            && self.unreached.is_empty()
    }

    /// The tallies counted so far that no later event can change (see [`Running`]).
    pub fn running(&self) -> Running {
        let c = &self.counts;
        Running {
            delivered: c.via_push + c.via_sync + c.repaired,
            duplicated: c.duplicated,
            reordered: c.reordered,
            corrupted: c.corrupted,
            late: c.late,
            unexpected: c.unexpected,
        }
    }

    /// The messages lost (as [`Ledger::summary`] counts them) on the streams `part_of`
    /// places in one of `n` parts, by part.
    pub fn lost_by(&self, n: usize, part_of: impl Fn(StreamId) -> Option<usize>) -> Vec<u64> {
        let mut out = vec![0; n];
        let none = Stream::default();
        for (key, t) in self.tracks.iter().filter(|(_, t)| t.expected) {
            let Some(i) = part_of(key.0).filter(|&i| i < n) else {
                continue;
            };
            if self.unreached.contains(&key.1) {
                continue;
            }
            let s = self.streams.get(&key.0).unwrap_or(&none);
            let expected = s.sent.saturating_sub(s.refused.len() as u64);
            out[i] += expected.saturating_sub(t.received_of(s));
        }
        out
    }

    /// The messages lost (as [`Ledger::summary`] counts them) by whether they were due in
    /// the login wave: `[in the wave, outside it]`, each placed by its stream's wave cuts;
    /// `None` without a login wave.
    pub fn lost_by_wave(&self) -> Option<[u64; 2]> {
        if self.wave_us.is_empty() {
            return None;
        }
        let mut out = [0; 2];
        let none = Stream::default();
        for (key, t) in self.tracks.iter().filter(|(_, t)| t.expected) {
            if self.unreached.contains(&key.1) {
                continue;
            }
            let s = self.streams.get(&key.0).unwrap_or(&none);
            for seq in t.missing(s) {
                out[usize::from(track::past(&s.wave, seq) % 2 == 0)] += 1;
            }
        }
        Some(out)
    }

    /// The delivery verdict so far (pure: may be called at any time).
    pub fn summary(&self) -> Delivery {
        let c = &self.counts;
        let mut d = Delivery {
            delivered: c.via_push + c.via_sync + c.repaired,
            via_push: c.via_push,
            via_sync: c.via_sync,
            repaired: c.repaired,
            duplicated: c.duplicated,
            reordered: c.reordered,
            corrupted: c.corrupted,
            late: c.late,
            damaged: c.damaged,
            unexpected: c.unexpected,
            ..Delivery::default()
        };
        let mut streams: BTreeSet<StreamId> = self.streams.keys().copied().collect();
        for s in self.streams.values() {
            d.sent += s.sent;
            d.refused += s.refused.len() as u64;
        }
        let none = Stream::default();
        let mut lossy = Vec::new();
        for (key, t) in self.tracks.iter().filter(|(_, t)| t.expected) {
            streams.insert(key.0);
            let s = self.streams.get(&key.0).unwrap_or(&none);
            let expected = s.sent - s.refused.len() as u64;
            let missing = expected - t.received_of(s);
            d.tracks += 1;
            d.planned += s.sent.max(s.due) - s.dropped.len() as u64;
            d.unsent += s.due.saturating_sub(s.sent);
            d.expected += expected;
            let kind = if self.unreached.contains(&key.1) {
                d.unverified += missing;
                Problem::Unverified
            } else {
                d.lost += missing;
                Problem::Lost
            };
            if missing > 0 {
                lossy.push((kind, *key, t, s));
            }
        }
        d.streams = streams.len() as u64;
        lossy.sort_unstable_by_key(|(kind, key, _, _)| (*kind, *key));
        let mut left = [self.max_examples; 2];
        for (kind, (stream, recipient), t, s) in lossy {
            let left = &mut left[usize::from(kind == Problem::Unverified)];
            for seq in t.missing(s).take(*left) {
                *left -= 1;
                d.examples.push(Example {
                    kind,
                    stream,
                    recipient,
                    seq,
                    detail: detail(kind, 0),
                });
            }
        }
        for kind in Problem::ALL.iter().filter(|k| !k.computed()) {
            for &(stream, recipient, seq, aux) in &self.noted[*kind as usize] {
                d.examples.push(Example {
                    kind: *kind,
                    stream,
                    recipient,
                    seq,
                    detail: detail(*kind, aux),
                });
            }
        }
        d
    }

    /// Keeps the example if it is among the `max_examples` smallest of its kind.
    fn note(&mut self, kind: Problem, (stream, recipient, seq): (StreamId, UserIx, u64), aux: u64) {
        let list = &mut self.noted[kind as usize];
        let n = (stream, recipient, seq, aux);
        if list.len() == self.max_examples && list.last().is_none_or(|last| n >= *last) {
            return;
        }
        if let Err(i) = list.binary_search(&n) {
            list.insert(i, n);
            list.truncate(self.max_examples);
        }
    }
}

/// The one-line detail of a recorded example.
fn detail(kind: Problem, aux: u64) -> String {
    match kind {
        Problem::Lost => "never received".to_string(),
        Problem::Unverified => "not received; the recipient never logged in again".to_string(),
        Problem::Duplicated => format!("another copy via {}", via_name(aux)),
        Problem::Reordered => format!("arrived after seq {aux}"),
        Problem::Corrupted => format!("checksum mismatch (via {})", via_name(aux)),
        Problem::Late => format!("delivered {:.1} ms after due", aux as f64 / 1000.0),
        Problem::Unexpected => format!(
            "recipient not registered for this stream (via {})",
            via_name(aux)
        ),
    }
}

/// Adds `seq` to a sorted list of distinct seqs.
fn insert_sorted(list: &mut Vec<u64>, seq: u64) {
    if let Err(i) = list.binary_search(&seq) {
        list.insert(i, seq);
    }
}

/// A fixed 64-bit mix (splitmix64's finalizer), identical on every platform and process.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A serialized track: (stream, recipient, expected, next, ranges received above next).
type TrackRow = (StreamId, UserIx, bool, u64, Vec<(u64, u64)>);

/// The serialized form: vectors of tuples sorted by key, so equal ledgers serialize alike.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Repr {
    sample: f64,
    late_after_us: u64,
    examples: usize,
    /// (stream, one past the highest seq sent, refused seqs)
    streams: Vec<(StreamId, u64, Vec<u64>)>,
    tracks: Vec<TrackRow>,
    counts: Counts,
    /// (kind, stream, recipient, seq, detail number)
    noted: Vec<(Problem, StreamId, UserIx, u64, u64)>,
    /// Recipients without a session at the end, ascending.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    unreached: Vec<UserIx>,
    /// (stream, seqs not sent because their sender was offline: a subset of its refused)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    dropped: Vec<(StreamId, Vec<u64>)>,
    /// The chaos bounds, µs from traffic start.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    bounds_us: Vec<u64>,
    /// Counters per span between the bounds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    spans: Vec<Counts>,
    /// (stream, first seq due at or after each bound)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    cuts: Vec<(StreamId, Vec<u64>)>,
    /// The login wave's bounds, µs from traffic start.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    wave_us: Vec<u64>,
    /// (stream, first seq due at or after each of the login wave's bounds)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    wave_cuts: Vec<(StreamId, Vec<u64>)>,
    /// (stream, sends the schedule made due on it), for streams where it is known
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    due: Vec<(StreamId, u64)>,
}

impl From<Ledger> for Repr {
    fn from(l: Ledger) -> Self {
        let mut dropped: Vec<_> = l
            .streams
            .iter()
            .filter(|(_, s)| !s.dropped.is_empty())
            .map(|(id, s)| (*id, s.dropped.clone()))
            .collect();
        dropped.sort_unstable_by_key(|d| d.0);
        let cuts_of = |which: fn(&Stream) -> &Vec<u64>| {
            let mut cuts: Vec<_> = l
                .streams
                .iter()
                .filter(|(_, s)| !which(s).is_empty())
                .map(|(id, s)| (*id, which(s).clone()))
                .collect();
            cuts.sort_unstable_by_key(|c| c.0);
            cuts
        };
        let (cuts, wave_cuts) = (cuts_of(|s| &s.cuts), cuts_of(|s| &s.wave));
        let mut due: Vec<_> = l
            .streams
            .iter()
            .filter(|(_, s)| s.due > 0)
            .map(|(id, s)| (*id, s.due))
            .collect();
        due.sort_unstable_by_key(|d| d.0);
        let mut streams: Vec<_> = l
            .streams
            .into_iter()
            .map(|(id, s)| (id, s.sent, s.refused))
            .collect();
        streams.sort_unstable_by_key(|s| s.0);
        let mut tracks: Vec<_> = l
            .tracks
            .into_iter()
            .map(|((s, r), t)| (s, r, t.expected, t.next, t.above))
            .collect();
        tracks.sort_unstable_by_key(|t| (t.0, t.1));
        let noted = Problem::ALL
            .iter()
            .flat_map(|&k| {
                l.noted[k as usize]
                    .iter()
                    .map(move |n| (k, n.0, n.1, n.2, n.3))
            })
            .collect();
        Repr {
            sample: l.sample,
            late_after_us: l.late_after_us,
            examples: l.max_examples,
            streams,
            tracks,
            counts: l.counts,
            noted,
            unreached: l.unreached.into_iter().collect(),
            dropped,
            bounds_us: l.bounds_us,
            spans: l.spans,
            cuts,
            wave_us: l.wave_us,
            wave_cuts,
            due,
        }
    }
}

impl TryFrom<Repr> for Ledger {
    type Error = String;

    fn try_from(r: Repr) -> Result<Self, String> {
        let mut streams = HashMap::with_capacity(r.streams.len());
        for (id, sent, refused) in r.streams {
            let ok =
                refused.windows(2).all(|w| w[0] < w[1]) && refused.last().is_none_or(|&x| x < sent);
            if !ok {
                return Err(format!("ledger: stream {id}: refused seqs out of order"));
            }
            let s = Stream {
                sent,
                refused,
                ..Stream::default()
            };
            if streams.insert(id, s).is_some() {
                return Err(format!("ledger: stream {id} listed twice"));
            }
        }
        for (id, dropped) in r.dropped {
            let s = streams.get_mut(&id);
            let ok = dropped.windows(2).all(|w| w[0] < w[1])
                && s.as_ref()
                    .is_some_and(|s| dropped.iter().all(|q| s.refused.binary_search(q).is_ok()));
            match s {
                Some(s) if ok => s.dropped = dropped,
                _ => {
                    return Err(format!(
                        "ledger: stream {id}: dropped seqs not among its refused"
                    ))
                }
            }
        }
        for (id, cuts) in r.cuts {
            match streams.get_mut(&id) {
                Some(s) if cuts.len() == r.bounds_us.len() => s.cuts = cuts,
                _ => return Err(format!("ledger: stream {id}: cuts without their bounds")),
            }
        }
        for (id, cuts) in r.wave_cuts {
            match streams.get_mut(&id) {
                Some(s) if cuts.len() == r.wave_us.len() => s.wave = cuts,
                _ => {
                    return Err(format!(
                        "ledger: stream {id}: wave cuts without the wave's bounds"
                    ))
                }
            }
        }
        for (id, due) in r.due {
            match streams.get_mut(&id) {
                Some(s) => s.due = due,
                None => return Err(format!("ledger: stream {id}: due without the stream")),
            }
        }
        if !r.spans.is_empty() && r.spans.len() != r.bounds_us.len() + 1 {
            return Err("ledger: spans do not match the chaos bounds".to_string());
        }
        let mut tracks = HashMap::with_capacity(r.tracks.len());
        for (s, u, expected, next, above) in r.tracks {
            let t = Track::from_parts(expected, next, above)
                .ok_or_else(|| format!("ledger: track ({s}, {u}): bad received ranges"))?;
            if tracks.insert((s, u), t).is_some() {
                return Err(format!("ledger: track ({s}, {u}) listed twice"));
            }
        }
        let mut ledger = Ledger {
            sample: r.sample,
            late_after_us: r.late_after_us,
            max_examples: r.examples,
            streams,
            tracks,
            counts: r.counts,
            noted: Default::default(),
            unreached: BTreeSet::new(),
            bounds_us: r.bounds_us,
            spans: r.spans,
            wave_us: r.wave_us,
        };
        if !r.unreached.windows(2).all(|w| w[0] < w[1]) {
            return Err("ledger: unreached recipients out of order".to_string());
        }
        ledger.unreached.extend(r.unreached);
        for (kind, s, u, seq, aux) in r.noted {
            if kind.computed() {
                return Err(format!(
                    "ledger: {} examples are computed, not stored",
                    kind.name()
                ));
            }
            ledger.note(kind, (s, u, seq), aux);
        }
        Ok(ledger)
    }
}

#[cfg(test)]
mod tests;
