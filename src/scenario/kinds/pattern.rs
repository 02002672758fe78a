//! What every traffic kind is given and implements: [`Ctx`], one `[[traffic]]` entry being
//! validated with the checks kinds share; [`PatternKind`], a kind's checked numbers; and
//! [`Lowering`], what a kind draws its users and stream ids from.

use std::time::Duration;

use fastrand::Rng;
use toml::Spanned;

use crate::driver::Spec;
use crate::scenario::draw::Pool;
use crate::scenario::plan::{Sizes, StreamId, TrafficShape};
use crate::scenario::population::Pop;
use crate::scenario::schema::{Opt, Pick, TrafficSpec};
use crate::scenario::source::Source;
use crate::scenario::values::{at_least, count, positive, rate, show, MAX_DURATION, MIN_INTERVAL};
use crate::vocab::TrafficKind;
use crate::Result;

/// A kind's checked numbers: counts are checked, users are not chosen yet.
pub trait PatternKind: std::fmt::Debug {
    /// The streams the pattern adds to the plan (each sender's sequence into one
    /// conversation).
    fn streams(&self) -> u64;

    /// What the pattern adds to the plan when it stops after `duration`, if set, among
    /// `users`.
    fn load(&self, duration: Option<Duration>, users: u32) -> Load;

    /// The largest body it sends, bytes.
    fn max_body(&self) -> usize {
        0
    }

    /// The kind whose traffic it sends when that is not its own (drivers configured per
    /// kind are configured for that one).
    fn sends_as(&self) -> Option<TrafficKind> {
        None
    }

    /// A second kind whose traffic it sends besides its own (or its `sends_as` kind).
    fn also_sends(&self) -> Option<TrafficKind> {
        None
    }

    /// Whether it sends to the users' contacts (then the plan draws the contact graph).
    fn needs_contacts(&self) -> bool {
        false
    }

    /// How it sends into groups, if it does (for the warnings about room history).
    fn group_sends(&self) -> Option<GroupSends> {
        None
    }

    /// The pattern with its users chosen.
    fn lower(self: Box<Self>, cx: &mut Lowering<'_>) -> TrafficShape;
}

/// How a pattern sends into each of its groups.
#[derive(Debug, Clone, Copy)]
pub struct GroupSends {
    /// Senders per group.
    pub senders_per_group: u32,
    /// Messages per sender (`None`: until `duration`).
    pub messages: Option<u64>,
    /// Time between two sends of one sender.
    pub interval: Duration,
}

/// What patterns add to a plan: the user slots it lists, the stream × recipient pairs the
/// ledger tracks and the deliveries it schedules at most.
#[derive(Debug, Default)]
pub struct Load {
    /// User slots listed.
    pub listed: u64,
    /// Stream × recipient pairs.
    pub pairs: u64,
    /// Deliveries at most.
    pub deliveries: u128,
}

/// Sends of one sender bounded by `count`, by `duration` at one every `interval`, or both
/// (validation saw to it that one is set).
pub fn sends(count: Option<u64>, interval: Duration, duration: Option<Duration>) -> u128 {
    let by_time = duration.map(|d| d.as_nanos().div_ceil(interval.as_nanos().max(1)));
    match (count.map(u128::from), by_time) {
        (Some(c), Some(t)) => c.min(t),
        (Some(c), None) => c,
        (None, Some(t)) => t,
        (None, None) => 0,
    }
}

/// Where the kinds draw users and stream ids from while a plan is lowered.
pub struct Lowering<'a> {
    /// This pattern's own random source.
    pub rng: Rng,
    /// The scenario seed.
    pub seed: u64,
    /// Users of the population.
    pub users: u32,
    /// Users online throughout (senders are drawn from these).
    pub steady: Pool<'a>,
    /// The next free stream id.
    pub next_stream: StreamId,
    /// The next group number across the plan.
    pub next_group: u64,
    /// The contact graph, when a pattern sends to contacts.
    pub contacts: Option<std::sync::Arc<crate::scenario::plan::Contacts>>,
}

impl Lowering<'_> {
    /// Every user of the population.
    pub fn all(&self) -> Pool<'static> {
        Pool {
            n: self.users,
            excluded: &[],
        }
    }

    /// Takes `n` stream ids; returns the first.
    pub fn take_streams(&mut self, n: StreamId) -> StreamId {
        let base = self.next_stream;
        self.next_stream += n;
        base
    }

    /// The wire name of the next group of the plan.
    pub fn next_group_name(&mut self) -> String {
        let name = format!("g{:x}-{}", self.seed, self.next_group);
        self.next_group += 1;
        name
    }
}

/// One `[[traffic]]` entry being validated.
pub struct Ctx<'a> {
    /// The scenario text, for errors.
    pub src: &'a Source<'a>,
    /// Its index in `traffic`.
    pub i: usize,
    /// The entry as written.
    pub t: &'a TrafficSpec,
    /// The entry with its span.
    pub spanned: &'a Spanned<TrafficSpec>,
    /// The population.
    pub pop: &'a Pop,
    /// The driver.
    pub driver: &'static Spec,
}

