//! The network rendezvous of the shards of one run on several hosts (`--start-barrier
//! tcp://HOST:PORT`): shard 0 serves a small line protocol on PORT, the other shards reach it
//! at HOST:PORT (in Kubernetes, shard 0's pod name in the Job's headless Service).
//!
//! It is a start barrier that needs no shared filesystem ([`crate::engine::StartBarrier`]),
//! and it is the run's reference clock: before traffic and again at the end, every other
//! shard estimates its clock's offset to shard 0's with an NTP-style exchange (several
//! samples, the one with the smallest round trip kept; the offset is known to ± half that
//! round trip), and runs on the corrected clock ([`crate::clock::Clock`]), so that
//! end-to-end latency across hosts is not off by their clocks' disagreement. Shard 0 is the
//! reference for every protocol (the generators' clocks are all that end-to-end latency
//! compares, and not every target has a time request); it waits, bounded, at the end for
//! the others' final exchange.
//!
//! Protocol, one request line and one reply line: `time` → wall-clock µs; `ready I` → `ok`
//! (shard I's users are in); `missing` → `missing I J …` (shards not yet ready); `done I` →
//! `ok` (shard I took its final time sample); `put KEY VALUE` → `ok` and `get KEY` →
//! `value VALUE` or `none`, `claim KEY VALUE` → `value WINNER` (the run-wide directory,
//! [`crate::driver::directory`]).

