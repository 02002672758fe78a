//! One virtual user: logs in on schedule, sends when sends are due (open loop, latency from
//! the due time), receives and verifies deliveries, heartbeats, churns, reconnects after a
//! lost connection, fetches what it missed, and runs the final verification sync.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use tokio::time::{sleep_until, Instant};

use super::schedule::{Sends, VuPlan};
use super::shared::Recorder;
use super::shared::{Phase, Shared};
use crate::driver::{Dest, Driver, Event, Resume, Session, UserCtx};
use crate::envelope::{self, Decoded, Envelope};
use crate::ledger::{Arrival, Via};
use crate::metrics::{Counter, ErrorKind, Hist};
use crate::scenario::{StreamId, UserIx};

/// Reconnect attempts after a lost connection before the user stays offline.
const RECONNECTS: u32 = 5;
/// How long a user going offline waits for the acceptance of its sends in flight.
const SETTLE: Duration = Duration::from_secs(2);
/// Events handled per wake-up at most: those already received are taken without going
/// back to the scheduler.
const DRAIN: usize = 256;
/// Sends written per wake-up at most. A user far behind its schedule reads its socket
/// between bursts, so it never blocks writing while the server blocks writing to it.
const SEND_BURST: usize = 256;
/// Latencies or receipts a tally holds before it is applied even mid-burst.
const TALLY_FLUSH: usize = 1024;

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
    pub presence: bool,
    /// Every user fetches missed messages at its first login: other shards may have sent
    /// before it was online.
    pub sync_first_login: bool,
    /// The users of this process.
    pub range: Range<UserIx>,
}

/// One user's identity and timeline.
#[derive(Debug)]
pub struct VuSpec {
    /// Who.
    pub ctx: UserCtx,
    /// Traffic.
    pub plan: VuPlan,
    /// First login, from the start of the run.
    pub first_login: Duration,
    /// False for late users (they sync after their first login).
    pub on_time: bool,
    /// Disconnect and reconnect times for churning users, from the start of the run.
    pub churn: Option<(Duration, Duration)>,
    /// Recorder slot.
    pub slot: usize,
}

/// A send waiting for the server's acceptance.
#[derive(Debug, Clone, Copy)]
struct Pending {
    stream: StreamId,
    seq: u64,
    due: Instant,
    recipients: u32,
}

/// A reconnect the user has scheduled.
#[derive(Debug, Clone, Copy)]
enum Offline {
    /// Connected (or never offline).
    No,
    /// Churned out; back at this offset from the start of the run.
    Churn(Duration),
    /// Lost the connection; next attempt at this instant.
    Lost { at: Instant, attempt: u32 },
    /// Gave up.
    Gone,
}

/// A delivery waiting in a [`Tally`].
#[derive(Debug, Clone, Copy)]
struct Receipt {
    stream: StreamId,
    seq: u64,
    latency_us: u64,
    /// When it arrived, wall-clock µs (for fan-out completion).
    at_us: u64,
    via: Via,
    corrupt: bool,
}

/// The recorder and live-counter updates of one wake-up, applied under one lock by
/// [`Vu::flush_tally`]. It holds the same events in the same order, so the recorder ends up
/// exactly as if each had been applied at once; the user's slot (and so the ledger of its
/// tracks) is the same.
#[derive(Debug, Default)]
struct Tally {
    /// Something is waiting.
    dirty: bool,
    /// The second of the run the counts and latencies belong to.
    sec: u32,
    /// Indexed by `Counter as usize`.
    counts: [u64; Counter::ALL.len()],
    lat: Vec<(Hist, u64)>,
    /// Highest seq sent per stream; consecutive sends of one stream share an entry (the
    /// ledger keeps only the highest).
    sent: Vec<(StreamId, u64)>,
    received: Vec<Receipt>,
    live_sent: u64,
    live_expected: u64,
    live_received: u64,
    live_accepted: u64,
    live_replies: u64,
}

