//! `msgstorm run`: load the plan, check the host's limits, start the embedded server when
//! there is no target, run the engine, write the result and print the report.

use std::time::Duration;

use tokio::sync::watch;

use super::output::{write_file, Outputs};
use super::progress::Progress;
use super::{note, say, RunArgs};
use crate::artifact::{default_out_dir, Artifact, RunFacts, ShardResult};
use crate::driver::{Driver, WithDriver};
use crate::engine::{Outcome, Progress as EngineProgress, RunOptions};
use crate::error::{Error, Result, EXIT_CHECK_FAILED, EXIT_OK};
use crate::metrics::{Counter, ErrorKind};
use crate::report::format::Format;
use crate::scenario::{self, Plan, Shard};

/// Sockets the generator needs besides one per user (stdio, the probe, a metrics scrape…).
pub(super) const FD_MARGIN: u64 = 64;

/// The plan of `msgstorm run`'s arguments for `shard`: the scenario file or the built-in
/// default, with the `--set` overrides and `--out`.
pub(super) fn load_plan(args: &RunArgs, shard: Shard) -> Result<Plan> {
    let mut plan = match &args.scenario {
        Some(path) => scenario::load(path, &args.set, shard)?,
        None => scenario::parse(
            scenario::DEFAULT_SCENARIO,
            std::path::Path::new("default.toml"),
            &args.set,
            shard,
        )?,
    };
    if let Some(out) = &args.out {
        plan.report.out = Some(out.clone());
    }
    Ok(plan)
}

/// Starts the embedded server when the plan names no target, and checks that the target
/// accepts connections at all (exit code 3 when it does not). Returns the server, if any,
/// and the target as reports show it (the URL, or the in-process driver's name).
pub(super) async fn prepare_target(
    plan: &mut Plan,
    notes: &mut Vec<String>,
) -> Result<(Option<Embedded>, String)> {
    let server = start_embedded(plan, notes).await?;
    let shown = match &plan.target.endpoint {
        Some(ep) => {
            crate::driver::probe(ep, plan.target.connect_timeout).await?;
            ep.url.clone()
        }
        None => format!("in-process {}", plan.target.driver.name),
    };
    Ok((server, shown))
}

/// The engine's run, as a job for whichever driver the scenario names.
struct EngineJob<'a, F> {
    plan: &'a Plan,
    opts: RunOptions,
    signals: watch::Receiver<u32>,
    on_progress: F,
}

impl<F: FnMut(&EngineProgress) + Send> WithDriver for EngineJob<'_, F> {
    /// What the engine recorded, and whether sends had an acceptance.
    type Output = (Outcome, bool);

    async fn run<D: Driver>(self, driver: D) -> (Outcome, bool) {
        let acceptance = driver.caps().acceptance;
        let outcome =
            crate::engine::run(self.plan, driver, self.opts, self.signals, self.on_progress).await;
        (outcome, acceptance)
    }
}

/// The results folder of `plan`, created now so that an unusable one fails before the run.
pub(super) fn out_dir(plan: &Plan) -> Result<std::path::PathBuf> {
    let dir = plan
        .report
        .out
        .clone()
        .unwrap_or_else(|| default_out_dir(&plan.name));
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    Ok(dir)
}

/// Writes the result into its folder, prints the report, and returns the exit code.
/// A process that ran one shard of several (`--shard I/N`) exits 0 when only the missing
/// shards fail its report: its result is a part, judged when `report` merges every shard.
pub(super) fn finish(artifact: &Artifact, dir: &std::path::Path, outputs: &Outputs) -> Result<u8> {
    // The report goes out first: a result file that cannot be written must not also
    // cost the numbers on the screen.
    let rendered = crate::report::render(artifact);
    outputs.emit("report", |f| f.for_run().render(&rendered.report))?;
    let path = artifact.write(dir).map_err(Error::in_output)?;
    note(&format!("result: {}", path.display()));
    let page = dir.join("report.html");
    let html = Format::Html.for_run().render(&rendered.report)?;
    write_file(&html, &page).map_err(Error::in_output)?;
    note(&format!("report: {}", page.display()));
    if rendered.partial {
        note(
            "this result is one shard of the run: the run's verdict comes from \
             `msgstorm report` over every shard's result.json",
        );
        return Ok(EXIT_OK);
    }
    if let Some(why) = generator_only(artifact) {
        return Err(Error::Generator(why));
    }
    Ok(if rendered.passed {
        EXIT_OK
    } else {
        EXIT_CHECK_FAILED
    })
}

