//! What each virtual user does and when: the plan's traffic patterns cut into per-user
//! programs whose next send is a pure function of how many were sent.

use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use crate::scenario::plan::{
    BodySize, ChatTraffic, Contacts, GroupSpec, TraceSender, TraceTarget, TraceTraffic, OPEN,
};
use crate::scenario::{
    DirectTraffic, EchoTraffic, GroupTraffic, IdleUsers, Pace, Plan, RequestTraffic, StreamId,
    ThinkTimes, TrafficShape, UserIx,
};

/// A group as the engine needs it.
#[derive(Debug)]
pub struct GroupInfo {
    /// Index into the run's group list (for online counts).
    pub index: usize,
    /// Wire name.
    pub name: String,
}

/// Who a program's sends go to.
#[derive(Debug, Clone)]
pub enum Sends {
    /// Direct messages cycling over `receivers`; the k-th send goes to receiver `k % R`
    /// with sequence `k / R` on stream `first_stream + k % R`.
    Direct {
        /// All receivers of the pattern, as wire ids with their plan indices.
        receivers: Arc<[(UserIx, String)]>,
        /// Stream of the first receiver for this sender.
        first_stream: StreamId,
    },
    /// Frames to an echo endpoint that returns them to this user; the k-th has sequence k.
    Echo {
        /// This connection's stream.
        stream: StreamId,
    },
    /// Direct messages to the sender's contacts, each drawn uniformly: the message to the
    /// `k`-th contact goes on stream `first_stream + k`, with that stream's next sequence.
    Contacts {
        /// Who talks to whom.
        contacts: Arc<Contacts>,
        /// The sender.
        user: UserIx,
        /// Stream of the sender's first contact.
        first_stream: StreamId,
        /// The next sequence number per contact.
        seqs: Box<[u64]>,
        /// Draws the contact of each send.
        pick: fastrand::Rng,
        /// Wire ids: the population's prefix and first id.
        ids: Arc<(String, u64)>,
    },
    /// A trace's messages of one sender: the k-th goes to the target the trace gives, on
    /// that target's stream `first_stream + target`, with that stream's next sequence.
    Trace {
        /// The trace's senders.
        senders: Arc<[TraceSender]>,
        /// This sender's index in `senders`.
        ix: usize,
        /// Stream of the sender's first target.
        first_stream: StreamId,
        /// The next sequence number per target.
        seqs: Box<[u64]>,
        /// The trace's groups.
        groups: Arc<[Arc<GroupInfo>]>,
        /// Wire ids: the population's prefix and first id.
        ids: Arc<(String, u64)>,
    },
    /// Messages into one group on one stream; the k-th send has sequence k.
    Group {
        /// The group.
        group: Arc<GroupInfo>,
        /// This sender's stream in the group.
        stream: StreamId,
    },
}

/// When a program's sends are due, counted from its start.
#[derive(Debug, Clone)]
pub enum Cadence {
    /// Send k at `k·interval`.
    Every(Duration),
    /// Loops of `per_loop` sends, all due at `next`; a think time is drawn after each
    /// loop (the first before the first loop).
    Think {
        /// How long the user thinks.
        times: ThinkTimes,
        /// This sender's own seeded random source.
        rng: fastrand::Rng,
        /// Sends per loop.
        per_loop: u64,
        /// When the current loop's sends are due.
        next: Duration,
    },
    /// The k-th send at the k-th of these times (a trace's messages of one sender).
    Listed(Arc<[TraceSender]>, usize),
    /// A Poisson process at `rate` sends/s, only inside `windows` (the user online).
    Poisson {
        /// Sends per second.
        rate: f64,
        /// This sender's own seeded random source.
        rng: fastrand::Rng,
        /// When the user is online and the pattern sends, from the program's start,
        /// ascending and disjoint.
        windows: Box<[(Duration, Duration)]>,
        /// The window of the next send.
        window: usize,
        /// When the next send is due, `None` when done.
        next: Option<Duration>,
    },
}

impl Cadence {
    /// The cadence of the sender at `position` of a pattern paced by `pace`, making
    /// `per_loop` sends per loop.
    pub fn new(pace: &Pace, position: usize, per_loop: u64) -> Cadence {
        match pace {
            Pace::Every(interval) => Cadence::Every(*interval),
            Pace::Think(think) => {
                let mut rng = think.rng(position);
                let next = think.times.draw(&mut rng);
                Cadence::Think {
                    times: think.times,
                    rng,
                    per_loop: per_loop.max(1),
                    next,
                }
            }
        }
    }
}

impl Cadence {
    /// A Poisson process at `rate` sends/s inside `windows`, drawn from `rng`.
    pub fn poisson(rate: f64, rng: fastrand::Rng, windows: Box<[(Duration, Duration)]>) -> Cadence {
        let mut cadence = Cadence::Poisson {
            rate,
            rng,
            windows,
            window: 0,
            next: None,
        };
        cadence.step(None);
        cadence
    }

