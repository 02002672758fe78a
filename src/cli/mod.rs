//! Command-line interface: subcommands, live progress and all terminal output.

mod check_adapter;
mod collect;
mod find;
mod finish;
mod k8s;
mod live_page;
mod load;
mod new;
mod output;
mod progress;
mod run;
mod shards;
mod size;
mod stop;
mod watch;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::artifact::Artifact;
use crate::error::{Error, Result, EXIT_CHECK_FAILED, EXIT_OK};
use crate::report::format::{Format, Output};
use crate::scenario::Shard;
use output::Outputs;

/// msgstorm: load, capacity and delivery-reliability tester for IM servers.
#[derive(Debug, Parser)]
#[command(
    name = "msgstorm",
    version,
    about,
    after_help = "Exit codes: 0 every check passed, 1 a check failed, the run was interrupted or a \
                  compare gate held, \
                  2 bad usage or scenario, 3 target unreachable, 4 msgstorm itself failed (also: the \
                  generator fell behind the schedule, so the run is no verdict on the target)."
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a scenario (no file: the built-in default against the embedded server).
    Run(RunArgs),
    /// Find the highest value of one load key (a rate, users, group size, concurrency) at
    /// which the scenario's checks still pass: a climb, then a bisection, one run per step.
    Find(find::FindArgs),
    /// Size a server for a load (users, online share, rate, group size) from what a run
    /// measured of its target: memory per online user, CPU per 1,000 deliveries, bytes.
    Size(size::SizeArgs),
    /// Check a scenario file completely without connecting to anything.
    Validate {
        /// The scenario file.
        scenario: PathBuf,
        /// Override a scenario key, e.g. `--set population.users=2000`.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// Also show the frames the driver would send for one user's login, a direct and a
        /// group message, without connecting (`driver = "script"`).
        #[arg(long)]
        frames: bool,
    },
    /// Print the report of one result file, or of several shard results merged.
    Report {
        /// `result.json` files of one run.
        #[arg(required = true)]
        results: Vec<PathBuf>,
        /// Print the report as JSON (numbers with units, see docs/result.md) instead of
        /// tables: `--format json`.
        #[arg(long)]
        json: bool,
        /// Also write the HTML report to FILE (default: `report.html` beside the result file,
        /// or in the current folder for several). Give it after the result files or as
        /// `--html=FILE`.
        #[arg(long, value_name = "FILE", num_args = 0..=1)]
        html: Option<Option<PathBuf>>,
        /// Output formats.
        #[command(flatten)]
        format: output::FormatArgs,
    },
    /// Print a run over N generator pods as Kubernetes objects (docs/kubernetes.md).
    ///
    /// A ConfigMap with the scenario, a headless Service and an Indexed Job, for
    /// `kubectl apply -f -`.
    K8s(k8s::K8sArgs),
    /// Merge and report the shards' results found in their logs.
    ///
    /// Reads `kubectl logs -l msgstorm.dev/run=ID --prefix --tail=-1` output, writes each
    /// shard's result as `shard-I/result.json` and the merged one as `result.json`.
    Collect {
        /// Log files; none or `-`: standard input.
        logs: Vec<PathBuf>,
        /// Folder for the shards' and the merged result files.
        #[arg(long)]
        out: PathBuf,
        /// Print the report as JSON instead of tables: `--format json`.
        #[arg(long)]
        json: bool,
        /// Output formats.
        #[command(flatten)]
        format: output::FormatArgs,
    },
    /// Compare two runs: every headline metric with its change and a verdict, and
    /// regression gates for CI (exit 1 when a gate fails).
    Compare(CompareArgs),
    /// Write a starting scenario (and, for `script-*`, its Lua adapter) for a protocol
    /// family into a new folder: it validates as written, and `native`, `ws-json` and
    /// `script-ws` run against the embedded reference server as they are.
    New {
        /// The protocol family.
        family: new::Family,
        /// The folder to write `scenario.toml` (and `adapter.lua`) into.
        dir: PathBuf,
    },
    /// Run the cases every built-in driver passes (login, direct, group, late fetch,
    /// reconnect, unreachable) against a scenario's own target and driver — an adapter
    /// script and its server — and say which it classifies right.
    CheckAdapter(check_adapter::CheckArgs),
    /// Ask a running msgstorm to stop as Ctrl-C does (the first stop drains and writes the
    /// result, a second stops at once); in a container, `kubectl exec POD -- msgstorm stop`.
    Stop {
        /// The msgstorm process (default 1: a container's own).
        #[arg(long, default_value_t = 1)]
        pid: u32,
    },
    /// Run the reference IM server.
    #[cfg(feature = "serve")]
    Serve(crate::serve::ServeArgs),
    /// Print a login token for a user of the reference server.
    Token {
        /// The user id.
        user: String,
        /// The server secret (`--secret` of `msgstorm serve`).
        #[arg(long)]
        secret: String,
        /// Make the token expire this long from now, e.g. `1h`; no expiry when absent.
        #[arg(long, value_parser = humantime::parse_duration)]
        ttl: Option<std::time::Duration>,
    },
}

