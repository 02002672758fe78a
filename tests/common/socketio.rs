//! The Socket.IO chat app of `peers/socketio` (npm `socket.io` 4.8, pinned by its lockfile,
//! installed by `scripts/test` with `npm ci`) and a real `redis-server` (Debian's package),
//! for the socketio tests.
//!
//! [`shared`] starts one cluster per test binary — Redis on a free loopback port without
//! persistence, and two app nodes behind `@socket.io/redis-streams-adapter` with connection
//! state recovery — and tests keep apart on it by their user prefixes. [`Cluster::start`]
//! starts a private one with other options (killed on drop). Every process is tied to the
//! test process's lifetime through its standard input, so a shared cluster never outlives
//! the tests. The tests are ignored when node and the app's modules (`cfg(peer_socketio)`)
//! or redis-server (`cfg(peer_redis)`) are missing (see [`peers`]).

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{mpsc, OnceLock};
use std::time::{Duration, Instant};

use crate::common::detect;
use crate::common::peers::{self, free_port, installed};

/// The longest a process may take to start.
const START_WAIT: Duration = Duration::from_secs(15);

/// A child process that ends when dropped, or when the test process is gone (its standard
/// input closes).
pub struct Proc {
    child: Child,
    stdin: Option<ChildStdin>,
}

impl Proc {
    fn spawn(cmd: &mut Command) -> Proc {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
        let stdin = child.stdin.take();
        Proc { child, stdin }
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills it at once (SIGKILL), as a crashed node.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        // Closing its input ends it (and the redis-server its shell started).
        self.stdin.take();
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill();
    }
}

/// The app's directory.
fn app_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("peers/socketio")
}

/// node, once it and the app's modules are found installed (else the test fails).
fn node() -> PathBuf {
    let node = peers::node();
    let modules = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(detect::SOCKETIO_MODULES);
    installed("Socket.IO", &node);
    installed("Socket.IO", &modules);
    node
}

/// A redis-server on 127.0.0.1, no persistence.
pub struct Redis {
    _proc: Proc,
    /// Its port.
    pub port: u16,
}

impl Redis {
    /// Starts one on a free port; a missing redis-server fails the test.
    pub fn start() -> Redis {
        let bin = PathBuf::from(detect::REDIS_SERVER);
        installed("redis-server", &bin);
        let port = free_port();
        let script = format!(
            "{} --port {port} --bind 127.0.0.1 --save '' --appendonly no --loglevel warning \
             >/dev/null & r=$!; cat >/dev/null; kill $r",
            bin.display()
        );
        let proc = Proc::spawn(Command::new("sh").args(["-c", &script]));
        let deadline = Instant::now() + START_WAIT;
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "redis-server did not listen on {port}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Redis { _proc: proc, port }
    }
}

/// One node of the app.
pub struct Node {
    /// The process.
    pub proc: Proc,
    /// `HOST:PORT` it listens on.
    pub addr: String,
}

impl Node {
    /// Starts `node peers/socketio/server.js 127.0.0.1:0 ARGS` and waits for its address.
    pub fn start(args: &[String]) -> Node {
        let node = node();
        let script = app_dir().join("server.js");
        let mut proc = Proc::spawn(
            Command::new(node)
                .arg(script)
                .arg("127.0.0.1:0")
                .args(args)
                .arg("--exit-with-stdin"),
        );
        let stdout = proc.child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx
            .recv_timeout(START_WAIT)
            .unwrap_or_else(|_| panic!("the Socket.IO app said nothing within {START_WAIT:?}"));
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?} of the Socket.IO app"))
            .to_owned();
        Node { proc, addr }
    }

    /// Its `ws://` URL.
    pub fn url(&self) -> String {
        format!("ws://{}", self.addr)
    }

    /// Its `/stats` counter `name` (routed, dropped, connections).
    pub fn stat(&self, name: &str) -> u64 {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(&self.addr).expect("connect for /stats");
        s.set_read_timeout(Some(Duration::from_secs(5))).ok();
        s.write_all(b"GET /stats HTTP/1.0\r\n\r\n")
            .expect("request");
        let mut text = String::new();
        s.read_to_string(&mut text).expect("response");
        let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        let v: serde_json::Value = serde_json::from_str(body).expect("stats JSON");
        v[name]
            .as_u64()
            .unwrap_or_else(|| panic!("no `{name}` in {body}"))
    }
}

/// Redis and app nodes behind it.
pub struct Cluster {
    /// The nodes.
    pub nodes: Vec<Node>,
    /// Redis (kept running while the cluster lives).
    _redis: Option<Redis>,
    /// The app emits `welcome` to every new connection (not `--welcome=0`).
    welcomes: bool,
}

impl Cluster {
    /// `n` nodes behind `adapter` (`none`: one node, no Redis) with `args` each.
    pub fn start(n: usize, adapter: &str, args: &[&str]) -> Cluster {
        let redis = match adapter {
            "none" => None,
            _ => Some(Redis::start()),
        };
        let mut all: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        all.push(format!("--adapter={adapter}"));
        if let Some(r) = &redis {
            all.push(format!("--redis=redis://127.0.0.1:{}", r.port));
        }
        let nodes = (0..n).map(|_| Node::start(&all)).collect();
        Cluster {
            nodes,
            _redis: redis,
            welcomes: !args.contains(&"--welcome=0"),
        }
    }

    /// The `[target]` of a scenario spreading users over every node, with `options` added
    /// to `[target.socketio]` (and the app's `welcome` event named when it sends one).
    pub fn target(&self, options: &str) -> String {
        let urls: Vec<String> = self.nodes[1..]
            .iter()
            .map(|n| format!("\"{}\"", n.url()))
            .collect();
        let welcome = if self.welcomes {
            "welcome_event = \"welcome\"\n"
        } else {
            ""
        };
        format!(
            "[target]\ndriver = \"socketio\"\nurl = \"{}\"\nconnect_timeout = \"3s\"\n\n\
             [target.socketio]\nurls = [{}]\n{welcome}{options}\n",
            self.nodes[0].url(),
            urls.join(", ")
        )
    }

    /// The sum of a `/stats` counter over the live nodes.
    pub fn stat(&self, name: &str) -> u64 {
        self.nodes.iter().map(|n| n.stat(name)).sum()
    }
}

/// The cluster shared by the tests of this binary: Redis and two nodes behind the Redis
/// streams adapter, with connection state recovery (two minutes).
pub fn shared() -> &'static Cluster {
    static SHARED: OnceLock<Cluster> = OnceLock::new();
    SHARED.get_or_init(|| Cluster::start(2, "streams", &[]))
}
