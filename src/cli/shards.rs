//! `msgstorm run --shards N`: one run split over N generator processes on this host.
//!
//! The coordinator validates the scenario, starts the embedded server when there is no
//! target (so every shard talks to the same one), has a [`Launcher`] run the shards with one
//! run id, one traffic start and one start barrier (traffic starts once every shard's users
//! are in: [`crate::launch::barrier`]) as local child processes, forwarding Ctrl-C /
//! SIGTERM to them, and merges their `result.json` files exactly into one report.

use tokio::sync::watch;

use super::output::Outputs;
use super::run::{
    count_signals, finish, load_plan, log_result, out_dir, prepare_target, FD_MARGIN,
};
use super::{note, RunArgs};
use crate::artifact::Artifact;
use crate::driver::AuthForm;
use crate::error::{Error, Result, EXIT_UNREACHABLE, EXIT_USAGE};
use crate::launch::local::Local;
use crate::launch::{Launcher, Rendezvous, ShardOutcome, ShardRun};
use crate::scenario::Shard;

/// Slack after the end of the login schedule before traffic starts in every shard.
const START_MARGIN: std::time::Duration = std::time::Duration::from_secs(2);

/// Runs `args` as `shards` child processes and reports their merged result.
pub async fn run(args: RunArgs, shards: u32) -> Result<u8> {
    // Validate once, here, so a bad scenario fails before any child starts.
    let mut plan = load_plan(&args, Shard::WHOLE)?;
    plan.warnings.iter().for_each(|w| note(w));
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
    let out = out_dir(&plan)?;
    let barrier = out.join("start");
    let run = ShardRun {
        scenario: args.scenario.clone(),
        sets,
        count: shards,
        run_id: args.run_id.unwrap_or_else(|| fastrand::u32(..)),
        traffic_at: Some(std::time::SystemTime::now() + arrival_end + START_MARGIN),
        rendezvous: Rendezvous::Dir(barrier.clone()),
        log_result: false,
        out,
    };
    crate::launch::barrier::FileBarrier::reset(&barrier).map_err(|source| Error::Write {
        path: barrier.clone(),
        source,
    })?;
    note(&format!(
        "run {:08x}: {} users in {shards} generator processes; shard logs in {}",
        run.run_id,
        plan.population.users,
        run.out.display()
    ));

    let merged = launch(&Local::current()?, &run, &url).await;
    if let Some(server) = server {
        server
            .shutdown()
            .await
            .map_err(|e| Error::Server(format!("embedded server: {e}")))?;
    }
    let mut merged = merged?;
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
    let code = finish(&merged, &run.out, &Outputs::resolve(&args.format, None)?)?;
    if args.log_result {
        log_result(&merged)?;
    }
    Ok(code)
}

/// Runs the shards of `run` with `launcher`, forwarding Ctrl-C / SIGTERM to them (the first
/// drains, the second stops at once), and merges their results exactly. A shard without a
/// result fails the run with its exit code's meaning (`target` names the server for exit 3)
/// and the end of its log.
pub(super) async fn launch<L: Launcher>(
    launcher: &L,
    run: &ShardRun,
    target: &str,
) -> Result<Artifact> {
    let (signal_tx, signals) = watch::channel(0u32);
    let listener = tokio::spawn(count_signals(signal_tx));
    let outcomes = launcher.run(run, signals).await;
    listener.abort();
    let mut results = Vec::new();
    for (index, outcome) in outcomes?.into_iter().enumerate() {
        match outcome {
            ShardOutcome::Result(path) => results.push(path),
            ShardOutcome::Failed { code, log_tail } => {
                return Err(match code {
                    Some(c) if c == i32::from(EXIT_USAGE) => Error::Usage(log_tail),
                    Some(c) if c == i32::from(EXIT_UNREACHABLE) => Error::Unreachable {
                        target: target.to_owned(),
                        reason: log_tail,
                    },
                    _ => Error::Other(format!(
                        "shard {index} wrote no result (exit {code:?}; see {}): {log_tail}",
                        run.log_of(index as u32).display()
                    )),
                })
            }
        }
    }
    Artifact::read_merged(&results)
}
