//! `/echo`: a WebSocket that returns every frame as received, so load generators can be
//! compared with nothing but the transport in the way. Replies are written in batches:
//! every frame already received is queued before one flush, as a fast server would.
//! Like a session, it closes a connection that sends nothing for `--idle-timeout` or whose
//! write waits on the peer for `--write-timeout`.

use std::time::Duration;

use axum::extract::ws::{Message, WebSocket};
use futures_util::{FutureExt, SinkExt, StreamExt};
use tokio::time::timeout;

/// Most frames answered per write.
const BATCH: usize = 64;

/// Echoes `socket` until the peer closes it, a write fails, nothing arrives for `idle`,
/// or a write waits longer than `write`.
pub async fn serve(mut socket: WebSocket, idle: Duration, write: Duration) {
    while let Ok(Some(Ok(first))) = timeout(idle, socket.next()).await {
        let mut next = Some(first);
        let mut queued = 0;
        while let Some(msg) = next.take() {
            match msg {
                Message::Text(_) | Message::Binary(_) => {
                    if !matches!(timeout(write, socket.feed(msg)).await, Ok(Ok(()))) {
                        return;
                    }
                    queued += 1;
                }
                Message::Close(_) => return,
                // Pings are answered by the WebSocket layer; pongs need nothing.
                Message::Ping(_) | Message::Pong(_) => {}
            }
            if queued < BATCH {
                // Take another frame only if it is already here: never wait holding replies.
                next = match socket.next().now_or_never() {
                    Some(Some(Ok(m))) => Some(m),
                    Some(None | Some(Err(_))) => {
                        let _ = timeout(write, socket.flush()).await;
                        return;
                    }
                    None => None,
                };
            }
        }
        if !matches!(timeout(write, socket.flush()).await, Ok(Ok(()))) {
            return;
        }
    }
}
