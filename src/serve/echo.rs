//! `/echo`: a WebSocket that returns every frame as received, so load generators can be
//! compared with nothing but the transport in the way. Replies are written in batches:
//! every frame already received is queued before one flush, as a fast server would.

use axum::extract::ws::{Message, WebSocket};
use futures_util::{FutureExt, SinkExt, StreamExt};

/// Most frames answered per write.
const BATCH: usize = 64;

/// Echoes `socket` until the peer closes it or a write fails.
pub async fn serve(mut socket: WebSocket) {
    while let Some(Ok(first)) = socket.next().await {
        let mut next = Some(first);
        let mut queued = 0;
        while let Some(msg) = next.take() {
            match msg {
                Message::Text(_) | Message::Binary(_) => {
                    if socket.feed(msg).await.is_err() {
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
                        let _ = socket.flush().await;
                        return;
                    }
                    None => None,
                };
            }
        }
        if socket.flush().await.is_err() {
            return;
        }
    }
}
