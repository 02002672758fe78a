//! Running a scenario: one [`Plan`] to one [`Artifact`].
//!
//! [`run`] is one process's run, as a sequence of named steps: check the host's limits
//! ([`host`]), start the embedded reference server or probe the target ([`target`]), start
//! the process monitor and scraper (`watchers`), meet the run's other shards (`meet`),
//! run the engine with the driver the plan names, and gather what everything recorded into
//! the artifact, written nowhere. [`shards`] runs one plan as several shards through a
//! [`crate::launch::Launcher`] and merges their results exactly.
//!
//! Nothing here prints or parses flags: stages, progress and notes go to an [`event::Sink`]
//! that the CLI renders (the terminal bar, plain lines in CI logs) and tests collect; stop
//! requests come in through a counter the caller increments (the CLI on Ctrl-C / SIGTERM).

pub mod event;
pub mod host;
mod live;
mod meet;
pub mod shards;
pub mod target;
mod watchers;

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::watch;

pub use event::{Event, Sink, Stage};

use crate::artifact::{Artifact, CheckMetric, RunFacts, ScenarioSource, ShardResult, SignalRecord};
use crate::driver::directory::Directory;
use crate::driver::{Config, Driver, Promise, WithDriver};
pub use crate::engine::snapshot::{Followed, Viewer};
use crate::engine::{Outcome, RunOptions};
use crate::error::{Error, Result};
use crate::launch::Rendezvous;
use crate::scenario::Plan;

/// How one process takes part in a run, besides its plan.
#[derive(Debug)]
pub struct Options {
    /// The run id every envelope carries (the same in every shard); `None`: a random one.
    pub run_id: Option<u32>,
    /// Traffic starts no earlier than this wall-clock time (so that shards start
    /// together), and not before this process's users have logged in.
    pub traffic_at: Option<SystemTime>,
    /// Where this shard meets the run's other shards before traffic.
    pub rendezvous: Option<Rendezvous>,
    /// The scenario as run, kept in the result for the report to show.
    pub source: Option<ScenarioSource>,
    /// Stop requests, counted: the first drains the load, the second stops it at once;
    /// both still give the result. Looked at from [`Stage::Load`] to [`Stage::Collect`].
    pub stops: watch::Receiver<u32>,
    /// Where to serve the run's OpenMetrics (`--metrics-listen`; over the plan's
    /// `report.metrics_listen`).
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Where to push them by remote-write (`--metrics-push`; over `report.metrics_push`).
    pub metrics_push: Option<http::Uri>,
    /// What shows the run while it lasts (the `--live` page), told what to show once the
    /// engine is about to start.
    pub viewer: Option<Arc<dyn Viewer>>,
}

/// Runs `plan` once in this process — the embedded server when it names no target, the
/// monitor, the engine — and returns its artifact, written nowhere. Phases, progress and
/// notes go to `sink` as they happen.
pub async fn run(mut plan: Plan, options: Options, sink: &mut dyn Sink) -> Result<Artifact> {
    let mut notes = Vec::new();
    let fd_limit = host::check_fd_limit(&plan, &mut notes)?;
    if plan.shard.index == 0 {
        crate::chaos::process::check(&plan.chaos)?;
    }
    let (server, shown) = target::prepare(&mut plan, &mut notes).await?;
    let mut chaos = crate::chaos::Chaos::prepare(&mut plan)
        .await
        .map_err(|e| Error::Usage(format!("chaos: starting msgstorm's proxy: {e}")))?;
    let watchers = watchers::Watchers::start(&plan, Instant::now(), &mut notes);
    let run_id = options.run_id.unwrap_or_else(|| fastrand::u32(..));
    let shown_as = target::named(shown.clone(), server.is_some());
    let live = live::start(&plan, &options, (run_id, shown_as), sink).await?;
    let meeting = meet::meet(options.rendezvous.as_ref(), plan.shard).await?;
    let engine = RunOptions {
        run_id,
        traffic_at: options.traffic_at,
        barrier: meeting.barrier.clone(),
        clock: meeting.clock,
        traffic_seen: chaos.as_ref().map(crate::chaos::Chaos::traffic_start),
        live: live.tap.clone(),
    };
    if let Some(c) = chaos.as_mut() {
        c.start();
    }
    let load = load(
        &plan,
        engine,
        meeting.directory.clone(),
        options.stops,
        sink,
    )
    .await?;
    if let Some(note) = live.finish().await {
        notes.push(note);
    }
    let chaos = match chaos {
        Some(c) => c.finish().await,
        None => Vec::new(),
    };
    let watched = watchers.stop(&mut notes).await;
    let target = target::named(shown, server.is_some());
    target::stop(server).await?;
    notes.extend(load.outcome.notes.iter().cloned());
    let clock = meeting.part(&mut notes).await;
    let shard = load.shard(&plan, fd_limit, clock);
    let facts = RunFacts {
        run_id,
        target,
        acceptance: load.acceptance,
        unpromised: load.unpromised,
        started_unix_us: load.outcome.started_wall_us,
        duration: load.outcome.duration,
        traffic_started: load.outcome.traffic_started,
        interrupted: load.outcome.interrupted,
        shard,
        notes,
        processes: watched.processes,
        scenario_source: options.source,
        server_metrics: watched.server_metrics,
        chaos,
        // Planned again for all users: once per run, by its first shard.
        population: (plan.shard.index == 0).then(|| offered(&plan)).flatten(),
        signals: SignalRecord::of(&plan, load.outcome.signals),
    };
    Ok(Artifact::new(
        &plan,
        facts,
        load.outcome.metrics,
        load.outcome.ledger,
    ))
}

