//! State shared by all virtual users of a run: the recorders they aggregate into, the live
//! counters progress reads, the run phase, and fan-out completion tracking.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use tokio::sync::{watch, Notify};
use tokio::time::Instant;

use super::changes::Changes;
use super::patterns::{PatternTotals, Patterns};
use super::schedule::GroupInfo;
use super::split::Bands;
use super::timer_wheel::TimerWheel;
use crate::clock::Clock;
use crate::ledger::signals::SignalBook;
use crate::ledger::{Ledger, When};
use crate::metrics::{ErrorKind, Hist, Metrics, Window};
use crate::scenario::{LedgerOpts, SenderShards, StreamId, UserIx};

/// Where a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum EngineState {
    /// Logging in and sending on schedule.
    Running,
    /// No new sends; in-flight deliveries may still arrive.
    Draining,
    /// Users run their final verification sync (when enabled) and disconnect.
    Closing,
    /// Stop at once.
    Abort,
}

impl EngineState {
    /// Every phase, in order (a phase is its place here as a number).
    const ALL: [EngineState; 4] = [
        EngineState::Running,
        EngineState::Draining,
        EngineState::Closing,
        EngineState::Abort,
    ];
}

/// What virtual users aggregate into; one per slot, merged at the end (the per-second
/// series each second: see [`Shared::settle`]).
#[derive(Debug)]
pub struct Recorder {
    /// Histograms, counters, series, errors.
    pub metrics: Metrics,
    /// Delivery accounting.
    pub ledger: Ledger,
    /// Read receipts, typing and presence accounting.
    pub signals: SignalBook,
    /// Totals by traffic pattern, indexed as [`Shared::patterns`] (only with a live view).
    pub patterns: Vec<PatternTotals>,
}

/// Counters read by live progress and by the drain; relaxed atomics, not the result.
#[derive(Debug, Default)]
pub struct Live {
    /// Users logged in now.
    pub online: AtomicU64,
    /// Sends written.
    pub sent: AtomicU64,
    /// Sends accepted by the server.
    pub accepted: AtomicU64,
    /// Sends refused or failed.
    pub refused: AtomicU64,
    /// Intact deliveries seen by this process.
    pub received: AtomicU64,
    /// Deliveries this process's users should see for what was accepted so far.
    pub expected: AtomicU64,
    /// Errors of any kind.
    pub errors: AtomicU64,
    /// Request replies.
    pub replies: AtomicU64,
}

/// Tracks when the last online member of a group received a message (fan-out completion).
#[derive(Debug, Default)]
struct Fanout {
    slots: Vec<Mutex<FanoutSlot>>,
}

/// Group messages still in flight: (stream, seq) → (online members still to receive it,
/// due time in wall-clock µs).
type FanoutSlot = foldhash::HashMap<(StreamId, u64), (u32, u64)>;

/// The run-wide state shared by all virtual users.
///
/// Every clock of the engine is tokio's ([`Instant`]), so a test under
/// `tokio::time::pause()` runs the whole engine on virtual time. Wall-clock times (envelope
/// due times, receive times) are `t0_wall_us` plus the tokio time elapsed since `t0`: one
/// monotonic clock for sender and receiver, the same as the system clock in a real run, and
/// `t0_wall_us` is read from the run's [`Clock`], so that shards on several hosts stamp
/// their times on one reference clock.
#[derive(Debug)]
pub struct Shared {
    /// Start of the run.
    pub t0: Instant,
    /// The run's clock at `t0`, µs since the Unix epoch (envelope due times are on it).
    pub t0_wall_us: u64,
    /// Run id carried by every envelope.
    pub run_id: u32,
    /// Recorders, one per slot.
    recorders: Vec<Mutex<Recorder>>,
    /// The per-second series of the seconds that are over, merged across the recorders
    /// (only its series is used).
    series: Mutex<Metrics>,
    /// The seconds before this one are in `series` (changed under its lock).
    settled_before: AtomicU32,
    /// Live counters.
    pub live: Live,
    /// The run phase ([`Shared::advance`] moves it on).
    phase: watch::Sender<EngineState>,
    /// `phase` as its place in [`EngineState::ALL`]: read by every user at every wake-up,
    /// so without the lock a `watch` read takes.
    phase_now: AtomicU8,
    /// When traffic starts (set once every on-time user has tried to log in, by
    /// [`Shared::start_traffic`]).
    traffic_start: watch::Sender<Option<Instant>>,
    /// The traffic start and its wall-clock µs, once set: read by every user at every
    /// wake-up and delivery, so without the lock a `watch` read takes.
    traffic_began: OnceLock<(Instant, u64)>,
    /// Wakes the users at each change of `phase` or `traffic_start`.
    pub changes: Arc<Changes>,
    /// The chaos steps' bounds, µs from traffic start ([`LedgerOpts::bounds_us`]).
    pub bounds_us: Vec<u64>,
    /// The login wave's bounds, µs from traffic start ([`LedgerOpts::wave_us`]).
    pub wave_us: Vec<u64>,
    /// On-time users that have not finished their first login attempt.
    pub logins_pending: AtomicUsize,
    /// Users that still have sends, logins or reconnects scheduled.
    pub busy: AtomicUsize,
    /// Woken whenever `logins_pending` or `busy` drops.
    pub progress: Notify,
    /// A receive time came from the kernel ([`crate::driver::Session::arrived`]).
    stamped_arrivals: AtomicBool,
    /// Users that got to the end of their close (final verification sync done or
    /// impossible): what the others missed was cut off by the generator, not verified.
    pub closed_out: Mutex<std::collections::BTreeSet<UserIx>>,
    /// Online members of each group in this process.
    pub group_online: Vec<AtomicU32>,
    /// Members of each group in this process.
    pub group_local: Vec<u32>,
    /// The group each group stream goes to.
    pub group_of_stream: foldhash::HashMap<StreamId, Arc<GroupInfo>>,
    /// Which shard sent each stream, in a sharded run (cross-shard latencies are kept apart).
    pub senders: Option<SenderShards>,
    /// The users' timer for due work (its task runs while the users do).
    pub timer_wheel: Arc<TimerWheel>,
    /// The message patterns, when a live view shows totals by pattern (else empty, and
    /// nothing is recorded by pattern).
    pub patterns: Patterns,
    /// The group-size bands and the login wave deliveries are split by.
    pub bands: Bands,
    fanout: Fanout,
}

