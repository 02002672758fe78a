//! The reference IM server (`msgstorm serve`): a small, real IM server that is the default
//! target of a run, the yardstick for the generator, and the home of fault injection.
//!
//! # Layout
//!
//! ```text
//! client ─ws─▶ gateway ─▶ session ──send/group──▶ writer (one thread, group commit) ─▶ SQLite
//!                 │          │  ▲                    │ after commit: ack + push
//!                 │          │  └──── outbox ◀── hub ◀┘ (faults between commit and push)
//!                 │          ├── convs/sync ─▶ store readers (a fixed few threads)
//!                 │          └── time / kv_get ─▶ rpc worker pool
//!                 └─ /metrics ◀─ metrics
//! ```
//!
//! - [`config`]: options; [`auth`]: tokens; [`guard`]: handshake timeout and the cap on
//!   connections not logged in; [`gateway`]: HTTP routes and shared state;
//!   [`session`]: one connection; [`outbox`]: its bounded outbound queue; [`hub`]: who is
//!   online and pushing; [`writer`]: the committing thread; [`store`]: schema and reads;
//!   [`rpc`]: `time` and `kv_get`; [`signals`]: contacts, presence, typing and read
//!   receipts; [`roster`]: who follows whose presence; [`faults`]: push fault injection;
//!   [`metrics`]: Prometheus.
//!
//! The protocol is [`crate::wire`]; `docs/protocol.md` documents it with examples.

pub mod auth;
pub mod config;
pub mod echo;
pub mod faults;
pub mod gateway;
pub mod guard;
pub mod hub;
pub mod metrics;
pub mod outbox;
pub mod roster;
pub mod rpc;
pub mod session;
pub mod signals;
pub mod store;
pub mod writer;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};

pub use config::{Durability, GroupPolicy, SeqScope, ServeArgs, ServeConfig};

use crate::error::{Error, Result};
use faults::Faults;
use gateway::Shared;
use hub::Hub;
use metrics::Metrics;
use roster::Roster;
use rpc::KvPool;
use store::Readers;
use writer::{Cmd, Writer};

/// Commands the writer's queue holds before senders wait.
const WRITER_QUEUE: usize = 65_536;
/// How long shutdown waits for connections to close.
const CLOSE_WAIT: Duration = Duration::from_secs(5);
/// A reorder-held push is sent anyway after this long.
const REORDER_HOLD: Duration = Duration::from_millis(50);

pub use crate::wire::token;

/// A server started, not yet serving: its state, writer thread and temporary store.
struct Prepared {
    shared: Arc<Shared>,
    writer: std::thread::JoinHandle<()>,
    _temp: Option<tempfile::TempDir>,
}

fn prepare(mut config: ServeConfig) -> Result<Prepared> {
    let secret = config.secret.take().unwrap_or_else(auth::generate_secret);
    let (dir, temp) = match &config.data {
        Some(dir) => {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
            (dir.clone(), None)
        }
        None => {
            let t = tempfile::Builder::new()
                .prefix("msgstorm-serve-")
                .tempdir()
                .map_err(|e| Error::io(std::env::temp_dir(), e))?;
            (t.path().to_path_buf(), Some(t))
        }
    };
    let path = store::db_path(&dir);
    let metrics = Arc::new(Metrics::new());
    let faults = Faults::new(
        config.faults.clone(),
        &config.fault_users,
        config.fault_seed,
        config.fault_log.as_deref(),
    )?;
    let hub = Arc::new(Hub::new(
        faults,
        metrics.clone(),
        tokio::runtime::Handle::current(),
    ));
    let conn = store::open_writer(&path, config.durability)?;
    let roster = Arc::new(Roster::new(store::load_contacts(&conn)?));
    let writer = Writer::new(
        conn,
        hub.clone(),
        roster.clone(),
        metrics.clone(),
        config.batch_max,
        config.groups,
        config.seqs,
    )?;
    let readers = Readers::start(&path, store::READERS)?;
    let (tx, rx) = mpsc::channel(WRITER_QUEUE);
    let writer = std::thread::Builder::new()
        .name("msgstorm-writer".into())
        .spawn(move || writer.run(rx))
        .map_err(|e| Error::Server(format!("cannot start the writer thread: {e}")))?;
    let kv = KvPool::start(
        config.workers,
        config.kv_queue,
        config.backend_latency,
        metrics.clone(),
    );
    let shared = Arc::new(Shared {
        secret,
        metrics,
        hub,
        roster,
        writer: tx,
        readers,
        kv,
        next_conn: AtomicU64::new(1),
        open: AtomicUsize::new(0),
        stopping: AtomicBool::new(false),
        config,
    });
    Ok(Prepared {
        shared,
        writer,
        _temp: temp,
    })
}

