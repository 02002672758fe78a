//! One virtual user: logs in on schedule, sends when sends are due (open loop, latency from
//! the due time), receives and verifies deliveries, heartbeats, churns, reconnects after a
//! lost connection, fetches what it missed, and runs the final verification sync.
//!
//! Split along the flow: this module runs the user's life (first login, the wake-up loop,
//! churn, reconnects, the final sync); `send` makes the due sends and requests;
//! `receive` takes the session's events and checks delivered envelopes; `record` is the
//! one path by which every count, latency, error and ledger event reaches the recorder.

mod receive;
mod record;
mod send;
mod signal;

pub use signal::SignalCfg;

use std::future::Future;
use std::ops::Range;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use tokio::time::{sleep_until, Instant};

use super::schedule::{Sends, VuPlan};
use super::shared::{EngineState, Shared};
use crate::driver::{Account, Driver, Event, Resume, Session, UserCtx};
use crate::ledger::Via;
use crate::metrics::{Counter, ErrorKind, Hist};
use crate::scenario::plan::TraceTarget;
use crate::scenario::{StreamId, UserIx};
use record::Held;
use send::Pending;

/// Reconnect attempts after a lost connection before the user stays offline: 19 s of
/// trying (100 ms doubling to 3.2 s, then every 3.2 s), so that users get back to a server
/// that restarts in seconds (Synapse takes 2–10 s on a busy machine), as clients do.
const RECONNECTS: u32 = 10;
/// How long a user going offline waits for the acceptance of its sends in flight.
const SETTLE: Duration = Duration::from_secs(2);
/// Events handled per wake-up at most: those already received are taken without going
/// back to the scheduler.
const DRAIN: usize = 256;

/// Settings every user of a run shares.
#[derive(Debug)]
pub struct VuConfig {
    /// Heartbeat interval.
    pub heartbeat: Option<Duration>,
    /// Run the final verification sync.
    pub verify_sync: bool,
    /// The driver reports acceptance of sends.
    pub acceptance: bool,
    /// Late users connect once before traffic so the server keeps their messages.
    pub needs_prior_connect: bool,
    /// The driver never hands a user its own group messages back. Otherwise the user
    /// drops them (an echo of its own stream is not a delivery); with it, such an echo
    /// reaches the ledger as an unexpected recipient, because it is the server's mistake.
    pub filters_own_echoes: bool,
    /// Every user fetches missed messages at its first login: other shards may have sent
    /// before it was online.
    pub sync_first_login: bool,
    /// Logins before traffic note what the server already holds as history
    /// ([`Session::skip_history`]), and late users with messages to fetch connect once
    /// before traffic to note theirs: the driver skips history, and no message of the run
    /// is sent before this process's traffic starts (one process, or shards meeting at a
    /// start barrier).
    pub skip_history: bool,
    /// The users of this process.
    pub range: Range<UserIx>,
    /// Read receipts, typing and presence, when the scenario asks for them.
    pub signals: Option<Arc<SignalCfg>>,
}

/// One user's identity and timeline.
#[derive(Debug)]
pub struct VuSpec {
    /// Who.
    pub ctx: UserCtx,
    /// Traffic.
    pub plan: VuPlan,
    /// First login, from the start of the run (from the traffic start with
    /// `from_traffic`); `None`: the user is away all day, and logs in only to fetch what it
    /// was sent when the run closes.
    pub first_login: Option<Duration>,
    /// `first_login` and `away` count from the traffic start (users who come and go in
    /// sessions over the day), not from the start of the run.
    pub from_traffic: bool,
    /// False for late users (they sync after their first login).
    pub on_time: bool,
    /// A late user that connects once before traffic starts, and leaves until its login
    /// time (see [`VuConfig::needs_prior_connect`] and [`VuConfig::skip_history`]).
    pub visits: bool,
    /// When the user leaves and comes back (`None`: not before the run closes), ascending,
    /// from the start of the run (from the traffic start with `from_traffic`).
    pub away: Box<[Away]>,
    /// Recorder slot.
    pub slot: usize,
}

