//! Who is online, and pushing frames to them: every open connection's outbox by id,
//! every logged-in user's connections, and the fault injector between a commit and a push.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::extract::ws::Utf8Bytes;
use tokio::runtime::Handle;

use super::faults::{corrupt_body, Decision, FaultRecord, Faults, Held, Origin};
use super::metrics::Metrics;
use super::outbox::Outbox;
use crate::wire::{Msg, ServerFrame};

const SHARDS: usize = 16;

type Conns = Vec<(u64, Arc<Outbox>)>;

/// The registry of connections and online users.
#[derive(Debug)]
pub struct Hub {
    users: Vec<Mutex<HashMap<String, Conns>>>,
    conns: Mutex<HashMap<u64, Arc<Outbox>>>,
    hasher: RandomState,
    faults: Faults,
    metrics: Arc<Metrics>,
    runtime: Handle,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Serializes a server frame (serialization of these types cannot fail).
pub fn encode(frame: &ServerFrame) -> Utf8Bytes {
    Utf8Bytes::from(serde_json::to_string(frame).expect("server frames always serialize"))
}

impl Hub {
    /// An empty hub pushing through `faults`; delayed pushes run on `runtime`.
    pub fn new(faults: Faults, metrics: Arc<Metrics>, runtime: Handle) -> Self {
        Hub {
            users: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            conns: Mutex::new(HashMap::new()),
            hasher: RandomState::new(),
            faults,
            metrics,
            runtime,
        }
    }

    fn shard(&self, user: &str) -> MutexGuard<'_, HashMap<String, Conns>> {
        let i = usize::try_from(self.hasher.hash_one(user) % SHARDS as u64).unwrap_or(0);
        lock(&self.users[i])
    }

    /// Registers an open connection.
    pub fn add_conn(&self, id: u64, outbox: Arc<Outbox>) {
        lock(&self.conns).insert(id, outbox);
    }

    /// Forgets a connection (and its login, if `user` is given); true when that was the
    /// user's last connection.
    pub fn remove_conn(&self, id: u64, user: Option<&str>) -> bool {
        lock(&self.conns).remove(&id);
        let Some(user) = user else { return false };
        let mut shard = self.shard(user);
        let Some(list) = shard.get_mut(user) else {
            return false;
        };
        list.retain(|(c, _)| *c != id);
        let last = list.is_empty();
        if last {
            shard.remove(user);
        }
        last
    }

    /// Marks connection `id` as logged in as `user`.
    pub fn login(&self, user: &str, id: u64, outbox: Arc<Outbox>) {
        self.shard(user)
            .entry(user.to_owned())
            .or_default()
            .push((id, outbox));
    }

    /// Closes every connection's outbox with `reason`; returns how many were open.
    pub fn close_all(&self, reason: crate::wire::ErrorCode) -> usize {
        let all: Vec<Arc<Outbox>> = lock(&self.conns).values().cloned().collect();
        all.iter().for_each(|o| o.close(reason));
        all.len()
    }

    /// Number of open connections.
    pub fn conn_count(&self) -> usize {
        lock(&self.conns).len()
    }

    /// Queues `frame` on every connection of `user`, counted as a push of `signal` (`None`:
    /// a message).
    pub fn deliver(&self, user: &str, frame: &Utf8Bytes, signal: Option<&'static str>) {
        let targets: Vec<Arc<Outbox>> = match self.shard(user).get(user) {
            Some(list) => list.iter().map(|(_, o)| o.clone()).collect(),
            None => return,
        };
        for o in targets {
            if o.push(frame.clone()) == super::outbox::Pushed::Queued {
                self.metrics.pushed(signal);
            }
        }
    }

    /// True when `user` has an open, logged-in connection.
    pub fn is_online(&self, user: &str) -> bool {
        self.shard(user).contains_key(user)
    }

    /// Pushes a committed message (already serialized as `frame`) to `recipient`,
    /// applying faults when they target it (see [`Hub::push`]).
    pub fn push_msg(self: &Arc<Self>, recipient: &str, msg: &Msg, frame: &Utf8Bytes) {
        let origin = Origin {
            key: &msg.conv,
            seq: msg.seq,
            from: &msg.from,
            signal: None,
        };
        self.push(recipient, &origin, frame, || {
            let mut bad = msg.clone();
            bad.body = corrupt_body(&msg.body);
            encode(&ServerFrame::Msg(bad))
        });
    }