/// What the load phase gave: the engine's outcome and what it cost this process.
/// The most users whose offered shape a run computes for its result file: it plans every
/// user's sends again, which for 1M users took 2.3 s and over 1 GB
/// (`bench/results/2026-11-28-population.md`); `validate` gives it for any size.
const OFFERED_USERS: u32 = 200_000;

/// The shape the population of `plan` offered, if it has one and is not too large to plan
/// again at the end of the run.
fn offered(plan: &Plan) -> Option<crate::vocab::Offered> {
    (plan.population.users <= OFFERED_USERS)
        .then(|| crate::engine::offered::offered(plan))
        .flatten()
}

impl Load {
    /// This process's shard of `plan` as the result file records it.
    fn shard(
        &self,
        plan: &Plan,
        fd_limit: u64,
        clock: Option<crate::artifact::ClockSync>,
    ) -> ShardResult {
        ShardResult {
            index: plan.shard.index,
            count: plan.shard.count,
            users: self.outcome.users,
            duration_s: self.outcome.duration.as_secs_f64(),
            cpu_s: self.cpu.as_secs_f64(),
            cores: crate::sys::cores() as u32,
            peak_rss_bytes: self.peak_rss,
            fd_limit,
            clock,
        }
    }
}

struct Load {
    /// What the engine recorded.
    outcome: Outcome,
    /// Whether sends had an acceptance (the driver's capability).
    acceptance: bool,
    /// The delivery checks the driver's protocol does not promise.
    unpromised: Vec<CheckMetric>,
    /// CPU time this process spent in the load.
    cpu: Duration,
    /// This process's peak resident memory, bytes.
    peak_rss: u64,
}

/// Runs the engine over `plan` with the driver it names, between [`Stage::Load`] and
/// [`Stage::Collect`], its progress going to `sink`.
async fn load(
    plan: &Plan,
    opts: RunOptions,
    directory: Option<Arc<dyn Directory>>,
    stops: watch::Receiver<u32>,
    sink: &mut dyn Sink,
) -> Result<Load> {
    sink.event(Event::Stage(Stage::Load));
    let cpu_start = crate::sys::cpu_time();
    let job = EngineJob {
        plan,
        opts,
        stops,
        sink: &mut *sink,
    };
    let config = Config {
        directory,
        ..plan.driver_config(job.opts.run_id)
    };
    let (mut outcome, acceptance, promise) = crate::driver::with_driver(&config, job)
        .await
        .map_err(|e| Error::Usage(e.to_string()))?;
    config.wires.add_to(&mut outcome.metrics);
    let cpu = crate::sys::cpu_time().saturating_sub(cpu_start);
    let peak_rss = crate::sys::peak_rss_bytes();
    sink.event(Event::Stage(Stage::Collect));
    let unpromised = [
        (promise.every, CheckMetric::Lost),
        (promise.once, CheckMetric::Duplicated),
        (promise.in_order, CheckMetric::Reordered),
    ]
    .into_iter()
    .filter(|(kept, _)| !kept)
    .map(|(_, metric)| metric)
    .collect();
    Ok(Load {
        outcome,
        acceptance,
        unpromised,
        cpu,
        peak_rss,
    })
}

/// The engine's run, as a job for whichever driver the scenario names.
struct EngineJob<'a> {
    plan: &'a Plan,
    opts: RunOptions,
    stops: watch::Receiver<u32>,
    sink: &'a mut dyn Sink,
}

impl WithDriver for EngineJob<'_> {
    /// What the engine recorded, whether sends had an acceptance, and what the protocol
    /// promises.
    type Output = (Outcome, bool, Promise);

    async fn run<D: Driver>(self, driver: D) -> (Outcome, bool, Promise) {
        let acceptance = driver.caps().acceptance;
        let promise = driver.promise();
        let sink = self.sink;
        let outcome = crate::engine::run(self.plan, driver, self.opts, self.stops, |p| {
            sink.event(Event::Progress(*p));
        })
        .await;
        (outcome, acceptance, promise)
    }
}
