//! Reports from artifacts: SLO checks, the terminal report, the sweep table.
//!
//! Everything here is a pure function of an [`Artifact`]; nothing talks to a target.

pub mod checks;
pub mod summary;
pub mod sweep;
pub mod text;

use crate::artifact::Artifact;

/// A rendered report and its verdict.
#[derive(Debug, Clone)]
pub struct Rendered {
    /// The terminal report.
    pub text: String,
    /// True when every check passed and the run was not interrupted.
    pub passed: bool,
    /// Keys of the checks that failed.
    pub failed: Vec<String>,
    /// The same numbers, machine-readable.
    pub summary: summary::Summary,
}

/// Evaluates the checks of `a` and renders the terminal report.
pub fn render(a: &Artifact) -> Rendered {
    let delivery = a.ledger.summary();
    let results = checks::evaluate(a, &delivery);
    let rows = sweep::rows(a);
    let failed: Vec<String> = results
        .iter()
        .filter(|r| !r.passed)
        .map(|r| r.key.clone())
        .collect();
    Rendered {
        text: text::render(a, &delivery, &results, &rows),
        passed: failed.is_empty(),
        failed,
        summary: summary::summarize(a, &delivery, &results),
    }
}
