//! The generators' clocks of a run whose shards met over the network: each shard's offset
//! to the reference (shard 0), and how far end-to-end latency across shards can be off
//! because of them.

use serde::Serialize;

use crate::artifact::Artifact;

/// The clocks of a run's shards.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Clocks {
    /// What every shard's times are on, e.g. `shard 0 at msgstorm-…-0.msgstorm-…:7400`.
    pub reference: String,
    /// Each shard with an offset record, in index order.
    pub shards: Vec<ShardClock>,
    /// End-to-end latency between shards is known to ± this, µs: a message's sender and
    /// receiver are each off the reference by up to their bound, so the two largest
    /// bounds together (of the shards whose bound is known). `None` when no bound is.
    pub uncertainty_us: Option<u64>,
    /// Shards whose bound is unknown: no record at all, or no final estimate (drift).
    pub unknown: Vec<u32>,
    /// End-to-end latencies measured across a shard of `unknown` and another shard, taken
    /// out of the run's end-to-end figures and checks (set by [`Clocks::exclude`]).
    pub excluded: u64,
}

/// One shard's clock.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShardClock {
    /// Shard index.
    pub index: u32,
    /// How far its clock was ahead of the reference before traffic, µs.
    pub offset_us: i64,
    /// ± µs of that offset.
    pub uncertainty_us: u64,
    /// Change of the offset from before to after traffic, µs (`None`: not measured).
    pub drift_us: Option<i64>,
    /// Its times are within ± this of the reference, µs (`None`: drift unknown).
    pub bound_us: Option<u64>,
}

/// The clocks of `a`, when any of its shards has an offset record.
pub fn of(a: &Artifact) -> Option<Clocks> {
    let reference = a
        .shards
        .iter()
        .filter_map(|s| s.clock.as_ref())
        .find(|c| c.reference.starts_with("shard 0 at"))
        .or_else(|| a.shards.iter().find_map(|s| s.clock.as_ref()))?
        .reference
        .clone();
    let shards: Vec<ShardClock> = a
        .shards
        .iter()
        .filter_map(|s| {
            let c = s.clock.as_ref()?;
            Some(ShardClock {
                index: s.index,
                offset_us: c.offset_us,
                uncertainty_us: c.uncertainty_us,
                drift_us: c.end_offset_us.map(|e| e - c.offset_us),
                bound_us: c.bound_us(),
            })
        })
        .collect();
    let unknown: Vec<u32> = a
        .shards
        .iter()
        .filter(|s| s.clock.as_ref().and_then(|c| c.bound_us()).is_none())
        .map(|s| s.index)
        .collect();
    let mut bounds: Vec<u64> = shards.iter().filter_map(|s| s.bound_us).collect();
    bounds.sort_unstable_by(|x, y| y.cmp(x));
    let uncertainty_us = (!bounds.is_empty()).then(|| bounds.iter().take(2).sum());
    Some(Clocks {
        reference,
        shards,
        uncertainty_us,
        unknown,
        excluded: 0,
    })
}

impl Clocks {
    /// `a` without the cross-shard end-to-end latencies of the shards whose clock is
    /// unknown (they could be off by any amount), when there are such shards; records how
    /// many were taken out.
    pub fn exclude(&mut self, a: &Artifact) -> Option<Artifact> {
        if self.unknown.is_empty() {
            return None;
        }
        let mut trimmed = a.clone();
        self.excluded = trimmed.metrics.exclude_cross(&self.unknown);
        Some(trimmed)
    }
}
