//! The `loopback` driver: an in-process server, no sockets, for engine tests and for
//! measuring the generator's own ceiling.
//!
//! A [`Hub`] plays the server. It keeps a mailbox per user and the members of each group.
//! A send goes at once to every recipient: it is pushed when the recipient is online and
//! stored when it is not. [`Session::fetch_missed`] hands over what was stored, once. A
//! message is pushed or stored, never both: a push still queued when its session closes goes
//! back to the store for the user's next connection. Every send gets an
//! [`Event::Accepted`], every request an [`Event::Reply`]. Heartbeat and flush do nothing.
//! Group members persist across connections, so the driver needs presence: late users join
//! their groups before traffic starts.
//!
//! # Faults
//!
//! [`LoopbackOptions`] sets seeded, deterministic faults on pushes to online recipients.
//! At most one fault hits a push. Each recipient draws from its own generator, seeded from
//! the options' seed and its user id. The [`Hub`] counts what it injected
//! ([`Hub::injected`]), so a test can check that the ledger reports exactly that:
//!
//! | fault | what happens | the ledger reports |
//! |---|---|---|
//! | `loss` | the push is neither sent nor stored | `lost` |
//! | `drop` | the push is not sent but is stored | `repaired` at the final verification sync (`via_sync` after a reconnect) |
//! | `duplicate` | the push is sent twice | `duplicated` |
//! | `reorder` | the push is held until the next push of the same conversation (sender × user or group) has been sent | `reordered` |
//! | `corrupt` | the body's last byte is changed | `corrupted` |
//!
//! One fault hits the store instead: `store_twice`, the probability that a message stored
//! for an offline user is stored twice, so that the user's fetch hands out both copies —
//! the ledger reports `duplicated` (a second copy through the fetch path), and the hub
//! counts it as [`Injected::stored_twice`] when it stores it.
//!
//! Faults are counted when they take effect: a copy, a held message or a corrupted body
//! when the session hands it to the engine. A held message that is still held when the
//! user fetches or disconnects goes to the store and counts as `dropped`. A corrupted body
//! that holds padding after the envelope header ([`crate::envelope`]) is attributed to its
//! message (`corrupted`). A body that is no more than its header has its final `:` changed:
//! the ledger can only count it as `damaged`, and the message as `lost`.
//!
//! `latency` and `jitter` delay every event (acceptances and replies by `latency` alone).
//! Deliveries to one user keep their order whatever the jitter: only `reorder` reorders.
//!
//! The hot path is cheap: one lock of the recipient's mailbox per push, no allocation
//! besides the delivered body, and no clock read without latency.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::{Caps, Config, Connected, Dest, Event, Failure, OptionError, Session, Spec, UserCtx};
use crate::metrics::ErrorKind;
use crate::vocab::TrafficKind;
use crate::vocab::UserIx;

/// The faults and timing of a loopback hub.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoopbackOptions {
    /// Delay of every event.
    pub latency: Duration,
    /// Extra delay of each push, uniform in `0..jitter`.
    pub jitter: Duration,
    /// Probability that a push is lost for good (not sent, not stored).
    pub loss: f64,
    /// Probability that a push is not sent but stored (a sync repairs it).
    pub drop: f64,
    /// Probability that a push is sent twice.
    pub duplicate: f64,
    /// Probability that a push is held until after the next one of its conversation.
    pub reorder: f64,
    /// Probability that a push's body is changed in one byte.
    pub corrupt: f64,
    /// Probability that a message stored for an offline user is stored twice.
    pub store_twice: f64,
    /// Seed of the fault decisions.
    pub seed: u64,
    /// Makes this user's [`Session::send`] panic: a test hook for engine failures.
    pub panic_user: Option<UserIx>,
    /// Refuses this many of this user's first logins (`auth_failed`): a test hook for users
    /// the run can't reach.
    pub refuse_logins: Option<(UserIx, u32)>,
    /// Breaks this user's first connection at its first send, as a reset under a write
    /// does: the send is taken but never arrives, and the flush, every later send and the
    /// next event fail with `closed_by_peer` — a test hook for a connection lost while
    /// writing.
    pub cut_user: Option<UserIx>,
}