/// A reconnect the user has scheduled.
#[derive(Debug, Clone, Copy)]
enum Offline {
    /// Connected (or never offline).
    No,
    /// Away as planned; back at this offset from the origin of the user's timeline
    /// (`None`: not before the run closes, when it fetches what it was sent).
    Away(Option<Duration>),
    /// Lost the connection; next attempt at this instant.
    Lost { at: Instant, attempt: u32 },
    /// Gave up.
    Gone,
}

/// When a user leaves, and when it comes back (`None`: not before the run closes).
pub type Away = (Duration, Option<Duration>);

/// How a user's wait for its first login ended.
enum First {
    /// The login is due.
    Due,
    /// The user is away all day.
    Never,
    /// The run stopped first.
    Stopped,
}

/// A user's connection in its wake-up loop.
struct Link<S> {
    /// The session, while logged in.
    session: Option<S>,
    /// Whether, why and until when the user is offline.
    offline: Offline,
    /// When the last heartbeat went out.
    last_heartbeat: Instant,
    /// The due time last registered with the timer wheel (see [`super::timer_wheel::TimerWheel::poll_due`]).
    armed: Option<Instant>,
}

/// Runs one virtual user to the end of the run. A panic of the user's task is caught
/// here and reported as an engine failure of this user ([`Shared::user_failed`]).
///
/// Built from combinators rather than as an `async fn`: an `async fn` holding the user's
/// future in a local and then awaiting it keeps room for it twice, which is most of an
/// idle user's memory.
pub fn run<D: Driver>(
    driver: Arc<D>,
    shared: Arc<Shared>,
    cfg: Arc<VuConfig>,
    spec: VuSpec,
) -> impl Future<Output = ()> + Send {
    let (ix, slot) = (spec.ctx.ix, spec.slot);
    let failed = shared.clone();
    // Built here rather than in the async block: the block would keep room for its
    // arguments next to the user they were moved into.
    let mut vu = Vu::new(driver, shared, cfg, spec);
    AssertUnwindSafe(async move { vu.live().await })
        .catch_unwind()
        .map(move |outcome| {
            if let Err(panic) = outcome {
                let what = match (panic.downcast_ref::<&str>(), panic.downcast_ref::<String>()) {
                    (Some(s), _) => s,
                    (_, Some(s)) => s.as_str(),
                    (None, None) => "a panic without a message",
                };
                failed.user_failed(ix, slot, what);
            }
        })
}

/// One virtual user's state.
struct Vu<D: Driver> {
    /// The protocol.
    driver: Arc<D>,
    /// Run-wide state: recorders, live counters, phase, traffic start.
    shared: Arc<Shared>,
    /// Settings every user shares.
    cfg: Arc<VuConfig>,
    /// Who this user is and what it does.
    spec: VuSpec,
    /// What the driver remembers between two connections (taken while connected; boxed,
    /// as a connected user, idle or not, holds none).
    resume: Option<Box<Resume<D>>>,
    /// Sends waiting for their acceptance, by tag.
    pending: foldhash::HashMap<u64, Pending>,
    /// The request waiting for its reply: its tag and when it went out.
    outstanding: Option<(u64, Instant)>,
    /// The tag of the next send or request.
    next_tag: u64,
    /// The body buffer every send reuses.
    body: String,
    /// What this wake-up recorded, not yet applied (see `record`); taken from the worker
    /// thread's spares when something is recorded and given back when applied, so an
    /// idle user holds none.
    tally: Held,
    /// Counted in `Shared::logins_pending`, not yet counted down.
    login_pending: bool,
    /// Counted in `Shared::busy`, not yet counted down.
    busy: bool,
    /// Counted in the online gauges (`Live::online`, `Shared::group_online`).
    online: bool,
    /// The next entry of `spec.away` to leave at.
    next_away: usize,
    /// Has had a session at some point of the run.
    reached: bool,
    /// Group streams this user sends: an echo of them is not a delivery.
    own_streams: Box<[StreamId]>,
    /// Groups (by their index in the run) whose last join failed: at the end of the run
    /// their messages are no longer expected of this user.
    unjoined: Vec<usize>,
    /// Reads, typing and presence to make (only with signals).
    sig: Option<Box<signal::SignalState>>,
}

