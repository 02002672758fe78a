//! Running the `msgstorm` binary in tests.
//!
//! - [`msgstorm`] runs it as a child process with a hard time limit and returns its exit
//!   code, stdout and stderr ([`Ran`]); [`msgstorm_sync`] is the same for plain `#[test]`s;
//!   [`Running`] runs it in the background, for tests that act while it runs.
//! - [`Work`] is a temporary folder for scenario files and results.
//! - [`scenario`] writes a scenario whose `[target]` is a test server.
//! - [`run_file`] / [`run_text`] run a scenario with `--out` and read its `result.json`;
//!   [`run_msgstorm`] does the same for a plain `#[test]` and gives the exit code and
//!   output with it ([`RunResult`]).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use msgstorm::artifact::Artifact;
use msgstorm::serve::ServerHandle;

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_msgstorm");

/// The longest any single `msgstorm` invocation of a test may take.
pub const RUN_LIMIT: Duration = Duration::from_secs(60);

/// What a finished `msgstorm` process left behind.
#[derive(Debug)]
pub struct Ran {
    /// Its exit code (-1 when a signal ended it).
    pub code: i32,
    /// Everything it printed on stdout.
    pub stdout: String,
    /// Everything it printed on stderr.
    pub stderr: String,
    /// How long it ran.
    pub took: Duration,
}

impl Ran {
    /// Panics with the whole output unless the exit code is `code`.
    #[track_caller]
    pub fn expect_code(&self, code: i32) -> &Self {
        assert_eq!(self.code, code, "exit code; the run printed:\n{self}");
        self
    }

    /// The first line of stdout (the report's summary line).
    pub fn verdict(&self) -> &str {
        self.stdout.lines().next().unwrap_or_default()
    }
}

impl std::fmt::Display for Ran {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {} after {:?}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.took, self.stdout, self.stderr
        )
    }
}

/// Runs `msgstorm ARGS` to completion (killed and a panic after [`RUN_LIMIT`]).
pub async fn msgstorm(args: &[&str]) -> Ran {
    msgstorm_with_env(args, &[]).await
}

/// [`msgstorm`] with these environment variables set as well.
pub async fn msgstorm_with_env(args: &[&str], env: &[(&str, &std::ffi::OsStr)]) -> Ran {
    Running::start_with_env(args, env).finish().await
}

/// `msgstorm ARGS` running in the background (killed on drop), for tests that act while
/// a run goes: start it with [`Running::start`], end with [`Running::finish`].
pub struct Running {
    child: tokio::process::Child,
    args: Vec<String>,
    start: Instant,
}

impl Running {
    /// Starts `msgstorm ARGS`.
    pub fn start(args: &[&str]) -> Running {
        Running::start_with_env(args, &[])
    }

    /// Starts `msgstorm ARGS` with these environment variables set as well.
    pub fn start_with_env(args: &[&str], env: &[(&str, &std::ffi::OsStr)]) -> Running {
        let child = tokio::process::Command::new(BIN)
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start msgstorm");
        Running {
            child,
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            start: Instant::now(),
        }
    }

    /// Whether it has exited already.
    pub fn exited(&mut self) -> bool {
        self.child.try_wait().expect("try_wait").is_some()
    }

    /// Waits for it to finish (killed and a panic after [`RUN_LIMIT`] from its start).
    pub async fn finish(self) -> Ran {
        let limit = RUN_LIMIT.saturating_sub(self.start.elapsed());
        let args = self.args;
        let out = tokio::time::timeout(limit, self.child.wait_with_output())
            .await
            .unwrap_or_else(|_| panic!("msgstorm {args:?} still running after {RUN_LIMIT:?}"))
            .expect("wait for msgstorm");
        Ran {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            took: self.start.elapsed(),
        }
    }
}

/// Runs `msgstorm ARGS` from a plain test thread (for commands that finish quickly).
pub fn msgstorm_sync(args: &[&str]) -> Ran {
    msgstorm_within(args, RUN_LIMIT)
}

/// Runs `msgstorm ARGS` from a plain test thread; killed and a panic after `limit`.
pub fn msgstorm_within(args: &[&str], limit: Duration) -> Ran {
    let start = Instant::now();
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start msgstorm");
    while child.try_wait().expect("try_wait").is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("msgstorm {args:?} still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().expect("collect output");
    Ran {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        took: start.elapsed(),
    }
}

/// A temporary folder for scenarios and results, deleted on drop.
#[derive(Debug)]
pub struct Work {
    dir: tempfile::TempDir,
}

impl Work {
    /// A new empty folder.
    pub fn new() -> Work {
        Work {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    /// `name` inside the folder (not created).
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Writes `text` to `name` and returns its path.
    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, text).expect("write a test file");
        p
    }
}

/// The `[target]` tables of a scenario aimed at `server`.
pub fn target(server: &ServerHandle) -> String {
    format!(
        "[target]\nurl = \"{}\"\n\n[target.auth]\nsecret = \"{}\"\n",
        server.ws_url(),
        server.secret()
    )
}

/// A scenario text: the top-level `head` keys, the target tables of `server`, then `body`
/// (the remaining tables).
pub fn scenario(head: &str, server: &ServerHandle, body: &str) -> String {
    format!("{head}\n\n{}\n{body}", target(server))
}

/// A string argument list from anything that displays.
pub fn args<const N: usize>(parts: [&dyn std::fmt::Display; N]) -> Vec<String> {
    parts.iter().map(|p| p.to_string()).collect()
}

/// `msgstorm run FILE --out DIR -q` plus `extra`, then its `result.json`.
pub async fn run_file(file: &Path, out: &Path, extra: &[&str]) -> (Ran, Artifact) {
    let mut a = args([&"run", &file.display(), &"--out", &out.display(), &"-q"]);
    a.extend(extra.iter().map(|s| (*s).to_owned()));
    let refs: Vec<&str> = a.iter().map(String::as_str).collect();
    let ran = msgstorm(&refs).await;
    let result = out.join("result.json");
    let artifact = Artifact::read(&result)
        .unwrap_or_else(|e| panic!("no readable {}: {e}\n{ran}", result.display()));
    (ran, artifact)
}

/// Writes `text` as a scenario in `work` and runs it (see [`run_file`]).
pub async fn run_text(work: &Work, text: &str) -> (Ran, Artifact) {
    let file = work.write("scenario.toml", text);
    run_file(&file, &work.path("out"), &[]).await
}

/// What a `msgstorm run` produced.
#[cfg(any(feature = "mqtt", feature = "xmpp"))]
pub struct RunResult {
    /// Exit code.
    pub code: i32,
    /// Standard output (the report).
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
    /// `result.json`, when one was written.
    pub artifact: Option<Artifact>,
}

/// Runs `msgstorm run` on `scenario` (written to a temp dir) with `--out DIR -q` plus
/// `args`, bounded by `limit`.
#[cfg(any(feature = "mqtt", feature = "xmpp"))]
pub fn run_msgstorm(scenario: &str, args: &[&str], limit: Duration) -> RunResult {
    let work = Work::new();
    let file = work.write("scenario.toml", scenario);
    let out = work.path("out");
    let (file, out_arg) = (file.display().to_string(), out.display().to_string());
    let mut all = vec!["run", file.as_str(), "--out", out_arg.as_str(), "-q"];
    all.extend_from_slice(args);
    let ran = msgstorm_within(&all, limit);
    let result = out.join("result.json");
    RunResult {
        code: ran.code,
        stdout: ran.stdout,
        stderr: ran.stderr,
        artifact: result
            .exists()
            .then(|| Artifact::read(&result).expect("a readable result.json")),
    }
}
