//! `kind = "trace"`: recorded messages replayed at `speed` ×, every one verified like any
//! other (`scenario/trace.rs` reads the file).

use std::sync::Arc;
use std::time::Duration;

use super::pattern::{Ctx, Load, Lowering, PatternKind};
use crate::scenario::plan::{Sizes, StreamId, TraceTarget, TraceTraffic, TrafficShape};
use crate::scenario::trace::Trace;
use crate::vocab::TrafficKind;
use crate::Result;

/// Keys besides the common ones.
pub const KEYS: &[&str] = &["file", "speed", "size"];

/// A checked trace pattern: the trace read and mapped.
#[derive(Debug)]
struct Traced {
    /// The trace.
    trace: Trace,
    /// The sizes of messages the trace gives none.
    size: Sizes,
}

/// Checks a trace pattern: reads its file; without `duration` it lasts the trace.
pub fn check(cx: &Ctx<'_>, duration: &mut Option<Duration>) -> Result<Box<dyn PatternKind>> {
    let t = cx.t;
    let Some(file) = &t.file else {
        return Err(cx.at(
            &t.file,
            "file",
            "a `trace` pattern needs `file` (CSV `time,from,to[,size]` or JSON lines)",
        ));
    };
    if cx.pop.sessions.is_some() || cx.pop.late > 0 || cx.pop.churn > 0 {
        return Err(cx.at(
            &t.file,
            "file",
            "a trace says when its users send and receive: leave out late and churning \
             users and `[population.sessions]`",
        ));
    }
    let speed = match &t.speed {
        Some(s) => cx.src.value(s, cx.key("speed"), |x: f64| {
            if x > 0.0 && x <= 1e6 {
                Ok(x)
            } else {
                Err(format!("must be in (0, 1000000] (× the trace's pace), got {x}"))
            }
        })?,
        None => 1.0,
    };
    let dir = cx.src.file.parent().unwrap_or(std::path::Path::new("."));
    let path = dir.join(file.get_ref());
    let trace = crate::scenario::trace::read(&path, &cx.key("file"), cx.pop.users, speed)?;
    if duration.is_none() {
        *duration = Some(trace.span + Duration::from_millis(1));
    }
    if !trace.groups.is_empty() && !cx.driver.kinds.contains(&TrafficKind::Group) {
        return Err(cx.at(
            &t.file,
            "file",
            format!("the trace sends into groups; driver `{}` does not run group traffic", cx.driver.name),
        ));
    }
    Ok(Box::new(Traced {
        trace,
        size: cx.size()?,
    }))
}

impl PatternKind for Traced {
    fn streams(&self) -> u64 {
        self.trace.senders.iter().map(|s| s.targets.len() as u64).sum()
    }

    fn load(&self, _duration: Option<Duration>, _users: u32) -> Load {
        let members: u64 = self.trace.groups.iter().map(|g| g.members.len() as u64).sum();
        let fanout = |s: &crate::scenario::plan::TraceSender| -> u128 {
            s.sends
                .iter()
                .map(|&(_, k)| match s.targets[k as usize] {
                    TraceTarget::User(_) => 1,
                    TraceTarget::Group(g) => self.trace.groups[g as usize].members.len() as u128,
                })
                .sum()
        };
        Load {
            listed: members + self.trace.senders.len() as u64,
            pairs: self.streams() + members * members,
            deliveries: self.trace.senders.iter().map(fanout).sum(),
        }
    }

    fn max_body(&self) -> usize {
        let sizes = self.trace.senders.iter().flat_map(|s| s.sizes.iter());
        sizes.max().map_or(0, |&m| m as usize).max(self.size.max())
    }

    fn sends_as(&self) -> Option<TrafficKind> {
        Some(TrafficKind::Direct)
    }

    fn also_sends(&self) -> Option<TrafficKind> {
        (!self.trace.groups.is_empty()).then_some(TrafficKind::Group)
    }

    fn lower(self: Box<Self>, cx: &mut Lowering<'_>) -> TrafficShape {
        let stream_base = cx.take_streams(self.streams() as StreamId);
        let mut groups = self.trace.groups;
        for g in &mut groups {
            g.name = format!("{}-{}", cx.next_group_name(), g.name);
        }
        TrafficShape::Trace(TraceTraffic {
            senders: Arc::from(self.trace.senders),
            groups,
            stream_base,
            size: self.size.seeded(cx.seed),
        })
    }
}