/// Options of `msgstorm compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The base run's result.json (the one to compare against).
    pub base: PathBuf,
    /// The new run's result.json.
    pub new: PathBuf,
    /// Also write the comparison as an HTML page with both runs' time series overlaid:
    /// `--format html=FILE`.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Output formats: text, json, html or markdown.
    #[command(flatten)]
    pub format: output::FormatArgs,
    /// Fail (exit 1) when this holds, e.g. 'e2e_p99>+10%', 'lost>0', 'sent_per_s<-5%'
    /// (repeatable; a signed value is a change from the base, see docs/result.md).
    #[arg(long = "fail-on", value_name = "GATE")]
    pub fail_on: Vec<String>,
    /// Compare runs of different scenarios (refused otherwise, exit 2).
    #[arg(long)]
    pub allow_different_scenarios: bool,
}

/// Options of `msgstorm run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The scenario file; without one, the built-in default scenario runs against the
    /// embedded reference server.
    pub scenario: Option<PathBuf>,
    /// Override a scenario key, e.g. `--set population.users=2000` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Results folder (default: a new timestamped folder under ./msgstorm-results/).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Run only shard I of N of the user range, e.g. `--shard 0/2`.
    #[arg(long, value_parser = parse_shard, value_name = "I/N", conflicts_with = "shards")]
    pub shard: Option<Shard>,
    /// Split the users over N generator processes on this host (past one process's open-file
    /// limit) and merge their results exactly.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=256))]
    pub shards: Option<u32>,
    /// Run id shared by all shards of one run (8 hex digits; default: random).
    #[arg(long, value_parser = parse_run_id, value_name = "HEX")]
    pub run_id: Option<u32>,
    /// No live progress.
    #[arg(long, short)]
    pub quiet: bool,
    /// Start traffic at this wall-clock time (Unix milliseconds, or RFC 3339 such as
    /// `2026-05-01T12:00:00Z`), and not before this shard's users have logged in. All shards
    /// of a run need the same one to send together: `--shards N` sets it itself; when
    /// running `--shard I/N --run-id HEX` by hand on several machines, give every shard the
    /// same time, far enough ahead for every shard's logins.
    #[arg(long = "start-traffic-at", value_name = "TIME", value_parser = parse_wall_time)]
    pub traffic_at: Option<u64>,
    /// A folder every shard of the run can see (with `--shard I/N`): each shard marks in it
    /// that its users are logged in, and traffic starts once every shard has (or after a
    /// bounded wait, which the result's notes report). `--shards N` sets it itself.
    /// With `tcp://HOST:PORT` instead of a folder, shard 0 listens on PORT and the others
    /// reach it at HOST:PORT (no shared filesystem needed: shards on several hosts, a
    /// Kubernetes Job), and every shard runs on shard 0's clock, its offset measured before
    /// and after traffic (stated in the result).
    #[arg(
        long = "start-barrier",
        value_name = "DIR|tcp://HOST:PORT",
        requires = "shard",
        value_parser = crate::launch::Rendezvous::parse
    )]
    pub start_barrier: Option<crate::launch::Rendezvous>,
    /// Also print the result file, framed, to standard output once it is written (for
    /// launchers whose only channel is the log, such as a Kubernetes pod; `msgstorm
    /// collect` reads it back).
    #[arg(long)]
    pub log_result: bool,
    /// Serve the run's OpenMetrics at http://ADDR/metrics while it lasts, for Prometheus
    /// (users online, counters, latency histograms, errors, the generator's CPU and
    /// memory: docs/metrics.md). Port 0 picks one (the run's notes say which); with
    /// `--shards N`, shard I listens on the port + I. Also `report.metrics_listen`.
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Push the same series by Prometheus remote-write to URL (`http://HOST:PORT/PATH`,
    /// Prometheus: `/api/v1/write`) every 5 s and once more with the final totals at the
    /// end: for runs nobody can scrape. Also `report.metrics_push`.
    #[arg(long, value_name = "URL", value_parser = crate::scenario::push_url)]
    pub metrics_push: Option<http::Uri>,
    /// Serve a page at http://ADDR/ that follows the run: the charts and tables of
    /// `report.html` for the run so far, refreshed every second, the phase, the checks as
    /// they stand (those only the end can judge, such as losses, pending), and the final
    /// report in their place when the run ends. Port 0 picks one (the run's notes say
    /// which). One process's run: not with `--shards N`.
    #[arg(long, value_name = "ADDR", conflicts_with = "shards")]
    pub live: Option<std::net::SocketAddr>,
    /// Output formats of the report (the run also writes `result.json` and `report.html`
    /// into its results folder).
    #[command(flatten)]
    pub format: output::FormatArgs,
}

