//! Real XMPP servers for the XMPP tests: ejabberd and Prosody from their Debian packages.
//!
//! [`shared`] starts one server of each kind per test binary, on a free loopback port with
//! its data in a temp dir; tests keep apart on it by their own user and room name prefixes.
//! [`Server::start`] starts a private one with extra configuration (a small offline limit),
//! stopped on drop. Each server runs under a small shell watchdog that stops it and removes
//! its temp dir once the test process is gone, so a shared server never outlives the tests.
//! Their tests are ignored when a server is not installed (`cfg(peer_ejabberd)`,
//! `cfg(peer_prosody)`, see [`peers`](super::peers)).

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::detect::{self, ejabberd_libs};
use super::peers::missing;

/// The longest a server may take to start: a bound against a hang, not an estimate.
/// ejabberd boots an Erlang VM and Mnesia in about 2 s on a quiet machine and about 8 s
/// with two busy loops on its two cores.
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

/// Fails the test unless `kind` is installed.
fn require(kind: Kind) {
    let found = match kind {
        Kind::Ejabberd => ejabberd_libs().is_some(),
        Kind::Prosody => Path::new(detect::PROSODY).is_file(),
    };
    if !found {
        missing(kind.name());
    }
}

/// A free TCP port on 127.0.0.1.
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    l.local_addr().expect("local addr").port()
}

/// The shared server of `kind` for this test binary; a missing server fails the test.
pub fn shared(kind: Kind) -> &'static Server {
    static EJABBERD: OnceLock<Server> = OnceLock::new();
    static PROSODY: OnceLock<Server> = OnceLock::new();
    let cell = match kind {
        Kind::Ejabberd => &EJABBERD,
        Kind::Prosody => &PROSODY,
    };
    cell.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir").keep();
        Server::launch(kind, Setup::default(), dir, None)
    })
}

impl Server {
    /// A private server of `kind` with `extra` configuration (ejabberd: YAML lines inside
    /// `mod_offline`; Prosody: Lua lines in the global section). Stopped on drop.
    pub fn start(kind: Kind, extra: &str) -> Server {
        let temp = tempfile::tempdir().expect("temp dir");
        let dir = temp.path().to_path_buf();
        let setup = Setup {
            extra,
            ..Setup::default()
        };
        Server::launch(kind, setup, dir, Some(temp))
    }

    /// A private server of `kind` that archives every user's messages (MAM, XEP-0313).
    /// Not the shared one: with an archive, ejabberd drops the unacknowledged messages of
    /// a closing session instead of storing them offline, for clients to fetch from MAM.
    pub fn with_mam(kind: Kind) -> Server {
        let temp = tempfile::tempdir().expect("temp dir");
        let dir = temp.path().to_path_buf();
        let setup = Setup {
            mam: true,
            ..Setup::default()
        };
        Server::launch(kind, setup, dir, Some(temp))
    }

    /// A private server of `kind` whose MUC service is `service` (e.g. `rooms.localhost`)
    /// instead of `conference.localhost`.
    pub fn with_muc_service(kind: Kind, service: &str) -> Server {
        let temp = tempfile::tempdir().expect("temp dir");
        let dir = temp.path().to_path_buf();
        let setup = Setup {
            muc: service,
            ..Setup::default()
        };
        Server::launch(kind, setup, dir, Some(temp))
    }

