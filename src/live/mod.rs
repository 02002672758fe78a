//! Watching a run while it lasts: the OpenMetrics endpoint (`--metrics-listen`,
//! `report.metrics_listen`) that Prometheus scrapes next to the server's own metrics, and
//! the same series pushed by remote-write (`--metrics-push`) where nobody can scrape, and
//! the `--live` page: `report.html` of the run so far, refreshed every second ([`page`]).
//!
//! [`openmetrics`] turns an engine [`Snapshot`](crate::engine::snapshot::Snapshot) into the
//! text format; [`endpoint`] serves it over HTTP, taking a snapshot per scrape (nothing is
//! computed while nobody scrapes).

pub mod endpoint;
pub mod openmetrics;
pub mod page;
pub mod push;

pub use endpoint::Endpoint;
pub use page::Page;
pub use push::Pusher;
