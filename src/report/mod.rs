//! Reports from artifacts: one [`Report`] model computed from an artifact (SLO checks,
//! findings, latencies, delivery, rates, the sweep, the per-second series), then renderers
//! that only format it, one file per [`format::Format`] behind one [`format::Renderer`]
//! trait ([`text`] for the terminal, [`json`], [`html`] for `report.html`, and the CI
//! formats beside them), with the presentation rules they share in [`present`] and the
//! rows of the tables they all show in [`tables`].
//!
//! Everything here is a pure function of an [`Artifact`]; nothing talks to a target. A new
//! output format is one more module with a unit struct implementing the renderer, and one
//! line in [`format::Format::for_run`].

mod build;
pub mod checks;
pub mod clocks;
pub mod compare;
pub mod effect;
pub mod findings;
pub mod format;
pub mod html;
pub mod json;
pub mod junit;
pub mod live;
pub mod markdown;
pub mod model;
pub mod phases;
pub mod population;
pub mod present;
mod reason;
pub mod renderer;
pub mod series;
pub mod split;
pub mod sweep;
pub mod tables;
pub mod text;

pub use model::Report;

use crate::artifact::Artifact;

/// The terminal report of an artifact and its verdict: what `msgstorm run` prints.
#[derive(Debug, Clone)]
pub struct Rendered {
    /// The report model.
    pub report: Report,
    /// The terminal report.
    pub text: String,
    /// True when every check passed, the run was not interrupted and no shard is missing.
    pub passed: bool,
    /// True when the only failed check is `run.shards`: a result of some shards of a run,
    /// whose verdict only `report` over every shard's result can give.
    pub partial: bool,
}

/// Computes the report of `a` and renders it for the terminal.
pub fn render(a: &Artifact) -> Rendered {
    let report = Report::new(a);
    let mut failed = report
        .checks
        .iter()
        .filter(|c| !c.passed)
        .map(|c| c.key.as_str());
    let partial = failed.next() == Some("run.shards") && failed.next().is_none();
    Rendered {
        text: text::render(&report),
        passed: report.passed(),
        partial,
        report,
    }
}

#[cfg(test)]
mod tests;
