//! The `xmpp` driver: every virtual user is one XMPP client (RFC 6120/6121) on a c2s
//! connection of ejabberd, Prosody or any other XMPP server.
//!
//! The mapping, in full in `docs/drivers/xmpp.md`:
//!
//! - connect: stream header, optional STARTTLS (or direct TLS for `xmpps://`), optional
//!   in-band registration (XEP-0077) on the user's first connection, SASL PLAIN or
//!   SCRAM-SHA-1, stream restart, resource binding, stream management (XEP-0198) enabled,
//!   initial presence (which makes the server deliver what it stored while the user was
//!   offline) and a ping whose answer says the session is available.
//! - send: `<message type="chat">` to `{user}@domain` or `type="groupchat"` to the room,
//!   the envelope in `<body>`. The acceptance is XEP-0198: every stanza sent is counted,
//!   an `<r/>` follows each batch of sends, and the server's `<a h="N"/>` accepts every tag
//!   up to stanza N (a FIFO of tags, as MQTT's PUBACKs).
//! - join: MUC presence to `group@muc_domain/nick`; a room this user created (status 201)
//!   is configured as an instant room. The room's reflection of one's own message is
//!   dropped. Joining a room again asks for its history, and history messages this user
//!   already had are dropped (the overlap of a rejoin, not a duplicate). Without
//!   `muc_domain`, the first login of a run with group traffic finds the MUC service by
//!   service discovery ([`disco`]); a join that fails is a `join_failed` error.
//! - fetch missed: the offline messages the server delivers after the initial presence,
//!   with `fetch = "mam"` merged with the user's MAM archive (XEP-0313, [`mam`]) so each
//!   message comes once, and the room history of a rejoin, collected until the stream goes
//!   quiet. The final verification sends presence again, for what the server left in
//!   offline storage.
//! - a broken connection resumes its XEP-0198 session; what the server had not
//!   acknowledged past the `h` of its `<resumed/>` is sent again.
//! - signals: read receipts as XEP-0333 markers stored for a sender away, typing as
//!   XEP-0085 chat states, presence over mutual roster subscriptions, each with its token
//!   as the stanza id (presence: its status); see `session/signals.rs`.
//! - heartbeat: `<r/>` (XEP-0198) or a whitespace keep-alive; server pings (XEP-0199) are
//!   answered.
//! - received messages are acknowledged (`<a h/>`) only once the engine has them: what
//!   arrives while a user closes (unavailable presence, acks, end of stream) stays
//!   unacknowledged, and the server stores it offline for the next connection.
//!
//! The XML stream is quick-xml under a small framer ([`codec`]) rather than tokio-xmpp with
//! xmpp-parsers: tokio-xmpp 6 brings its own resolver (hickory), a second TLS provider
//! (aws-lc by default), a task per client and its own reconnect logic, and has neither
//! in-band registration nor a way to see XEP-0198 acks per stanza; xmpp-parsers alone
//! would add minidom, rxml, xso and their macros to parse the handful of stanzas a load
//! test exchanges.

pub(crate) mod codec;
mod disco;
mod login;
mod mam;
mod options;
mod resume;
mod sasl;
mod session;
mod sm;
mod stream;

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use codec::Element;
pub use options::{Fetch, Options, Sasl, Tls};
pub use resume::XmppResume;
pub use session::XmppSession;

use super::{
    Auth, AuthForm, Caps, Config, Connected, Failure, OptionError, Scheme, Signals, Spec, UserCtx,
};
use crate::driver::kit::connect::Connector;
use crate::driver::kit::tls;
use crate::vocab::TrafficKind;

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
    pub const ROSTER: &str = "jabber:iq:roster";
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
/// How long a join waits for the room's answer before it sends the join again: a room
/// that lost the presence never answers it (an ejabberd 23.01 room once left a join
/// unanswered for 20 s while its other members' joins were answered at once).
const JOIN_SILENCE: Duration = Duration::from_secs(5);

/// The XMPP driver, built once per run.
#[derive(Debug)]
pub struct XmppDriver {
    opts: Arc<Options>,
    /// TCP to the server (TLS from the start for `xmpps://`), and the connect time limit.
    connector: Connector,
    /// TLS after `<starttls/>` (`tls = "starttls"`).
    starttls: Option<tls::Client>,
    domain: String,
    /// The MUC service: `muc_domain`, or what discovery found on the first login of a run
    /// with group traffic (`None`: the server lists none).
    muc_domain: tokio::sync::OnceCell<Option<String>>,
    /// The run has group traffic: the MUC service must be known.
    needs_muc: bool,
    username: String,
    password: String,
    max_body: usize,
    /// When the run began: a MAM fetch of a user that never had an archived message
    /// starts here.
    started: SystemTime,
}

