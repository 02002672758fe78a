//! The `mqtt` driver: every virtual user is one MQTT 3.1.1 or 5 client (rumqttc).
//!
//! The mapping, in full in `docs/drivers/mqtt.md`:
//!
//! - connect: CONNECT/CONNACK with client id `ms-{run id:08x}-{user}`, optional
//!   username/password, clean session off by default (persistent sessions); then SUBSCRIBE
//!   to the user's inbox topic unless the broker resumed the session.
//! - send: PUBLISH to the recipient's inbox topic or the group topic. PUBACK (QoS 1) or
//!   PUBCOMP (QoS 2) is the acceptance; QoS 0 has none. rumqttc assigns packet ids inside
//!   its event loop, in the order publishes were queued, so the driver pairs each
//!   `Outgoing::Publish(pkid)` with the oldest queued tag.
//! - join: SUBSCRIBE to the group topic (MQTT 5: `no_local`), waiting for SUBACK.
//! - fetch missed: after a reconnect that resumed a session, the broker replays what it
//!   queued; everything that arrives until the replay goes quiet is the missed messages.
//! - heartbeat: MQTT keep-alive, sent by rumqttc's event loop itself.

mod conn;
pub mod options;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use conn::{Conn, Wire};
pub use options::{Options, Version};

use super::{
    Auth, AuthForm, Caps, Config, Connected, Dest, Event, Failure, OptionError, Scheme, Session,
    Spec, UserCtx,
};
use crate::metrics::ErrorKind;

/// The longest a replay after a reconnect is collected as missed messages; what comes
/// later is an ordinary push.
const REPLAY_LIMIT: Duration = Duration::from_secs(60);
/// How long closing waits for the DISCONNECT to be written.
const CLOSE_WAIT: Duration = Duration::from_secs(1);
/// MQTT framing and topic allowance on top of the largest body.
const PACKET_OVERHEAD: usize = 64 * 1024;

/// The MQTT driver, built once per run.
#[derive(Debug)]
pub struct MqttDriver {
    opts: Arc<Options>,
    host: String,
    port: u16,
    run_id: u32,
    auth: Auth,
    connect_timeout: Duration,
    max_packet: usize,
    #[cfg(feature = "mqtt-tls")]
    tls: Option<rumqttc::TlsConfiguration>,
}

impl MqttDriver {
    /// The resolved options.
    pub fn options(&self) -> &Options {
        &self.opts
    }

    /// A new, unconnected client for `user`.
    fn conn(&self, user: &str, fresh: bool) -> Conn {
        self.client(user, fresh, self.opts.clean_session)
    }

    /// A new client for `user`; with `clean`, the broker keeps nothing after it disconnects.
    fn client(&self, user: &str, fresh: bool, clean: bool) -> Conn {
        let o = &self.opts;
        let id = format!("ms-{:08x}-{user}", self.run_id);
        let creds = match &self.auth {
            Auth::Password { username, password } => Some((
                username.replace("{user}", user),
                password.replace("{user}", user),
            )),
            Auth::None | Auth::Secret(_) => None,
        };
        let timeout_s = self.connect_timeout.as_secs().max(1);
        match o.version {
            Version::V4 => {
                let mut m = rumqttc::MqttOptions::new(id, self.host.clone(), self.port);
                m.set_keep_alive(o.keep_alive)
                    .set_clean_session(clean)
                    .set_manual_acks(true)
                    .set_inflight(o.max_inflight)
                    .set_max_packet_size(self.max_packet, self.max_packet);
                if let Some((u, p)) = creds {
                    m.set_credentials(u, p);
                }
                #[cfg(feature = "mqtt-tls")]
                if let Some(tls) = &self.tls {
                    m.set_transport(rumqttc::Transport::tls_with_config(tls.clone()));
                }
                let mut net = rumqttc::NetworkOptions::new();
                net.set_tcp_nodelay(true);
                net.set_connection_timeout(timeout_s);
                Conn::v4(m, net)
            }
            Version::V5 => {
                let mut m = rumqttc::v5::MqttOptions::new(id, self.host.clone(), self.port);
                let expiry = if clean {
                    0
                } else {
                    o.session_expiry.as_secs() as u32
                };
                m.set_keep_alive(o.keep_alive)
                    .set_clean_start(clean || fresh)
                    .set_manual_acks(true)
                    .set_session_expiry_interval(Some(expiry))
                    .set_outgoing_inflight_upper_limit(o.max_inflight)
                    .set_max_packet_size(Some(self.max_packet as u32))
                    .set_connection_timeout(timeout_s);
                if let Some((u, p)) = creds {
                    m.set_credentials(u, p);
                }
                #[cfg(feature = "mqtt-tls")]
                if let Some(tls) = &self.tls {
                    m.set_transport(rumqttc::Transport::tls_with_config(tls.clone()));
                }
                let mut net = rumqttc::NetworkOptions::new();
                net.set_tcp_nodelay(true);
                m.set_network_options(net);
                Conn::v5(m)
            }
        }
    }
}

