//! The machine-readable report (`--format json`, `report --json`): the [`Report`] model as
//! JSON, numbers with their units in the field names, for CI jobs and scripts. Its
//! [`Renderer`] serves every serializable subject.

use serde::Serialize;

use super::model::Report;
use super::renderer::Renderer;
use crate::error::{Error, Result};

/// The JSON format.
#[derive(Debug, Clone, Copy)]
pub struct Json;

/// Renders `r` as pretty-printed JSON.
pub fn render(r: &Report) -> serde_json::Result<String> {
    serde_json::to_string_pretty(r)
}

/// Every serializable subject has its JSON rendering: its serialization, pretty-printed.
impl<S: Serialize + ?Sized> Renderer<S> for Json {
    fn render(&self, subject: &S) -> Result<String> {
        serde_json::to_string_pretty(subject)
            .map_err(|e| Error::Other(format!("cannot encode the report: {e}")))
    }
}