/// The TLS client for the server of `domain`: the CA file's certificates, or the system's
/// roots (see [`tls::client_config`]).
fn tls_client(ca_file: Option<&std::path::Path>, domain: &str) -> Result<tls::Client, OptionError> {
    let config = tls::client_config(ca_file, |msg| OptionError::option("xmpp", "ca_file", msg))?;
    tls::Client::new(config, domain).map_err(|e| OptionError::option("xmpp", "domain", e))
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
        kinds: &[TrafficKind::Direct, TrafficKind::Group, TrafficKind::Idle],
        requests: &[],
        auth: &[AuthForm::Password],
        source_addresses: false,
        files: &[],
        caps: Caps {
            acceptance: true,
            needs_prior_connect: true,
            fetch_missed: true,
            filters_own_echoes: true,
            fetch_needs_receipt: false,
            // A room replays the last `muc_history` messages to a member that rejoins.
            group_history: Some(options::DEFAULT_HISTORY),
            skips_history: false,
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
        let host = config.endpoint.as_ref().map(|ep| ep.host.clone());
        let domain = opts.domain.clone().or(host).unwrap_or_default();
        let tls = match direct_tls || opts.tls == Tls::StartTls {
            true => Some(tls_client(opts.ca_file.as_deref(), &domain)?),
            false if opts.ca_file.is_some() => {
                return Err(OptionError::option(
                    "xmpp",
                    "ca_file",
                    "a CA file is for TLS: set `tls = \"starttls\"` or use an xmpps:// URL",
                ))
            }
            false => None,
        };
        let (connector, starttls) = match direct_tls {
            true => (Connector::plain(config).with_tls(tls), None),
            false => (Connector::plain(config), tls),
        };
        let muc_domain = match &opts.muc_domain {
            Some(set) => tokio::sync::OnceCell::new_with(Some(Some(set.clone()))),
            None => tokio::sync::OnceCell::new(),
        };
        Ok(XmppDriver {
            opts: Arc::new(opts),
            connector,
            starttls,
            domain,
            muc_domain,
            needs_muc: config.kinds.contains(&"group"),
            username,
            password,
            max_body: config.max_body,
            started: SystemTime::now(),
        })
    }

    /// Without stream management there are no acks: no acceptance. A rejoined room
    /// replays `muc_history` messages at most.
    fn caps(&self) -> Caps {
        Caps {
            acceptance: self.opts.stream_management,
            group_history: Some(self.opts.muc_history),
            ..Self::SPEC.caps
        }
    }

    /// Read receipts (XEP-0333 markers, stored offline), typing (XEP-0085 chat states)
    /// and presence (roster subscriptions, RFC 6121): see [`session`]'s `signals`.
    fn signals(&self) -> Signals {
        Signals {
            receipts: true,
            typing: true,
            presence: true,
            ..Signals::default()
        }
    }

    async fn connect(
        &self,
        user: &UserCtx,
        mut resume: XmppResume,
    ) -> Result<Connected<XmppSession>, (Failure, XmppResume)> {
        let started = Instant::now();
        let login = self.login(user, &mut resume, started);
        match self.connector.within("login", login).await {
            Ok(done) => {
                let handshake = done.handshake;
                let account = resume.account.take();
                match XmppSession::new(self, user, done, resume) {
                    Ok(mut session) => {
                        let login = started.elapsed().saturating_sub(handshake);
                        // Once per run, not part of any user's login time.
                        self.find_muc(&mut session).await;
                        Ok(Connected {
                            session,
                            handshake,
                            login,
                            account,
                            no_resume_point: false,
                        })
                    }
                    Err(failed) => {
                        let (f, mut resume) = *failed;
                        resume.account = account;
                        Err((f, resume))
                    }
                }
            }
            Err(f) => Err((f, resume)),
        }
    }
}

impl XmppDriver {
    /// Tells `session` the MUC service, discovering it first when no login of the run has
    /// yet. A discovery that found no service is kept; one that failed (no answer) is
    /// tried again by the next login, and this session's joins fail meanwhile.
    async fn find_muc(&self, session: &mut XmppSession) {
        if !self.needs_muc {
            return;
        }
        let found = self
            .muc_domain
            .get_or_try_init(|| session.discover_muc())
            .await
            .cloned();
        session.set_muc(found);
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
