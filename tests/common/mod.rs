//! Shared fixture of the integration tests.
//!
//! - [`start`] runs `serve` in this process on a free loopback port ([`msgstorm::serve::spawn`]).
//! - [`Client`] is a small WebSocket client of the native protocol: it logs in, sends
//!   [`wire`](msgstorm::wire) frames and waits for replies. Every wait is bounded by
//!   [`WAIT`] and panics with a description when nothing comes, so a test never hangs.
//! - [`ChildServer`] runs the real `msgstorm serve` binary as a child process (for
//!   SIGKILL/SIGTERM tests and memory measurement) and kills it on drop.
//! - [`http_get`] fetches a plain HTTP page such as `/metrics`.
//! - [`peers`] finds the real peers ([`detect`]: the same lookups as `build.rs`, which marks
//!   the tests of a missing peer ignored).
//! - [`mosquitto`] runs a real mosquitto broker for the MQTT tests.
//! - [`xmpp`] runs real ejabberd and Prosody servers for the XMPP tests.
//! - [`socketio`] runs the Socket.IO chat app (two nodes + Redis) for the socketio tests.
//! - [`proxy`] stands between msgstorm and a real peer, to close every connection or send
//!   garbage on cue (the conformance suite).

#[cfg(feature = "tls")]
pub mod certs;
// Shared with build.rs, which uses all of it; each fixture uses its part.
#[allow(dead_code)]
pub mod detect;
#[cfg(feature = "mqtt")]
pub mod mosquitto;
#[cfg(feature = "tls")]
pub mod nginx;
pub mod peers;
pub mod proxy;
#[cfg(feature = "socketio")]
pub mod socketio;
#[cfg(feature = "xmpp")]
pub mod xmpp;

use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use msgstorm::driver::{Auth, Config, Connected, Driver, Endpoint, Resume, UserCtx};
use msgstorm::serve::{self, ServeConfig, ServerHandle};
use msgstorm::wire::{ClientFrame, ConvId, Dest, Msg, Ref, ServerFrame, PROTOCOL_VERSION};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// The longest any single wait in a test may take.
pub const WAIT: Duration = Duration::from_secs(5);

/// The secret tests give servers they start, so tokens can be computed up front.
pub const SECRET: &str = "test-secret";

/// A config for an in-process test server with the test secret (other fields default).
pub fn config() -> ServeConfig {
    ServeConfig {
        secret: Some(SECRET.to_owned()),
        ..ServeConfig::default()
    }
}

/// Starts an in-process server with `config` on a free loopback port.
pub async fn start(config: ServeConfig) -> ServerHandle {
    serve::spawn(config).await.expect("the test server starts")
}

/// A driver `D` for `server`, with `options` as its `[target.<name>]`.
pub fn driver<D: Driver>(server: &ServerHandle, options: toml::Table) -> D {
    let spec = &D::SPEC;
    D::new(&Config {
        spec,
        endpoint: Some(Endpoint::parse(&server.ws_url(), spec).expect("url")),
        auth: Auth::Secret(server.secret().to_owned()),
        connect_timeout: WAIT,
        heartbeat: None,
        source_addrs: Vec::new(),
        max_body: 1000,
        run_id: 1,
        kinds: vec!["direct"],
        options,
        dir: Default::default(),
        directory: None,
        relay: None,
        wires: Default::default(),
    })
    .expect("driver")
}

/// Logs `user` in through `driver`, remembering `resume`.
pub async fn connect<D: Driver>(driver: &D, user: &UserCtx, resume: Resume<D>) -> D::Session {
    match driver.connect(user, resume).await {
        Ok(Connected { session, .. }) => session,
        Err((f, _)) => panic!("{} cannot log in: {f:?}", user.id),
    }
}

/// What ended a connection, as seen by the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// A close frame with this code arrived (or the stream ended: code 0).
    Closed(u16),
}

/// A WebSocket client of the native protocol.
pub struct Client {
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
    /// The user it logged in as (empty before login).
    pub user: String,
    next_ref: Ref,
    /// Frames received while waiting for something else, oldest first.
    pub backlog: VecDeque<ServerFrame>,
}

impl Client {
    /// Opens a WebSocket to `url` without logging in.
    pub async fn connect(url: &str) -> Client {
        let (ws, _) = tokio::time::timeout(WAIT, tokio_tungstenite::connect_async(url))
            .await
            .expect("connect within WAIT")
            .expect("WebSocket handshake");
        Client {
            ws,
            user: String::new(),
            next_ref: 1,
            backlog: VecDeque::new(),
        }
    }