/// Counts the user down wherever it ends. A normal end has done all of this already; a
/// user task that panicked or was aborted still applies what it recorded and leaves the
/// engine's waits (logins pending, busy users) and gauges as if it had finished.
impl<D: Driver> Drop for Vu<D> {
    fn drop(&mut self) {
        self.flush_tally();
        self.login_settled();
        self.idle();
        self.offline_gauges();
    }
}

/// The next event of a session, or never when there is none.
async fn next_event<S: Session>(session: Option<&mut S>) -> Event {
    match session {
        Some(s) => s.next_event().await,
        None => std::future::pending().await,
    }
}

impl<D: Driver> Vu<D> {
    fn new(driver: Arc<D>, shared: Arc<Shared>, cfg: Arc<VuConfig>, spec: VuSpec) -> Self {
        Vu {
            resume: None,
            pending: foldhash::HashMap::default(),
            outstanding: None,
            next_tag: 0,
            body: String::new(),
            tally: Held::default(),
            login_pending: spec.on_time || spec.visits,
            busy: true,
            online: false,
            next_away: 0,
            reached: false,
            own_streams: if cfg.filters_own_echoes {
                Box::default()
            } else {
                spec.plan
                    .programs
                    .iter()
                    .flat_map(|p| match &p.sends {
                        Sends::Group { stream, .. } => vec![*stream],
                        Sends::Trace {
                            senders,
                            ix,
                            first_stream,
                            ..
                        } => senders[*ix]
                            .targets
                            .iter()
                            .enumerate()
                            .filter(|(_, t)| matches!(t, TraceTarget::Group(_)))
                            .map(|(k, _)| first_stream + k as StreamId)
                            .collect(),
                        Sends::Direct { .. } | Sends::Echo { .. } | Sends::Contacts { .. } => {
                            Vec::new()
                        }
                    })
                    .collect()
            },
            unjoined: Vec::new(),
            sig: cfg.signals.as_ref().map(|_| Box::default()),
            driver,
            shared,
            cfg,
            spec,
        }
    }

    /// The user's life: first login, then one wake-up after another until the run closes.
    async fn live(&mut self) {
        // Boxed, as every rare step: the first login's futures should not keep their room
        // in the user's state machine for the rest of the loop.
        let mut link = Box::pin(self.first_link()).await;
        let changes = self.shared.changes.waiter();
        // The next wake-up as of a change count, kept while only deliveries came since it
        // was worked out: they move none of its times (reads and typing aside).
        let mut kept: Option<(u64, Option<Instant>)> = None;
        loop {
            // Read before the values: a change after it wakes the wait below.
            let seen = changes.seen();
            let phase = self.shared.phase();
            if phase == EngineState::Abort {
                break;
            }
            if phase == EngineState::Closing {
                // Boxed: the final sync holds a session of its own, and the waiting loop
                // should not keep room for it.
                let away = matches!(link.offline, Offline::Away(None));
                Box::pin(self.close_out(link.session.take(), away)).await;
                break;
            }
            let now = Instant::now();
            let traffic = self.traffic_start();
            let wake = match kept.take() {
                Some((at, wake)) if at == seen => wake,
                _ => self.next_wake(&link, traffic, phase, now),
            };
            self.flush_tally();

            // Work due already goes before events, without a wait: a steady stream of
            // deliveries must not delay sends.
            let due = wake.filter(|&due| due > now);
            // The first look at the timer uses the clock just read; later ones read it anew.
            let mut fresh = Some(now);
            let event = if due.is_none() && wake.is_some() {
                if changes.seen() != seen {
                    continue;
                }
                None
            } else {
                tokio::select! {
                    biased;
                    // Events first, so that a wake-up by the socket polls nothing else: the
                    // waits below were left when the last look found no event.
                    ev = next_event(link.session.as_mut()) => Some(ev),
                    () = std::future::poll_fn(|cx| changes.poll_after(seen, cx)) => continue,
                    () = std::future::poll_fn(|cx| match due {
                        Some(due) => {
                            let now = fresh.take().unwrap_or_else(Instant::now);
                            self.shared.timer_wheel.poll_due(cx, due, now, &mut link.armed)
                        }
                        None => std::task::Poll::Pending,
                    }) => None,
                }
            };
            match event {
                Some(ev) => {
                    if self.take_events(ev, &mut link) && self.sig.is_none() {
                        kept = Some((seen, wake));
                    }
                }
                // Boxed: the wake-up's futures (sends, heartbeat, flush, reconnect) are most
                // of a user's state machine, and an idle user should not carry them.
                None => Box::pin(self.wake_up(&mut link, traffic, phase)).await,
            }
        }
        self.flush_tally();
        self.idle();
        if link.session.is_some() || !self.pending.is_empty() {
            self.went_offline();
        }
    }

