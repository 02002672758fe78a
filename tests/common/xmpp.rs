//! Real XMPP servers for the XMPP tests: ejabberd and Prosody from their Debian packages.
//!
//! [`shared`] starts one server of each kind per test binary, on a free loopback port with
//! its data in a temp dir; tests keep apart on it by their own user and room name prefixes.
//! [`Server::start`] starts a private one with extra configuration (a small offline limit),
//! stopped on drop. Each server runs under a small shell watchdog that stops it and removes
//! its temp dir once the test process is gone, so a shared server never outlives the tests.
//! When a server is not installed the tests skip with a printed note, except under
//! `CI=true`, where a missing server is a failure.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The longest a server may take to start: a bound against a hang, not an estimate.
/// ejabberd boots an Erlang VM and Mnesia in about 2 s on a quiet machine and about 8 s
/// with two busy loops on its two cores (issue 24).
const START_WAIT: Duration = Duration::from_secs(120);
/// Free ports tried before giving up on starting a server.
const PORT_ATTEMPTS: usize = 3;

/// Which server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// ejabberd (Erlang).
    Ejabberd,
    /// Prosody (Lua).
    Prosody,
}

impl Kind {
    /// Both servers, for tests that run against each.
    pub const ALL: [Kind; 2] = [Kind::Ejabberd, Kind::Prosody];

    fn name(self) -> &'static str {
        match self {
            Kind::Ejabberd => "ejabberd",
            Kind::Prosody => "prosody",
        }
    }
}

/// A running XMPP server on 127.0.0.1 with the domain `localhost`.
pub struct Server {
    /// Its c2s port on 127.0.0.1.
    pub port: u16,
    dir: PathBuf,
    watchdog: Child,
    /// Kept for a private server: removed on drop.
    _temp: Option<tempfile::TempDir>,
}

/// The ejabberd code directory's parent (`ERL_LIBS`), when ejabberd is installed.
fn ejabberd_libs() -> Option<PathBuf> {
    [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib/erlang/lib",
    ]
    .iter()
    .map(PathBuf::from)
    .find(|d| {
        std::fs::read_dir(d).is_ok_and(|mut it| {
            it.any(|e| e.is_ok_and(|e| e.file_name().to_string_lossy().starts_with("ejabberd-")))
        })
    })
    .filter(|_| Path::new("/usr/bin/erl").is_file())
}

/// Whether `kind` is installed; a printed note when not (a panic under `CI=true`).
fn installed(kind: Kind) -> bool {
    let found = match kind {
        Kind::Ejabberd => ejabberd_libs().is_some(),
        Kind::Prosody => Path::new("/usr/bin/prosody").is_file(),
    };
    if !found {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{} is not installed (CI=true requires it; scripts/test installs it)",
            kind.name()
        );
        skip_note(kind);
    }
    found
}

#[allow(clippy::print_stderr)]
fn skip_note(kind: Kind) {
    eprintln!(
        "note: skipping an XMPP test: {} is not installed",
        kind.name()
    );
}

/// A free TCP port on 127.0.0.1.
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    l.local_addr().expect("local addr").port()
}

/// The shared server of `kind` for this test binary (`None`: not installed).
pub fn shared(kind: Kind) -> Option<&'static Server> {
    static EJABBERD: OnceLock<Option<Server>> = OnceLock::new();
    static PROSODY: OnceLock<Option<Server>> = OnceLock::new();
    let cell = match kind {
        Kind::Ejabberd => &EJABBERD,
        Kind::Prosody => &PROSODY,
    };
    cell.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir").keep();
        Server::launch(kind, "", false, dir, None)
    })
    .as_ref()
}

impl Server {
    /// A private server of `kind` with `extra` configuration (ejabberd: YAML lines inside
    /// `mod_offline`; Prosody: Lua lines in the global section). Stopped on drop.
    pub fn start(kind: Kind, extra: &str) -> Option<Server> {
        let temp = tempfile::tempdir().expect("temp dir");
        let dir = temp.path().to_path_buf();
        Server::launch(kind, extra, false, dir, Some(temp))
    }