    /// Draws a Poisson clock's next send after `last` (the first when `None`): an
    /// exponential gap, and past a window's end the next window starts afresh (the process
    /// is memoryless).
    fn step(&mut self, last: Option<Duration>) {
        let Cadence::Poisson {
            rate,
            rng,
            windows,
            window,
            next,
        } = self
        else {
            return;
        };
        let mut from = last;
        *next = None;
        while let Some(&(start, end)) = windows.get(*window) {
            let at = from.unwrap_or(start).max(start);
            let gap = -(1.0 - rng.f64()).ln() / *rate;
            let t = at.saturating_add(Duration::try_from_secs_f64(gap).unwrap_or(Duration::MAX));
            if t < end {
                *next = Some(t);
                return;
            }
            *window += 1;
            from = None;
        }
    }
}

/// One user's share of one sending traffic pattern.
#[derive(Debug, Clone)]
pub struct Program {
    /// Counted from the traffic start barrier (includes this sender's stagger): the first
    /// send with [`Cadence::Every`], the first think with [`Cadence::Think`].
    pub start: Duration,
    /// When each send is due.
    pub cadence: Cadence,
    /// Sends in all, if bounded by count.
    pub count: Option<u64>,
    /// No send is due at or after this offset, if bounded by time.
    pub end: Option<Duration>,
    /// Body sizes.
    pub size: BodySize,
    /// Where the sends go.
    pub sends: Sends,
    /// How many were sent.
    pub sent: u64,
}

/// One send a program wants to make.
#[derive(Debug, Clone, Copy)]
pub struct NextSend {
    /// The stream.
    pub stream: StreamId,
    /// Its sequence number in the stream.
    pub seq: u64,
    /// Recipient index for direct sends (`None` for a group); a trace's target index.
    pub receiver: Option<usize>,
    /// Body bytes when the send has its own (a trace's), else the program's.
    pub size: Option<usize>,
}

impl Program {
    /// When the next send is due, counted from the traffic start; `None` when done.
    pub fn due(&self) -> Option<Duration> {
        if self.count.is_some_and(|c| self.sent >= c) {
            return None;
        }
        let at = match &self.cadence {
            Cadence::Every(interval) => {
                self.start + interval.saturating_mul(self.sent.min(u32::MAX.into()) as u32)
            }
            Cadence::Think { next, .. } => self.start.saturating_add(*next),
            Cadence::Poisson { next, .. } => self.start.saturating_add((*next)?),
            Cadence::Listed(senders, ix) => {
                let (at, _) = senders[*ix].sends.get(self.sent as usize)?;
                self.start.saturating_add(*at)
            }
        };
        match self.end {
            Some(end) if at >= end => None,
            _ => Some(at),
        }
    }

    /// The next send and when it is due, without advancing the program; `None` when done.
    pub fn peek(&self) -> Option<(Duration, NextSend)> {
        Some((self.due()?, self.sends.peek(self.sent)))
    }

    /// The next send; advances the program.
    pub fn advance(&mut self) -> NextSend {
        let k = self.sent;
        self.sent += 1;
        self.tick();
        self.sends.next(k)
    }

    /// Moves the clock past a send: a think after each loop, the next Poisson draw.
    fn tick(&mut self) {
        match &mut self.cadence {
            Cadence::Think {
                times,
                rng,
                per_loop,
                next,
            } => {
                if self.sent % *per_loop == 0 {
                    *next = next.saturating_add(times.draw(rng));
                }
            }
            Cadence::Poisson { .. } | Cadence::Every(_) | Cadence::Listed(..) => {}
        }
        if let Cadence::Poisson { next, .. } = &self.cadence {
            let last = *next;
            self.cadence.step(last);
        }
    }
}