impl Tally {
    /// Applies and empties everything but the live counters; `me` is the recipient. First
    /// copies of deliveries are counted into `live_received` here, where the ledger tells
    /// them from repeats (the drain waits for first copies only).
    fn apply(&mut self, r: &mut Recorder, me: UserIx, shared: &Shared) {
        let sec = self.sec;
        for (c, n) in Counter::ALL.iter().zip(&mut self.counts) {
            if *n > 0 {
                r.metrics.add(sec, *c, std::mem::take(n));
            }
        }
        for (h, us) in self.lat.drain(..) {
            r.metrics.record(sec, h, us);
        }
        for (stream, seq) in self.sent.drain(..) {
            r.ledger.sent(stream, seq);
        }
        for d in self.received.drain(..) {
            let arrival = r
                .ledger
                .received(me, d.stream, d.seq, d.latency_us, d.via, d.corrupt);
            if arrival == Arrival::Again {
                continue;
            }
            self.live_received += 1;
            let group = shared.group_of_stream.contains_key(&d.stream);
            if group && d.via == Via::Push && !d.corrupt {
                if let Some(fan) = shared.fanout_received(d.stream, d.seq, d.at_us) {
                    r.metrics.record(sec, Hist::Fanout, fan);
                }
            }
        }
    }
}

/// Runs one virtual user to the end of the run.
pub async fn run<D: Driver>(driver: Arc<D>, shared: Arc<Shared>, cfg: Arc<VuConfig>, spec: VuSpec) {
    let mut vu = Vu::<D> {
        resume: Some(Resume::<D>::default()),
        pending: HashMap::new(),
        outstanding: None,
        next_tag: 0,
        body: String::new(),
        inbox: Vec::new(),
        tally: Tally::default(),
        busy: true,
        churned: false,
        own_streams: spec
            .plan
            .programs
            .iter()
            .filter_map(|p| match p.sends {
                Sends::Group { stream, .. } => Some(stream),
                Sends::Direct { .. } | Sends::Echo { .. } => None,
            })
            .collect(),
        driver,
        shared,
        cfg,
        spec,
    };
    vu.live().await;
}

struct Vu<D: Driver> {
    driver: Arc<D>,
    shared: Arc<Shared>,
    cfg: Arc<VuConfig>,
    spec: VuSpec,
    resume: Option<Resume<D>>,
    pending: HashMap<u64, Pending>,
    outstanding: Option<(u64, Instant)>,
    next_tag: u64,
    body: String,
    inbox: Vec<String>,
    tally: Tally,
    busy: bool,
    churned: bool,
    /// Group streams this user sends: an echo of them is not a delivery.
    own_streams: Vec<StreamId>,
}

/// The next event of a session, or never when there is none.
async fn next_event<S: Session>(session: Option<&mut S>) -> Event {
    match session {
        Some(s) => s.next_event().await,
        None => std::future::pending().await,
    }
}

