//! `msgstorm run --shards N`: one run split over N generator processes on this host
//! ([`crate::run::shards::local`]), as local child processes that Ctrl-C / SIGTERM reach
//! through the coordinator, their results merged exactly into one report.

use super::run::{finish, load_plan, log_result, out_dir};
use super::watch::Watch;
use super::{note, RunArgs};
use crate::error::Result;
use crate::launch::local::Local;
use crate::run::shards::Split;
use crate::scenario::Shard;

/// Runs `args` as `shards` child processes and reports their merged result.
pub async fn run(args: RunArgs, shards: u32) -> Result<u8> {
    // Validate once, here, so a bad scenario fails before any child starts.
    let plan = load_plan(&args, Shard::WHOLE)?;
    plan.warnings.iter().for_each(|w| note(w));
    let out = out_dir(&plan)?;
    let split = Split {
        scenario: args.scenario.clone(),
        sets: args.set.clone(),
        count: shards,
        run_id: args.run_id,
        out: out.clone(),
    };
    let (mut watch, stops) = Watch::shards();
    let merged =
        crate::run::shards::local(plan, split, &Local::current()?, stops, &mut watch).await?;
    let code = finish(&merged, &out)?;
    if args.log_result {
        log_result(&merged)?;
    }
    Ok(code)
}