    /// The user's link after its first login (late users' visit first), when the schedule
    /// says, or none when the run stops before it.
    async fn first_link(&mut self) -> Link<D::Session> {
        let mut phase_rx = self.shared.phase_changes();
        let mut traffic_rx = self.shared.traffic_start_changes();
        if self.spec.visits {
            // Boxed, as every rare step: the session it holds would otherwise keep its
            // room in the user's state machine.
            Box::pin(self.visit()).await;
        }
        let (first, t0) = (
            (self.spec.first_login, self.spec.from_traffic),
            self.shared.t0,
        );
        let (session, offline) = match first_login(first, t0, &mut phase_rx, &mut traffic_rx).await
        {
            First::Due => {
                let sync = !self.spec.on_time
                    || self.cfg.sync_first_login
                    || self.traffic_start().is_some();
                match Box::pin(self.login(sync)).await {
                    Some(s) => (Some(s), Offline::No),
                    None => (None, Offline::Gone),
                }
            }
            First::Never => (None, Offline::Away(None)),
            First::Stopped => (None, Offline::Gone),
        };
        self.login_settled();
        Link {
            offline,
            session,
            last_heartbeat: Instant::now(),
            armed: None,
        }
    }

    /// The instant the user's timeline counts from: the start of the run, or the traffic
    /// start (once it is known) for users who come and go in sessions.
    fn origin(&self) -> Option<Instant> {
        if self.spec.from_traffic {
            self.traffic_start()
        } else {
            Some(self.shared.t0)
        }
    }

    /// Establishes a late user's session (and group memberships) so the server queues
    /// what is sent while it is away, and notes what the server held before the run; then
    /// leaves until its login time.
    async fn visit(&mut self) {
        if let Some(s) = self.login(false).await {
            self.resume = Some(Box::new(s.close().await));
            self.went_offline();
        }
        self.login_settled();
    }

    /// The end of the run: the final verification sync, or the note that the user could
    /// not be verified.
    async fn close_out(&mut self, session: Option<D::Session>, away: bool) {
        if !self.unjoined.is_empty() {
            let (ix, slot) = (self.spec.ctx.ix, self.spec.slot);
            self.shared.user_unjoined(ix, slot, &self.unjoined);
        }
        let session = match session {
            Some(s) => Some(s),
            // Away as planned: it comes back for what it was sent, a catch-up like any
            // return.
            None if away => Box::pin(self.login(true)).await,
            // A user without a session (its logins failed, or it gave up reconnecting)
            // logs in once more for the final verification, so what the server kept for
            // it is verified rather than presumed lost.
            None if self.cfg.verify_sync => Box::pin(self.login(false)).await,
            None => None,
        };
        match session {
            Some(s) => self.finish(s).await,
            // Unverifiable: with a verification sync nothing it missed can be checked;
            // without one, only a user that never had a session is.
            None if self.cfg.verify_sync || !self.reached || away => {
                self.shared.user_unreached(self.spec.ctx.ix, self.spec.slot);
            }
            None => {}
        }
        self.shared
            .closed_out
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(self.spec.ctx.ix);
    }

