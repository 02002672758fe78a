//! A run watched while it lasts: its OpenMetrics endpoint, remote-write pushes, the live page, the Grafana dashboard.

pub(crate) mod grafana;
pub(crate) mod metrics;
mod page;
mod push;
