//! Validation of `[[traffic]]` entries: what every kind shares (its name, `start`,
//! `duration`, whether the driver runs it and whether its keys apply), the dispatch of
//! the rest to the kind's own file (`kinds/`), and the plan-wide limits their sum must
//! stay within.

use std::collections::HashMap;
use std::time::Duration;

use toml::de::{DeTable, DeValue};
use toml::Spanned;

use super::kinds::{self, Ctx, Load, PatternKind};
use super::population::Pop;
use super::schema::TrafficSpec;
use super::source::Source;
use super::values::{duration as dur, MAX_DELIVERIES, MAX_LISTED, MAX_PAIRS};
use crate::driver::Spec;
use crate::vocab::TrafficKind;
use crate::Result;

/// Keys every kind takes.
const COMMON: [&str; 4] = ["name", "kind", "start", "duration"];

/// A validated pattern: counts are checked, users are not chosen yet.
#[derive(Debug)]
pub struct Pattern {
    /// Name (unique in the plan).
    pub name: String,
    /// Start after all on-time users are in.
    pub start: Duration,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// What it does.
    pub kind: TrafficKind,
    /// The kind's numbers.
    pub numbers: Box<dyn PatternKind>,
}

/// The keys a `[[traffic]]` entry at `path` (`traffic[i]`) may hold, given the `kind`
/// written in `root`; `None` when the kind is not known.
pub fn keys_at(root: &DeTable<'_>, path: &str) -> Option<Vec<&'static str>> {
    let i: usize = path
        .strip_prefix("traffic[")?
        .strip_suffix(']')?
        .parse()
        .ok()?;
    let DeValue::Array(list) = root.get("traffic")?.get_ref() else {
        return None;
    };
    let DeValue::Table(entry) = list.get(i)?.get_ref() else {
        return None;
    };
    let kind = entry.get("kind")?.get_ref().as_str()?;
    let kind = TrafficKind::ALL.iter().find(|k| k.as_str() == kind)?;
    Some(with_common(*kind))
}

/// Every key of `kind`.
fn with_common(kind: TrafficKind) -> Vec<&'static str> {
    let mut keys = COMMON.to_vec();
    keys.extend(kinds::keys(kind));
    keys
}

/// Validates every pattern against the population and the driver.
pub fn traffic(
    src: &Source<'_>,
    list: &[Spanned<TrafficSpec>],
    pop: &Pop,
    driver: &'static Spec,
) -> Result<Vec<Pattern>> {
    let mut names: HashMap<String, usize> = HashMap::new();
    let mut total = Totals {
        streams: 0,
        load: Load {
            listed: u64::from(pop.late) + u64::from(pop.churn),
            ..Load::default()
        },
    };
    let mut out = Vec::new();
    for (i, spanned) in list.iter().enumerate() {
        let cx = Ctx {
            src,
            i,
            t: spanned.get_ref(),
            spanned,
            pop,
            driver,
        };
        let pattern = pattern(&cx, &mut names)?;
        total.add(&cx, &pattern)?;
        out.push(pattern);
    }
    Ok(out)
}

/// Validates one entry: what every kind shares, then its kind's own keys.
fn pattern(cx: &Ctx<'_>, names: &mut HashMap<String, usize>) -> Result<Pattern> {
    let (t, i) = (cx.t, cx.i);
    let kind = *t.kind.get_ref();
    runs(cx, kind)?;
    applies(cx, kind)?;
    let name = t
        .name
        .as_ref()
        .map_or(format!("traffic[{i}]"), |n| n.get_ref().clone());
    if let Some(first) = names.insert(name.clone(), i) {
        let n = t.name.as_ref().map_or(cx.spanned.span(), Spanned::span);
        return Err(cx.src.error(
            n,
            cx.key("name"),
            format!("`{name}` is already the name of traffic[{first}]"),
        ));
    }
    let start = match &t.start {
        Some(s) => cx.src.value(s, cx.key("start"), dur)?,
        None => Duration::ZERO,
    };
    let mut duration = match &t.duration {
        Some(d) => Some(cx.positive(d, "duration")?),
        None => None,
    };
    let numbers = kinds::check(kind, cx, &mut duration)?;
    Ok(Pattern {
        name,
        start,
        duration,
        kind,
        numbers,
    })
}

/// Refuses a kind the driver does not run.
fn runs(cx: &Ctx<'_>, kind: TrafficKind) -> Result<()> {
    let driver = cx.driver;
    if driver.kinds.contains(&kind.runs_as()) {
        return Ok(());
    }
    let names: Vec<&str> = driver.kinds.iter().map(|k| k.as_str()).collect();
    Err(cx.src.at(
        &cx.t.kind,
        cx.key("kind"),
        format!(
            "kind `{}` is not supported by driver `{}`; it runs: {}",
            kind.as_str(),
            driver.name,
            names.join(", ")
        ),
    ))
}

/// Refuses a key of another kind.
fn applies(cx: &Ctx<'_>, kind: TrafficKind) -> Result<()> {
    for (k, span) in cx.t.present() {
        if !kinds::keys(kind).contains(&k) {
            return Err(cx.src.error(
                span,
                cx.key(k),
                format!(
                    "`{k}` does not apply to kind `{}`; its keys: {}",
                    kind.as_str(),
                    with_common(kind).join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// What the patterns so far add up to.
struct Totals {
    /// Streams of the plan.
    streams: u64,
    /// Listed users, pairs and deliveries.
    load: Load,
}

impl Totals {
    /// Adds pattern `p` (the entry of `cx`), refusing a plan past the limits.
    fn add(&mut self, cx: &Ctx<'_>, p: &Pattern) -> Result<()> {
        let (src, spanned, whole) = (cx.src, cx.spanned, format!("traffic[{}]", cx.i));
        self.streams += p.numbers.streams();
        if self.streams > u64::from(u32::MAX) {
            return Err(src.at(
                spanned,
                whole,
                format!(
                    "the plan would have {} streams; at most {} fit",
                    self.streams,
                    u32::MAX
                ),
            ));
        }
        let load = p.numbers.load(p.duration, cx.pop.users);
        let total = &mut self.load;
        total.listed += load.listed;
        total.pairs += load.pairs;
        total.deliveries += load.deliveries;
        if total.listed > MAX_LISTED {
            return Err(src.at(
                spanned,
                whole,
                format!(
                    "the plan would list {} users (late, churning, senders, receivers, group \
                     members, chosen idle users, connections); at most {MAX_LISTED} fit",
                    total.listed
                ),
            ));
        }
        if total.pairs > MAX_PAIRS {
            return Err(src.at(
                spanned,
                whole,
                format!(
                    "the plan would track {} stream × recipient pairs; at most {MAX_PAIRS} fit",
                    total.pairs
                ),
            ));
        }
        if total.deliveries > u128::from(MAX_DELIVERIES) {
            return Err(src.at(
                spanned,
                whole,
                format!(
                    "the plan would schedule {} deliveries; at most {MAX_DELIVERIES}: lower \
                     `messages`, `duration` or the rate",
                    total.deliveries
                ),
            ));
        }
        Ok(())
    }
}
