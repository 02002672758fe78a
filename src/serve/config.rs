//! Options of the server: the command-line form ([`ServeArgs`]) and the resolved
//! [`ServeConfig`] that [`crate::serve::run`] and [`crate::serve::spawn`] take.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::faults::FaultSpec;

/// How hard a commit waits for the disk (SQLite's `synchronous` pragma in WAL mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Durability {
    /// `synchronous=FULL`: every commit is fsynced before its acks go out.
    Full,
    /// `synchronous=NORMAL`: commits survive a crash of the process, not of the machine.
    Normal,
}

/// Who may become a member of a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum GroupPolicy {
    /// Anyone may join any group and then read its whole history.
    #[default]
    Open,
    /// Only the creator adds members (`group_add`); a join by anyone else is `forbidden`.
    Invite,
}

/// How sequence numbers are counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum SeqScope {
    /// Each conversation numbers its messages 1, 2, 3, …: gapless.
    #[default]
    Conversation,
    /// One counter for the whole server, so the numbers of one conversation skip (as on
    /// servers that number every message from one sequence).
    Server,
}

/// Command-line options of `msgstorm serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on (WebSocket at `/ws`, Prometheus text at `/metrics`).
    #[arg(long, default_value = "127.0.0.1:7700")]
    pub listen: SocketAddr,
    /// Directory of the SQLite store; a temporary one (deleted at exit) when absent.
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Secret for login tokens; a random one is generated and logged when absent.
    #[arg(long)]
    pub secret: Option<String>,
    /// `full` fsyncs every commit; `normal` survives process crashes only.
    #[arg(long, value_enum, default_value = "full")]
    pub durability: Durability,
    /// Largest WebSocket frame or message accepted, e.g. `64KiB`.
    #[arg(long, default_value = "64KiB", value_parser = parse_size)]
    pub max_frame: usize,
    /// Largest message body accepted in a `send`, e.g. `32KiB`.
    #[arg(long, default_value = "32KiB", value_parser = parse_size)]
    pub max_body: usize,
    /// Most WebSocket connections held at once; more get `too_many_connections`.
    #[arg(long, default_value_t = 100_000)]
    pub max_connections: usize,
    /// Outbound queue per connection, in frames; overflow disconnects it (`slow_consumer`).
    #[arg(long, default_value_t = 1024)]
    pub queue: usize,
    /// Outbound queue per connection, in bytes, e.g. `8MiB`; overflow disconnects it too.
    #[arg(long, default_value = "8MiB", value_parser = parse_size)]
    pub queue_bytes: usize,
    /// Close connections that send nothing for this long, e.g. `60s`.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    pub idle_timeout: Duration,
    /// Close a connection whose pending write does not complete for this long (the
    /// client stopped reading), e.g. `30s`.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    pub write_timeout: Duration,
    /// Close a connection whose HTTP request (the WebSocket upgrade) is not complete this
    /// long after the accept; also the longest a plain HTTP connection lives, e.g. `10s`.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub handshake_timeout: Duration,
    /// Close a WebSocket that has not logged in this long after the upgrade, e.g. `10s`.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub login_timeout: Duration,
    /// Most connections not yet logged in. At the cap the server stops accepting (new
    /// connections wait in the listen backlog) until one logs in or goes, or the oldest has
    /// been pending longer than `--handshake-timeout`: then a new one evicts it.
    /// Default: a quarter of `--max-connections`, at least 1024.
    #[arg(long)]
    pub max_unauthenticated: Option<usize>,
    /// `open`: anyone joins any group; `invite`: only the creator adds members.
    #[arg(long, value_enum, default_value = "open")]
    pub groups: GroupPolicy,
    /// `conversation`: each conversation's seqs are 1, 2, 3, …; `server`: one counter for
    /// the whole server, so a conversation's seqs skip.
    #[arg(long, value_enum, default_value = "conversation")]
    pub seqs: SeqScope,
    /// Worker pool size serving `kv_get` requests.
    #[arg(long, default_value_t = 4)]
    pub workers: usize,
    /// `kv_get` requests waiting for a worker before `overloaded` is answered.
    #[arg(long, default_value_t = 4096)]
    pub kv_queue: usize,
    /// Simulated backend latency of one `kv_get` lookup, e.g. `1ms`.
    #[arg(long, default_value = "1ms", value_parser = humantime::parse_duration)]
    pub backend_latency: Duration,
    /// Faults injected into pushes, e.g. `drop=0.001,dup=0.001,reorder=0.001,corrupt=0.0005,delay=200ms@0.01`.
    #[arg(long, default_value = "", value_parser = parse_faults)]
    pub faults: Box<FaultSpec>,
    /// Only pushes to these recipients (comma-separated user ids) get faults; all when absent.
    #[arg(long, value_delimiter = ',')]
    pub fault_users: Vec<String>,
    /// Seed of the fault decisions: the same seed faults the same (conversation, seq,
    /// recipient) pushes; a random one (logged) when absent.
    #[arg(long)]
    pub fault_seed: Option<u64>,
    /// Append every injected fault as one JSON line to this file.
    #[arg(long)]
    pub fault_log: Option<PathBuf>,
}

