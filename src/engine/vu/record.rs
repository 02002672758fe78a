//! Recording: the one path by which a user's counts, latencies, errors and ledger events
//! reach its recorder. They gather in a [`Tally`] during a wake-up and are applied under
//! one lock by [`Vu::flush_tally`]; there is no other lock of the recorder per event.

use std::cell::RefCell;
use std::sync::atomic::Ordering;

use tokio::time::Instant;

use super::Vu;
use crate::driver::Driver;
use crate::engine::patterns::slot;
use crate::engine::shared::{Recorder, Shared};
use crate::ledger::{Arrival, Via, When};
use crate::metrics::split::Part;
use crate::metrics::{Counter, ErrorKind, Hist};
use crate::scenario::{StreamId, UserIx};

/// Latencies, receipts or errors a tally holds before it is applied even mid-burst.
pub(super) const TALLY_FLUSH: usize = 1024;

/// A delivery waiting in a [`Tally`].
#[derive(Debug, Clone, Copy)]
pub(super) struct Receipt {
    pub(super) stream: StreamId,
    pub(super) seq: u64,
    pub(super) latency_us: u64,
    /// When it arrived, wall-clock µs (for fan-out completion).
    pub(super) at_us: u64,
    /// The span between chaos bounds it was due in.
    pub(super) span: usize,
    pub(super) via: Via,
    pub(super) corrupt: bool,
}

/// Changes of the live counters ([`crate::engine::shared::Live`]) waiting in a tally.
#[derive(Debug, Default)]
pub(super) struct LiveDelta {
    pub(super) sent: u64,
    pub(super) expected: u64,
    pub(super) received: u64,
    pub(super) accepted: u64,
    pub(super) refused: u64,
    pub(super) replies: u64,
    pub(super) errors: u64,
}

/// Counts indexed by `Counter as usize` (an array longer than a derived `Default` takes),
/// and which of them are not zero: a wake-up touches two or three of the counters, and
/// applying looks at those alone.
#[derive(Debug)]
struct Counts {
    n: [u64; Counter::ALL.len()],
    /// Bit `c` is set when `n[c]` may be non-zero.
    touched: u64,
}

// Every counter has a bit of `Counts::touched`.
const _: () = assert!(Counter::ALL.len() <= 64);

impl Default for Counts {
    fn default() -> Self {
        Counts {
            n: [0; Counter::ALL.len()],
            touched: 0,
        }
    }
}

/// The recorder and live-counter updates of one wake-up. Applying it leaves the recorder
/// exactly as if each event had been applied at once: every part it holds is applied in
/// order or commutes (counters add, the ledger's sender side keeps maxima and sets, error
/// examples keep the smallest), and it only holds events of one second.
#[derive(Debug, Default)]
pub(super) struct Tally {
    /// The second of the run everything waiting belongs to.
    sec: u32,
    counts: Counts,
    lat: Vec<(Hist, u64)>,
    /// Highest seq sent per stream; consecutive sends of one stream share an entry (the
    /// ledger keeps only the highest).
    /// (stream, first seq, last seq, when): runs of one stream's sends due in one span and
    /// one place of the login wave.
    sent: Vec<(StreamId, u64, u64, When)>,
    /// Streams of the sends written, when totals are kept by pattern.
    written: Vec<StreamId>,
    /// Sends refused or failed: expected nowhere.
    refused: Vec<(StreamId, u64)>,
    /// Sends never made (the sender was offline when due): expected nowhere, not planned.
    dropped: Vec<(StreamId, u64)>,
    received: Vec<Receipt>,
    /// Errors with their example text.
    errors: Vec<(ErrorKind, String)>,
    /// Bodies with our marker that could not be attributed.
    damaged: u64,
    /// Catch-up times of returns whose sync fetched something, µs.
    returns: Vec<u64>,
    /// Due times of sends handed to the session and not yet written out: their send lag
    /// is taken once the wake-up's writes are done ([`Vu::sends_written`]). Not applied
    /// with the rest: a tally holding some stays with its user.
    unwritten: Vec<Instant>,
    /// Live-counter changes, applied with the rest.
    pub(super) live: LiveDelta,
}

impl Tally {
    /// Adds `n` to counter `c`.
    pub(super) fn count(&mut self, c: Counter, n: u64) {
        self.counts.n[c as usize] += n;
        self.counts.touched |= 1 << (c as usize);
    }

    /// Records a latency.
    pub(super) fn latency(&mut self, h: Hist, us: u64) {
        self.lat.push((h, us));
    }

