//! The load engine: runs a [`Plan`]'s virtual users through a [`Driver`].
//!
//! Time and concurrency live here. Logins arrive on the pacer's schedule ([`arrival`]);
//! traffic starts once every on-time user has tried to log in (in a sharded run, every
//! shard's: [`StartBarrier`]); each user's sends are due
//! on a fixed schedule ([`schedule`]) and go out when due, whatever the server does (open
//! loop); latency counts from the due time. One timer wakes every user whose work is due
//! ([`timer_wheel`]). When everything scheduled is done the run
//! drains in-flight deliveries for a bounded time, runs the final verification sync, and
//! collects the per-slot recorders into one [`Outcome`].
//!
//! The engine names no concrete driver and judges no delivery: it feeds the ledger and
//! metrics, and the report decides.

pub mod arrival;
pub mod changes;
pub mod held;
pub mod offered;
pub mod patterns;
pub mod schedule;
pub mod shared;
pub mod snapshot;
pub mod split;
pub mod timer_wheel;
pub mod vu;

#[cfg(test)]
mod signal_tests;
#[cfg(test)]
mod tests;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::clock::Clock;
use crate::driver::{Driver, UserCtx};
use crate::ledger::signals::SignalBook;
use crate::ledger::Ledger;
use crate::metrics::{ErrorKind, Metrics};
use crate::scenario::{Plan, Population, UserIx};
use shared::{EngineState, Shared};
use vu::{VuConfig, VuSpec};

/// How long after the schedule's end users may still be busy before the run goes on
/// without them.
const OVERRUN: Duration = Duration::from_secs(10);
/// How long users get to finish their verification sync and disconnect.
const CLOSE_GRACE: Duration = Duration::from_secs(30);
/// How long users get to disconnect once a signal has cut the run short: after a first
/// signal the run ends within the scenario's `drain` plus this (users still stuck in a
/// login or a request to an unresponsive target are then stopped where they are).
const SIGNAL_GRACE: Duration = Duration::from_secs(2);

/// A live view of a running test, for progress display.
#[derive(Debug, Clone, Copy, Default)]
pub struct Progress {
    /// Time since the start of the run.
    pub elapsed: Duration,
    /// Where the run is.
    pub phase: &'static str,
    /// Users online now.
    pub online: u64,
    /// Sends so far.
    pub sent: u64,
    /// Intact deliveries so far.
    pub received: u64,
    /// Request replies so far.
    pub replies: u64,
    /// Errors so far.
    pub errors: u64,
    /// End-to-end p99 of the last second, µs (of what was recorded by the end of it).
    pub e2e_p99_us: u64,
}

/// How long a shard waits at the start barrier for the other shards' users to log in
/// before its traffic starts anyway (and the run's notes say so).
const BARRIER_WAIT: Duration = Duration::from_secs(60);
/// How often the start barrier is looked at.
const BARRIER_POLL: Duration = Duration::from_millis(20);

/// How this process takes part in a run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Run id carried by every envelope (the same in every shard of a run).
    pub run_id: u32,
    /// Traffic starts no earlier than this wall-clock time, so that the shards of one run
    /// start together; each shard still waits for its own users to log in.
    pub traffic_at: Option<SystemTime>,
    /// The shards' common start: traffic also waits (at most [`BARRIER_WAIT`]) until every
    /// shard's on-time users have tried to log in.
    pub barrier: Option<Arc<dyn StartBarrier>>,
    /// The run's clock: this host's corrected by its offset to the run's reference, so
    /// that due and receive times of all shards are on one clock.
    pub clock: Clock,
    /// Told the instant traffic starts (the chaos steps count from it).
    pub traffic_seen: Option<watch::Sender<Option<Instant>>>,
    /// Where live views look at the run (the OpenMetrics endpoint).
    pub live: Option<Arc<snapshot::LiveTap>>,
}