/// Who one send goes to.
#[derive(Debug)]
pub enum To<'a> {
    /// A user: its index and wire id.
    User(UserIx, std::borrow::Cow<'a, str>),
    /// A group.
    Group(&'a GroupInfo),
    /// Back to the sender, through an echo endpoint.
    Echo,
}

impl Sends {
    /// Who `next`, one of these sends, goes to.
    pub fn to(&self, next: &NextSend) -> To<'_> {
        use std::borrow::Cow;
        let pos = next.receiver.unwrap_or(0);
        let wire = |ids: &(String, u64), r: UserIx| -> Cow<'_, str> {
            Cow::Owned(format!("{}{}", ids.0, ids.1 + u64::from(r)))
        };
        match self {
            Sends::Direct { receivers, .. } => {
                let (r, id) = &receivers[pos];
                To::User(*r, Cow::Borrowed(id))
            }
            Sends::Contacts {
                contacts,
                user,
                ids,
                ..
            } => {
                let r = contacts.of(*user)[pos];
                To::User(r, wire(ids, r))
            }
            Sends::Trace {
                senders,
                ix,
                groups,
                ids,
                ..
            } => match senders[*ix].targets[pos] {
                TraceTarget::User(r) => To::User(r, wire(ids, r)),
                TraceTarget::Group(g) => To::Group(&groups[g as usize]),
            },
            Sends::Group { group, .. } => To::Group(group),
            Sends::Echo { .. } => To::Echo,
        }
    }

    /// Whether the sends go to conversations (users or groups), not to an echo.
    pub fn converse(&self) -> bool {
        !matches!(self, Sends::Echo { .. })
    }

    /// The `k`-th send (0-based) of the program these sends belong to.
    fn next(&mut self, k: u64) -> NextSend {
        let next = self.peek(k);
        match self {
            Sends::Contacts {
                contacts,
                user,
                seqs,
                pick,
                ..
            } => {
                // The same draw as the peek's, now taken.
                pick.usize(..contacts.of(*user).len().max(1));
                if let Some(s) = next.receiver.and_then(|pos| seqs.get_mut(pos)) {
                    *s += 1;
                }
            }
            Sends::Trace { seqs, .. } => {
                if let Some(s) = next.receiver.and_then(|pos| seqs.get_mut(pos)) {
                    *s += 1;
                }
            }
            Sends::Direct { .. } | Sends::Group { .. } | Sends::Echo { .. } => {}
        }
        next
    }

    /// What the `k`-th send will be, without taking it.
    fn peek(&self, k: u64) -> NextSend {
        match self {
            Sends::Contacts {
                contacts,
                user,
                first_stream,
                seqs,
                pick,
                ..
            } => {
                let n = contacts.of(*user).len().max(1);
                let pos = pick.clone().usize(..n);
                let seq = seqs.get(pos).copied().unwrap_or(0);
                NextSend {
                    stream: *first_stream + pos as StreamId,
                    seq,
                    receiver: Some(pos),
                    size: None,
                }
            }
            Sends::Trace {
                senders,
                ix,
                first_stream,
                seqs,
                ..
            } => {
                let s = &senders[*ix];
                let k = k as usize;
                let pos = s.sends.get(k).map_or(0, |&(_, p)| p as usize);
                let seq = seqs[pos];
                NextSend {
                    stream: *first_stream + pos as StreamId,
                    seq,
                    receiver: Some(pos),
                    size: s.sizes.get(k).filter(|&&b| b > 0).map(|&b| b as usize),
                }
            }
            Sends::Direct {
                receivers,
                first_stream,
            } => {
                let r = receivers.len().max(1) as u64;
                let pos = (k % r) as usize;
                NextSend {
                    stream: *first_stream + pos as StreamId,
                    seq: k / r,
                    receiver: Some(pos),
                    size: None,
                }
            }
            Sends::Group { stream, .. } | Sends::Echo { stream } => NextSend {
                stream: *stream,
                seq: k,
                receiver: None,
                size: None,
            },
        }
    }
}

impl Program {
    /// How many sends it makes.
    pub fn planned(&self) -> u64 {
        match (&self.cadence, self.end) {
            (Cadence::Every(interval), _) => {
                planned_sends(self.start, *interval, self.count, self.end)
            }
            (Cadence::Think { .. }, None) => self.count.unwrap_or(0),
            (Cadence::Think { .. }, Some(_))
            | (Cadence::Poisson { .. } | Cadence::Listed(..), _) => self.replay().0,
        }
    }

    /// When it has nothing scheduled any more, from the traffic start.
    fn done_at(&self) -> Duration {
        match &self.cadence {
            Cadence::Every(interval) => {
                let n = self.planned();
                self.start + interval.saturating_mul(n.min(u64::from(u32::MAX)) as u32)
            }
            Cadence::Think { .. } | Cadence::Poisson { .. } | Cadence::Listed(..) => {
                self.replay().1
            }
        }
    }

    /// Its sends and the due time of the last, by running a copy (think times are drawn).
    fn replay(&self) -> (u64, Duration) {
        let mut p = self.clone();
        let mut last = p.start;
        while let Some(due) = p.due() {
            last = due;
            p.advance();
        }
        (p.sent, last)
    }
}

/// A user's part in a closed-loop request pattern.
#[derive(Debug, Clone)]
pub struct RequestRole {
    /// The request.
    pub kind: &'static str,
    /// Start of the first step, from the traffic start.
    pub start: Duration,
    /// Length of each step.
    pub step_duration: Duration,
    /// For each step, whether this user works in it.
    pub active: Vec<bool>,
}