/// The keys [`LoopbackOptions::parse`] accepts.
const KEYS: [&str; 9] = [
    "latency",
    "jitter",
    "loss",
    "drop",
    "duplicate",
    "reorder",
    "corrupt",
    "store_twice",
    "seed",
];

impl LoopbackOptions {
    /// Parses a `[target.loopback]` table.
    pub fn parse(table: &toml::Table) -> Result<Self, OptionError> {
        let err = |key: &str, msg: String| OptionError::option("loopback", key, msg);
        let mut o = LoopbackOptions::default();
        for (key, value) in table {
            match key.as_str() {
                "latency" | "jitter" => {
                    let d = match value {
                        toml::Value::String(s) => {
                            humantime::parse_duration(s.trim()).map_err(|_| {
                                err(key, format!("not a duration: `{s}` (use e.g. `2ms`)"))
                            })?
                        }
                        v => {
                            return Err(err(
                                key,
                                format!("must be a duration like \"2ms\", got {v}"),
                            ))
                        }
                    };
                    if key == "latency" {
                        o.latency = d;
                    } else {
                        o.jitter = d;
                    }
                }
                "loss" | "drop" | "duplicate" | "reorder" | "corrupt" | "store_twice" => {
                    let p = match value {
                        toml::Value::Float(f) => *f,
                        toml::Value::Integer(i) => *i as f64,
                        v => return Err(err(key, format!("must be a probability, got {v}"))),
                    };
                    if !(0.0..=1.0).contains(&p) {
                        return Err(err(key, format!("must be between 0 and 1, got {p}")));
                    }
                    *o.probability(key) = p;
                }
                "seed" => match value {
                    toml::Value::Integer(i) if *i >= 0 => o.seed = *i as u64,
                    v => return Err(err(key, format!("must be an integer ≥ 0, got {v}"))),
                },
                other => {
                    return Err(err(
                        other,
                        format!("unknown option; allowed: {}", KEYS.join(", ")),
                    ))
                }
            }
        }
        let sum = o.loss + o.drop + o.duplicate + o.reorder + o.corrupt;
        if sum > 1.0 {
            let last = ["corrupt", "reorder", "duplicate", "drop", "loss"]
                .into_iter()
                .find(|k| table.contains_key(*k))
                .unwrap_or("loss");
            return Err(err(
                last,
                format!(
                    "the fault probabilities add up to {sum}; at most one fault hits a push, \
                     so they must add up to at most 1"
                ),
            ));
        }
        Ok(o)
    }

    fn probability(&mut self, key: &str) -> &mut f64 {
        match key {
            "loss" => &mut self.loss,
            "drop" => &mut self.drop,
            "duplicate" => &mut self.duplicate,
            "reorder" => &mut self.reorder,
            "store_twice" => &mut self.store_twice,
            _ => &mut self.corrupt,
        }
    }

    fn any_fault(&self) -> bool {
        self.loss + self.drop + self.duplicate + self.reorder + self.corrupt > 0.0
    }
}

/// Faults a hub injected so far, in messages × recipients.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Injected {
    /// Pushes lost for good.
    pub lost: u64,
    /// Pushes not sent but stored (including held ones that never got released).
    pub dropped: u64,
    /// Extra copies handed out.
    pub duplicated: u64,
    /// Held pushes handed out after a later one of their conversation.
    pub reordered: u64,
    /// Corrupted bodies handed out.
    pub corrupted: u64,
    /// Messages stored twice for an offline user.
    pub stored_twice: u64,
}

/// The loopback driver; see the module documentation.
#[derive(Debug, Clone)]
pub struct LoopbackDriver {
    hub: Arc<Hub>,
}

impl LoopbackDriver {
    /// A driver over a new, empty hub with these options.
    pub fn with_options(opts: LoopbackOptions) -> Self {
        LoopbackDriver {
            hub: Arc::new(Hub::new(opts)),
        }
    }

    /// The hub, to read what it injected.
    pub fn hub(&self) -> Arc<Hub> {
        self.hub.clone()
    }
}

