//! The in-process server every loopback session talks to ([`Hub`]): groups, one mailbox per
//! user, what offline users miss, and the faults a push may suffer (decided per user from
//! the seed, so a run repeats).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::{Injected, LoopbackOptions};
use crate::vocab::UserIx;

/// The in-process server every loopback session talks to.
#[derive(Debug)]
pub struct Hub {
    pub(super) opts: LoopbackOptions,
    /// Events are delayed (latency or jitter set).
    pub(super) timed: bool,
    /// Every user seen, by wire id.
    pub(super) users: RwLock<HashMap<Box<str>, Arc<Mailbox>>>,
    /// Every group, by name.
    pub(super) groups: RwLock<HashMap<Box<str>, Arc<Group>>>,
    /// What was injected, indexed by [`Fault`].
    pub(super) injected: [AtomicU64; 6],
    /// Each user's contacts, by wire id (mutual: both sides are listed).
    pub(super) contacts: RwLock<HashMap<Box<str>, Vec<Box<str>>>>,
}

/// A group: an id (for conversation keys) and its members.
#[derive(Debug)]
pub(super) struct Group {
    pub(super) id: u32,
    pub(super) members: RwLock<Vec<Arc<Mailbox>>>,
}

/// One user's side of the hub.
#[derive(Debug)]
pub(super) struct Mailbox {
    pub(super) state: Mutex<MailboxState>,
    /// Woken when an event is queued.
    pub(super) notify: Notify,
}

#[derive(Debug)]
pub(super) struct MailboxState {
    /// A session is connected.
    pub(super) online: bool,
    /// Logins tried so far.
    pub(super) logins: u32,
    /// Events for the connected session, in order.
    pub(super) queue: VecDeque<Queued>,
    /// When the last queued event becomes ready (delivery order survives jitter).
    pub(super) last_ready: Option<Instant>,
    /// Messages for the next `fetch_missed`.
    pub(super) store: Vec<String>,
    /// A push held back by the reorder fault, with its conversation.
    pub(super) held: Option<(Conv, String)>,
    /// Fault decisions for pushes to this user.
    pub(super) rng: fastrand::Rng,
}

/// A conversation: the sender and the group id, or [`DIRECT`].
pub(super) type Conv = (UserIx, u32);

/// The group id of direct messages in a [`Conv`].
pub(super) const DIRECT: u32 = u32::MAX;

/// An event waiting in a mailbox.
#[derive(Debug)]
pub(super) struct Queued {
    /// When it may be handed out (`None`: at once).
    pub(super) ready: Option<Instant>,
    pub(super) item: Item,
}

#[derive(Debug)]
pub(super) enum Item {
    Accepted(u64),
    Refused(u64, &'static str),
    Reply(u64),
    Push(String, Mark),
}

/// What a queued push is, for the fault counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mark {
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
pub(super) enum Fault {
    Lost,
    Dropped,
    Duplicated,
    Reordered,
    Corrupted,
    StoredTwice,
}

/// The decision for one push.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Decision {
    Deliver,
    Lose,
    Drop,
    Duplicate,
    Reorder,
    Corrupt,
}

/// Locks a mutex; a poisoned one (a panicking user task) still yields its data.
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// FNV-1a of a user id, to seed its fault decisions.
pub(super) fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

impl Hub {
    pub(super) fn new(opts: LoopbackOptions) -> Self {
        Hub {
            timed: !opts.latency.is_zero() || !opts.jitter.is_zero(),
            opts,
            users: RwLock::default(),
            groups: RwLock::default(),
            injected: Default::default(),
            contacts: RwLock::default(),
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

    pub(super) fn count(&self, f: Fault) {
        self.injected[f as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// The group named `name`, when it exists.
    pub(super) fn group(&self, name: &str) -> Option<Arc<Group>> {
        self.groups
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .cloned()
    }

    /// The mailbox of `id`, created when first needed.
    pub(super) fn mailbox(&self, id: &str) -> Arc<Mailbox> {
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
    pub(super) fn ready_at(&self, now: Option<Instant>, extra: Duration) -> Option<Instant> {
        now.map(|n| n + self.opts.latency + extra)
    }

    /// Pushes `body` of conversation `conv` to the user of `mb`: queued when online (after
    /// the fault decision), stored otherwise.
    pub(super) fn push(&self, mb: &Mailbox, conv: Conv, body: &str, now: Option<Instant>) {
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
    pub(super) fn decide(&self, rng: &mut fastrand::Rng) -> Decision {
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

    /// Queues `body` for the user of `mb` when it is online (no fault, nothing stored).
    pub(super) fn push_live(&self, mb: &Mailbox, body: &str, now: Option<Instant>) {
        let mut st = lock(&mb.state);
        if st.online {
            let ready = self.ready_at(now, Duration::ZERO);
            st.enqueue(ready, Item::Push(body.to_owned(), Mark::Clean));
            drop(st);
            mb.notify.notify_one();
        }
    }

    /// Queues an event for the session of `mb` itself (acceptances, replies).
    pub(super) fn answer(&self, mb: &Mailbox, item: Item, now: Option<Instant>) {
        let ready = self.ready_at(now, Duration::ZERO);
        lock(&mb.state).enqueue(ready, item);
        mb.notify.notify_one();
    }

    /// Moves a held push to the store: it was withheld, not reordered.
    pub(super) fn unhold(&self, st: &mut MailboxState) {
        if let Some((_, body)) = st.held.take() {
            self.count(Fault::Dropped);
            st.store.push(body);
        }
    }
}

impl MailboxState {
    pub(super) fn enqueue(&mut self, ready: Option<Instant>, item: Item) {
        let ready = match (ready, self.last_ready) {
            (Some(r), Some(last)) => Some(r.max(last)),
            (r, _) => r,
        };
        self.last_ready = ready;
        self.queue.push_back(Queued { ready, item });
    }
}
