//! Where the shards of one run execute: the boundary between splitting a run over N
//! generators ([`crate::run::shards`]) and starting, signalling and waiting for those generators.
//!
//! A shard is `msgstorm run --shard I/N` with the run's scenario, `--set` overrides, run id,
//! traffic start and rendezvous ([`ShardRun::args`]); it yields a `result.json`, and the
//! results of all shards merge exactly into the run's result. One [`ShardRun`] describes the
//! run to either [`Launcher`]: [`local`] runs the shards as child processes on this host;
//! [`kubectl`] applies them as a Kubernetes Indexed Job ([`kube`] writes its objects) whose
//! pod `I` runs `ShardRun::args` for index `$(JOB_COMPLETION_INDEX)`, meeting at shard 0
//! over the network ([`coord`]) and framing its result into its log ([`frame`]), which the
//! launcher (or `msgstorm collect`, from saved logs) reads back.

pub mod barrier;
pub mod coord;
pub mod frame;
pub mod kube;
pub mod kubectl;
pub mod local;
pub mod yaml;

use std::ffi::OsString;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use tokio::sync::watch;

use crate::error::Result;

/// Everything the shards of one run share.
#[derive(Debug, Clone)]
pub struct ShardRun {
    /// The scenario file (`None`: the built-in default scenario).
    pub scenario: Option<PathBuf>,
    /// `--set` overrides, in order (including the embedded server's URL and secret, if any).
    pub sets: Vec<String>,
    /// How many shards the run has (N of `--shard I/N`).
    pub count: u32,
    /// The run id every shard stamps into its messages.
    pub run_id: u32,
    /// When traffic starts in every shard (each still waits for its own users' logins);
    /// `None`: as soon as every shard's users are in (the rendezvous says when).
    pub traffic_at: Option<SystemTime>,
    /// Where the shards meet before traffic.
    pub rendezvous: Rendezvous,
    /// Each shard also prints its result, framed, to its standard output.
    pub log_result: bool,
    /// The run's results folder: the launcher collects shard I's result under `shard-I/`.
    pub out: PathBuf,
}

/// Where the shards of a run meet before traffic (`--start-barrier`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rendezvous {
    /// A folder every shard can see ([`barrier::FileBarrier`]).
    Dir(PathBuf),
    /// Shard 0 listens on `port` and the others reach it at `host:port`, which also makes
    /// shard 0's clock the run's reference ([`coord`]).
    Tcp {
        /// Shard 0's address as the others reach it.
        host: String,
        /// Its port.
        port: u16,
    },
}

impl Rendezvous {
    /// `tcp://HOST:PORT`, or else a folder.
    pub fn parse(s: &str) -> std::result::Result<Rendezvous, String> {
        let Some(addr) = s.strip_prefix("tcp://") else {
            return Ok(Rendezvous::Dir(PathBuf::from(s)));
        };
        let (host, port) = addr
            .rsplit_once(':')
            .filter(|(h, _)| !h.is_empty())
            .ok_or_else(|| format!("`{s}`: expected tcp://HOST:PORT"))?;
        let port = port
            .parse()
            .ok()
            .filter(|&p: &u16| p != 0)
            .ok_or_else(|| format!("`{s}`: `{port}` is not a port"))?;
        Ok(Rendezvous::Tcp {
            host: host.to_owned(),
            port,
        })
    }

    /// The `--start-barrier` argument that parses back into this.
    pub fn to_arg(&self) -> OsString {
        match self {
            Rendezvous::Dir(dir) => dir.as_os_str().to_owned(),
            Rendezvous::Tcp { host, port } => format!("tcp://{host}:{port}").into(),
        }
    }
}

impl ShardRun {
    /// The `msgstorm` arguments of shard `index` writing its result into `out`.
    pub fn args(&self, index: u32, out: &Path) -> Vec<OsString> {
        self.args_for(&index.to_string(), out)
    }

    /// The `msgstorm` arguments of the shard whose index is `index` as written (e.g. the
    /// `$(JOB_COMPLETION_INDEX)` a pod's container expands), writing into `out`.
    pub fn args_for(&self, index: &str, out: &Path) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec!["run".into()];
        args.extend(self.scenario.iter().map(|s| s.as_os_str().to_owned()));
        let mut words = vec![
            "--shard".to_owned(),
            format!("{index}/{}", self.count),
            "--run-id".to_owned(),
            format!("{:08x}", self.run_id),
        ];
        if let Some(at) = self.traffic_at {
            let ms = at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
            words.extend(["--start-traffic-at".to_owned(), ms.to_string()]);
        }
        args.extend(words.into_iter().map(OsString::from));
        args.extend(["--start-barrier".into(), self.rendezvous.to_arg()]);
        args.extend(["--out".into(), out.as_os_str().to_owned(), "--quiet".into()]);
        if self.log_result {
            args.push("--log-result".into());
        }
        for s in &self.sets {
            args.extend(["--set".into(), s.into()]);
        }
        args
    }

    /// Where shard `index`'s result folder is under [`ShardRun::out`].
    pub fn shard_dir(&self, index: u32) -> PathBuf {
        self.out.join(format!("shard-{index}"))
    }

    /// Where a launcher keeps shard `index`'s log: `shard-I.log` beside its folder.
    pub fn log_of(&self, index: u32) -> PathBuf {
        self.shard_dir(index).with_extension("log")
    }
}

/// What became of one shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShardOutcome {
    /// It wrote its result file, here.
    Result(PathBuf),
    /// It wrote no result.
    Failed {
        /// Its exit code (`None` when a signal ended it).
        code: Option<i32>,
        /// The last lines of its log, or where to find the log.
        log_tail: String,
    },
}

/// Log lines of a failed shard quoted in its outcome.
const TAIL_LINES: usize = 3;

/// The last lines of a shard's log `text` (kept at `saved`), for an error message.
fn log_tail(text: &str, saved: &Path) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let last = lines[lines.len().saturating_sub(TAIL_LINES)..].join(" | ");
    if last.is_empty() {
        format!("no output (see {})", saved.display())
    } else {
        last
    }
}

/// Where a launcher says what it is doing for the person running msgstorm (e.g. that a
/// Job was applied and where its objects stay), one line at a time.
pub type Notes<'a> = &'a mut (dyn FnMut(String) + Send);

/// Runs every shard of one run somewhere and collects their results.
pub trait Launcher {
    /// Starts shards `0..run.count` of `run`, forwards each stop request (every increment of
    /// `stops`: the first asks the shards to drain, the second to stop at once), waits for
    /// all of them, and returns their outcomes in index order, telling `notes` what it
    /// does. An error means the launcher itself failed (a shard could not be started or
    /// waited for).
    fn run(
        &self,
        run: &ShardRun,
        stops: watch::Receiver<u32>,
        notes: Notes<'_>,
    ) -> impl Future<Output = Result<Vec<ShardOutcome>>> + Send;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rendezvous_is_a_folder_or_tcp_host_port() {
        let tcp = Rendezvous::parse("tcp://job-0.svc:7400").expect("parses");
        assert_eq!(
            tcp,
            Rendezvous::Tcp {
                host: "job-0.svc".into(),
                port: 7400
            }
        );
        assert_eq!(
            Rendezvous::parse(tcp.to_arg().to_str().expect("utf-8")),
            Ok(tcp)
        );
        assert_eq!(Rendezvous::parse("a/b"), Ok(Rendezvous::Dir("a/b".into())));
        assert!(Rendezvous::parse("tcp://host").is_err());
        assert!(Rendezvous::parse("tcp://host:http").is_err());
        assert!(Rendezvous::parse("tcp://host:0").is_err());
    }
}
