//! The HTTP endpoint Prometheus scrapes: `GET /metrics` answers with a fresh snapshot's
//! OpenMetrics text (see [`super::openmetrics`]).
//!
//! Each connection is its own task and a scrape only locks the engine's recorders one at a
//! time for as long as adding up their totals takes: a scraper that stalls holds nothing
//! the users need.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

use super::openmetrics::{self, Generator};
use crate::engine::snapshot::LiveTap;

/// A running endpoint; stops when dropped.
#[derive(Debug)]
pub struct Endpoint {
    /// Where it listens (the port chosen when asked for port 0).
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

/// What a scrape needs.
#[derive(Debug)]
struct Scrape {
    tap: Arc<LiveTap>,
    labels: Vec<(&'static str, String)>,
}

impl Endpoint {
    /// Listens on `addr` and serves `tap`'s snapshots, every series labelled with
    /// `labels`. Fails (nothing started) when the address cannot be listened on.
    pub async fn start(
        addr: SocketAddr,
        tap: Arc<LiveTap>,
        labels: Vec<(&'static str, String)>,
    ) -> std::io::Result<Endpoint> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let app = Router::new()
            .route("/metrics", get(metrics))
            .route("/", get(index))
            .with_state(Arc::new(Scrape { tap, labels }));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Endpoint { addr, task })
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// `GET /metrics`.
async fn metrics(State(s): State<Arc<Scrape>>) -> impl IntoResponse {
    let generator = Generator {
        cpu_s: crate::sys::cpu_time().as_secs_f64(),
        rss_bytes: crate::sys::rss_bytes(),
    };
    let body = match s.tap.snapshot() {
        Some(snapshot) => openmetrics::encode(snapshot, generator, &s.labels),
        None => "# EOF\n".to_owned(),
    };
    ([(CONTENT_TYPE, openmetrics::CONTENT_TYPE)], body)
}

/// `GET /`: where the metrics are.
async fn index() -> &'static str {
    "msgstorm: this run's metrics are at /metrics (OpenMetrics)\n"
}
