//! Shards as child processes of this `msgstorm` on this host, each in its own process group
//! (so a terminal's Ctrl-C reaches only the coordinator, which forwards it once), logging to
//! `shard-I.log` next to its result folder.

use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};

use tokio::process::{Child, Command};
use tokio::sync::watch;

use super::{Launcher, Notes, ShardOutcome, ShardRun};
use crate::error::{Error, Result};

/// Runs shards as local child processes of one `msgstorm` executable.
#[derive(Debug, Clone)]
pub struct Local {
    exe: PathBuf,
}

impl Local {
    /// A launcher of this very executable.
    pub fn current() -> Result<Self> {
        let exe = std::env::current_exe()
            .map_err(|e| Error::Other(format!("cannot find the msgstorm executable: {e}")))?;
        Ok(Local::of(exe))
    }

    /// A launcher of the `msgstorm` executable at `exe`.
    pub fn of(exe: impl Into<PathBuf>) -> Self {
        Local { exe: exe.into() }
    }

    /// Starts shard `index` of `run`, its stderr going to its log.
    fn spawn(&self, run: &ShardRun, index: u32) -> Result<Child> {
        let log = run.log_of(index);
        let log_file = std::fs::File::create(&log).map_err(|source| Error::Write {
            path: log.clone(),
            source,
        })?;
        Command::new(&self.exe)
            .args(run.args(index, &run.shard_dir(index)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log_file))
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| Error::Other(format!("cannot start shard {index}: {e}")))
    }
}

impl Launcher for Local {
    async fn run(
        &self,
        run: &ShardRun,
        mut stops: watch::Receiver<u32>,
        _: Notes<'_>,
    ) -> Result<Vec<ShardOutcome>> {
        let mut children = (0..run.count)
            .map(|index| self.spawn(run, index))
            .collect::<Result<Vec<_>>>()?;
        let mut forwarding = true;
        // Once a second stop came: when the children still running are killed.
        let mut kill_at: Option<tokio::time::Instant> = None;
        let mut outcomes = Vec::with_capacity(children.len());
        for index in 0..children.len() {
            let status = loop {
                let stop = tokio::select! {
                    status = children[index].wait() => break status,
                    changed = stops.changed(), if forwarding => changed.is_ok(),
                    () = sleep_until(kill_at), if kill_at.is_some() => {
                        kill(&children);
                        kill_at = None;
                        continue;
                    }
                };
                if stop {
                    terminate(&children);
                    if *stops.borrow() >= 2 && kill_at.is_none() {
                        kill_at = Some(tokio::time::Instant::now() + KILL_GRACE);
                    }
                } else {
                    forwarding = false;
                }
            };
            let status =
                status.map_err(|e| Error::Other(format!("waiting for shard {index}: {e}")))?;
            outcomes.push(outcome(run, index as u32, status));
        }
        Ok(outcomes)
    }
}

/// How long a shard has to end after the coordinator's second stop before it is killed
/// (one that stops at once takes milliseconds; a stopped or hung one never ends by itself).
pub const KILL_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Sleeps until `at` (never without one).
async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Kills every child not yet waited for with everything in its process group (it leads
/// one of its own).
fn kill(children: &[Child]) {
    use rustix::process::{kill_process_group, Pid, Signal};
    for pid in children.iter().filter_map(Child::id) {
        if let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) {
            // A child that is already gone has nothing left to kill.
            let _ = kill_process_group(pid, Signal::KILL);
        }
    }
}

/// Sends SIGTERM to every child not yet waited for. (A child that exited but was not
/// waited for is a zombie whose pid cannot be reused, so no stranger gets the signal.)
fn terminate(children: &[Child]) {
    use rustix::process::{kill_process, Pid, Signal};
    for pid in children.iter().filter_map(Child::id) {
        let pid = i32::try_from(pid).ok().and_then(Pid::from_raw);
        if let Some(pid) = pid {
            // A child that is already gone has nothing left to stop.
            let _ = kill_process(pid, Signal::TERM);
        }
    }
}

/// Shard `index`'s result, or why there is none.
fn outcome(run: &ShardRun, index: u32, status: ExitStatus) -> ShardOutcome {
    let result = run.shard_dir(index).join("result.json");
    if result.is_file() {
        ShardOutcome::Result(result)
    } else {
        ShardOutcome::Failed {
            code: status.code(),
            log_tail: {
                let log = run.log_of(index);
                super::log_tail(&std::fs::read_to_string(&log).unwrap_or_default(), &log)
            },
        }
    }
}