    /// A private server of `kind` that archives every user's messages (MAM, XEP-0313).
    /// Not the shared one: with an archive, ejabberd drops the unacknowledged messages of
    /// a closing session instead of storing them offline, for clients to fetch from MAM.
    pub fn with_mam(kind: Kind) -> Option<Server> {
        let temp = tempfile::tempdir().expect("temp dir");
        let dir = temp.path().to_path_buf();
        Server::launch(kind, "", true, dir, Some(temp))
    }

    fn launch(
        kind: Kind,
        extra: &str,
        mam: bool,
        dir: PathBuf,
        temp: Option<tempfile::TempDir>,
    ) -> Option<Server> {
        if !installed(kind) {
            return None;
        }
        let mut temp = temp;
        for _ in 0..PORT_ATTEMPTS {
            // Another process may take the free port before the server binds it: that
            // server exits at once, and the next attempt takes another port.
            match Server::spawn(kind, extra, mam, &dir, temp.take()) {
                Ok(server) => return Some(server),
                Err(t) => temp = t,
            }
        }
        panic!(
            "{} found its port taken {PORT_ATTEMPTS} times in a row",
            kind.name()
        );
    }

    /// Starts `kind` on a free port and waits until it answers a stream; `Err` (giving
    /// back the temp dir) when it exited because another process had taken the port.
    fn spawn(
        kind: Kind,
        extra: &str,
        mam: bool,
        dir: &Path,
        temp: Option<tempfile::TempDir>,
    ) -> Result<Server, Option<tempfile::TempDir>> {
        // What an earlier attempt left: its logs, data and exit mark.
        for file in ["server.out", "server.log", "server.exited"] {
            let _ = std::fs::remove_file(dir.join(file));
        }
        for data in ["spool", "data"] {
            let _ = std::fs::remove_dir_all(dir.join(data));
        }
        let port = free_port();
        let command = match kind {
            Kind::Ejabberd => ejabberd(dir, port, extra, mam),
            Kind::Prosody => prosody(dir, port, extra, mam),
        };
        // The watchdog: runs the server, stops it when this test process is gone, and
        // marks its end in `server.exited`. A shared server's directory is removed once
        // the test process is gone, by a shell of its own so that the log stays readable
        // meanwhile (a private one is removed by its TempDir).
        let parent = std::process::id();
        let cleanup = match temp {
            None => {
                format!("(while kill -0 {parent} 2>/dev/null; do sleep 1; done; rm -rf \"$D\") &")
            }
            Some(_) => String::new(),
        };
        let script = format!(
            "D='{}'; cd \"$D\" || exit 1; {command} > server.out 2>&1 & s=$!; \
             echo $s > server.pid; \
             while kill -0 {parent} 2>/dev/null && kill -0 $s 2>/dev/null; do sleep 0.5; done; \
             kill $s 2>/dev/null; wait $s; echo $? > server.exited; {cleanup}",
            dir.display(),
        );
        let watchdog = Command::new("sh")
            .arg("-c")
            .arg(script)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the server's watchdog shell");
        let mut server = Server {
            port,
            dir: dir.to_path_buf(),
            watchdog,
            _temp: temp,
        };
        // Answering a client's stream is the event waited for; the bound only guards
        // against a hang.
        let deadline = Instant::now() + START_WAIT;
        while !answers_xmpp(port) {
            let exited = std::fs::read_to_string(dir.join("server.exited"));
            if exited.is_ok() {
                // Gone: its pid may be another process's by now.
                let _ = std::fs::remove_file(dir.join("server.pid"));
            }
            let log = server.log();
            // ejabberd exits when its port is taken; Prosody logs it and runs on. Either
            // is stopped (on drop) and the next attempt uses the same directory.
            let taken = ["eaddrinuse", &format!("Failed to open server port {port}")];
            if taken.iter().any(|t| log.contains(t)) {
                return Err(server._temp.take());
            }
            if let Ok(status) = exited {
                panic!("{} exited (status {}): {log}", kind.name(), status.trim());
            }
            assert!(
                Instant::now() < deadline,
                "{} did not answer a stream within {START_WAIT:?}: {log}",
                kind.name(),
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(server)
    }

    /// `xmpp://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("xmpp://127.0.0.1:{}", self.port)
    }

    /// The server's output and log so far.
    pub fn log(&self) -> String {
        ["server.out", "server.log"]
            .iter()
            .filter_map(|f| std::fs::read_to_string(self.dir.join(f)).ok())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(self.dir.join("server.pid")) {
            let _ = Command::new("kill").arg(pid.trim()).status();
        }
        let _ = self.watchdog.wait();
    }
}

/// Whether an XMPP server on `port` answers a client's stream header with its stream
/// features: the server is ready for clients, not just listening (and not another process
/// holding a port the server failed to bind).
fn answers_xmpp(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut tcp) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let header = "<?xml version='1.0'?><stream:stream to='localhost' version='1.0' \
                  xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams'>";
    if tcp.write_all(header.as_bytes()).is_err() {
        return false;
    }
    // A read that blocks longer ends this try; the caller tries again until its deadline.
    let _ = tcp.set_read_timeout(Some(Duration::from_secs(5)));
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n @ 1..) = tcp.read(&mut buf) {
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got);
        if text.contains("</stream:features>") || text.contains("<stream:features/>") {
            let _ = tcp.write_all(b"</stream:stream>");
            return true;
        }
    }
    false
}

