//! Fault injection: into pushes (the store keeps the message, so sync repairs every drop),
//! and one into storage (`dup_store`: a message stored twice); the `--faults` spec, the
//! seeded decision per push or message, reorder holds, and the JSONL fault log.
//!
//! The decision for a push is a pure function of (seed, conversation, seq, recipient) —
//! a hash, not a shared RNG stream consumed in arrival order — so two runs with the same
//! `--fault-seed` and the same traffic fault the same pushes, however their pushes
//! interleave; the decision to store a message twice, of (seed, conversation, seq).

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::extract::ws::Utf8Bytes;

use super::metrics::Metrics;
use crate::error::{Error, Result};

/// Probabilities of each fault per push; at most one fault hits a push, tried in the
/// order drop, dup, reorder, corrupt, delay. And the probability that a message is stored
/// twice.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FaultSpec {
    /// Push not sent.
    pub drop: f64,
    /// Push sent twice.
    pub dup: f64,
    /// Push held and sent after the next push to the same recipient.
    pub reorder: f64,
    /// Last character of the body replaced.
    pub corrupt: f64,
    /// Push sent after this delay, with this probability.
    pub delay: Option<(Duration, f64)>,
    /// Message stored twice: a second copy with the next seq, pushed and synced as any
    /// message (a server that stores a retried send again).
    pub dup_store: f64,
}

impl FaultSpec {
    /// Parses `drop=P,dup=P,reorder=P,corrupt=P,delay=DUR@P,dup_store=P` (any subset;
    /// empty = none).
    pub fn parse(s: &str) -> Result<FaultSpec, String> {
        let mut spec = FaultSpec::default();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| format!("`{part}`: write KIND=PROBABILITY, e.g. drop=0.001"))?;
            let prob = |v: &str| -> Result<f64, String> {
                v.parse::<f64>()
                    .ok()
                    .filter(|p| (0.0..=1.0).contains(p))
                    .ok_or_else(|| format!("`{part}`: probability must be between 0 and 1"))
            };
            match key {
                "drop" => spec.drop = prob(value)?,
                "dup" => spec.dup = prob(value)?,
                "reorder" => spec.reorder = prob(value)?,
                "corrupt" => spec.corrupt = prob(value)?,
                "dup_store" => spec.dup_store = prob(value)?,
                "delay" => {
                    let (dur, p) = value.split_once('@').ok_or_else(|| {
                        format!("`{part}`: write delay=DURATION@P, e.g. 200ms@0.01")
                    })?;
                    let dur = humantime::parse_duration(dur)
                        .map_err(|e| format!("`{part}`: bad duration: {e}"))?;
                    spec.delay = Some((dur, prob(p)?));
                }
                _ => {
                    return Err(format!(
                        "`{key}`: unknown fault; use drop, dup, reorder, corrupt, delay or \
                         dup_store"
                    ))
                }
            }
        }
        Ok(spec)
    }

    /// True when some fault has a non-zero probability.
    pub fn any(&self) -> bool {
        self.pushes() || self.dup_store > 0.0
    }

    /// True when some fault of pushes has a non-zero probability.
    fn pushes(&self) -> bool {
        self.drop + self.dup + self.reorder + self.corrupt + self.delay.map_or(0.0, |d| d.1) > 0.0
    }
}

/// What to do with one push.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Send it normally.
    Deliver,
    /// Do not send it.
    Drop,
    /// Send it twice.
    Dup,
    /// Hold it until the next push to the same recipient.
    Hold,
    /// Send it with a changed body.
    Corrupt,
    /// Send it later.
    Delay(Duration),
}

/// What a push carries, as faults see it: the key and number its fault is decided by
/// (a message's conversation and seq; for a signal, a key that no conversation can have —
/// `r:`, `p:` or `t:` and a user id — and that user's receipt, presence or typing number),
/// its sender, and which signal it is (`None`: a message).
#[derive(Debug, Clone, Copy)]
pub struct Origin<'a> {
    /// The conversation, or the signal's key.
    pub key: &'a str,
    /// The seq, or the signal's number.
    pub seq: u64,
    /// Its sender.
    pub from: &'a str,
    /// `receipt`, `presence` or `typing`; `None` for a message.
    pub signal: Option<&'static str>,
}

