//! `msgstorm run`: load the plan, check the host's limits, start the embedded server when
//! there is no target, run the engine, write the result and print the report.

use std::time::Duration;

use tokio::sync::watch;

use super::progress::Progress;
use super::{note, say, RunArgs};
use crate::artifact::{default_out_dir, Artifact, RunFacts, ShardResult};
use crate::driver::echo::EchoDriver;
use crate::driver::native::NativeDriver;
use crate::driver::Driver;
use crate::error::{Error, Result, EXIT_CHECK_FAILED, EXIT_OK};
use crate::scenario::{self, Auth, DriverKind, Plan, Shard};

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
    check_driver_options(&plan, args.scenario.as_deref())?;
    Ok(plan)
}

/// Checks the driver's own options; an error names the scenario file, the line of the key
/// (found in the file: the scenario layer keeps these tables raw) and the key.
pub(super) fn check_driver_options(plan: &Plan, file: Option<&std::path::Path>) -> Result<()> {
    let Err((key, msg)) = crate::driver::check_options(plan) else {
        return Ok(());
    };
    let text = file.and_then(|f| std::fs::read_to_string(f).ok());
    Err(Error::Scenario {
        file: file.map_or_else(|| "default.toml".into(), |f| f.to_owned()),
        line: text.as_deref().map_or(0, |t| line_of_key(t, &key)),
        key,
        msg,
    })
}

/// The 1-based line where dotted `key` (`target.mqtt.qos`) is set in a TOML text, or 0.
fn line_of_key(text: &str, key: &str) -> usize {
    let Some((table, name)) = key.rsplit_once('.') else {
        return 0;
    };
    let mut in_table = false;
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.starts_with('[') {
            in_table = l.trim_matches(|c| c == '[' || c == ']').trim() == table;
            continue;
        }
        let assigned = l.split_once('=').map(|(k, _)| k.trim());
        if in_table && assigned == Some(name) {
            return i + 1;
        }
    }
    0
}

/// Starts the embedded server when the plan names no target, and checks that the target
/// accepts connections at all (exit code 3 when it does not). Returns the server, if any,
/// and the URL every user connects to.
pub(super) async fn prepare_target(
    plan: &mut Plan,
    notes: &mut Vec<String>,
) -> Result<(Option<Embedded>, String)> {
    let server = start_embedded(plan, notes).await?;
    let url = plan
        .target
        .url
        .clone()
        .ok_or_else(|| Error::Other("no target URL".to_owned()))?;
    crate::driver::probe(&url, plan.target.connect_timeout).await?;
    Ok((server, url))
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
pub(super) fn finish(artifact: &Artifact, dir: &std::path::Path) -> Result<u8> {
    // The report goes out first: a result file that cannot be written must not also
    // cost the numbers on the screen.
    let rendered = crate::report::render(artifact);
    say(&rendered.text);
    let path = artifact.write(dir)?;
    note(&format!("result: {}", path.display()));
    Ok(if rendered.passed {
        EXIT_OK
    } else {
        EXIT_CHECK_FAILED
    })
}

/// Runs `msgstorm run` and returns the exit code.
pub async fn run(args: RunArgs) -> Result<u8> {
    if let Some(shards) = args.shards.filter(|&n| n > 1) {
        return super::shards::run(args, shards).await;
    }
    let mut plan = load_plan(&args, args.shard.unwrap_or(Shard::WHOLE))?;
    let mut notes = Vec::new();
    let fd_limit = check_fd_limit(&plan, &mut notes)?;
    let dir = out_dir(&plan)?;
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
    let monitor = tokio::spawn(
        crate::monitor::Monitor::new(std::time::Instant::now(), plan.shard.index, &pids).run(
            Duration::from_secs(1),
            async move {
                let _ = monitor_stopped.await;
            },
        ),
    );

    let run_id = args.run_id.unwrap_or_else(|| fastrand::u32(..));
    let opts = crate::engine::RunOptions {
        run_id,
        traffic_at: args
            .traffic_at
            .map(|ms| std::time::UNIX_EPOCH + Duration::from_millis(ms)),
    };
    let (signal_tx, signals) = watch::channel(0u32);
    let listener = tokio::spawn(count_signals(signal_tx));
    let mut progress = Progress::new(args.quiet, plan.population.users);
    let cpu_start = crate::sys::cpu_time();
    let (outcome, acceptance) = match plan.target.driver {
        DriverKind::Native => {
            let driver = NativeDriver::new(&url, &plan.target);
            let acceptance = driver.has_acceptance();
            let outcome =
                crate::engine::run(&plan, driver, opts, signals, |p| progress.update(p)).await;
            (outcome, acceptance)
        }
        DriverKind::Echo => {
            let driver = EchoDriver::new(&url, &plan.target);
            let outcome =
                crate::engine::run(&plan, driver, opts, signals, |p| progress.update(p)).await;
            (outcome, false)
        }
        #[cfg(feature = "mqtt")]
        DriverKind::Mqtt => {
            let driver = crate::driver::mqtt::MqttDriver::new(&url, &plan, run_id)
                .map_err(|e| Error::Usage(format!("{}: {}", e.key, e.msg)))?;
            let acceptance = driver.has_acceptance();
            let outcome =
                crate::engine::run(&plan, driver, opts, signals, |p| progress.update(p)).await;
            (outcome, acceptance)
        }
        #[cfg(not(feature = "mqtt"))]
        other => {
            return Err(Error::Usage(format!(
                "target.driver: `{}` is not built into this msgstorm",
                other.as_str()
            )))
        }
    };
    let cpu = crate::sys::cpu_time().saturating_sub(cpu_start);
    let peak_rss = crate::sys::peak_rss_bytes();
    progress.finish();
    listener.abort();
    let _ = stop_monitor.send(());
    let processes = monitor.await.unwrap_or_default();
    let target = match server {
        Some(_) => format!("embedded {url}"),
        None => url.clone(),
    };
    if let Some(server) = server {
        server
            .shutdown()
            .await
            .map_err(|e| Error::Server(format!("embedded server: {e}")))?;
    }

    notes.extend(outcome.notes.iter().cloned());
    let lag_p99 = outcome
        .metrics
        .hist(crate::metrics::Hist::SendLag)
        .value_at_quantile(0.99);
    if lag_p99 > 10_000 {
        notes.push(format!(
            "the generator fell behind its schedule: send lag p99 {:.1} ms (latencies still count from the due time)",
            lag_p99 as f64 / 1000.0
        ));
    }
    let cores = crate::sys::cores();
    notes.extend(saturation_notes(&processes, cores));
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
        },
        notes,
        processes,
    };
    let artifact = Artifact::new(&plan, facts, outcome.metrics, outcome.ledger);
    finish(&artifact, &dir)
}

