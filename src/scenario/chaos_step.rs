//! The checked `[[chaos]]` steps as the plan holds them (validation: `chaos.rs`): what
//! each does, when, and for how long.

use std::time::Duration;

/// A process a step acts on, with where the scenario names it (the process must exist
/// when the run starts: checked then, before anything connects).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcRef {
    /// By process id.
    Pid(u32, Origin),
    /// By name, as in `/proc/PID/comm` (every process of that name).
    Name(String, Origin),
    /// The process listening on this `host:port` (a step naming no process: the target).
    Listening(String, Origin),
}

/// Where a key is written: its file, line and dotted key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Origin {
    /// The scenario file (`--set` for an override).
    pub file: std::path::PathBuf,
    /// Its 1-based line (0 for an override).
    pub line: usize,
    /// The key, e.g. `chaos[0].pid`.
    pub key: String,
}

impl std::fmt::Display for ProcRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProcRef::Pid(p, _) => write!(f, "pid {p}"),
            ProcRef::Name(n, _) => write!(f, "`{n}`"),
            ProcRef::Listening(a, _) => write!(f, "the process listening on {a}"),
        }
    }
}

/// What the network between the users and the target does during a step (msgstorm's
/// own TCP proxy carries every connection when a scenario has one).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum NetFault {
    /// Every chunk is held this long (plus up to `jitter`, order kept).
    Delay {
        /// Added one-way delay.
        delay: Duration,
        /// Extra delay, uniform in `0..=jitter`.
        jitter: Duration,
    },
    /// Each chunk, with this probability, is held for one TCP retransmission timeout
    /// ([`RETRANSMIT_TIMEOUT`]) — what a lost segment costs a TCP connection — with everything
    /// behind it on the connection.
    Loss(f64),
    /// At most this many bytes per second each way, per connection.
    Bandwidth(u64),
    /// Nothing passes; connections stay open and what was held passes after the step.
    Blackhole,
}

/// What a lost segment costs: Linux's minimum retransmission timeout.
pub const RETRANSMIT_TIMEOUT: Duration = Duration::from_millis(200);

/// What a step does.
#[derive(Debug, Clone, PartialEq)]
pub enum ChaosAction {
    /// SIGKILL.
    Kill(ProcRef),
    /// SIGTERM.
    Term(ProcRef),
    /// SIGSTOP for the step's duration, then SIGCONT.
    Pause(ProcRef),
    /// SIGKILL, then `start` run again (by `sh -c`), waiting until `listen` accepts.
    Restart {
        /// The process.
        process: ProcRef,
        /// The command that starts it.
        start: String,
        /// `host:port` it listens on once up.
        listen: String,
    },
    /// A command (by `sh -c`), its exit code and output kept.
    Exec(String),
    /// This fraction of the online users lose their connection abruptly.
    Cut(f64),
    /// The network misbehaves for the step's duration.
    Net(NetFault),
}

impl ChaosAction {
    /// The action's name as written.
    pub fn name(&self) -> &'static str {
        match self {
            ChaosAction::Kill(_) => "kill",
            ChaosAction::Term(_) => "term",
            ChaosAction::Pause(_) => "pause",
            ChaosAction::Restart { .. } => "restart",
            ChaosAction::Exec(_) => "exec",
            ChaosAction::Cut(_) => "cut",
            ChaosAction::Net(NetFault::Delay { .. }) => "delay",
            ChaosAction::Net(NetFault::Loss(_)) => "loss",
            ChaosAction::Net(NetFault::Bandwidth(_)) => "bandwidth",
            ChaosAction::Net(NetFault::Blackhole) => "blackhole",
        }
    }

    /// Whether the users' connections must go through msgstorm's proxy for it.
    pub fn needs_proxy(&self) -> bool {
        matches!(self, ChaosAction::Net(_) | ChaosAction::Cut(_))
    }
}

/// One checked `[[chaos]]` step.
#[derive(Debug, Clone, PartialEq)]
pub struct ChaosStep {
    /// Its key, `chaos[i]`.
    pub key: String,
    /// What it does.
    pub action: ChaosAction,
    /// When, from traffic start (drawn from `window` with the seed when given so).
    pub at: Duration,
    /// How long it lasts (zero for an instant action).
    pub duration: Duration,
    /// Per-step bound on messages due in the step's window or in its recovery that were
    /// lost.
    pub max_lost: Option<u64>,
    /// The same for duplicated deliveries.
    pub max_duplicated: Option<u64>,
}

impl ChaosStep {
    /// The process it acts on, if it acts on one.
    pub fn process(&self) -> Option<&ProcRef> {
        match &self.action {
            ChaosAction::Kill(p) | ChaosAction::Term(p) | ChaosAction::Pause(p) => Some(p),
            ChaosAction::Restart { process, .. } => Some(process),
            _ => None,
        }
    }

    /// When it ends, from traffic start.
    pub fn end(&self) -> Duration {
        self.at + self.duration
    }
}

/// How a `restart` waits for the process to listen again, at most.
pub const RESTART_WAIT: Duration = Duration::from_secs(30);