    /// When the user must wake up next (if no event wakes it earlier); marks it idle once
    /// it has nothing scheduled any more.
    fn next_wake(
        &mut self,
        link: &Link<D::Session>,
        traffic: Option<Instant>,
        phase: EngineState,
        now: Instant,
    ) -> Option<Instant> {
        let mut wake: Option<Instant> = None;
        let mut at = |t: Instant| wake = Some(wake.map_or(t, |w| w.min(t)));
        if let (Some(ts), EngineState::Running) = (traffic, phase) {
            for due in self.spec.plan.programs.iter().filter_map(|p| p.due()) {
                at(ts + due);
            }
            if link.session.is_some() && self.outstanding.is_none() {
                if let Some(t) = self.next_request_time(ts, now) {
                    at(t);
                }
            }
        }
        if let (Some(hb), true) = (self.cfg.heartbeat, link.session.is_some()) {
            at(link.last_heartbeat + hb);
        }
        if link.session.is_some() {
            let running = traffic.filter(|_| phase == EngineState::Running);
            if let Some(t) = self.next_signal(running) {
                at(t);
            }
        }
        let origin = self.origin();
        match (link.offline, origin) {
            (Offline::No, Some(o)) => {
                if let Some(&(out, _)) = self.spec.away.get(self.next_away) {
                    at(o + out);
                }
            }
            (Offline::Away(Some(back)), Some(o)) => at(o + back),
            (Offline::Lost { at: t, .. }, _) => at(t),
            _ => {}
        }
        if let Some(t) = self.update_busy(traffic, now, link.offline) {
            at(t);
        }
        wake
    }

    /// Handles `ev` and every event the session already read after it, up to [`DRAIN`]; a
    /// closed connection schedules the first reconnect. True when every event was a
    /// delivery.
    fn take_events(&mut self, mut ev: Event, link: &mut Link<D::Session>) -> bool {
        self.heard();
        let mut deliveries = true;
        for taken in 1..=DRAIN {
            if let Event::Closed(f) = ev {
                self.signals_lost();
                self.error(f.kind, f.detail);
                self.count(Counter::Disconnects, 1);
                let mut resends = false;
                if let Some(s) = link.session.take() {
                    resends = s.resends_unacked();
                    self.resume = Some(Box::new(s.into_resume()));
                }
                if resends {
                    // The next connection sends the unacknowledged again and reports
                    // their outcome; until then they stay pending.
                    self.offline_gauges();
                } else {
                    self.went_offline();
                }
                link.offline = Offline::Lost {
                    at: Instant::now() + backoff(0),
                    attempt: 0,
                };
                return false;
            }
            deliveries &= matches!(ev, Event::Delivered { .. });
            let arrived = link.session.as_ref().and_then(|s| self.arrived(s));
            self.handle(ev, arrived);
            if taken == DRAIN {
                return deliveries;
            }
            match link
                .session
                .as_mut()
                .filter(|s| s.holds_unread())
                .and_then(|s| s.next_event().now_or_never())
            {
                Some(next) => ev = next,
                None => return deliveries,
            }
        }
        deliveries
    }