impl RunArgs {
    /// The arguments of one run of `scenario` (with `set`, into `out`) that another
    /// command runs as a step of its own (`find`, `check-adapter`): one process, no live
    /// outputs.
    pub(crate) fn step(
        scenario: PathBuf,
        set: Vec<String>,
        out: Option<PathBuf>,
        quiet: bool,
    ) -> Self {
        RunArgs {
            scenario: Some(scenario),
            set,
            out,
            shard: None,
            shards: None,
            run_id: None,
            quiet,
            traffic_at: None,
            start_barrier: None,
            log_result: false,
            metrics_listen: None,
            metrics_push: None,
            live: None,
            format: output::FormatArgs::default(),
        }
    }
}

fn parse_shard(s: &str) -> std::result::Result<Shard, String> {
    let (i, n) = s
        .split_once('/')
        .ok_or_else(|| format!("`{s}`: expected I/N, e.g. 0/2"))?;
    let index: u32 = i
        .parse()
        .map_err(|_| format!("`{i}` is not a shard index"))?;
    let count: u32 = n
        .parse()
        .map_err(|_| format!("`{n}` is not a shard count"))?;
    if count == 0 || index >= count {
        return Err(format!("shard {index}/{count}: need 0 <= I < N"));
    }
    Ok(Shard { index, count })
}

/// A wall-clock time as Unix milliseconds: digits, or an RFC 3339 UTC time.
fn parse_wall_time(s: &str) -> std::result::Result<u64, String> {
    if let Ok(ms) = s.parse::<u64>() {
        return Ok(ms);
    }
    let at = humantime::parse_rfc3339_weak(s).map_err(|e| {
        format!("`{s}`: {e}; expected Unix milliseconds or a time like 2026-05-01T12:00:00Z")
    })?;
    at.duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .map_err(|_| format!("`{s}` is before 1970"))
}

fn parse_run_id(s: &str) -> std::result::Result<u32, String> {
    u32::from_str_radix(s, 16).map_err(|_| format!("`{s}`: a run id is up to 8 hex digits"))
}

/// Runs the parsed command and returns the process exit code.
pub async fn run(cli: Cli) -> Result<u8> {
    match cli.command {
        Command::Run(args) => run::run(args).await,
        Command::Find(args) => find::run(args).await,
        Command::Size(args) => size::run(args),
        Command::Validate {
            scenario,
            set,
            frames,
        } => {
            let plan = crate::scenario::load(&scenario, &set, Shard::WHOLE)?;
            plan.warnings.iter().for_each(|w| note(w));
            if frames {
                dry_run(&plan)?;
            }
            offered(&plan);
            say(&format!(
                "{}: ok — {} users, {} traffic pattern(s), {} check(s)",
                scenario.display(),
                plan.population.users,
                plan.traffic.len(),
                plan.checks.len()
            ));
            Ok(EXIT_OK)
        }
        Command::Report {
            results,
            json,
            html,
            format,
        } => report(&results, json, html, &format),
        Command::K8s(args) => k8s::run(args).await,
        Command::Collect {
            logs,
            out,
            json,
            format,
        } => collect::run(&logs, &out, &Outputs::resolve(&format, json_output(json))?),
        Command::Compare(args) => compare(&args),
        Command::New { family, dir } => new::run(family, &dir),
        Command::CheckAdapter(args) => check_adapter::run(args).await,
        Command::Stop { pid } => stop::run(pid),
        #[cfg(feature = "serve")]
        Command::Serve(args) => crate::serve::serve_command(args).await.map(|()| EXIT_OK),
        Command::Token { user, secret, ttl } => {
            if secret.is_empty() {
                return Err(Error::Usage("--secret must not be empty".to_owned()));
            }
            let token = match ttl {
                None => crate::wire::token(&user, &secret),
                Some(ttl) => {
                    let now = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_secs());
                    let expires = now.saturating_add(ttl.as_secs().max(1));
                    crate::wire::token_until(&user, &secret, expires)
                }
            };
            say(&token);
            Ok(EXIT_OK)
        }
    }
}

