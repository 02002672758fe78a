//! One run split over shards: [`local`] coordinates shards on this host — it starts the
//! embedded server when there is no target (so every shard talks to the same one), gives
//! every shard one run id, one traffic start and one start barrier (traffic starts once
//! every shard's users are in: [`crate::launch::barrier`]), and merges their results;
//! [`launch`] runs the shards of a [`ShardRun`] with any [`Launcher`] (child processes, a
//! Kubernetes Job), forwarding stop requests to them, and merges their `result.json` files
//! exactly.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use tokio::sync::watch;

use super::{host, target, Event, Sink, Stage};
use crate::artifact::Artifact;
use crate::driver::AuthForm;
use crate::error::{Error, Result, EXIT_UNREACHABLE, EXIT_USAGE};
use crate::launch::barrier::FileBarrier;
use crate::launch::{Launcher, Rendezvous, ShardOutcome, ShardRun};
use crate::scenario::Plan;

/// Slack after the end of the login schedule before traffic starts in every shard.
const START_MARGIN: Duration = Duration::from_secs(2);

/// What the shards of a run on this host are given besides the plan.
#[derive(Debug, Clone)]
pub struct Split {
    /// The scenario file (`None`: the built-in default scenario).
    pub scenario: Option<PathBuf>,
    /// The `--set` overrides every shard applies.
    pub sets: Vec<String>,
    /// How many shards.
    pub count: u32,
    /// The run id (`None`: a random one).
    pub run_id: Option<u32>,
    /// The run's results folder (existing): the shards' folders and logs go inside.
    pub out: PathBuf,
}

/// Runs `plan` (already validated whole) as the shards of `split` with `launcher`, and
/// returns their merged result, written nowhere.
pub async fn local<L: Launcher>(
    mut plan: Plan,
    split: Split,
    launcher: &L,
    stops: watch::Receiver<u32>,
    sink: &mut dyn Sink,
) -> Result<Artifact> {
    host::check_embedded_fd_limit(&plan)?;
    let mut notes = Vec::new();
    let (server, shown) = target::prepare(&mut plan, &mut notes).await?;
    let barrier = split.out.join("start");
    let run = shard_run(&plan, split, server.as_ref(), &barrier);
    FileBarrier::reset(&barrier).map_err(|source| Error::Write {
        path: barrier.clone(),
        source,
    })?;
    sink.event(Event::Note(format!(
        "run {:08x}: {} users in {} generator processes; shard logs in {}",
        run.run_id,
        plan.population.users,
        run.count,
        run.out.display()
    )));
    let merged = launch(launcher, &run, &shown, stops, sink).await;
    let embedded = server.is_some();
    target::stop(server).await?;
    let mut merged = merged?;
    if embedded {
        merged.target = target::named(shown, true);
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
    Ok(merged)
}

/// The shards' common part of a run of `plan` (pointed at the embedded `server`, if any):
/// everyone on time should be in by the end of the arrival schedule, and a little after it
/// all shards start traffic together, meeting in the folder `barrier`.
fn shard_run(
    plan: &Plan,
    split: Split,
    server: Option<&target::Embedded>,
    barrier: &std::path::Path,
) -> ShardRun {
    let mut sets = split.sets;
    if let (Some(server), Some(ep)) = (server, &plan.target.endpoint) {
        sets.push(format!("target.url=\"{}\"", ep.url));
        if plan.target.driver.auth.contains(&AuthForm::Secret) {
            sets.push(format!("target.auth.secret=\"{}\"", server.secret()));
        }
    }
    let on_time = plan.population.users - plan.population.late.len() as u32;
    let arrival_end = crate::engine::arrival::arrival_offset(
        &plan.population.arrival,
        u64::from(on_time.max(1) - 1),
    );
    ShardRun {
        scenario: split.scenario,
        sets,
        count: split.count,
        run_id: split.run_id.unwrap_or_else(|| fastrand::u32(..)),
        traffic_at: Some(SystemTime::now() + arrival_end + START_MARGIN),
        rendezvous: Rendezvous::Dir(barrier.to_owned()),
        log_result: false,
        out: split.out,
    }
}

/// Runs the shards of `run` with `launcher` between [`Stage::Load`] and
/// [`Stage::Collect`], forwarding `stops` to them (the first drains, the second stops at
/// once), and merges their results exactly. A shard without a result fails the run with
/// its exit code's meaning (`target` names the server for exit 3) and the end of its log.
pub async fn launch<L: Launcher>(
    launcher: &L,
    run: &ShardRun,
    target: &str,
    stops: watch::Receiver<u32>,
    sink: &mut dyn Sink,
) -> Result<Artifact> {
    sink.event(Event::Stage(Stage::Load));
    let signals = stops.clone();
    let outcomes = launcher
        .run(run, stops, &mut |note| sink.event(Event::Note(note)))
        .await;
    sink.event(Event::Stage(Stage::Collect));
    // Stopped twice, a shard that did not end by itself was killed: the others' results
    // are what was measured.
    let stopped_twice = *signals.borrow() >= 2;
    let mut results = Vec::new();
    let mut missing = Vec::new();
    for (index, outcome) in outcomes?.into_iter().enumerate() {
        match outcome {
            ShardOutcome::Result(path) => results.push(path),
            ShardOutcome::Failed { code, .. } if stopped_twice => missing.push((index, code)),
            ShardOutcome::Failed { code, log_tail } => {
                return Err(failure(run, index as u32, code, log_tail, target))
            }
        }
    }
    if results.is_empty() {
        let (index, code) = missing.first().copied().unwrap_or((0, None));
        return Err(failure(
            run,
            index as u32,
            code,
            "stopped before it wrote a result".to_owned(),
            target,
        ));
    }
    let mut merged = Artifact::read_merged(&results)?;
    if !missing.is_empty() {
        let list: Vec<String> = missing.iter().map(|(i, _)| i.to_string()).collect();
        merged.interrupted = true;
        merged.notes.push(format!(
            "shard(s) {} of {} did not end after the second stop and were killed: what they \
             measured is missing from this result (their logs are in {})",
            list.join(", "),
            run.count,
            run.out.display()
        ));
    }
    Ok(merged)
}

/// The error of shard `index` of `run`, which wrote no result.
fn failure(run: &ShardRun, index: u32, code: Option<i32>, log_tail: String, target: &str) -> Error {
    match code {
        Some(c) if c == i32::from(EXIT_USAGE) => Error::Usage(log_tail),
        Some(c) if c == i32::from(EXIT_UNREACHABLE) => Error::Unreachable {
            target: target.to_owned(),
            reason: log_tail,
        },
        _ => Error::Other(format!(
            "shard {index} wrote no result (exit {code:?}; see {}): {log_tail}",
            run.log_of(index).display()
        )),
    }
}
