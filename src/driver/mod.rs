//! Protocol drivers: one interface for every wire protocol msgstorm speaks.
//!
//! A driver is one folder here plus its `pub mod` line below, which registers it: the build
//! script lists every such module whose `mod.rs` has `impl super::Driver for …` for
//! `registry.rs`, with the `#[cfg(feature = …)]` above the line. Every folder is
//! laid out alike: `mod.rs` declares what the driver is ([`Spec`]: name, URL schemes,
//! traffic kinds, requests, auth forms, source addresses, capabilities) and builds it from
//! a [`Config`] — checking its own `[target.<name>]` options (`options.rs`, through the
//! kit's one options parser), so a mistake is an `FILE:LINE: KEY:` error before anything
//! connects — and implements [`Driver`] (built once per run); `session.rs` implements
//! [`Session`] (one per virtual user); `codec.rs` holds its frames when it has its own. Drivers never see the scenario, keep no statistics and do no pacing: they
//! report what happened as [`Event`]s and classify failures by [`ErrorKind`]. How to add
//! one: `docs/drivers/README.md`.
//!
//! How each built-in protocol maps onto the interface:
//!
//! | operation | `native` (reference server) | `mqtt` | `echo` | `xmpp` |
//! |---|---|---|---|---|
//! | connect + login | WebSocket upgrade, `login` frame with HMAC token, `welcome` | CONNECT/CONNACK with client id = run+user, optional username/password | WebSocket upgrade, no login | stream, (STARTTLS,) in-band registration, SASL, bind + XEP-0198 enable + presence |
//! | send direct | `send` to `{user}`; `ack` after commit is the acceptance | PUBLISH to the user's inbox topic; PUBACK/PUBCOMP is the acceptance (QoS 0: none) | a text frame to itself; no acceptance | `<message type="chat">`; XEP-0198 `<a h/>` is the acceptance |
//! | send group | `send` to `{group}` | PUBLISH to the group topic | – | `<message type="groupchat">` to the MUC room |
//! | receive | `msg` push | PUBLISH on a subscribed topic | the frame echoed back | `<message>` with a body (own room reflections dropped) |
//! | request | `time` / `kv_get` RPC, answered by `reply` | – | – | – |
//! | heartbeat | `ping`/`pong` | PINGREQ (keep-alive) | – | `<r/>`, or whitespace without XEP-0198 |
//! | join group | `group_create`/`group_join` | SUBSCRIBE to the group topic | – | MUC join presence, waiting for the subject |
//! | fetch missed | `convs`, then `sync` pages after the seq up to which the user has everything (what the server held before the run skipped) | persistent session: the broker replays queued messages on reconnect; collected until it goes quiet | – (late and churning users are refused) | offline storage after presence; room history on rejoin; XEP-0198 resumption |
//! | close | WebSocket close | DISCONNECT | WebSocket close | `</stream:stream>` |
//! | signals | `receipt` (its `ok` is the acceptance), `typing`, `presence` with the token as `note`; `contacts` at the first login; stored receipts paged by `receipts` in the fetch | – | – | – |
//!
//! What every driver is built from is the toolkit, [`kit`]: the connect skeleton, the one
//! I/O-error classifier, TLS, the WebSocket transport, the target URL, the options table,
//! JSON mapping and sync cursors.
//!
//! The MQTT mapping in full, with its options: `docs/drivers/mqtt.md`; XMPP's:
//! `docs/drivers/xmpp.md`. `ws-json` maps each operation onto a frame template and
//! matching rules given in the scenario: `docs/drivers/ws-json.md`.
//! `socketio` speaks Socket.IO with the app's events mapped in the scenario (acks as
//! acceptance, connection state recovery as fetching missed messages):
//! `docs/drivers/socketio.md`.
//!
//! [`ErrorKind`]: crate::metrics::ErrorKind

pub mod directory;
pub mod echo;
pub mod kit;
pub mod loopback;
#[cfg(feature = "mqtt")]
pub mod mqtt;
pub mod native;
mod registry;
#[cfg(feature = "script")]
pub mod script;
#[cfg(feature = "socketio")]
pub mod socketio;
pub mod ws_json;
#[cfg(feature = "xmpp")]
pub mod xmpp;

use std::future::Future;
use std::net::IpAddr;
use std::time::Duration;

