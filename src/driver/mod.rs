//! Protocol drivers: one interface for every wire protocol msgstorm speaks.
//!
//! A [`Driver`] is built once per run from the plan's target; it opens one [`Session`] per
//! virtual user. The engine only ever talks to these traits, so adding a protocol means
//! adding a file here. Drivers keep no statistics and do no pacing; they report what
//! happened as [`Event`]s and errors classified by [`ErrorKind`].
//!
//! How each protocol maps onto the interface:
//!
//! | operation | `native` (reference server) | `mqtt` | `xmpp` | `socketio` | `ws-json` |
//! |---|---|---|---|---|---|
//! | connect + login | WebSocket upgrade, `login` frame with HMAC token, `welcome` | CONNECT/CONNACK with client id = run+user, optional username/password | stream open, SASL, bind | Engine.IO open, Socket.IO connect with auth | upgrade + templated login frame |
//! | send direct | `send` to `{user}`; `ack` after commit is the acceptance | PUBLISH to the user's inbox topic; PUBACK/PUBCOMP (QoS 0: none) | `<message type="chat">`; XEP-0198 ack or receipt | emit with ack callback | templated frame, optional ack template |
//! | send group | `send` to `{group}` | PUBLISH to the group topic | MUC groupchat message | emit to a room event | templated |
//! | receive | `msg` push | PUBLISH on a subscribed topic | `<message>` stanza | event | frames matching a template |
//! | heartbeat | `ping`/`pong` | PINGREQ (keep-alive) | whitespace ping / XEP-0199 | Engine.IO ping/pong | templated |
//! | join group | `group_create`/`group_join` | SUBSCRIBE to the group topic | MUC join | join a room | templated |
//! | fetch missed | `convs`, then `sync` pages after the last seen seq | persistent session: the broker replays queued messages on reconnect; collected until it goes quiet | MAM query | server-specific | templated |
//! | close | WebSocket close | DISCONNECT | `</stream>` | close | close |
//!
//! The MQTT mapping in full, with its options: `docs/drivers/mqtt.md`.
//!
//! [`ErrorKind`]: crate::metrics::ErrorKind

pub mod echo;
pub mod loopback;
#[cfg(feature = "mqtt")]
pub mod mqtt;
pub mod native;
pub mod ws;

use std::future::Future;

use crate::metrics::ErrorKind;
use crate::scenario::{RequestKind, UserIx};

/// Who a session belongs to.
#[derive(Debug, Clone)]
pub struct UserCtx {
    /// The user's index in the plan.
    pub ix: UserIx,
    /// The user's id on the wire.
    pub id: String,
}

/// Where a message goes.
#[derive(Debug, Clone, Copy)]
pub enum Dest<'a> {
    /// A direct message to this user id.
    User(&'a str),
    /// A message to this group.
    Group(&'a str),
}

/// Why a connection or login failed: a kind for the error taxonomy and a detail for examples.
#[derive(Debug, Clone)]
pub struct Failure {
    /// The class of failure.
    pub kind: ErrorKind,
    /// What exactly happened, for the report's examples.
    pub detail: String,
}

impl Failure {
    /// A failure of `kind` with `detail`.
    pub fn new(kind: ErrorKind, detail: impl Into<String>) -> Self {
        Failure {
            kind,
            detail: detail.into(),
        }
    }
}

/// Something a session observed on the wire.
#[derive(Debug)]
pub enum Event {
    /// The server accepted (committed) the send with this tag.
    Accepted {
        /// The tag given to [`Session::send`].
        tag: u64,
    },
    /// The server refused the send or request with this tag.
    Refused {
        /// The tag given to [`Session::send`].
        tag: u64,
        /// Why, for the report.
        failure: Failure,
    },
    /// A message body was delivered to this user.
    Delivered {
        /// The body as received.
        body: String,
    },
    /// A reply to the request with this tag.
    Reply {
        /// The tag given to [`Session::request`].
        tag: u64,
    },
    /// The server sent something this driver could not understand; the connection stays.
    ProtocolError(Failure),
    /// The connection is gone; the session must not be used any more.
    Closed(Failure),
}

/// A protocol, built once per run.
pub trait Driver: Send + Sync + 'static {
    /// One user's connection.
    type Session: Session;

    /// True when a send gets an acceptance from the server (an ack, PUBACK…); false when the
    /// protocol has none (MQTT QoS 0) and send→ack latency is not measured.
    fn has_acceptance(&self) -> bool;

    /// True when a user must have connected once before messages for it are kept while it
    /// is offline (MQTT persistent sessions); late users then connect, join their groups
    /// and disconnect before traffic starts.
    fn needs_presence(&self) -> bool {
        false
    }

    /// Removes what the server keeps for `user` after its last connection of the run (MQTT
    /// persistent sessions), so a run leaves the target as it found it. Bounded in time.
    fn forget(&self, user: &UserCtx) -> impl Future<Output = ()> + Send {
        let _ = user;
        std::future::ready(())
    }

    /// Connects and logs in as `user`. On failure the user's `resume` state comes back
    /// with the failure, so the next attempt still knows what was seen.
    fn connect(
        &self,
        user: &UserCtx,
        resume: Resume<Self>,
    ) -> impl Future<Output = Result<Connected<Self::Session>, (Failure, Resume<Self>)>> + Send;
}

