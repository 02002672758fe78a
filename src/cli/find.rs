//! `msgstorm find`: runs one scenario again and again with one key varied (a geometric
//! climb, then a bisection), each step a whole `run` written to its own folder, and writes
//! `find.json` with every step's row and the answer.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;

use super::run::{execute, load_plan, out_dir};
use super::{note, say, RunArgs};
use crate::artifact::default_out_dir;
use crate::error::{Error, Result, EXIT_CHECK_FAILED, EXIT_OK};
use crate::find::{self, num, Answer, FindResult, Precision, Search};
use crate::scenario::Shard;

/// The climb's default ceiling, as a multiple of `--from`.
const DEFAULT_SPAN: f64 = 1024.0;

/// Options of `msgstorm find`.
#[derive(Debug, Args)]
pub struct FindArgs {
    /// The scenario file.
    pub scenario: PathBuf,
    /// The scenario key to vary, e.g. `traffic[0].rate`, `population.users`,
    /// `traffic[1].group_size`, `traffic[0].concurrency`.
    #[arg(long, value_name = "KEY")]
    pub vary: String,
    /// First value (default: the key's value in the scenario). Whole numbers keep every
    /// step whole.
    #[arg(long, value_name = "A")]
    pub from: Option<String>,
    /// Highest value the climb may try (default: 1024 × the first).
    #[arg(long, value_name = "B")]
    pub to: Option<String>,
    /// Stop when the highest pass and the first fail are this close: a number in the key's
    /// unit, or a percentage of the highest pass.
    #[arg(long, default_value = "5%", value_parser = Precision::parse, value_name = "P")]
    pub precision: Precision,
    /// Set the `duration` of every traffic pattern (not of sweeps) to this, e.g. `20s`.
    #[arg(long, value_parser = humantime::parse_duration, value_name = "D")]
    pub step_duration: Option<Duration>,
    /// Seconds of traffic at the start of each step left out of its numbers.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    pub warmup: Duration,
    /// Most steps the search runs, whatever the precision.
    #[arg(long, default_value_t = 12, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub max_steps: u32,
    /// Override a scenario key in every step, e.g. `--set target.url=ws://10.0.0.5:7700/ws`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Results folder: `find.json`, and each step's `result.json` in `step-NN/`.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// No live progress while a step runs.
    #[arg(long, short)]
    pub quiet: bool,
}

/// Runs `msgstorm find` and returns the exit code.
pub async fn run(args: FindArgs) -> Result<u8> {
    let key = args.vary.trim().to_owned();
    if args
        .set
        .iter()
        .any(|s| s.split_once('=').is_some_and(|(k, _)| k.trim() == key))
    {
        return Err(Error::Usage(format!(
            "--set {key}=…: that is the key --vary varies; leave it to the search"
        )));
    }
    let doc = scenario_table(&args.scenario)?;
    let (from, from_whole) = match &args.from {
        Some(s) => parse_value("--from", s)?,
        None => current_value(&doc, &key).ok_or_else(|| {
            Error::Usage(format!(
                "--vary {key}: {} sets no number there; give --from",
                args.scenario.display()
            ))
        })?,
    };
    let (to, to_whole) = match &args.to {
        Some(s) => parse_value("--to", s)?,
        None => (from * DEFAULT_SPAN, from_whole),
    };
    if !(from > 0.0 && to > from) {
        return Err(Error::Usage(format!(
            "--from {} --to {}: need 0 < from < to",
            num(from),
            num(to)
        )));
    }
    let mut sets = args.set.clone();
    let mut notes = Vec::new();
    if let Some(d) = args.step_duration {
        let d = humantime::format_duration(d).to_string().replace(' ', "");
        for (i, t) in traffic(&doc).iter().enumerate() {
            if t.get("sweep").is_some() {
                notes.push(format!(
                    "--step-duration left traffic[{i}] alone: a sweep lasts its steps × step_duration"
                ));
            } else {
                sets.push(format!("traffic[{i}].duration={d}"));
            }
        }
    }
    let dir = args.out.clone().unwrap_or_else(|| {
        let name = args
            .scenario
            .file_stem()
            .map_or_else(|| "find".to_owned(), |s| s.to_string_lossy().into_owned());
        default_out_dir(&format!("{name}-find"))
    });
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;

    let mut search = Search::new(from, to, from_whole && to_whole, args.precision);
    let mut steps = Vec::new();
    let mut target = String::new();
    let mut scenario = String::new();
    let mut interrupted = false;
    note(&format!(
        "find: varying {key} from {} to at most {}, at most {} steps",
        num(from),
        num(to),
        args.max_steps
    ));
    while let Some(value) = search.next() {
        if steps.len() as u32 >= args.max_steps {
            notes.push(format!(
                "the search stopped after --max-steps {} steps, before the precision was reached",
                args.max_steps
            ));
            break;
        }
        let n = steps.len() + 1;
        note(&format!("find: step {n}: {key} = {}", num(value)));
        let folder = format!("step-{n:02}");
        let mut step_sets = sets.clone();
        step_sets.push(format!("{key}={}", num(value)));
        let run_args = RunArgs {
            scenario: Some(args.scenario.clone()),
            set: step_sets,
            out: Some(dir.join(&folder)),
            shard: None,
            shards: None,
            run_id: None,
            quiet: args.quiet,
            traffic_at: None,
            start_barrier: None,
            log_result: false,
        };
        let plan = load_plan(&run_args, Shard::WHOLE)?;
        let step_dir = out_dir(&plan)?;
        let artifact = execute(plan, &run_args).await?;
        artifact.write(&step_dir).map_err(Error::in_output)?;
        let step = find::step::of(
            value,
            &artifact,
            args.warmup.as_secs_f64(),
            format!("{folder}/result.json"),
        );
        note(&format!(
            "find: step {n}: {key} = {}: {} (offered {:.1}/s, achieved {:.1}/s){}",
            num(value),
            if step.passed { "pass" } else { "FAIL" },
            step.row.offered_per_s,
            step.row.achieved_per_s,
            if step.failed.is_empty() {
                String::new()
            } else {
                format!(": {}", step.failed.join("; "))
            }
        ));
        target.clone_from(&artifact.target);
        scenario.clone_from(&artifact.scenario);
        if artifact.interrupted {
            // An interrupted step neither passed nor failed at its value: it is kept as a
            // row, not counted by the search.
            interrupted = true;
            notes.push(format!(
                "a signal stopped step {n}: the search ended there, its answer is incomplete"
            ));
            steps.push(step);
            break;
        }
        search.record(value, step.passed);
        steps.push(step);
    }
    let embedded = target.starts_with("embedded");
    if embedded {
        target = "embedded reference server (a fresh one per step)".to_owned();
    }
    notes.push(if embedded {
        "every step started its own embedded reference server (fresh store), inside the \
         generator's process: CPU and memory of the generator include the server's"
            .to_owned()
    } else {
        format!("every step ran against {target}, which kept what earlier steps stored")
    });
    let answer = Answer::of(&key, &search, &steps, to);
    let result = FindResult {
        kind: find::FIND_KIND.to_owned(),
        schema_version: find::FIND_SCHEMA_VERSION,
        tool: format!("msgstorm {}", env!("CARGO_PKG_VERSION")),
        scenario,
        target,
        vary: key,
        from,
        to,
        precision: args.precision,
        warmup_s: args.warmup.as_secs_f64(),
        steps,
        answer,
        notes,
    };
    say(&find::text::render(&result));
    let path = result.write(&dir).map_err(Error::in_output)?;
    note(&format!("result: {}", path.display()));
    Ok(if result.answer.found() && !interrupted {
        EXIT_OK
    } else {
        EXIT_CHECK_FAILED
    })
}

