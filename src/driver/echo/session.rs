//! One connection to a WebSocket echo endpoint ([`EchoSession`]): a send is a text frame,
//! a delivery the frame echoed back.

use tokio_tungstenite::tungstenite::{self, Message, Utf8Bytes};

use crate::driver::kit::ws::{classify, Ws};
use crate::driver::{Dest, Event, Failure, Session};
use crate::metrics::ErrorKind;

/// One connection to an echo endpoint.
#[derive(Debug)]
pub struct EchoSession {
    pub(super) ws: Ws,
}

/// What one read from the socket gives the engine, if anything. A binary frame is what
/// was sent, echoed by a server that answers in binary: delivered when it is UTF-8 (the
/// envelope then judges it), a protocol error otherwise.
fn event_of(item: Option<Result<Message, tungstenite::Error>>) -> Option<Event> {
    match item {
        Some(Ok(Message::Text(t))) => Some(Event::Delivered { body: t.into() }),
        Some(Ok(Message::Binary(b))) => Some(match Utf8Bytes::try_from(b) {
            Ok(t) => Event::Delivered { body: t.into() },
            Err(_) => Event::ProtocolError(Failure::new(
                ErrorKind::Protocol,
                "binary frame that is not UTF-8",
            )),
        }),
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

    fn arrived(&self) -> Option<std::time::Instant> {
        self.ws.arrived()
    }

    async fn close(self) {
        self.ws.close().await;
    }

    fn into_resume(self) {}
}

#[cfg(all(test, feature = "serve"))]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::driver::echo::EchoDriver;
    use crate::driver::{Auth, Config, Driver, Endpoint, Event, UserCtx};
    use crate::envelope::{self, Envelope};
    use crate::serve::{self, ServeConfig};

    /// An echo session on the reference server's `/echo`, which takes frames up to
    /// `max_frame`, for a run whose largest body is `max_body`.
    async fn session(max_frame: usize, max_body: usize) -> (EchoSession, serve::ServerHandle) {
        let server = serve::spawn(ServeConfig {
            max_frame,
            ..ServeConfig::default()
        })
        .await
        .expect("server");
        let spec = &EchoDriver::SPEC;
        let config = Config {
            spec,
            endpoint: Some(Endpoint::parse(&server.echo_url(), spec).expect("url")),
            auth: Auth::None,
            connect_timeout: Duration::from_secs(5),
            heartbeat: None,
            source_addrs: Vec::new(),
            max_body,
            run_id: 1,
            kinds: vec!["echo"],
            options: toml::Table::new(),
            dir: Default::default(),
            directory: None,
            relay: None,
            wires: Default::default(),
        };
        let driver = EchoDriver::new(&config).expect("driver");
        let user = UserCtx {
            ix: 0,
            id: "u".to_owned(),
        };
        let Ok(connected) = driver.connect(&user, ()).await else {
            panic!("no echo connection");
        };
        (connected.session, server)
    }

    /// The next event, within five seconds.
    async fn next(s: &mut EchoSession) -> Event {
        tokio::time::timeout(Duration::from_secs(5), s.next_event())
            .await
            .expect("an event")
    }

    /// A body of `size` bytes carrying an envelope.
    fn body(size: usize) -> String {
        let env = Envelope {
            run: 1,
            stream: 2,
            seq: 3,
            due_us: 4,
        };
        let mut out = String::new();
        envelope::encode(&env, size, &mut out);
        out
    }

    /// An echo server that answers in binary frames: a UTF-8 body is delivered, other
    /// bytes are a protocol error, and the connection goes on.
    #[tokio::test]
    async fn binary_echoes_are_delivered_or_counted_as_protocol_errors() {
        let (mut s, server) = session(64 << 10, 100).await;
        let sent = body(100);
        s.ws.write(Message::binary(sent.clone().into_bytes()))
            .await
            .expect("write");
        s.ws.write(Message::binary(vec![0xFF, 0xFE]))
            .await
            .expect("write");
        s.send(0, Dest::User("u"), "after").await.expect("send");
        s.flush().await.expect("flush");
        match next(&mut s).await {
            Event::Delivered { body } => assert_eq!(&*body, sent),
            other => panic!("expected the binary echo delivered, got {other:?}"),
        }
        match next(&mut s).await {
            Event::ProtocolError(f) => assert_eq!(f.kind, ErrorKind::Protocol),
            other => panic!("expected a protocol error, got {other:?}"),
        }
        match next(&mut s).await {
            Event::Delivered { body } => assert_eq!(&*body, "after"),
            other => panic!("expected the text echo, got {other:?}"),
        }
        s.close().await;
        server.shutdown().await.expect("shutdown");
    }

    /// A body larger than the 16 MiB every connection takes comes back when the run's
    /// largest body is that large (`size` goes up to 64 MiB).
    #[tokio::test]
    async fn a_body_over_16_mib_comes_back() {
        let size = (16 << 20) + 1000;
        let (mut s, server) = session(size + 1024, size).await;
        let sent = body(size);
        s.send(0, Dest::User("u"), &sent).await.expect("send");
        s.flush().await.expect("flush");
        match next(&mut s).await {
            Event::Delivered { body } => assert!(*body == *sent, "{} bytes back", body.len()),
            other => panic!("expected the echo, got {other:?}"),
        }
        s.close().await;
        server.shutdown().await.expect("shutdown");
    }
}
