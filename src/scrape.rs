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

/// A series filter of `[monitor] series`: a metric name, `*` at its end for a prefix, and
/// optional `{label="value",…}` that must all match: `process_*`,
/// `http_requests_total{code="200"}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeriesFilter {
    /// The name, or its prefix when `prefix`.
    name: String,
    /// Whether `name` is a prefix (written with a trailing `*`).
    prefix: bool,
    /// Labels that must have these values.
    labels: Vec<(String, String)>,
}

impl SeriesFilter {
    /// Parses a filter; the error says what is wrong with it.
    pub fn parse(text: &str) -> Result<SeriesFilter, String> {
        let text = text.trim();
        let (name, labels) = match text.split_once('{') {
            Some((name, rest)) => {
                let inner = rest
                    .strip_suffix('}')
                    .ok_or("a label list must end with `}`")?;
                let mut labels = Vec::new();
                for pair in inner.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                    let (k, v) = pair
                        .split_once('=')
                        .ok_or_else(|| format!("`{pair}` is not label=\"value\""))?;
                    let v = v.trim();
                    let v = v
                        .strip_prefix('"')
                        .and_then(|v| v.strip_suffix('"'))
                        .ok_or_else(|| format!("the value of label `{}` needs quotes", k.trim()))?;
                    labels.push((k.trim().to_owned(), v.to_owned()));
                }
                (name.trim(), labels)
            }
            None => (text, Vec::new()),
        };
        let (name, prefix) = match name.strip_suffix('*') {
            Some(n) => (n, true),
            None => (name, false),
        };
        let valid = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
        if (name.is_empty() && !prefix) || !name.chars().all(valid) {
            return Err(format!(
                "`{text}` is not a metric name (letters, digits, `_`, `:`), optionally ending \
                 in `*`, with optional {{label=\"value\"}}"
            ));
        }
        Ok(SeriesFilter {
            name: name.to_owned(),
            prefix,
            labels,
        })
    }

    /// Whether a series of `name` with `labels` passes.
    pub fn matches(&self, name: &str, labels: &BTreeMap<String, String>) -> bool {
        let name_ok = if self.prefix {
            name.starts_with(&self.name)
        } else {
            name == self.name
        };
        name_ok
            && self
                .labels
                .iter()
                .all(|(k, v)| labels.get(k).is_some_and(|l| l == v))
    }
}

#[cfg(feature = "prometheus")]
pub mod client;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_match_by_name_prefix_and_labels() {
        let labels: BTreeMap<String, String> = [("code".to_owned(), "200".to_owned())]
            .into_iter()
            .collect();
        let none = BTreeMap::new();
        let f = SeriesFilter::parse("serve_*").expect("parses");
        assert!(f.matches("serve_online_users", &none));
        assert!(!f.matches("process_cpu", &none));
        let f = SeriesFilter::parse(r#"http_requests_total{code="200"}"#).expect("parses");
        assert!(f.matches("http_requests_total", &labels));
        assert!(!f.matches("http_requests_total", &none));
        assert!(SeriesFilter::parse("*")
            .expect("everything")
            .matches("x", &none));
        for bad in ["", "a b", "x{code=200}", "x{code=\"1\"", "x{code}"] {
            assert!(SeriesFilter::parse(bad).is_err(), "{bad} parsed");
        }
    }
}
