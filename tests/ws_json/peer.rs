//! Third-party servers of the ws-json tests, run as child processes on a free loopback
//! port: each prints `listening on HOST:PORT` first, and is killed on drop. The tests of a
//! server that is not installed are ignored (`cfg(peer_centrifuge)`,
//! `cfg(peer_socketcluster)`), except under `CI=true`, where they fail (`scripts/test`
//! installs them; see [`installed`]).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use msgstorm::artifact::Artifact;
use msgstorm::ledger::Delivery;

pub use crate::common::peers::installed;
use crate::common::run::{run_text, Ran, Work};

/// The longest a server may take to say where it listens.
const START_WAIT: Duration = Duration::from_secs(15);

/// A running server.
pub struct Peer {
    child: Child,
    /// `HOST:PORT` it listens on.
    pub addr: String,
}

/// `path` inside the repository.
pub fn repo(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(path)
}

impl Peer {
    /// Runs `program ARGS` and waits for its `listening on` line.
    pub fn start(program: &Path, args: &[&str]) -> Peer {
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", program.display()));
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let mut peer = Peer {
            child,
            addr: String::new(),
        };
        let line = rx
            .recv_timeout(START_WAIT)
            .unwrap_or_else(|_| panic!("{} said nothing within {START_WAIT:?}", program.display()));
        peer.addr = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?} of {}", program.display()))
            .to_owned();
        peer
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs a shipped scenario (`text`) against `server`: its head (everything before
/// `[population]`) with the shipped URL `shipped` pointed at `url`, then `body`.
/// Returns the run, its result and the delivery verdict.
pub async fn run_shipped(
    text: &str,
    shipped: &str,
    url: &str,
    body: &str,
) -> (Ran, Artifact, Delivery) {
    let head = &text[..text.find("[population]").expect("population")];
    let scenario = format!("{}\n{body}", head.replace(shipped, url));
    let work = Work::new();
    let (ran, artifact) = run_text(&work, &scenario).await;
    let d = artifact.ledger.summary();
    (ran, artifact, d)
}