impl RequestRole {
    /// True when this user should have a request outstanding at `offset` from traffic start.
    pub fn active_at(&self, offset: Duration) -> bool {
        if offset < self.start || self.step_duration.is_zero() {
            return false;
        }
        let step = ((offset - self.start).as_nanos() / self.step_duration.as_nanos()) as usize;
        self.active.get(step).copied().unwrap_or(false)
    }

    /// Offset from traffic start at which the pattern ends.
    pub fn end(&self) -> Duration {
        self.start + self.step_duration.saturating_mul(self.active.len() as u32)
    }
}

/// Everything one virtual user does during traffic.
#[derive(Debug, Clone, Default)]
pub struct VuPlan {
    /// Sending programs.
    pub programs: Vec<Program>,
    /// Groups the user is a member of.
    pub groups: Vec<Arc<GroupInfo>>,
    /// Request/response participation.
    pub requests: Vec<RequestRole>,
    /// The user stays connected at least this long after traffic start (idle patterns).
    pub stay_until: Duration,
}

impl VuPlan {
    /// Offset from traffic start after which this user has nothing scheduled besides its
    /// sending programs (which say themselves when they are done).
    pub fn hold_until(&self) -> Duration {
        self.requests
            .iter()
            .map(RequestRole::end)
            .chain(std::iter::once(self.stay_until))
            .max()
            .unwrap_or_default()
    }
}

/// A stream every recipient in `range` should receive: `(stream, recipient)` pairs, plus
/// the number of recipients each group stream has.
#[derive(Debug, Default)]
pub struct Expectations {
    /// Stream × recipient pairs whose recipient lives in this shard.
    pub tracks: Vec<(StreamId, UserIx)>,
    /// For group streams, the group they go to.
    pub group_of_stream: foldhash::HashMap<StreamId, Arc<GroupInfo>>,
    /// Sends the schedule makes due on each stream of `tracks` (only count- or
    /// time-bounded sends are counted).
    pub due: Vec<(StreamId, u64)>,
}

/// The run's schedule for the users in `range`.
#[derive(Debug)]
pub struct Schedule {
    /// Per user in the shard's range (`ix - range.start`).
    pub vus: Vec<VuPlan>,
    /// All groups of the plan.
    pub groups: Vec<Arc<GroupInfo>>,
    /// Deliveries the shard's users should see.
    pub expect: Expectations,
    /// Deliveries the shard's users get if every sender of every shard sends all it is
    /// scheduled to (only count- or time-bounded sends are counted).
    pub planned: u64,
    /// When this shard's users have nothing scheduled any more, from the traffic start.
    pub end: Duration,
}

/// How many sends a program bounded by `count` and/or `end` makes: every k with
/// `start + k·interval < end` and `k < count`, as [`Program::due`] decides.
fn planned_sends(
    start: Duration,
    interval: Duration,
    count: Option<u64>,
    end: Option<Duration>,
) -> u64 {
    let by_time = end.map(|end| {
        if start >= end {
            0
        } else if interval.is_zero() {
            u64::MAX
        } else {
            (end - start).as_nanos().div_ceil(interval.as_nanos()) as u64
        }
    });
    match (count, by_time) {
        (Some(c), Some(t)) => c.min(t),
        (Some(c), None) => c,
        (None, Some(t)) => t,
        (None, None) => 0,
    }
}

/// Cuts `plan` into per-user programs for the users in `range`.
pub fn build(plan: &Plan, range: Range<UserIx>) -> Schedule {
    let mut b = Builder {
        plan,
        vus: vec![VuPlan::default(); range.len()],
        range,
        groups: Vec::new(),
        expect: Expectations::default(),
        planned: 0,
    };
    for t in &plan.traffic {
        let end = t.duration.map(|d| t.start + d);
        match &t.kind {
            TrafficShape::Direct(d) => b.direct(d, t.start, end),
            TrafficShape::Group(g) => b.group(g, t.start, end),
            TrafficShape::Idle { users } => b.idle(users, end.unwrap_or(t.start)),
            TrafficShape::Request(r) => b.request(r, t.start),
            TrafficShape::Echo(e) => b.echo(e, t.start, end),
            TrafficShape::Chat(c) => b.chat(c, t.start, end.unwrap_or(t.start)),
            TrafficShape::Trace(tr) => b.trace(tr, t.start, end),
        }
    }
    let end = last_end(&b.vus);
    Schedule {
        vus: b.vus,
        groups: b.groups,
        expect: b.expect,
        planned: b.planned,
        end,
    }
}

/// When the last of `vus` has nothing scheduled any more, from the traffic start.
fn last_end(vus: &[VuPlan]) -> Duration {
    vus.iter()
        .flat_map(|v| {
            let sends = v.programs.iter().map(Program::done_at);
            sends.chain(std::iter::once(v.hold_until()))
        })
        .max()
        .unwrap_or_default()
}

