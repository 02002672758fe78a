//! `msgstorm run`: load the plan, run it ([`crate::run`]) with its progress on the terminal,
//! write the result and print the report.

use std::time::Duration;

use super::finish::{finish, log_result};
use super::live_page::LivePage;
use super::load::{load_plan, out_dir};
use super::output::Outputs;
use super::watch::Watch;
use super::{note, RunArgs};
use crate::artifact::Artifact;
use crate::error::{Error, Result};
use crate::scenario::{self, Plan, Shard};

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
    let page = match args.live {
        Some(addr) => Some(LivePage::open(addr).await?),
        None => None,
    };
    let artifact = execute(plan, &args, page.as_ref().map(LivePage::viewer)).await?;
    let finished = finish(&artifact, &dir, &outputs);
    // The page ends on the report as written: `finish` wrote it unless it failed before
    // (a generator failure is found after writing it).
    let wrote = matches!(finished, Ok(_) | Err(Error::Generator(_)));
    if let (Some(page), true) = (&page, wrote) {
        if let Ok(html) = std::fs::read_to_string(dir.join("report.html")) {
            page.finish(html).await;
        }
    }
    // The log is the result's way out of a pod: framed even when the file failed.
    if args.log_result {
        log_result(&artifact)?;
    }
    finished
}

/// Runs `plan` once in this process ([`crate::run::run`]) with its progress on the
/// terminal and Ctrl-C / SIGTERM as its stop requests, and returns its artifact, written
/// nowhere. `args` gives the run id, the start time and barrier of a shard, and `--quiet`;
/// `viewer` follows the run while it lasts (the `--live` page).
pub(super) async fn execute(
    plan: Plan,
    args: &RunArgs,
    viewer: Option<std::sync::Arc<dyn crate::run::Viewer>>,
) -> Result<Artifact> {
    let (mut watch, stops) = Watch::run(&plan, args.quiet);
    let options = crate::run::Options {
        run_id: args.run_id,
        traffic_at: args
            .traffic_at
            .map(|ms| std::time::UNIX_EPOCH + Duration::from_millis(ms)),
        rendezvous: args.start_barrier.clone(),
        source: Some(scenario_source(args)),
        stops,
        metrics_listen: args.metrics_listen,
        metrics_push: args.metrics_push.clone(),
        viewer,
    };
    crate::run::run(plan, options, &mut watch).await
}

/// The scenario of `args` as run: the file's text (or the built-in default) and `--set`.
fn scenario_source(args: &RunArgs) -> crate::artifact::ScenarioSource {
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
