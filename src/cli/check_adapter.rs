//! `msgstorm check-adapter SCENARIO`: the cases every built-in driver passes, run against
//! the scenario's own target and driver (an adapter script and its server, most often), so
//! that an adapter's author learns in seconds whether logins, acks, pushes, group
//! messages, fetches and reconnects are classified right.
//!
//! Each case is a small run: the scenario's `[target]` kept as written, its own users and
//! traffic, judged as any run is (the built-in checks: nothing lost, duplicated,
//! reordered, no script or protocol errors) plus what the case is about. A case the
//! driver cannot run (no `group`, no `fetch`, a signal it does not offer) is skipped,
//! saying why.

use std::path::{Path, PathBuf};

use clap::Args;

use super::run::execute;
use super::{say, RunArgs};
use crate::artifact::Artifact;
use crate::error::{Error, Result, EXIT_CHECK_FAILED, EXIT_OK};
use crate::scenario::{self, Plan, Shard};
use crate::vocab::SignalKind;

/// Options of `msgstorm check-adapter`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The scenario whose `[target]` (driver, URL, auth, adapter) is checked; its users
    /// and traffic are not used.
    pub scenario: PathBuf,
    /// Override a key of the scenario, e.g. `--set target.url=ws://127.0.0.1:8080/ws`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Folder for each case's result (default: a new folder under the system's temporary
    /// folder).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// One case: its name, what it shows, the scenario tables it runs, and what besides a
/// passing run it needs.
struct Case {
    name: &'static str,
    shows: &'static str,
    body: &'static str,
    needs: Need,
}

/// What a case's result must show besides passing its checks.
#[derive(Clone, Copy)]
enum Need {
    /// Every expected delivery arrived.
    Deliveries,
    /// Deliveries arrived, some of them fetched after a late login.
    Fetched,
    /// Every signal of this kind owed arrived, and some were owed.
    Signals(SignalKind),
    /// Only that the checks passed.
    Nothing,
}

/// The users and traffic of the signal cases: two users sending to two others.
macro_rules! signal_case {
    ($signals:literal) => {
        concat!(
            "[population]\nusers = 4\nlogin_rate = 100\n\n\
             [[traffic]]\nkind = \"direct\"\nsenders = 2\nreceivers = 2\nmessages = 10\n\
             interval = \"100ms\"\n\n[signals]\n",
            $signals
        )
    };
}