/// A schedule being built, one pattern after the other.
struct Builder<'a> {
    /// The plan.
    plan: &'a Plan,
    /// The shard's users.
    range: Range<UserIx>,
    /// Per user of `range`.
    vus: Vec<VuPlan>,
    /// All groups so far.
    groups: Vec<Arc<GroupInfo>>,
    /// Deliveries the shard's users should see.
    expect: Expectations,
    /// Deliveries planned to the shard's users.
    planned: u64,
}

impl Builder<'_> {
    /// Whether user `u` is in this shard.
    fn local(&self, u: UserIx) -> bool {
        self.range.contains(&u)
    }

    /// The schedule of user `u` (in this shard).
    fn vu(&mut self, u: UserIx) -> &mut VuPlan {
        &mut self.vus[(u - self.range.start) as usize]
    }

    /// A direct pattern starting at `start`, ending at `end` if set.
    fn direct(&mut self, d: &DirectTraffic, start: Duration, end: Option<Duration>) {
        let receivers: Arc<[(UserIx, String)]> = d
            .receivers
            .iter()
            .map(|&r| (r, self.plan.population.user_id(r)))
            .collect();
        let n_recv = d.receivers.len() as StreamId;
        let spacing = d.pace.spacing();
        for (s_pos, &s) in d.senders.iter().enumerate() {
            let first_stream = d.stream_base + s_pos as StreamId * n_recv;
            let program = Program {
                start: start + stagger(spacing, s_pos, d.senders.len()),
                cadence: Cadence::new(&d.pace, s_pos, u64::from(n_recv)),
                count: d.messages.map(|m| m * u64::from(n_recv)),
                end,
                size: d.size.clone(),
                sends: Sends::Direct {
                    receivers: receivers.clone(),
                    first_stream,
                },
                sent: 0,
            };
            let sends = program.planned();
            for (r_pos, &r) in d.receivers.iter().enumerate() {
                if self.local(r) && r != s && n_recv > 0 {
                    // Send k goes to receiver k % R.
                    let r_pos = r_pos as u64;
                    let n = u64::from(n_recv);
                    let due = sends / n + u64::from(sends % n > r_pos);
                    self.planned += due;
                    self.expect
                        .due
                        .push((first_stream + r_pos as StreamId, due));
                }
            }
            for (r_pos, &r) in d.receivers.iter().enumerate() {
                if self.local(r) && r != s {
                    self.expect
                        .tracks
                        .push((first_stream + r_pos as StreamId, r));
                }
            }
            if self.local(s) {
                self.vu(s).programs.push(program);
            }
        }
    }

    /// Adds group `spec` to the run's groups, its local members joining it at login.
    fn join(&mut self, spec: &GroupSpec) -> Arc<GroupInfo> {
        let info = Arc::new(GroupInfo {
            index: self.groups.len(),
            name: spec.name.clone(),
        });
        self.groups.push(info.clone());
        for &m in &spec.members {
            if self.local(m) {
                self.vu(m).groups.push(info.clone());
            }
        }
        info
    }

    /// A group pattern starting at `start`, ending at `end` if set.
    fn group(&mut self, g: &GroupTraffic, start: Duration, end: Option<Duration>) {
        let n_senders = g.groups.len() * g.senders_per_group as usize;
        let spacing = g.pace.spacing();
        for (g_ix, spec) in g.groups.iter().enumerate() {
            let info = self.join(spec);
            for (k, &s) in spec.senders.iter().enumerate() {
                let stream = g.stream_base + (g_ix as u32 * g.senders_per_group) + k as StreamId;
                self.expect.group_of_stream.insert(stream, info.clone());
                let position = g_ix * g.senders_per_group as usize + k;
                let program = Program {
                    start: start + stagger(spacing, position, n_senders),
                    cadence: Cadence::new(&g.pace, position, 1),
                    count: g.messages,
                    end,
                    size: g.size.clone(),
                    sends: Sends::Group {
                        group: info.clone(),
                        stream,
                    },
                    sent: 0,
                };
                let sends = program.planned();
                for &m in &spec.members {
                    if self.local(m) && m != s {
                        self.expect.tracks.push((stream, m));
                        self.planned += sends;
                    }
                }
                self.expect.due.push((stream, sends));
                if self.local(s) {
                    self.vu(s).programs.push(program);
                }
            }
        }
    }

    /// An idle pattern: its users stay connected until `until`.
    fn idle(&mut self, users: &IdleUsers, until: Duration) {
        for u in self.range.clone().filter(|&u| users.contains(u)) {
            let vu = self.vu(u);
            vu.stay_until = vu.stay_until.max(until);
        }
    }

    /// A request pattern starting at `start`.
    fn request(&mut self, r: &RequestTraffic, start: Duration) {
        for u in self.range.clone() {
            let active: Vec<bool> = r.steps.iter().map(|&c| u < c).collect();
            if active.iter().any(|&a| a) {
                self.vu(u).requests.push(RequestRole {
                    kind: r.request,
                    start,
                    step_duration: r.step_duration,
                    active,
                });
            }
        }
    }

    /// An echo pattern starting at `start`, ending at `end`.
    fn echo(&mut self, e: &EchoTraffic, start: Duration, end: Option<Duration>) {
        for (k, &u) in e.users.iter().enumerate() {
            let stream = e.stream_base + k as StreamId;
            if self.local(u) {
                let start = start + stagger(e.interval, k, e.users.len());
                let due = planned_sends(start, e.interval, None, end);
                self.planned += due;
                self.expect.due.push((stream, due));
                self.expect.tracks.push((stream, u));
                self.vu(u).programs.push(Program {
                    start,
                    cadence: Cadence::Every(e.interval),
                    count: None,
                    end,
                    size: e.size.clone(),
                    sends: Sends::Echo { stream },
                    sent: 0,
                });
            }
        }
    }
}