/// The shell command running ejabberd in `dir`: the Erlang VM directly (no `ejabberdctl`,
/// whose `su` to the ejabberd user and distributed node name do not suit a test), with
/// enough ports and file descriptors for a few thousand connections.
///
/// Its schedulers sleep when idle instead of spinning (`+sbwt none` for the normal, dirty
/// CPU and dirty I/O ones). Spinning schedulers fight the other processes of a busy
/// machine for its two cores: with two busy loops running, ejabberd took 30–60 s to
/// listen with any of the three spinning and about 8 s with none, and in one loaded run
/// of the MAM test its send → ack p50 was 3.7 s instead of 8 ms (issue 24).
fn ejabberd(dir: &Path, port: u16, offline: &str, mam: bool) -> String {
    let libs = ejabberd_libs().expect("ejabberd is installed");
    let mam = if mam {
        "  mod_mam:\n    default: always\n"
    } else {
        ""
    };
    let offline = match offline {
        "" => "max_user_offline_messages: 100000".to_owned(),
        extra => extra.to_owned(),
    };
    let config = format!(
        r#"hosts: ["localhost"]
loglevel: info
listen:
  -
    port: {port}
    ip: "127.0.0.1"
    module: ejabberd_c2s
    max_stanza_size: 1048576
    backlog: 4096
registration_timeout: infinity
access_rules:
  register:
    allow: all
shaper_rules:
  {offline}
  max_user_sessions: 10
modules:
  mod_disco: {{}}
  mod_ping: {{}}
  mod_register:
    access: register
    ip_access: all
  mod_offline:
    access_max_user_messages: max_user_offline_messages
  # Messages unacknowledged when a session ends go to offline storage, not back to
  # their sender as errors (ejabberd's default).
  mod_stream_mgmt:
    resend_on_timeout: if_offline
  mod_muc:
    host: "conference.@HOST@"
    access_create: all
    history_size: 20
    max_users: 10000
    max_users_presence: 10000
{mam}"#
    );
    std::fs::write(dir.join("ejabberd.yml"), config).expect("write ejabberd.yml");
    std::fs::create_dir_all(dir.join("spool")).expect("spool dir");
    format!(
        "ulimit -n $(ulimit -Hn); ERL_LIBS='{}' EJABBERD_CONFIG_PATH=\"$D/ejabberd.yml\" \
         EJABBERD_LOG_PATH=\"$D/server.log\" ERL_MAX_PORTS=65536 \
         erl -noinput -noshell +P 1000000 +sbwt none +sbwtdcpu none +sbwtdio none -mnesia dir '\"'\"$D/spool\"'\"' -s ejabberd",
        libs.display()
    )
}