/// The first of the generator's own failures, when they are why no user ever logged in:
/// every connection attempt failed on the generator's side (errors of kind `generator`),
/// so the target was never tried — msgstorm's failure (exit 4), not the target's.
fn generator_only(a: &Artifact) -> Option<String> {
    let m = &a.metrics;
    let attempts = m.count(Counter::ConnectAttempts);
    let (_, failed, examples) = m.errors().find(|e| e.0 == ErrorKind::Generator)?;
    (attempts > 0 && m.count(Counter::LoginOk) == 0 && failed >= attempts)
        .then(|| examples.first().cloned().unwrap_or_default())
}

/// Runs `msgstorm run` and returns the exit code.
pub async fn run(args: RunArgs) -> Result<u8> {
    let outputs = Outputs::resolve(&args.format, None)?;
    if let Some(shards) = args.shards.filter(|&n| n > 1) {
        return super::shards::run(args, shards).await;
    }
    let plan = load_plan(&args, args.shard.unwrap_or(Shard::WHOLE))?;
    // Of several shards, shard 0 says them (the local coordinator has said them already).
    if args.shard.is_none_or(|s| s.index == 0) {
        plan.warnings.iter().for_each(|w| note(w));
    }
    let dir = out_dir(&plan)?;
    let artifact = execute(plan, &args).await?;
    let finished = finish(&artifact, &dir, &outputs);
    // The log is the result's way out of a pod: framed even when the file failed.
    if args.log_result {
        log_result(&artifact)?;
    }
    finished
}

/// Runs `plan` once — the embedded server when it names no target, the monitor, the
/// engine — and returns its artifact, written nowhere. `args` gives the run id, the start
/// time and barrier of a shard, and `--quiet`.
pub(super) async fn execute(mut plan: Plan, args: &RunArgs) -> Result<Artifact> {
    let mut notes = Vec::new();
    let fd_limit = check_fd_limit(&plan, &mut notes)?;
    let (server, url) = prepare_target(&mut plan, &mut notes).await?;

    let mut pids = plan.monitor.pids.clone();
    for name in &plan.monitor.names {
        let found = crate::monitor::pids_named(name);
        if found.is_empty() {
            notes.push(format!("monitor: no process named `{name}` was running"));
        }
        pids.extend(found);
    }
    let (stop_monitor, monitor_stopped) = tokio::sync::oneshot::channel::<()>();
    let t0 = std::time::Instant::now();
    let scraper = start_scraper(&plan, t0);
    let monitor = tokio::spawn(
        crate::monitor::Monitor::new(t0, plan.shard.index, &pids).run(
            Duration::from_secs(1),
            async move {
                let _ = monitor_stopped.await;
            },
        ),
    );

    let run_id = args.run_id.unwrap_or_else(|| fastrand::u32(..));
    let meeting = super::meet::meet(args.start_barrier.as_ref(), plan.shard).await?;
    let opts = crate::engine::RunOptions {
        run_id,
        traffic_at: args
            .traffic_at
            .map(|ms| std::time::UNIX_EPOCH + Duration::from_millis(ms)),
        barrier: meeting.barrier.clone(),
        clock: meeting.clock,
    };
    let (signal_tx, signals) = watch::channel(0u32);
    let listener = tokio::spawn(count_signals(signal_tx));
    let mut progress = Progress::new(
        args.quiet,
        plan.population.users,
        super::progress::Timeline::of(&plan),
    );
    let cpu_start = crate::sys::cpu_time();
    let job = EngineJob {
        plan: &plan,
        opts,
        signals,
        on_progress: |p: &EngineProgress| progress.update(p),
    };
    let (outcome, acceptance) = crate::driver::with_driver(&plan.driver_config(run_id), job)
        .await
        .map_err(|e| Error::Usage(e.to_string()))?;
    let cpu = crate::sys::cpu_time().saturating_sub(cpu_start);
    let peak_rss = crate::sys::peak_rss_bytes();
    progress.finish();
    listener.abort();
    let _ = stop_monitor.send(());
    let processes = monitor.await.unwrap_or_default();
    let (server_metrics, scrape_notes) = match scraper {
        Some((stop, scraping)) => {
            let _ = stop.send(());
            scraping.await.unwrap_or_default()
        }
        None => Default::default(),
    };
    notes.extend(scrape_notes);
    let target = match server {
        Some(_) => format!("embedded {url}"),
        None => url,
    };
    if let Some(server) = server {
        server
            .shutdown()
            .await
            .map_err(|e| Error::Server(format!("embedded server: {e}")))?;
    }

    notes.extend(outcome.notes.iter().cloned());
    let clock = meeting.part(&mut notes).await;
    let cores = crate::sys::cores();
    let facts = RunFacts {
        run_id,
        target,
        acceptance,
        started_unix_us: outcome.started_wall_us,
        duration: outcome.duration,
        traffic_started: outcome.traffic_started,
        interrupted: outcome.interrupted,
        shard: ShardResult {
            index: plan.shard.index,
            count: plan.shard.count,
            users: outcome.users,
            duration_s: outcome.duration.as_secs_f64(),
            cpu_s: cpu.as_secs_f64(),
            cores: cores as u32,
            peak_rss_bytes: peak_rss,
            fd_limit,
            clock,
        },
        notes,
        processes,
        scenario_source: Some(scenario_source(args)),
        server_metrics,
    };
    Ok(Artifact::new(&plan, facts, outcome.metrics, outcome.ledger))
}

