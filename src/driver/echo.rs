//! The `echo` driver: round trips through a WebSocket endpoint that returns every frame
//! (the reference server's `/echo`). Each connection is its own recipient: a frame's
//! end-to-end latency is due time → echoed back, and the ledger still checks that every
//! frame came back once, in order and intact. There is no login and no acceptance.

use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use super::native::{classify_connect, ws_config};
use super::{Connected, Dest, Event, Failure, Session, UserCtx};
use crate::metrics::ErrorKind;
use crate::scenario::RequestKind;

/// The echo driver.
#[derive(Debug, Clone)]
pub struct EchoDriver {
    url: String,
    connect_timeout: Duration,
}

impl EchoDriver {
    /// A driver for the echo endpoint at `url`.
    pub fn new(url: String, connect_timeout: Duration) -> Self {
        EchoDriver {
            url,
            connect_timeout,
        }
    }
}

impl super::Driver for EchoDriver {
    type Session = EchoSession;

    fn has_acceptance(&self) -> bool {
        false
    }

    async fn connect(
        &self,
        _user: &UserCtx,
        resume: (),
    ) -> Result<Connected<EchoSession>, (Failure, ())> {
        let started = Instant::now();
        let handshake = tokio_tungstenite::connect_async_with_config(
            self.url.as_str(),
            Some(ws_config()),
            true,
        );
        match tokio::time::timeout(self.connect_timeout, handshake).await {
            Ok(Ok((ws, _))) => Ok(Connected {
                session: EchoSession { ws },
                handshake: started.elapsed(),
                login: Duration::ZERO,
            }),
            Ok(Err(e)) => Err((classify_connect(&e), resume)),
            Err(_) => Err((
                Failure::new(
                    ErrorKind::ConnectTimeout,
                    format!("no WebSocket upgrade within {:?}", self.connect_timeout),
                ),
                resume,
            )),
        }
    }
}

/// One connection to an echo endpoint.
#[derive(Debug)]
pub struct EchoSession {
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
}

fn send_failed(e: impl std::fmt::Display) -> Failure {
    Failure::new(ErrorKind::SendFailed, e.to_string())
}

impl Session for EchoSession {
    type Resume = ();

    async fn send(&mut self, _tag: u64, _dest: Dest<'_>, body: &str) -> Result<(), Failure> {
        self.ws.feed(Message::text(body)).await.map_err(send_failed)
    }

    async fn request(&mut self, _tag: u64, _kind: RequestKind) -> Result<(), Failure> {
        Err(Failure::new(
            ErrorKind::RequestFailed,
            "the echo endpoint has no requests",
        ))
    }

    async fn heartbeat(&mut self) -> Result<(), Failure> {
        self.ws
            .feed(Message::Ping(Default::default()))
            .await
            .map_err(send_failed)
    }

    async fn flush(&mut self) -> Result<(), Failure> {
        self.ws.flush().await.map_err(send_failed)
    }

    async fn join(&mut self, _group: &str) -> Result<(), Failure> {
        Ok(())
    }

    async fn fetch_missed(&mut self, _out: &mut Vec<String>) -> Result<(), Failure> {
        Ok(())
    }

    async fn next_event(&mut self) -> Event {
        loop {
            match self.ws.next().await {
                Some(Ok(Message::Text(t))) => {
                    return Event::Delivered {
                        body: t.as_str().to_owned(),
                    }
                }
                Some(Ok(Message::Close(_))) | None => {
                    return Event::Closed(Failure::new(ErrorKind::ClosedByPeer, "echo closed"))
                }
                Some(Ok(_)) => continue,
                Some(Err(e)) => return Event::Closed(classify_connect(&e)),
            }
        }
    }

    async fn close(mut self) {
        let _ = tokio::time::timeout(Duration::from_secs(1), self.ws.close(None)).await;
    }

    fn into_resume(self) {}
}
