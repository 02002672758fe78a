//! Watching a run while it lasts: the OpenMetrics endpoint (`--metrics-listen`,
//! `report.metrics_listen`) that Prometheus scrapes next to the server's own metrics, and
//! the same series pushed by remote-write (`--metrics-push`) where nobody can scrape.
//!
//! [`openmetrics`] turns an engine [`Snapshot`](crate::engine::snapshot::Snapshot) into the
//! text format; [`endpoint`] serves it over HTTP, taking a snapshot per scrape (nothing is
//! computed while nobody scrapes).

pub mod endpoint;
pub mod openmetrics;
pub mod push;

pub use endpoint::Endpoint;
pub use push::Pusher;
