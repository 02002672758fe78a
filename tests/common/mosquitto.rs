//! A real mosquitto broker for the MQTT tests, and a runner of the `msgstorm` binary.
//!
//! [`Mosquitto::start`] writes a config file into a temp dir, starts the broker on a free
//! loopback port and waits until it accepts connections; dropping it kills the broker.
//! Its tests are ignored when mosquitto is not installed (`cfg(peer_mosquitto)`, see
//! [`peers`](super::peers)).

use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use msgstorm::artifact::Artifact;

use super::peers::free_port;
pub use super::peers::required;

/// The longest a broker may take to start.
const START_WAIT: Duration = Duration::from_secs(5);

/// A running mosquitto; killed on drop.
pub struct Mosquitto {
    child: Child,
    /// Its TCP port on 127.0.0.1.
    pub port: u16,
    /// Its temp dir (config, password file, log).
    pub dir: tempfile::TempDir,
}

impl Mosquitto {
    /// Starts mosquitto with `extra` appended to a config of one loopback listener with
    /// anonymous access (override with `allow_anonymous false`); always `Some` (a missing
    /// mosquitto fails the test).
    pub fn start(extra: &str) -> Option<Mosquitto> {
        Mosquitto::start_with(|_| extra.to_owned())
    }

    /// Like [`Mosquitto::start`], with the extra config returned by `prepare(dir)`, which
    /// may write files (a password file) into the broker's temp dir first.
    pub fn start_with(prepare: impl FnOnce(&Path) -> String) -> Option<Mosquitto> {
        let bin = required("mosquitto")?;
        let dir = tempfile::tempdir().expect("temp dir");
        let extra = prepare(dir.path());
        let port = free_port();
        let conf = dir.path().join("mosquitto.conf");
        let anonymous = if extra.contains("allow_anonymous") {
            ""
        } else {
            "allow_anonymous true\n"
        };
        std::fs::write(
            &conf,
            format!("listener {port} 127.0.0.1\n{anonymous}persistence false\n{extra}\n"),
        )
        .expect("write mosquitto.conf");
        let log = std::fs::File::create(dir.path().join("mosquitto.log")).expect("log file");
        let child = Command::new(bin)
            .arg("-c")
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start mosquitto");
        let mut m = Mosquitto { child, port, dir };
        let deadline = Instant::now() + START_WAIT;
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = m.child.try_wait() {
                panic!("mosquitto exited ({status}): {}", m.log());
            }
            assert!(
                Instant::now() < deadline,
                "mosquitto did not listen within {START_WAIT:?}: {}",
                m.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(m)
    }

    /// `mqtt://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("mqtt://127.0.0.1:{}", self.port)
    }

    /// The broker's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("mosquitto.log")).unwrap_or_default()
    }
}

impl Drop for Mosquitto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a `msgstorm run` produced.
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
pub fn run_msgstorm(scenario: &str, args: &[&str], limit: Duration) -> RunResult {
    let work = super::run::Work::new();
    let file = work.write("scenario.toml", scenario);
    let out = work.path("out");
    let (file, out_arg) = (file.display().to_string(), out.display().to_string());
    let mut all = vec!["run", file.as_str(), "--out", out_arg.as_str(), "-q"];
    all.extend_from_slice(args);
    let ran = super::run::msgstorm_within(&all, limit);
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