/// The cases, in the order they run.
const CASES: [Case; 9] = [
    Case {
        name: "login",
        shows: "every user logs in, no error",
        body: "[population]\nusers = 4\nlogin_rate = 100\n\n\
               [[traffic]]\nkind = \"idle\"\nduration = \"1s\"\n",
        needs: Need::Nothing,
    },
    Case {
        name: "direct",
        shows: "direct messages: each send accepted, each delivered once and in order, the \
                final fetch counting none twice",
        body: "[population]\nusers = 4\nlogin_rate = 100\n\n\
               [[traffic]]\nkind = \"direct\"\nsenders = 2\nreceivers = 2\nmessages = 5\n\
               interval = \"20ms\"\n",
        needs: Need::Deliveries,
    },
    Case {
        name: "group",
        shows: "group messages: joined, accepted, each member's copy delivered once",
        body: "[population]\nusers = 4\nlogin_rate = 100\n\n\
               [[traffic]]\nkind = \"group\"\ngroups = 1\ngroup_size = 4\nsenders_per_group = 2\n\
               messages = 5\ninterval = \"20ms\"\n",
        needs: Need::Deliveries,
    },
    Case {
        name: "late-fetch",
        shows: "late users fetch what they missed, merged with what is pushed after",
        body:
            "[population]\nusers = 4\nlogin_rate = 100\nlate = { count = 2, at = \"1500ms\" }\n\n\
               [[traffic]]\nkind = \"direct\"\nsenders = 2\nreceivers = 2\nmessages = 10\n\
               interval = \"150ms\"\n",
        needs: Need::Fetched,
    },
    Case {
        name: "reconnect",
        shows: "every connection cut mid-traffic: users reconnect and fetch, nothing lost or \
                doubled",
        body: "[population]\nusers = 4\nlogin_rate = 100\n\n\
               [[traffic]]\nkind = \"direct\"\nsenders = 2\nreceivers = 2\nmessages = 30\n\
               interval = \"100ms\"\n\n\
               [[chaos]]\naction = \"cut\"\nat = \"1500ms\"\nfraction = 1.0\n\n\
               # A send in flight when its connection is cut fails: that is the cut, not\n\
               # the adapter. What was accepted must still arrive, once.\n\
               [checks]\nmax_send_error_rate = 0.5\n",
        needs: Need::Deliveries,
    },
    Case {
        name: "receipts",
        shows: "read receipts: each accepted and delivered to the message's sender once",
        body: signal_case!("receipts = 1.0\nread_delay = { exponential = \"100ms\" }\n"),
        needs: Need::Signals(SignalKind::Read),
    },
    Case {
        name: "typing",
        shows: "typing notices: each reaches the peer online once",
        body: signal_case!("typing = 1.0\ntyping_lead = \"50ms\"\nwithin = \"300ms\"\n"),
        needs: Need::Signals(SignalKind::Typing),
    },
    Case {
        name: "presence",
        shows: "presence: each login reaches the contacts online once",
        body: "[population]\nusers = 6\nlogin_rate = 20\n\n[population.contacts]\nmean = 4\n\n\
               [[traffic]]\nkind = \"idle\"\nduration = \"1s\"\n\n\
               [signals]\npresence = true\nwithin = \"300ms\"\n",
        needs: Need::Signals(SignalKind::Presence),
    },
    Case {
        name: "unreachable",
        shows: "a target that is not there: exit 3, one line naming it",
        body: "[population]\nusers = 1\n\n[[traffic]]\nkind = \"idle\"\nduration = \"1s\"\n",
        needs: Need::Nothing,
    },
];

/// How a case went.
enum Outcome {
    Pass(String),
    Fail(String),
    Skip(String),
}

/// Runs every case against the scenario's target; exit 0 when none failed.
pub async fn run(args: CheckArgs) -> Result<u8> {
    let plan = scenario::load(&args.scenario, &args.set, Shard::WHOLE)?;
    let target = target_table(&args.scenario)?;
    let out = args.out.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("msgstorm-check-{}", std::process::id()))
    });
    say(&format!(
        "checking driver `{}` against {} ({} cases; results in {})",
        plan.target.driver.name,
        plan.target
            .endpoint
            .as_ref()
            .map_or("the embedded reference server", |ep| ep.url.as_str()),
        CASES.len(),
        out.display()
    ));
    let mut failed = 0;
    for case in &CASES {
        let outcome = check(case, &args, &target, &out.join(case.name)).await;
        let (word, line) = match &outcome {
            Outcome::Pass(l) => ("pass", l),
            Outcome::Fail(l) => {
                failed += 1;
                ("FAIL", l)
            }
            Outcome::Skip(l) => ("skip", l),
        };
        // A case's line quotes the run's verdict or error: what the server said, shown.
        say(&format!(
            "{word:<5}{:<12}{} — {}",
            case.name,
            case.shows,
            crate::untrusted::line(line)
        ));
    }
    say(&if failed == 0 {
        "the adapter classifies every case as msgstorm expects".to_owned()
    } else {
        format!("{failed} case(s) failed: each case's result.json is in its folder")
    });
    Ok(if failed == 0 {
        EXIT_OK
    } else {
        EXIT_CHECK_FAILED
    })
}

/// The scenario's `[target]` table as written (an empty one for the embedded server).
fn target_table(path: &Path) -> Result<toml::Value> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    let whole: toml::Table =
        toml::from_str(&text).map_err(|e| Error::Usage(format!("{}: {e}", path.display())))?;
    Ok(whole
        .get("target")
        .cloned()
        .unwrap_or_else(|| toml::Value::Table(toml::Table::new())))
}

