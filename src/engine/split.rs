//! Which rows of the metrics' split ([`crate::metrics::split`]) a delivery counts in:
//! the size band of its group and the session phase it was due in, both read from the plan
//! once, before the run.
//!
//! - **Bands** (group messages only, when the run's groups are not all one size): `hot` is
//!   the run's largest group (the first of the largest, in plan order) — the one whose
//!   fan-out a server feels first; the others are `small` (at most
//!   [`SMALL_GROUP`] members) or `large`.
//! - **Phases** (with `[population.sessions]` only): a second of the day is in the login
//!   wave when the logins the plan puts in it are more than twice the median logins
//!   per second of the day ([`crate::vocab::LedgerOpts::wave_us`], which the ledger tells lost messages
//!   by too); a message counts in the phase of the second it was due in.

use std::sync::Arc;

use super::schedule::GroupInfo;
use crate::ledger::Ledger;
use crate::metrics::split::{Part, SMALL_GROUP};
use crate::metrics::Metrics;
use crate::scenario::{Plan, StreamId};

/// The bands of the run's groups and the seconds of the login wave.
#[derive(Debug, Default)]
pub struct Bands {
    /// The band of each group of the run, by [`GroupInfo::index`] (empty when every group
    /// has one size).
    groups: Vec<Part>,
    /// The login wave's bounds, µs from the traffic start (`LedgerOpts::wave_us`; empty
    /// without sessions).
    wave_us: Vec<u64>,
    /// The band of each group stream (for the lost messages by band).
    streams: Vec<(StreamId, Part)>,
}

impl Bands {
    /// The bands of `plan`, whose groups the schedule listed as `groups`, the group of each
    /// group stream as `of_stream`.
    pub fn of(
        plan: &Plan,
        groups: &[Arc<GroupInfo>],
        of_stream: &foldhash::HashMap<StreamId, Arc<GroupInfo>>,
    ) -> Bands {
        let sizes: foldhash::HashMap<&str, usize> = plan
            .groups()
            .map(|g| (g.name.as_str(), g.members.len()))
            .collect();
        let size = |g: &GroupInfo| sizes.get(g.name.as_str()).copied().unwrap_or(0);
        let largest = groups.iter().map(|g| size(g)).max().unwrap_or(0);
        let smallest = groups.iter().map(|g| size(g)).min().unwrap_or(0);
        let hot = groups.iter().position(|g| size(g) == largest);
        let groups = if largest == smallest {
            Vec::new()
        } else {
            groups
                .iter()
                .enumerate()
                .map(|(i, g)| match size(g) {
                    _ if Some(i) == hot => Part::Hot,
                    n if n <= SMALL_GROUP => Part::Small,
                    _ => Part::Large,
                })
                .collect()
        };
        let streams = of_stream
            .iter()
            .filter_map(|(&s, g)| Some((s, *groups.get(g.index)?)))
            .collect();
        Bands {
            groups,
            wave_us: plan.ledger.wave_us.clone(),
            streams,
        }
    }

    /// The band of each group stream.
    pub fn streams(&self) -> &[(StreamId, Part)] {
        &self.streams
    }

    /// Counts a first intact copy of a message of `group` (if a group message) due
    /// `due_us` after the traffic start; `push_us` is its end-to-end latency when it came
    /// live.
    pub fn record(
        &self,
        m: &mut Metrics,
        group: Option<&GroupInfo>,
        due_us: u64,
        push_us: Option<u64>,
    ) {
        if let Some(&band) = group.and_then(|g| self.groups.get(g.index)) {
            m.split_mut().record(band, push_us);
        }
        if !self.wave_us.is_empty() {
            let wave = Ledger::span_of(&self.wave_us, due_us) % 2 == 1;
            let phase = if wave { Part::LoginWave } else { Part::Steady };
            m.split_mut().record(phase, push_us);
        }
    }
}
