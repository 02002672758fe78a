//! `msgstorm find`: runs one scenario again and again with one key varied (a geometric
//! climb, then a bisection), each step a whole `run` written to its own folder, and writes
//! `find.json` with every step's row and the answer.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;

use super::load::{load_plan, out_dir};
use super::output::Outputs;
use super::run::execute;
use super::{note, RunArgs};
use crate::artifact::default_out_dir;
use crate::error::{Error, Result, EXIT_CHECK_FAILED, EXIT_OK};
use crate::find::{self, num, Answer, FindResult, Precision, Search};
use crate::scenario::{Plan, Shard};

/// The climb's default ceiling, as a multiple of `--from`.
const DEFAULT_SPAN: f64 = 1024.0;

/// Options of `msgstorm find`. Each one left out is taken from the scenario's `[find]`
/// table, else from its default.
#[derive(Debug, Args)]
pub struct FindArgs {
    /// The scenario file.
    pub scenario: PathBuf,
    /// The scenario key to vary, e.g. `traffic[0].rate`, `population.users`,
    /// `traffic[1].group_size`, `traffic[0].concurrency` (or `[find] vary`).
    #[arg(long, value_name = "KEY")]
    pub vary: Option<String>,
    /// First value (default: the key's value in the scenario). Whole numbers keep every
    /// step whole.
    #[arg(long, value_name = "A")]
    pub from: Option<String>,
    /// Highest value the climb may try (default: 1024 × the first).
    #[arg(long, value_name = "B")]
    pub to: Option<String>,
    /// Stop when the highest pass and the first fail are this close: a number in the key's
    /// unit, or a percentage of the highest pass (default `5%`).
    #[arg(long, value_parser = Precision::parse, value_name = "P")]
    pub precision: Option<Precision>,
    /// Set the `duration` of every traffic pattern (not of sweeps) to this, e.g. `20s`;
    /// with `--vary population.users`, how long each user count is held (default 10s).
    #[arg(long, value_parser = humantime::parse_duration, value_name = "D")]
    pub step_duration: Option<Duration>,
    /// Seconds of traffic at the start of each step left out of its numbers (default 1s).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub warmup: Option<Duration>,
    /// Most steps the search runs, whatever the precision (default 12).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub max_steps: Option<u32>,
    /// With `--vary population.users`: a connection storm, everyone of a step connecting
    /// at once (each step a fresh run), reporting the connection success and errors by kind.
    #[arg(long)]
    pub storm: bool,
    /// Override a scenario key in every step, e.g. `--set target.url=ws://10.0.0.5:7700/ws`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Results folder: `find.json`, and each step's `result.json` in `step-NN/`.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// No live progress while a step runs.
    #[arg(long, short)]
    pub quiet: bool,
    /// Output formats of the answer: text or json.
    #[command(flatten)]
    pub format: super::output::FormatArgs,
}

/// How far apart the user ids of two steps against a shared target are (more than any
/// scenario's users).
const STEP_IDS: u64 = 1_000_000_000;

/// Default hold of each user count when users are added in one run.
const DEFAULT_HOLD: Duration = Duration::from_secs(10);

/// A search's settings: flags, else the scenario's `[find]` table, else defaults.
struct Settings {
    key: String,
    from: f64,
    to: f64,
    whole: bool,
    precision: Precision,
    step_duration: Option<Duration>,
    warmup: Duration,
    max_steps: u32,
    storm: bool,
}

