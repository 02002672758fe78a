//! The `mqtt` driver: every virtual user is one MQTT 3.1.1 or 5 client ([`conn`]: a small
//! client of our own over rumqttc's packet codec).
//!
//! The mapping, in full in `docs/drivers/mqtt.md`:
//!
//! - connect: CONNECT/CONNACK with client id `ms-{run id:08x}-{user}`, optional
//!   username/password, clean session off by default (persistent sessions); then SUBSCRIBE
//!   to the user's inbox topic unless the broker resumed the session.
//! - send: PUBLISH to the recipient's inbox topic or the group topic. PUBACK (QoS 1) or
//!   PUBCOMP (QoS 2) is the acceptance; QoS 0 has none.
//! - join: SUBSCRIBE to the group topic (MQTT 5: `no_local`), waiting for SUBACK.
//! - fetch missed: after a reconnect that resumed a session, the broker replays what it
//!   queued; everything that arrives until the replay goes quiet is the missed messages.
//! - heartbeat: MQTT keep-alive: PINGREQ at every heartbeat, or from the connection itself
//!   when heartbeats come less often than the keep-alive needs.

pub(crate) mod conn;
pub mod options;
mod session;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use conn::{Conn, Hello, Setup};
pub use options::{Options, Version};

use super::{Auth, AuthForm, Caps, Config, Connected, Failure, OptionError, Scheme, Spec, UserCtx};
use crate::driver::kit::connect::Connector;
use crate::vocab::TrafficKind;
pub use session::MqttSession;

/// The longest a replay after a reconnect is collected as missed messages; what comes
/// later is an ordinary push.
const REPLAY_LIMIT: Duration = Duration::from_secs(60);
/// How long closing waits for the DISCONNECT to be written.
const CLOSE_WAIT: Duration = Duration::from_secs(1);
/// MQTT framing and topic allowance on top of the largest body.
const PACKET_OVERHEAD: usize = 64 * 1024;
/// Read chunks hold the largest message and a topic when it fits in these bounds: a
/// read takes a few small messages at once, and an idle connection holds no chunk.
const READ_CHUNK: (usize, usize) = (1 << 10, 16 << 10);

/// The MQTT driver, built once per run.
#[derive(Debug)]
pub struct MqttDriver {
    opts: Arc<Options>,
    setup: Setup,
    run_id: u32,
    auth: Auth,
    /// TCP (and TLS for `mqtts://`) to the broker, and the connect time limit.
    connector: Connector,
}

impl MqttDriver {
    /// The resolved options.
    pub fn options(&self) -> &Options {
        &self.opts
    }

    /// Connects `user`, bounded by the connect timeout; with `clean`, the broker keeps
    /// nothing after it disconnects, with `fresh` (MQTT 5) it drops what it kept.
    async fn open(
        &self,
        user: &UserCtx,
        fresh: bool,
        clean: bool,
    ) -> Result<(Conn, bool), Failure> {
        let hello = Hello {
            client_id: format!("ms-{:08x}-{}", self.run_id, user.id),
            login: match &self.auth {
                Auth::Password { username, password } => Some((
                    username.replace("{user}", &user.id),
                    password.replace("{user}", &user.id),
                )),
                Auth::None | Auth::Secret(_) => None,
            },
            clean_start: clean || (fresh && self.opts.version == Version::V5),
            expiry: match clean {
                true => 0,
                false => self.opts.session_expiry.as_secs() as u32,
            },
        };
        let open = async {
            let io = self.connector.connect(user.ix).await?;
            Conn::open(io, &self.setup, &hello).await
        };
        self.connector.within("CONNACK", open).await
    }
}