/// The in-process server every loopback session talks to.
#[derive(Debug)]
pub struct Hub {
    opts: LoopbackOptions,
    /// Events are delayed (latency or jitter set).
    timed: bool,
    /// Every user seen, by wire id.
    users: RwLock<HashMap<Box<str>, Arc<Mailbox>>>,
    /// Every group, by name.
    groups: RwLock<HashMap<Box<str>, Arc<Group>>>,
    /// What was injected, indexed by [`Fault`].
    injected: [AtomicU64; 6],
}

/// A group: an id (for conversation keys) and its members.
#[derive(Debug)]
struct Group {
    id: u32,
    members: RwLock<Vec<Arc<Mailbox>>>,
}

/// One user's side of the hub.
#[derive(Debug)]
struct Mailbox {
    state: Mutex<MailboxState>,
    /// Woken when an event is queued.
    notify: Notify,
}

#[derive(Debug)]
struct MailboxState {
    /// A session is connected.
    online: bool,
    /// Logins tried so far.
    logins: u32,
    /// Events for the connected session, in order.
    queue: VecDeque<Queued>,
    /// When the last queued event becomes ready (delivery order survives jitter).
    last_ready: Option<Instant>,
    /// Messages for the next `fetch_missed`.
    store: Vec<String>,
    /// A push held back by the reorder fault, with its conversation.
    held: Option<(Conv, String)>,
    /// Fault decisions for pushes to this user.
    rng: fastrand::Rng,
}

/// A conversation: the sender and the group id, or [`DIRECT`].
type Conv = (UserIx, u32);

/// The group id of direct messages in a [`Conv`].
const DIRECT: u32 = u32::MAX;

/// An event waiting in a mailbox.
#[derive(Debug)]
struct Queued {
    /// When it may be handed out (`None`: at once).
    ready: Option<Instant>,
    item: Item,
}

#[derive(Debug)]
enum Item {
    Accepted(u64),
    Refused(u64, &'static str),
    Reply(u64),
    Push(String, Mark),
}

/// What a queued push is, for the fault counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mark {
    Clean,
    /// To be corrupted when handed out.
    Corrupt,
    /// The extra copy of a duplicated push.
    Copy,
    /// A held push released after a later one.
    Reordered,
}

/// Indexes of [`Hub::injected`].
#[derive(Debug, Clone, Copy)]
enum Fault {
    Lost,
    Dropped,
    Duplicated,
    Reordered,
    Corrupted,
    StoredTwice,
}

/// The decision for one push.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Decision {
    Deliver,
    Lose,
    Drop,
    Duplicate,
    Reorder,
    Corrupt,
}

/// Locks a mutex; a poisoned one (a panicking user task) still yields its data.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// FNV-1a of a user id, to seed its fault decisions.
fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

impl Hub {
    fn new(opts: LoopbackOptions) -> Self {
        Hub {
            timed: !opts.latency.is_zero() || !opts.jitter.is_zero(),
            opts,
            users: RwLock::default(),
            groups: RwLock::default(),
            injected: Default::default(),
        }
    }

    /// What this hub injected so far.
    pub fn injected(&self) -> Injected {
        let n = |f: Fault| self.injected[f as usize].load(Ordering::Relaxed);
        Injected {
            lost: n(Fault::Lost),
            dropped: n(Fault::Dropped),
            duplicated: n(Fault::Duplicated),
            reordered: n(Fault::Reordered),
            corrupted: n(Fault::Corrupted),
            stored_twice: n(Fault::StoredTwice),
        }
    }