impl Shared {
    /// State for a run with `slots` recorders.
    pub fn new(
        run_id: u32,
        clock: Clock,
        slots: usize,
        ledger: &LedgerOpts,
        groups: &[Arc<GroupInfo>],
        group_local: Vec<u32>,
        group_of_stream: foldhash::HashMap<StreamId, Arc<GroupInfo>>,
    ) -> Self {
        let slots = slots.max(1);
        Shared {
            t0: Instant::now(),
            t0_wall_us: clock.now_us(),
            run_id,
            recorders: (0..slots)
                .map(|_| {
                    Mutex::new(Recorder {
                        metrics: Metrics::new(),
                        ledger: Ledger::new(ledger),
                        signals: SignalBook::default(),
                        patterns: Vec::new(),
                    })
                })
                .collect(),
            series: Mutex::new(Metrics::new()),
            settled_before: AtomicU32::new(0),
            live: Live::default(),
            phase: watch::channel(EngineState::Running).0,
            phase_now: AtomicU8::new(0),
            traffic_start: watch::channel(None).0,
            traffic_began: OnceLock::new(),
            changes: Arc::default(),
            bounds_us: ledger.bounds_us.clone(),
            wave_us: ledger.wave_us.clone(),
            logins_pending: AtomicUsize::new(0),
            busy: AtomicUsize::new(0),
            progress: Notify::new(),
            stamped_arrivals: AtomicBool::new(false),
            closed_out: Mutex::default(),
            group_online: groups.iter().map(|_| AtomicU32::new(0)).collect(),
            group_local,
            group_of_stream,
            senders: None,
            timer_wheel: Arc::default(),
            patterns: Patterns::default(),
            bands: Bands::default(),
            fanout: Fanout {
                slots: (0..16).map(|_| Mutex::default()).collect(),
            },
        }
    }

    /// The recorder for slot `i`. A poisoned lock (a panicking user task) still yields
    /// its data: results are never lost.
    pub fn recorder(&self, i: usize) -> MutexGuard<'_, Recorder> {
        let slot = &self.recorders[i % self.recorders.len()];
        slot.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How many recorders there are.
    pub fn recorder_count(&self) -> usize {
        self.recorders.len()
    }