/// Where the processes of one run tell each other that their users are logged in, so that
/// traffic starts in all of them together and only once every user is in.
pub trait StartBarrier: Send + Sync + std::fmt::Debug {
    /// Tells the others that this process's on-time users have all tried to log in.
    fn arrive(&self) -> std::io::Result<()>;
    /// The processes (shard indexes) that have not arrived yet; empty when all are in.
    fn missing(&self) -> Vec<u32>;
    /// How many processes take part.
    fn count(&self) -> u32;
}

/// What a run produced.
#[derive(Debug)]
pub struct Outcome {
    /// Histograms, counters, series, errors.
    pub metrics: Metrics,
    /// Delivery accounting.
    pub ledger: Ledger,
    /// Read receipts, typing and presence accounting.
    pub signals: SignalBook,
    /// True when a signal stopped the run early.
    pub interrupted: bool,
    /// Wall clock at the start, µs since the Unix epoch.
    pub started_wall_us: u64,
    /// Length of the run.
    pub duration: Duration,
    /// When traffic started, from the start of the run.
    pub traffic_started: Option<Duration>,
    /// Users this process simulated.
    pub users: u32,
    /// What the engine noticed about the run itself, for the report.
    pub notes: Vec<String>,
}

/// Runs `plan`'s share for this process (its shard's users) against `driver`.
///
/// The run goes through its phases in order: launch the users, login, traffic, drain,
/// close. `signals` counts stop requests: the first stops sending and drains for the
/// plan's grace period, the second stops at once; both still return everything recorded.
/// `on_progress` is called about once a second.
pub async fn run<D: Driver>(
    plan: &Plan,
    driver: D,
    opts: RunOptions,
    signals: watch::Receiver<u32>,
    on_progress: impl FnMut(&Progress) + Send,
) -> Outcome {
    // Before the users connect: their sockets stamp arrivals when there is a tick.
    crate::runtime::set_wake_tick(plan.wake_tick);
    let users = Users::launch(plan, driver, &opts);
    if let Some(tap) = &opts.live {
        tap.attach(&users.shared, users.acceptance);
    }
    let mut conductor = Conductor {
        shared: users.shared.clone(),
        signals,
        on_progress,
        interrupted: false,
        last_tick: Instant::now(),
        held: held::Held::new(held::PlannedOnline::of(
            &plan.population,
            users.range.clone(),
            plan.target.connect_timeout,
        )),
    };
    if let Some(seen) = opts.traffic_seen.clone() {
        let mut start = users.shared.traffic_start_changes();
        tokio::spawn(async move {
            if let Ok(t) = start.wait_for(Option::is_some).await {
                seen.send_replace(*t);
            }
        });
    }
    let mut notes = Vec::new();
    if login(&mut conductor, &opts, &mut notes).await {
        notes.extend(traffic(&mut conductor, &plan.population, users.sched_end).await);
    }
    drain(&mut conductor, plan.drain, users.acceptance, users.planned).await;
    close(&mut conductor, users.tasks).await;
    users.timer_wheel.abort();
    unverified_when_cut_off(&users.shared, users.range.clone());

    let shared = &users.shared;
    if let Some(tap) = &opts.live {
        tap.close(shared);
    }
    let all = shared.collect(&plan.ledger);
    if let Some((_, n, examples)) = all.metrics.errors().find(|e| e.0 == ErrorKind::Engine) {
        notes.push(format!(
            "{n} user task(s) of the generator panicked ({}): an engine failure, not the \
             server's; what they should have received is not counted as lost",
            examples.join("; ")
        ));
    }
    if !plan.wake_tick.is_zero() {
        notes.push(wake_tick_note(plan.wake_tick, shared.stamped_arrivals()));
    }
    crate::runtime::set_wake_tick(Duration::ZERO);
    let traffic_started = shared
        .traffic_start()
        .map(|t| t.saturating_duration_since(shared.t0));
    Outcome {
        metrics: all.metrics,
        ledger: all.ledger,
        signals: all.signals,
        interrupted: conductor.interrupted,
        started_wall_us: shared.t0_wall_us,
        duration: shared.t0.elapsed(),
        traffic_started,
        users: users.range.len() as u32,
        notes,
    }
}