/// One logged-in user's connection.
pub trait Session: Send + 'static {
    /// What a user remembers between two connections (for example the last sequence number
    /// seen per conversation), so that fetching missed messages after a reconnect returns
    /// exactly what was missed.
    type Resume: Default + Send + 'static;

    /// Sends a message; the outcome arrives later as [`Event::Accepted`] / [`Event::Refused`]
    /// with this `tag`. Frames may be buffered until [`Session::flush`].
    fn send(
        &mut self,
        tag: u64,
        dest: Dest<'_>,
        body: &str,
    ) -> impl Future<Output = Result<(), Failure>> + Send;

    /// Sends a request of the request/response workload; the reply arrives as [`Event::Reply`].
    fn request(
        &mut self,
        tag: u64,
        kind: RequestKind,
    ) -> impl Future<Output = Result<(), Failure>> + Send;

    /// Sends a heartbeat.
    fn heartbeat(&mut self) -> impl Future<Output = Result<(), Failure>> + Send;

    /// Writes buffered frames to the socket.
    fn flush(&mut self) -> impl Future<Output = Result<(), Failure>> + Send;

    /// Creates `group` with this user as member, or joins it when it exists. Waits for the
    /// server's answer; pushes arriving meanwhile are kept for [`Session::next_event`].
    fn join(&mut self, group: &str) -> impl Future<Output = Result<(), Failure>> + Send;

    /// Fetches the messages this user missed since its last connection (or ever) and
    /// appends their bodies to `out`. Pushes arriving meanwhile are kept for
    /// [`Session::next_event`]; a message is never returned both ways.
    fn fetch_missed(
        &mut self,
        out: &mut Vec<String>,
    ) -> impl Future<Output = Result<(), Failure>> + Send;

    /// The next event. Cancel-safe: dropping the future loses nothing.
    fn next_event(&mut self) -> impl Future<Output = Event> + Send;

    /// Closes the connection and returns what the user remembers for the next one.
    fn close(self) -> impl Future<Output = Self::Resume> + Send;

    /// Gives up a connection that is already gone, keeping what the user remembers.
    fn into_resume(self) -> Self::Resume;
}

/// A logged-in session and how long its parts took.
#[derive(Debug)]
pub struct Connected<S> {
    /// The session.
    pub session: S,
    /// Transport and protocol handshake (TCP, TLS, WebSocket upgrade), before login.
    pub handshake: std::time::Duration,
    /// The login exchange after the handshake.
    pub login: std::time::Duration,
}

/// The state a driver's sessions carry between two connections of one user.
pub type Resume<D> = <<D as Driver>::Session as Session>::Resume;

/// Checks the plan's driver-specific options (`[target.<driver>]`), so that a bad one fails
/// before anything connects. Returns the dotted key and what is wrong with it.
pub fn check_options(plan: &crate::scenario::Plan) -> Result<(), (String, String)> {
    match plan.target.driver {
        crate::scenario::DriverKind::Native | crate::scenario::DriverKind::Echo => {
            match &plan.target.url {
                Some(url) => ws::Endpoint::parse(url)
                    .map(|_| ())
                    .map_err(|msg| ("target.url".to_owned(), msg)),
                None => Ok(()),
            }
        }
        #[cfg(feature = "mqtt")]
        crate::scenario::DriverKind::Mqtt => {
            let url = plan.target.url.as_deref().unwrap_or_default();
            mqtt::MqttDriver::new(url, plan, 0)
                .map(|_| ())
                .map_err(|e| (e.key, e.msg))
        }
        #[cfg(not(feature = "mqtt"))]
        crate::scenario::DriverKind::Mqtt => Ok(()),
    }
}

/// Checks that the target accepts TCP connections at all, so an unreachable target fails
/// at once with exit code 3 instead of after a run of failed logins.
pub async fn probe(url: &str, timeout: std::time::Duration) -> crate::Result<()> {
    let unreachable = |reason: String| crate::Error::Unreachable {
        target: url.to_owned(),
        reason,
    };
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| crate::Error::Usage(format!("target.url `{url}`: no scheme")))?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let authority = authority.rsplit('@').next().unwrap_or_default();
    let default_port = match scheme {
        "ws" => 80,
        "wss" => 443,
        "mqtt" => 1883,
        "mqtts" => 8883,
        _ => 80,
    };
    let addr = if authority
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
        && !authority.ends_with(']')
    {
        authority.to_owned()
    } else {
        format!("{authority}:{default_port}")
    };
    match tokio::time::timeout(timeout, tokio::net::TcpStream::connect(&addr)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(unreachable(format!("cannot connect to {addr}: {e}"))),
        Err(_) => Err(unreachable(format!(
            "no answer from {addr} within {timeout:?}"
        ))),
    }
}