impl<D: Driver> Vu<D> {
    async fn live(&mut self) {
        let mut phase_rx = self.shared.phase.subscribe();
        let mut traffic_rx = self.shared.traffic_start.subscribe();
        if self.cfg.presence && !self.spec.on_time {
            // Establish the user's session (and group memberships) so the server queues
            // what is sent while it is away, then leave until its login time.
            if let Some(s) = Box::pin(self.login(false)).await {
                self.resume = Some(Box::pin(s.close()).await);
                self.went_offline();
            }
            self.shared.login_settled();
        }
        let first = self.shared.t0 + self.spec.first_login;
        let stopped = async {
            let _ = phase_rx.wait_for(|p| *p >= Phase::Draining).await;
        };
        let due = tokio::select! {
            _ = sleep_until(first) => true,
            _ = stopped => false,
        };
        let mut session = if due {
            let sync =
                !self.spec.on_time || self.cfg.sync_first_login || self.traffic_start().is_some();
            Box::pin(self.login(sync)).await
        } else {
            None
        };
        if self.spec.on_time {
            self.shared.login_settled();
        }
        let mut offline = if session.is_some() {
            Offline::No
        } else {
            Offline::Gone
        };
        let mut last_heartbeat = Instant::now();
        loop {
            let phase = *phase_rx.borrow_and_update();
            if phase == Phase::Abort {
                break;
            }
            if phase == Phase::Closing {
                if let Some(s) = session.take() {
                    Box::pin(self.finish(s)).await;
                }
                break;
            }
            let now = Instant::now();
            let traffic = *traffic_rx.borrow_and_update();
            let mut wake: Option<Instant> = None;
            let mut at = |t: Instant| wake = Some(wake.map_or(t, |w| w.min(t)));
            if let (Some(ts), Phase::Running) = (traffic, phase) {
                for due in self.spec.plan.programs.iter().filter_map(|p| p.due()) {
                    at(ts + due);
                }
                if session.is_some() && self.outstanding.is_none() {
                    if let Some(t) = self.next_request_time(ts, now) {
                        at(t);
                    }
                }
            }
            if let (Some(hb), true) = (self.cfg.heartbeat, session.is_some()) {
                at(last_heartbeat + hb);
            }
            match offline {
                Offline::No => {
                    if let (Some((out, _)), false) = (self.spec.churn, self.churned) {
                        at(self.shared.t0 + out);
                    }
                }
                Offline::Churn(back) => at(self.shared.t0 + back),
                Offline::Lost { at: t, .. } => at(t),
                Offline::Gone => {}
            }
            if let Some(t) = self.update_busy(traffic, now, offline) {
                at(t);
            }
            self.flush_tally();

            let event = tokio::select! {
                biased;
                _ = phase_rx.changed() => continue,
                _ = traffic_rx.changed(), if traffic.is_none() => continue,
                // Due work before events: a steady stream of deliveries must not delay sends.
                _ = sleep_until(wake.unwrap_or(now + Duration::from_secs(3600))) => None,
                ev = next_event(session.as_mut()) => Some(ev),
            };
            match event {
                Some(mut ev) => {
                    // Take every event already received, up to DRAIN, in this wake-up.
                    for taken in 1..=DRAIN {
                        if let Event::Closed(f) = ev {
                            self.error(f.kind, &f.detail);
                            self.count(Counter::Disconnects, 1);
                            if let Some(s) = session.take() {
                                self.resume = Some(s.into_resume());
                            }
                            self.went_offline();
                            offline = Offline::Lost {
                                at: Instant::now() + backoff(0),
                                attempt: 0,
                            };
                            break;
                        }
                        self.handle(ev);
                        if taken == DRAIN {
                            break;
                        }
                        match session.as_mut().and_then(|s| s.next_event().now_or_never()) {
                            Some(next) => ev = next,
                            None => break,
                        }
                    }
                }
                None => {
                    let now = Instant::now();
                    // Churn and reconnects first: they decide whether there is a session.
                    match offline {
                        Offline::No => {
                            if let (Some((out, back)), false) = (self.spec.churn, self.churned) {
                                if now >= self.shared.t0 + out {
                                    if let Some(mut s) = session.take() {
                                        Box::pin(self.settle(&mut s)).await;
                                        self.resume = Some(Box::pin(s.close()).await);
                                        self.went_offline();
                                    }
                                    self.churned = true;
                                    offline = Offline::Churn(back);
                                }
                            }
                        }
                        Offline::Churn(back) if now >= self.shared.t0 + back => {
                            session = Box::pin(self.login(true)).await;
                            offline = if session.is_some() {
                                Offline::No
                            } else {
                                Offline::Gone
                            };
                        }
                        Offline::Lost { at, attempt } if now >= at => {
                            session = Box::pin(self.login(true)).await;
                            offline = match session {
                                Some(_) => Offline::No,
                                None if attempt + 1 < RECONNECTS => Offline::Lost {
                                    at: now + backoff(attempt + 1),
                                    attempt: attempt + 1,
                                },
                                None => Offline::Gone,
                            };
                        }
                        _ => {}
                    }
                    if let Some(ts) = traffic {
                        if phase == Phase::Running {
                            self.send_due(session.as_mut(), ts, now).await;
                        }
                    }
                    if let (Some(hb), Some(s)) = (self.cfg.heartbeat, session.as_mut()) {
                        if now >= last_heartbeat + hb {
                            last_heartbeat = now;
                            if s.heartbeat().await.is_ok() {
                                self.count(Counter::Heartbeats, 1);
                            }
                        }
                    }
                    if let Some(s) = session.as_mut() {
                        if let Err(f) = s.flush().await {
                            self.error(f.kind, &f.detail);
                        }
                    }
                }
            }
        }
        self.flush_tally();
        if self.busy {
            self.busy = false;
            self.shared.user_idle();
        }
        if session.is_some() {
            self.went_offline();
        }
    }