use crate::metrics::ErrorKind;
use crate::vocab::TrafficKind;
pub use kit::body::Body;
pub use kit::endpoint::Endpoint;
pub use registry::{check, dry_run, for_each_spec, spec, specs, with_driver, WithDriver};

/// What a driver is, declared once in its own file (`const SPEC`): everything the scenario
/// layer, the CLI and the engine need to know about it without naming it.
#[derive(Debug)]
pub struct Spec {
    /// The name in `[target] driver = "…"`, in `[target.<name>]` and in reports.
    pub name: &'static str,
    /// URL schemes it connects to (empty: it runs in this process and takes no URL).
    pub schemes: &'static [Scheme],
    /// The path of the embedded reference server it talks to when the scenario names no
    /// URL (`None`: a URL is required).
    pub embedded_path: Option<&'static str>,
    /// Traffic kinds (`kind = "…"` of `[[traffic]]`) it runs.
    pub kinds: &'static [TrafficKind],
    /// Requests (`request = "…"` of a `request` pattern) it can send.
    pub requests: &'static [&'static str],
    /// The `[target.auth]` forms it takes (empty: none).
    pub auth: &'static [AuthForm],
    /// Whether it binds client sockets to `[target] source_addresses`.
    pub source_addresses: bool,
    /// The keys of `[target.<name>]` that name files beside the scenario (a name or a list
    /// of names), which go wherever the scenario goes (a Kubernetes Job's ConfigMap).
    pub files: &'static [&'static str],
    /// What it can do with its default options ([`Driver::caps`] may say less).
    pub caps: Caps,
}

impl PartialEq for Spec {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

/// A URL scheme a driver speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scheme {
    /// `ws`, `mqtts`, …
    pub name: &'static str,
    /// Port when the URL names none.
    pub default_port: u16,
    /// Runs over TLS.
    pub tls: bool,
    /// A complete example URL, for error messages.
    pub example: &'static str,
}

/// What a driver can do, as configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    /// Sends get an acceptance from the server (ack, PUBACK…), so send→ack latency is
    /// measured; without it the report says "no acceptance".
    pub acceptance: bool,
    /// A user must have connected once before the server keeps messages for it while it
    /// is offline (MQTT persistent sessions): late users connect, join their groups and
    /// disconnect before traffic starts.
    pub needs_prior_connect: bool,
    /// It can fetch what a user missed while offline. Without it, scenarios with late or
    /// churning users are refused up front: their missed messages would look like loss.
    pub fetch_missed: bool,
    /// It never hands a user its own group messages back; otherwise the engine drops
    /// them (they are not deliveries).
    pub filters_own_echoes: bool,
    /// Fetching what a user missed resumes from a point the user received on its earlier
    /// connection (Socket.IO's offset): a user that received nothing before it went
    /// offline has none, and fetches nothing, unless the server sends every user a first
    /// message when it connects. `msgstorm validate` warns about late and churning users.
    pub fetch_needs_receipt: bool,
    /// How many of a group's messages a member that was away gets back when it returns:
    /// `None`, every one (the server keeps them for it); `Some(n)`, the last `n` of the
    /// group at most (XMPP room history; 0: none). `msgstorm validate` warns when more are
    /// sent to a group while a late or churning member is away.
    pub group_history: Option<u32>,
    /// Fetching missed messages skips what the server held before the run, noted at a
    /// login before traffic ([`Session::skip_history`]): late users with messages to fetch
    /// connect once before traffic starts to note it (and disconnect), so a reused server's
    /// earlier messages are never taken for this run's.
    pub skips_history: bool,
}

/// What a protocol promises about the delivery of each message to each recipient.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Promise {
    /// Every message arrives (at least once).
    pub every: bool,
    /// No message arrives twice (at most once).
    pub once: bool,
    /// Messages of one stream arrive in the order sent.
    pub in_order: bool,
}

impl Promise {
    /// Every message, once, in order: what an IM server owes its users.
    pub const FULL: Promise = Promise {
        every: true,
        once: true,
        in_order: true,
    };
}

impl Caps {
    /// Nothing at all.
    pub const NONE: Caps = Caps {
        acceptance: false,
        needs_prior_connect: false,
        fetch_missed: false,
        filters_own_echoes: false,
        fetch_needs_receipt: false,
        group_history: None,
        skips_history: false,
    };
}

