//! The `--live` page: `report.html` of the run so far, served over HTTP and refreshed by
//! the page itself every second, then the run's final report in its place.
//!
//! Each load renders the page anew with the report's own renderer
//! ([`crate::report::html`]) from an artifact of the run so far: the engine's snapshot
//! (totals) and the per-second series of the seconds that are over, its ledger verdict
//! pending ([`crate::report::live`]). Nothing is computed while nobody looks. When the
//! run's result is written, [`Page::finish`] serves its `report.html` instead, and waits a
//! bounded time for a viewer who was following the run to load it.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::extract::State;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use tokio::sync::watch;

use crate::artifact::{Artifact, RunFacts, ShardResult};
use crate::engine::snapshot::LiveTap;
use crate::engine::snapshot::{Followed, Viewer};
use crate::ledger::Ledger;
use crate::report::html::{self, page};
use crate::report::live::{self, Progress};
use crate::scenario::Plan;

/// How long the run waits, once its result is written, for a viewer who loaded the page
/// in that time before it to load the final report (the page asks every second).
pub const FINAL_WAIT: Duration = Duration::from_secs(10);

/// What the page shows a run from, once the run knows it.
#[derive(Debug)]
struct Source {
    /// What the engine publishes.
    tap: Arc<LiveTap>,
    /// What the run is.
    run: Followed,
}

/// A running page; stops when dropped.
#[derive(Debug)]
pub struct Page {
    /// Where it listens (the port chosen when asked for port 0).
    pub addr: SocketAddr,
    state: Arc<Shown>,
    task: tokio::task::JoinHandle<()>,
}

/// What the page serves, and who looked.
#[derive(Debug, Default)]
struct Shown {
    /// The run, once it started.
    source: Mutex<Option<Arc<Source>>>,
    /// The final report, once the result is written.
    last: Mutex<Option<Arc<str>>>,
    /// When a viewer last loaded the page.
    viewed: Mutex<Option<Instant>>,
    /// Set when a viewer loaded the final report.
    final_seen: watch::Sender<bool>,
}

impl Page {
    /// Listens on `addr`; until the run [follows](Viewer::follow) it, the page says the run
    /// is starting.
    /// Fails (nothing started) when the address cannot be listened on.
    pub async fn start(addr: SocketAddr) -> std::io::Result<Page> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(Shown::default());
        let app = Router::new()
            .route("/", get(show))
            .with_state(state.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Page { addr, state, task })
    }

    /// Serves `report` (the run's final `report.html`) from now on; when a viewer loaded
    /// the page in the last [`FINAL_WAIT`], waits up to that long for one to load it.
    /// True when a viewer did.
    pub async fn finish(&self, report: String) -> bool {
        *lock(&self.state.last) = Some(report.into());
        let followed = lock(&self.state.viewed).is_some_and(|t| t.elapsed() < FINAL_WAIT);
        if !followed {
            return false;
        }
        let mut seen = self.state.final_seen.subscribe();
        tokio::time::timeout(FINAL_WAIT, seen.wait_for(|s| *s))
            .await
            .is_ok_and(|r| r.is_ok())
    }
}