    fn traffic_start(&self) -> Option<Instant> {
        *self.shared.traffic_start.borrow()
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
        let churn_pending = matches!(offline, Offline::Churn(_) | Offline::Lost { .. })
            || (self.spec.churn.is_some() && !self.churned && matches!(offline, Offline::No));
        let running = self.shared.phase() == Phase::Running;
        let sending = running && self.spec.plan.programs.iter().any(|p| p.due().is_some());
        let hold = ts + self.spec.plan.hold_until();
        if churn_pending || sending || self.outstanding.is_some() {
            return None;
        }
        if running && now < hold {
            return Some(hold);
        }
        self.busy = false;
        self.shared.user_idle();
        None
    }

    /// When this user's next closed-loop request should go out, if it works in a step.
    fn next_request_time(&self, ts: Instant, now: Instant) -> Option<Instant> {
        let offset = now.saturating_duration_since(ts);
        let mut best: Option<Instant> = None;
        for role in &self.spec.plan.requests {
            if role.active_at(offset) {
                return Some(now);
            }
            let step = role.step_duration;
            let mut t = role.start;
            while t < role.end() {
                if t + step > offset && role.active_at(t) {
                    let at = ts + t.max(offset);
                    best = Some(best.map_or(at, |b: Instant| b.min(at)));
                    break;
                }
                t += step;
            }
        }
        best
    }

    /// Logs in (with retries left to the caller), joins groups, and optionally fetches what
    /// was missed.
    async fn login(&mut self, sync: bool) -> Option<D::Session> {
        let resume = self.resume.take().unwrap_or_default();
        self.count(Counter::ConnectAttempts, 1);
        let mut session = match self.driver.connect(&self.spec.ctx, resume).await {
            Ok(c) => {
                let sec = self.shared.sec(Instant::now());
                let mut r = self.shared.recorder(self.spec.slot);
                r.metrics
                    .record(sec, Hist::Connect, c.handshake.as_micros() as u64);
                if !c.login.is_zero() {
                    r.metrics
                        .record(sec, Hist::Login, c.login.as_micros() as u64);
                }
                r.metrics.add(sec, Counter::Connected, 1);
                r.metrics.add(sec, Counter::LoginOk, 1);
                c.session
            }
            Err((f, resume)) => {
                self.resume = Some(resume);
                self.error(f.kind, &f.detail);
                return None;
            }
        };
        for g in self.spec.plan.groups.clone() {
            if let Err(f) = session.join(&g.name).await {
                self.error(f.kind, &format!("joining {}: {}", g.name, f.detail));
            }
        }
        self.shared.live.online.fetch_add(1, Ordering::Relaxed);
        for g in &self.spec.plan.groups {
            self.shared.group_online[g.index].fetch_add(1, Ordering::Relaxed);
        }
        if sync {
            self.fetch(&mut session, Via::Sync).await;
        }
        Some(session)
    }

    async fn fetch(&mut self, session: &mut D::Session, via: Via) {
        let mut inbox = std::mem::take(&mut self.inbox);
        match session.fetch_missed(&mut inbox).await {
            Ok(()) => self.count(Counter::Syncs, 1),
            Err(f) => self.error(f.kind, &format!("fetching missed messages: {}", f.detail)),
        }
        for body in inbox.drain(..) {
            self.deliver(&body, via);
        }
        self.inbox = inbox;
    }