/// The signals a client sends besides messages that a driver offers, as configured: a
/// scenario asking for one the driver lacks is refused before anything connects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Signals {
    /// Read receipts ([`Signal::Read`]): stored by the server for a sender that is offline,
    /// so a returning sender fetches them with its missed messages.
    pub receipts: bool,
    /// Typing notices ([`Signal::Typing`]) to the peer or the group's members online.
    pub typing: bool,
    /// Presence ([`Signal::Presence`]) published at login and logout to the user's contacts
    /// online, whom the server learns from [`Session::contacts`].
    pub presence: bool,
    /// The option that turns on each signal (receipts, typing, presence) when the driver
    /// offers it as configured, e.g. `target.ws-json.receipt`: named when a scenario asks
    /// for one that is off. Empty: none does.
    pub keys: [&'static str; 3],
}

/// A signal a user sends besides messages. Every signal carries a token (see
/// [`Session::signal`]) that the recipients' sessions hand back as the body of an
/// [`Event::Delivered`] (or in [`Session::fetch_missed`]'s list), so the engine verifies
/// signals as it verifies messages.
#[derive(Debug, Clone, Copy)]
pub enum Signal<'a> {
    /// The user read `message`, a body it received from `sender` in `conv` (the sender's
    /// id for a direct message, the group's name for a group message): the receipt goes
    /// to `sender` alone.
    Read {
        /// The wire id of the message's sender, whom the receipt is for.
        sender: &'a str,
        /// The conversation the message came in.
        conv: Dest<'a>,
        /// The body of the message as received.
        message: &'a str,
    },
    /// The user started (`active`) or stopped typing in `conv`; the server passes it on to
    /// the other members online and stores nothing.
    Typing {
        /// The conversation: the peer of a direct conversation, or a group.
        conv: Dest<'a>,
        /// Started (true) or stopped (false).
        active: bool,
    },
    /// The user is online (right after its login) or goes offline (right before it
    /// closes): the server tells the user's contacts online.
    Presence {
        /// Online (true) or going offline (false).
        online: bool,
    },
}

/// A form of `[target.auth]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthForm {
    /// `secret`: tokens minted per user (the reference server's HMAC tokens).
    Secret,
    /// `username` + `password` templates.
    Password,
}

/// How a user proves who it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Auth {
    /// Nothing.
    None,
    /// Native tokens minted from the server's secret (HMAC of the user id).
    Secret(String),
    /// Username/password; `{user}` in either is replaced by the user id.
    Password {
        /// Username template.
        username: String,
        /// Password template.
        password: String,
    },
}

/// Everything a driver is built from: the scenario's `[target]` resolved, without the
/// scenario itself.
#[derive(Debug, Clone)]
pub struct Config {
    /// The driver.
    pub spec: &'static Spec,
    /// Where to connect (`None`: an in-process driver, or validation before the
    /// embedded server's address is known).
    pub endpoint: Option<Endpoint>,
    /// How users authenticate.
    pub auth: Auth,
    /// Limit for TCP connect + protocol handshake + login of one user.
    pub connect_timeout: Duration,
    /// Heartbeat interval of every online user (`None`: none).
    pub heartbeat: Option<Duration>,
    /// Local addresses client sockets bind to, user `i` using `source_addrs[i % len]`.
    pub source_addrs: Vec<IpAddr>,
    /// The largest message body of the run, bytes (for packet limits).
    pub max_body: usize,
    /// The run id (for client ids that must not collide across runs).
    pub run_id: u32,
    /// The traffic kinds of the scenario (a driver configured per kind, like `ws-json`,
    /// checks that each has what it needs).
    pub kinds: Vec<&'static str>,
    /// The driver's own `[target.<name>]` table.
    pub options: toml::Table,
    /// The scenario file's directory: files the options name are relative to it.
    pub dir: std::path::PathBuf,
    /// The run-wide directory shared with the run's other shards (`None`: this process
    /// alone; a driver that needs one keeps its own).
    pub directory: Option<std::sync::Arc<dyn directory::Directory>>,
    /// Where connections go instead of the endpoint's host and port (msgstorm's chaos
    /// proxy); TLS and the protocol still name the endpoint.
    pub relay: Option<std::net::SocketAddr>,
    /// The run's tally of connections and bytes per transport, which every connection
    /// the driver makes adds to.
    pub wires: std::sync::Arc<crate::metrics::wires::Wires>,
}