/// The rustls client configuration for `mqtts://`: the CA file's certificates, or the
/// system's roots without one (see [`super::tls::client_config`]).
#[cfg(feature = "mqtt-tls")]
fn tls_config(ca_file: Option<&std::path::Path>) -> Result<rumqttc::TlsConfiguration, OptionError> {
    super::tls::client_config(ca_file, |msg| OptionError::option("mqtt", "ca_file", msg))
        .map(rumqttc::TlsConfiguration::Rustls)
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
        kinds: &["direct", "group", "idle"],
        requests: &[],
        auth: &[AuthForm::Password],
        source_addresses: false,
        caps: Caps {
            acceptance: true,
            presence: true,
            fetch_missed: true,
            filters_own_echoes: false,
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
        let tls = match tls {
            true => Some(tls_config(opts.ca_file.as_deref())?),
            false => None,
        };
        #[cfg(not(feature = "mqtt-tls"))]
        if tls {
            return Err(OptionError::url(
                "this msgstorm was built without TLS for MQTT (feature `mqtt-tls`)",
            ));
        }
        let (host, port) = config
            .endpoint
            .as_ref()
            .map_or((String::new(), 0), |ep| (ep.host.clone(), ep.port));
        Ok(MqttDriver {
            opts: Arc::new(opts),
            host,
            port,
            run_id: config.run_id,
            auth: config.auth.clone(),
            connect_timeout: config.connect_timeout,
            max_packet: config.max_body + PACKET_OVERHEAD,
            #[cfg(feature = "mqtt-tls")]
            tls,
        })
    }

    /// QoS 0 has no acceptance; a clean session, or QoS 0 (which brokers need not queue),
    /// keeps nothing for an offline user.
    fn caps(&self) -> Caps {
        let persistent = !self.opts.clean_session;
        Caps {
            acceptance: self.opts.qos > 0,
            presence: persistent,
            fetch_missed: persistent && self.opts.qos > 0,
            filters_own_echoes: false,
        }
    }

    async fn forget(&self, user: &UserCtx) {
        if self.opts.clean_session {
            return;
        }
        // A clean-session connection replaces the stored session; its DISCONNECT ends it.
        let mut conn = self.client(&user.id, true, true);
        let end = async {
            loop {
                match conn.next().await? {
                    Wire::ConnAck { .. } => {
                        conn.disconnect()?;
                    }
                    Wire::DisconnectSent => return Ok::<(), Failure>(()),
                    _ => {}
                }
            }
        };
        let _ = tokio::time::timeout(CLOSE_WAIT, end).await;
    }

    async fn connect(
        &self,
        user: &UserCtx,
        mut resume: Subscriptions,
    ) -> Result<Connected<MqttSession>, (Failure, Subscriptions)> {
        let started = Instant::now();
        // MQTT 5: a user's first connection of the run starts a clean session, so nothing
        // of an older run with the same client id is replayed into this one.
        let mut conn = self.conn(&user.id, !resume.established);
        let session_present = match tokio::time::timeout(self.connect_timeout, conn.next()).await {
            Ok(Ok(Wire::ConnAck { session_present })) => session_present,
            Ok(Ok(other)) => {
                let f = Failure::new(
                    ErrorKind::Protocol,
                    format!("expected CONNACK, got {other:?}"),
                );
                return Err((f, resume));
            }
            Ok(Err(f)) => return Err((f, resume)),
            Err(_) => {
                let f = Failure::new(
                    ErrorKind::ConnectTimeout,
                    format!("no CONNACK within {:?}", self.connect_timeout),
                );
                return Err((f, resume));
            }
        };
        let handshake = started.elapsed();
        if !session_present {
            resume.groups.clear();
        }
        let mut session = MqttSession {
            conn,
            opts: self.opts.clone(),
            pending: VecDeque::new(),
            tags: VecDeque::new(),
            inflight: Vec::new(),
            acks: VecDeque::new(),
            replaying: session_present,
            resume,
            subscribe_timeout: self.connect_timeout,
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

/// QoS and packet id of a received message to acknowledge (`None`: QoS 0).
type Ack = Option<(u8, u16)>;

/// One user's MQTT connection.
///
/// Received messages are acknowledged (PUBACK / PUBREC) only once they are handed to the
/// engine: a message that arrives while the session closes stays unacknowledged, so the
/// broker delivers it again to the user's next connection instead of losing it.
#[derive(Debug)]
pub struct MqttSession {
    conn: Conn,
    opts: Arc<Options>,
    /// Events seen while waiting for something else, with the acknowledgement each one's
    /// message is owed once the engine has it.
    pending: VecDeque<(Event, Ack)>,
    /// Tags of publishes queued in the client channel, oldest first.
    tags: VecDeque<u64>,
    /// Tag of the publish in flight with each packet id.
    inflight: Vec<Option<u64>>,
    /// Acknowledgements of received messages not yet queued in the client channel.
    acks: VecDeque<(u8, u16)>,
    /// The broker resumed a session: what arrives first is its replay of queued messages.
    replaying: bool,
    resume: Subscriptions,
    subscribe_timeout: Duration,
}

impl MqttSession {
    /// Turns what the connection did into an engine event, or `None` for bookkeeping.
    fn absorb(&mut self, w: Wire) -> Option<(Event, Ack)> {
        let accepted = |tag: u64, refused: Option<String>| match refused {
            None => Event::Accepted { tag },
            Some(why) => Event::Refused {
                tag,
                failure: Failure::new(ErrorKind::SendFailed, format!("broker refused: {why}")),
            },
        };
        match w {
            Wire::Publish { payload, ack } => Some((
                Event::Delivered {
                    body: String::from_utf8(payload)
                        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
                        .into(),
                },
                ack,
            )),
            Wire::Sent(pkid) => {
                let tag = self.tags.pop_front()?;
                if self.opts.qos > 0 {
                    let i = usize::from(pkid);
                    if i >= self.inflight.len() {
                        self.inflight.resize(i + 1, None);
                    }
                    self.inflight[i] = Some(tag);
                }
                None
            }
            Wire::PubAck { pkid, refused } | Wire::PubComp { pkid, refused } => {
                let tag = self.inflight.get_mut(usize::from(pkid))?.take()?;
                Some((accepted(tag, refused), None))
            }
            Wire::PubRec {
                pkid,
                refused: Some(why),
            } => {
                let tag = self.inflight.get_mut(usize::from(pkid))?.take()?;
                Some((accepted(tag, Some(why)), None))
            }
            Wire::PubRec { refused: None, .. }
            | Wire::ConnAck { .. }
            | Wire::SubAck(_)
            | Wire::DisconnectSent
            | Wire::Other => None,
        }
    }

    /// The next thing the connection did, after queueing owed acknowledgements.
    /// Cancel-safe.
    async fn wire(&mut self) -> Result<Wire, Failure> {
        while let Some(&(qos, pkid)) = self.acks.front() {
            match self.conn.ack(qos, pkid) {
                Ok(true) => {
                    self.acks.pop_front();
                }
                Ok(false) => break,
                Err(f) => return Err(f),
            }
        }
        self.conn.next().await
    }

    /// The engine has the event: owe its message's acknowledgement.
    fn hand_out(&mut self, (ev, ack): (Event, Ack)) -> Event {
        if let Some(a) = ack {
            self.acks.push_back(a);
        }
        ev
    }

    /// Drives the connection once, keeping any event for later.
    async fn step(&mut self) -> Result<(), Failure> {
        let w = self.wire().await?;
        if let Some(held) = self.absorb(w) {
            self.pending.push_back(held);
        }
        Ok(())
    }

    /// Subscribes to `filter` and waits for the SUBACK (one subscription at a time, so the
    /// next SUBACK is its answer).
    async fn subscribe(&mut self, filter: &str, no_local: bool) -> Result<(), Failure> {
        let qos = self.opts.qos;
        let limit = self.subscribe_timeout;
        let wait = async {
            while !self.conn.subscribe(filter, qos, no_local)? {
                self.step().await?;
            }
            loop {
                match self.wire().await? {
                    Wire::SubAck(Ok(())) => return Ok(()),
                    Wire::SubAck(Err(why)) => {
                        return Err(Failure::new(
                            ErrorKind::Protocol,
                            format!("subscribing to {filter}: {why}"),
                        ))
                    }
                    w => {
                        if let Some(held) = self.absorb(w) {
                            self.pending.push_back(held);
                        }
                    }
                }
            }
        };
        match tokio::time::timeout(limit, wait).await {
            Ok(r) => r,
            Err(_) => Err(Failure::new(
                ErrorKind::Timeout,
                format!("no SUBACK for {filter} within {limit:?}"),
            )),
        }
    }
}

impl Session for MqttSession {
    type Resume = Subscriptions;

    async fn send(&mut self, tag: u64, dest: Dest<'_>, body: &str) -> Result<(), Failure> {
        let topic = match dest {
            Dest::User(u) => self.opts.inbox(u),
            Dest::Group(g) => self.opts.group(g),
        };
        if topic.contains(['+', '#']) {
            return Err(Failure::new(
                ErrorKind::SendFailed,
                format!("`{topic}` is not a valid topic to publish to"),
            ));
        }
        let qos = self.opts.qos;
        while !self.conn.publish(&topic, qos, body)? {
            // The request channel is full: let the event loop write some of it.
            self.step().await?;
        }
        self.tags.push_back(tag);
        Ok(())
    }

    async fn request(&mut self, _tag: u64, _name: &'static str) -> Result<(), Failure> {
        Err(Failure::new(
            ErrorKind::RequestFailed,
            "MQTT has no request/response workload",
        ))
    }

    async fn heartbeat(&mut self) -> Result<(), Failure> {
        // rumqttc's event loop sends PINGREQ every keep-alive interval by itself.
        match self.conn.failure() {
            Some(f) => Err(f.clone()),
            None => Ok(()),
        }
    }

    async fn flush(&mut self) -> Result<(), Failure> {
        // Queued publishes are written by the event loop, which `next_event` drives.
        Ok(())
    }

    async fn join(&mut self, group: &str) -> Result<(), Failure> {
        if self.resume.groups.iter().any(|g| g == group) {
            return Ok(());
        }
        let topic = self.opts.group(group);
        self.subscribe(&topic, true).await?;
        if !self.opts.clean_session {
            self.resume.groups.push(group.to_owned());
        }
        Ok(())
    }

    async fn fetch_missed(&mut self, out: &mut Vec<String>) -> Result<(), Failure> {
        if !std::mem::take(&mut self.replaying) {
            return Ok(());
        }
        // The replay began right after CONNACK: what arrived while joining is part of it.
        let mut rest = VecDeque::with_capacity(self.pending.len());
        for held in std::mem::take(&mut self.pending) {
            match held {
                (Event::Delivered { .. }, _) => {
                    if let Event::Delivered { body } = self.hand_out(held) {
                        out.push(body.into());
                    }
                }
                other => rest.push_back(other),
            }
        }
        self.pending = rest;
        let quiet = self.opts.replay_quiet;
        let until = Instant::now() + REPLAY_LIMIT;
        while Instant::now() < until {
            match tokio::time::timeout(quiet, self.wire()).await {
                Err(_) => break,
                Ok(Err(f)) => return Err(f),
                Ok(Ok(w)) => match self.absorb(w) {
                    Some(held @ (Event::Delivered { .. }, _)) => {
                        if let Event::Delivered { body } = self.hand_out(held) {
                            out.push(body.into());
                        }
                    }
                    Some(held) => self.pending.push_back(held),
                    None => {}
                },
            }
        }
        Ok(())
    }

    async fn next_event(&mut self) -> Event {
        if let Some(held) = self.pending.pop_front() {
            return self.hand_out(held);
        }
        loop {
            match self.wire().await {
                Ok(w) => {
                    if let Some(held) = self.absorb(w) {
                        return self.hand_out(held);
                    }
                }
                Err(f) => return Event::Closed(f),
            }
        }
    }

    async fn close(mut self) -> Subscriptions {
        // Owed acknowledgements go out before the DISCONNECT; messages arriving meanwhile
        // stay unacknowledged, for the broker to deliver to the next connection.
        let wait = async {
            while !(self.acks.is_empty() && self.conn.disconnect()?) {
                self.wire().await?;
            }
            while !matches!(self.conn.next().await?, Wire::DisconnectSent) {}
            Ok::<(), Failure>(())
        };
        let _ = tokio::time::timeout(CLOSE_WAIT, wait).await;
        self.resume
    }

    fn into_resume(self) -> Subscriptions {
        self.resume
    }
}