    /// Where the run is, as live views name it: `login`, `traffic`, `drain`, `closing`
    /// or `abort`.
    pub fn phase_name(&self) -> &'static str {
        match self.phase() {
            EngineState::Running if self.traffic_start().is_none() => "login",
            EngineState::Running => "traffic",
            EngineState::Draining => "drain",
            EngineState::Closing => "closing",
            EngineState::Abort => "abort",
        }
    }

    /// Moves the per-second series before second `sec` out of every recorder into the
    /// merged series (exactly: what a user records late for one of those seconds is moved
    /// at the next call), so recorders hold only the seconds not yet over.
    pub fn settle(&self, sec: u32) {
        let mut series = self.series.lock().unwrap_or_else(|p| p.into_inner());
        for i in 0..self.recorders.len() {
            self.recorder(i)
                .metrics
                .move_series_before(sec, &mut series);
        }
        self.settled_before.fetch_max(sec, Ordering::Relaxed);
    }

    /// A copy of the merged series (see [`Shared::settle`]) and the second it ends before,
    /// for live views.
    pub fn settled_series(&self) -> (Metrics, u32) {
        let series = self.series.lock().unwrap_or_else(|p| p.into_inner());
        (series.clone(), self.settled_before.load(Ordering::Relaxed))
    }

    /// End-to-end latency over the seconds in `secs` of the merged series (see
    /// [`Shared::settle`]).
    pub fn settled_e2e(&self, secs: std::ops::Range<u32>) -> Option<Window> {
        let series = self.series.lock().unwrap_or_else(|p| p.into_inner());
        series.window(Hist::EndToEnd, secs)
    }

    /// Seconds since the start of the run, for per-second series.
    pub fn sec(&self, at: Instant) -> u32 {
        at.saturating_duration_since(self.t0).as_secs() as u32
    }

    /// Wall-clock µs of an instant of this run.
    pub fn wall_of(&self, at: Instant) -> u64 {
        let since = at.saturating_duration_since(self.t0).as_micros() as u64;
        self.t0_wall_us + since
    }

    /// The span between chaos bounds (see [`crate::ledger::Ledger::span_of`]) of a message
    /// due at wall-clock `due_us`: 0 without chaos steps or before traffic.
    pub fn span_of(&self, due_us: u64) -> usize {
        if self.bounds_us.is_empty() {
            return 0;
        }
        let Some(start_us) = self.traffic_start_us() else {
            return 0;
        };
        crate::ledger::Ledger::span_of(&self.bounds_us, due_us.saturating_sub(start_us))
    }

    /// `at` as wall-clock µs (see [`Shared::wall_of`]) and where in the run a message due
    /// then was due: its span between chaos bounds ([`Shared::span_of`]) and its place
    /// between the login wave's bounds.
    pub fn wall_and_when(&self, at: Instant) -> (u64, When) {
        let us = self.wall_of(at);
        let wave = match self.traffic_start_us() {
            Some(start_us) if !self.wave_us.is_empty() => {
                Ledger::span_of(&self.wave_us, us.saturating_sub(start_us))
            }
            _ => 0,
        };
        let when = When {
            span: self.span_of(us),
            wave,
        };
        (us, when)
    }

    /// Wall-clock µs now, on the run's clock (see [`Shared`]).
    pub fn now_us(&self) -> u64 {
        self.wall_of(Instant::now())
    }

    /// The current phase.
    pub fn phase(&self) -> EngineState {
        EngineState::ALL[usize::from(self.phase_now.load(Ordering::Acquire))]
    }

    /// Moves the run to `phase` unless it is already past it.
    pub fn advance(&self, phase: EngineState) {
        let moved = self.phase.send_if_modified(|p| {
            let later = phase > *p;
            if later {
                *p = phase;
                // Before the `watch` tells its waiters, so that they read it.
                self.phase_now.store(phase as u8, Ordering::Release);
            }
            later
        });
        if moved {
            self.changes.announce();
        }
    }

    /// The run phase as it changes (for a wait on it outside the users' loop).
    pub fn phase_changes(&self) -> watch::Receiver<EngineState> {
        self.phase.subscribe()
    }

    /// Starts traffic at `at` (once: a later call changes nothing).
    pub fn start_traffic(&self, at: Instant) {
        // Set before the `watch` tells its waiters, so that they read it.
        if self.traffic_began.set((at, self.wall_of(at))).is_ok() {
            self.traffic_start.send_replace(Some(at));
            self.changes.announce();
        }
    }

    /// When traffic started, once it has.
    pub fn traffic_start(&self) -> Option<Instant> {
        self.traffic_began.get().map(|&(at, _)| at)
    }

    /// The traffic start as wall-clock µs ([`Shared::wall_of`]), once it has started.
    pub fn traffic_start_us(&self) -> Option<u64> {
        self.traffic_began.get().map(|&(_, us)| us)
    }

    /// Seconds since the start of the run ([`Shared::sec`]) and wall-clock µs
    /// ([`Shared::wall_of`]) of `at`, from one reading of the time since the start.
    pub fn sec_and_wall(&self, at: Instant) -> (u32, u64) {
        let since = at.saturating_duration_since(self.t0);
        (
            since.as_secs() as u32,
            self.t0_wall_us + since.as_micros() as u64,
        )
    }

    /// A user took a receive time from the kernel.
    pub fn note_stamped_arrival(&self) {
        if !self.stamped_arrivals.load(Ordering::Relaxed) {
            self.stamped_arrivals.store(true, Ordering::Relaxed);
        }
    }

    /// Whether any receive time came from the kernel.
    pub fn stamped_arrivals(&self) -> bool {
        self.stamped_arrivals.load(Ordering::Relaxed)
    }

    /// The traffic start as it is set (for a wait on it outside the users' loop).
    pub fn traffic_start_changes(&self) -> watch::Receiver<Option<Instant>> {
        self.traffic_start.subscribe()
    }

    /// A user's first login attempt finished.
    pub fn login_settled(&self) {
        self.logins_pending.fetch_sub(1, Ordering::AcqRel);
        self.progress.notify_waiters();
    }

    /// A user has nothing scheduled any more.
    pub fn user_idle(&self) {
        self.busy.fetch_sub(1, Ordering::AcqRel);
        self.progress.notify_waiters();
    }

    /// The task of user `ix` (recorder `slot`) failed with `what` (a panic): an engine
    /// error, and what the user should have received is no longer expected, so a failure
    /// of the generator is never reported as loss by the server.
    pub fn user_failed(&self, ix: UserIx, slot: usize, what: &str) {
        let sec = self.sec(Instant::now());
        let mut r = self.recorder(slot);
        r.metrics
            .error(sec, ErrorKind::Engine, || format!("user {ix}: {what}"));
        r.ledger.abandon(ix);
        drop(r);
        self.live.errors.fetch_add(1, Ordering::Relaxed);
    }

    /// The run ends without a session for user `ix` (recorder `slot`): what it missed is
    /// unverified, not lost (see [`crate::ledger::Ledger::unreached`]).
    pub fn user_unreached(&self, ix: UserIx, slot: usize) {
        self.recorder(slot).ledger.unreached(ix);
    }

    /// User `ix` (recorder `slot`) could not join `groups` (indices into the run's groups):
    /// their messages are not expected for it (see [`Ledger::unjoined`]), so a setup
    /// failure counted as `join_failed` is not reported as the server's loss.
    pub fn user_unjoined(&self, ix: UserIx, slot: usize, groups: &[usize]) {
        let streams: Vec<StreamId> = self
            .group_of_stream
            .iter()
            .filter(|(_, g)| groups.contains(&g.index))
            .map(|(s, _)| *s)
            .collect();
        self.recorder(slot).ledger.unjoined(ix, &streams);
    }

    /// Deliveries a group stream's message makes in this process, not counting the sender.
    pub fn local_recipients(&self, group: &GroupInfo, sender_is_member: bool) -> u32 {
        self.group_local[group.index].saturating_sub(u32::from(sender_is_member))
    }

    /// A group message was sent: wait for `online` members to receive it.
    pub fn fanout_start(&self, stream: StreamId, seq: u64, online: u32, due_us: u64) {
        if online == 0 {
            return;
        }
        let mut slot = self.fanout_slot(stream);
        slot.insert((stream, seq), (online, due_us));
    }

    /// A member received a group message; returns the fan-out completion latency (µs from
    /// due) when it was the last online member.
    pub fn fanout_received(&self, stream: StreamId, seq: u64, now_us: u64) -> Option<u64> {
        let mut slot = self.fanout_slot(stream);
        let entry = slot.get_mut(&(stream, seq))?;
        entry.0 -= 1;
        if entry.0 > 0 {
            return None;
        }
        let due = entry.1;
        slot.remove(&(stream, seq));
        Some(now_us.saturating_sub(due))
    }

    fn fanout_slot(&self, stream: StreamId) -> MutexGuard<'_, FanoutSlot> {
        let slot = &self.fanout.slots[stream as usize % self.fanout.slots.len()];
        slot.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits until `cond` holds, re-checking whenever progress is signalled, at most `limit`.
    pub async fn wait_for(&self, limit: Duration, cond: impl Fn(&Shared) -> bool) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let notified = self.progress.notified();
            if cond(self) {
                return true;
            }
            let tick = tokio::time::Instant::now() + Duration::from_millis(50);
            tokio::select! {
                _ = notified => {}
                _ = tokio::time::sleep_until(tick.min(deadline)) => {}
            }
            if tokio::time::Instant::now() >= deadline {
                return cond(self);
            }
        }
    }

    /// Merges every recorder and the merged series into one (taking the series: call once,
    /// at the end).
    pub fn collect(&self, ledger: &LedgerOpts) -> Recorder {
        let series = std::mem::take(&mut *self.series.lock().unwrap_or_else(|p| p.into_inner()));
        let mut all = Recorder {
            metrics: series,
            ledger: Ledger::new(ledger),
            signals: SignalBook::default(),
            patterns: Vec::new(),
        };
        for i in 0..self.recorders.len() {
            let r = self.recorder(i);
            all.metrics.merge(&r.metrics);
            all.ledger.merge(&r.ledger);
            all.signals.merge(&r.signals);
        }
        let bands = self.bands.streams().iter().copied();
        all.metrics.split_mut().note_bands(bands);
        all
    }
}