/// What the report says of a run with a wake tick: what the threads did, and whether the
/// receive times were the kernel's (`stamped`) or the wake-ups'.
fn wake_tick_note(tick: Duration, stamped: bool) -> String {
    let ms = tick.as_millis();
    let times = if stamped {
        "receive times are the kernel's (SO_TIMESTAMPNS), so latencies do not include the \
         sleep (a read the kernel gave no time, as right after a machine's first socket asks \
         for them, has the wake-up's)"
    } else {
        "this driver's sockets give no kernel receive times, so receive times are the \
         wake-ups': latencies may include up to a tick of the generator's sleep"
    };
    format!(
        "{}{ms} ms (`wake_tick`): the generator's threads slept to the next {ms} ms \
         boundary before they waited for their sockets, so that one wake-up took everything \
         that arrived within it; {times}",
        crate::runtime::WAKE_TICK_NOTE_START
    )
}

/// The virtual users of this process, running.
struct Users {
    /// Run-wide state they share.
    shared: Arc<Shared>,
    /// One task per user.
    tasks: JoinSet<()>,
    /// The task of their timer ([`timer_wheel`]).
    timer_wheel: tokio::task::JoinHandle<()>,
    /// The users of this process.
    range: std::ops::Range<UserIx>,
    /// When the last user has nothing scheduled any more, from the traffic start.
    sched_end: Duration,
    /// The driver reports acceptance of sends.
    acceptance: bool,
    /// Deliveries to wait for in the drain whatever the live counters say (other shards'
    /// sends to this one's users are known only from the schedule); 0 in a single process.
    planned: u64,
}

impl Users {
    /// Builds the schedule of this process's users, registers what they should receive,
    /// and starts one task per user; they log in on the arrival schedule.
    fn launch<D: Driver>(plan: &Plan, driver: D, opts: &RunOptions) -> Users {
        let range = plan.shard.range(plan.population.users);
        let mut sched = schedule::build(plan, range.clone());
        let slots = 4 * crate::sys::cores();
        let sharded = plan.shard.count > 1;
        let (shared, receives) = shared_state(plan, &mut sched, opts, slots);
        let cfg = Arc::new(VuConfig {
            heartbeat: plan.target.heartbeat,
            verify_sync: plan.ledger.verify_sync,
            acceptance: driver.caps().acceptance,
            needs_prior_connect: driver.caps().needs_prior_connect,
            filters_own_echoes: driver.caps().filters_own_echoes,
            sync_first_login: sharded,
            // Behind a start barrier no shard sends before every shard's users are in.
            skip_history: driver.caps().skips_history && (!sharded || opts.barrier.is_some()),
            range: range.clone(),
            signals: plan
                .signals
                .as_ref()
                .map(|s| Arc::new(vu::SignalCfg::of(plan, s))),
        });
        let visits = visits(plan, &sched, &cfg, &receives);
        let pop = &plan.population;
        let on_time = match pop.sessions {
            Some(_) => 0,
            None => range
                .clone()
                .filter(|ix| pop.late.binary_search(ix).is_err())
                .count(),
        };
        // Set before any user task runs: each one counts these down. Late users and users
        // who come and go count too when they must establish a session before traffic.
        let waiting = on_time + visits.iter().filter(|v| **v).count();
        shared.logins_pending.store(waiting, Ordering::Release);
        shared.busy.store(range.len(), Ordering::Release);
        let (sched_end, planned) = (sched.end, sched.planned);
        let due: u64 = sched
            .vus
            .iter()
            .flat_map(|v| &v.programs)
            .map(schedule::Program::planned)
            .sum();
        shared
            .recorder(0)
            .metrics
            .add(0, crate::metrics::Counter::Due, due);
        let tasks = spawn_users(
            plan,
            sched.vus,
            Arc::new(driver),
            &shared,
            &cfg,
            &visits,
            slots,
        );
        let timer_wheel = tokio::spawn(shared.timer_wheel.clone().run());
        Users {
            shared,
            tasks,
            timer_wheel,
            range,
            sched_end,
            acceptance: cfg.acceptance,
            planned: if sharded { planned } else { 0 },
        }
    }
}

