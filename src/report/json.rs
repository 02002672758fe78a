//! The machine-readable report (`msgstorm report --json`): the [`Report`] model as JSON,
//! numbers with their units in the field names, for CI jobs and scripts.

use super::model::Report;

/// Renders `r` as pretty-printed JSON.
pub fn render(r: &Report) -> serde_json::Result<String> {
    serde_json::to_string_pretty(r)
}