impl Settings {
    fn resolve(args: &FindArgs, plan: &Plan, doc: &toml::Table) -> Result<Settings> {
        let table = plan.find.as_ref();
        let key = match (&args.vary, table) {
            (Some(k), _) => k.trim().to_owned(),
            (None, Some(t)) => t.vary.clone(),
            (None, None) => {
                return Err(Error::Usage(format!(
                    "give --vary KEY, or a [find] table with `vary` in {}",
                    args.scenario.display()
                )))
            }
        };
        let from = match (&args.from, table.and_then(|t| t.from)) {
            (Some(s), _) => parse_value("--from", s)?,
            (None, Some(v)) => (v.value, v.whole),
            (None, None) => current_value(doc, &key).ok_or_else(|| {
                Error::Usage(format!(
                    "--vary {key}: {} sets no number there; give --from",
                    args.scenario.display()
                ))
            })?,
        };
        let to = match (&args.to, table.and_then(|t| t.to)) {
            (Some(s), _) => parse_value("--to", s)?,
            (None, Some(v)) => (v.value, v.whole),
            (None, None) => (from.0 * DEFAULT_SPAN, from.1),
        };
        if !(from.0 > 0.0 && to.0 > from.0) {
            return Err(Error::Usage(format!(
                "--from {} --to {}: need 0 < from < to",
                num(from.0),
                num(to.0)
            )));
        }
        let storm = args.storm || table.is_some_and(|t| t.storm);
        if storm && key != USERS {
            return Err(Error::Usage(format!(
                "--storm varies {USERS} (everyone of a step connecting at once), not {key}"
            )));
        }
        Ok(Settings {
            key,
            from: from.0,
            to: to.0,
            whole: from.1 && to.1,
            precision: args
                .precision
                .or(table.and_then(|t| t.precision))
                .unwrap_or(Precision::Relative(0.05)),
            step_duration: args.step_duration.or(table.and_then(|t| t.step_duration)),
            warmup: args
                .warmup
                .or(table.and_then(|t| t.warmup))
                .unwrap_or(Duration::from_secs(1)),
            max_steps: args
                .max_steps
                .or(table.and_then(|t| t.max_steps))
                .unwrap_or(12),
            storm,
        })
    }
}

/// The key of users online.
const USERS: &str = "population.users";

/// What the steps of a search share.
struct Searching<'a> {
    args: &'a FindArgs,
    settings: Settings,
    /// `--set` of every step.
    sets: Vec<String>,
    dir: PathBuf,
    steps: Vec<find::Step>,
    notes: Vec<String>,
    target: String,
    scenario: String,
    interrupted: bool,
    search: Search,
}

/// Runs `msgstorm find` and returns the exit code.
pub async fn run(args: FindArgs) -> Result<u8> {
    Outputs::resolve(&args.format, None)?.check(find::text::renderer)?;
    let doc = scenario_table(&args.scenario)?;
    let probe = load_plan(&run_args(&args, args.set.clone(), None), Shard::WHOLE)?;
    let settings = Settings::resolve(&args, &probe, &doc)?;
    let key = settings.key.clone();
    if args
        .set
        .iter()
        .any(|s| s.split_once('=').is_some_and(|(k, _)| k.trim() == key))
    {
        return Err(Error::Usage(format!(
            "--set {key}=…: that is the key --vary varies; leave it to the search"
        )));
    }
    let stepped = key == USERS && !settings.storm;
    let users_in_one_run = stepped && one_run_refusal(&probe).is_none();
    let mut notes = Vec::new();
    if let Some(why) = stepped.then(|| one_run_refusal(&probe)).flatten() {
        notes.push(format!(
            "each step logged everyone in again (a run of its own): {why}"
        ));
    }
    let mut sets = args.set.clone();
    if !users_in_one_run {
        step_durations(&settings, &doc, &mut sets, &mut notes);
    }
    if settings.storm {
        notes.push(storm_note(&args, &doc)?);
    }
    let dir = results_dir(&args)?;
    note(&format!(
        "find: varying {key} from {} to at most {}, at most {} steps",
        num(settings.from),
        num(settings.to),
        settings.max_steps
    ));
    let mut s = Searching::new(&args, settings, sets, dir, notes);
    if users_in_one_run {
        s.users_in_one_run(&probe).await?;
    } else {
        let fixed = |k: &str| args.set.iter().any(|x| x.trim_start().starts_with(k));
        let shared_target = probe.target.endpoint.is_some();
        let fresh = shared_target && !fixed("seed") && !fixed("population.first_id");
        s.step_by_step(fresh.then_some((probe.seed, probe.population.first_id)))
            .await?;
    }
    s.finish()
}

/// With `--step-duration`, every traffic pattern of `doc` but a sweep lasts that long in
/// each step (a `--set` in `sets`); a sweep keeps its length (a note says so).
fn step_durations(
    settings: &Settings,
    doc: &toml::Table,
    sets: &mut Vec<String>,
    notes: &mut Vec<String>,
) {
    let Some(d) = settings.step_duration else {
        return;
    };
    let d = humantime::format_duration(d).to_string().replace(' ', "");
    for (i, t) in traffic(doc).iter().enumerate() {
        if t.get("sweep").is_some() {
            notes.push(format!(
                "--step-duration left traffic[{i}] alone: a sweep lasts its steps × step_duration"
            ));
        } else {
            sets.push(format!("traffic[{i}].duration={d}"));
        }
    }
}

