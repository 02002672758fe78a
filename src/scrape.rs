//! Server metrics beside ours: series of Prometheus/OpenMetrics endpoints
//! (`[monitor] prometheus`), scraped once a second during a run.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One scraped series over a run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ScrapedSeries {
    /// The endpoint's URL.
    pub endpoint: String,
    /// Metric name.
    pub name: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// True for a counter (a running total, charted as its rate per second).
    pub counter: bool,
    /// Samples: (second of the run, value).
    pub points: Vec<(u32, f64)>,
}

impl ScrapedSeries {
    /// Whether `other` is the same series (endpoint, name, labels).
    pub fn same_series(&self, other: &ScrapedSeries) -> bool {
        self.endpoint == other.endpoint && self.name == other.name && self.labels == other.labels
    }

    /// `name{a="1",b="2"}`.
    pub fn display_name(&self) -> String {
        if self.labels.is_empty() {
            return self.name.clone();
        }
        let labels: Vec<String> = self
            .labels
            .iter()
            .map(|(k, v)| format!("{k}=\"{v}\""))
            .collect();
        format!("{}{{{}}}", self.name, labels.join(","))
    }
}