impl Viewer for Page {
    fn follow(&self, tap: Arc<LiveTap>, run: Followed) {
        *lock(&self.state.source) = Some(Arc::new(Source { tap, run }));
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A lock whose holder cannot have left its data half-changed (every write is one store).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// `GET /`: the final report once there is one, else the run so far.
async fn show(State(s): State<Arc<Shown>>) -> impl IntoResponse {
    *lock(&s.viewed) = Some(Instant::now());
    let last = lock(&s.last).clone();
    let body: String = match last {
        Some(html) => {
            s.final_seen.send_replace(true);
            html.to_string()
        }
        None => {
            let source = lock(&s.source).clone();
            // Rendering adds up the recorders and draws the charts: off the engine's workers.
            tokio::task::spawn_blocking(move || so_far(source.as_deref()))
                .await
                .unwrap_or_else(|e| starting(&format!("the page failed: {e}")))
        }
    };
    (
        [
            (CONTENT_TYPE, "text/html; charset=utf-8"),
            (CACHE_CONTROL, "no-store"),
        ],
        body,
    )
}

/// The page of the run so far.
fn so_far(source: Option<&Source>) -> String {
    let Some(Source { tap, run }) = source else {
        return starting("starting the target and the generator");
    };
    match (tap.snapshot(), tap.acceptance()) {
        (Some(snap), Some(acceptance)) => {
            let (mut metrics, over) = tap.series().unwrap_or_default();
            metrics.merge_totals(&snap.metrics);
            let now_us = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_micros() as u64);
            let facts = RunFacts {
                run_id: run.run_id,
                target: run.target.clone(),
                acceptance,
                unpromised: Vec::new(),
                started_unix_us: now_us.saturating_sub(snap.elapsed.as_micros() as u64),
                // The seconds that are over: those the series has, and the charts show.
                duration: Duration::from_secs(u64::from(over)),
                traffic_started: snap.traffic_started,
                interrupted: false,
                shard: generator(&run.plan, snap.elapsed),
                notes: Vec::new(),
                processes: Vec::new(),
                scenario_source: run.scenario_source.clone(),
                server_metrics: Vec::new(),
                chaos: Vec::new(),
                population: None,
                signals: None,
            };
            let a = Artifact::new(&run.plan, facts, metrics, Ledger::new(&run.plan.ledger));
            let progress = Progress {
                phase: snap.phase.to_owned(),
                running: snap.deliveries,
                overdue: snap.overdue,
                elapsed: snap.elapsed,
            };
            html::render(&live::report(&a, &progress))
        }
        _ => starting("connecting the users"),
    }
}

/// This process so far, as a shard result.
fn generator(plan: &Plan, elapsed: Duration) -> ShardResult {
    ShardResult {
        index: plan.shard.index,
        count: plan.shard.count,
        users: plan.shard.range(plan.population.users).len() as u32,
        duration_s: elapsed.as_secs_f64(),
        cpu_s: crate::sys::cpu_time().as_secs_f64(),
        cores: crate::sys::cores() as u32,
        peak_rss_bytes: crate::sys::peak_rss_bytes(),
        fd_limit: 0,
        clock: None,
    }
}

/// The page before the engine has anything to show: says what the run is doing.
fn starting(doing: &str) -> String {
    let body = format!(
        r#"<header class="verdict live"><h1>STARTING</h1><p class="scenario">msgstorm is {}; this page shows the run as soon as its users connect.</p></header>"#,
        html::esc(doing)
    );
    page::document("msgstorm — starting", &body, Some("starting"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `GET /` of the page at `addr`: the body.
    async fn load(addr: SocketAddr) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
        s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .expect("request");
        let mut raw = String::new();
        s.read_to_string(&mut raw).await.expect("answer");
        raw.split_once("\r\n\r\n")
            .map(|(_, b)| b.to_owned())
            .unwrap_or_default()
    }

    #[tokio::test(start_paused = true)]
    async fn nobody_looking_means_no_wait_at_the_end() {
        let page = Page::start("127.0.0.1:0".parse().expect("an address"))
            .await
            .expect("listens");
        let start = tokio::time::Instant::now();
        assert!(!page.finish("final".to_owned()).await);
        // On the paused clock any wait would have moved time on.
        assert_eq!(start.elapsed(), Duration::ZERO);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_viewer_who_followed_the_run_gets_the_final_report_before_the_end() {
        let page = Arc::new(
            Page::start("127.0.0.1:0".parse().expect("an address"))
                .await
                .expect("listens"),
        );
        let before = load(page.addr).await;
        assert!(before.contains("STARTING") && before.contains("data-live=\"starting\""));
        let finishing = tokio::spawn({
            let page = page.clone();
            async move { page.finish("<html>final</html>".to_owned()).await }
        });
        // The viewer's next load is the final report; then the wait is over.
        let mut after = load(page.addr).await;
        for _ in 0..1000 {
            if after == "<html>final</html>" {
                break;
            }
            assert!(after.contains("STARTING"), "{after}");
            tokio::task::yield_now().await;
            after = load(page.addr).await;
        }
        assert_eq!(after, "<html>final</html>");
        assert!(finishing.await.expect("finish"));
    }
}
