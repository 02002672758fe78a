//! `kind = "request"`: closed-loop request/response at a fixed concurrency, or a sweep of
//! concurrencies.

use std::time::Duration;

use toml::Spanned;

use super::pattern::{Ctx, Load, Lowering, PatternKind};
use crate::scenario::plan::{RequestTraffic, TrafficShape};
use crate::scenario::source::did_you_mean;
use crate::scenario::values::{show, MAX_DURATION};
use crate::Result;

/// Keys besides the common ones.
pub const KEYS: &[&str] = &["request", "concurrency", "sweep", "step_duration"];

/// A checked request pattern, fully resolved.
#[derive(Debug)]
struct Request(RequestTraffic);

/// Checks a request pattern; sets `duration` to the whole sweep's length.
pub fn check(cx: &Ctx<'_>, duration: &mut Option<Duration>) -> Result<Box<dyn PatternKind>> {
    let request = request(cx)?;
    let steps = steps(cx, duration)?;
    let r = RequestTraffic {
        request,
        steps,
        step_duration: duration.unwrap_or_default(),
    };
    let n = u32::try_from(r.steps.len()).unwrap_or(u32::MAX);
    let all = r.step_duration.checked_mul(n).unwrap_or(Duration::MAX);
    if all > MAX_DURATION {
        return Err(cx.at(
            &cx.t.sweep,
            "sweep",
            format!(
                "{} steps of {} take {}; a pattern must end within 30 days",
                r.steps.len(),
                show(r.step_duration),
                show(all)
            ),
        ));
    }
    *duration = Some(all);
    Ok(Box::new(Request(r)))
}

/// `request`: one of the driver's.
fn request(cx: &Ctx<'_>) -> Result<&'static str> {
    let driver = cx.driver;
    let Some(r) = &cx.t.request else {
        let known = driver.requests.join("\", \"");
        return Err(cx.at(
            &cx.t.request,
            "request",
            format!("a `request` pattern needs `request` (\"{known}\")"),
        ));
    };
    driver
        .requests
        .iter()
        .copied()
        .find(|k| *k == r.get_ref())
        .ok_or_else(|| {
            cx.src.at(
                r,
                cx.key("request"),
                format!(
                    "driver `{}` has no request `{}`{}; it sends: {}",
                    driver.name,
                    r.get_ref(),
                    did_you_mean(r.get_ref(), driver.requests)
                        .map_or(String::new(), |m| format!(" (did you mean `{m}`?)")),
                    driver.requests.join(", ")
                ),
            )
        })
}

/// The concurrency steps; sets `duration` to one step's length.
fn steps(cx: &Ctx<'_>, duration: &mut Option<Duration>) -> Result<Vec<u32>> {
    let t = cx.t;
    let users = cx.pop.users;
    match (&t.concurrency, &t.sweep) {
        (Some(c), None) => {
            if let Some(s) = &t.step_duration {
                return Err(cx.src.at(
                    s,
                    cx.key("step_duration"),
                    "goes with `sweep`; with `concurrency` set `duration`",
                ));
            }
            cx.needs_duration(*duration)?;
            let why = "users (user i works when i < concurrency)";
            Ok(vec![cx.at_most(c, "concurrency", users, why)?])
        }
        (None, Some(sweep)) => sweep_steps(cx, sweep, duration),
        (Some(c), Some(_)) => Err(cx.src.at(
            c,
            cx.key("concurrency"),
            "set either `concurrency` or `sweep`, not both",
        )),
        (None, None) => Err(cx.at(
            &t.concurrency,
            "concurrency",
            "a `request` pattern needs `concurrency` (e.g. 2000) or `sweep` (e.g. [100, 500, 1000])",
        )),
    }
}

/// The steps of `sweep`; sets `duration` to `step_duration`.
fn sweep_steps(
    cx: &Ctx<'_>,
    sweep: &Spanned<Vec<Spanned<i64>>>,
    duration: &mut Option<Duration>,
) -> Result<Vec<u32>> {
    let t = cx.t;
    if let Some(d) = &t.duration {
        return Err(cx.src.at(
            d,
            cx.key("duration"),
            "with `sweep`, set `step_duration` (each step's length) instead",
        ));
    }
    let Some(step) = &t.step_duration else {
        return Err(cx.at(
            &t.step_duration,
            "step_duration",
            "a `sweep` needs `step_duration`, e.g. \"10s\"",
        ));
    };
    *duration = Some(cx.positive(step, "step_duration")?);
    if sweep.get_ref().is_empty() {
        return Err(cx.src.at(
            sweep,
            cx.key("sweep"),
            "needs at least one concurrency, e.g. [100, 500, 1000]",
        ));
    }
    let mut steps = Vec::new();
    for (j, c) in sweep.get_ref().iter().enumerate() {
        steps.push(cx.at_most(c, &format!("sweep[{j}]"), cx.pop.users, "users")?);
    }
    Ok(steps)
}

impl PatternKind for Request {
    fn streams(&self) -> u64 {
        0
    }

    fn load(&self, _duration: Option<Duration>, _users: u32) -> Load {
        Load::default()
    }

    fn lower(self: Box<Self>, _cx: &mut Lowering<'_>) -> TrafficShape {
        TrafficShape::Request(self.0)
    }
}