impl Builder<'_> {
    /// A chat pattern from `start` to `end`: every user with contacts sends while online.
    fn chat(&mut self, c: &ChatTraffic, start: Duration, end: Duration) {
        let windows = |u: UserIx| online_windows(self.plan, u, start, end);
        let span = (end - start).as_secs_f64().max(1e-9);
        // The rate each unit of weight gets, so that the users' rates, each only while
        // online, add up to the pattern's rate on average.
        let busy: f64 = (0..self.plan.population.users)
            .filter(|&u| !c.contacts.of(u).is_empty())
            .map(|u| {
                let online: f64 = windows(u)
                    .iter()
                    .map(|(a, b)| (*b - *a).as_secs_f64())
                    .sum();
                f64::from(c.weights[u as usize]) * online / span
            })
            .sum();
        let ids = Arc::new((
            self.plan.population.prefix.clone(),
            self.plan.population.first_id,
        ));
        for u in 0..self.plan.population.users {
            let mine = c.contacts.of(u);
            let rate = c.rate * f64::from(c.weights[u as usize]) / busy.max(f64::MIN_POSITIVE);
            if mine.is_empty() || rate <= 0.0 || !rate.is_finite() {
                continue;
            }
            let first_stream = c.stream_base + c.contacts.offset(u) as StreamId;
            let program = Program {
                start: Duration::ZERO,
                cadence: Cadence::poisson(rate, user_rng(c.seed, u, 1), windows(u).into()),
                count: None,
                end: Some(end),
                size: c.size.clone(),
                sends: Sends::Contacts {
                    contacts: c.contacts.clone(),
                    user: u,
                    first_stream,
                    seqs: vec![0; mine.len()].into(),
                    pick: user_rng(c.seed, u, 2),
                    ids: ids.clone(),
                },
                sent: 0,
            };
            if mine.iter().any(|&r| self.local(r)) {
                let mut due = vec![0u64; mine.len()];
                let mut copy = program.clone();
                while copy.due().is_some() {
                    if let Some(k) = copy.advance().receiver {
                        due[k] += 1;
                    }
                }
                for (k, &r) in mine.iter().enumerate() {
                    if self.local(r) {
                        let stream = first_stream + k as StreamId;
                        self.expect.tracks.push((stream, r));
                        self.expect.due.push((stream, due[k]));
                        self.planned += due[k];
                    }
                }
            }
            if self.local(u) {
                self.vu(u).programs.push(program);
            }
        }
        self.chat_groups(c, start, end);
    }

    /// The group part of a chat pattern: each group's speakers send into it while online,
    /// the groups' rates heavy-tailed around `group_rate`.
    fn chat_groups(&mut self, c: &ChatTraffic, start: Duration, end: Duration) {
        let span = (end - start).as_secs_f64().max(1e-9);
        let share = |u: UserIx| {
            let w = online_windows(self.plan, u, start, end);
            w.iter().map(|(a, b)| (*b - *a).as_secs_f64()).sum::<f64>() / span
        };
        let busy: f64 = c
            .groups
            .iter()
            .zip(c.group_weights.iter())
            .map(|(g, &w)| {
                let each = f64::from(w) / g.senders.len().max(1) as f64;
                g.senders.iter().map(|&s| each * share(s)).sum::<f64>()
            })
            .sum();
        let mut stream = c.group_stream_base;
        for (g, &w) in c.groups.iter().zip(c.group_weights.iter()) {
            let info = self.join(g);
            let each = f64::from(w) / g.senders.len().max(1) as f64;
            let rate = c.group_rate * each / busy.max(f64::MIN_POSITIVE);
            for &s in &g.senders {
                self.expect.group_of_stream.insert(stream, info.clone());
                let program = Program {
                    start: Duration::ZERO,
                    cadence: Cadence::poisson(
                        rate,
                        user_rng(c.seed, stream, 3),
                        online_windows(self.plan, s, start, end).into(),
                    ),
                    count: None,
                    end: Some(end),
                    size: c.size.clone(),
                    sends: Sends::Group {
                        group: info.clone(),
                        stream,
                    },
                    sent: 0,
                };
                let sends = if rate > 0.0 && rate.is_finite() {
                    program.planned()
                } else {
                    0
                };
                for &m in &g.members {
                    if self.local(m) && m != s {
                        self.expect.tracks.push((stream, m));
                        self.planned += sends;
                    }
                }
                self.expect.due.push((stream, sends));
                if self.local(s) && sends > 0 {
                    self.vu(s).programs.push(program);
                }
                stream += 1;
            }
        }
    }
}

