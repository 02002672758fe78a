//! `msgstorm run --shards N`: one run split over N generator processes on this host
//! ([`crate::run::shards::local`]), as local child processes that Ctrl-C / SIGTERM reach
//! through the coordinator, their results merged exactly into one report.

use super::finish::{finish, log_result};
use super::load::{load_plan, out_dir};
use super::output::Outputs;
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
        // Each shard serves its own endpoint, at the port + its index.
        sets: args
            .set
            .iter()
            .cloned()
            .chain(
                args.metrics_listen
                    .map(|a| format!("report.metrics_listen=\"{a}\"")),
            )
            .chain(
                args.metrics_push
                    .as_ref()
                    .map(|u| format!("report.metrics_push=\"{u}\"")),
            )
            .collect(),
        count: shards,
        run_id: args.run_id,
        out: out.clone(),
    };
    let (mut watch, stops) = Watch::shards();
    let merged =
        crate::run::shards::local(plan, split, &Local::current()?, stops, &mut watch).await?;
    let code = finish(&merged, &out, &Outputs::resolve(&args.format, None)?)?;
    if args.log_result {
        log_result(&merged)?;
    }
    Ok(code)
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;
    use std::path::PathBuf;
    use std::time::{Duration, UNIX_EPOCH};

    use clap::Parser;

    use crate::cli::{Cli, Command};
    use crate::launch::{Rendezvous, ShardRun};

    /// A shard's arguments are what `msgstorm run` parses back into the same shard, run id,
    /// traffic start, folder and overrides.
    #[test]
    fn shard_args_parse_back_into_the_same_run() {
        let run = ShardRun {
            scenario: Some("s.toml".into()),
            sets: vec![
                "population.users=10".into(),
                "target.url=\"ws://h/ws\"".into(),
            ],
            count: 3,
            run_id: 0xab,
            traffic_at: Some(UNIX_EPOCH + Duration::from_millis(1_700_000_000_123)),
            rendezvous: Rendezvous::Dir("out/start".into()),
            log_result: true,
            out: "out".into(),
        };
        let mut argv = vec![OsString::from("msgstorm")];
        argv.extend(run.args(2, &run.shard_dir(2)));
        let Command::Run(args) = Cli::try_parse_from(argv).expect("parses").command else {
            panic!("not `run`");
        };
        let shard = args.shard.expect("--shard");
        assert_eq!((shard.index, shard.count), (2, 3));
        assert_eq!(args.run_id, Some(0xab));
        assert_eq!(args.traffic_at, Some(1_700_000_000_123));
        assert_eq!(args.start_barrier, Some(run.rendezvous.clone()));
        assert!(args.log_result);
        assert_eq!(args.out, Some(PathBuf::from("out/shard-2")));
        assert_eq!(args.scenario, Some(PathBuf::from("s.toml")));
        assert_eq!(args.set, run.sets);
        assert!(args.quiet);
    }

    /// `--start-traffic-at` takes Unix milliseconds or an RFC 3339 UTC time.
    #[test]
    fn start_traffic_at_takes_unix_ms_or_rfc3339() {
        let parse =
            |at: &str| match Cli::try_parse_from(["msgstorm", "run", "--start-traffic-at", at]) {
                Ok(Cli {
                    command: Command::Run(args),
                }) => args.traffic_at,
                _ => None,
            };
        assert_eq!(parse("1700000000123"), Some(1_700_000_000_123));
        assert_eq!(parse("2023-11-14T22:13:20Z"), Some(1_700_000_000_000));
        assert_eq!(parse("soon"), None);
    }
}
