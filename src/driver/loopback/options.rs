//! The `[target.loopback]` options ([`LoopbackOptions`]): latency, jitter and the faults a
//! push may suffer.

use std::time::Duration;

use crate::driver::kit::options::Table;
use crate::driver::OptionError;
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
    /// Makes this user's [`Session::send`](crate::driver::Session::send) panic: a test hook for engine failures.
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
pub(super) const KEYS: [&str; 9] = [
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
        let t = Table::new(table, "loopback");
        t.only(&KEYS)?;
        let mut o = LoopbackOptions::default();
        if let Some(d) = t.duration("latency")? {
            o.latency = d;
        }
        if let Some(d) = t.duration("jitter")? {
            o.jitter = d;
        }
        for key in [
            "loss",
            "drop",
            "duplicate",
            "reorder",
            "corrupt",
            "store_twice",
        ] {
            if let Some(p) = t.number(key, "a probability from 0 to 1")? {
                if !(0.0..=1.0).contains(&p) {
                    return Err(t.out_of_range(key, "between 0 and 1", p));
                }
                *o.probability(key) = p;
            }
        }
        if let Some(seed) = t.int_in("seed", 0..=i64::MAX, "an integer ≥ 0")? {
            o.seed = seed as u64;
        }
        let sum = o.loss + o.drop + o.duplicate + o.reorder + o.corrupt;
        if sum > 1.0 {
            let last = ["corrupt", "reorder", "duplicate", "drop", "loss"]
                .into_iter()
                .find(|k| table.contains_key(*k))
                .unwrap_or("loss");
            return Err(t.bad(
                last,
                format!(
                    "the fault probabilities add up to {sum}; at most one fault hits a push, \
                     so they must add up to at most 1"
                ),
            ));
        }
        Ok(o)
    }

    pub(super) fn probability(&mut self, key: &str) -> &mut f64 {
        match key {
            "loss" => &mut self.loss,
            "drop" => &mut self.drop,
            "duplicate" => &mut self.duplicate,
            "reorder" => &mut self.reorder,
            "store_twice" => &mut self.store_twice,
            _ => &mut self.corrupt,
        }
    }

    pub(super) fn any_fault(&self) -> bool {
        self.loss + self.drop + self.duplicate + self.reorder + self.corrupt > 0.0
    }
}