impl Builder<'_> {
    /// A trace from `start`: each sender's messages at their times, cut at `end`.
    fn trace(&mut self, t: &TraceTraffic, start: Duration, end: Option<Duration>) {
        let infos: Arc<[Arc<GroupInfo>]> = t.groups.iter().map(|g| self.join(g)).collect();
        let ids = Arc::new((
            self.plan.population.prefix.clone(),
            self.plan.population.first_id,
        ));
        let mut first_stream = t.stream_base;
        for (ix, s) in t.senders.iter().enumerate() {
            let program = Program {
                start,
                cadence: Cadence::Listed(t.senders.clone(), ix),
                count: None,
                end: end.map(|e| e.saturating_sub(start)),
                size: t.size.clone(),
                sends: Sends::Trace {
                    senders: t.senders.clone(),
                    ix,
                    first_stream,
                    seqs: vec![0; s.targets.len()].into(),
                    groups: infos.clone(),
                    ids: ids.clone(),
                },
                sent: 0,
            };
            let mut due = vec![0u64; s.targets.len()];
            let cut = end.map_or(Duration::MAX, |e| e.saturating_sub(start));
            for &(at, k) in &s.sends {
                if at < cut {
                    due[k as usize] += 1;
                }
            }
            for (k, target) in s.targets.iter().enumerate() {
                let stream = first_stream + k as StreamId;
                let recipients: Vec<UserIx> = match *target {
                    TraceTarget::User(r) => vec![r],
                    TraceTarget::Group(g) => {
                        self.expect
                            .group_of_stream
                            .insert(stream, infos[g as usize].clone());
                        t.groups[g as usize].members.clone()
                    }
                };
                let mut local = false;
                let here = self.range.clone();
                for r in recipients
                    .into_iter()
                    .filter(|&r| r != s.user && here.contains(&r))
                {
                    self.expect.tracks.push((stream, r));
                    self.planned += due[k];
                    local = true;
                }
                if local || matches!(target, TraceTarget::Group(_)) {
                    self.expect.due.push((stream, due[k]));
                }
            }
            if self.local(s.user) {
                self.vu(s.user).programs.push(program);
            }
            first_stream += s.targets.len() as StreamId;
        }
    }
}

/// When user `u` is online between `start` and `end` (from the traffic start): its
/// session windows cut to them, or the whole span without sessions.
pub fn online_windows(
    plan: &Plan,
    u: UserIx,
    start: Duration,
    end: Duration,
) -> Vec<(Duration, Duration)> {
    let Some(sessions) = &plan.population.sessions else {
        return vec![(start, end)];
    };
    sessions
        .of(u)
        .iter()
        .filter_map(|&[a, b]| {
            let a = Duration::from_millis(a.into()).max(start);
            let b = if b == OPEN {
                end
            } else {
                Duration::from_millis(b.into()).min(end)
            };
            (a < b).then_some((a, b))
        })
        .collect()
}