/// A bad driver option or URL, found before anything connects.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {msg}")]
pub struct OptionError {
    /// Dotted scenario key, e.g. `target.mqtt.qos` or `target.url`; the scenario layer
    /// turns it into `FILE:LINE`.
    pub key: String,
    /// What is wrong and what is allowed.
    pub msg: String,
}

impl OptionError {
    /// An error about `key` of `[target.<driver>]`.
    pub fn option(driver: &str, key: &str, msg: impl Into<String>) -> Self {
        OptionError {
            key: format!("target.{driver}.{key}"),
            msg: msg.into(),
        }
    }

    /// An error about `target.url`.
    pub fn url(msg: impl Into<String>) -> Self {
        OptionError {
            key: "target.url".to_owned(),
            msg: msg.into(),
        }
    }
}

/// Who a session belongs to.
#[derive(Debug, Clone)]
pub struct UserCtx {
    /// The user's index in the plan (`0..population.users`).
    pub ix: u32,
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
        /// The body as received (shared with the frame it came in, where it can be).
        body: Body,
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

/// A protocol, built once per run from a [`Config`].
pub trait Driver: Sized + Send + Sync + 'static {
    /// What this driver is.
    const SPEC: Spec;

    /// One user's connection.
    type Session: Session;

    /// Builds the driver, checking its options (`[target.<name>]`) and endpoint. Runs for
    /// `msgstorm validate` too, so every mistake is found before anything connects.
    fn new(config: &Config) -> Result<Self, OptionError>;

    /// What the driver can do with the options it was built with.
    fn caps(&self) -> Caps {
        Self::SPEC.caps
    }

    /// What the protocol, with these options, promises about delivery: the built-in
    /// delivery checks apply to what it promises (MQTT QoS 0 promises neither every message
    /// nor their order; QoS 1 not once).
    fn promise(&self) -> Promise {
        Promise::FULL
    }

    /// What it would send for `user`'s login and a direct message to `to` and a group
    /// message to `group`, found without connecting (`msgstorm validate --frames`), as
    /// lines to print; `None` when the driver has no such dry run.
    fn dry_run(&self, user: &str, to: &str, group: &str) -> Option<Vec<String>> {
        let _ = (user, to, group);
        None
    }

