//! What a run of `msgstorm run` starts from, whether in one process or as shards: the plan
//! of its arguments and its results folder.

use super::RunArgs;
use crate::artifact::default_out_dir;
use crate::error::{Error, Result};
use crate::scenario::{self, Plan, Shard};

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