    fn count(&self, f: Fault) {
        self.injected[f as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// The mailbox of `id`, created when first needed.
    fn mailbox(&self, id: &str) -> Arc<Mailbox> {
        if let Some(m) = self.users.read().unwrap_or_else(|p| p.into_inner()).get(id) {
            return m.clone();
        }
        let mut users = self.users.write().unwrap_or_else(|p| p.into_inner());
        let seed = self.opts.seed ^ fnv(id);
        users
            .entry(id.into())
            .or_insert_with(|| {
                Arc::new(Mailbox {
                    state: Mutex::new(MailboxState {
                        online: false,
                        logins: 0,
                        queue: VecDeque::new(),
                        last_ready: None,
                        store: Vec::new(),
                        held: None,
                        rng: fastrand::Rng::with_seed(seed),
                    }),
                    notify: Notify::new(),
                })
            })
            .clone()
    }

    /// When an event queued now with `extra` delay becomes ready.
    fn ready_at(&self, now: Option<Instant>, extra: Duration) -> Option<Instant> {
        now.map(|n| n + self.opts.latency + extra)
    }

    /// Pushes `body` of conversation `conv` to the user of `mb`: queued when online (after
    /// the fault decision), stored otherwise.
    fn push(&self, mb: &Mailbox, conv: Conv, body: &str, now: Option<Instant>) {
        let mut st = lock(&mb.state);
        if !st.online {
            st.store.push(body.to_owned());
            if self.opts.store_twice > 0.0 && st.rng.f64() < self.opts.store_twice {
                self.count(Fault::StoredTwice);
                st.store.push(body.to_owned());
            }
            return;
        }
        let decision = self.decide(&mut st.rng);
        let jitter = if self.opts.jitter.is_zero() {
            Duration::ZERO
        } else {
            self.opts.jitter.mul_f64(st.rng.f64())
        };
        let ready = self.ready_at(now, jitter);
        let mark = match decision {
            Decision::Lose => {
                self.count(Fault::Lost);
                return;
            }
            Decision::Drop => {
                self.count(Fault::Dropped);
                st.store.push(body.to_owned());
                return;
            }
            Decision::Reorder if st.held.is_none() => {
                st.held = Some((conv, body.to_owned()));
                return;
            }
            Decision::Corrupt => Mark::Corrupt,
            Decision::Deliver | Decision::Duplicate | Decision::Reorder => Mark::Clean,
        };
        st.enqueue(ready, Item::Push(body.to_owned(), mark));
        if decision == Decision::Duplicate {
            st.enqueue(ready, Item::Push(body.to_owned(), Mark::Copy));
        }
        if st.held.as_ref().is_some_and(|(c, _)| *c == conv) {
            if let Some((_, held)) = st.held.take() {
                st.enqueue(ready, Item::Push(held, Mark::Reordered));
            }
        }
        drop(st);
        mb.notify.notify_one();
    }

    /// Draws the fault of one push.
    fn decide(&self, rng: &mut fastrand::Rng) -> Decision {
        let o = &self.opts;
        if !o.any_fault() {
            return Decision::Deliver;
        }
        let mut r = rng.f64();
        for (p, d) in [
            (o.loss, Decision::Lose),
            (o.drop, Decision::Drop),
            (o.duplicate, Decision::Duplicate),
            (o.reorder, Decision::Reorder),
            (o.corrupt, Decision::Corrupt),
        ] {
            if r < p {
                return d;
            }
            r -= p;
        }
        Decision::Deliver
    }

    /// Queues an event for the session of `mb` itself (acceptances, replies).
    fn answer(&self, mb: &Mailbox, item: Item, now: Option<Instant>) {
        let ready = self.ready_at(now, Duration::ZERO);
        lock(&mb.state).enqueue(ready, item);
        mb.notify.notify_one();
    }

    /// Moves a held push to the store: it was withheld, not reordered.
    fn unhold(&self, st: &mut MailboxState) {
        if let Some((_, body)) = st.held.take() {
            self.count(Fault::Dropped);
            st.store.push(body);
        }
    }
}

impl MailboxState {
    fn enqueue(&mut self, ready: Option<Instant>, item: Item) {
        let ready = match (ready, self.last_ready) {
            (Some(r), Some(last)) => Some(r.max(last)),
            (r, _) => r,
        };
        self.last_ready = ready;
        self.queue.push_back(Queued { ready, item });
    }
}

/// The request the hub answers at once.
const REQUEST_TIME: &str = "time";

impl super::Driver for LoopbackDriver {
    const SPEC: Spec = Spec {
        name: "loopback",
        schemes: &[],
        embedded_path: None,
        kinds: &[
            TrafficKind::Direct,
            TrafficKind::Group,
            TrafficKind::Idle,
            TrafficKind::Request,
        ],
        requests: &[REQUEST_TIME],
        auth: &[],
        source_addresses: false,
        files: &[],
        caps: Caps {
            acceptance: true,
            presence: true,
            fetch_missed: true,
            filters_own_echoes: true,
            fetch_needs_receipt: false,
            group_history: None,
            skips_history: false,
        },
    };

    type Session = LoopbackSession;

    fn new(config: &Config) -> Result<Self, OptionError> {
        LoopbackOptions::parse(&config.options).map(Self::with_options)
    }

    async fn connect(
        &self,
        user: &UserCtx,
        _resume: (),
    ) -> Result<Connected<LoopbackSession>, (Failure, ())> {
        let mailbox = self.hub.mailbox(&user.id);
        {
            let mut state = lock(&mailbox.state);
            state.logins += 1;
            if let Some((ix, n)) = self.hub.opts.refuse_logins {
                if ix == user.ix && state.logins <= n {
                    let why = format!("login {} of {} refused (test hook)", state.logins, user.id);
                    return Err((Failure::new(ErrorKind::AuthFailed, why), ()));
                }
            }
            state.online = true;
        }
        let cut = self.hub.opts.cut_user == Some(user.ix) && lock(&mailbox.state).logins == 1;
        Ok(Connected {
            session: LoopbackSession {
                hub: self.hub.clone(),
                mailbox,
                ix: user.ix,
                panics: self.hub.opts.panic_user == Some(user.ix),
                cut: if cut { Cut::AtSend } else { Cut::No },
            },
            handshake: Duration::ZERO,
            login: Duration::ZERO,
            account: None,
            no_resume_point: false,
        })
    }
}

/// One user's connection to the hub. Dropping it disconnects the user.
#[derive(Debug)]
pub struct LoopbackSession {
    hub: Arc<Hub>,
    mailbox: Arc<Mailbox>,
    ix: UserIx,
    /// `send` panics (the `panic_user` hook).
    panics: bool,
    /// Where the `cut_user` hook stands for this connection.
    cut: Cut,
}

/// The `cut_user` hook on one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cut {
    /// Not cut.
    No,
    /// The next send breaks the connection.
    AtSend,
    /// Broken: every call fails.
    Broken,
}

/// What every call of a connection broken by the `cut_user` hook fails with.
fn reset() -> Failure {
    Failure::new(
        ErrorKind::ClosedByPeer,
        "connection reset by peer (test hook)",
    )
}

impl LoopbackSession {
    fn now(&self) -> Option<Instant> {
        self.hub.timed.then(Instant::now)
    }

