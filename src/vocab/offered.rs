//! The shape a plan's population offers, as numbers: computed by the engine from a plan
//! (`engine::offered`), kept in the result file (`population`) and shown by `validate` and
//! the text report. Here, in the leaf, so that the artifact and the report can hold it
//! without importing the engine.

use serde::{Deserialize, Serialize};

/// Points of the day at which the users online are given.
pub const POINTS: u32 = 12;

/// Equal parts of the day whose planned logins are given.
pub const LOGIN_BUCKETS: u32 = 60;

/// The shares of the users, most active first, whose share of the sends is given.
pub const TOP_SHARES: [f64; 7] = [0.001, 0.01, 0.05, 0.1, 0.2, 0.5, 1.0];

/// What a plan offers (all shards).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Offered {
    /// The day's length, ms (0 without `[population.sessions]`).
    pub day_ms: u64,
    /// Users planned online at `POINTS + 1` evenly spaced moments of the day, its start and
    /// end included (empty without sessions).
    pub online: Vec<u64>,
    /// Sessions in all.
    pub sessions: u64,
    /// Session lengths: median and 90th percentile, ms.
    pub session_p50_ms: u64,
    /// See `session_p50_ms`.
    pub session_p90_ms: u64,
    /// Contacts per user: mean (0 without a contact graph).
    pub contacts_mean: f64,
    /// Contacts of the user with most.
    pub contacts_max: u64,
    /// Messages to contacts planned (one delivery each).
    pub chat_sends: u64,
    /// The share of those made by the top 1% of users.
    pub top1_share: f64,
    /// The share of those made by the top 10% of users.
    pub top10_share: f64,
    /// Groups of `chat` patterns.
    pub groups: u64,
    /// Members of the largest.
    pub largest_group: u64,
    /// Messages planned into them.
    pub group_sends: u64,
    /// The deliveries those make (each to every other member).
    pub group_deliveries: u64,
    /// The body sizes of the planned messages (absent in result files from before sizes
    /// were drawn).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sizes: Option<BodyBytes>,
    /// Logins planned in each of [`LOGIN_BUCKETS`] equal parts of the day, the users
    /// online at its start left out (they log in before the traffic); empty without
    /// sessions and in older result files.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub logins: Vec<u64>,
    /// Session lengths: `[upper bound ms, sessions]` by powers of two, ascending.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub session_hist: Vec<[u64; 2]>,
    /// Group sizes: `[upper bound members, groups]` by powers of two, ascending.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub group_hist: Vec<[u64; 2]>,
    /// `[share of the users, share of the messages to contacts they send]`, the most
    /// active users first, at each of [`TOP_SHARES`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub top_shares: Vec<[f64; 2]>,
}

/// `[upper bound, count]` of `values` by powers of two, from the lowest bucket holding
/// one to the highest (the buckets between included, empty or not).
pub fn pow2_hist(values: impl Iterator<Item = u64>) -> Vec<[u64; 2]> {
    let mut counts = [0u64; 65];
    for v in values {
        counts[(64 - v.saturating_sub(1).leading_zeros()) as usize] += 1;
    }
    let Some(lo) = counts.iter().position(|&c| c > 0) else {
        return Vec::new();
    };
    let hi = counts.iter().rposition(|&c| c > 0).unwrap_or(lo);
    (lo..=hi)
        .map(|b| [1u64.checked_shl(b as u32).unwrap_or(u64::MAX), counts[b]])
        .collect()
}

/// Body sizes of the planned messages, bytes, each pattern weighted by its planned sends.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BodyBytes {
    /// The mean.
    pub mean: f64,
    /// The median.
    pub p50: u64,
    /// The 99th percentile.
    pub p99: u64,
    /// The largest a message may have (the cap the driver is configured for).
    pub max: u64,
}