    /// The signals it can send with the options it was built with (none by default).
    fn signals(&self) -> Signals {
        Signals::default()
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

    /// Sends request `name` (one of [`Spec::requests`]) of the request/response workload;
    /// the reply arrives as [`Event::Reply`].
    fn request(
        &mut self,
        tag: u64,
        name: &'static str,
    ) -> impl Future<Output = Result<(), Failure>> + Send;

    /// Sends a heartbeat.
    fn heartbeat(&mut self) -> impl Future<Output = Result<(), Failure>> + Send;

    /// Writes buffered frames to the socket.
    fn flush(&mut self) -> impl Future<Output = Result<(), Failure>> + Send;

    /// Creates `group` with this user as member, or joins it when it exists. Waits for the
    /// server's answer; pushes arriving meanwhile are kept for [`Session::next_event`].
    fn join(&mut self, group: &str) -> impl Future<Output = Result<(), Failure>> + Send;

    /// Notes where each of this user's conversations stands now, so that fetching missed
    /// messages never returns what the server held before: on a server reused from earlier
    /// runs (a staging server), that history is not this run's traffic. The engine calls
    /// it right after a login that comes before any message of the run can have been sent
    /// (see [`Caps::skips_history`]); without it a fetch reads each conversation from its
    /// start. The default does nothing.
    fn skip_history(&mut self) -> impl Future<Output = Result<(), Failure>> + Send {
        std::future::ready(Ok(()))
    }

    /// Tells the server who this user's contacts are (by wire id): the users whose presence
    /// it follows and who follow its own. Called once per run, at the user's first login,
    /// when the scenario asks for presence; only for drivers whose [`Driver::signals`] offer
    /// presence.
    fn contacts(&mut self, ids: &[&str]) -> impl Future<Output = Result<(), Failure>> + Send {
        let _ = ids;
        std::future::ready(Err(Failure::new(
            ErrorKind::Protocol,
            "this driver keeps no contacts",
        )))
    }

    /// Sends `signal` carrying `token` (at most [`crate::envelope::token::MAX_LEN`] ASCII
    /// letters, digits and `:`), which every recipient's session hands back unchanged as the
    /// body of an [`Event::Delivered`], or in [`Session::fetch_missed`]'s list when the server stored
    /// it (read receipts for a sender that was offline). A receipt's outcome arrives as
    /// [`Event::Accepted`] / [`Event::Refused`] with `tag` when the driver has acceptance;
    /// typing and presence have none. Only called for signals [`Driver::signals`] offers.
    fn signal(
        &mut self,
        tag: u64,
        signal: Signal<'_>,
        token: &str,
    ) -> impl Future<Output = Result<(), Failure>> + Send {
        let _ = (tag, signal, token);
        std::future::ready(Err(Failure::new(
            ErrorKind::Protocol,
            "this driver sends no signals",
        )))
    }

    /// Fetches the messages this user missed since its last connection (or since what
    /// [`Session::skip_history`] noted, or ever) and appends their bodies to `out`. Pushes
    /// arriving meanwhile are kept for [`Session::next_event`] and merged with the fetch
    /// as a real client merges them: a message is never returned both ways, and the
    /// pushes kept come out after the fetched messages below them, so the engine sees
    /// each conversation in order. A message the server itself sends twice (outside such
    /// an overlap) is still handed out twice, for the ledger to count as duplicated. The
    /// tokens of signals the server stored for the user (read receipts) go to `out` too.
    fn fetch_missed(
        &mut self,
        out: &mut Vec<String>,
    ) -> impl Future<Output = Result<(), Failure>> + Send;

    /// The next event. Cancel-safe: dropping the future loses nothing.
    fn next_event(&mut self) -> impl Future<Output = Event> + Send;

    /// Whether an event may be waiting in what the session already read, so that asking
    /// for it needs no read from the network; `true` when the driver cannot tell. The
    /// engine asks before it looks for more events after one (a look that finds nothing
    /// costs as much as the event).
    fn holds_unread(&self) -> bool {
        true
    }

    /// When the bytes of the last event reached this machine's kernel, if the session's
    /// socket stamps arrivals (under a wake tick, [`crate::runtime`]); `None`: the engine
    /// takes the time it handles the event. The default is `None`.
    fn arrived(&self) -> Option<std::time::Instant> {
        None
    }

    /// Closes the connection and returns what the user remembers for the next one.
    fn close(self) -> impl Future<Output = Self::Resume> + Send;

    /// Gives up a connection that is already gone, keeping what the user remembers.
    fn into_resume(self) -> Self::Resume;

    /// Whether the next connection sends again what this (broken) one sent and the server
    /// had not acknowledged (XEP-0198 resumption), and then reports each send's outcome:
    /// the engine keeps waiting for those instead of counting them failed. Asked right
    /// before [`Session::into_resume`].
    fn resends_unacked(&self) -> bool {
        false
    }
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
    /// What creating the user's account found, when this login (or a failed attempt
    /// before it) tried to create it.
    pub account: Option<Account>,
    /// This reconnect had no point to resume the user's session from (see
    /// [`Caps::fetch_needs_receipt`]): what the user missed cannot be fetched. Counted as
    /// `resumes_without_offset`.
    pub no_resume_point: bool,
}

/// The outcome of creating a user's account before its login, counted in the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Account {
    /// The server created it.
    Created,
    /// It existed already.
    Existing,
}

/// The state a driver's sessions carry between two connections of one user.
pub type Resume<D> = <<D as Driver>::Session as Session>::Resume;

/// Checks that the target accepts TCP connections at all, so an unreachable target fails
/// at once with exit code 3 instead of after a run of failed logins.
pub async fn probe(endpoint: &Endpoint, timeout: Duration) -> crate::Result<()> {
    let addr = endpoint.addr();
    let unreachable = |reason: String| crate::Error::Unreachable {
        target: endpoint.url.clone(),
        reason,
    };
    match tokio::time::timeout(timeout, tokio::net::TcpStream::connect(&addr)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(unreachable(format!("cannot connect to {addr}: {e}"))),
        Err(_) => Err(unreachable(format!(
            "no answer from {addr} within {timeout:?}"
        ))),
    }
}