    /// Turns a queued item into the engine's event, applying and counting its fault.
    fn hand_out(&self, item: Item) -> Event {
        match item {
            Item::Accepted(tag) => Event::Accepted { tag },
            Item::Refused(tag, why) => Event::Refused {
                tag,
                failure: Failure::new(ErrorKind::SendFailed, why),
            },
            Item::Reply(tag) => Event::Reply { tag },
            Item::Push(mut body, mark) => {
                match mark {
                    Mark::Clean => {}
                    Mark::Corrupt => {
                        let last = body.pop();
                        body.push(if last == Some('x') { 'y' } else { 'x' });
                        self.hub.count(Fault::Corrupted);
                    }
                    Mark::Copy => self.hub.count(Fault::Duplicated),
                    Mark::Reordered => self.hub.count(Fault::Reordered),
                }
                Event::Delivered { body: body.into() }
            }
        }
    }
}

impl Drop for LoopbackSession {
    fn drop(&mut self) {
        let mut st = lock(&self.mailbox.state);
        st.online = false;
        st.last_ready = None;
        self.hub.unhold(&mut st);
        let queue = std::mem::take(&mut st.queue);
        for q in queue {
            match q.item {
                Item::Push(body, Mark::Reordered) => {
                    self.hub.count(Fault::Dropped);
                    st.store.push(body);
                }
                Item::Push(body, Mark::Clean | Mark::Corrupt) => st.store.push(body),
                Item::Push(_, Mark::Copy)
                | Item::Accepted(_)
                | Item::Refused(..)
                | Item::Reply(_) => {}
            }
        }
    }
}

impl Session for LoopbackSession {
    type Resume = ();