/// Says what load the plan offers when its population has a shape (sessions over a day,
/// contacts): users online over the day, sessions, contacts, planned messages and how
/// they split over the senders; and what the users will signal besides messages.
fn offered(plan: &crate::scenario::Plan) {
    if let Some(o) = crate::engine::offered::offered(plan) {
        for line in crate::report::population::lines(&o, plan.population.users) {
            say(&line);
        }
    }
    if let Some(s) = &plan.signals {
        say(&s.describe());
    }
}

/// Runs `msgstorm report` and returns the exit code.
fn report(
    results: &[PathBuf],
    json: bool,
    html: Option<Option<PathBuf>>,
    format: &output::FormatArgs,
) -> Result<u8> {
    let html = html.map(|file| Output {
        format: Format::Html,
        file: Some(match (file, results) {
            (Some(file), _) => file,
            (None, [one]) => one.with_file_name("report.html"),
            (None, _) => PathBuf::from("report.html"),
        }),
    });
    let outputs = Outputs::resolve(format, json_output(json).into_iter().chain(html))?;
    if let [one] = results {
        if let Some(found) = crate::find::FindResult::read_if_find(one)? {
            outputs.emit("report", |f| crate::find::text::renderer(f)?.render(&found))?;
            return Ok(if found.answer.found() {
                EXIT_OK
            } else {
                EXIT_CHECK_FAILED
            });
        }
    }
    let artifact = Artifact::read_merged(results)?;
    let report = crate::report::Report::new(&artifact);
    outputs.emit("report", |f| f.for_run().render(&report))?;
    Ok(report.exit_code())
}

/// `--json`, the older spelling of `--format json`.
fn json_output(json: bool) -> Option<Output> {
    json.then_some(Output {
        format: Format::Json,
        file: None,
    })
}

/// Runs `msgstorm compare` and returns the exit code.
fn compare(args: &CompareArgs) -> Result<u8> {
    use crate::report::compare::{gate::Gate, render::Compared, Comparison};
    let html = args.html.clone().map(|file| Output {
        format: Format::Html,
        file: Some(file),
    });
    let outputs = Outputs::resolve(&args.format, html)?;
    let gates = args
        .fail_on
        .iter()
        .map(|g| Gate::parse(g))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(Error::Usage)?;
    let base = Artifact::read(&args.base)?;
    let new = Artifact::read(&args.new)?;
    if base.scenario != new.scenario && !args.allow_different_scenarios {
        return Err(Error::Usage(format!(
            "{} is a run of scenario `{}`, {} of `{}`: compare runs of one scenario, or pass              --allow-different-scenarios",
            args.base.display(),
            base.scenario,
            args.new.display(),
            new.scenario
        )));
    }
    let comparison = Comparison::new(
        crate::report::Report::new(&base),
        crate::report::Report::new(&new),
    );
    let gates = gates
        .iter()
        .map(|g| g.check(&comparison))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(Error::Usage)?;
    let compared = Compared {
        comparison,
        files: [
            args.base.display().to_string(),
            args.new.display().to_string(),
        ],
        gates,
    };
    outputs.emit("comparison", |f| Compared::renderer(f)?.render(&compared))?;
    Ok(if compared.failed() {
        EXIT_CHECK_FAILED
    } else {
        EXIT_OK
    })
}

/// `validate --frames`: the driver's dry run for the plan's first user, sending to its
/// second user and to a group.
fn dry_run(plan: &crate::scenario::Plan) -> Result<()> {
    let config = plan.driver_config(0);
    let (user, to) = (plan.population.user_id(0), plan.population.user_id(1));
    let lines = crate::driver::dry_run(&config, &user, &to, "group-1")
        .map_err(|e| Error::Usage(e.to_string()))?
        .ok_or_else(|| {
            Error::Usage(format!(
                "--frames: driver `{}` has no dry run (`native` and `script` have one)",
                config.spec.name
            ))
        })?;
    // A frame's text may hold line breaks or control characters: one line each, shown.
    lines.iter().for_each(|l| say(&crate::untrusted::line(l)));
    Ok(())
}

/// Prints a line of the command's output to stdout. A closed pipe (`msgstorm … | head`)
/// is not an error: the result file is already written.
fn say(text: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout().lock(), "{text}");
}

/// Prints a line of diagnostics or progress to stderr.
pub(crate) fn note(text: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{text}");
}