/// A push held back by a reorder fault.
#[derive(Debug, Clone)]
pub struct Held {
    /// The serialized frame.
    pub frame: Utf8Bytes,
    key: String,
    seq: u64,
    from: String,
    signal: Option<&'static str>,
    since: Instant,
}

impl Held {
    /// A held push of `frame` (carrying `origin`), held from now.
    pub fn new(frame: Utf8Bytes, origin: &Origin<'_>) -> Self {
        Held {
            frame,
            key: origin.key.to_owned(),
            seq: origin.seq,
            from: origin.from.to_owned(),
            signal: origin.signal,
            since: Instant::now(),
        }
    }

    /// What the held push carries.
    pub fn origin(&self) -> Origin<'_> {
        Origin {
            key: &self.key,
            seq: self.seq,
            from: &self.from,
            signal: self.signal,
        }
    }
}

/// One line of the fault log.
#[derive(Debug, serde::Serialize)]
pub struct FaultRecord<'a> {
    /// `drop`, `dup`, `reorder`, `reorder_timeout`, `corrupt`, `delay` or `dup_store`.
    pub kind: &'static str,
    /// Conversation of the affected message (the fault key of a signal: `r:`, `p:` or
    /// `t:` and a user id).
    pub conv: &'a str,
    /// Its seq (a signal's number).
    pub seq: u64,
    /// The user whose push was affected.
    pub recipient: &'a str,
    /// The message's sender.
    pub from: &'a str,
    /// The signal (`receipt`, `presence`, `typing`); absent for a message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<&'static str>,
    /// For `reorder`: the seq of the push it was sent after.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after_seq: Option<u64>,
    /// For `reorder`: the conversation of the push it was sent after.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after_conv: Option<&'a str>,
    /// For `delay`: milliseconds of delay.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
    /// For `dup_store`: the seq of the second copy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub copy_seq: Option<u64>,
}

impl<'a> FaultRecord<'a> {
    /// A record of a fault of `kind` on the push of `origin` to `recipient`.
    pub fn new(kind: &'static str, origin: &Origin<'a>, recipient: &'a str) -> Self {
        FaultRecord {
            kind,
            conv: origin.key,
            seq: origin.seq,
            recipient,
            from: origin.from,
            signal: origin.signal,
            after_seq: None,
            after_conv: None,
            delay_ms: None,
            copy_seq: None,
        }
    }
}

/// The fault injector of one server.
pub struct Faults {
    spec: FaultSpec,
    users: HashSet<String>,
    seed: u64,
    held: Mutex<HashMap<String, Held>>,
    log: Option<Mutex<File>>,
}

