//! `report.html` in a real browser.

pub(crate) mod browser;
