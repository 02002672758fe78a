//! Deliveries and latencies split where a population's shape matters: group messages by
//! the size band of their group (small, large, hot), all messages by the session phase
//! they were due in (the login wave or steady), and each return's catch-up (from a
//! returning user's login to the last missed message its sync fetched).
//!
//! Which band or phase a delivery falls in is the engine's business (`engine::split`);
//! here are the counts and HDR histograms, merged exactly like every other histogram.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::vocab::StreamId;

/// One row of the split.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Part {
    /// Group messages in groups of at most [`SMALL_GROUP`] members (the hot group aside).
    Small,
    /// Group messages in larger groups (the hot group aside).
    Large,
    /// Group messages in the run's largest group.
    Hot,
    /// Messages due in a second of the login wave.
    LoginWave,
    /// Messages due in the other seconds of the day.
    Steady,
    /// Returning users' catch-up: one per return whose sync fetched something.
    Sync,
}

/// The largest group in the `small` band, members.
pub const SMALL_GROUP: usize = 10;

impl Part {
    /// Every part, in report order.
    pub const ALL: [Part; 6] = [
        Part::Small,
        Part::Large,
        Part::Hot,
        Part::LoginWave,
        Part::Steady,
        Part::Sync,
    ];

    /// Its name in result files and reports.
    pub fn name(self) -> &'static str {
        match self {
            Part::Small => "small",
            Part::Large => "large",
            Part::Hot => "hot",
            Part::LoginWave => "login_wave",
            Part::Steady => "steady",
            Part::Sync => "sync",
        }
    }

    /// What it holds, for people.
    pub fn label(self) -> String {
        match self {
            Part::Small => format!("groups ≤ {SMALL_GROUP} members"),
            Part::Large => format!("groups > {SMALL_GROUP} members"),
            Part::Hot => "the largest group".into(),
            Part::LoginWave => "due in the login wave".into(),
            Part::Steady => "due outside it".into(),
            Part::Sync => "return → last missed message".into(),
        }
    }
}

/// Counts and latency histograms of each [`Part`].
#[derive(Clone, Debug, PartialEq)]
pub struct Split {
    /// Indexed by `Part as usize`: first intact copies received (returns, for `Sync`).
    counts: [u64; Part::ALL.len()],
    /// Indexed by `Part as usize`: end-to-end latency of the live deliveries (the
    /// catch-up time of each return, for `Sync`), µs.
    hists: [Histogram<u64>; Part::ALL.len()],
    /// The band of each group stream, sorted by stream, distinct: where a lost message of
    /// a group was (set once per process, when its recorders are collected).
    bands: Vec<(StreamId, Part)>,
}

impl Default for Split {
    fn default() -> Self {
        Split {
            counts: [0; Part::ALL.len()],
            hists: std::array::from_fn(|_| super::new_hist()),
            bands: Vec::new(),
        }
    }
}

impl Split {
    /// Counts one event of `part`, with its latency when it has one.
    pub fn record(&mut self, part: Part, us: Option<u64>) {
        self.counts[part as usize] += 1;
        if let Some(us) = us {
            self.hists[part as usize].saturating_record(us.min(super::MAX_US));
        }
    }

    /// Adds everything `other` counted.
    pub fn merge(&mut self, other: &Split) {
        for (c, o) in self.counts.iter_mut().zip(&other.counts) {
            *c = c.saturating_add(*o);
        }
        super::add_all(&mut self.hists, &other.hists);
        self.note_bands(other.bands.iter().copied());
    }

    /// Notes the band of each of `bands`' group streams.
    pub fn note_bands(&mut self, bands: impl IntoIterator<Item = (StreamId, Part)>) {
        let before = self.bands.len();
        self.bands.extend(bands);
        if self.bands.len() > before {
            self.bands.sort_unstable();
            self.bands.dedup_by_key(|&mut (s, _)| s);
        }
    }

    /// The band of group stream `stream`, if noted.
    pub fn band_of(&self, stream: StreamId) -> Option<Part> {
        let i = self.bands.binary_search_by_key(&stream, |&(s, _)| s).ok()?;
        Some(self.bands[i].1)
    }

    /// The bands noted, as a result file keeps them.
    pub(super) fn bands(&self) -> &[(StreamId, Part)] {
        &self.bands
    }

    /// How many events `part` counted.
    pub fn count(&self, part: Part) -> u64 {
        self.counts[part as usize]
    }

    /// The latencies of `part`, µs.
    pub fn hist(&self, part: Part) -> &Histogram<u64> {
        &self.hists[part as usize]
    }

    /// Whether nothing was counted.
    pub fn is_empty(&self) -> bool {
        self.counts.iter().all(|&c| c == 0)
    }

    /// The parts that counted something, as a result file keeps them.
    pub(super) fn to_repr(&self) -> Vec<PartRepr> {
        Part::ALL
            .iter()
            .filter(|&&p| self.count(p) > 0)
            .map(|&part| PartRepr {
                part,
                count: self.count(part),
                hist: super::encode(self.hist(part)),
            })
            .collect()
    }

    /// The split a result file kept.
    pub(super) fn from_repr(parts: Vec<PartRepr>) -> Result<Split, String> {
        let mut s = Split::default();
        for p in parts {
            let h = super::decode(&p.hist)
                .map_err(|e| format!("metrics: split {}: {e}", p.part.name()))?;
            if h.len() > p.count {
                return Err(format!(
                    "metrics: split {}: {} latencies for {} events",
                    p.part.name(),
                    h.len(),
                    p.count
                ));
            }
            s.counts[p.part as usize] = p.count;
            s.hists[p.part as usize] = h;
        }
        Ok(s)
    }
}

/// One part of the split in a result file.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PartRepr {
    part: Part,
    /// Deliveries (returns, for `sync`).
    count: u64,
    /// Base64 of the histogram's V2-deflate encoding.
    hist: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_splits_equal_one_split_fed_everything() {
        let (mut a, mut b, mut whole) = (Split::default(), Split::default(), Split::default());
        for (i, part) in Part::ALL.iter().enumerate() {
            for k in 0..100u64 {
                let us = (k + 1) * 1_000 * (i as u64 + 1);
                let latency = (k % 3 != 0).then_some(us);
                if k % 2 == 0 { &mut a } else { &mut b }.record(*part, latency);
                whole.record(*part, latency);
            }
        }
        a.merge(&b);
        assert_eq!(a, whole);
        assert_eq!(a.count(Part::Hot), 100);
        assert_eq!(a.hist(Part::Hot).len(), 66);
        let back = Split::from_repr(a.to_repr()).unwrap();
        assert_eq!(back, whole);
    }
}