async fn serve_prepared(
    listener: TcpListener,
    prepared: Prepared,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let Prepared {
        shared,
        writer,
        _temp,
    } = prepared;
    let addr = listener.local_addr().ok();
    let reorder_timer = shared.hub.reorders().then(|| {
        let hub = shared.hub.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(REORDER_HOLD / 5).await;
                hub.release_held(REORDER_HOLD);
            }
        })
    });
    let stopper = shared.clone();
    let signal = async move {
        shutdown.await;
        let open = stopper.begin_stop();
        tracing::info!("shutting down: closing {open} connections");
    };
    let gate = guard::Gate::new(
        shared.config.unauthenticated_cap(),
        shared.config.handshake_timeout,
        shared.metrics.clone(),
    );
    let listener = guard::GatedListener::new(listener, gate);
    let app = gateway::router(shared.clone()).into_make_service_with_connect_info::<guard::Pass>();
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(signal)
        .await;
    shared.begin_stop();
    let deadline = tokio::time::Instant::now() + CLOSE_WAIT;
    while shared.hub.conn_count() > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    if let Some(t) = reorder_timer {
        t.abort();
    }
    shared.hub.release_held(Duration::ZERO);
    let _ = shared.writer.send(Cmd::Stop).await;
    tokio::task::spawn_blocking(move || writer.join())
        .await
        .map_err(|e| Error::Server(format!("writer join failed: {e}")))?
        .map_err(|_| Error::Server("the writer thread panicked".into()))?;
    tracing::info!(?addr, "stopped; every acknowledged message is committed");
    served.map_err(|e| Error::Server(format!("serving failed: {e}")))
}

/// Serves on `listener` until `shutdown` resolves; then stops accepting, closes every
/// connection with `shutting_down`, commits what the writer holds and returns.
pub async fn run(
    listener: TcpListener,
    config: ServeConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let prepared = prepare(config)?;
    serve_prepared(listener, prepared, shutdown).await
}

/// A server running in this process (see [`spawn`]); dropping it shuts the server down
/// in the background, [`ServerHandle::shutdown`] waits for that.
#[derive(Debug)]
pub struct ServerHandle {
    addr: SocketAddr,
    secret: String,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<()>>,
}

impl ServerHandle {
    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The WebSocket URL, `ws://ADDR/ws`.
    pub fn ws_url(&self) -> String {
        format!("ws://{}/ws", self.addr)
    }

    /// The URL of the `/echo` endpoint.
    pub fn echo_url(&self) -> String {
        format!("ws://{}/echo", self.addr)
    }

    /// The token secret (given or generated).
    pub fn secret(&self) -> &str {
        &self.secret
    }

    /// The login token of `user` on this server.
    pub fn token(&self, user: &str) -> String {
        token(user, &self.secret)
    }

    /// Shuts the server down gracefully and waits until it stopped.
    pub async fn shutdown(mut self) -> Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        (&mut self.task)
            .await
            .map_err(|e| Error::Server(format!("server task failed: {e}")))?
    }
}

/// Pending connections the listening socket holds (the kernel caps it at
/// `net.core.somaxconn`, 4,096 by default): a connection storm waits there while the
/// guard admits clients as fast as they log in, rather than overflowing tokio's default
/// of 1,024 into SYN retries a second or more later.
const LISTEN_BACKLOG: u32 = 65_535;

/// A listening socket on `at` with [`LISTEN_BACKLOG`] (and `SO_REUSEADDR`, as
/// `TcpListener::bind` sets).
fn listen(at: std::net::SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if at.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(at)?;
    socket.listen(LISTEN_BACKLOG)
}

/// Binds the listening socket and learns its address (the port when 0 was asked for).
async fn bind(at: std::net::SocketAddr) -> Result<(TcpListener, std::net::SocketAddr)> {
    let listener = listen(at).map_err(|e| Error::Server(format!("cannot listen on {at}: {e}")))?;
    let addr = listener
        .local_addr()
        .map_err(|e| Error::Server(format!("no local address: {e}")))?;
    Ok((listener, addr))
}

/// Starts a server in this process on `config.listen` (port 0 = a free port) and returns
/// once it accepts connections. With no `config.data` it uses a temporary store.
pub async fn spawn(config: ServeConfig) -> Result<ServerHandle> {
    let (listener, addr) = bind(config.listen).await?;
    let prepared = prepare(config)?;
    let secret = prepared.shared.secret.clone();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(serve_prepared(listener, prepared, async move {
        let _ = stopped.await;
    }));
    Ok(ServerHandle {
        addr,
        secret,
        stop: Some(stop),
        task,
    })
}

/// Runs `msgstorm serve` until SIGTERM or Ctrl-C.
pub async fn serve_command(args: ServeArgs) -> Result<()> {
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_max_level(tracing::Level::INFO)
        .try_init();
    raise_fd_limit();
    let mut config = ServeConfig::from(args);
    if config.secret.is_none() {
        let secret = auth::generate_secret();
        tracing::info!(
            "generated secret: {secret} (tokens: msgstorm token USER --secret {secret})"
        );
        config.secret = Some(secret);
    }
    let (listener, addr) = bind(config.listen).await?;
    match &config.data {
        Some(d) => tracing::info!("store: {}", d.display()),
        None => tracing::info!("store: a temporary directory, deleted at exit"),
    }
    tracing::info!(durability = ?config.durability, "listening on ws://{addr}/ws (metrics at http://{addr}/metrics)");
    run(listener, config, stop_signal()).await
}

/// Resolves on Ctrl-C or SIGTERM.
async fn stop_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        () = ctrl_c => tracing::info!("Ctrl-C received"),
        () = term => tracing::info!("SIGTERM received"),
    }
}

/// Raises the soft limit of open files to the hard limit and logs the result.
fn raise_fd_limit() {
    match crate::sys::raise_fd_limit() {
        Ok(l) => tracing::info!("open-file limit: {} -> {}", l.was, l.now),
        Err(e) => tracing::warn!("cannot raise the open-file limit: {e}"),
    }
}