/// Says which watched process (generator or target) ran out of CPU, and when.
fn saturation_notes(processes: &[crate::monitor::ProcUsage], cores: usize) -> Vec<String> {
    let full = 90.0 * cores as f64;
    processes
        .iter()
        .filter_map(|p| {
            let (sec, pct, _) = p.series.iter().find(|s| f64::from(s.1) >= full)?;
            Some(format!(
                "{} (pid {}) used all {cores} cores from second {sec} ({pct:.0}% of one core): \
                 {} was the bottleneck there",
                p.name,
                p.pid,
                if p.generator {
                    "the generator itself"
                } else {
                    "this target process"
                }
            ))
        })
        .collect()
}

/// Raises the open-file limit and refuses a run that cannot fit under it.
fn check_fd_limit(plan: &Plan, notes: &mut Vec<String>) -> Result<u64> {
    let limit = crate::sys::raise_fd_limit()
        .map_err(|e| Error::Other(format!("cannot read the open-file limit: {e}")))?;
    let users = plan.shard.range(plan.population.users).len() as u64;
    // The embedded server lives in this process and holds the other end of every socket.
    let per_user = if plan.target.url.is_none() { 2 } else { 1 };
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
/// The embedded reference server, when the plan names no target.
#[cfg(not(feature = "serve"))]
pub(super) type Embedded = std::convert::Infallible;

/// Starts the reference server in this process when the plan names no target.
#[cfg(feature = "serve")]
async fn start_embedded(plan: &mut Plan, notes: &mut Vec<String>) -> Result<Option<Embedded>> {
    if plan.target.url.is_some() {
        return Ok(None);
    }
    let handle = crate::serve::spawn(crate::serve::ServeConfig::default()).await?;
    plan.target.url = Some(match plan.target.driver {
        DriverKind::Echo => handle.echo_url(),
        _ => handle.ws_url(),
    });
    plan.target.auth = Auth::Secret(handle.secret().to_owned());
    notes.push(
        "the reference server ran embedded in the generator's process: CPU and memory above \
         include it"
            .to_owned(),
    );
    Ok(Some(handle))
}

#[cfg(not(feature = "serve"))]
async fn start_embedded(plan: &mut Plan, _: &mut Vec<String>) -> Result<Option<Embedded>> {
    match plan.target.url {
        Some(_) => Ok(None),
        None => Err(Error::Usage(
            "target.url: this msgstorm was built without the embedded server (feature `serve`)"
                .to_owned(),
        )),
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
