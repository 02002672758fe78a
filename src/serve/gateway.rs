//! The HTTP side: the router (`/ws` upgrades to a session, `/metrics` renders the
//! metrics), the connection limit, and the server's shared state.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{ConnectInfo, State};
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use futures_util::SinkExt;
use tokio::sync::mpsc;

use super::config::ServeConfig;
use super::guard::Pass;
use super::hub::{encode, Hub};
use super::metrics::Metrics;
use super::roster::Roster;
use super::rpc::KvPool;
use super::session;
use super::store::Readers;
use super::writer::Cmd;
use crate::wire::{ErrorCode, ServerFrame};

/// WebSocket read buffer per connection (also the most read per `read` call): small, so
/// idle connections stay cheap; frames larger than it grow the buffer while they are read.
const READ_BUFFER: usize = 256;
/// Outgoing bytes coalesced before a write to the socket.
const WRITE_BUFFER: usize = 8 * 1024;

/// State shared by every connection of one server.
#[derive(Debug)]
pub struct Shared {
    /// The resolved options.
    pub config: ServeConfig,
    /// The token secret.
    pub secret: String,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Who is online.
    pub hub: Arc<Hub>,
    /// Contacts and published presence.
    pub roster: Arc<Roster>,
    /// The writer's queue.
    pub writer: mpsc::Sender<Cmd>,
    /// The reader threads and their read connections.
    pub readers: Readers,
    /// The `kv_get` worker pool.
    pub kv: KvPool,
    /// Next connection id.
    pub next_conn: AtomicU64,
    /// Open WebSocket connections (for the connection limit).
    pub open: AtomicUsize,
    /// Set once shutdown began: new connections are closed at once.
    pub stopping: AtomicBool,
}

/// The router of one server.
pub fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/ws", get(upgrade))
        .route("/echo", get(echo))
        .route("/metrics", get(metrics))
        .with_state(shared)
}

async fn metrics(State(shared): State<Arc<Shared>>) -> Response {
    (
        [(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        shared.metrics.render(),
    )
        .into_response()
}

/// The WebSocket settings of every connection: small buffers, the frame limit.
fn limits(ws: WebSocketUpgrade, shared: &Shared) -> WebSocketUpgrade {
    let max = shared.config.max_frame;
    ws.read_buffer_size(READ_BUFFER)
        .write_buffer_size(WRITE_BUFFER)
        .max_frame_size(max)
        .max_message_size(max)
}

async fn upgrade(
    ws: WebSocketUpgrade,
    State(shared): State<Arc<Shared>>,
    ConnectInfo(pass): ConnectInfo<Pass>,
) -> Response {
    limits(ws, &shared).on_upgrade(move |socket| async move {
        pass.upgraded();
        let open = shared.open.fetch_add(1, Ordering::AcqRel);
        if open >= shared.config.max_connections {
            refuse_full(socket, &shared, open).await;
        } else {
            session::serve(socket, pass, Arc::clone(&shared)).await;
        }
        shared.open.fetch_sub(1, Ordering::AcqRel);
    })
}

async fn echo(
    ws: WebSocketUpgrade,
    State(shared): State<Arc<Shared>>,
    ConnectInfo(pass): ConnectInfo<Pass>,
) -> Response {
    let (idle, write) = (shared.config.idle_timeout, shared.config.write_timeout);
    limits(ws, &shared).on_upgrade(move |socket| async move {
        // `/echo` has no login: the upgrade admits it (its idle timeout still applies).
        if pass.logged_in() {
            super::echo::serve(socket, idle, write).await;
        }
    })
}

async fn refuse_full(mut socket: WebSocket, shared: &Shared, open: usize) {
    shared.metrics.error(ErrorCode::TooManyConnections);
    let frame = encode(&ServerFrame::Error {
        r#ref: None,
        code: ErrorCode::TooManyConnections,
        message: format!("the server holds its maximum of {open} connections"),
        fatal: true,
    });
    let bye = async {
        socket.send(Message::Text(frame)).await?;
        socket.close().await
    };
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), bye).await;
}

impl Shared {
    /// Marks the server as stopping and closes every connection with `shutting_down`.
    pub fn begin_stop(&self) -> usize {
        self.stopping.store(true, Ordering::Release);
        self.hub.close_all(ErrorCode::ShuttingDown)
    }
}