    /// The user sent `seq` on `stream`.
    pub(super) fn sent(&mut self, stream: StreamId, seq: u64, when: When) {
        match self.sent.last_mut() {
            Some(last) if last.0 == stream && last.3 == when => last.2 = last.2.max(seq),
            _ => self.sent.push((stream, seq, seq, when)),
        }
    }

    /// A send due at `due` was handed to the session; its bytes may still wait in the
    /// session's write buffer.
    pub(super) fn handed(&mut self, due: Instant) {
        self.unwritten.push(due);
    }

    /// A send of `stream` was written (counted by pattern when a live view asks).
    pub(super) fn written(&mut self, stream: StreamId) {
        self.written.push(stream);
    }

    /// `seq` of `stream` is expected nowhere (refused or failed).
    pub(super) fn refused(&mut self, stream: StreamId, seq: u64) {
        self.refused.push((stream, seq));
    }

    /// `seq` of `stream` was never sent: its sender was offline when it was due.
    pub(super) fn dropped(&mut self, stream: StreamId, seq: u64) {
        self.dropped.push((stream, seq));
    }

    /// A delivery to verify against the ledger.
    pub(super) fn receipt(&mut self, r: Receipt) {
        self.received.push(r);
    }

    /// A failure of `kind`; `detail` is its example text.
    pub(super) fn error(&mut self, kind: ErrorKind, detail: String) {
        self.errors.push((kind, detail));
        self.live.errors += 1;
    }

    /// A body with our marker that could not be attributed.
    pub(super) fn damaged(&mut self) {
        self.damaged += 1;
    }

    /// A return whose sync fetched the last missed message `us` after the login began.
    pub(super) fn returned(&mut self, us: u64) {
        self.returns.push(us);
    }

    /// True when it holds enough to be applied mid-burst.
    pub(super) fn full(&self) -> bool {
        self.lat
            .len()
            .max(self.received.len())
            .max(self.errors.len())
            >= TALLY_FLUSH
    }

    /// Applies and empties everything but the live counters; `me` is the recipient. First
    /// copies of deliveries are counted into `live.received` here, where the ledger tells
    /// them from repeats (the drain waits for first copies only).
    fn apply(&mut self, r: &mut Recorder, me: UserIx, shared: &Shared) {
        let sec = self.sec;
        let mut touched = std::mem::take(&mut self.counts.touched);
        while touched != 0 {
            let i = touched.trailing_zeros() as usize;
            touched &= touched - 1;
            let n = std::mem::take(&mut self.counts.n[i]);
            if n > 0 {
                r.metrics.add(sec, Counter::ALL[i], n);
            }
        }
        for (h, us) in self.lat.drain(..) {
            r.metrics.record(sec, h, us);
        }
        for (kind, text) in self.errors.drain(..) {
            r.metrics.error(sec, kind, || text);
        }
        for (stream, first, last, when) in self.sent.drain(..) {
            r.ledger.sent_in(stream, first, when);
            r.ledger.sent(stream, last);
        }
        for (stream, seq) in self.refused.drain(..) {
            r.ledger.refused(stream, seq);
        }
        for (stream, seq) in self.dropped.drain(..) {
            r.ledger.dropped(stream, seq);
        }
        for us in self.returns.drain(..) {
            r.metrics.split_mut().record(Part::Sync, Some(us));
        }
        for _ in 0..std::mem::take(&mut self.damaged) {
            r.ledger.damaged();
        }
        by_pattern(r, shared, &mut self.written, &self.received);
        let start_us = shared.traffic_start_us();
        for d in self.received.drain(..) {
            // The same deliveries as `Vu::deliver` records end-to-end latency of.
            if d.via == Via::Push && !d.corrupt {
                if let Some(s) = &shared.senders {
                    if let Some(from) = s.other_shard(d.stream) {
                        r.metrics.record_cross(s.me(), from, d.latency_us);
                    }
                }
            }
            let arrival =
                r.ledger
                    .received_in(me, d.stream, d.seq, d.latency_us, d.via, d.corrupt, d.span);
            if arrival == Arrival::Again {
                continue;
            }
            self.live.received += 1;
            let group = shared.group_of_stream.get(&d.stream);
            if let (Some(start), false) = (start_us, d.corrupt) {
                let due = d.at_us.saturating_sub(d.latency_us).saturating_sub(start);
                let push = (d.via == Via::Push).then_some(d.latency_us);
                shared
                    .bands
                    .record(&mut r.metrics, group.map(|g| &**g), due, push);
            }
            if group.is_some() && d.via == Via::Push && !d.corrupt {
                if let Some(fan) = shared.fanout_received(d.stream, d.seq, d.at_us) {
                    r.metrics.record(sec, Hist::Fanout, fan);
                }
            }
        }
    }
}