impl super::Driver for MqttDriver {
    const SPEC: Spec = Spec {
        name: "mqtt",
        schemes: &[
            Scheme {
                name: "mqtt",
                default_port: 1883,
                tls: false,
                example: "mqtt://127.0.0.1:1883",
            },
            Scheme {
                name: "mqtts",
                default_port: 8883,
                tls: true,
                example: "mqtts://broker.example.com",
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
            filters_own_echoes: false,
            fetch_needs_receipt: false,
            group_history: None,
            skips_history: false,
        },
    };

    type Session = MqttSession;

    /// Checks `[target.mqtt]` and the endpoint (TLS, CA file) before anything connects.
    fn new(config: &Config) -> Result<Self, OptionError> {
        let opts = Options::parse(&config.options, config.heartbeat)?;
        let tls = config.endpoint.as_ref().is_some_and(|ep| ep.tls());
        if opts.ca_file.is_some() && !tls {
            return Err(OptionError::option(
                "mqtt",
                "ca_file",
                "a CA file is for mqtts:// URLs; this target is mqtt://",
            ));
        }
        #[cfg(feature = "mqtt-tls")]
        let connector = Connector::new(config)?;
        #[cfg(not(feature = "mqtt-tls"))]
        if tls {
            return Err(OptionError::url(
                "this msgstorm was built without TLS for MQTT (feature `mqtt-tls`)",
            ));
        }
        #[cfg(not(feature = "mqtt-tls"))]
        let connector = Connector::plain(config);
        // PINGREQ goes out at every heartbeat; only when heartbeats are off or rarer than
        // the keep-alive does the connection keep a timer of its own.
        let self_ping = !opts.keep_alive.is_zero()
            && config
                .heartbeat
                .is_none_or(|hb| hb.is_zero() || hb > opts.keep_alive);
        let setup = Setup {
            v5: opts.version == Version::V5,
            qos: opts.qos,
            keep_alive: opts.keep_alive,
            self_ping,
            max_packet: config.max_body + PACKET_OVERHEAD,
            read_chunk: (config.max_body + 256).clamp(READ_CHUNK.0, READ_CHUNK.1),
            max_inflight: opts.max_inflight,
        };
        Ok(MqttDriver {
            opts: Arc::new(opts),
            setup,
            run_id: config.run_id,
            auth: config.auth.clone(),
            connector,
        })
    }

    /// QoS 0 has no acceptance; a clean session, or QoS 0 (which brokers need not queue),
    /// keeps nothing for an offline user.
    fn promise(&self) -> super::Promise {
        // QoS 0 is at most once (no redelivery, no order across a reconnect); QoS 1 at
        // least once (a redelivery after a lost PUBACK is a duplicate); QoS 2 exactly once.
        super::Promise {
            every: self.opts.qos > 0,
            once: self.opts.qos != 1,
            in_order: self.opts.qos > 0,
        }
    }

    fn caps(&self) -> Caps {
        let persistent = !self.opts.clean_session;
        Caps {
            acceptance: self.opts.qos > 0,
            needs_prior_connect: persistent,
            fetch_missed: persistent && self.opts.qos > 0,
            filters_own_echoes: false,
            fetch_needs_receipt: false,
            group_history: None,
            skips_history: false,
        }
    }

    async fn forget(&self, user: &UserCtx) {
        if self.opts.clean_session {
            return;
        }
        // A clean-session connection replaces the stored session; its DISCONNECT ends it.
        let end = async {
            let (mut conn, _) = self.open(user, true, true).await?;
            conn.disconnect().await
        };
        let _ = tokio::time::timeout(CLOSE_WAIT + self.connector.timeout(), end).await;
    }

    async fn connect(
        &self,
        user: &UserCtx,
        mut resume: Subscriptions,
    ) -> Result<Connected<MqttSession>, (Failure, Subscriptions)> {
        let started = Instant::now();
        // MQTT 5: a user's first connection of the run starts a clean session, so nothing
        // of an older run with the same client id is replayed into this one.
        let fresh = !resume.established;
        let (conn, session_present) = match self.open(user, fresh, self.opts.clean_session).await {
            Ok(c) => c,
            Err(f) => return Err((f, resume)),
        };
        let handshake = started.elapsed();
        if !session_present {
            resume.groups.clear();
        }
        let mut session = MqttSession {
            conn,
            opts: self.opts.clone(),
            pending: VecDeque::new(),
            replaying: session_present,
            resume,
            subscribe_timeout: self.connector.timeout(),
        };
        if !session_present {
            let inbox = self.opts.inbox(&user.id);
            if let Err(f) = session.subscribe(&inbox, false).await {
                return Err((f, session.resume));
            }
        }
        session.resume.established = !self.opts.clean_session;
        Ok(Connected {
            session,
            handshake,
            login: started.elapsed() - handshake,
            account: None,
            no_resume_point: false,
        })
    }
}

/// What an MQTT user remembers between connections: whether the broker holds a session
/// for it, and the group topics that session subscribes to.
#[derive(Debug, Default)]
pub struct Subscriptions {
    established: bool,
    groups: Vec<String>,
}