/// Everything the server needs; [`Default`] is an in-process test server on a free
/// loopback port with a temporary store and a random secret.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Address to bind in [`crate::serve::spawn`] (`run` takes a bound listener instead).
    pub listen: SocketAddr,
    /// Directory of the SQLite store; `None` = a temporary directory removed at shutdown.
    pub data: Option<PathBuf>,
    /// Secret for login tokens; `None` = a random one.
    pub secret: Option<String>,
    /// Commit durability.
    pub durability: Durability,
    /// Largest WebSocket frame or message, bytes.
    pub max_frame: usize,
    /// Largest message body, bytes.
    pub max_body: usize,
    /// Most connections held at once.
    pub max_connections: usize,
    /// Outbound queue per connection, frames.
    pub queue: usize,
    /// Outbound queue per connection, bytes.
    pub queue_bytes: usize,
    /// Idle timeout of a connection.
    pub idle_timeout: Duration,
    /// Longest a write of queued frames may wait on the peer before the connection closes.
    pub write_timeout: Duration,
    /// Longest wait for a connection's HTTP request after the accept.
    pub handshake_timeout: Duration,
    /// Longest wait for `login` after the upgrade.
    pub login_timeout: Duration,
    /// Most connections not yet logged in; `None` = a quarter of `max_connections`, at
    /// least 1024.
    pub max_unauthenticated: Option<usize>,
    /// Who may become a member of a group.
    pub groups: GroupPolicy,
    /// How seqs are counted.
    pub seqs: SeqScope,
    /// `kv_get` worker pool size.
    pub workers: usize,
    /// `kv_get` requests that may wait for a worker.
    pub kv_queue: usize,
    /// Simulated backend latency per `kv_get`.
    pub backend_latency: Duration,
    /// Faults injected into pushes.
    pub faults: FaultSpec,
    /// Recipients that get faults; empty = everyone.
    pub fault_users: Vec<String>,
    /// Seed of the fault decisions; `None` = random.
    pub fault_seed: Option<u64>,
    /// JSONL fault log.
    pub fault_log: Option<PathBuf>,
    /// Most commands the writer commits in one transaction.
    pub batch_max: usize,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            data: None,
            secret: None,
            durability: Durability::Normal,
            max_frame: 64 * 1024,
            max_body: 32 * 1024,
            max_connections: 100_000,
            queue: 1024,
            queue_bytes: 8 * 1024 * 1024,
            idle_timeout: Duration::from_secs(60),
            write_timeout: Duration::from_secs(30),
            handshake_timeout: Duration::from_secs(10),
            login_timeout: Duration::from_secs(10),
            max_unauthenticated: None,
            groups: GroupPolicy::Open,
            seqs: SeqScope::Conversation,
            workers: 4,
            kv_queue: 4096,
            backend_latency: Duration::from_millis(1),
            faults: FaultSpec::default(),
            fault_users: Vec::new(),
            fault_seed: None,
            fault_log: None,
            batch_max: 4096,
        }
    }
}

impl From<ServeArgs> for ServeConfig {
    fn from(a: ServeArgs) -> Self {
        ServeConfig {
            listen: a.listen,
            data: a.data,
            secret: a.secret,
            durability: a.durability,
            max_frame: a.max_frame,
            max_body: a.max_body,
            max_connections: a.max_connections,
            queue: a.queue,
            queue_bytes: a.queue_bytes,
            idle_timeout: a.idle_timeout,
            write_timeout: a.write_timeout,
            handshake_timeout: a.handshake_timeout,
            login_timeout: a.login_timeout,
            max_unauthenticated: a.max_unauthenticated,
            groups: a.groups,
            seqs: a.seqs,
            workers: a.workers,
            kv_queue: a.kv_queue,
            backend_latency: a.backend_latency,
            faults: *a.faults,
            fault_users: a.fault_users,
            fault_seed: a.fault_seed,
            fault_log: a.fault_log,
            ..ServeConfig::default()
        }
    }
}

impl ServeConfig {
    /// The cap on connections not yet logged in (at least 1).
    pub fn unauthenticated_cap(&self) -> usize {
        self.max_unauthenticated
            .unwrap_or((self.max_connections / 4).max(1024))
            .max(1)
    }
}

/// Parses `--faults` (boxed: it is the largest option and rarely given).
fn parse_faults(s: &str) -> Result<Box<FaultSpec>, String> {
    FaultSpec::parse(s).map(Box::new)
}

/// Parses a byte size: a number with an optional unit `B`, `KB`/`KiB`, `MB`/`MiB` (all
/// binary multiples), e.g. `64KiB`, `1024`, `1MiB`.
pub fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: usize = num
        .parse()
        .map_err(|_| format!("`{s}` is not a size; write e.g. 64KiB or 1024"))?;
    let mult = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1024,
        "m" | "mb" | "mib" => 1024 * 1024,
        _ => return Err(format!("`{s}`: unknown size unit; use B, KiB or MiB")),
    };
    n.checked_mul(mult)
        .filter(|&v| v > 0)
        .ok_or_else(|| format!("`{s}` is not a usable size"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(parse_size("64KiB"), Ok(65536));
        assert_eq!(parse_size("1024"), Ok(1024));
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert!(parse_size("0").is_err());
        assert!(parse_size("12 parsecs").is_err());
        assert!(parse_size("KiB").is_err());
    }
}
