//! The `xmpp` driver: every virtual user is one XMPP client (RFC 6120/6121) on a c2s
//! connection of ejabberd, Prosody or any other XMPP server.
//!
//! The mapping, in full in `docs/drivers/xmpp.md`:
//!
//! - connect: stream header, optional STARTTLS (or direct TLS for `xmpps://`), optional
//!   in-band registration (XEP-0077) on the user's first connection, SASL PLAIN or
//!   SCRAM-SHA-1, stream restart, resource binding, stream management (XEP-0198) enabled,
//!   initial presence (which makes the server deliver what it stored while the user was
//!   offline).
//! - send: `<message type="chat">` to `{user}@domain` or `type="groupchat"` to the room,
//!   the envelope in `<body>`. The acceptance is XEP-0198: every stanza sent is counted,
//!   an `<r/>` follows each batch of sends, and the server's `<a h="N"/>` accepts every tag
//!   up to stanza N (a FIFO of tags, as MQTT's PUBACKs).
//! - join: MUC presence to `group@muc_domain/nick`; a room this user created (status 201)
//!   is configured as an instant room. The room's reflection of one's own message is
//!   dropped. Joining a room again asks for its history, and history messages this user
//!   already had are dropped (the overlap of a rejoin, not a duplicate).
//! - fetch missed: the offline messages the server delivers after the initial presence and
//!   the room history of a rejoin, collected until the stream goes quiet. The final
//!   verification sends presence again, for what the server left in offline storage.
//! - heartbeat: `<r/>` (XEP-0198) or a whitespace keep-alive; server pings (XEP-0199) are
//!   answered.
//! - received messages are acknowledged (`<a h/>`) only once the engine has them: what
//!   arrives while a user closes stays unacknowledged, and the server stores it offline
//!   for the next connection.
//!
//! The XML stream is quick-xml under a small framer ([`xml`]) rather than tokio-xmpp with
//! xmpp-parsers: tokio-xmpp 6 brings its own resolver (hickory), a second TLS provider
//! (aws-lc by default), a task per client and its own reconnect logic, and has neither
//! in-band registration nor a way to see XEP-0198 acks per stanza; xmpp-parsers alone
//! would add minidom, rxml, xso and their macros to parse the handful of stanzas a load
//! test exchanges.

mod options;
mod sasl;
mod stream;
mod xml;

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_rustls::rustls::ClientConfig;

pub use options::{Options, Sasl, Tls};
use sasl::{Mechanism, Salted, Scram};
use stream::Stream;
use xml::{escape, Element, Item};

use super::{
    Auth, AuthForm, Caps, Config, Connected, Dest, Event, Failure, OptionError, Scheme, Session,
    Spec, UserCtx,
};
use crate::metrics::ErrorKind;

/// Namespaces of the stream features and elements the driver speaks.
mod ns {
    pub const CLIENT: &str = "jabber:client";
    pub const TLS: &str = "urn:ietf:params:xml:ns:xmpp-tls";
    pub const SASL: &str = "urn:ietf:params:xml:ns:xmpp-sasl";
    pub const BIND: &str = "urn:ietf:params:xml:ns:xmpp-bind";
    pub const SM: &str = "urn:xmpp:sm:3";
    pub const REGISTER: &str = "jabber:iq:register";
    pub const MUC: &str = "http://jabber.org/protocol/muc";
    pub const MUC_USER: &str = "http://jabber.org/protocol/muc#user";
    pub const MUC_OWNER: &str = "http://jabber.org/protocol/muc#owner";
    pub const PING: &str = "urn:xmpp:ping";
    pub const DELAY: &str = "urn:xmpp:delay";
    pub const STANZAS: &str = "urn:ietf:params:xml:ns:xmpp-stanzas";
}

/// How long closing waits for the server to end its side of the stream.
const CLOSE_WAIT: Duration = Duration::from_secs(1);
/// The longest the offline messages after a login are collected; later ones are pushes.
const OFFLINE_LIMIT: Duration = Duration::from_secs(60);
/// Queued bytes past which a send writes at once instead of waiting for the flush.
const WRITE_BATCH: usize = 64 * 1024;
/// Attempts at joining a room that another user is creating at the same moment.
const JOIN_ATTEMPTS: u32 = 20;
/// Pause between two of those attempts.
const JOIN_RETRY: Duration = Duration::from_millis(100);

/// The XMPP driver, built once per run.
#[derive(Debug)]
pub struct XmppDriver {
    opts: Arc<Options>,
    host: String,
    port: u16,
    domain: String,
    muc_domain: String,
    direct_tls: bool,
    tls: Option<Arc<ClientConfig>>,
    username: String,
    password: String,
    connect_timeout: Duration,
    max_body: usize,
}