/// Prints the result, framed, to standard output ([`crate::launch::frame`]).
pub(super) fn log_result(artifact: &Artifact) -> Result<()> {
    let bytes = serde_json::to_vec(artifact)
        .map_err(|e| Error::Other(format!("cannot encode the result: {e}")))?;
    let shard = artifact
        .shards
        .first()
        .map_or("0/1".to_owned(), |s| format!("{}/{}", s.index, s.count));
    say(crate::launch::frame::encode(&shard, &artifact.run_id, &bytes).trim_end());
    Ok(())
}

/// What scraping the Prometheus endpoints gives: the series and notes on failures.
type Scraped = (Vec<crate::scrape::ScrapedSeries>, Vec<String>);

/// Starts scraping the plan's `[monitor] prometheus` endpoints once a second, in shard 0
/// only (every shard would scrape the same endpoints); stopped through the sender.
#[cfg(feature = "prometheus")]
fn start_scraper(
    plan: &Plan,
    t0: std::time::Instant,
) -> Option<(
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<Scraped>,
)> {
    if plan.monitor.prometheus.is_empty() || plan.shard.index != 0 {
        return None;
    }
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let scraper = crate::scrape::client::Scraper::new(
        t0,
        &plan.monitor.prometheus,
        plan.monitor.series.clone(),
    );
    let task = tokio::spawn(scraper.run(Duration::from_secs(1), async move {
        let _ = stopped.await;
    }));
    Some((stop, task))
}

/// Without the `prometheus` feature a plan has no endpoints (validation refuses them).
#[cfg(not(feature = "prometheus"))]
fn start_scraper(
    _: &Plan,
    _: std::time::Instant,
) -> Option<(
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<Scraped>,
)> {
    None
}

/// The scenario of `args` as run: the file's text (or the built-in default) and `--set`.
pub(super) fn scenario_source(args: &RunArgs) -> crate::artifact::ScenarioSource {
    let (file, text) = match &args.scenario {
        // Already read once by `load_plan`; a file gone since loses only this display.
        Some(path) => (
            path.display().to_string(),
            std::fs::read_to_string(path).unwrap_or_default(),
        ),
        None => (
            "(built-in default)".to_owned(),
            scenario::DEFAULT_SCENARIO.to_owned(),
        ),
    };
    crate::artifact::ScenarioSource {
        file,
        text,
        overrides: args.set.clone(),
    }
}

