//! `msgstorm run`: load the plan, run it ([`crate::run`]) with its progress on the terminal,
//! write the result and print the report.

use std::time::Duration;

use super::live_page::LivePage;
use super::output::{write_file, Outputs};
use super::watch::Watch;
use super::{note, say, RunArgs};
use crate::artifact::{default_out_dir, Artifact};
use crate::error::{Error, Result, EXIT_OK};
use crate::metrics::{Counter, ErrorKind};
use crate::report::format::Format;
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
    Ok(rendered.report.exit_code())
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
