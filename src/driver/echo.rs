//! The `echo` driver: round trips through a WebSocket endpoint that returns every frame
//! (the reference server's `/echo`). Each connection is its own recipient: a frame's
//! end-to-end latency is due time → echoed back, and the ledger still checks that every
//! frame came back once, in order and intact. There is no login and no acceptance. The
//! transport (cheap upgrade, coalesced writes, reading while a write waits) is
//! [`super::ws`].

use std::time::{Duration, Instant};

use tokio_tungstenite::tungstenite::{self, Message};

use super::ws::{classify, Dialer, Ws};
use super::{Caps, Config, Connected, Dest, Event, Failure, OptionError, Session, Spec, UserCtx};
use crate::metrics::ErrorKind;
use crate::scenario::TrafficKind;

/// The echo driver.
#[derive(Debug, Clone)]
pub struct EchoDriver {
    dialer: Dialer,
}

impl super::Driver for EchoDriver {
    const SPEC: Spec = Spec {
        name: "echo",
        schemes: super::ws::SCHEMES,
        embedded_path: Some("/echo"),
        kinds: &[TrafficKind::Echo],
        requests: &[],
        auth: &[],
        source_addresses: true,
        caps: Caps {
            filters_own_echoes: true,
            skips_history: false,
            ..Caps::NONE
        },
    };

    type Session = EchoSession;

    fn new(config: &Config) -> Result<Self, OptionError> {
        super::ws::only_tls_options(config)?;
        Ok(EchoDriver {
            dialer: Dialer::new(config)?,
        })
    }

    async fn connect(
        &self,
        user: &UserCtx,
        resume: (),
    ) -> Result<Connected<EchoSession>, (Failure, ())> {
        let started = Instant::now();
        match self.dialer.dial(user.ix).await {
            Ok(ws) => Ok(Connected {
                session: EchoSession { ws },
                handshake: started.elapsed(),
                login: Duration::ZERO,
                account: None,
                no_resume_point: false,
            }),
            Err(f) => Err((f, resume)),
        }
    }
}

/// One connection to an echo endpoint.
#[derive(Debug)]
pub struct EchoSession {
    ws: Ws,
}

/// What one read from the socket gives the engine, if anything.
fn event_of(item: Option<Result<Message, tungstenite::Error>>) -> Option<Event> {
    match item {
        Some(Ok(Message::Text(t))) => Some(Event::Delivered { body: t.into() }),
        Some(Ok(Message::Close(_))) | None => Some(Event::Closed(Failure::new(
            ErrorKind::ClosedByPeer,
            "echo closed",
        ))),
        Some(Ok(_)) => None,
        Some(Err(e)) => Some(Event::Closed(classify(&e))),
    }
}

impl Session for EchoSession {
    type Resume = ();

    async fn send(&mut self, _tag: u64, _dest: Dest<'_>, body: &str) -> Result<(), Failure> {
        self.ws.write(Message::text(body)).await
    }

    async fn request(&mut self, _tag: u64, _name: &'static str) -> Result<(), Failure> {
        Err(Failure::new(
            ErrorKind::RequestFailed,
            "the echo endpoint has no requests",
        ))
    }

    async fn heartbeat(&mut self) -> Result<(), Failure> {
        self.ws.write(Message::Ping(Default::default())).await
    }

    async fn flush(&mut self) -> Result<(), Failure> {
        self.ws.flush().await
    }

    async fn join(&mut self, _group: &str) -> Result<(), Failure> {
        Ok(())
    }

    async fn fetch_missed(&mut self, _out: &mut Vec<String>) -> Result<(), Failure> {
        Ok(())
    }

    async fn next_event(&mut self) -> Event {
        loop {
            if let Some(ev) = event_of(self.ws.next().await) {
                return ev;
            }
        }
    }

    async fn close(self) {
        self.ws.close().await;
    }

    fn into_resume(self) {}
}