    /// Connects and logs in as `user` with a valid token of `secret`; panics unless welcomed.
    pub async fn login(url: &str, user: &str, secret: &str) -> Client {
        let mut c = Client::connect(url).await;
        c.send(&ClientFrame::Login {
            v: PROTOCOL_VERSION,
            user: user.to_owned(),
            token: serve::token(user, secret),
        })
        .await;
        match c.recv().await {
            ServerFrame::Welcome { user: u, .. } => assert_eq!(u, user),
            other => panic!("expected welcome for {user}, got {other:?}"),
        }
        c.user = user.to_owned();
        c
    }

    /// Sends a frame.
    pub async fn send(&mut self, frame: &ClientFrame) {
        let text = serde_json::to_string(frame).expect("client frames serialize");
        self.send_raw(Message::text(text)).await;
    }

    /// Sends any WebSocket message (text that is not a valid frame, binary, …).
    pub async fn send_raw(&mut self, msg: Message) {
        tokio::time::timeout(WAIT, self.ws.send(msg))
            .await
            .expect("send within WAIT")
            .expect("send succeeds");
    }

    /// A fresh request reference.
    pub fn next_ref(&mut self) -> Ref {
        self.next_ref += 1;
        self.next_ref
    }

    /// The next frame from the server (the backlog first); panics after [`WAIT`] or on close.
    pub async fn recv(&mut self) -> ServerFrame {
        if let Some(f) = self.backlog.pop_front() {
            return f;
        }
        match self.recv_within(WAIT).await {
            Ok(Some(f)) => f,
            Ok(None) => panic!("{}: nothing received within {WAIT:?}", self.user),
            Err(end) => panic!("{}: connection ended ({end:?}) while waiting", self.user),
        }
    }