    /// Does what is due: churn and reconnects first (they decide whether there is a
    /// session), then sends, heartbeat and flush.
    async fn wake_up(
        &mut self,
        link: &mut Link<D::Session>,
        traffic: Option<Instant>,
        phase: EngineState,
    ) {
        let now = Instant::now();
        let origin = self.origin();
        match (link.offline, origin) {
            (Offline::Away(Some(back)), Some(o)) if now >= o + back => {
                link.session = Box::pin(self.login(true)).await;
                link.offline = if link.session.is_some() {
                    Offline::No
                } else {
                    Offline::Gone
                };
            }
            (Offline::Lost { at, attempt }, _) if now >= at => {
                link.session = Box::pin(self.login(true)).await;
                link.offline = match link.session {
                    Some(_) => Offline::No,
                    None if attempt + 1 < RECONNECTS => Offline::Lost {
                        at: now + backoff(attempt + 1),
                        attempt: attempt + 1,
                    },
                    None => {
                        // Sends kept for a resend that never came are failed now.
                        self.went_offline();
                        Offline::Gone
                    }
                };
            }
            _ => {}
        }
        if let Some(s) = link.session.as_mut() {
            let running = traffic.filter(|_| phase == EngineState::Running);
            if let Some(gone) = self.signals_due(s, running, now).await {
                self.take_events(Event::Closed(gone), link);
            }
        }
        if let (Some(ts), EngineState::Running) = (traffic, phase) {
            if let Some(gone) = self.send_due(link.session.as_mut(), ts, now).await {
                self.take_events(Event::Closed(gone), link);
            }
        }
        // Leaving after the sends due before it: a user's last messages go out first.
        if let (Offline::No, Some(o)) = (link.offline, origin) {
            if let Some(&(out, back)) = self.spec.away.get(self.next_away) {
                if now >= o + out {
                    if let Some(s) = link.session.take() {
                        Box::pin(self.leave(s)).await;
                    }
                    self.next_away += 1;
                    link.offline = Offline::Away(back);
                }
            }
        }
        if let (Some(hb), Some(s)) = (self.cfg.heartbeat, link.session.as_mut()) {
            if now >= link.last_heartbeat + hb {
                link.last_heartbeat = now;
                if s.heartbeat().await.is_ok() {
                    self.count(Counter::Heartbeats, 1);
                }
            }
        }
        if let Some(s) = link.session.as_mut() {
            if let Err(f) = s.flush().await {
                // A connection whose write failed is unusable: this is its end, counted
                // once here rather than again when the read side finds it closed.
                self.take_events(Event::Closed(f), link);
            }
        }
        self.sends_written();
    }

    /// Logs out as planned: what was just written goes out, the sends in flight are
    /// accepted (bounded), the contacts learn the user goes offline, and the connection
    /// closes.
    async fn leave(&mut self, mut s: D::Session) {
        if let Err(f) = s.flush().await {
            self.error(f.kind, f.detail);
        }
        Box::pin(self.settle(&mut s)).await;
        Box::pin(self.signals_leaving(&mut s)).await;
        if let Err(f) = s.flush().await {
            self.error(f.kind, f.detail);
        }
        self.resume = Some(Box::new(Box::pin(s.close()).await));
        self.went_offline();
    }

    fn traffic_start(&self) -> Option<Instant> {
        self.shared.traffic_start()
    }

    /// Marks the user idle once it has nothing scheduled any more; otherwise returns when
    /// to check again (if no other event will wake the user by then).
    fn update_busy(
        &mut self,
        traffic: Option<Instant>,
        now: Instant,
        offline: Offline,
    ) -> Option<Instant> {
        if !self.busy {
            return None;
        }
        let ts = traffic?;
        let churn_pending = matches!(offline, Offline::Away(Some(_)) | Offline::Lost { .. })
            || (self.next_away < self.spec.away.len() && matches!(offline, Offline::No));
        let running = self.shared.phase() == EngineState::Running;
        let sending = running && self.spec.plan.programs.iter().any(|p| p.due().is_some());
        let hold = ts + self.spec.plan.hold_until();
        if churn_pending || sending || self.outstanding.is_some() {
            return None;
        }
        if running && now < hold {
            return Some(hold);
        }
        self.idle();
        None
    }