impl std::fmt::Debug for Faults {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Faults")
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

impl Faults {
    /// An injector for `spec`, limited to `users` (all when empty), logging to `log`.
    pub fn new(
        spec: FaultSpec,
        users: &[String],
        seed: Option<u64>,
        log: Option<&Path>,
    ) -> Result<Self> {
        let log = match log {
            Some(path) => Some(Mutex::new(
                File::options()
                    .create(true)
                    .append(true)
                    .open(path)
                    .map_err(|e| Error::io(path, e))?,
            )),
            None => None,
        };
        let seed = seed.unwrap_or_else(|| {
            let s = fastrand::u64(..);
            if spec.any() {
                tracing::info!("fault seed: {s} (repeat the faults with --fault-seed {s})");
            }
            s
        });
        Ok(Faults {
            spec,
            users: users.iter().cloned().collect(),
            seed,
            held: Mutex::new(HashMap::new()),
            log,
        })
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Held>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// True when pushes to `recipient` may get faults.
    pub fn targets(&self, recipient: &str) -> bool {
        self.spec.pushes() && (self.users.is_empty() || self.users.contains(recipient))
    }

    /// Whether message `conv`/`seq` is stored twice: the same for the same seed, whenever
    /// it is asked (`--fault-users` does not limit it: it happens before any push).
    pub fn stores_twice(&self, conv: &str, seq: u64) -> bool {
        // No user id is empty, so this never collides with a push's decision.
        self.spec.dup_store > 0.0 && unit(self.seed, conv, seq, "") < self.spec.dup_store
    }

    /// True when reorder holds are possible (a release timer is needed).
    pub fn reorders(&self) -> bool {
        self.spec.reorder > 0.0
    }

    /// The fault of the push of message `conv`/`seq` to `recipient`: the same for the
    /// same seed, whenever and in whatever order it is asked.
    pub fn decide(&self, conv: &str, seq: u64, recipient: &str) -> Decision {
        let r = unit(self.seed, conv, seq, recipient);
        let s = &self.spec;
        let mut edge = s.drop;
        if r < edge {
            return Decision::Drop;
        }
        edge += s.dup;
        if r < edge {
            return Decision::Dup;
        }
        edge += s.reorder;
        if r < edge {
            return Decision::Hold;
        }
        edge += s.corrupt;
        if r < edge {
            return Decision::Corrupt;
        }
        match s.delay {
            Some((d, p)) if r < edge + p => Decision::Delay(d),
            _ => Decision::Deliver,
        }
    }

    /// Holds a push for `recipient` (at most one per recipient: the caller took the
    /// previous one first).
    pub fn hold(&self, recipient: &str, held: Held) {
        self.lock().insert(recipient.to_owned(), held);
    }

    /// Takes the push held for `recipient`, if any.
    pub fn take_held(&self, recipient: &str) -> Option<Held> {
        let mut held = self.lock();
        if held.is_empty() {
            return None;
        }
        held.remove(recipient)
    }

    /// Takes every push held longer than `max_age` (all when `max_age` is zero).
    pub fn take_expired(&self, max_age: Duration) -> Vec<(String, Held)> {
        let mut held = self.lock();
        let expired: Vec<String> = held
            .iter()
            .filter(|(_, h)| h.since.elapsed() >= max_age)
            .map(|(r, _)| r.clone())
            .collect();
        expired
            .into_iter()
            .filter_map(|r| held.remove(&r).map(|h| (r, h)))
            .collect()
    }

    /// Counts a fault and appends it to the log (one `write` per line, so the file is
    /// complete as soon as this returns).
    pub fn record(&self, metrics: &Metrics, rec: &FaultRecord<'_>) {
        metrics.fault(rec.kind, rec.signal);
        let Some(log) = &self.log else { return };
        let Ok(mut line) = serde_json::to_string(rec) else {
            return;
        };
        line.push('\n');
        let mut f = log.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(e) = f.write_all(line.as_bytes()) {
            tracing::warn!("cannot write the fault log: {e}");
        }
    }
}

/// A number in [0, 1) from (seed, conv, seq, recipient): FNV-1a over the parts (each
/// ended by a separator byte, so parts cannot run into each other), then a splitmix64
/// finish so that nearby inputs land far apart. Stable across builds and platforms.
fn unit(seed: u64, conv: &str, seq: u64, recipient: &str) -> f64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes.iter().chain(std::iter::once(&0xffu8)) {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    eat(&seed.to_le_bytes());
    eat(conv.as_bytes());
    eat(&seq.to_le_bytes());
    eat(recipient.as_bytes());
    let mut z = h.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    // The top 53 bits, exactly representable in an f64.
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// The body (or note) with its last character replaced by a different ASCII letter (an empty body
/// becomes `x`), so the result stays valid UTF-8 and the front of the body is unchanged.
pub fn corrupt_body(body: &str) -> String {
    match body.char_indices().last() {
        None => "x".to_owned(),
        Some((i, c)) => {
            let mut s = String::with_capacity(body.len());
            s.push_str(&body[..i]);
            s.push(if c == 'a' { 'b' } else { 'a' });
            s
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_parses_every_kind() {
        let s = FaultSpec::parse("drop=0.001,dup=0.5,reorder=0.25,corrupt=0.0005,delay=200ms@0.01")
            .expect("valid spec");
        assert_eq!(s.drop, 0.001);
        assert_eq!(s.dup, 0.5);
        assert_eq!(s.delay, Some((Duration::from_millis(200), 0.01)));
        assert!(s.any());
        assert!(!FaultSpec::parse("").expect("empty").any());
        assert!(FaultSpec::parse("drop=2").is_err());
        assert!(FaultSpec::parse("lose=0.1").is_err());
        assert!(FaultSpec::parse("delay=0.1").is_err());
        let s = FaultSpec::parse("dup_store=0.25").expect("storage fault");
        assert_eq!(s.dup_store, 0.25);
        assert!(s.any());
    }

    /// A message stored twice is decided per message by the seed, apart from the faults of
    /// its pushes: with only `dup_store`, no push is faulted.
    #[test]
    fn storing_twice_is_decided_per_message() {
        let faults = |seed| {
            Faults::new(
                FaultSpec::parse("dup_store=0.5").expect("spec"),
                &[],
                Some(seed),
                None,
            )
            .expect("no log")
        };
        let twice = |f: &Faults| {
            (0..64)
                .map(|s| f.stores_twice("d:a:b", s))
                .collect::<Vec<_>>()
        };
        let (a, b) = (faults(3), faults(3));
        let n = twice(&a).iter().filter(|t| **t).count();
        assert!((16..=48).contains(&n), "about half: {n}");
        assert_eq!(twice(&a), twice(&b), "the same seed, the same messages");
        assert_ne!(twice(&a), twice(&faults(4)), "another seed, other messages");
        assert!(!a.targets("b"), "no push faults");
    }

    #[test]
    fn certain_faults_always_fire_and_decisions_depend_only_on_the_push() {
        let f = Faults::new(
            FaultSpec::parse("drop=1").expect("spec"),
            &[],
            Some(1),
            None,
        )
        .expect("no log");
        assert!((0..100).all(|s| f.decide("d:a:b", s, "b") == Decision::Drop));
        let faults = |seed| {
            Faults::new(
                FaultSpec::parse("dup=0.5").expect("spec"),
                &[],
                Some(seed),
                None,
            )
            .expect("no log")
        };
        let (a, b) = (faults(7), faults(7));
        let forward: Vec<_> = (0..64).map(|s| a.decide("g:t", s, "u1")).collect();
        let backward: Vec<_> = (0..64).rev().map(|s| b.decide("g:t", s, "u1")).collect();
        assert_eq!(
            forward,
            backward.into_iter().rev().collect::<Vec<_>>(),
            "order of asking does not matter"
        );
        let dups = forward.iter().filter(|d| **d == Decision::Dup).count();
        assert!((16..=48).contains(&dups), "about half: {dups}");
        let other: Vec<_> = (0..64).map(|s| faults(8).decide("g:t", s, "u1")).collect();
        assert_ne!(forward, other, "another seed, other faults");
        let u2: Vec<_> = (0..64).map(|s| a.decide("g:t", s, "u2")).collect();
        assert_ne!(
            forward, u2,
            "recipients of one message get independent faults"
        );
    }

    #[test]
    fn targeting_limits_recipients() {
        let users = vec!["u7".to_owned()];
        let f = Faults::new(
            FaultSpec::parse("drop=1").expect("spec"),
            &users,
            None,
            None,
        )
        .expect("no log");
        assert!(f.targets("u7"));
        assert!(!f.targets("u8"));
    }

    #[test]
    fn corruption_changes_only_the_end() {
        assert_eq!(corrupt_body("hello"), "hella");
        assert_eq!(corrupt_body("aa"), "ab");
        assert_eq!(corrupt_body("hé"), "ha");
        assert_eq!(corrupt_body(""), "x");
    }
}
