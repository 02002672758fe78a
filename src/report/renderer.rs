//! The one trait every output format implements (hyperfine's `Exporter`) over what is
//! reported — a run's report, a comparison, a capacity search. A leaf of `report/`: the
//! formats import it, and [`super::format`] dispatches to them.

use crate::error::Result;

/// Renders a subject (a run's report, a comparison, a search) in one format.
pub trait Renderer<S: ?Sized> {
    /// The whole document.
    fn render(&self, subject: &S) -> Result<String>;
}
