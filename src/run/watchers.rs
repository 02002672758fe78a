//! What watches a run besides the engine: the process monitor (CPU, memory, fds of the
//! generator and of the plan's target processes) and the Prometheus scraper of the plan's
//! `[monitor] prometheus` endpoints, both sampling once a second until the load is over.

use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::monitor::{Monitor, ProcUsage};
use crate::scenario::Plan;
use crate::scrape::ScrapedSeries;

/// How often the watchers sample.
const EVERY: Duration = Duration::from_secs(1);

/// What scraping the Prometheus endpoints gives: the series and notes on failures.
type Scraped = (Vec<ScrapedSeries>, Vec<String>);

/// A sampling task and the sender that stops it.
type Task<T> = (oneshot::Sender<()>, JoinHandle<T>);

/// The running watchers of one run.
pub struct Watchers {
    /// The process monitor.
    monitor: Task<Vec<ProcUsage>>,
    /// The scraper, when the plan has endpoints and this is shard 0.
    scraper: Option<Task<Scraped>>,
}

/// What the watchers saw.
pub struct Watched {
    /// The monitored processes' usage.
    pub processes: Vec<ProcUsage>,
    /// The scraped series.
    pub server_metrics: Vec<ScrapedSeries>,
}

impl Watchers {
    /// Starts watching the plan's processes (noting in `notes` a named process that is not
    /// running) and endpoints, with times counted from `t0`.
    pub fn start(plan: &Plan, t0: Instant, notes: &mut Vec<String>) -> Watchers {
        let mut pids = plan.monitor.pids.clone();
        for name in &plan.monitor.names {
            let found = crate::monitor::pids_named(name);
            if found.is_empty() {
                notes.push(format!("monitor: no process named `{name}` was running"));
            }
            pids.extend(found);
        }
        let (stop, stopped) = oneshot::channel::<()>();
        let monitor = tokio::spawn(Monitor::new(t0, plan.shard.index, &pids).run(
            EVERY,
            async move {
                let _ = stopped.await;
            },
        ));
        Watchers {
            monitor: (stop, monitor),
            scraper: start_scraper(plan, t0),
        }
    }

    /// Stops both, adding the scraper's notes to `notes`.
    pub async fn stop(self, notes: &mut Vec<String>) -> Watched {
        let (stop, monitor) = self.monitor;
        let _ = stop.send(());
        let processes = monitor.await.unwrap_or_default();
        let (server_metrics, scrape_notes) = match self.scraper {
            Some((stop, scraping)) => {
                let _ = stop.send(());
                scraping.await.unwrap_or_default()
            }
            None => Default::default(),
        };
        notes.extend(scrape_notes);
        Watched {
            processes,
            server_metrics,
        }
    }
}

/// Starts scraping the plan's `[monitor] prometheus` endpoints, in shard 0 only (every
/// shard would scrape the same endpoints).
#[cfg(feature = "prometheus")]
fn start_scraper(plan: &Plan, t0: Instant) -> Option<Task<Scraped>> {
    if plan.monitor.prometheus.is_empty() || plan.shard.index != 0 {
        return None;
    }
    let (stop, stopped) = oneshot::channel::<()>();
    let scraper = crate::scrape::client::Scraper::new(
        t0,
        &plan.monitor.prometheus,
        plan.monitor.series.clone(),
    );
    let task = tokio::spawn(scraper.run(EVERY, async move {
        let _ = stopped.await;
    }));
    Some((stop, task))
}

/// Without the `prometheus` feature a plan has no endpoints (validation refuses them).
#[cfg(not(feature = "prometheus"))]
fn start_scraper(_: &Plan, _: Instant) -> Option<Task<Scraped>> {
    None
}