impl Ctx<'_> {
    /// `traffic[i].k`.
    pub fn key(&self, k: &str) -> String {
        format!("traffic[{}].{k}", self.i)
    }

    /// An error at key `k` (or at the pattern's header when `k` is absent).
    pub fn at<T>(&self, v: &Opt<T>, k: &str, msg: impl Into<String>) -> crate::Error {
        let span = v.as_ref().map_or(self.spanned.span(), Spanned::span);
        self.src.error(span, self.key(k), msg)
    }

    /// The kind's name as written.
    pub fn kind(&self) -> &'static str {
        self.t.kind.get_ref().as_str()
    }

    /// A required count.
    pub fn required(&self, v: &Opt<i64>, k: &str, what: &str) -> Result<u32> {
        match v {
            Some(v) => self.src.value(v, self.key(k), count),
            None => Err(self.at(
                v,
                k,
                format!("a `{}` pattern needs `{k}` ({what})", self.kind()),
            )),
        }
    }

    /// A count of at most `max` of `pool`.
    pub fn at_most(&self, v: &Spanned<i64>, k: &str, max: u32, pool: &str) -> Result<u32> {
        let n = self.src.value(v, self.key(k), count)?;
        if n > max {
            return Err(self.src.at(v, self.key(k), format!("{n} > {max} {pool}")));
        }
        Ok(n)
    }

    /// A count drawn from the users online throughout (neither late nor churning).
    pub fn steady_count(&self, v: &Opt<i64>, k: &str, what: &str) -> Result<u32> {
        let n = self.required(v, k, what)?;
        let steady = self.pop.steady();
        if n > steady {
            return Err(self.at(
                v,
                k,
                format!(
                    "{n} > {steady} users online throughout (users {} − late {} − churning {}); \
                     senders are drawn from those",
                    self.pop.users, self.pop.late, self.pop.churn
                ),
            ));
        }
        Ok(n)
    }

    /// `pick`, random when absent.
    pub fn pick(&self) -> Pick {
        self.t
            .pick
            .as_ref()
            .map_or(Pick::default(), |p| *p.get_ref())
    }

    /// Refuses a pattern without `duration`.
    pub fn needs_duration(&self, duration: Option<Duration>) -> Result<()> {
        match duration {
            Some(_) => Ok(()),
            None => Err(self.at(
                &self.t.duration,
                "duration",
                format!("a `{}` pattern needs `duration`, e.g. \"20s\"", self.kind()),
            )),
        }
    }

    /// `messages`, which may be absent only when `duration` is set.
    pub fn messages(&self, duration: Option<Duration>) -> Result<Option<u64>> {
        match (&self.t.messages, duration) {
            (Some(m), _) => Ok(Some(u64::from(self.src.value(m, self.key("messages"), count)?))),
            (None, Some(_)) => Ok(None),
            (None, None) => Err(self.at(
                &self.t.messages,
                "messages",
                "set `messages` (how many to send), `duration` (how long), or both (whichever ends first)",
            )),
        }
    }

    /// Refuses `count` sends per sender one every `interval` that would not end within
    /// [`MAX_DURATION`] when no `duration` stops them (`per` names what multiplies
    /// `messages` into `count`).
    pub fn send_span(
        &self,
        count: Option<u64>,
        interval: Duration,
        duration: Option<Duration>,
        per: &str,
    ) -> Result<()> {
        let (Some(n), None) = (count, duration) else {
            return Ok(());
        };
        let span = interval.as_nanos() * u128::from(n.saturating_sub(1));
        if span <= MAX_DURATION.as_nanos() {
            return Ok(());
        }
        let secs = span as f64 / 1e9;
        Err(self.at(
            &self.t.messages,
            "messages",
            format!(
                "{n} sends ({per}messages) per sender, one every {}, take {secs:.0}s; a \
                 pattern's sends must end within 30 days: lower `messages`, raise the rate or \
                 set `duration`",
                show(interval)
            ),
        ))
    }

    /// The per-sender interval from `interval`, or from `rate` split over `senders`.
    pub fn pace(&self, senders: u32, who: &str) -> Result<Duration> {
        match (&self.t.interval, &self.t.rate) {
            (Some(i), None) => self
                .src
                .value(i, self.key("interval"), at_least(MIN_INTERVAL)),
            (None, Some(r)) => self.rate_pace(r, senders, who),
            (Some(_), Some(r)) => Err(self.src.at(
                r,
                self.key("rate"),
                "set either `interval` (per sender) or `rate` (total msgs/s), not both",
            )),
            (None, None) => Err(self.at(
                &None::<Spanned<()>>,
                "rate",
                "set `rate` (total msgs/s, e.g. 500) or `interval` (per sender, e.g. \"10ms\")",
            )),
        }
    }

    /// The per-sender interval of total rate `r` split over `senders`.
    fn rate_pace(&self, r: &Spanned<f64>, senders: u32, who: &str) -> Result<Duration> {
        let rate = self.src.value(r, self.key("rate"), rate)?;
        let secs = f64::from(senders) / rate;
        if secs < 1e-6 {
            return Err(self.src.at(
                r,
                self.key("rate"),
                format!(
                    "{rate}/s over {senders} {who} needs sends less than 1µs apart; \
                     at most {}/s fit (1µs interval)",
                    u64::from(senders) * 1_000_000
                ),
            ));
        }
        if secs > MAX_DURATION.as_secs_f64() {
            return Err(self.src.at(
                r,
                self.key("rate"),
                format!(
                    "{rate}/s over {senders} {who} is one send per sender every {secs:.0}s; \
                     at most 30 days apart: raise the rate"
                ),
            ));
        }
        Ok(Duration::from_secs_f64(secs))
    }

    /// `size`: bytes or a distribution of them, 100 bytes when absent.
    pub fn size(&self) -> Result<Sizes> {
        crate::scenario::sizes::sizes(self.src, self.t.size.as_ref(), &self.key("size"))
    }

    /// A duration > 0 at key `k`.
    pub fn positive(&self, v: &Spanned<crate::scenario::values::Dur>, k: &str) -> Result<Duration> {
        self.src.value(v, self.key(k), positive)
    }
}