/// Users the run stopped before they closed (a signal, or the close's grace over while
/// they were still busy): their final verification never ran, so what they had not
/// received counts as unverified, not as the server's loss.
fn unverified_when_cut_off(shared: &Shared, range: std::ops::Range<UserIx>) {
    let closed = std::mem::take(&mut *shared.closed_out.lock().unwrap_or_else(|p| p.into_inner()));
    let slots = shared.recorder_count();
    for (offset, ix) in range.enumerate() {
        if !closed.contains(&ix) {
            shared.user_unreached(ix, offset % slots);
        }
    }
}

/// The run-wide state of this process's users, with what each should receive registered
/// in its recorder's ledger; and which of them receive anything.
fn shared_state(
    plan: &Plan,
    sched: &mut schedule::Schedule,
    opts: &RunOptions,
    slots: usize,
) -> (Arc<Shared>, Vec<bool>) {
    let range = plan.shard.range(plan.population.users);
    let mut group_local = vec![0u32; sched.groups.len()];
    for vu in &sched.vus {
        for g in &vu.groups {
            group_local[g.index] += 1;
        }
    }
    let mut shared = Shared::new(
        opts.run_id,
        opts.clock,
        slots,
        &plan.ledger,
        &sched.groups,
        group_local,
        std::mem::take(&mut sched.expect.group_of_stream),
    );
    shared.senders = crate::scenario::Shard::senders(plan);
    if plan.signals.as_ref().is_some_and(|s| s.asks().receipts) && shared.senders.is_none() {
        // Receipts go to each message's sender: the stream tells who it is.
        shared.senders = Some(crate::scenario::SenderShards::of(plan));
    }
    shared.bands = split::Bands::of(plan, &sched.groups, &shared.group_of_stream);
    if opts.live.is_some() {
        shared.patterns = patterns::Patterns::of(plan);
    }
    let shared = Arc::new(shared);
    // Each recipient's expectations go into the recorder its deliveries go to: the
    // ledger merges exactly only when a track lives in one ledger.
    let mut receives = vec![false; range.len()];
    {
        let mut first = shared.recorder(0);
        for &(stream, due) in &sched.expect.due {
            first.ledger.due(stream, due);
        }
    }
    for &(stream, recipient) in &sched.expect.tracks {
        let offset = (recipient - range.start) as usize;
        receives[offset] = true;
        shared
            .recorder(offset % slots)
            .ledger
            .expect(stream, recipient);
    }
    (shared, receives)
}

/// Late users that connect once before traffic: with a driver that needs a session
/// before the server keeps anything for them, or that notes what the server held
/// before the run for those with messages to fetch (not the users a `find` ladder
/// adds, which receive nothing).
fn visits(plan: &Plan, sched: &schedule::Schedule, cfg: &VuConfig, receives: &[bool]) -> Vec<bool> {
    let range = &cfg.range;
    range
        .clone()
        .zip(&sched.vus)
        .map(|(ix, vu)| {
            let late = plan.population.late.binary_search(&ix).is_ok()
                || plan.population.sessions.is_some();
            let fetches = receives[(ix - range.start) as usize] || !vu.groups.is_empty();
            late && (cfg.needs_prior_connect || (cfg.skip_history && fetches))
        })
        .collect()
}