/// The note of a connection storm, or the error of a scenario whose own arrival schedule
/// a storm cannot replace.
fn storm_note(args: &FindArgs, doc: &toml::Table) -> Result<String> {
    if doc
        .get("population")
        .and_then(|p| p.get("arrival"))
        .is_some()
    {
        return Err(Error::Usage(format!(
            "--storm: {} sets population.arrival; a storm logs everyone in at once through \
             population.login_rate, so write login_rate instead",
            args.scenario.display()
        )));
    }
    Ok(
        "connection storm: every step is a fresh run whose users all try to connect \
         within about 1 ms (population.login_rate = 1,000 × users)"
            .to_owned(),
    )
}

/// The search's results folder (`--out`, else a new one named after the scenario), created.
fn results_dir(args: &FindArgs) -> Result<PathBuf> {
    let dir = args.out.clone().unwrap_or_else(|| {
        let name = args
            .scenario
            .file_stem()
            .map_or_else(|| "find".to_owned(), |s| s.to_string_lossy().into_owned());
        default_out_dir(&format!("{name}-find"))
    });
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    Ok(dir)
}

/// Why users cannot be added step by step in one run of `plan` (then each step is a run).
fn one_run_refusal(plan: &Plan) -> Option<&'static str> {
    if plan.target.caps.needs_prior_connect {
        Some("the driver needs every user to connect once before traffic, so users cannot join a running test unseen")
    } else if !plan.target.caps.fetch_missed {
        Some("the driver cannot fetch what a user missed before it logged in, so a later step's users would miss messages sent to them")
    } else if !plan.population.late.is_empty() || !plan.population.churn.is_empty() {
        Some("the scenario has late or churning users of its own")
    } else if plan.population.sessions.is_some() {
        Some("the scenario's users come and go in sessions over its day")
    } else {
        None
    }
}

/// The `RunArgs` of one step.
fn run_args(args: &FindArgs, set: Vec<String>, out: Option<PathBuf>) -> RunArgs {
    RunArgs::step(args.scenario.clone(), set, out, args.quiet)
}

impl<'a> Searching<'a> {
    /// A search of `args` with `settings`, every step run with `sets` into a folder under
    /// `dir`, starting with `notes`.
    fn new(
        args: &'a FindArgs,
        settings: Settings,
        sets: Vec<String>,
        dir: PathBuf,
        notes: Vec<String>,
    ) -> Self {
        let search = Search::new(
            settings.from,
            settings.to,
            settings.whole,
            settings.precision,
        );
        Searching {
            args,
            settings,
            sets,
            dir,
            steps: Vec::new(),
            notes,
            target: String::new(),
            scenario: String::new(),
            interrupted: false,
            search,
        }
    }
}