    async fn send(&mut self, tag: u64, dest: Dest<'_>, body: &str) -> Result<(), Failure> {
        assert!(
            !self.panics,
            "loopback: injected panic in the send of user {}",
            self.ix
        );
        match self.cut {
            Cut::No => {}
            Cut::AtSend => {
                self.cut = Cut::Broken;
                return Ok(());
            }
            Cut::Broken => return Err(reset()),
        }
        let now = self.now();
        match dest {
            Dest::User(id) => {
                let users = self.hub.users.read().unwrap_or_else(|p| p.into_inner());
                match users.get(id) {
                    Some(mb) => self.hub.push(mb, (self.ix, DIRECT), body, now),
                    None => {
                        drop(users);
                        let mb = self.hub.mailbox(id);
                        self.hub.push(&mb, (self.ix, DIRECT), body, now);
                    }
                }
            }
            Dest::Group(name) => {
                let group = self
                    .hub
                    .groups
                    .read()
                    .unwrap_or_else(|p| p.into_inner())
                    .get(name)
                    .cloned();
                let Some(group) = group else {
                    let item = Item::Refused(tag, "no such group");
                    self.hub.answer(&self.mailbox, item, now);
                    return Ok(());
                };
                let members = group.members.read().unwrap_or_else(|p| p.into_inner());
                for mb in members.iter().filter(|m| !Arc::ptr_eq(m, &self.mailbox)) {
                    self.hub.push(mb, (self.ix, group.id), body, now);
                }
            }
        }
        self.hub.answer(&self.mailbox, Item::Accepted(tag), now);
        Ok(())
    }

    async fn request(&mut self, tag: u64, _name: &'static str) -> Result<(), Failure> {
        let now = self.now();
        self.hub.answer(&self.mailbox, Item::Reply(tag), now);
        Ok(())
    }

    async fn heartbeat(&mut self) -> Result<(), Failure> {
        Ok(())
    }

    async fn flush(&mut self) -> Result<(), Failure> {
        match self.cut {
            Cut::Broken => Err(reset()),
            Cut::No | Cut::AtSend => Ok(()),
        }
    }

    async fn join(&mut self, group: &str) -> Result<(), Failure> {
        let g = {
            let mut groups = self.hub.groups.write().unwrap_or_else(|p| p.into_inner());
            let id = groups.len() as u32;
            groups
                .entry(group.into())
                .or_insert_with(|| {
                    Arc::new(Group {
                        id,
                        members: RwLock::default(),
                    })
                })
                .clone()
        };
        let mut members = g.members.write().unwrap_or_else(|p| p.into_inner());
        if !members.iter().any(|m| Arc::ptr_eq(m, &self.mailbox)) {
            members.push(self.mailbox.clone());
        }
        Ok(())
    }

    async fn fetch_missed(&mut self, out: &mut Vec<String>) -> Result<(), Failure> {
        let mut st = lock(&self.mailbox.state);
        self.hub.unhold(&mut st);
        out.append(&mut st.store);
        Ok(())
    }

    async fn next_event(&mut self) -> Event {
        if self.cut == Cut::Broken {
            return Event::Closed(reset());
        }
        loop {
            let wait = {
                let mut st = lock(&self.mailbox.state);
                match st.queue.front().map(|q| q.ready) {
                    None => None,
                    Some(Some(t)) if t > Instant::now() => Some(t),
                    Some(_) => {
                        if let Some(q) = st.queue.pop_front() {
                            drop(st);
                            return self.hand_out(q.item);
                        }
                        None
                    }
                }
            };
            match wait {
                Some(t) => {
                    tokio::select! {
                        _ = self.mailbox.notify.notified() => {}
                        _ = tokio::time::sleep_until(t) => {}
                    }
                }
                None => self.mailbox.notify.notified().await,
            }
        }
    }

    async fn close(self) {}

    fn into_resume(self) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::Driver;

    fn parse(text: &str) -> Result<LoopbackOptions, OptionError> {
        LoopbackOptions::parse(&text.parse::<toml::Table>().expect("test TOML"))
    }

    fn user(ix: UserIx) -> UserCtx {
        UserCtx {
            ix,
            id: format!("u{ix}"),
        }
    }

