//! Watching a run while it lasts: the OpenMetrics endpoint (`--metrics-listen`,
//! `report.metrics_listen`) that Prometheus scrapes next to the server's own metrics.
//!
//! [`openmetrics`] turns an engine [`Snapshot`](crate::engine::snapshot::Snapshot) into the
//! text format; [`endpoint`] serves it over HTTP, taking a snapshot per scrape (nothing is
//! computed while nobody scrapes).

pub mod endpoint;
pub mod openmetrics;

pub use endpoint::Endpoint;