/// User `u`'s own random source for purpose `tag` of a pattern seeded `seed`.
fn user_rng(seed: u64, u: UserIx, tag: u64) -> fastrand::Rng {
    let k = (u64::from(u) << 2 | tag).wrapping_add(1);
    fastrand::Rng::with_seed(seed ^ k.wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// Spreads senders' first sends evenly over one interval, so the offered load is smooth
/// instead of arriving in bursts of every sender at once.
fn stagger(interval: Duration, position: usize, of: usize) -> Duration {
    if of == 0 {
        return Duration::ZERO;
    }
    Duration::from_nanos((interval.as_nanos() * position as u128 / of as u128) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn program(count: Option<u64>, end: Option<Duration>) -> Program {
        Program {
            start: Duration::from_millis(5),
            cadence: Cadence::Every(Duration::from_millis(10)),
            count,
            end,
            size: BodySize::fixed(10),
            sends: Sends::Direct {
                receivers: vec![(1, "u1".to_owned()), (2, "u2".to_owned())].into(),
                first_stream: 100,
            },
            sent: 0,
        }
    }

    #[test]
    fn direct_program_cycles_receivers_and_counts_per_pair() {
        let mut p = program(Some(4), None);
        let mut seen = Vec::new();
        while let Some(due) = p.due() {
            let n = p.advance();
            seen.push((due.as_millis(), n.stream, n.seq));
        }
        assert_eq!(
            seen,
            vec![(5, 100, 0), (15, 101, 0), (25, 100, 1), (35, 101, 1)]
        );
    }

    #[test]
    fn time_bound_stops_before_end() {
        let mut p = program(None, Some(Duration::from_millis(30)));
        let mut n = 0;
        while p.due().is_some() {
            p.advance();
            n += 1;
        }
        assert_eq!(n, 3);
    }

    #[test]
    fn planned_sends_match_what_programs_send() {
        for (count, end_ms) in [
            (Some(4), None),
            (None, Some(30)),
            (Some(2), Some(30)),
            (None, Some(5)),
        ] {
            let mut p = program(count, end_ms.map(Duration::from_millis));
            let mut n = 0;
            while p.due().is_some() {
                p.advance();
                n += 1;
            }
            assert_eq!(p.planned(), n, "{count:?} {end_ms:?}");
        }
    }

    #[test]
    fn request_role_follows_steps() {
        let r = RequestRole {
            kind: "time",
            start: Duration::from_secs(1),
            step_duration: Duration::from_secs(2),
            active: vec![false, true],
        };
        assert!(!r.active_at(Duration::from_millis(500)));
        assert!(!r.active_at(Duration::from_millis(2500)));
        assert!(r.active_at(Duration::from_millis(3500)));
        assert!(!r.active_at(Duration::from_secs(6)));
        assert_eq!(r.end(), Duration::from_secs(5));
    }

    /// A flow program: `loops` loops of `per_loop` sends, thinking `times`.
    fn flow(times: ThinkTimes, seed: u64, position: usize, per_loop: u64, loops: u64) -> Program {
        let pace = Pace::Think(crate::scenario::Think { times, seed });
        Program {
            cadence: Cadence::new(&pace, position, per_loop),
            count: Some(loops * per_loop),
            end: None,
            ..program(None, None)
        }
    }

    /// Every due time of `p`, run to its end.
    fn dues(mut p: Program) -> Vec<Duration> {
        let mut out = Vec::new();
        while let Some(due) = p.due() {
            out.push(due);
            p.advance();
        }
        out
    }

    #[test]
    fn due_times_follow_think_times() {
        let ms = Duration::from_millis;
        // Start 5 ms, think 2 s, then each loop's two sends together, then think again.
        let p = flow(ThinkTimes::Fixed(ms(2000)), 1, 0, 2, 3);
        assert_eq!(p.planned(), 6);
        assert_eq!(
            dues(p.clone()),
            [2005, 2005, 4005, 4005, 6005, 6005].map(ms).to_vec()
        );
        assert_eq!(p.done_at(), ms(6005));
        // Uniform think times stay in their bounds, each gap drawn afresh.
        let p = flow(ThinkTimes::Uniform(ms(1000), ms(3000)), 9, 3, 1, 200);
        let d = dues(p);
        let gaps: Vec<Duration> = d.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(d[0] >= ms(1005) && d[0] <= ms(3005), "{:?}", d[0]);
        assert!(gaps.iter().all(|g| (ms(1000)..=ms(3000)).contains(g)));
        assert!(gaps.windows(2).any(|w| w[0] != w[1]), "not drawn afresh");
    }

    #[test]
    fn think_times_are_reproducible_from_the_seed() {
        let times = ThinkTimes::Exponential(Duration::from_secs(2));
        let a = dues(flow(times, 42, 7, 1, 50));
        assert_eq!(a, dues(flow(times, 42, 7, 1, 50)), "same seed and sender");
        assert_ne!(a, dues(flow(times, 42, 8, 1, 50)), "another sender");
        assert_ne!(a, dues(flow(times, 43, 7, 1, 50)), "another seed");
    }

    #[test]
    fn exponential_think_times_have_the_stated_mean() {
        let mean = Duration::from_secs(2);
        let think = crate::scenario::Think {
            times: ThinkTimes::Exponential(mean),
            seed: 5,
        };
        let mut rng = think.rng(0);
        let n = 20_000;
        let sum: f64 = (0..n)
            .map(|_| think.times.draw(&mut rng).as_secs_f64())
            .sum();
        // The standard error of the mean of 20,000 draws is 2 s / √20,000 ≈ 0.014 s.
        let got = sum / f64::from(n);
        assert!((got - 2.0).abs() < 0.06, "mean {got}");
    }
}