/// Starts one task per user of `vus`, logging in on the arrival schedule.
fn spawn_users<D: Driver>(
    plan: &Plan,
    vus: Vec<schedule::VuPlan>,
    driver: Arc<D>,
    shared: &Arc<Shared>,
    cfg: &Arc<VuConfig>,
    visits: &[bool],
    slots: usize,
) -> JoinSet<()> {
    let pop = &plan.population;
    let start = cfg.range.start;
    let mut tasks = JoinSet::new();
    for (offset, vu_plan) in vus.into_iter().enumerate() {
        let ix = start + offset as u32;
        let late_position = pop.late.binary_search(&ix);
        let (first_login, away) = match &pop.sessions {
            Some(s) => timeline(s.of(ix)),
            None => {
                let first_login = if let Ok(position) = late_position {
                    arrival::late_login(pop, position)
                } else {
                    let position = ix - pop.late.partition_point(|&l| l < ix) as u32;
                    arrival::arrival_offset(&pop.arrival, u64::from(position))
                };
                let churn = pop.churn.binary_search(&ix).is_ok();
                let away = churn.then_some((pop.churn_offline_at, Some(pop.churn_back_at)));
                (Some(first_login), away.into_iter().collect())
            }
        };
        let spec = VuSpec {
            ctx: UserCtx {
                ix,
                id: pop.user_id(ix),
            },
            plan: vu_plan,
            first_login,
            from_traffic: pop.sessions.is_some(),
            on_time: late_position.is_err() && pop.sessions.is_none(),
            visits: visits[offset],
            away,
            slot: offset % slots,
        };
        tasks.spawn(vu::run(driver.clone(), shared.clone(), cfg.clone(), spec));
    }
    tasks
}

/// A user's first login and its leaving and returning times, from its session windows
/// (ms from the traffic start).
fn timeline(windows: &[[u32; 2]]) -> (Option<Duration>, Box<[vu::Away]>) {
    let ms = |t: u32| Duration::from_millis(t.into());
    let away = windows
        .iter()
        .enumerate()
        .filter(|(_, w)| w[1] != crate::scenario::plan::OPEN)
        .map(|(i, w)| (ms(w[1]), windows.get(i + 1).map(|next| ms(next[0]))))
        .collect();
    (windows.first().map(|w| ms(w[0])), away)
}

/// The login phase: waits until every on-time user has tried to log in, then for the other
/// shards' users (the start barrier) and the run's common traffic start (`traffic_at`).
/// True when traffic may start; `notes` says when it starts before everyone is in.
async fn login<F: FnMut(&Progress) + Send>(
    c: &mut Conductor<F>,
    opts: &RunOptions,
    notes: &mut Vec<String>,
) -> bool {
    let everyone_in = c
        .wait(None, |s| s.logins_pending.load(Ordering::Acquire) == 0)
        .await;
    if !everyone_in {
        return false;
    }
    if let (Some(at), None) = (opts.traffic_at, &opts.barrier) {
        // Without a barrier the other shards start at `at` whether this one is in or not.
        if let Ok(late) = opts.clock.now().duration_since(at) {
            if late > Duration::from_millis(100) {
                notes.push(format!(
                    "this shard's on-time users were not all logged in at the run's common \
                     traffic start (--start-traffic-at): they were in {:.1} s after it, so \
                     its traffic started late, and other shards may have been sending to its \
                     users while they were still logging in (run the shards with \
                     --start-barrier to have traffic wait for every shard's logins)",
                    late.as_secs_f64()
                ));
            }
        }
    }
    if let Some(barrier) = &opts.barrier {
        if let Err(e) = barrier.arrive() {
            notes.push(format!(
                "this shard could not tell the others its users were logged in ({e}): \
                 they started traffic after waiting {} s for it",
                BARRIER_WAIT.as_secs()
            ));
        }
        let limit = Instant::now() + BARRIER_WAIT;
        let mut missing = barrier.missing();
        while !missing.is_empty() && Instant::now() < limit {
            // Only a signal ends this early.
            c.wait(Some(BARRIER_POLL), |_| false).await;
            if c.interrupted {
                return false;
            }
            missing = barrier.missing();
        }
        if !missing.is_empty() {
            let list: Vec<String> = missing.iter().map(u32::to_string).collect();
            notes.push(format!(
                "traffic started before logins finished: shard(s) {} of {} had not \
                 reported their on-time users logged in {} s after this shard's were in; \
                 their users may have missed pushes and caught up by sync",
                list.join(", "),
                barrier.count(),
                BARRIER_WAIT.as_secs()
            ));
        }
    }
    let until_start = opts
        .traffic_at
        .and_then(|at| at.duration_since(opts.clock.now()).ok());
    if let Some(wait) = until_start {
        // The other shards' users log in meanwhile; only a signal ends this early.
        c.wait(Some(wait), |_| false).await;
    }
    !c.interrupted
}