/// Raises the open-file limit and refuses a run that cannot fit under it.
fn check_fd_limit(plan: &Plan, notes: &mut Vec<String>) -> Result<u64> {
    let limit = crate::sys::raise_fd_limit()
        .map_err(|e| Error::Other(format!("cannot read the open-file limit: {e}")))?;
    let users = plan.shard.range(plan.population.users).len() as u64;
    // The embedded server lives in this process and holds the other end of every socket;
    // an in-process driver holds none.
    let per_user = match (&plan.target.endpoint, plan.target.driver.embedded_path) {
        (Some(_), _) => 1,
        (None, Some(_)) => 2,
        (None, None) => 0,
    };
    let needed = users * per_user + FD_MARGIN;
    if needed > limit.now {
        let shards = needed.div_ceil(limit.now.saturating_sub(FD_MARGIN).max(1));
        return Err(Error::Usage(format!(
            "this run needs {needed} sockets in one process, the open-file limit is {}: split it \
             into {shards} generator processes (`--shards {shards}`){}",
            limit.now,
            if per_user == 2 {
                ", and run the server separately (`msgstorm serve`)"
            } else {
                ""
            }
        )));
    }
    // Every connection to one target address from one source address needs its own
    // ephemeral port; all shards on this host share them.
    let ports = crate::sys::ephemeral_ports();
    let sources = plan.target.source_addrs.len().max(1) as u64;
    let total = u64::from(plan.population.users);
    if total.div_ceil(sources) > ports {
        let want = total.div_ceil(ports);
        return Err(Error::Usage(format!(
            "this run opens {total} connections to one address, and one source address has \
             {ports} ephemeral ports: add source addresses (`[target] source_addresses`, at \
             least {want}, e.g. \"127.0.0.2\" … on loopback)"
        )));
    }
    if limit.now > limit.was {
        notes.push(format!(
            "raised the open-file limit from {} to {}",
            limit.was, limit.now
        ));
    }
    Ok(limit.now)
}

/// The embedded reference server, when the plan names no target.
#[cfg(feature = "serve")]
pub(super) type Embedded = crate::serve::ServerHandle;
/// The embedded reference server, which a build without the `serve` feature never has.
#[cfg(not(feature = "serve"))]
#[derive(Debug)]
pub(super) enum Embedded {}

#[cfg(not(feature = "serve"))]
impl Embedded {
    /// The token secret (never called: there is no value of this type).
    pub(super) fn secret(&self) -> &str {
        match *self {}
    }

    /// Stops the server (never called: there is no value of this type).
    pub(super) async fn shutdown(self) -> Result<()> {
        match self {}
    }
}

/// Starts the reference server in this process when the plan names no target.
#[cfg(feature = "serve")]
async fn start_embedded(plan: &mut Plan, notes: &mut Vec<String>) -> Result<Option<Embedded>> {
    let driver = plan.target.driver;
    let (None, Some(path)) = (&plan.target.endpoint, driver.embedded_path) else {
        return Ok(None);
    };
    let handle = crate::serve::spawn(crate::serve::ServeConfig::default()).await?;
    let url = format!("ws://{}{path}", handle.addr());
    plan.target.endpoint = Some(
        crate::driver::Endpoint::parse(&url, driver)
            .map_err(|e| Error::Other(format!("embedded server: {e}")))?,
    );
    if driver.auth.contains(&crate::driver::AuthForm::Secret) {
        plan.target.auth = scenario::Auth::Secret(handle.secret().to_owned());
    }
    notes.push(crate::report::findings::EMBEDDED_IN_GENERATOR.to_owned());
    Ok(Some(handle))
}

#[cfg(not(feature = "serve"))]
async fn start_embedded(plan: &mut Plan, _: &mut Vec<String>) -> Result<Option<Embedded>> {
    match (&plan.target.endpoint, plan.target.driver.embedded_path) {
        (None, Some(_)) => Err(Error::Usage(
            "target.url: this msgstorm was built without the embedded server (feature `serve`)"
                .to_owned(),
        )),
        _ => Ok(None),
    }
}

/// Counts SIGINT/SIGTERM: the first stops the load and drains, the second stops at once.
pub(super) async fn count_signals(tx: watch::Sender<u32>) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return;
    };
    loop {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        let n = *tx.borrow() + 1;
        note(if n == 1 {
            "stopping: draining in-flight deliveries (signal again to stop at once)"
        } else {
            "stopping now"
        });
        tx.send_replace(n);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