    /// Pushes `frame`, which carries `origin`, to `recipient`, applying faults when they
    /// target it (`corrupted` builds the frame with its body or note corrupted). The fault
    /// is decided for every push (it depends only on the seed, the origin's key and number,
    /// and `recipient`); a push held before for this recipient is sent right after this
    /// one when this one is sent now (overtaken by it: `reorder`), else right before it
    /// (`reorder_timeout`).
    pub fn push(
        self: &Arc<Self>,
        recipient: &str,
        origin: &Origin<'_>,
        frame: &Utf8Bytes,
        corrupted: impl FnOnce() -> Utf8Bytes,
    ) {
        let signal = origin.signal;
        if !self.faults.targets(recipient) || !self.is_online(recipient) {
            self.deliver(recipient, frame, signal);
            return;
        }
        let decision = self.faults.decide(origin.key, origin.seq, recipient);
        let mut earlier = self.faults.take_held(recipient);
        // Only a push sent now (once, twice or corrupted) overtakes a held one; otherwise
        // the held push goes out first, late but in order.
        let overtakes = matches!(
            decision,
            Decision::Deliver | Decision::Dup | Decision::Corrupt
        );
        if let Some(held) = earlier.take_if(|_| !overtakes) {
            self.release(recipient, &held);
        }
        let log = |kind| {
            self.faults
                .record(&self.metrics, &FaultRecord::new(kind, origin, recipient));
        };
        match decision {
            Decision::Deliver => self.deliver(recipient, frame, signal),
            Decision::Drop => log("drop"),
            Decision::Dup => {
                self.deliver(recipient, frame, signal);
                self.deliver(recipient, frame, signal);
                log("dup");
            }
            Decision::Hold => self
                .faults
                .hold(recipient, Held::new(frame.clone(), origin)),
            Decision::Corrupt => {
                self.deliver(recipient, &corrupted(), signal);
                log("corrupt");
            }
            Decision::Delay(d) => {
                let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
                let rec = FaultRecord {
                    delay_ms: Some(ms),
                    ..FaultRecord::new("delay", origin, recipient)
                };
                self.faults.record(&self.metrics, &rec);
                let hub = Arc::clone(self);
                let (user, frame) = (recipient.to_owned(), frame.clone());
                self.runtime.spawn(async move {
                    tokio::time::sleep(d).await;
                    hub.deliver(&user, &frame, signal);
                });
            }
        }
        let Some(held) = earlier else {
            return;
        };
        let before = held.origin();
        self.deliver(recipient, &held.frame, before.signal);
        let rec = FaultRecord {
            after_seq: Some(origin.seq),
            after_conv: Some(origin.key),
            ..FaultRecord::new("reorder", &before, recipient)
        };
        self.faults.record(&self.metrics, &rec);
    }

    /// Whether message `conv`/`seq` is stored twice (`dup_store`).
    pub fn stores_twice(&self, conv: &str, seq: u64) -> bool {
        self.faults.stores_twice(conv, seq)
    }

    /// Logs that `msg` was stored a second time as `copy_seq`, once per `recipient` it goes to.
    pub fn stored_twice<'a>(
        &self,
        msg: &Msg,
        copy_seq: u64,
        recipients: impl Iterator<Item = &'a str>,
    ) {
        let origin = Origin {
            key: &msg.conv,
            seq: msg.seq,
            from: &msg.from,
            signal: None,
        };
        for recipient in recipients {
            let rec = FaultRecord {
                copy_seq: Some(copy_seq),
                ..FaultRecord::new("dup_store", &origin, recipient)
            };
            self.faults.record(&self.metrics, &rec);
        }
    }

    /// Sends a held push that nothing overtook, logged as `reorder_timeout`.
    fn release(&self, recipient: &str, held: &Held) {
        let origin = held.origin();
        self.deliver(recipient, &held.frame, origin.signal);
        let rec = FaultRecord::new("reorder_timeout", &origin, recipient);
        self.faults.record(&self.metrics, &rec);
    }

    /// Sends every reorder-held push older than `max_age` (all when zero), logging each
    /// as `reorder_timeout`: no later push came to overtake it.
    pub fn release_held(&self, max_age: Duration) {
        for (recipient, held) in self.faults.take_expired(max_age) {
            self.release(&recipient, &held);
        }
    }

    /// True when reorder holds need a release timer.
    pub fn reorders(&self) -> bool {
        self.faults.reorders()
    }
}