impl Searching<'_> {
    /// The usual search: every step is a run of its own at one value. With `fresh`
    /// (the scenario's seed and first user id, against a shared target) every step has
    /// its own seed and user ids, so no step's sync fetches an earlier step's messages.
    async fn step_by_step(&mut self, fresh: Option<(u64, u64)>) -> Result<()> {
        if fresh.is_some() {
            self.notes.push(format!(
                "every step had its own users and groups on the shared server (seed: the \
                 scenario's + the step's number − 1; user ids from population.first_id + \
                 (step − 1) × {STEP_IDS}), so no step synced an earlier one's messages"
            ));
        }
        while let Some(value) = self.search.next() {
            if self.out_of_steps() {
                break;
            }
            let n = self.steps.len() + 1;
            let key = self.settings.key.clone();
            note(&format!("find: step {n}: {key} = {}", num(value)));
            let folder = format!("step-{n:02}");
            let mut sets = self.sets.clone();
            sets.push(format!("{key}={}", num(value)));
            if self.settings.storm {
                sets.push(format!("population.login_rate={}", num(value * 1000.0)));
            }
            if let Some((seed, first_id)) = fresh {
                let k = n as u64 - 1;
                sets.push(format!("seed={}", seed + k));
                sets.push(format!("population.first_id={}", first_id + k * STEP_IDS));
            }
            let (artifact, _) = self.execute(sets, &folder, |_| {}).await?;
            let step = find::step::of(
                value,
                &artifact,
                self.settings.warmup.as_secs_f64(),
                format!("{folder}/result.json"),
            );
            if !self.take(step, artifact.interrupted) {
                break;
            }
        }
        Ok(())
    }

    /// Users online varied in runs that add users step by step (see `find::ladder`): a
    /// climbing run, then one refining run between the highest pass and the first fail.
    async fn users_in_one_run(&mut self, probe: &Plan) -> Result<()> {
        self.notes.push(
            "users were added step by step within one run: users of earlier steps stayed \
             connected; a run's delivery checks (lost, duplicated, …) are judged at its \
             highest step only"
                .to_owned(),
        );
        let max = self.settings.max_steps as usize;
        let climb = find::ladder::climb(
            self.settings.from,
            self.settings.to,
            self.settings.whole,
            max,
        );
        self.ladder_run(probe, &climb, 0).await?;
        let (pass, fail) = (self.search.highest_pass(), self.search.first_fail());
        let left = max.saturating_sub(self.steps.len());
        if let (Some(p), Some(f), false) = (pass, fail, self.interrupted) {
            let gap = self.search.gap(p);
            let refine = find::ladder::refine(p, f, gap, self.settings.whole, left);
            if !refine.is_empty() {
                let mut rungs = vec![p];
                rungs.extend(refine);
                self.notes.push(format!(
                    "the refining run started at the highest pass ({}) and added users from there; that first step's row is not counted by the search",
                    num(p)
                ));
                self.ladder_run(probe, &rungs, 1).await?;
            }
        }
        if self.search.next().is_some() && !self.interrupted {
            self.notes.push(format!(
                "the search stopped after {} steps (--max-steps), before the precision was reached",
                self.steps.len()
            ));
        }
        Ok(())
    }

    /// One run over the user counts `rungs`; the first `counted_from` rungs are rows but
    /// not recorded by the search.
    async fn ladder_run(&mut self, probe: &Plan, rungs: &[f64], counted_from: usize) -> Result<()> {
        let users: Vec<u32> = rungs.iter().map(|&v| v as u32).collect();
        let first = users[0];
        let top = users[users.len() - 1];
        let hold = self.settings.step_duration.unwrap_or(DEFAULT_HOLD);
        let warmup = self.settings.warmup;
        if hold <= warmup + Duration::from_secs(1) {
            return Err(Error::Usage(format!(
                "--step-duration {}: with --vary {USERS} each user count is held that long, \
                 which must exceed --warmup by more than 1s",
                humantime::format_duration(hold)
            )));
        }
        // The first rung's logins as the scenario has them: its arrival, for `first` users.
        let mut sets = self.sets.clone();
        sets.push(format!("{USERS}={first}"));
        let base = load_plan(&run_args(self.args, sets.clone(), None), Shard::WHOLE)?;
        let logins: Duration = base.population.arrival.iter().map(|p| p.duration).sum();
        let rate = base.population.arrival.last().map_or(1000.0, |p| p.rate_to);
        let ladder = find::ladder::Ladder { users, rate, hold };
        let late_at = (logins + Duration::from_secs(2) + hold)
            .as_secs_f64()
            .ceil();
        let mut sets = self.sets.clone();
        sets.push(format!("{USERS}={top}"));
        if top > first {
            sets.push(format!(
                "population.late={{ count = {}, at = \"{late_at}s\" }}",
                top - first
            ));
        }
        let traffic = (ladder.traffic() + hold).as_secs_f64().ceil();
        for i in 0..probe.traffic.len() {
            sets.push(format!("traffic[{i}].duration=\"{traffic}s\""));
        }
        let n = self.steps.len() + 1;
        let folder = format!("run-{n:02}");
        note(&format!(
            "find: {folder}: {} users online, then adding users to {}, {} s at each count",
            first,
            top,
            hold.as_secs()
        ));
        let arrival = ladder.late_arrival();
        let (artifact, _) = self
            .execute(sets, &folder, move |plan| {
                plan.population.late_arrival = arrival;
                find::ladder::keep_traffic_online(plan);
            })
            .await?;
        let spans = ladder.spans(&artifact, late_at, warmup.as_secs_f64());
        let steps = spans.iter().zip(rungs).map(|(span, &value)| {
            find::step::measure(value, &artifact, span, format!("{folder}/result.json"))
        });
        self.take_ladder(steps.collect(), counted_from, artifact.interrupted);
        if artifact.interrupted {
            self.interrupted = true;
            self.notes.push(format!(
                "a signal stopped {folder}: the search ended there, its answer is incomplete"
            ));
        }
        Ok(())
    }

    /// Records the `steps` of one ladder run; the first `counted_from` are rows but not
    /// recorded by the search, nor are those past its first failure or of a run a signal
    /// `interrupted`.
    fn take_ladder(&mut self, steps: Vec<find::Step>, counted_from: usize, interrupted: bool) {
        let mut failed = false;
        for (i, step) in steps.into_iter().enumerate() {
            if i < counted_from || failed || interrupted {
                // Past the first failure a ladder's steps are rows only: the search has
                // its answer's upper end.
                self.steps.push(step);
                continue;
            }
            failed = !step.passed;
            if !self.take(step, false) {
                break;
            }
        }
    }

    /// True (and a note) when the search has used its steps.
    fn out_of_steps(&mut self) -> bool {
        if self.steps.len() as u32 >= self.settings.max_steps {
            self.notes.push(format!(
                "the search stopped after --max-steps {} steps, before the precision was reached",
                self.settings.max_steps
            ));
            return true;
        }
        false
    }

    /// Runs one step's `sets` into `folder` (after `adjust` has changed its plan) and
    /// remembers the target and scenario names.
    async fn execute(
        &mut self,
        sets: Vec<String>,
        folder: &str,
        adjust: impl FnOnce(&mut Plan),
    ) -> Result<(crate::artifact::Artifact, PathBuf)> {
        let run_args = run_args(self.args, sets, Some(self.dir.join(folder)));
        let mut plan = load_plan(&run_args, Shard::WHOLE)?;
        adjust(&mut plan);
        let step_dir = out_dir(&plan)?;
        let artifact = execute(plan, &run_args, None).await?;
        artifact.write(&step_dir).map_err(Error::in_output)?;
        self.target.clone_from(&artifact.target);
        self.scenario.clone_from(&artifact.scenario);
        Ok((artifact, step_dir))
    }

    /// Records `step` and says how it went; false when the search must end (a signal).
    fn take(&mut self, step: find::Step, interrupted: bool) -> bool {
        let key = &self.settings.key;
        let r = &step.row;
        note(&crate::untrusted::line(&format!(
            "find: {key} = {}: {} (offered {:.1}/s, achieved {:.1}/s){}",
            num(step.value),
            if step.passed { "pass" } else { "FAIL" },
            r.offered_per_s,
            r.achieved_per_s,
            if step.failed.is_empty() {
                String::new()
            } else {
                format!(": {}", step.failed.join("; "))
            }
        )));
        if interrupted {
            // An interrupted step neither passed nor failed at its value: it is kept as a
            // row, not counted by the search.
            self.interrupted = true;
            self.notes.push(format!(
                "a signal stopped step {}: the search ended there, its answer is incomplete",
                self.steps.len() + 1
            ));
            self.steps.push(step);
            return false;
        }
        self.search.record(step.value, step.passed);
        self.steps.push(step);
        true
    }

    /// Writes `find.json`, prints the answer and returns the exit code.
    fn finish(mut self) -> Result<u8> {
        let mut target = self.target.clone();
        let embedded = target.starts_with("embedded");
        if embedded {
            target = "embedded reference server (a fresh one per run)".to_owned();
        }
        self.notes.push(if embedded {
            "every run started its own embedded reference server (fresh store), inside the \
             generator's process: CPU and memory of the generator include the server's"
                .to_owned()
        } else {
            format!("every step ran against {target}, which kept what earlier steps stored")
        });
        let st = &self.settings;
        let answer = Answer::of(&st.key, &self.search, &self.steps, st.to);
        let result = FindResult {
            kind: find::FIND_KIND.to_owned(),
            schema_version: find::FIND_SCHEMA_VERSION,
            tool: format!("msgstorm {}", env!("CARGO_PKG_VERSION")),
            scenario: self.scenario,
            target,
            vary: st.key.clone(),
            from: st.from,
            to: st.to,
            precision: st.precision,
            warmup_s: st.warmup.as_secs_f64(),
            steps: self.steps,
            answer,
            notes: self.notes,
        };
        Outputs::resolve(&self.args.format, None)?
            .emit("report", |f| find::text::renderer(f)?.render(&result))?;
        let path = result.write(&self.dir).map_err(Error::in_output)?;
        note(&format!("result: {}", path.display()));
        Ok(if result.answer.found() && !self.interrupted {
            EXIT_OK
        } else {
            EXIT_CHECK_FAILED
        })
    }
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
    fn current_value_walks_dotted_keys() {
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