/// The traffic phase: starts traffic and waits until no user has anything scheduled (or
/// [`OVERRUN`] past the schedule's end). Returns a note when users were left behind.
async fn traffic<F: FnMut(&Progress) + Send>(
    c: &mut Conductor<F>,
    pop: &Population,
    sched_end: Duration,
) -> Option<String> {
    let shared = c.shared.clone();
    let start = Instant::now();
    shared.start_traffic(start);
    // Users may still be logging in late or coming back after churn, but nobody has
    // anything to do after this; a user still busy then waits on an unresponsive target.
    let returns = arrival::last_late_login(pop).max(if pop.churn.is_empty() {
        Duration::ZERO
    } else {
        pop.churn_back_at
    });
    // Users who come and go in sessions return until the day is over.
    let day = pop.sessions.as_ref().map_or(Duration::ZERO, |s| s.day);
    let deadline = (start + sched_end.max(day)).max(shared.t0 + returns) + OVERRUN;
    let limit = deadline.saturating_duration_since(Instant::now());
    let done = c
        .wait(Some(limit), |s| s.busy.load(Ordering::Acquire) == 0)
        .await;
    (!done && !c.interrupted).then(|| {
        format!(
            "{} users were still busy {} s after the schedule ended (sending what was due, \
             reconnecting or waiting for a reply: `run.generator` says whether the generator \
             fell behind); the run drained and closed without them",
            shared.busy.load(Ordering::Acquire),
            OVERRUN.as_secs()
        )
    })
}

/// The drain phase: no new sends; waits at most `limit` for every accepted send's
/// deliveries (and, with `acceptance`, every send's acceptance), and for at least
/// `planned` deliveries.
async fn drain<F: FnMut(&Progress) + Send>(
    c: &mut Conductor<F>,
    limit: Duration,
    acceptance: bool,
    planned: u64,
) {
    if c.shared.phase() >= EngineState::Abort {
        return;
    }
    c.shared.advance(EngineState::Draining);
    c.wait(Some(limit), move |s| {
        let l = &s.live;
        let received = l.received.load(Ordering::Relaxed);
        let acked = !acceptance
            || l.sent.load(Ordering::Relaxed)
                <= l.accepted.load(Ordering::Relaxed) + l.refused.load(Ordering::Relaxed);
        acked && received >= l.expected.load(Ordering::Relaxed) && received >= planned
    })
    .await;
}