    /// The next frame from the socket (ignoring the backlog) within `wait`: `Ok(None)` when
    /// nothing came, `Err` when the connection ended.
    pub async fn recv_within(&mut self, wait: Duration) -> Result<Option<ServerFrame>, Ended> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let next = tokio::time::timeout_at(deadline, self.ws.next()).await;
            let msg = match next {
                Err(_) => return Ok(None),
                Ok(None) | Ok(Some(Err(_))) => return Err(Ended::Closed(0)),
                Ok(Some(Ok(m))) => m,
            };
            match msg {
                Message::Text(t) => {
                    let f = serde_json::from_str(t.as_str())
                        .unwrap_or_else(|e| panic!("server sent a bad frame {t}: {e}"));
                    return Ok(Some(f));
                }
                Message::Close(c) => return Err(Ended::Closed(c.map_or(0, |c| c.code.into()))),
                _ => continue,
            }
        }
    }

    /// Waits for the frame that `pick` accepts, keeping the others in the backlog.
    pub async fn wait_for<T>(&mut self, mut pick: impl FnMut(&ServerFrame) -> Option<T>) -> T {
        if let Some(i) = self.backlog.iter().position(|f| pick(f).is_some()) {
            let f = self.backlog.remove(i).expect("index from position");
            return pick(&f).expect("picked before");
        }
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.recv_within(left).await {
                Ok(Some(f)) => match pick(&f) {
                    Some(t) => return t,
                    None => self.backlog.push_back(f),
                },
                Ok(None) => panic!(
                    "{}: awaited frame not received within {WAIT:?}; backlog {:?}",
                    self.user, self.backlog
                ),
                Err(end) => panic!(
                    "{}: connection ended ({end:?}); backlog {:?}",
                    self.user, self.backlog
                ),
            }
        }
    }

    /// Sends a request built from a fresh ref and returns the reply carrying that ref
    /// (an `error` reply included); other frames go to the backlog.
    pub async fn request(&mut self, build: impl FnOnce(Ref) -> ClientFrame) -> ServerFrame {
        let r = self.next_ref();
        self.send(&build(r)).await;
        self.wait_for(|f| (reply_ref(f) == Some(r)).then(|| f.clone()))
            .await
    }

    /// Sends a message and waits for its ack; returns (conversation, seq).
    pub async fn send_msg(&mut self, to: Dest, body: &str) -> (ConvId, u64) {
        let body = body.to_owned();
        match self
            .request(|r| ClientFrame::Send { r#ref: r, to, body })
            .await
        {
            ServerFrame::Ack { conv, seq, .. } => (conv, seq),
            other => panic!("{}: expected ack, got {other:?}", self.user),
        }
    }

    /// Sends a message to a user and waits for the ack.
    pub async fn send_to(&mut self, user: &str, body: &str) -> (ConvId, u64) {
        self.send_msg(Dest::User(user.to_owned()), body).await
    }

    /// Sends `bodies` to `to` pipelined (at most `window` unacknowledged); returns the acks'
    /// seqs in send order.
    pub async fn send_many(&mut self, to: &Dest, bodies: &[String], window: usize) -> Vec<u64> {
        let mut seqs = Vec::with_capacity(bodies.len());
        let first = self.next_ref + 1;
        for chunk in bodies.chunks(window.max(1)) {
            for body in chunk {
                let r = self.next_ref();
                self.send(&ClientFrame::Send {
                    r#ref: r,
                    to: to.clone(),
                    body: body.clone(),
                })
                .await;
            }
            for _ in chunk {
                let (r, seq) = self
                    .wait_for(|f| match f {
                        ServerFrame::Ack { r#ref, seq, .. } => Some((*r#ref, *seq)),
                        ServerFrame::Error { r#ref: Some(_), .. } => panic!("send refused: {f:?}"),
                        _ => None,
                    })
                    .await;
                assert_eq!(
                    usize::try_from(r - first).expect("small"),
                    seqs.len(),
                    "acks in order"
                );
                seqs.push(seq);
            }
        }
        seqs
    }

    /// Runs a group request (create/join/leave) and asserts it succeeded.
    pub async fn group(&mut self, build: impl FnOnce(Ref, String) -> ClientFrame, group: &str) {
        let g = group.to_owned();
        let reply = self.request(|r| build(r, g)).await;
        assert!(
            matches!(reply, ServerFrame::Ok { .. }),
            "{}: group op: {reply:?}",
            self.user
        );
    }

    /// The next pushed message (other frames go to the backlog).
    pub async fn next_msg(&mut self) -> Msg {
        self.wait_for(|f| match f {
            ServerFrame::Msg(m) => Some(m.clone()),
            _ => None,
        })
        .await
    }

    /// Every pushed message that arrives within `wait` (other frames go to the backlog).
    pub async fn msgs_within(&mut self, wait: Duration) -> Vec<Msg> {
        let mut out = Vec::new();
        let mut rest = VecDeque::new();
        while let Some(f) = self.backlog.pop_front() {
            match f {
                ServerFrame::Msg(m) => out.push(m),
                other => rest.push_back(other),
            }
        }
        self.backlog = rest;
        let deadline = Instant::now() + wait;
        while let Ok(Some(f)) = self
            .recv_within(deadline.saturating_duration_since(Instant::now()))
            .await
        {
            match f {
                ServerFrame::Msg(m) => out.push(m),
                other => self.backlog.push_back(other),
            }
        }
        out
    }

    /// All messages of `conv` after `after`, following pages until `more` is false.
    pub async fn sync_all(&mut self, conv: &str, after: u64) -> Vec<Msg> {
        let mut out: Vec<Msg> = Vec::new();
        let mut after = after;
        loop {
            let c = conv.to_owned();
            match self
                .request(|r| ClientFrame::Sync {
                    r#ref: r,
                    conv: c,
                    after,
                    limit: 0,
                })
                .await
            {
                ServerFrame::SyncPage { msgs, more, .. } => {
                    after = msgs.last().map_or(after, |m| m.seq);
                    out.extend(msgs);
                    if !more {
                        return out;
                    }
                }
                other => panic!("{}: sync of {conv}: {other:?}", self.user),
            }
        }
    }

    /// Waits for a fatal error frame and the close after it; returns the error's code.
    pub async fn expect_fatal(&mut self) -> msgstorm::wire::ErrorCode {
        let code = self
            .wait_for(|f| match f {
                ServerFrame::Error {
                    code, fatal: true, ..
                } => Some(*code),
                _ => None,
            })
            .await;
        self.expect_closed().await;
        code
    }

    /// Waits until the server closes the connection (frames before that are dropped).
    pub async fn expect_closed(&mut self) {
        let deadline = Instant::now() + WAIT;
        loop {
            match self
                .recv_within(deadline.saturating_duration_since(Instant::now()))
                .await
            {
                Err(_) => return,
                Ok(Some(_)) => continue,
                Ok(None) => panic!("{}: connection still open after {WAIT:?}", self.user),
            }
        }
    }
}

/// The `ref` a server frame answers, if any.
pub fn reply_ref(f: &ServerFrame) -> Option<Ref> {
    match f {
        ServerFrame::Ack { r#ref, .. }
        | ServerFrame::Ok { r#ref }
        | ServerFrame::ConvList { r#ref, .. }
        | ServerFrame::SyncPage { r#ref, .. }
        | ServerFrame::TimeReply { r#ref, .. }
        | ServerFrame::KvValue { r#ref, .. } => Some(*r#ref),
        ServerFrame::ReceiptPage(p) => Some(p.r#ref),
        ServerFrame::Error { r#ref, .. } => *r#ref,
        ServerFrame::Welcome { .. }
        | ServerFrame::Msg(_)
        | ServerFrame::Pong { .. }
        | ServerFrame::Presence(_)
        | ServerFrame::Typing(_)
        | ServerFrame::Receipt(_) => None,
    }
}

/// `n` distinct bodies `prefix-0`, `prefix-1`, …
pub fn bodies(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

/// GETs `path` from `addr` over plain HTTP/1.0 and returns the body.
pub async fn http_get(addr: SocketAddr, path: &str) -> String {
    let fetch = async {
        let mut s = TcpStream::connect(addr).await.expect("connect for HTTP");
        let req = format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n");
        s.write_all(req.as_bytes()).await.expect("write request");
        let mut buf = String::new();
        s.read_to_string(&mut buf).await.expect("read response");
        buf
    };
    let resp = tokio::time::timeout(WAIT, fetch)
        .await
        .expect("HTTP within WAIT");
    let (head, body) = resp.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(
        head.starts_with("HTTP/1.") && head.contains(" 200 "),
        "{head}"
    );
    body.to_owned()
}

/// The value of a Prometheus series line `name value` (exact name with labels), if present.
pub fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

/// Waits until `series` of `server`'s metrics reads `value` (panics after [`WAIT`]).
pub async fn wait_metric(server: &ServerHandle, series: &str, value: f64) {
    let deadline = Instant::now() + WAIT;
    loop {
        let text = http_get(server.addr(), "/metrics").await;
        if metric(&text, series) == Some(value) {
            return;
        }
        assert!(Instant::now() < deadline, "{series} never {value}: {text}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The real `msgstorm serve` binary running as a child process; killed on drop.
pub struct ChildServer {
    child: std::process::Child,
    /// Its store when the test gives no `--data`: removed with the server, which a killed
    /// server cannot do for its own temporary store.
    _data: Option<tempfile::TempDir>,
    /// Its listen address.
    pub addr: SocketAddr,
    /// Its stderr lines so far.
    pub log: Arc<Mutex<Vec<String>>>,
}

impl ChildServer {
    /// Starts `msgstorm serve --listen 127.0.0.1:0 --secret SECRET` plus `args`; returns once
    /// it logged its listen address (panics after [`WAIT`]).
    pub fn start(args: &[&str]) -> ChildServer {
        let data = (!args.contains(&"--data"))
            .then(|| tempfile::tempdir().expect("a temporary store for the server"));
        let mut command = Command::new(env!("CARGO_BIN_EXE_msgstorm"));
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--secret", SECRET])
            .args(args);
        if let Some(dir) = &data {
            command.arg("--data").arg(dir.path());
        }
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start msgstorm serve");
        let stderr = child.stderr.take().expect("piped stderr");
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let lines = Arc::clone(&log);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(rest) = line.split("listening on ws://").nth(1) {
                    let addr = rest.split('/').next().unwrap_or_default().to_owned();
                    let _ = tx.send(addr);
                }
                lines.lock().expect("log lock").push(line);
            }
        });
        let addr = match rx.recv_timeout(WAIT) {
            Ok(a) => a.parse().expect("a socket address in the log"),
            Err(_) => {
                let _ = child.kill();
                panic!("server did not start: {:?}", log.lock().expect("log lock"));
            }
        };
        ChildServer {
            child,
            _data: data,
            addr,
            log,
        }
    }

    /// Its WebSocket URL.
    pub fn ws_url(&self) -> String {
        format!("ws://{}/ws", self.addr)
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends a signal (`KILL`, `TERM`, …) with the `kill` command.
    pub fn signal(&self, name: &str) {
        let ok = Command::new("kill")
            .args([format!("-{name}"), self.pid().to_string()])
            .status()
            .expect("run kill");
        assert!(ok.success(), "kill -{name} failed");
    }

    /// Waits (at most [`WAIT`]) for the process to exit.
    pub fn wait_exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "server did not exit within {WAIT:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Resident memory of the process in KiB (from `/proc/PID/status`).
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .expect("read /proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS in /proc status")
    }
}

impl Drop for ChildServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads a JSONL fault log into JSON values.
pub fn fault_log(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per fault-log line"))
        .collect()
}

pub mod run;

/// Panics unless `frame` is an error frame with `code`; returns whether it was fatal.
#[track_caller]
pub fn expect_error(frame: &ServerFrame, code: msgstorm::wire::ErrorCode) -> bool {
    match frame {
        ServerFrame::Error { code: c, fatal, .. } if *c == code => *fatal,
        other => panic!("expected error {code:?}, got {other:?}"),
    }
}