    /// Counts the user's first login attempt as finished, once.
    fn login_settled(&mut self) {
        if std::mem::take(&mut self.login_pending) {
            self.shared.login_settled();
        }
    }

    /// Counts the user as having nothing scheduled any more, once.
    fn idle(&mut self) {
        if std::mem::take(&mut self.busy) {
            self.shared.user_idle();
        }
    }

    /// Counts the user into the online gauges.
    fn online_gauges(&mut self) {
        if !std::mem::replace(&mut self.online, true) {
            self.shared.live.online.fetch_add(1, Ordering::Relaxed);
            for g in &self.spec.plan.groups {
                self.shared.group_online[g.index].fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Counts the user out of the online gauges.
    fn offline_gauges(&mut self) {
        if std::mem::take(&mut self.online) {
            self.shared.live.online.fetch_sub(1, Ordering::Relaxed);
            for g in &self.spec.plan.groups {
                self.shared.group_online[g.index].fetch_sub(1, Ordering::Relaxed);
            }
        }
    }

    /// Logs in (with retries left to the caller), joins groups, and optionally fetches what
    /// was missed.
    async fn login(&mut self, sync: bool) -> Option<D::Session> {
        let began = Instant::now();
        let resume = self.resume.take().map_or_else(Resume::<D>::default, |r| *r);
        self.count(Counter::ConnectAttempts, 1);
        let mut session = match self.driver.connect(&self.spec.ctx, resume).await {
            Ok(c) => {
                let t = self.tally(Instant::now());
                t.latency(Hist::Connect, c.handshake.as_micros() as u64);
                if !c.login.is_zero() {
                    t.latency(Hist::Login, c.login.as_micros() as u64);
                }
                t.count(Counter::Connected, 1);
                t.count(Counter::LoginOk, 1);
                match c.account {
                    Some(Account::Created) => t.count(Counter::AccountsCreated, 1),
                    Some(Account::Existing) => t.count(Counter::AccountsExisting, 1),
                    None => {}
                }
                if c.no_resume_point {
                    t.count(Counter::ResumesWithoutOffset, 1);
                }
                self.reached = true;
                c.session
            }
            Err((f, resume)) => {
                self.resume = Some(Box::new(resume));
                self.error(f.kind, f.detail);
                return None;
            }
        };
        for g in self.spec.plan.groups.clone() {
            match session.join(&g.name).await {
                Ok(()) => self.unjoined.retain(|&i| i != g.index),
                Err(f) => {
                    if !self.unjoined.contains(&g.index) {
                        self.unjoined.push(g.index);
                    }
                    // A refusal or a join never answered is the setup failure the
                    // `max_join_failures` check names, whichever driver saw it; a dropped
                    // connection stays what it is.
                    let kind = match f.kind {
                        ErrorKind::Protocol | ErrorKind::Timeout => ErrorKind::JoinFailed,
                        other => other,
                    };
                    self.error(kind, format!("joining {}: {}", g.name, f.detail));
                }
            }
        }
        self.online_gauges();
        // Before traffic nothing of this run can have been sent yet: whatever the server
        // holds now is from before the run. (Traffic waits for this login to settle.)
        if self.cfg.skip_history && self.traffic_start().is_none() {
            if let Err(f) = session.skip_history().await {
                self.error(
                    f.kind,
                    format!("noting what the server held before the run: {}", f.detail),
                );
            }
        }
        self.signals_online(&mut session).await;
        if sync && self.fetch(&mut session, Via::Sync).await > 0 {
            // A return's catch-up: from its login to the last missed message fetched.
            let now = Instant::now();
            let us = now.saturating_duration_since(began).as_micros() as u64;
            self.tally(now).returned(us);
        }
        Some(session)
    }

    /// Fetches what the user missed and accounts for it as arriving `via`; returns how
    /// many messages it fetched.
    async fn fetch(&mut self, session: &mut D::Session, via: Via) -> usize {
        let mut inbox = Vec::new();
        match session.fetch_missed(&mut inbox).await {
            Ok(()) => self.count(Counter::Syncs, 1),
            Err(f) => self.error(f.kind, format!("fetching missed messages: {}", f.detail)),
        }
        let fetched = inbox.len();
        for body in inbox {
            self.deliver(&body, via, None);
        }
        fetched
    }

    /// The user is offline: out of the gauges, and its sends still waiting for acceptance
    /// count as failed.
    fn went_offline(&mut self) {
        self.offline_gauges();
        self.receipts_unconfirmed();
        if self.pending.is_empty() {
            return;
        }
        // Taken whole: the map's room goes with it.
        let pending = std::mem::take(&mut self.pending);
        let lost = pending.len() as u64;
        let t = self.tally(Instant::now());
        for (_, p) in pending {
            t.refused(p.stream, p.seq);
        }
        t.count(Counter::Unconfirmed, lost);
        t.live.refused += lost;
    }

    /// Logs out gracefully: waits (bounded) for the acceptance of sends and read receipts in
    /// flight, so a user going offline does not turn its own last ones into failures.
    async fn settle(&mut self, session: &mut D::Session) {
        let deadline = Instant::now() + SETTLE;
        while !self.pending.is_empty() || self.receipts_pending() {
            match tokio::time::timeout_at(deadline, session.next_event()).await {
                Ok(Event::Closed(f)) => {
                    self.error(f.kind, f.detail);
                    break;
                }
                Ok(ev) => {
                    let arrived = self.arrived(session);
                    self.handle(ev, arrived);
                }
                Err(_) => break,
            }
        }
    }

    /// When the bytes of `session`'s last event reached the kernel, if its socket stamps
    /// arrivals; the run learns that receive times are the kernel's.
    fn arrived(&self, session: &D::Session) -> Option<Instant> {
        let at = session.arrived()?;
        self.shared.note_stamped_arrival();
        Some(Instant::from_std(at))
    }

    /// Final verification sync and disconnect.
    async fn finish(&mut self, mut session: D::Session) {
        self.signals_offline(Instant::now());
        if self.cfg.verify_sync {
            self.fetch(&mut session, Via::Repair).await;
            // Pushes that arrived during the sync and that it did not return are still
            // deliveries (the driver hands out each message once, either way).
            for _ in 0..DRAIN {
                match session.next_event().now_or_never() {
                    Some(Event::Closed(_)) | None => break,
                    Some(ev) => {
                        let arrived = self.arrived(&session);
                        self.handle(ev, arrived);
                    }
                }
            }
        }
        self.resume = Some(Box::new(session.close().await));
        self.went_offline();
        self.driver.forget(&self.spec.ctx).await;
    }
}

/// Waits until a user's first login, at `offset` from `t0` or from the traffic start, is
/// due, or the run stops first.
async fn first_login(
    (offset, from_traffic): (Option<Duration>, bool),
    t0: Instant,
    phase: &mut tokio::sync::watch::Receiver<EngineState>,
    traffic: &mut tokio::sync::watch::Receiver<Option<Instant>>,
) -> First {
    let Some(offset) = offset else {
        return First::Never;
    };
    let stopped = async {
        let _ = phase.wait_for(|p| *p >= EngineState::Draining).await;
    };
    let due = async {
        let origin = if from_traffic {
            let start = traffic
                .wait_for(Option::is_some)
                .await
                .ok()
                .and_then(|t| *t);
            match start {
                Some(t) => t,
                None => return std::future::pending().await,
            }
        } else {
            t0
        };
        sleep_until(origin + offset).await;
    };
    tokio::select! {
        () = due => First::Due,
        () = stopped => First::Stopped,
    }
}

/// Delay before reconnect attempt `n`: 100 ms doubling, at most 3.2 s.
fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(100 << attempt.min(5))
}