/// Counts `written` sends and the intact `received` copies by pattern, when the run keeps
/// totals by pattern; empties `written`.
fn by_pattern(
    r: &mut Recorder,
    shared: &Shared,
    written: &mut Vec<StreamId>,
    received: &[Receipt],
) {
    if shared.patterns.names.is_empty() {
        written.clear();
        return;
    }
    for stream in written.drain(..) {
        if let Some(i) = shared.patterns.of_stream(stream) {
            slot(&mut r.patterns, i).sent += 1;
        }
    }
    for d in received.iter().filter(|d| !d.corrupt) {
        if let Some(i) = shared.patterns.of_stream(d.stream) {
            let push = (d.via == Via::Push).then_some(d.latency_us);
            slot(&mut r.patterns, i).receipt(push);
        }
    }
}

/// The tally a user holds while it has something recorded and not yet applied.
#[derive(Debug, Default)]
pub(super) struct Held(Option<Box<Tally>>);

impl Held {
    /// True when it holds enough to be applied mid-burst.
    pub(super) fn full(&self) -> bool {
        self.0.as_ref().is_some_and(|t| t.full())
    }
}

/// Spare tallies a worker thread keeps at most: enough for the users it runs between
/// two flushes, without holding one per user.
const SPARES: usize = 64;

thread_local! {
    /// Empty tallies (with the room their vectors grew to) for the users polled on this
    /// thread: a user holds one only between recording something and applying it.
    // Boxes, not tallies: a user holds its tally boxed, and one moves in and out whole.
    #[allow(clippy::vec_box)]
    static SPARE: RefCell<Vec<Box<Tally>>> = const { RefCell::new(Vec::new()) };
}

/// An empty tally: a spare of this thread's, or a new one.
fn spare() -> Box<Tally> {
    SPARE.with_borrow_mut(Vec::pop).unwrap_or_default()
}

impl<D: Driver> Vu<D> {
    /// The tally, readied for events at `now`: what it held of another second is applied
    /// first.
    pub(super) fn tally(&mut self, now: Instant) -> &mut Tally {
        let sec = self.shared.sec(now);
        self.tally_in(sec)
    }

    /// The tally of second `sec` of the run ([`Shared::sec`]), flushing the one before.
    pub(super) fn tally_in(&mut self, sec: u32) -> &mut Tally {
        if self.tally.0.as_ref().is_some_and(|t| t.sec != sec) {
            self.flush_tally();
        }
        let t = self.tally.0.get_or_insert_with(spare);
        t.sec = sec;
        t
    }

    /// Adds `n` to counter `c`, now.
    pub(super) fn count(&mut self, c: Counter, n: u64) {
        self.tally(Instant::now()).count(c, n);
    }

    /// Records a failure of `kind`, now.
    pub(super) fn error(&mut self, kind: ErrorKind, detail: String) {
        self.tally(Instant::now()).error(kind, detail);
    }

    /// The sends handed to the session so far are written out (or failed) now: their send
    /// lag, due → now, includes any time the writes waited on a full socket.
    pub(super) fn sends_written(&mut self) {
        let now = Instant::now();
        if self.tally.0.as_ref().is_none_or(|t| t.unwritten.is_empty()) {
            return;
        }
        let t = self.tally(now);
        let lags = t.unwritten.drain(..).map(|due| {
            let lag = now.saturating_duration_since(due).as_micros() as u64;
            (Hist::SendLag, lag)
        });
        t.lat.extend(lags);
    }

    /// Applies the tally to the user's recorder (one lock) and to the live counters, and
    /// gives it back to the thread's spares (unless it holds sends not yet written out).
    pub(super) fn flush_tally(&mut self) {
        let Some(mut t) = self.tally.0.take() else {
            return;
        };
        t.apply(
            &mut self.shared.recorder(self.spec.slot),
            self.spec.ctx.ix,
            &self.shared,
        );
        let live = &self.shared.live;
        let d = &mut t.live;
        for (counter, n) in [
            (&live.sent, &mut d.sent),
            (&live.expected, &mut d.expected),
            (&live.received, &mut d.received),
            (&live.accepted, &mut d.accepted),
            (&live.refused, &mut d.refused),
            (&live.replies, &mut d.replies),
            (&live.errors, &mut d.errors),
        ] {
            if *n > 0 {
                counter.fetch_add(std::mem::take(n), Ordering::Relaxed);
            }
        }
        if !t.unwritten.is_empty() {
            self.tally.0 = Some(t);
            return;
        }
        SPARE.with_borrow_mut(|spares| {
            if spares.len() < SPARES {
                spares.push(t);
            }
        });
    }
}