use std::collections::{BTreeSet, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio::sync::Notify;

use crate::artifact::ClockSync;
use crate::clock::local_us;
use crate::driver::directory::{self, Directory};
use crate::engine::StartBarrier;

/// Time samples per estimate.
const SAMPLES: usize = 8;
/// How long one request may take before the exchange is given up.
const IO_TIMEOUT: Duration = Duration::from_secs(5);
/// How often a shard asks shard 0 which shards are still missing.
const POLL: Duration = Duration::from_millis(50);
/// The longest request line shard 0 reads (a directory `put` with its longest key and
/// value).
const MAX_LINE: u64 = (directory::MAX_KEY + directory::MAX_VALUE + 16) as u64;
/// How long a polling shard keeps asking (longer than the engine's bounded barrier wait).
const POLL_FOR: Duration = Duration::from_secs(90);

/// What shard 0 knows about the run.
#[derive(Debug)]
struct State {
    count: u32,
    ready: BTreeSet<u32>,
    done: BTreeSet<u32>,
    /// The run-wide directory.
    values: HashMap<String, String>,
}

impl State {
    fn missing(&self, of: &BTreeSet<u32>) -> Vec<u32> {
        (0..self.count).filter(|i| !of.contains(i)).collect()
    }
}

/// Shard 0's endpoint: the barrier and the reference clock of the run.
#[derive(Debug)]
pub struct Coordinator {
    state: Arc<Mutex<State>>,
    changed: Arc<Notify>,
    addr: SocketAddr,
    server: tokio::task::JoinHandle<()>,
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

impl Coordinator {
    /// Listens for the other `count - 1` shards on `port` of `host` when `host` is an IP
    /// address of this machine, or of every interface when it is a name (shard 0's own name
    /// in the cluster's DNS may not resolve yet when its pod starts).
    pub async fn bind(host: &str, port: u16, count: u32) -> std::io::Result<Coordinator> {
        let listener = match host.trim_matches(['[', ']']).parse::<IpAddr>() {
            Ok(ip) => tokio::net::TcpListener::bind((ip, port)).await?,
            // Every interface: IPv6 and IPv4 where the host has IPv6, else IPv4.
            Err(_) => match tokio::net::TcpListener::bind((IpAddr::from([0u16; 8]), port)).await {
                Ok(l) => l,
                Err(_) => tokio::net::TcpListener::bind((IpAddr::from([0u8; 4]), port)).await?,
            },
        };
        let addr = listener.local_addr()?;
        let state = Arc::new(Mutex::new(State {
            count,
            ready: BTreeSet::new(),
            done: BTreeSet::from([0]),
            values: HashMap::new(),
        }));
        let changed = Arc::new(Notify::new());
        let server = tokio::spawn(serve(listener, state.clone(), changed.clone()));
        Ok(Coordinator {
            state,
            changed,
            addr,
            server,
        })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Shard 0's start barrier.
    pub fn barrier(&self) -> Arc<dyn StartBarrier> {
        Arc::new(LocalBarrier {
            state: self.state.clone(),
        })
    }

    /// The run-wide directory, kept here for every shard.
    pub fn directory(&self) -> Arc<dyn Directory> {
        Arc::new(LocalDirectory {
            state: self.state.clone(),
        })
    }

    /// Waits until every shard has taken its final time sample, at most `limit`; returns
    /// the shards that have not.
    pub async fn wait_done(&self, limit: Duration) -> Vec<u32> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let notified = self.changed.notified();
            let missing = {
                let s = lock(&self.state);
                s.missing(&s.done)
            };
            if missing.is_empty() {
                return missing;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return missing;
            }
        }
    }
}

impl Drop for Coordinator {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// Accepts connections until the coordinator is dropped.
async fn serve(listener: tokio::net::TcpListener, state: Arc<Mutex<State>>, changed: Arc<Notify>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            // Out of file descriptors, say: try again shortly rather than spin.
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let (state, changed) = (state.clone(), changed.clone());
        tokio::spawn(async move {
            let (read, mut write) = stream.into_split();
            let mut read = tokio::io::BufReader::new(read);
            let mut line = String::new();
            loop {
                line.clear();
                // A request is a short line; anything longer is not a shard of this run.
                match (&mut read).take(MAX_LINE).read_line(&mut line).await {
                    Ok(n) if n > 0 && line.ends_with('\n') => {}
                    _ => break,
                }
                let reply = answer(&line, &state);
                changed.notify_waiters();
                if write.write_all(reply.as_bytes()).await.is_err() {
                    break;
                }
            }
        });
    }
}

/// The reply line to one request line.
fn answer(line: &str, state: &Mutex<State>) -> String {
    let mut words = line.split_whitespace();
    let index = |w: Option<&str>| w.and_then(|w| w.parse::<u32>().ok());
    match words.next() {
        Some("time") => format!("{}\n", local_us()),
        Some("missing") => {
            let s = lock(state);
            let list: Vec<String> = s.missing(&s.ready).iter().map(u32::to_string).collect();
            format!("missing {}\n", list.join(" "))
        }
        Some("ready") => match index(words.next()) {
            Some(i) => {
                lock(state).ready.insert(i);
                "ok\n".to_owned()
            }
            None => "error: ready needs a shard index\n".to_owned(),
        },
        Some("done") => match index(words.next()) {
            Some(i) => {
                lock(state).done.insert(i);
                "ok\n".to_owned()
            }
            None => "error: done needs a shard index\n".to_owned(),
        },
        Some(verb @ ("put" | "claim")) => {
            // The value is the rest of the line, spaces and all.
            let rest = line.trim_end_matches(['\n', '\r']).trim_start();
            let rest = rest[verb.len()..].strip_prefix(' ').unwrap_or_default();
            let (key, value) = rest.split_once(' ').unwrap_or((rest, ""));
            if let Err(e) = directory::check(key, Some(value)) {
                return format!("error: {e}\n");
            }
            let mut s = lock(state);
            if verb == "put" {
                s.values.insert(key.to_owned(), value.to_owned());
                return "ok\n".to_owned();
            }
            let winner = s
                .values
                .entry(key.to_owned())
                .or_insert_with(|| value.to_owned());
            format!("value {winner}\n")
        }
        Some("get") => match words
            .next()
            .and_then(|k| lock(state).values.get(k).cloned())
        {
            Some(v) => format!("value {v}\n"),
            None => "none\n".to_owned(),
        },
        _ => "error: unknown request\n".to_owned(),
    }
}

/// Shard 0's side of the barrier: the coordinator's state itself.
#[derive(Debug)]
struct LocalBarrier {
    state: Arc<Mutex<State>>,
}

impl StartBarrier for LocalBarrier {
    fn arrive(&self) -> std::io::Result<()> {
        lock(&self.state).ready.insert(0);
        Ok(())
    }

    fn missing(&self) -> Vec<u32> {
        let s = lock(&self.state);
        s.missing(&s.ready)
    }

    fn count(&self) -> u32 {
        lock(&self.state).count
    }
}

/// Shard 0's side of the directory: the coordinator's state itself.
#[derive(Debug)]
struct LocalDirectory {
    state: Arc<Mutex<State>>,
}

impl Directory for LocalDirectory {
    fn publish(&self, key: &str, value: &str) -> std::io::Result<()> {
        directory::check(key, Some(value)).map_err(std::io::Error::other)?;
        lock(&self.state)
            .values
            .insert(key.to_owned(), value.to_owned());
        Ok(())
    }

    fn lookup(&self, key: &str) -> std::io::Result<Option<String>> {
        Ok(lock(&self.state).values.get(key).cloned())
    }

    fn claim(&self, key: &str, value: &str) -> std::io::Result<String> {
        directory::check(key, Some(value)).map_err(std::io::Error::other)?;
        Ok(lock(&self.state)
            .values
            .entry(key.to_owned())
            .or_insert_with(|| value.to_owned())
            .clone())
    }
}

/// Another shard's side of the directory: one exchange with shard 0 per call.
#[derive(Debug)]
struct RemoteDirectory {
    addr: String,
}

impl Directory for RemoteDirectory {
    fn publish(&self, key: &str, value: &str) -> std::io::Result<()> {
        directory::check(key, Some(value)).map_err(std::io::Error::other)?;
        Link::connect(&self.addr)?
            .ask(&format!("put {key} {value}"))
            .map(drop)
    }

    fn lookup(&self, key: &str) -> std::io::Result<Option<String>> {
        directory::check(key, None).map_err(std::io::Error::other)?;
        let reply = Link::connect(&self.addr)?.ask(&format!("get {key}"))?;
        Ok(reply.strip_prefix("value ").map(str::to_owned))
    }

    fn claim(&self, key: &str, value: &str) -> std::io::Result<String> {
        directory::check(key, Some(value)).map_err(std::io::Error::other)?;
        let reply = Link::connect(&self.addr)?.ask(&format!("claim {key} {value}"))?;
        reply
            .strip_prefix("value ")
            .map(str::to_owned)
            .ok_or_else(|| std::io::Error::other(format!("shard 0 answered `{reply}`")))
    }

    fn remote(&self) -> bool {
        true
    }
}

/// One line exchange with shard 0 (blocking, bounded by [`IO_TIMEOUT`]).
#[derive(Debug)]
struct Link {
    reader: BufReader<TcpStream>,
}

impl Link {
    fn connect(addr: &str) -> std::io::Result<Link> {
        use std::net::ToSocketAddrs;
        let mut last = std::io::Error::other(format!("{addr}: no address"));
        for a in addr.to_socket_addrs()? {
            match TcpStream::connect_timeout(&a, IO_TIMEOUT) {
                Ok(s) => {
                    s.set_read_timeout(Some(IO_TIMEOUT))?;
                    s.set_write_timeout(Some(IO_TIMEOUT))?;
                    s.set_nodelay(true)?;
                    return Ok(Link {
                        reader: BufReader::new(s),
                    });
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    fn ask(&mut self, request: &str) -> std::io::Result<String> {
        self.reader
            .get_mut()
            .write_all(format!("{request}\n").as_bytes())?;
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "shard 0 closed the connection",
            ));
        }
        let line = line.trim_end().to_owned();
        match line.strip_prefix("error: ") {
            Some(e) => Err(std::io::Error::other(format!("shard 0: {e}"))),
            None => Ok(line),
        }
    }
}

/// A shard other than 0: reaches shard 0 at `addr` (`host:port`).
#[derive(Debug, Clone)]
pub struct Peer {
    addr: String,
    index: u32,
    count: u32,
}

impl Peer {
    /// Shard `index` of `count`, whose shard 0 listens at `addr`.
    pub fn new(addr: String, index: u32, count: u32) -> Peer {
        Peer { addr, index, count }
    }

    /// This shard's index.
    pub fn index(&self) -> u32 {
        self.index
    }

    /// Connects to shard 0, trying again until `wait` has passed (its pod may start later).
    async fn link(&self, wait: Duration) -> std::io::Result<Link> {
        let deadline = Instant::now() + wait;
        loop {
            let addr = self.addr.clone();
            let tried = tokio::task::spawn_blocking(move || Link::connect(&addr))
                .await
                .map_err(std::io::Error::other)?;
            match tried {
                Ok(link) => return Ok(link),
                Err(e) if Instant::now() >= deadline => {
                    return Err(std::io::Error::new(
                        e.kind(),
                        format!("shard 0 at {}: {e}", self.addr),
                    ))
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
            }
        }
    }

    /// Estimates this host's clock offset to shard 0's: 8 exchanges (`SAMPLES`), the one
    /// with the smallest round trip kept.
    pub async fn offset(&self, wait: Duration) -> std::io::Result<Sample> {
        let mut link = self.link(wait).await?;
        tokio::task::spawn_blocking(move || {
            let mut best: Option<Sample> = None;
            for _ in 0..SAMPLES {
                let sent = local_us();
                let reply = link.ask("time")?;
                let got = local_us();
                let theirs: i64 = reply.parse().map_err(|_| {
                    std::io::Error::other(format!("shard 0 sent `{reply}` for the time"))
                })?;
                let sample = Sample::of(sent, theirs, got);
                if best.is_none_or(|b| sample.uncertainty_us < b.uncertainty_us) {
                    best = Some(sample);
                }
            }
            best.ok_or_else(|| std::io::Error::other("no time sample"))
        })
        .await
        .map_err(std::io::Error::other)?
    }

    /// Tells shard 0 this shard took its final time sample.
    pub async fn done(&self) -> std::io::Result<()> {
        let mut link = self.link(IO_TIMEOUT).await?;
        let index = self.index;
        tokio::task::spawn_blocking(move || link.ask(&format!("done {index}")).map(drop))
            .await
            .map_err(std::io::Error::other)?
    }

    /// The run-wide directory, kept by shard 0.
    pub fn directory(&self) -> Arc<dyn Directory> {
        Arc::new(RemoteDirectory {
            addr: self.addr.clone(),
        })
    }

    /// This shard's start barrier.
    pub fn barrier(&self) -> Arc<dyn StartBarrier> {
        Arc::new(RemoteBarrier {
            peer: self.clone(),
            missing: Arc::new(Mutex::new((0..self.count).collect())),
        })
    }
}

/// One clock offset estimate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// How far this clock is ahead of the reference, µs.
    pub offset_us: i64,
    /// The offset is within ± this, µs (half the exchange's round trip).
    pub uncertainty_us: u64,
}

impl Sample {
    /// The estimate of one exchange: sent at `sent` and answered at `got` on this clock,
    /// stamped `theirs` on the reference clock in between.
    pub fn of(sent: i64, theirs: i64, got: i64) -> Sample {
        let rtt = got.saturating_sub(sent).max(0);
        Sample {
            offset_us: sent + rtt / 2 - theirs,
            uncertainty_us: (rtt as u64).div_ceil(2),
        }
    }
}

impl ClockSync {
    /// The record of a shard that measured `start` before traffic and `end` (if it could)
    /// after, against `reference`.
    pub fn measured(reference: String, start: Sample, end: Option<Sample>) -> ClockSync {
        ClockSync {
            reference,
            offset_us: start.offset_us,
            uncertainty_us: start.uncertainty_us,
            end_offset_us: end.map(|s| s.offset_us),
            end_uncertainty_us: end.map(|s| s.uncertainty_us),
        }
    }
}

/// A start barrier kept by shard 0: arriving tells it so; a thread asks it which shards
/// are still missing until none is (or [`POLL_FOR`] has passed).
#[derive(Debug)]
struct RemoteBarrier {
    peer: Peer,
    missing: Arc<Mutex<Vec<u32>>>,
}

impl StartBarrier for RemoteBarrier {
    fn arrive(&self) -> std::io::Result<()> {
        let ready = || {
            let mut link = Link::connect(&self.peer.addr)?;
            link.ask(&format!("ready {}", self.peer.index))?;
            Ok::<_, std::io::Error>(link)
        };
        // Blocking for at most IO_TIMEOUT: off the async workers where the runtime allows.
        let multi_thread = tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
        let mut link = if multi_thread {
            tokio::task::block_in_place(ready)?
        } else {
            ready()?
        };
        let missing = self.missing.clone();
        std::thread::spawn(move || {
            let until = Instant::now() + POLL_FOR;
            while Instant::now() < until {
                let Ok(reply) = link.ask("missing") else {
                    return;
                };
                let now: Vec<u32> = reply
                    .split_whitespace()
                    .skip(1)
                    .filter_map(|w| w.parse().ok())
                    .collect();
                let empty = now.is_empty();
                *missing.lock().unwrap_or_else(|p| p.into_inner()) = now;
                if empty {
                    return;
                }
                std::thread::sleep(POLL);
            }
        });
        Ok(())
    }

    fn missing(&self) -> Vec<u32> {
        self.missing
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn count(&self) -> u32 {
        self.peer.count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_halves_the_round_trip() {
        // This clock is 1000 µs ahead; 200 µs each way.
        let s = Sample::of(10_000, 10_000 + 200 - 1000, 10_400);
        assert_eq!(
            s,
            Sample {
                offset_us: 1000,
                uncertainty_us: 200
            }
        );
    }

    /// Requests that are not the protocol get an error line; an overlong line closes the
    /// connection; neither changes the run's state.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn stray_requests_are_refused() {
        let coord = Coordinator::bind("127.0.0.1", 0, 2).await.expect("binds");
        let addr = coord.addr().to_string();
        tokio::task::spawn_blocking(move || {
            let mut link = Link::connect(&addr).expect("connects");
            for bad in ["hello", "ready", "ready x", "done"] {
                assert!(link.ask(bad).is_err(), "{bad}");
            }
            assert!(link.ask(&"x".repeat(200)).is_err(), "an overlong line");
        })
        .await
        .expect("joins");
        assert_eq!(coord.barrier().missing(), [0, 1]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn shards_meet_at_shard_0_and_measure_their_offset() {
        let coord = Coordinator::bind("127.0.0.1", 0, 2).await.expect("binds");
        let peer = Peer::new(coord.addr().to_string(), 1, 2);
        let sample = peer.offset(Duration::from_secs(5)).await.expect("offset");
        // Same host, same clock: the offset is within its uncertainty of zero.
        assert!(
            sample.offset_us.unsigned_abs() <= sample.uncertainty_us + 1000,
            "{sample:?}"
        );
        let (ours, theirs) = (coord.barrier(), peer.barrier());
        assert_eq!(ours.missing(), [0, 1]);
        ours.arrive().expect("arrives");
        tokio::task::spawn_blocking(move || theirs.arrive())
            .await
            .expect("joins")
            .expect("arrives");
        assert!(ours.missing().is_empty());
        assert_eq!(coord.wait_done(Duration::from_millis(10)).await, [1]);
        peer.done().await.expect("done");
        assert!(coord.wait_done(Duration::from_secs(5)).await.is_empty());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_directory_is_shared_through_shard_0() {
        let coord = Coordinator::bind("127.0.0.1", 0, 2).await.expect("binds");
        let peer = Peer::new(coord.addr().to_string(), 1, 2);
        let (ours, theirs) = (coord.directory(), peer.directory());
        assert!(theirs.remote() && !ours.remote());
        ours.publish("room", "grp Abc 1").expect("publish");
        let got = tokio::task::spawn_blocking(move || {
            let seen = theirs.lookup("room").expect("lookup");
            theirs.publish("user.7", "usrXyz").expect("publish");
            let missing = theirs.lookup("nobody").expect("lookup");
            let refused = theirs.publish("two words", "v").is_err();
            let won = theirs.claim("creator", "usr 1").expect("claim");
            (seen, missing, refused, won)
        })
        .await
        .expect("joins");
        assert_eq!(
            got,
            (Some("grp Abc 1".to_owned()), None, true, "usr 1".to_owned())
        );
        assert_eq!(ours.claim("creator", "usr0").expect("claim"), "usr 1");
        assert_eq!(
            ours.lookup("user.7").expect("lookup").as_deref(),
            Some("usrXyz")
        );
    }
}