/// `s` as a number, and whether it is written as a whole number.
fn parse_value(flag: &str, s: &str) -> Result<(f64, bool)> {
    let v: f64 = s
        .trim()
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite())
        .ok_or_else(|| Error::Usage(format!("{flag} {s}: not a number")))?;
    Ok((v, s.trim().parse::<i64>().is_ok()))
}

/// The scenario file as a TOML table (the full validation happens when a step loads it).
fn scenario_table(path: &Path) -> Result<toml::Table> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    toml::from_str(&text).map_err(|e| Error::Scenario {
        file: path.to_owned(),
        line: 0,
        key: "syntax".to_owned(),
        msg: e.message().to_owned(),
    })
}

/// The `[[traffic]]` tables of a scenario.
fn traffic(doc: &toml::Table) -> Vec<&toml::Table> {
    doc.get("traffic")
        .and_then(toml::Value::as_array)
        .map(|a| a.iter().filter_map(toml::Value::as_table).collect())
        .unwrap_or_default()
}

/// The number at dotted `key` (`traffic[1].rate`) of `doc`, and whether it is an integer.
fn current_value(doc: &toml::Table, key: &str) -> Option<(f64, bool)> {
    let mut at: Option<&toml::Value> = None;
    for part in key.split('.') {
        let (name, index) = match part.split_once('[') {
            Some((name, rest)) => (name, Some(rest.strip_suffix(']')?.parse::<usize>().ok()?)),
            None => (part, None),
        };
        let table = match at {
            None => doc,
            Some(v) => v.as_table()?,
        };
        let mut v = table.get(name)?;
        if let Some(i) = index {
            v = v.as_array()?.get(i)?;
        }
        at = Some(v);
    }
    match at? {
        toml::Value::Integer(i) => Some((*i as f64, true)),
        toml::Value::Float(f) => Some((*f, false)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issue_15_current_value_walks_dotted_keys() {
        let doc: toml::Table = toml::from_str(
            "[population]\nusers = 10\n[[traffic]]\nrate = 5.5\n[[traffic]]\ngroup_size = 4\n",
        )
        .unwrap();
        assert_eq!(current_value(&doc, "population.users"), Some((10.0, true)));
        assert_eq!(current_value(&doc, "traffic[0].rate"), Some((5.5, false)));
        assert_eq!(
            current_value(&doc, "traffic[1].group_size"),
            Some((4.0, true))
        );
        assert_eq!(current_value(&doc, "traffic[2].rate"), None);
        assert_eq!(current_value(&doc, "population.nope"), None);
    }
}