/// The shell command running Prosody in `dir`, in the foreground, as whoever runs the
/// tests (root included). It logs at debug level: that is where it says it resumed a
/// session.
fn prosody(dir: &Path, port: u16, extra: &str, mam: bool) -> String {
    let d = dir.display();
    let mam = if mam { " \"mam\";" } else { "" };
    let config = format!(
        r#"run_as_root = true
pidfile = "{d}/prosody.pid"
data_path = "{d}/data"
log = {{ debug = "{d}/server.log"; }}
interfaces = {{ "127.0.0.1" }}
c2s_ports = {{ {port} }}
c2s_interfaces = {{ "127.0.0.1" }}
s2s_ports = {{}}
http_ports = {{}}
https_ports = {{}}
c2s_require_encryption = false
allow_unencrypted_plain_auth = true
allow_registration = true
min_seconds_between_registrations = 0
authentication = "internal_hashed"
storage = "internal"
limits = {{ c2s = {{ rate = "100mb/s"; }}; }}
modules_enabled = {{ "disco"; "roster"; "saslauth"; "tls"; "register"; "ping"; "offline"; "smacks"; "posix";{mam} }}
{extra}
VirtualHost "localhost"
Component "conference.localhost" "muc"
  muc_room_locking = false
  max_history_messages = 20
"#
    );
    std::fs::write(dir.join("prosody.cfg.lua"), config).expect("write prosody.cfg.lua");
    std::fs::create_dir_all(dir.join("data")).expect("data dir");
    "exec prosody -F --config \"$D/prosody.cfg.lua\"".to_owned()
}

/// The result of `run`, which must have passed (exit 0; the report, errors and the
/// server's log otherwise).
pub fn passed(run: super::mosquitto::RunResult, server: &Server) -> msgstorm::artifact::Artifact {
    assert_eq!(
        run.code,
        0,
        "{}{}\n{}",
        run.stdout,
        run.stderr,
        server.log()
    );
    run.artifact.expect("result.json")
}

/// A scenario against `server`: users `{prefix}-{user}` (registered in band), rooms
/// `{prefix}-{group}`, `xmpp` more `[target.xmpp]` lines, then `rest` (population,
/// traffic, checks).
///
/// The drain is long: it ends as soon as every send is acknowledged and every delivery
/// in, but a server that lags further behind than the drain has its last messages
/// reported lost (issue 24: Prosody with two busy loops acknowledged sends 4 s late, after
/// a 3 s drain, and pushed them after their recipients' final verification).
pub fn scenario(server: &Server, prefix: &str, xmpp: &str, rest: &str) -> String {
    format!(
        r#"name = "xmpp-{prefix}"
drain = "{DRAIN}"

[target]
driver = "xmpp"
url = "{url}"
connect_timeout = "20s"

[target.auth]
username = "{prefix}-{{user}}"
password = "pw-{{user}}"

[target.xmpp]
domain = "localhost"
register = true
room = "{prefix}-{{group}}"
{xmpp}

{rest}
"#,
        url = server.url()
    )
}

/// The drain of [`scenario`].
pub const DRAIN: &str = "15s";

/// A TCP proxy in front of a server that can cut every connection through it at once,
/// without a clean close on either side: the network failing under a chat client.
pub struct CutProxy {
    /// Its port on 127.0.0.1.
    pub port: u16,
    state: std::sync::Arc<ProxyState>,
}