/// The rustls client configuration: the CA file's certificates, or the system's roots.
/// Uses the ring provider explicitly (the one crypto provider of the tree).
fn tls_config(ca_file: Option<&std::path::Path>) -> Result<Arc<ClientConfig>, OptionError> {
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::pki_types::CertificateDer;
    use tokio_rustls::rustls::{crypto, RootCertStore};
    let err = |msg: String| OptionError::option("xmpp", "ca_file", msg);
    let mut roots = RootCertStore::empty();
    match ca_file {
        Some(path) => {
            let certs = CertificateDer::pem_file_iter(path)
                .and_then(|it| it.collect::<Result<Vec<_>, _>>())
                .map_err(|e| err(format!("{}: {e}", path.display())))?;
            if certs.is_empty() {
                return Err(err(format!("{}: no PEM certificate in it", path.display())));
            }
            for c in certs {
                roots
                    .add(c)
                    .map_err(|e| err(format!("{}: {e}", path.display())))?;
            }
        }
        None => {
            roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
            if roots.is_empty() {
                return Err(err(
                    "no system CA certificates found; give the server's CA as `ca_file`".into(),
                ));
            }
        }
    }
    let config = ClientConfig::builder_with_provider(Arc::new(crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| err(format!("TLS setup: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

impl super::Driver for XmppDriver {
    const SPEC: Spec = Spec {
        name: "xmpp",
        schemes: &[
            Scheme {
                name: "xmpp",
                default_port: 5222,
                tls: false,
                example: "xmpp://127.0.0.1:5222",
            },
            Scheme {
                name: "xmpps",
                default_port: 5223,
                tls: true,
                example: "xmpps://xmpp.example.com",
            },
        ],
        embedded_path: None,
        kinds: &["direct", "group", "idle"],
        requests: &[],
        auth: &[AuthForm::Password],
        source_addresses: false,
        caps: Caps {
            acceptance: true,
            presence: true,
            fetch_missed: true,
            filters_own_echoes: true,
        },
    };

    type Session = XmppSession;

    /// Checks `[target.xmpp]`, the credentials and TLS before anything connects.
    fn new(config: &Config) -> Result<Self, OptionError> {
        let opts = Options::parse(&config.options)?;
        let (username, password) = match &config.auth {
            Auth::Password { username, password } => (username.clone(), password.clone()),
            Auth::None | Auth::Secret(_) => {
                return Err(OptionError {
                    key: "target.auth".to_owned(),
                    msg: "XMPP logins need `username` and `password` (templates with `{user}`), \
                          or user:password in the URL"
                        .to_owned(),
                })
            }
        };
        let direct_tls = config.endpoint.as_ref().is_some_and(|ep| ep.tls());
        if direct_tls && opts.tls == Tls::StartTls {
            return Err(OptionError::option(
                "xmpp",
                "tls",
                "STARTTLS is for xmpp:// URLs; an xmpps:// URL is TLS from the start",
            ));
        }
        let tls = match direct_tls || opts.tls == Tls::StartTls {
            true => Some(tls_config(opts.ca_file.as_deref())?),
            false if opts.ca_file.is_some() => {
                return Err(OptionError::option(
                    "xmpp",
                    "ca_file",
                    "a CA file is for TLS: set `tls = \"starttls\"` or use an xmpps:// URL",
                ))
            }
            false => None,
        };
        let (host, port) = config
            .endpoint
            .as_ref()
            .map_or((String::new(), 0), |ep| (ep.host.clone(), ep.port));
        let domain = opts.domain.clone().unwrap_or_else(|| host.clone());
        let muc_domain = opts
            .muc_domain
            .clone()
            .unwrap_or_else(|| format!("conference.{domain}"));
        Ok(XmppDriver {
            opts: Arc::new(opts),
            host,
            port,
            domain,
            muc_domain,
            direct_tls,
            tls,
            username,
            password,
            connect_timeout: config.connect_timeout,
            max_body: config.max_body,
        })
    }

    /// Without stream management there are no acks: no acceptance.
    fn caps(&self) -> Caps {
        Caps {
            acceptance: self.opts.stream_management,
            ..Self::SPEC.caps
        }
    }

    async fn connect(
        &self,
        user: &UserCtx,
        mut resume: XmppResume,
    ) -> Result<Connected<XmppSession>, (Failure, XmppResume)> {
        let started = Instant::now();
        let limit = self.connect_timeout;
        let login = self.login(user, &mut resume, started);
        match tokio::time::timeout(limit, login).await {
            Ok(Ok(done)) => {
                let handshake = done.handshake;
                match XmppSession::new(self, user, done, resume) {
                    Ok(session) => Ok(Connected {
                        session,
                        handshake,
                        login: started.elapsed().saturating_sub(handshake),
                    }),
                    Err((f, resume)) => Err((f, resume)),
                }
            }
            Ok(Err(f)) => Err((f, resume)),
            Err(_) => Err((
                Failure::new(
                    ErrorKind::ConnectTimeout,
                    format!("no login within {limit:?}"),
                ),
                resume,
            )),
        }
    }
}

impl XmppDriver {
    /// The stream header opening a (re)started stream.
    fn header(&self) -> String {
        format!(
            "<?xml version='1.0'?><stream:stream to='{}' version='1.0' xml:lang='en' \
             xmlns='{}' xmlns:stream='http://etherx.jabber.org/streams'>",
            escape(&self.domain),
            ns::CLIENT
        )
    }

    /// Opens a stream and reads its features.
    async fn open(&self, stream: &mut Stream) -> Result<Element, Failure> {
        stream.queue(&self.header());
        stream.flush().await?;
        match stream.next().await? {
            Item::Header(_) => {}
            Item::Element(e) if e.name == "error" => return Err(stream::stream_error(&e)),
            other => {
                return Err(Failure::new(
                    ErrorKind::Protocol,
                    format!("expected a stream header, got {other:?}"),
                ))
            }
        }
        let features = stream.element().await?;
        if features.name != "features" {
            return Err(Failure::new(
                ErrorKind::Protocol,
                format!("expected stream features, got <{}>", features.name),
            ));
        }
        Ok(features)
    }

    /// Everything from TCP connect to initial presence.
    async fn login(
        &self,
        user: &UserCtx,
        resume: &mut XmppResume,
        started: Instant,
    ) -> Result<Login, Failure> {
        let tcp = tokio::net::TcpStream::connect((self.host.as_str(), self.port))
            .await
            .map_err(|e| stream::io_failure(&e))?;
        let _ = tcp.set_nodelay(true);
        let mut stream = Stream::new(tcp, self.max_body);
        if self.direct_tls {
            stream = stream.tls(self.tls_or_err()?, &self.domain).await?;
        }
        let mut features = self.open(&mut stream).await?;
        if self.opts.tls == Tls::StartTls {
            if features.child_ns("starttls", ns::TLS).is_none() {
                return Err(Failure::new(
                    ErrorKind::Protocol,
                    "the server does not offer STARTTLS (`tls = \"starttls\"`)",
                ));
            }
            stream.queue(&format!("<starttls xmlns='{}'/>", ns::TLS));
            stream.flush().await?;
            let answer = stream.element().await?;
            if answer.name != "proceed" {
                return Err(Failure::new(
                    ErrorKind::Protocol,
                    format!("STARTTLS refused: <{}>", answer.name),
                ));
            }
            stream = stream.tls(self.tls_or_err()?, &self.domain).await?;
            features = self.open(&mut stream).await?;
        }
        let handshake = started.elapsed();
        let username = self.username.replace("{user}", &user.id);
        let password = self.password.replace("{user}", &user.id);
        if self.opts.register && !resume.registered {
            register(&mut stream, &username, &password).await?;
            resume.registered = true;
        }
        self.authenticate(&mut stream, &features, &username, &password, resume)
            .await?;
        stream.restart();
        let features = self.open(&mut stream).await?;
        if let Some(prev) = resume.sm.take() {
            if let Some(sm) = resume_session(&mut stream, &prev).await? {
                return Ok(Login {
                    stream,
                    sm: Some(sm),
                    resumed: true,
                    handshake,
                    early: Vec::new(),
                });
            }
        }
        let resource = self.opts.resource.replace("{user}", &user.id);
        let sm = self.opts.stream_management;
        if sm && features.child_ns("sm", ns::SM).is_none() {
            return Err(Failure::new(
                ErrorKind::Protocol,
                "the server does not offer stream management (XEP-0198); set \
                 `stream_management = false` to run without acceptance",
            ));
        }
        // Bind, enable and the initial presence leave in one write, so the session is
        // available as soon as it exists. A message to a bound session without presence
        // goes to offline storage, and ejabberd may store it after the presence already
        // emptied that storage: it would then wait there until the next login.
        stream.queue(&format!(
            "<iq type='set' id='bind'><bind xmlns='{}'><resource>{}</resource></bind></iq>",
            ns::BIND,
            escape(&resource)
        ));
        if sm {
            stream.queue(&format!("<enable xmlns='{}' resume='true'/>", ns::SM));
        }
        stream.queue("<presence/>");
        stream.flush().await?;
        let (mut bound, mut enabled) = (false, !sm);
        let mut sm_id = None;
        let mut early = Vec::new();
        while !(bound && enabled) {
            let e = stream.element().await?;
            match e.name.as_str() {
                "iq" if e.attr("id") == Some("bind") => {
                    if e.attr("type") != Some("result") {
                        return Err(Failure::new(
                            ErrorKind::Protocol,
                            format!("binding the resource failed: {}", stanza_error(&e)),
                        ));
                    }
                    bound = true;
                }
                "enabled" if sm => {
                    enabled = true;
                    if matches!(e.attr("resume"), Some("true" | "1")) {
                        sm_id = e.attr("id").map(str::to_owned);
                    }
                }
                "failed" if sm => {
                    return Err(Failure::new(
                        ErrorKind::Protocol,
                        "the server refused to enable stream management",
                    ))
                }
                _ => early.push(e),
            }
        }
        Ok(Login {
            stream,
            // The initial presence is the first stanza counted.
            sm: sm.then(|| Sm {
                sent: 1,
                requested: 1,
                id: sm_id,
                ..Sm::default()
            }),
            resumed: false,
            handshake,
            early,
        })
    }

    fn tls_or_err(&self) -> Result<Arc<ClientConfig>, Failure> {
        self.tls
            .clone()
            .ok_or_else(|| Failure::new(ErrorKind::Other, "TLS was not configured"))
    }

    /// SASL with the mechanism the options ask for, among those offered.
    async fn authenticate(
        &self,
        stream: &mut Stream,
        features: &Element,
        username: &str,
        password: &str,
        resume: &mut XmppResume,
    ) -> Result<(), Failure> {
        let offered: Vec<&str> = features
            .child_ns("mechanisms", ns::SASL)
            .map(|m| m.children.iter().map(|c| c.text.trim()).collect())
            .unwrap_or_default();
        let has = |m: Mechanism| offered.contains(&m.name());
        let mechanism = match self.opts.sasl {
            Sasl::Auto if has(Mechanism::ScramSha1) => Mechanism::ScramSha1,
            Sasl::Auto | Sasl::Plain if has(Mechanism::Plain) => Mechanism::Plain,
            Sasl::ScramSha1 if has(Mechanism::ScramSha1) => Mechanism::ScramSha1,
            _ => {
                return Err(Failure::new(
                    ErrorKind::AuthFailed,
                    format!(
                        "no usable SASL mechanism: the server offers [{}]",
                        offered.join(", ")
                    ),
                ))
            }
        };
        let mut scram = None;
        let initial = match mechanism {
            Mechanism::Plain => sasl::plain(username, password),
            Mechanism::ScramSha1 => {
                let (s, initial) = Scram::start(username, password);
                scram = Some(s);
                initial
            }
        };
        stream.queue(&format!(
            "<auth xmlns='{}' mechanism='{}'>{initial}</auth>",
            ns::SASL,
            mechanism.name()
        ));
        stream.flush().await?;
        loop {
            let e = stream.element().await?;
            match (e.name.as_str(), scram.as_mut()) {
                ("challenge", Some(s)) => {
                    let response = s
                        .respond(&e.text, &mut resume.salted)
                        .map_err(|m| Failure::new(ErrorKind::Protocol, m))?;
                    stream.queue(&format!(
                        "<response xmlns='{}'>{response}</response>",
                        ns::SASL
                    ));
                    stream.flush().await?;
                }
                ("success", s) => {
                    if let Some(s) = s {
                        s.verify(&e.text)
                            .map_err(|m| Failure::new(ErrorKind::AuthFailed, m))?;
                    }
                    return Ok(());
                }
                ("failure", _) => {
                    let why = e
                        .children
                        .iter()
                        .find(|c| c.name != "text")
                        .map_or("failure", |c| c.name.as_str());
                    return Err(Failure::new(
                        ErrorKind::AuthFailed,
                        format!("SASL {} refused: {why}", mechanism.name()),
                    ));
                }
                (other, _) => {
                    return Err(Failure::new(
                        ErrorKind::Protocol,
                        format!("unexpected <{other}> during SASL"),
                    ))
                }
            }
        }
    }
}

/// A login that went through.
struct Login {
    stream: Stream,
    /// XEP-0198 state, when it is on.
    sm: Option<Sm>,
    /// The server resumed the user's previous session (XEP-0198): same resource,
    /// presence and rooms, and it retransmits what the user had not taken.
    resumed: bool,
    /// How long the part before SASL took.
    handshake: Duration,
    /// Elements that arrived before the login was complete, for the session.
    early: Vec<Element>,
}

/// In-band registration (XEP-0077) of `username`; an account that exists already is fine.
async fn register(stream: &mut Stream, username: &str, password: &str) -> Result<(), Failure> {
    stream.queue(&format!(
        "<iq type='set' id='reg'><query xmlns='{}'><username>{}</username>\
         <password>{}</password></query></iq>",
        ns::REGISTER,
        escape(username),
        escape(password)
    ));
    stream.flush().await?;
    let answer = stream.element().await?;
    match answer.attr("type") {
        Some("result") => Ok(()),
        _ if error_condition(&answer) == Some("conflict") => Ok(()),
        _ => Err(Failure::new(
            ErrorKind::AuthFailed,
            format!(
                "in-band registration of {username} refused: {}",
                stanza_error(&answer)
            ),
        )),
    }
}

/// The defined condition of a stanza's `<error>`.
fn error_condition(stanza: &Element) -> Option<&str> {
    let err = stanza.child("error")?;
    err.children
        .iter()
        .find(|c| c.attr("xmlns") == Some(ns::STANZAS) && c.name != "text")
        .map(|c| c.name.as_str())
}

/// A stanza error for messages: condition and text.
fn stanza_error(stanza: &Element) -> String {
    let cond = error_condition(stanza).unwrap_or("no error condition");
    match stanza
        .child("error")
        .and_then(|e| e.child("text"))
        .map(|t| t.text.as_str())
    {
        Some(t) if !t.is_empty() => format!("{cond}: {t}"),
        _ => cond.to_owned(),
    }
}

/// Ids of the room messages a user has had, to recognise them in the history a rejoin
/// replays. Bounded: history never goes back further than `muc_history` messages.
#[derive(Debug, Default)]
struct RoomSeen {
    order: VecDeque<String>,
    ids: HashSet<String>,
}

impl RoomSeen {
    /// Records `id`; false when it was already there.
    fn insert(&mut self, id: String, keep: usize) -> bool {
        if self.ids.contains(&id) {
            return false;
        }
        self.order.push_back(id.clone());
        self.ids.insert(id);
        while self.order.len() > keep {
            if let Some(old) = self.order.pop_front() {
                self.ids.remove(&old);
            }
        }
        true
    }
}

/// What an XMPP user remembers between connections.
#[derive(Debug, Default)]
pub struct XmppResume {
    /// The account was registered (or found) by this run.
    registered: bool,
    /// The SCRAM salted password of the last login.
    salted: Option<Salted>,
    /// Rooms joined before, by room JID, with the message ids seen in each.
    rooms: HashMap<String, RoomSeen>,
    /// The XEP-0198 session a lost connection left behind, to resume.
    sm: Option<SmResume>,
}

/// What resuming an XEP-0198 session takes.
#[derive(Debug)]
struct SmResume {
    /// The session id the server gave.
    id: String,
    /// Stanzas of the server the engine took: the server retransmits the rest.
    handed: u32,
}

/// Asks the server to resume `prev`: the session's XEP-0198 state when it did, `None`
/// when the session is gone (the caller binds a new one on the same stream).
async fn resume_session(stream: &mut Stream, prev: &SmResume) -> Result<Option<Sm>, Failure> {
    stream.queue(&format!(
        "<resume xmlns='{}' previd='{}' h='{}'/>",
        ns::SM,
        escape(&prev.id),
        prev.handed
    ));
    stream.flush().await?;
    let e = stream.element().await?;
    match e.name.as_str() {
        "resumed" => {
            let h: u32 = e.attr("h").and_then(|h| h.parse().ok()).ok_or_else(|| {
                Failure::new(ErrorKind::Protocol, "<resumed/> without a number h")
            })?;
            // Our stanzas count on from what the server got; its own from what we took.
            Ok(Some(Sm {
                id: Some(prev.id.clone()),
                sent: h,
                requested: h,
                received: prev.handed,
                ..Sm::default()
            }))
        }
        "failed" => Ok(None),
        other => Err(Failure::new(
            ErrorKind::Protocol,
            format!("unexpected <{other}> in answer to <resume/>"),
        )),
    }
}

/// Something received, kept until the engine takes it.
#[derive(Debug)]
struct Held {
    event: Event,
    /// The XEP-0198 count of the stanza that carried a message (acknowledged only once the
    /// engine has it).
    stanza: Option<u32>,
}

/// XEP-0198 state of a session.
#[derive(Debug, Default)]
struct Sm {
    /// The id to resume the session with, when the server allows resumption.
    id: Option<String>,
    /// Stanzas sent since `<enable/>`.
    sent: u32,
    /// Stanzas received since `<enable/>`.
    received: u32,
    /// `(stanza count, tag)` of sends not acknowledged yet, oldest first.
    tags: VecDeque<(u32, u64)>,
    /// `sent` when the last `<r/>` went out.
    requested: u32,
    /// The server asked for an ack.
    ack_owed: bool,
}

/// One user's XMPP connection.
#[derive(Debug)]
pub struct XmppSession {
    stream: Stream,
    opts: Arc<Options>,
    domain: String,
    muc_domain: String,
    nick: String,
    /// This connection resumed the previous one: its rooms are still joined.
    resumed: bool,
    /// The username template: a user id's JID is this `@domain`.
    username: Arc<str>,
    sm: Option<Sm>,
    pending: VecDeque<Held>,
    /// Offline messages may still be arriving (fetch missed not done yet).
    replaying: bool,
    resume: XmppResume,
    reply_timeout: Duration,
    next_id: u64,
}

impl XmppSession {
    /// The session of a completed login, with what arrived during it absorbed.
    fn new(
        d: &XmppDriver,
        user: &UserCtx,
        login: Login,
        resume: XmppResume,
    ) -> Result<XmppSession, (Failure, XmppResume)> {
        let mut s = XmppSession {
            stream: login.stream,
            opts: d.opts.clone(),
            domain: d.domain.clone(),
            muc_domain: d.muc_domain.clone(),
            nick: d.opts.nick.replace("{user}", &user.id),
            username: d.username.as_str().into(),
            sm: login.sm,
            resumed: login.resumed,
            pending: VecDeque::new(),
            replaying: true,
            resume,
            reply_timeout: d.connect_timeout,
            next_id: 0,
        };
        for e in login.early {
            if let Err(f) = s.absorb(e) {
                return Err((f, s.resume));
            }
        }
        Ok(s)
    }

    /// Queues one stanza, counting it for XEP-0198.
    fn stanza(&mut self, xml: &str) {
        self.stream.queue(xml);
        if let Some(sm) = &mut self.sm {
            sm.sent = sm.sent.wrapping_add(1);
        }
    }

    /// An id for a request of the driver's own.
    fn id(&mut self, what: &str) -> String {
        self.next_id += 1;
        format!("{what}{}", self.next_id)
    }

    /// The `h` this user can acknowledge: every stanza received, up to the first message
    /// the engine has not taken yet.
    fn handed(&self, sm: &Sm) -> u32 {
        self.pending
            .iter()
            .find_map(|h| h.stanza)
            .map_or(sm.received, |first| first.wrapping_sub(1))
    }

    /// Queues what XEP-0198 owes (`<a/>` asked for, `<r/>` after sends) and writes.
    async fn write(&mut self) -> Result<(), Failure> {
        if let Some(sm) = &self.sm {
            let mut extra = String::new();
            if sm.ack_owed {
                let _ = write!(extra, "<a xmlns='{}' h='{}'/>", ns::SM, self.handed(sm));
            }
            if sm.requested != sm.sent && !sm.tags.is_empty() {
                let _ = write!(extra, "<r xmlns='{}'/>", ns::SM);
            }
            if !extra.is_empty() {
                self.stream.queue(&extra);
                if let Some(sm) = &mut self.sm {
                    sm.ack_owed = false;
                    sm.requested = sm.sent;
                }
            }
        }
        self.stream.flush().await
    }

    /// Takes in one element from the server; what the engine must see goes to `pending`.
    fn absorb(&mut self, e: Element) -> Result<(), Failure> {
        let stanza = matches!(e.name.as_str(), "message" | "presence" | "iq");
        let count = match (&mut self.sm, stanza) {
            (Some(sm), true) => {
                sm.received = sm.received.wrapping_add(1);
                Some(sm.received)
            }
            _ => None,
        };
        match e.name.as_str() {
            "message" => self.message(e, count),
            "iq" => {
                self.answer_iq(&e);
                Ok(())
            }
            "r" if e.attr("xmlns") == Some(ns::SM) => {
                if let Some(sm) = &mut self.sm {
                    sm.ack_owed = true;
                }
                Ok(())
            }
            "a" if e.attr("xmlns") == Some(ns::SM) => {
                let h: u32 = e.attr("h").and_then(|h| h.parse().ok()).ok_or_else(|| {
                    Failure::new(ErrorKind::Protocol, "an XEP-0198 <a/> without a number h")
                })?;
                if let Some(sm) = &mut self.sm {
                    // Wrapping comparison: tag stanza counts at or before h are acked.
                    while let Some(&(n, tag)) = sm.tags.front() {
                        if h.wrapping_sub(n) >= 1 << 31 {
                            break;
                        }
                        sm.tags.pop_front();
                        self.pending.push_back(Held {
                            event: Event::Accepted { tag },
                            stanza: None,
                        });
                    }
                }
                Ok(())
            }
            "error" => Err(stream::stream_error(&e)),
            // Presence (room occupants), and anything else: nothing for the ledger.
            _ => Ok(()),
        }
    }

    /// A received `<message>`.
    fn message(&mut self, e: Element, count: Option<u32>) -> Result<(), Failure> {
        let kind = e.attr("type").unwrap_or("normal");
        if kind == "error" {
            let detail = format!(
                "message to {} bounced: {}",
                e.attr("from").unwrap_or("?"),
                stanza_error(&e)
            );
            self.pending.push_back(Held {
                event: Event::ProtocolError(Failure::new(ErrorKind::SendFailed, detail)),
                stanza: None,
            });
            return Ok(());
        }
        let Some(body) = e.child("body").map(|b| b.text.clone()) else {
            return Ok(());
        };
        if kind == "groupchat" {
            let from = e.attr("from").unwrap_or_default();
            let (room, nick) = from.split_once('/').unwrap_or((from, ""));
            if nick == self.nick || nick.is_empty() {
                return Ok(());
            }
            if let Some(id) = e.attr("id") {
                let keep = (self.opts.muc_history as usize).max(1) * 2;
                let key = format!("{nick}/{id}");
                let seen = self.resume.rooms.entry(room.to_owned()).or_default();
                let new = seen.insert(key, keep);
                // History replayed on a rejoin repeats what this user already had.
                if !new && e.child_ns("delay", ns::DELAY).is_some() {
                    return Ok(());
                }
            }
        }
        self.pending.push_back(Held {
            event: Event::Delivered { body },
            stanza: count,
        });
        Ok(())
    }

    /// Answers an `<iq>` the server sent: a ping gets its result, any other request an
    /// error; results and errors of our own requests need nothing.
    fn answer_iq(&mut self, e: &Element) {
        let kind = e.attr("type").unwrap_or_default();
        if kind != "get" && kind != "set" {
            return;
        }
        let id = escape(e.attr("id").unwrap_or_default()).into_owned();
        let to = e
            .attr("from")
            .map(|f| format!(" to='{}'", escape(f)))
            .unwrap_or_default();
        let reply = if e.child_ns("ping", ns::PING).is_some() {
            format!("<iq type='result' id='{id}'{to}/>")
        } else {
            format!(
                "<iq type='error' id='{id}'{to}><error type='cancel'>\
                 <service-unavailable xmlns='{}'/></error></iq>",
                ns::STANZAS
            )
        };
        self.stanza(&reply);
    }

    /// Reads one element and absorbs it. Cancel-safe.
    async fn step(&mut self) -> Result<(), Failure> {
        self.write().await?;
        let e = match self.stream.next().await? {
            Item::Element(e) => e,
            Item::End => {
                return Err(Failure::new(
                    ErrorKind::ClosedByPeer,
                    "the server ended the stream",
                ))
            }
            Item::Header(_) => {
                return Err(Failure::new(
                    ErrorKind::Protocol,
                    "a stream header in the middle of the stream",
                ))
            }
        };
        self.absorb(e)
    }

    /// Joins room `room` once; `Ok(false)`: the room is being created by someone else,
    /// try again.
    async fn join_once(&mut self, room: &str, history: u32) -> Result<bool, Failure> {
        let me = format!("{room}/{}", self.nick);
        self.stanza(&format!(
            "<presence to='{}'><x xmlns='{}'><history maxstanzas='{history}'/></x></presence>",
            escape(&me),
            ns::MUC
        ));
        let mut configuring: Option<String> = None;
        let (mut joined, mut subject) = (false, false);
        loop {
            self.write().await?;
            let e = self.stream.element().await?;
            let from = e.attr("from").unwrap_or_default();
            if e.name == "presence" && from == me {
                if e.attr("type") == Some("error") {
                    return match error_condition(&e) {
                        // Locked while its creator configures it, or gone meanwhile.
                        Some("item-not-found" | "not-allowed" | "conflict") => Ok(false),
                        _ => Err(Failure::new(
                            ErrorKind::Protocol,
                            format!("joining {room} refused: {}", stanza_error(&e)),
                        )),
                    };
                }
                let codes: Vec<&str> = e
                    .child_ns("x", ns::MUC_USER)
                    .map(|x| {
                        x.children
                            .iter()
                            .filter(|c| c.name == "status")
                            .filter_map(|c| c.attr("code"))
                            .collect()
                    })
                    .unwrap_or_default();
                if codes.contains(&"201") {
                    // A new room, locked until configured: make it an instant room.
                    let id = self.id("cfg");
                    self.stanza(&format!(
                        "<iq type='set' id='{id}' to='{}'><query xmlns='{}'>\
                         <x xmlns='jabber:x:data' type='submit'/></query></iq>",
                        escape(room),
                        ns::MUC_OWNER
                    ));
                    configuring = Some(id);
                }
                joined = true;
                self.count_stanza_in();
                continue;
            }
            if e.name == "iq" && configuring.is_some() && e.attr("id") == configuring.as_deref() {
                self.count_stanza_in();
                if e.attr("type") != Some("result") {
                    return Err(Failure::new(
                        ErrorKind::Protocol,
                        format!("configuring new room {room}: {}", stanza_error(&e)),
                    ));
                }
                configuring = None;
                if joined && subject {
                    return Ok(true);
                }
                continue;
            }
            // The subject comes last in the join sequence (after the history).
            if e.name == "message"
                && from == room
                && e.child("subject").is_some()
                && e.child("body").is_none()
            {
                self.count_stanza_in();
                subject = true;
                if joined && configuring.is_none() {
                    return Ok(true);
                }
                continue;
            }
            self.absorb(e)?;
        }
    }

    /// The JID of `group`'s room.
    fn room(&self, group: &str) -> String {
        format!(
            "{}@{}",
            self.opts.room.replace("{group}", group),
            self.muc_domain
        )
    }

    /// Counts a received stanza the driver consumed itself.
    fn count_stanza_in(&mut self) {
        if let Some(sm) = &mut self.sm {
            sm.received = sm.received.wrapping_add(1);
        }
    }
}

impl Session for XmppSession {
    type Resume = XmppResume;

    async fn send(&mut self, tag: u64, dest: Dest<'_>, body: &str) -> Result<(), Failure> {
        let (to, kind) = match dest {
            Dest::User(u) => (
                format!("{}@{}", self.username.replace("{user}", u), self.domain),
                "chat",
            ),
            Dest::Group(g) => (self.room(g), "groupchat"),
        };
        self.stanza(&format!(
            "<message type='{kind}' to='{}' id='m{tag}'><body>{}</body></message>",
            escape(&to),
            escape(body)
        ));
        if let Some(sm) = &mut self.sm {
            sm.tags.push_back((sm.sent, tag));
        }
        if self.stream.queued() > WRITE_BATCH {
            self.write().await?;
        }
        Ok(())
    }

    async fn request(&mut self, _tag: u64, _name: &'static str) -> Result<(), Failure> {
        Err(Failure::new(
            ErrorKind::RequestFailed,
            "XMPP has no request/response workload",
        ))
    }

    async fn heartbeat(&mut self) -> Result<(), Failure> {
        match &mut self.sm {
            // An ack request doubles as a keep-alive the server answers.
            Some(_) => self.stream.queue(&format!("<r xmlns='{}'/>", ns::SM)),
            None => self.stream.queue(" "),
        }
        Ok(())
    }

    async fn flush(&mut self) -> Result<(), Failure> {
        self.write().await
    }

    async fn join(&mut self, group: &str) -> Result<(), Failure> {
        let room = self.room(group);
        if self.resumed && self.resume.rooms.contains_key(&room) {
            return Ok(());
        }
        // A first join needs no history; a rejoin asks for what it may have missed.
        let history = match self.resume.rooms.contains_key(&room) {
            true => self.opts.muc_history,
            false => 0,
        };
        self.resume.rooms.entry(room.clone()).or_default();
        let limit = self.reply_timeout;
        let attempts = async {
            for _ in 0..JOIN_ATTEMPTS {
                if self.join_once(&room, history).await? {
                    return Ok(());
                }
                tokio::time::sleep(JOIN_RETRY).await;
            }
            Err(Failure::new(
                ErrorKind::Protocol,
                format!("could not join {room} in {JOIN_ATTEMPTS} attempts"),
            ))
        };
        match tokio::time::timeout(limit, attempts).await {
            Ok(r) => r,
            Err(_) => Err(Failure::new(
                ErrorKind::Timeout,
                format!("joining {room}: no answer within {limit:?}"),
            )),
        }
    }

    async fn fetch_missed(&mut self, out: &mut Vec<String>) -> Result<(), Failure> {
        if !std::mem::take(&mut self.replaying) {
            // A session that is already live (the final verification): presence off and
            // on again makes the server hand over what its offline storage still holds for
            // this user — messages it stored while the user was online, as ejabberd does
            // when a message races the presence of a login. Rooms see the user leave; this
            // runs only once traffic is over.
            self.stanza("<presence type='unavailable'/>");
            self.stanza("<presence/>");
        }
        let take = |s: &mut Self, out: &mut Vec<String>| {
            let mut rest = VecDeque::with_capacity(s.pending.len());
            for held in std::mem::take(&mut s.pending) {
                match held.event {
                    Event::Delivered { body } => out.push(body),
                    _ => rest.push_back(held),
                }
            }
            s.pending = rest;
        };
        // A ping round trip: the server has had our presence (and sent the offline
        // messages it triggers) before it answers.
        let id = self.id("ping");
        self.stanza(&format!(
            "<iq type='get' id='{id}' to='{}'><ping xmlns='{}'/></iq>",
            escape(&self.domain),
            ns::PING
        ));
        let limit = self.reply_timeout;
        let pong = async {
            loop {
                self.write().await?;
                let e = self.stream.element().await?;
                if e.name == "iq" && e.attr("id") == Some(id.as_str()) {
                    self.count_stanza_in();
                    return Ok::<(), Failure>(());
                }
                self.absorb(e)?;
            }
        };
        match tokio::time::timeout(limit, pong).await {
            Ok(r) => r?,
            Err(_) => {
                return Err(Failure::new(
                    ErrorKind::Timeout,
                    format!("no answer to a ping within {limit:?}"),
                ))
            }
        }
        take(self, out);
        let quiet = self.opts.offline_quiet;
        let until = Instant::now() + OFFLINE_LIMIT;
        while Instant::now() < until {
            match tokio::time::timeout(quiet, self.step()).await {
                Err(_) => break,
                Ok(r) => r?,
            }
            take(self, out);
        }
        self.write().await
    }

    async fn next_event(&mut self) -> Event {
        // The engine reads events without fetching first: what arrives is pushes.
        self.replaying = false;
        loop {
            // Taken out of `pending`, a message counts as handed to the engine (`handed`).
            if let Some(held) = self.pending.pop_front() {
                return held.event;
            }
            if let Err(f) = self.step().await {
                return Event::Closed(f);
            }
        }
    }

    async fn close(mut self) -> XmppResume {
        // A clean end: the server closes the XEP-0198 session too.
        self.resume.sm = None;
        // Acknowledge what the engine has, then end the stream: messages that arrive
        // meanwhile stay unacknowledged, and the server keeps them for the next login.
        if let Some(sm) = &mut self.sm {
            sm.ack_owed = true;
            sm.tags.clear();
        }
        let wait = async {
            self.write().await?;
            self.stream.queue("</stream:stream>");
            self.stream.flush().await?;
            while !matches!(self.stream.next().await?, Item::End) {}
            Ok::<(), Failure>(())
        };
        let _ = tokio::time::timeout(CLOSE_WAIT, wait).await;
        self.resume
    }

    /// The connection is gone: keep what resuming its XEP-0198 session takes.
    fn into_resume(mut self) -> XmppResume {
        self.resume.sm = self.sm.as_ref().and_then(|sm| {
            Some(SmResume {
                id: sm.id.clone()?,
                handed: self.handed(sm),
            })
        });
        self.resume
    }
}