    fn went_offline(&mut self) {
        self.shared.live.online.fetch_sub(1, Ordering::Relaxed);
        for g in &self.spec.plan.groups {
            self.shared.group_online[g.index].fetch_sub(1, Ordering::Relaxed);
        }
        let now = Instant::now();
        let sec = self.shared.sec(now);
        let lost: Vec<Pending> = self.pending.drain().map(|(_, p)| p).collect();
        if lost.is_empty() {
            return;
        }
        let mut r = self.shared.recorder(self.spec.slot);
        for p in &lost {
            r.ledger.refused(p.stream, p.seq);
        }
        r.metrics.add(sec, Counter::SendErrors, lost.len() as u64);
        self.shared
            .live
            .refused
            .fetch_add(lost.len() as u64, Ordering::Relaxed);
    }

    /// Sends everything that is due by `now` (open loop: late sends go out at once and their
    /// latency still counts from the due time).
    async fn send_due(&mut self, mut session: Option<&mut D::Session>, ts: Instant, now: Instant) {
        let sec = self.shared.sec(now);
        let mut burst = 0;
        for i in 0..self.spec.plan.programs.len() {
            while let Some(due) = self.spec.plan.programs[i].due() {
                let due = ts + due;
                if due > now || burst == SEND_BURST {
                    break;
                }
                burst += 1;
                let next = self.spec.plan.programs[i].advance();
                let Some(s) = session.as_deref_mut() else {
                    // Offline when due: not sent, so expected nowhere.
                    let mut r = self.shared.recorder(self.spec.slot);
                    r.ledger.refused(next.stream, next.seq);
                    r.metrics.add(sec, Counter::Dropped, 1);
                    continue;
                };
                let due_us = self.shared.wall_of(due);
                self.body.clear();
                envelope::encode(
                    &Envelope {
                        run: self.shared.run_id,
                        stream: next.stream,
                        seq: next.seq,
                        due_us,
                    },
                    self.spec.plan.programs[i].size,
                    &mut self.body,
                );
                let recipients = match &self.spec.plan.programs[i].sends {
                    Sends::Direct { receivers, .. } => {
                        let r_ix = receivers[next.receiver.unwrap_or(0)].0;
                        u32::from(self.cfg.range.contains(&r_ix) && r_ix != self.spec.ctx.ix)
                    }
                    Sends::Group { group, .. } => {
                        let online = self.shared.group_online[group.index]
                            .load(Ordering::Relaxed)
                            .saturating_sub(1);
                        self.shared
                            .fanout_start(next.stream, next.seq, online, due_us);
                        self.shared.local_recipients(group, true)
                    }
                    Sends::Echo { .. } => 1,
                };
                let tag = self.next_tag;
                self.next_tag += 1;
                let dest = match &self.spec.plan.programs[i].sends {
                    Sends::Direct { receivers, .. } => {
                        Dest::User(&receivers[next.receiver.unwrap_or(0)].1)
                    }
                    Sends::Group { group, .. } => Dest::Group(&group.name),
                    Sends::Echo { .. } => Dest::User(&self.spec.ctx.id),
                };
                let sent = s.send(tag, dest, &self.body).await;
                let lag = now.saturating_duration_since(due).as_micros() as u64;
                let bytes = self.body.len() as u64;
                self.tally_at(sec);
                let t = &mut self.tally;
                t.lat.push((Hist::SendLag, lag));
                match t.sent.last_mut() {
                    Some(last) if last.0 == next.stream => last.1 = last.1.max(next.seq),
                    _ => t.sent.push((next.stream, next.seq)),
                }
                match sent {
                    Ok(()) => {
                        t.counts[Counter::Sent as usize] += 1;
                        t.counts[Counter::BytesOut as usize] += bytes;
                        t.live_sent += 1;
                        if self.cfg.acceptance {
                            self.pending.insert(
                                tag,
                                Pending {
                                    stream: next.stream,
                                    seq: next.seq,
                                    due,
                                    recipients,
                                },
                            );
                        } else {
                            t.live_expected += u64::from(recipients);
                        }
                    }
                    Err(f) => {
                        let mut r = self.shared.recorder(self.spec.slot);
                        r.ledger.refused(next.stream, next.seq);
                        r.metrics.add(sec, Counter::SendErrors, 1);
                        r.metrics.error(sec, f.kind, || f.detail.clone());
                        drop(r);
                        self.shared.live.errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
                if self.tally.lat.len() >= TALLY_FLUSH {
                    self.flush_tally();
                }
            }
        }
        // Before the caller waits on the socket: what was sent is on record.
        self.flush_tally();
        if let (Some(s), Some(ts)) = (session, self.traffic_start()) {
            if self.outstanding.is_none() {
                let offset = now.saturating_duration_since(ts);
                if let Some(kind) = self
                    .spec
                    .plan
                    .requests
                    .iter()
                    .find(|r| r.active_at(offset))
                    .map(|r| r.kind)
                {
                    let tag = self.next_tag;
                    self.next_tag += 1;
                    match s.request(tag, kind).await {
                        Ok(()) => {
                            self.outstanding = Some((tag, Instant::now()));
                            self.count(Counter::Requests, 1);
                        }
                        Err(f) => self.error(ErrorKind::RequestFailed, &f.detail),
                    }
                }
            }
        }
    }

    fn handle(&mut self, ev: Event) {
        let now = Instant::now();
        let sec = self.shared.sec(now);
        match ev {
            Event::Accepted { tag } => {
                if let Some(p) = self.pending.remove(&tag) {
                    let us = now.saturating_duration_since(p.due).as_micros() as u64;
                    self.tally_at(sec);
                    let t = &mut self.tally;
                    t.lat.push((Hist::SendAck, us));
                    t.counts[Counter::Accepted as usize] += 1;
                    t.live_accepted += 1;
                    t.live_expected += u64::from(p.recipients);
                }
            }
            Event::Refused { tag, failure } => {
                if let Some(p) = self.pending.remove(&tag) {
                    let mut r = self.shared.recorder(self.spec.slot);
                    r.ledger.refused(p.stream, p.seq);
                    r.metrics.add(sec, Counter::Refused, 1);
                    r.metrics
                        .error(sec, ErrorKind::SendFailed, || failure.detail.clone());
                    drop(r);
                    self.shared.live.refused.fetch_add(1, Ordering::Relaxed);
                    self.shared.live.errors.fetch_add(1, Ordering::Relaxed);
                } else if self.outstanding.is_some_and(|(t, _)| t == tag) {
                    self.outstanding = None;
                    self.error(ErrorKind::RequestFailed, &failure.detail);
                }
            }
            Event::Delivered { body } => self.deliver(&body, Via::Push),
            Event::Reply { tag } => {
                if let Some((t, at)) = self.outstanding {
                    if t == tag {
                        self.outstanding = None;
                        let us = now.saturating_duration_since(at).as_micros() as u64;
                        self.tally_at(sec);
                        let t = &mut self.tally;
                        t.lat.push((Hist::Request, us));
                        t.counts[Counter::Replies as usize] += 1;
                        t.live_replies += 1;
                    }
                }
            }
            Event::ProtocolError(f) => self.error(f.kind, &f.detail),
            Event::Closed(_) => {}
        }
    }

    /// Verifies one delivered body and accounts for it.
    fn deliver(&mut self, body: &str, via: Via) {
        let now_us = self.shared.now_us();
        let sec = self.shared.sec(Instant::now());
        let run = self.shared.run_id;
        let receipt = |env: Envelope, corrupt| Receipt {
            stream: env.stream,
            seq: env.seq,
            latency_us: now_us.saturating_sub(env.due_us),
            at_us: now_us,
            via,
            corrupt,
        };
        let decoded = envelope::decode(body);
        self.tally_at(sec);
        let t = &mut self.tally;
        t.counts[Counter::Received as usize] += 1;
        t.counts[Counter::BytesIn as usize] += body.len() as u64;
        match decoded {
            Decoded::Intact(env) | Decoded::Corrupt(env)
                if env.run == run && self.own_streams.contains(&env.stream) =>
            {
                // The user's own message echoed back (a group topic it also subscribes to).
            }
            Decoded::Intact(env) if env.run == run => {
                let receipt = receipt(env, false);
                // End-to-end latency is the live path; a sync's lateness is the user's absence.
                if via == Via::Push {
                    t.lat.push((Hist::EndToEnd, receipt.latency_us));
                }
                t.received.push(receipt);
            }
            Decoded::Corrupt(env) if env.run == run => {
                t.received.push(receipt(env, true));
            }
            Decoded::Damaged => self.shared.recorder(self.spec.slot).ledger.damaged(),
            Decoded::Intact(_) | Decoded::Corrupt(_) | Decoded::Foreign => {
                self.shared
                    .recorder(self.spec.slot)
                    .metrics
                    .error(sec, ErrorKind::Other, || {
                        format!("body not from this run: {}", clip(body))
                    });
            }
        }
        if self.tally.received.len() >= TALLY_FLUSH || self.tally.lat.len() >= TALLY_FLUSH {
            self.flush_tally();
        }
    }

    /// Readies the tally for events of second `sec`, applying what it held first if that
    /// was of another second.
    fn tally_at(&mut self, sec: u32) {
        if self.tally.dirty && self.tally.sec != sec {
            self.flush_tally();
        }
        self.tally.sec = sec;
        self.tally.dirty = true;
    }

    /// Applies the tally to the user's recorder (one lock) and to the live counters.
    fn flush_tally(&mut self) {
        if !self.tally.dirty {
            return;
        }
        let t = &mut self.tally;
        t.dirty = false;
        t.apply(
            &mut self.shared.recorder(self.spec.slot),
            self.spec.ctx.ix,
            &self.shared,
        );
        let live = &self.shared.live;
        for (counter, n) in [
            (&live.sent, &mut t.live_sent),
            (&live.expected, &mut t.live_expected),
            (&live.received, &mut t.live_received),
            (&live.accepted, &mut t.live_accepted),
            (&live.replies, &mut t.live_replies),
        ] {
            if *n > 0 {
                counter.fetch_add(std::mem::take(n), Ordering::Relaxed);
            }
        }
    }

    /// Logs out gracefully: waits (bounded) for the acceptance of sends in flight, so a
    /// user going offline does not turn its own last messages into failures.
    async fn settle(&mut self, session: &mut D::Session) {
        let deadline = tokio::time::Instant::now() + SETTLE;
        while !self.pending.is_empty() {
            match tokio::time::timeout_at(deadline, session.next_event()).await {
                Ok(Event::Closed(f)) => {
                    self.error(f.kind, &f.detail);
                    break;
                }
                Ok(ev) => self.handle(ev),
                Err(_) => break,
            }
        }
    }

    /// Final verification sync and disconnect.
    async fn finish(&mut self, mut session: D::Session) {
        if self.cfg.verify_sync {
            self.fetch(&mut session, Via::Repair).await;
        }
        self.resume = Some(session.close().await);
        self.went_offline();
        self.driver.forget(&self.spec.ctx).await;
    }

    fn count(&self, c: Counter, n: u64) {
        let sec = self.shared.sec(Instant::now());
        self.shared.recorder(self.spec.slot).metrics.add(sec, c, n);
    }

    fn error(&self, kind: ErrorKind, detail: &str) {
        let sec = self.shared.sec(Instant::now());
        self.shared
            .recorder(self.spec.slot)
            .metrics
            .error(sec, kind, || detail.to_owned());
        self.shared.live.errors.fetch_add(1, Ordering::Relaxed);
    }
}

/// Delay before reconnect attempt `n`: 100 ms doubling, at most 3.2 s.
fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(100 << attempt.min(5))
}

/// The first 80 characters of a body, for error examples.
fn clip(body: &str) -> String {
    body.chars().take(80).collect()
}
