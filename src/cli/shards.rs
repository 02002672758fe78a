//! `msgstorm run --shards N`: one run split over N generator processes on this host.
//!
//! The coordinator validates the scenario, starts the embedded server when there is no
//! target (so every shard talks to the same one), starts `msgstorm run --shard I/N` children
//! with one run id in their own process groups, forwards Ctrl-C / SIGTERM to them, and merges
//! their `result.json` files exactly into one report.

use std::path::Path;
use std::process::Stdio;

use tokio::process::{Child, Command};
use tokio::sync::watch;

use super::run::{count_signals, finish, load_plan, out_dir, prepare_target, FD_MARGIN};
use super::{note, RunArgs};
use crate::artifact::Artifact;
use crate::driver::AuthForm;
use crate::error::{Error, Result, EXIT_UNREACHABLE, EXIT_USAGE};
use crate::scenario::Shard;

/// Slack after the end of the login schedule before traffic starts in every shard.
const START_MARGIN: std::time::Duration = std::time::Duration::from_secs(2);

/// Runs `args` as `shards` child processes and reports their merged result.
pub async fn run(args: RunArgs, shards: u32) -> Result<u8> {
    // Validate once, here, so a bad scenario fails before any child starts.
    let mut plan = load_plan(&args, Shard::WHOLE)?;
    let mut notes = Vec::new();
    if plan.target.endpoint.is_none() && plan.target.driver.embedded_path.is_some() {
        // The embedded server lives here and holds every user's socket.
        let limit = crate::sys::raise_fd_limit()
            .map_err(|e| Error::Other(format!("cannot read the open-file limit: {e}")))?;
        let needed = u64::from(plan.population.users) + FD_MARGIN;
        if needed > limit.now {
            return Err(Error::Usage(format!(
                "the embedded server would hold {needed} sockets in one process, the open-file \
                 limit is {}: run the server separately (`msgstorm serve`) and point \
                 `target.url` at it",
                limit.now
            )));
        }
    }
    let (server, url) = prepare_target(&mut plan, &mut notes).await?;
    let embedded = server.is_some();
    let run_id = args.run_id.unwrap_or_else(|| fastrand::u32(..));
    let dir = out_dir(&plan)?;

    let mut sets = args.set.clone();
    if let (Some(server), Some(ep)) = (&server, &plan.target.endpoint) {
        sets.push(format!("target.url=\"{}\"", ep.url));
        if plan.target.driver.auth.contains(&AuthForm::Secret) {
            sets.push(format!("target.auth.secret=\"{}\"", server.secret()));
        }
    }
    // Everyone on time should be in by the end of the arrival schedule; a little after it,
    // all shards start traffic together.
    let on_time = plan.population.users - plan.population.late.len() as u32;
    let arrival_end = crate::engine::arrival::arrival_offset(
        &plan.population.arrival,
        u64::from(on_time.max(1) - 1),
    );
    let traffic_at = std::time::SystemTime::now() + arrival_end + START_MARGIN;
    let traffic_at_ms = traffic_at
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let exe = std::env::current_exe()
        .map_err(|e| Error::Other(format!("cannot find the msgstorm executable: {e}")))?;
    let mut children = Vec::new();
    for index in 0..shards {
        let shard_dir = dir.join(format!("shard-{index}"));
        let log = shard_dir.with_extension("log");
        let child = spawn_shard(
            &exe,
            &args,
            &sets,
            (index, shards),
            run_id,
            traffic_at_ms,
            &shard_dir,
            &log,
        )?;
        children.push((child, shard_dir, log));
    }
    note(&format!(
        "run {run_id:08x}: {} users in {shards} generator processes; shard logs in {}",
        plan.population.users,
        dir.display()
    ));

    let (signal_tx, mut signals) = watch::channel(0u32);
    let listener = tokio::spawn(count_signals(signal_tx));
    let pids: Vec<u32> = children.iter().filter_map(|c| c.0.id()).collect();
    let forward = tokio::spawn(async move {
        while signals.changed().await.is_ok() {
            for pid in &pids {
                let _ = Command::new("kill")
                    .arg("-TERM")
                    .arg(pid.to_string())
                    .status()
                    .await;
            }
        }
    });
    let mut codes = Vec::new();
    for (child, _, _) in &mut children {
        let status = child
            .wait()
            .await
            .map_err(|e| Error::Other(format!("waiting for a shard: {e}")))?;
        codes.push(status.code());
    }
    forward.abort();
    listener.abort();
    if let Some(server) = server {
        server
            .shutdown()
            .await
            .map_err(|e| Error::Server(format!("embedded server: {e}")))?;
    }

    let mut results = Vec::new();
    for ((_, shard_dir, log), code) in children.iter().zip(&codes) {
        let result = shard_dir.join("result.json");
        if !result.exists() {
            let why = tail(log);
            return Err(match *code {
                Some(c) if c == i32::from(EXIT_USAGE) => Error::Usage(why),
                Some(c) if c == i32::from(EXIT_UNREACHABLE) => Error::Unreachable {
                    target: url,
                    reason: why,
                },
                _ => Error::Other(format!(
                    "shard {} wrote no result (exit {code:?}): {why}",
                    shard_dir.display()
                )),
            });
        }
        results.push(result);
    }
    let mut merged = Artifact::read_merged(&results)?;
    if embedded {
        merged.target = format!("embedded {url}");
        notes = vec![format!(
            "the reference server ran embedded in the coordinating process (pid {}), apart \
             from the generators",
            std::process::id()
        )];
    }
    for n in notes {
        if !merged.notes.contains(&n) {
            merged.notes.push(n);
        }
    }
    finish(&merged, &dir)
}

/// Starts shard `index` of `shards` as a child in its own process group (so a terminal's
/// Ctrl-C reaches only the coordinator, which forwards it once).
#[allow(clippy::too_many_arguments)]
fn spawn_shard(
    exe: &Path,
    args: &RunArgs,
    sets: &[String],
    (index, shards): (u32, u32),
    run_id: u32,
    traffic_at_ms: u64,
    out: &Path,
    log: &Path,
) -> Result<Child> {
    let log_file = std::fs::File::create(log).map_err(|e| Error::io(log, e))?;
    let mut cmd = Command::new(exe);
    cmd.arg("run");
    if let Some(s) = &args.scenario {
        cmd.arg(s);
    }
    cmd.arg("--shard")
        .arg(format!("{index}/{shards}"))
        .arg("--run-id")
        .arg(format!("{run_id:08x}"))
        .arg("--traffic-at")
        .arg(traffic_at_ms.to_string())
        .arg("--out")
        .arg(out)
        .arg("--quiet");
    for s in sets {
        cmd.arg("--set").arg(s);
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(log_file))
        .process_group(0)
        .kill_on_drop(true);
    cmd.spawn()
        .map_err(|e| Error::Other(format!("cannot start shard {index}: {e}")))
}

/// The last lines of a shard's log, for an error message.
fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let start = lines.len().saturating_sub(3);
    let last = lines[start..].join(" | ");
    if last.is_empty() {
        format!("no output (see {})", log.display())
    } else {
        last
    }
}