#[derive(Default)]
struct ProxyState {
    /// Both sockets of every live connection.
    live: std::sync::Mutex<Vec<(std::net::TcpStream, std::net::TcpStream)>>,
    /// Holding back what flows to the server / to the clients (kept in the proxy, and
    /// lost if the connection is cut meanwhile).
    hold: [std::sync::atomic::AtomicBool; 2],
    /// `<message` stanzas that reached the proxy on their way to the server / to the
    /// clients (held ones included).
    messages: [std::sync::atomic::AtomicUsize; 2],
}

/// A direction of the proxy's traffic.
#[derive(Debug, Clone, Copy)]
pub enum Toward {
    /// Client to server.
    Server = 0,
    /// Server to client.
    Clients = 1,
}

impl CutProxy {
    /// A proxy to `127.0.0.1:upstream`; it runs until the test process ends.
    pub fn start(upstream: u16) -> CutProxy {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let port = listener.local_addr().expect("proxy addr").port();
        let state = std::sync::Arc::new(ProxyState::default());
        let shared = state.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(server) = std::net::TcpStream::connect(("127.0.0.1", upstream)) else {
                    continue;
                };
                let pipes = (client.try_clone(), server.try_clone());
                let (Ok(c2), Ok(s2)) = pipes else { continue };
                let (Ok(c3), Ok(s3)) = (client.try_clone(), server.try_clone()) else {
                    continue;
                };
                shared.live.lock().expect("proxy lock").push((c3, s3));
                let (up, down) = (shared.clone(), shared.clone());
                std::thread::spawn(move || pipe(client, s2, &up, Toward::Server));
                std::thread::spawn(move || pipe(server, c2, &down, Toward::Clients));
            }
        });
        CutProxy { port, state }
    }

    /// `<message` stanzas that have reached the proxy flowing `toward` one side.
    pub fn messages(&self, toward: Toward) -> usize {
        self.state.messages[toward as usize].load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Waits until `n` more `<message` stanzas flowed `toward` one side (false when
    /// `deadline` came first).
    pub fn wait_messages(&self, toward: Toward, n: usize, deadline: Instant) -> bool {
        let target = self.messages(toward) + n;
        while self.messages(toward) < target {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        true
    }

    /// Stops passing on what flows `toward` one side: it stays in the proxy until the
    /// connections are cut, the network swallowing it.
    pub fn hold(&self, toward: Toward) {
        self.state.hold[toward as usize].store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Cuts every live connection; returns how many.
    pub fn cut_all(&self) -> usize {
        let live = std::mem::take(&mut *self.state.live.lock().expect("proxy lock"));
        for (c, s) in &live {
            let _ = c.shutdown(std::net::Shutdown::Both);
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
        for h in &self.state.hold {
            h.store(false, std::sync::atomic::Ordering::SeqCst);
        }
        live.len()
    }
}

/// Copies `from` to `to` (flowing `toward` one side) until either side ends, counting the
/// `<message` stanzas; while that direction is held, what it read stays here (dropped
/// when the connection is cut meanwhile).
fn pipe(
    mut from: std::net::TcpStream,
    mut to: std::net::TcpStream,
    state: &ProxyState,
    toward: Toward,
) {
    use std::io::{Read, Write};
    use std::sync::atomic::Ordering;
    const TAG: &[u8] = b"<message";
    let (hold, messages) = (
        &state.hold[toward as usize],
        &state.messages[toward as usize],
    );
    let mut buf = vec![0u8; 64 * 1024];
    let mut held = Vec::new();
    // The end of the previous read, for a tag split between two reads.
    let mut tail = Vec::new();
    while let Ok(n @ 1..) = from.read(&mut buf) {
        tail.extend_from_slice(&buf[..n]);
        let found = tail.windows(TAG.len()).filter(|w| *w == TAG).count();
        messages.fetch_add(found, Ordering::SeqCst);
        tail.drain(..tail.len().saturating_sub(TAG.len() - 1));
        held.extend_from_slice(&buf[..n]);
        if hold.load(Ordering::SeqCst) {
            continue;
        }
        if to.write_all(&held).is_err() {
            break;
        }
        held.clear();
    }
    let _ = to.shutdown(std::net::Shutdown::Both);
}