/// Runs one case into `dir`.
async fn check(case: &Case, args: &CheckArgs, target: &toml::Value, dir: &Path) -> Outcome {
    let mut target = target.clone();
    if case.name == "unreachable" {
        match closed_url(&target) {
            Some(url) => set_url(&mut target, url),
            None => return Outcome::Skip("the embedded server is always there".to_owned()),
        }
    }
    let plan = match case_plan(case, args, target) {
        Ok(p) => p,
        Err(e) => return Outcome::Skip(first_line(&e.to_string())),
    };
    let run_args = RunArgs::step(
        args.scenario.clone(),
        args.set.clone(),
        Some(dir.to_owned()),
        true,
    );
    let ran = execute(plan, &run_args, None).await;
    if case.name == "unreachable" {
        return match ran {
            Err(e @ Error::Unreachable { .. }) => Outcome::Pass(first_line(&e.to_string())),
            Err(e) => Outcome::Fail(format!("another error: {}", first_line(&e.to_string()))),
            Ok(_) => Outcome::Fail("the run reached a target that is not there".to_owned()),
        };
    }
    match ran {
        Ok(artifact) => judge(&artifact, case.needs, dir),
        Err(e) => Outcome::Fail(first_line(&e.to_string())),
    }
}

/// The case's plan: its tables under the scenario's target, read as if written in the
/// scenario's file (files the target names resolve as there).
fn case_plan(case: &Case, args: &CheckArgs, target: toml::Value) -> Result<Plan> {
    let mut table: toml::Table = toml::from_str(case.body)
        .map_err(|e| Error::Other(format!("the case `{}`: {e}", case.name)))?;
    table.insert("name".into(), format!("check-{}", case.name).into());
    table.insert("drain".into(), "3s".into());
    table.insert("target".into(), target);
    let text = toml::to_string(&table)
        .map_err(|e| Error::Other(format!("the case `{}`: {e}", case.name)))?;
    scenario::parse(&text, &args.scenario, &args.set, Shard::WHOLE)
}

/// The verdict of a case's run.
fn judge(a: &Artifact, needs: Need, dir: &Path) -> Outcome {
    let rendered = crate::report::render(a);
    let verdict = first_line(&rendered.text);
    let _ = a.write(dir);
    if !rendered.passed {
        return Outcome::Fail(verdict);
    }
    if let Need::Signals(kind) = needs {
        return signals_judged(a, kind);
    }
    let d = a.ledger.summary();
    let said = format!(
        "{} of {} delivered ({} fetched), {} lost, {} duplicated",
        d.delivered, d.expected, d.via_sync, d.lost, d.duplicated
    );
    match needs {
        Need::Deliveries if d.expected == 0 || d.delivered < d.expected => Outcome::Fail(said),
        Need::Fetched if d.via_sync == 0 => {
            Outcome::Fail(format!("{said}: the late users fetched nothing"))
        }
        Need::Nothing => Outcome::Pass(verdict),
        _ => Outcome::Pass(said),
    }
}

/// The verdict of a signal case that passed its checks: some of `kind` were owed, and all
/// arrived.
fn signals_judged(a: &Artifact, kind: SignalKind) -> Outcome {
    let row = a
        .signals
        .as_ref()
        .and_then(|r| r.summary().into_iter().find(|r| r.kind == kind));
    let Some(r) = row.map(|r| r.delivery) else {
        return Outcome::Fail("the run kept no signals".to_owned());
    };
    let said = format!(
        "{} of {} owed arrived ({} fetched), {} missing, {} duplicated",
        r.arrived, r.expected, r.via_sync, r.missing, r.duplicated
    );
    if r.expected == 0 || r.arrived < r.expected {
        Outcome::Fail(said)
    } else {
        Outcome::Pass(said)
    }
}

/// The target's URL with its host and port replaced by a closed loopback port.
fn closed_url(target: &toml::Value) -> Option<String> {
    let url = target.get("url")?.as_str()?;
    let (scheme, rest) = url.split_once("://")?;
    let path = rest.find('/').map_or("", |i| &rest[i..]);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .ok()?
        .port();
    Some(format!("{scheme}://127.0.0.1:{port}{path}"))
}

/// Sets `url` in a `[target]` table.
fn set_url(target: &mut toml::Value, url: String) {
    if let Some(t) = target.as_table_mut() {
        t.insert("url".into(), url.into());
    }
}

/// The first line of a text.
fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or_default().to_owned()
}