    fn launch(
        kind: Kind,
        setup: Setup<'_>,
        dir: PathBuf,
        temp: Option<tempfile::TempDir>,
    ) -> Server {
        require(kind);
        let mut temp = temp;
        for _ in 0..PORT_ATTEMPTS {
            // Another process may take the free port before the server binds it: that
            // server exits at once, and the next attempt takes another port.
            match Server::spawn(kind, &setup, &dir, temp.take()) {
                Ok(server) => return server,
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
        setup: &Setup<'_>,
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
            Kind::Ejabberd => ejabberd(dir, port, setup),
            Kind::Prosody => prosody(dir, port, setup),
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

/// How a server is configured besides the defaults every test shares.
struct Setup<'a> {
    /// ejabberd: the YAML line of its offline limit; Prosody: Lua lines in the global
    /// section.
    extra: &'a str,
    /// Archive every user's messages (MAM).
    mam: bool,
    /// The MUC service's domain.
    muc: &'a str,
}

impl Default for Setup<'_> {
    fn default() -> Self {
        Setup {
            extra: "",
            mam: false,
            muc: "conference.localhost",
        }
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
/// enough ports and file descriptors for a few thousand connections. Message carbons
/// (XEP-0280) are on, for tests whose own client watches what a user sends.
///
/// Its schedulers sleep when idle instead of spinning (`+sbwt none` for the normal, dirty
/// CPU and dirty I/O ones). Spinning schedulers fight the other processes of a busy
/// machine for its two cores: with two busy loops running, ejabberd took 30–60 s to
/// listen with any of the three spinning and about 8 s with none, and in one loaded run
/// of the MAM test its send → ack p50 was 3.7 s instead of 8 ms.
fn ejabberd(dir: &Path, port: u16, setup: &Setup<'_>) -> String {
    let libs = ejabberd_libs().expect("ejabberd is installed");
    let (offline, muc) = (setup.extra, setup.muc);
    let mam = if setup.mam {
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
  mod_carboncopy: {{}}
  mod_ping: {{}}
  mod_roster: {{}}
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
    host: "{muc}"
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
/// session. Message carbons (XEP-0280) are on, as for ejabberd.
fn prosody(dir: &Path, port: u16, setup: &Setup<'_>) -> String {
    let d = dir.display();
    let (extra, muc) = (setup.extra, setup.muc);
    let mam = if setup.mam { " \"mam\";" } else { "" };
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
modules_enabled = {{ "disco"; "roster"; "saslauth"; "tls"; "register"; "ping"; "offline"; "smacks"; "carbons"; "posix";{mam} }}
{extra}
VirtualHost "localhost"
Component "{muc}" "muc"
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
pub fn passed(run: super::run::RunResult, server: &Server) -> msgstorm::artifact::Artifact {
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
/// reported lost (Prosody with two busy loops acknowledged sends 4 s late, after
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
    /// The start of a `<presence>` stanza to take out of what flows to the server, once.
    swallow: std::sync::Mutex<Option<Vec<u8>>>,
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

    /// Takes the next `<presence>` stanza starting with `start` out of what flows to the
    /// server, once: a presence the server lost.
    pub fn swallow_presence(&self, start: &str) {
        *self.state.swallow.lock().expect("proxy lock") = Some(start.as_bytes().to_vec());
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
        let whole = matches!(toward, Toward::Clients) || swallowed(state, &mut held);
        if hold.load(Ordering::SeqCst) || !whole {
            continue;
        }
        if to.write_all(&held).is_err() {
            break;
        }
        held.clear();
    }
    let _ = to.shutdown(std::net::Shutdown::Both);
}

/// Takes out of `data` the stanza the proxy is to swallow (`ProxyState::swallow`), if it
/// starts there; false while `data` may end in the middle of it (wait for more).
fn swallowed(state: &ProxyState, data: &mut Vec<u8>) -> bool {
    const END: &[u8] = b"</presence>";
    let mut swallow = state.swallow.lock().expect("proxy lock");
    let Some(start) = swallow.as_deref() else {
        return true;
    };
    let find = |hay: &[u8], needle: &[u8]| hay.windows(needle.len()).position(|w| w == needle);
    let Some(at) = find(data, start) else {
        // The stanza's start may be cut by the end of this read.
        return !(1..start.len()).any(|k| data.ends_with(&start[..k]));
    };
    let Some(len) = find(&data[at..], END) else {
        return false;
    };
    data.drain(at..at + len + END.len());
    *swallow = None;
    true
}

/// A second client of one user that sends again every chat message the user sends from
/// its other connection — a multi-device client with a retry bug: it logs in as the user
/// with a resource of its own (PLAIN over a plain stream, registering the account first),
/// enables message carbons (XEP-0280), and for every carbon of a chat message the user sent
/// sends the same body to the same recipient. For an offline recipient the server stores
/// both copies: a real duplicate, counted here.
pub struct Resender {
    /// The socket, shut down to stop the reader.
    socket: TcpStream,
    /// The reader: returns how many messages it sent again.
    reader: std::thread::JoinHandle<u64>,
}

impl Resender {
    /// Logs in to `server` as `user` (password `password`) and enables carbons; returns
    /// once the server has confirmed both, so nothing the user sends after is missed.
    pub fn start(server: &Server, user: &str, password: &str) -> Resender {
        use std::io::Write;
        let socket = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
        socket
            .set_read_timeout(Some(START_WAIT))
            .expect("read timeout");
        let mut out = socket.try_clone().expect("clone");
        let mut xml = XmlIn::new(socket.try_clone().expect("clone"));
        let header = "<?xml version='1.0'?><stream:stream to='localhost' \
                      xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams' \
                      version='1.0'>";
        let mut say = |s: &str| out.write_all(s.as_bytes()).expect("write");
        say(header);
        xml.until(|e| e.name == "features");
        say(&format!(
            "<iq type='set' id='reg'><query xmlns='jabber:iq:register'><username>{user}\
             </username><password>{password}</password></query></iq>"
        ));
        // A result, or `conflict`: the account exists. Either way it is there.
        xml.until(|e| e.name == "iq" && e.attr("id") == Some("reg"));
        use base64::Engine as _;
        let plain =
            base64::engine::general_purpose::STANDARD.encode(format!("\0{user}\0{password}"));
        say(&format!(
            "<auth xmlns='urn:ietf:params:xml:ns:xmpp-sasl' mechanism='PLAIN'>{plain}</auth>"
        ));
        let answer = xml.until(|e| e.name == "success" || e.name == "failure");
        assert_eq!(
            answer.name, "success",
            "{user} could not log in: {answer:?}"
        );
        say(header);
        xml.until(|e| e.name == "features");
        say(
            "<iq type='set' id='bind'><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'>\
             <resource>resender</resource></bind></iq>",
        );
        xml.until(|e| e.name == "iq" && e.attr("id") == Some("bind"));
        say("<iq type='set' id='cc'><enable xmlns='urn:xmpp:carbons:2'/></iq>");
        let enabled = xml.until(|e| e.name == "iq" && e.attr("id") == Some("cc"));
        assert_eq!(enabled.attr("type"), Some("result"), "carbons: {enabled:?}");
        // A negative priority: messages to the bare JID never come here.
        say("<presence><priority>-1</priority></presence>");
        socket.set_read_timeout(None).expect("read timeout");
        let reader = std::thread::spawn(move || {
            let mut again = 0;
            while let Some(e) = xml.next() {
                let sent = e
                    .child("sent")
                    .filter(|s| s.attr("xmlns") == Some("urn:xmpp:carbons:2"))
                    .and_then(|s| s.child("forwarded"))
                    .and_then(|f| f.child("message"));
                let Some(m) = sent.filter(|m| m.attr("type") == Some("chat")) else {
                    continue;
                };
                let (Some(to), Some(body)) = (m.attr("to"), m.child("body")) else {
                    continue;
                };
                let to = to.split('/').next().unwrap_or(to);
                let copy = format!(
                    "<message type='chat' to='{to}' id='again{again}'><body>{}</body></message>",
                    quick_xml::escape::escape(&body.text)
                );
                if out.write_all(copy.as_bytes()).is_err() {
                    break;
                }
                again += 1;
            }
            again
        });
        Resender { socket, reader }
    }

    /// Ends the stream (the server has had every copy before it reads the end) and returns
    /// how many messages were sent again.
    pub fn stop(self) -> u64 {
        use std::io::Write;
        let mut s = &self.socket;
        let _ = s.write_all(b"</stream:stream>");
        let _ = self.socket.shutdown(std::net::Shutdown::Both);
        self.reader.join().expect("the resender's reader")
    }
}

/// An element of the resender's stream: local name, attributes, children, text.
#[derive(Debug, Default)]
struct El {
    name: String,
    attrs: Vec<(String, String)>,
    children: Vec<El>,
    text: String,
}

impl El {
    fn attr(&self, key: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn child(&self, name: &str) -> Option<&El> {
        self.children.iter().find(|c| c.name == name)
    }
}

/// The server's side of a stream, cut into top-level elements (quick-xml).
struct XmlIn {
    reader: quick_xml::Reader<std::io::BufReader<TcpStream>>,
    buf: Vec<u8>,
}

impl XmlIn {
    fn new(socket: TcpStream) -> XmlIn {
        let mut reader = quick_xml::Reader::from_reader(std::io::BufReader::new(socket));
        let config = reader.config_mut();
        config.check_end_names = false;
        config.allow_unmatched_ends = true;
        XmlIn {
            reader,
            buf: Vec::new(),
        }
    }

    /// The next element under the stream's root; `None` when the stream or socket ends.
    fn next(&mut self) -> Option<El> {
        use quick_xml::events::{BytesStart, Event};
        let el = |s: &BytesStart<'_>| El {
            name: String::from_utf8_lossy(s.local_name().as_ref()).into_owned(),
            attrs: s
                .attributes()
                .flatten()
                .map(|a| {
                    let key = String::from_utf8_lossy(a.key.as_ref()).into_owned();
                    let value = a
                        .unescape_value()
                        .map(|v| v.into_owned())
                        .unwrap_or_default();
                    (key, value)
                })
                .collect(),
            ..El::default()
        };
        let mut stack: Vec<El> = Vec::new();
        loop {
            self.buf.clear();
            let done = match self.reader.read_event_into(&mut self.buf).ok()? {
                Event::Start(s) if s.name().as_ref() == b"stream:stream" => None,
                Event::Start(s) => {
                    stack.push(el(&s));
                    None
                }
                Event::Empty(s) => Some(el(&s)),
                Event::End(_) => stack.pop(),
                Event::Text(t) => {
                    if let Some(top) = stack.last_mut() {
                        top.text.push_str(&t.unescape().ok()?);
                    }
                    None
                }
                Event::Eof => return None,
                _ => None,
            };
            if let Some(done) = done {
                match stack.last_mut() {
                    Some(parent) => parent.children.push(done),
                    None => return Some(done),
                }
            }
        }
    }

    /// Skips to the first element that `wanted` says is the one, and returns it.
    fn until(&mut self, wanted: impl Fn(&El) -> bool) -> El {
        loop {
            let e = self.next().expect("the server ended the stream");
            if wanted(&e) {
                return e;
            }
        }
    }
}