    async fn connect(d: &LoopbackDriver, ix: UserIx) -> LoopbackSession {
        d.connect(&user(ix), ())
            .await
            .expect("loopback connects")
            .session
    }

    /// Every event already queued, without waiting.
    fn ready_events(s: &mut LoopbackSession) -> Vec<Event> {
        use futures_util::FutureExt;
        std::iter::from_fn(|| s.next_event().now_or_never()).collect()
    }

    fn bodies(events: &[Event]) -> Vec<&str> {
        events
            .iter()
            .filter_map(|e| match e {
                Event::Delivered { body } => Some(body.as_str()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn parses_every_option() {
        let o = parse(
            "latency = \"2ms\"\njitter = \"1ms\"\nloss = 0.1\ndrop = 0.2\nduplicate = 0.1\n\
             reorder = 0.1\ncorrupt = 0\nseed = 7",
        )
        .expect("valid options");
        assert_eq!(o.latency, Duration::from_millis(2));
        assert_eq!(o.jitter, Duration::from_millis(1));
        assert_eq!(
            (o.loss, o.drop, o.duplicate, o.reorder),
            (0.1, 0.2, 0.1, 0.1)
        );
        assert_eq!((o.corrupt, o.seed), (0.0, 7));
        assert_eq!(parse("").expect("empty"), LoopbackOptions::default());
    }

    #[test]
    fn option_errors_name_the_key() {
        for (text, key, words) in [
            ("lose = 0.1", "target.loopback.lose", "allowed: latency"),
            ("loss = 1.5", "target.loopback.loss", "between 0 and 1"),
            ("loss = \"x\"", "target.loopback.loss", "probability"),
            ("latency = 5", "target.loopback.latency", "duration"),
            (
                "jitter = \"soon\"",
                "target.loopback.jitter",
                "not a duration",
            ),
            ("seed = -1", "target.loopback.seed", "integer"),
            (
                "loss = 0.6\ncorrupt = 0.6",
                "target.loopback.corrupt",
                "add up to",
            ),
        ] {
            let e = parse(text).expect_err(text);
            assert_eq!(e.key, key, "{text}");
            assert!(e.msg.contains(words), "{text}: {}", e.msg);
        }
    }

    #[tokio::test]
    async fn offline_messages_are_fetched_once_and_never_pushed() {
        let d = LoopbackDriver::with_options(LoopbackOptions::default());
        let mut a = connect(&d, 0).await;
        a.send(1, Dest::User("u1"), "m0").await.expect("send");
        let mut b = connect(&d, 1).await;
        a.send(2, Dest::User("u1"), "m1").await.expect("send");
        let mut missed = Vec::new();
        b.fetch_missed(&mut missed).await.expect("fetch");
        assert_eq!(missed, ["m0"]);
        b.fetch_missed(&mut missed).await.expect("fetch");
        assert_eq!(missed, ["m0"]);
        assert_eq!(bodies(&ready_events(&mut b)), ["m1"]);
        let acks = ready_events(&mut a);
        assert!(matches!(
            acks[..],
            [Event::Accepted { tag: 1 }, Event::Accepted { tag: 2 }]
        ));
    }

    #[tokio::test]
    async fn pushes_queued_at_close_are_stored_for_the_next_connection() {
        let d = LoopbackDriver::with_options(LoopbackOptions::default());
        let mut a = connect(&d, 0).await;
        let b = connect(&d, 1).await;
        a.send(1, Dest::User("u1"), "m0").await.expect("send");
        b.close().await;
        let mut b = connect(&d, 1).await;
        let mut missed = Vec::new();
        b.fetch_missed(&mut missed).await.expect("fetch");
        assert_eq!(missed, ["m0"]);
        assert!(ready_events(&mut b).is_empty());
    }

    #[tokio::test]
    async fn groups_push_to_members_but_the_sender() {
        let d = LoopbackDriver::with_options(LoopbackOptions::default());
        let mut s = [
            connect(&d, 0).await,
            connect(&d, 1).await,
            connect(&d, 2).await,
        ];
        for x in &mut s[..2] {
            x.join("g").await.expect("join");
        }
        s[0].send(1, Dest::Group("g"), "hi").await.expect("send");
        s[0].send(2, Dest::Group("nope"), "hi").await.expect("send");
        assert_eq!(bodies(&ready_events(&mut s[1])), ["hi"]);
        assert!(ready_events(&mut s[2]).is_empty());
        let own = ready_events(&mut s[0]);
        assert!(bodies(&own).is_empty());
        assert!(matches!(own[1], Event::Refused { tag: 2, .. }));
    }

    #[tokio::test]
    async fn reorder_releases_the_held_push_after_the_next_of_its_conversation() {
        let d = LoopbackDriver::with_options(LoopbackOptions {
            reorder: 1.0,
            ..LoopbackOptions::default()
        });
        let mut a = connect(&d, 0).await;
        let mut c = connect(&d, 2).await;
        let mut b = connect(&d, 1).await;
        a.send(1, Dest::User("u1"), "a0").await.expect("send");
        c.send(1, Dest::User("u1"), "c0").await.expect("send");
        a.send(2, Dest::User("u1"), "a1").await.expect("send");
        assert_eq!(bodies(&ready_events(&mut b)), ["c0", "a1", "a0"]);
        a.send(3, Dest::User("u1"), "a2").await.expect("send");
        let mut missed = Vec::new();
        b.fetch_missed(&mut missed).await.expect("fetch");
        assert_eq!(missed, ["a2"]);
        let injected = d.hub().injected();
        assert_eq!((injected.reordered, injected.dropped), (1, 1));
    }

    #[tokio::test]
    async fn corruption_changes_the_last_byte_and_duplicates_are_extra_copies() {
        let d = LoopbackDriver::with_options(LoopbackOptions {
            corrupt: 1.0,
            ..LoopbackOptions::default()
        });
        let mut a = connect(&d, 0).await;
        let mut b = connect(&d, 1).await;
        a.send(1, Dest::User("u1"), "abc").await.expect("send");
        assert_eq!(bodies(&ready_events(&mut b)), ["abx"]);
        assert_eq!(d.hub().injected().corrupted, 1);

        let d = LoopbackDriver::with_options(LoopbackOptions {
            duplicate: 1.0,
            ..LoopbackOptions::default()
        });
        let mut a = connect(&d, 0).await;
        let mut b = connect(&d, 1).await;
        a.send(1, Dest::User("u1"), "abc").await.expect("send");
        assert_eq!(bodies(&ready_events(&mut b)), ["abc", "abc"]);
        assert_eq!(d.hub().injected().duplicated, 1);
    }

    #[tokio::test]
    async fn store_twice_hands_an_offline_user_two_copies() {
        let d = LoopbackDriver::with_options(LoopbackOptions {
            store_twice: 1.0,
            ..LoopbackOptions::default()
        });
        let mut a = connect(&d, 0).await;
        a.send(1, Dest::User("u1"), "abc").await.expect("send");
        let mut b = connect(&d, 1).await;
        let mut out = Vec::new();
        b.fetch_missed(&mut out).await.expect("fetch");
        assert_eq!(out, ["abc", "abc"]);
        assert_eq!(d.hub().injected().stored_twice, 1);
        assert_eq!(d.hub().injected().duplicated, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn latency_delays_events_and_jitter_keeps_their_order() {
        let d = LoopbackDriver::with_options(LoopbackOptions {
            latency: Duration::from_millis(10),
            jitter: Duration::from_millis(50),
            ..LoopbackOptions::default()
        });
        let mut a = connect(&d, 0).await;
        let mut b = connect(&d, 1).await;
        let start = Instant::now();
        for i in 0..20u64 {
            a.send(i, Dest::User("u1"), &i.to_string())
                .await
                .expect("send");
        }
        assert!(ready_events(&mut b).is_empty());
        let mut got = Vec::new();
        for _ in 0..20 {
            if let Event::Delivered { body } = b.next_event().await {
                got.push(body.parse::<u64>().expect("number"));
            }
        }
        assert_eq!(got, (0..20).collect::<Vec<_>>());
        let took = start.elapsed();
        assert!(
            took >= Duration::from_millis(10) && took <= Duration::from_millis(61),
            "{took:?}"
        );
    }
}
