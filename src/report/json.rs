//! The machine-readable report (`--format json`, `report --json`): the [`Report`] model as
//! JSON, numbers with their units in the field names, for CI jobs and scripts. Its
//! [`Renderer`](super::format::Renderer) serves every serializable subject.

use super::model::Report;

/// The JSON format.
#[derive(Debug, Clone, Copy)]
pub struct Json;

/// Renders `r` as pretty-printed JSON.
pub fn render(r: &Report) -> serde_json::Result<String> {
    serde_json::to_string_pretty(r)
}