/// The close phase: users run their verification sync and disconnect, within
/// [`CLOSE_GRACE`]; an interrupted run skips the sync and gets [`SIGNAL_GRACE`] (also when
/// the first signal comes during the close); a second signal stops at once.
async fn close<F: FnMut(&Progress) + Send>(c: &mut Conductor<F>, mut tasks: JoinSet<()>) {
    let shared = c.shared.clone();
    let mut deadline = Instant::now();
    if c.interrupted && shared.phase() < EngineState::Abort {
        shared.advance(EngineState::Abort);
        deadline += SIGNAL_GRACE;
    } else {
        shared.advance(EngineState::Closing);
        deadline += CLOSE_GRACE;
    }
    let mut listening = true;
    let closed = loop {
        tokio::select! {
            next = tasks.join_next() => if next.is_none() {
                break true;
            },
            _ = tokio::time::sleep_until(deadline) => break false,
            changed = c.signals.changed(), if listening => {
                let n = *c.signals.borrow_and_update();
                listening = changed.is_ok();
                if n >= 2 {
                    break false;
                }
                if n == 1 && !c.interrupted {
                    c.interrupted = true;
                    shared.advance(EngineState::Abort);
                    deadline = deadline.min(Instant::now() + SIGNAL_GRACE);
                }
            }
        }
    };
    if !closed {
        shared.advance(EngineState::Abort);
        tasks.abort_all();
    }
}

/// Drives the run's phases while reporting progress and watching for stop signals.
struct Conductor<F> {
    /// Run-wide state.
    shared: Arc<Shared>,
    /// Stop requests so far.
    signals: watch::Receiver<u32>,
    /// Called about once a second.
    on_progress: F,
    /// A signal stopped the run.
    interrupted: bool,
    /// When progress was last reported.
    last_tick: Instant,
    /// Users online against users planned online, over the traffic.
    held: held::Held,
}

impl<F: FnMut(&Progress) + Send> Conductor<F> {
    /// Waits until `done` holds (true), a signal arrives, or `limit` passes (false).
    async fn wait(&mut self, limit: Option<Duration>, done: impl Fn(&Shared) -> bool) -> bool {
        let deadline = limit.map(|l| Instant::now() + l);
        loop {
            let n = *self.signals.borrow_and_update();
            if n >= 2 {
                self.interrupted = true;
                self.shared.advance(EngineState::Abort);
                return false;
            }
            if n == 1 && !self.interrupted {
                self.interrupted = true;
                return false;
            }
            if done(&self.shared) {
                return true;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return false;
            }
            self.hold();
            if self.last_tick.elapsed() >= Duration::from_secs(1) {
                self.last_tick = Instant::now();
                self.tick();
            }
            let step = Duration::from_millis(100);
            tokio::select! {
                _ = self.shared.wait_for(step, &done) => {}
                _ = self.signals.changed() => {}
            }
        }
    }

    /// Integrates the users online and planned online while the traffic goes on.
    fn hold(&mut self) {
        let s = &self.shared;
        if s.phase() != EngineState::Running || s.traffic_start().is_none() {
            return;
        }
        let now = Instant::now();
        let online = s.live.online.load(Ordering::Relaxed);
        let since_t0 = now.saturating_duration_since(s.t0);
        let since_traffic = s
            .traffic_start()
            .map_or(Duration::ZERO, |t| now.saturating_duration_since(t));
        self.held.sample(
            &mut s.recorder(0).metrics,
            now,
            (since_t0, since_traffic),
            online,
        );
    }

    /// Records the online gauge and reports progress.
    fn tick(&mut self) {
        let s = &self.shared;
        let now = Instant::now();
        let sec = s.sec(now);
        let online = s.live.online.load(Ordering::Relaxed);
        s.recorder(0).metrics.gauge_online(sec, online);
        // The seconds that are over leave the recorders (their memory does not grow with
        // the run); the last of them gives the live p99, across all users.
        s.settle(sec);
        let p99 = s
            .settled_e2e(sec.saturating_sub(1)..sec)
            .map_or(0, |w| w.p99);
        let phase = s.phase_name();
        let l = &s.live;
        (self.on_progress)(&Progress {
            elapsed: now.saturating_duration_since(s.t0),
            phase,
            online,
            sent: l.sent.load(Ordering::Relaxed),
            received: l.received.load(Ordering::Relaxed),
            replies: l.replies.load(Ordering::Relaxed),
            errors: l.errors.load(Ordering::Relaxed),
            e2e_p99_us: p99,
        });
    }
}
