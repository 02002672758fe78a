//! One MQTT 3.1.1 or 5 connection: the client's state machine, written here over
//! rumqttc's packet codec (`rumqttc::mqttbytes`, `rumqttc::v5::mqttbytes`) and the shared
//! transport of the drivers ([`Stream`], plain TCP or rustls).
//!
//! Why by hand: rumqttc's event loop allocates fixed per-client state that no option
//! sizes (an 8 KiB bitmap of incoming packet ids, queues for 100 events and 100 requests,
//! 8 KiB framed read and write buffers): 35 KiB of generator memory per idle user against
//! mosquitto (`bench/results/efficiency-2026-11-24-mqtt.md`). No other maintained tokio
//! client is lighter (see `docs/drivers/mqtt.md`). The protocol a load generator needs is
//! small; this client holds per connection only:
//!
//! - the socket;
//! - a read buffer while a packet is partly read (released once every packet read is
//!   parsed), read in chunks sized from the plan's largest message;
//! - a write buffer while bytes wait for the socket (released once written);
//! - the packet ids in flight, as many entries as publishes are unacknowledged.
//!
//! Both directions are cancel-safe: a read appends to the read buffer and a packet leaves
//! it only once complete; a write drops only the bytes the socket took.

use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use rumqttc::mqttbytes::{v4, QoS as QoS4};
use rumqttc::v5::mqttbytes::{v5, QoS as QoS5};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::super::Failure;
use crate::driver::kit::connect::Stream;
use crate::driver::kit::io_error::classify;
use crate::metrics::ErrorKind;

/// An MQTT 5 DISCONNECT without a reason code (remaining length 0).
const SHORT_DISCONNECT: [u8; 2] = [0xE0, 0x00];

/// Write-buffer size past which a publish is written at once instead of at the next flush.
const WRITE_COALESCE: usize = 64 << 10;

/// How to open a connection over a connected socket: the same for every user of a run.
#[derive(Debug, Clone)]
pub struct Setup {
    /// MQTT 5 (else 3.1.1).
    pub v5: bool,
    /// QoS of every publish and subscription.
    pub qos: u8,
    /// Keep-alive announced in CONNECT (zero: off).
    pub keep_alive: Duration,
    /// The connection sends its own PINGREQs (the engine's heartbeat does not come as
    /// often as the keep-alive needs).
    pub self_ping: bool,
    /// Largest packet read or written.
    pub max_packet: usize,
    /// Bytes asked of the socket per read.
    pub read_chunk: usize,
    /// Unacknowledged publishes at most (lowered by an MQTT 5 broker's receive maximum).
    pub max_inflight: u16,
}

/// What one CONNECT carries besides the [`Setup`].
#[derive(Debug)]
pub struct Hello {
    /// Client id.
    pub client_id: String,
    /// Username and password.
    pub login: Option<(String, String)>,
    /// 3.1.1 clean session / MQTT 5 clean start.
    pub clean_start: bool,
    /// MQTT 5 session expiry interval in seconds.
    pub expiry: u32,
}

/// What the connection reports to the session: what came in from the broker.
#[derive(Debug)]
pub enum Incoming {
    /// A message on a subscribed topic; acknowledge it with [`Conn::ack`] once the engine
    /// has it.
    Message {
        /// The body.
        payload: Bytes,
        /// QoS and packet id to acknowledge (`None` for QoS 0).
        ack: Option<(u8, u16)>,
    },
    /// The outcome of the publish sent with `tag`: PUBACK (QoS 1), PUBCOMP (QoS 2), or an
    /// MQTT 5 failure reason in PUBACK, PUBREC or PUBCOMP (`refused`).
    Outcome {
        /// The send's tag.
        tag: u64,
        /// Why the broker refused the message, if it did.
        refused: Option<String>,
    },
    /// Answer to a subscription; `Err` names a refused filter.
    SubAck(Result<(), String>),
}

/// A decoded packet of either version, in the terms the state machine acts on.
enum In {
    ConnAck {
        session_present: bool,
        refused: Option<Failure>,
        receive_max: Option<u16>,
    },
    Publish {
        qos: u8,
        pkid: u16,
        payload: Bytes,
    },
    PubAck(u16, Option<String>),
    PubRec(u16, Option<String>),
    PubRel(u16),
    PubComp(u16, Option<String>),
    SubAck(Result<(), String>),
    PingResp,
    Disconnect(Failure),
    Other,
}

/// A packet to write.
enum Out<'a> {
    /// CONNECT with the keep-alive in seconds and the largest packet accepted.
    Connect(&'a Hello, u16, usize),
    Publish {
        topic: String,
        qos: u8,
        pkid: u16,
        payload: Bytes,
    },
    PubAck(u16),
    PubRec(u16),
    PubRel(u16),
    PubComp(u16),
    Subscribe {
        filter: &'a str,
        qos: u8,
        pkid: u16,
        no_local: bool,
    },
    PingReq,
    Disconnect,
}

/// One MQTT connection after CONNACK: the socket and the [`Machine`] speaking over it.
#[derive(Debug)]
pub struct Conn {
    io: Stream,
    read_chunk: usize,
    /// Zero when the connection sends no PINGREQ of its own.
    self_ping: Duration,
    /// When the last bytes went out.
    last_write: Instant,
    m: Machine,
}

impl Conn {
    /// CONNECT/CONNACK over `io` (connected, TLS done); the caller bounds it in time.
    /// Returns the connection and whether the broker resumed a stored session.
    pub async fn open(io: Stream, setup: &Setup, hello: &Hello) -> Result<(Conn, bool), Failure> {
        let mut conn = Conn {
            io,
            read_chunk: setup.read_chunk,
            self_ping: match setup.self_ping {
                true => setup.keep_alive,
                false => Duration::ZERO,
            },
            last_write: Instant::now(),
            m: Machine::new(setup),
        };
        conn.m.connect(hello)?;
        conn.write_all().await?;
        let session_present = loop {
            if let Some(present) = conn.m.connack()? {
                break present;
            }
            conn.fill().await?;
        };
        Ok((conn, session_present))
    }

    /// The next thing the broker did that the session acts on; acknowledgements, pings
    /// and the QoS 2 handshake are answered here. Cancel-safe. After a failure every call
    /// returns that failure.
    pub async fn next(&mut self) -> Result<Incoming, Failure> {
        self.m.alive()?;
        let r = self.next_inner().await;
        if let Err(f) = &r {
            self.m.failed = Some(f.clone());
        }
        r
    }

    async fn next_inner(&mut self) -> Result<Incoming, Failure> {
        loop {
            if let Some(w) = self.m.step()? {
                return Ok(w);
            }
            // Nothing left to parse: what the packets read so far owe goes out in one
            // write before waiting for more.
            self.write_all().await?;
            if self.self_ping.is_zero() {
                self.fill().await?;
                continue;
            }
            let due = self.m.ping_sent.unwrap_or(self.last_write) + self.self_ping;
            // Boxed: the timer is only for connections that ping by themselves, and an
            // idle connection's read future stays small without it.
            if Box::pin(tokio::time::timeout_at(due.into(), self.fill()))
                .await
                .is_err()
            {
                self.m.ping()?;
            }
        }
    }

    /// Whether every in-flight slot is taken: a publish must wait for an outcome.
    pub fn full(&self) -> bool {
        self.m.full()
    }

    /// Queues a publish of `body` to `topic`; its outcome comes as [`Incoming::Outcome`]
    /// with `tag` (none for QoS 0). The caller waits while the connection is
    /// [`Conn::full`].
    pub async fn publish(&mut self, tag: u64, topic: String, body: &str) -> Result<(), Failure> {
        self.m.publish(tag, topic, body)?;
        if self.m.wbuf.len() >= WRITE_COALESCE {
            self.flush().await?;
        }
        Ok(())
    }

    /// Queues a SUBSCRIBE to `filter` (`no_local` is honoured by MQTT 5 only); the answer
    /// comes as [`Incoming::SubAck`].
    pub fn subscribe(&mut self, filter: &str, no_local: bool) -> Result<(), Failure> {
        self.m.subscribe(filter, no_local)
    }

    /// Queues the acknowledgement (PUBACK, or PUBREC for QoS 2) of a received message.
    pub fn ack(&mut self, qos: u8, pkid: u16) -> Result<(), Failure> {
        self.m.ack(qos, pkid)
    }

    /// The keep-alive: queues a PINGREQ unless one is unanswered; one unanswered for the
    /// whole keep-alive ends the connection (`timeout`).
    pub fn ping(&mut self) -> Result<(), Failure> {
        self.m.ping()
    }

    /// Writes a DISCONNECT after everything queued.
    pub async fn disconnect(&mut self) -> Result<(), Failure> {
        self.m.alive()?;
        self.m.put(Out::Disconnect)?;
        self.flush().await
    }

    /// Writes everything queued. Cancel-safe.
    pub async fn flush(&mut self) -> Result<(), Failure> {
        self.m.alive()?;
        let r = self.write_all().await;
        if let Err(f) = &r {
            self.m.failed = Some(f.clone());
        }
        r
    }

    async fn write_all(&mut self) -> Result<(), Failure> {
        if self.m.wbuf.is_empty() {
            return Ok(());
        }
        while !self.m.wbuf.is_empty() {
            let n = self
                .io
                .write(&self.m.wbuf)
                .await
                .map_err(|e| classify(&e))?;
            if n == 0 {
                return Err(closed());
            }
            self.m.wbuf.advance(n);
        }
        self.io.flush().await.map_err(|e| classify(&e))?;
        self.m.wbuf = BytesMut::new();
        self.last_write = Instant::now();
        Ok(())
    }

    /// Reads from the socket into the read buffer. An idle plain connection waits for
    /// readiness without a buffer and allocates one only to take what arrived.
    async fn fill(&mut self) -> Result<(), Failure> {
        let rbuf = &mut self.m.rbuf;
        let n = match &mut self.io {
            Stream::Plain(metered) => loop {
                metered.tcp.readable().await.map_err(|e| classify(&e))?;
                rbuf.reserve(self.read_chunk);
                match metered.tcp.try_read_buf(rbuf) {
                    Ok(n) => {
                        metered.meter.received(n);
                        break n;
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        if rbuf.is_empty() {
                            *rbuf = BytesMut::new();
                        }
                    }
                    Err(e) => return Err(classify(&e)),
                }
            },
            #[allow(unreachable_patterns)]
            io => {
                rbuf.reserve(self.read_chunk);
                io.read_buf(rbuf).await.map_err(|e| classify(&e))?
            }
        };
        match n {
            0 => Err(closed()),
            _ => Ok(()),
        }
    }
}

/// The client's protocol state without its socket: bytes the broker sent go into `rbuf`
/// ([`Machine::received`]), [`Machine::step`] parses and acts on them, and what the client
/// owes or queues waits in `wbuf` for the socket ([`Machine::take_written`]). [`Conn`] runs
/// it over a socket; tests and the fuzz target ([`crate::fuzzing::mqtt_client`]) drive it
/// with bytes.
#[derive(Debug)]
pub(crate) struct Machine {
    v5: bool,
    qos: u8,
    max_packet: usize,
    max_inflight: u16,
    keep_alive: Duration,
    rbuf: BytesMut,
    wbuf: BytesMut,
    /// Packet id and tag of every publish not yet acknowledged.
    inflight: Vec<(u16, u64)>,
    last_pkid: u16,
    /// When the PINGREQ not answered yet went out.
    ping_sent: Option<Instant>,
    failed: Option<Failure>,
}

impl Machine {
    /// The state of a new connection set up as `setup` says, before its CONNECT.
    pub(crate) fn new(setup: &Setup) -> Machine {
        Machine {
            v5: setup.v5,
            qos: setup.qos,
            max_packet: setup.max_packet,
            max_inflight: setup.max_inflight,
            keep_alive: setup.keep_alive,
            rbuf: BytesMut::new(),
            wbuf: BytesMut::new(),
            inflight: Vec::new(),
            last_pkid: 0,
            ping_sent: None,
            failed: None,
        }
    }

    /// Queues the CONNECT.
    pub(crate) fn connect(&mut self, hello: &Hello) -> Result<(), Failure> {
        let keep_alive = self.keep_alive.as_secs().min(u64::from(u16::MAX)) as u16;
        self.put(Out::Connect(hello, keep_alive, self.max_packet))
    }

    /// The broker's answer to the CONNECT, once it is in: whether it resumed a stored
    /// session (an MQTT 5 receive maximum lowers the in-flight limit), or why it refused.
    pub(crate) fn connack(&mut self) -> Result<Option<bool>, Failure> {
        let Some(packet) = self.parse()? else {
            return Ok(None);
        };
        match packet {
            In::ConnAck {
                refused: Some(f), ..
            } => Err(f),
            In::ConnAck {
                session_present,
                receive_max,
                ..
            } => {
                if let Some(max) = receive_max.filter(|&m| m > 0) {
                    self.max_inflight = self.max_inflight.min(max);
                }
                Ok(Some(session_present))
            }
            In::Disconnect(f) => Err(f),
            _ => Err(Failure::new(
                ErrorKind::Protocol,
                "expected CONNACK as the broker's first packet",
            )),
        }
    }

    /// Takes bytes the broker sent.
    pub(crate) fn received(&mut self, bytes: &[u8]) {
        self.rbuf.extend_from_slice(bytes);
    }

    /// Takes what the client wrote so far.
    pub(crate) fn take_written(&mut self) -> BytesMut {
        std::mem::take(&mut self.wbuf)
    }

    /// Acts on the packets read until one the session must hear of; `None` when more
    /// bytes are needed.
    pub(crate) fn step(&mut self) -> Result<Option<Incoming>, Failure> {
        while let Some(packet) = self.parse()? {
            if let Some(w) = self.absorb(packet)? {
                return Ok(Some(w));
            }
        }
        Ok(None)
    }

    /// Acts on one packet; `Some` when the session must hear of it.
    fn absorb(&mut self, packet: In) -> Result<Option<Incoming>, Failure> {
        let outcome = |m: &mut Machine, pkid: u16, refused: Option<String>| {
            let i = m.inflight.iter().position(|&(id, _)| id == pkid)?;
            let (_, tag) = m.inflight.swap_remove(i);
            Some(Incoming::Outcome { tag, refused })
        };
        let w = match packet {
            In::Publish { qos, pkid, payload } => Some(Incoming::Message {
                payload,
                ack: (qos > 0).then_some((qos, pkid)),
            }),
            In::PubAck(pkid, refused) | In::PubComp(pkid, refused) => outcome(self, pkid, refused),
            In::PubRec(pkid, Some(why)) => outcome(self, pkid, Some(why)),
            In::PubRec(pkid, None) => {
                self.put(Out::PubRel(pkid))?;
                None
            }
            In::PubRel(pkid) => {
                self.put(Out::PubComp(pkid))?;
                None
            }
            In::SubAck(r) => Some(Incoming::SubAck(r)),
            In::PingResp => {
                self.ping_sent = None;
                None
            }
            In::Disconnect(f) => return Err(f),
            In::ConnAck { .. } => {
                return Err(Failure::new(ErrorKind::Protocol, "a second CONNACK"));
            }
            In::Other => None,
        };
        Ok(w)
    }

    /// Publishes waiting for their outcome.
    pub(crate) fn in_flight(&self) -> usize {
        self.inflight.len()
    }

    /// Whether every in-flight slot is taken: a publish must wait for an outcome.
    pub(crate) fn full(&self) -> bool {
        self.qos > 0 && self.inflight.len() >= usize::from(self.max_inflight)
    }

    /// Queues a publish (see [`Conn::publish`]).
    pub(crate) fn publish(&mut self, tag: u64, topic: String, body: &str) -> Result<(), Failure> {
        self.alive()?;
        let pkid = match self.qos {
            0 => 0,
            _ => self.next_pkid(),
        };
        self.put(Out::Publish {
            topic,
            qos: self.qos,
            pkid,
            payload: Bytes::copy_from_slice(body.as_bytes()),
        })?;
        if self.qos > 0 {
            self.inflight.push((pkid, tag));
        }
        Ok(())
    }

    /// A packet id no publish in flight holds.
    fn next_pkid(&mut self) -> u16 {
        loop {
            self.last_pkid = self.last_pkid.checked_add(1).unwrap_or(1);
            let id = self.last_pkid;
            if !self.inflight.iter().any(|&(p, _)| p == id) {
                return id;
            }
        }
    }

    /// Queues a SUBSCRIBE (see [`Conn::subscribe`]).
    pub(crate) fn subscribe(&mut self, filter: &str, no_local: bool) -> Result<(), Failure> {
        self.alive()?;
        let pkid = self.next_pkid();
        self.put(Out::Subscribe {
            filter,
            qos: self.qos,
            pkid,
            no_local,
        })
    }

    /// Queues an acknowledgement (see [`Conn::ack`]).
    pub(crate) fn ack(&mut self, qos: u8, pkid: u16) -> Result<(), Failure> {
        self.alive()?;
        match qos {
            1 => self.put(Out::PubAck(pkid)),
            _ => self.put(Out::PubRec(pkid)),
        }
    }

    /// The keep-alive (see [`Conn::ping`]).
    pub(crate) fn ping(&mut self) -> Result<(), Failure> {
        self.alive()?;
        match self.ping_sent {
            Some(at) if at.elapsed() >= self.keep_alive => {
                let f = Failure::new(ErrorKind::Timeout, "no PINGRESP within the keep-alive");
                self.failed = Some(f.clone());
                Err(f)
            }
            Some(_) => Ok(()),
            None => {
                self.put(Out::PingReq)?;
                self.ping_sent = Some(Instant::now());
                Ok(())
            }
        }
    }

    fn alive(&self) -> Result<(), Failure> {
        match &self.failed {
            Some(f) => Err(f.clone()),
            None => Ok(()),
        }
    }

    /// The next whole packet in the read buffer, if one is.
    fn parse(&mut self) -> Result<Option<In>, Failure> {
        if self.rbuf.is_empty() {
            return Ok(None);
        }
        // The codec takes a packet out of the buffer once its frame is whole, then parses
        // it: "insufficient bytes" after that is a packet whose inner lengths run past its
        // frame, not a packet still arriving.
        let before = self.rbuf.len();
        let partial = |rbuf: &BytesMut, e: &dyn std::fmt::Display| match rbuf.len() == before {
            true => Ok(None),
            false => Err(unreadable(e)),
        };
        let packet = if self.v5 && self.rbuf.starts_with(&SHORT_DISCONNECT) {
            // MQTT 5 §3.14.2.1: no reason code means a normal disconnection; rumqttc's
            // codec refuses it as a packet without payload.
            self.rbuf.advance(SHORT_DISCONNECT.len());
            In::Disconnect(Failure::new(
                ErrorKind::ClosedByPeer,
                "the broker sent DISCONNECT: NormalDisconnection",
            ))
        } else if self.v5 {
            match v5::Packet::read(
                &mut self.rbuf,
                Some(u32::try_from(self.max_packet).unwrap_or(u32::MAX)),
            ) {
                Ok(p) => decode5(p),
                Err(e @ rumqttc::v5::mqttbytes::Error::InsufficientBytes(_)) => {
                    return partial(&self.rbuf, &e)
                }
                Err(e) => return Err(unreadable(&e)),
            }
        } else {
            match v4::Packet::read(&mut self.rbuf, self.max_packet) {
                Ok(p) => decode4(p),
                Err(e @ rumqttc::mqttbytes::Error::InsufficientBytes(_)) => {
                    return partial(&self.rbuf, &e)
                }
                Err(e) => return Err(unreadable(&e)),
            }
        };
        if self.rbuf.is_empty() {
            // Every packet read is parsed: give the chunk back while the connection idles.
            self.rbuf = BytesMut::new();
        }
        Ok(Some(packet))
    }

    /// Encodes `out` into the write buffer.
    fn put(&mut self, out: Out<'_>) -> Result<(), Failure> {
        let max = self.max_packet;
        let r = if self.v5 {
            encode5(out)
                .write(&mut self.wbuf, Some(max as u32))
                .map_err(|e| e.to_string())
        } else {
            encode4(out)
                .write(&mut self.wbuf, max)
                .map_err(|e| e.to_string())
        };
        r.map(drop)
            .map_err(|e| Failure::new(ErrorKind::SendFailed, format!("MQTT packet: {e}")))
    }
}

fn qos4(q: u8) -> QoS4 {
    match q {
        0 => QoS4::AtMostOnce,
        1 => QoS4::AtLeastOnce,
        _ => QoS4::ExactlyOnce,
    }
}

fn qos5(q: u8) -> QoS5 {
    match q {
        0 => QoS5::AtMostOnce,
        1 => QoS5::AtLeastOnce,
        _ => QoS5::ExactlyOnce,
    }
}

fn encode4(out: Out<'_>) -> v4::Packet {
    use v4::Packet as P;
    match out {
        Out::Connect(h, keep_alive, _) => {
            let mut c = v4::Connect::new(h.client_id.as_str());
            c.keep_alive = keep_alive;
            c.clean_session = h.clean_start;
            c.login = h.login.as_ref().map(|(u, p)| v4::Login::new(u, p));
            P::Connect(c)
        }
        Out::Publish {
            topic,
            qos,
            pkid,
            payload,
        } => {
            let mut p = v4::Publish::from_bytes(topic, qos4(qos), payload);
            p.pkid = pkid;
            P::Publish(p)
        }
        Out::PubAck(id) => P::PubAck(v4::PubAck::new(id)),
        Out::PubRec(id) => P::PubRec(v4::PubRec::new(id)),
        Out::PubRel(id) => P::PubRel(v4::PubRel::new(id)),
        Out::PubComp(id) => P::PubComp(v4::PubComp::new(id)),
        Out::Subscribe {
            filter, qos, pkid, ..
        } => {
            let mut s = v4::Subscribe::new(filter, qos4(qos));
            s.pkid = pkid;
            P::Subscribe(s)
        }
        Out::PingReq => P::PingReq,
        Out::Disconnect => P::Disconnect,
    }
}

fn encode5(out: Out<'_>) -> v5::Packet {
    use v5::Packet as P;
    match out {
        Out::Connect(h, keep_alive, max_packet) => {
            let props = v5::ConnectProperties {
                session_expiry_interval: Some(h.expiry),
                max_packet_size: Some(u32::try_from(max_packet).unwrap_or(u32::MAX)),
                ..v5::ConnectProperties::new()
            };
            let c = v5::Connect {
                keep_alive,
                client_id: h.client_id.clone(),
                clean_start: h.clean_start,
                properties: Some(props),
            };
            let login = h.login.as_ref().map(|(u, p)| v5::Login::new(u, p));
            P::Connect(c, None, login)
        }
        Out::Publish {
            topic,
            qos,
            pkid,
            payload,
        } => {
            let mut p = v5::Publish::new(topic, qos5(qos), payload, None);
            p.pkid = pkid;
            P::Publish(p)
        }
        Out::PubAck(id) => P::PubAck(v5::PubAck::new(id, None)),
        Out::PubRec(id) => P::PubRec(v5::PubRec::new(id, None)),
        Out::PubRel(id) => P::PubRel(v5::PubRel::new(id, None)),
        Out::PubComp(id) => P::PubComp(v5::PubComp::new(id, None)),
        Out::Subscribe {
            filter,
            qos,
            pkid,
            no_local,
        } => {
            let mut f = v5::Filter::new(filter, qos5(qos));
            f.nolocal = no_local;
            let mut s = v5::Subscribe::new(f, None);
            s.pkid = pkid;
            P::Subscribe(s)
        }
        Out::PingReq => P::PingReq(v5::PingReq),
        Out::Disconnect => P::Disconnect(v5::Disconnect::new(
            v5::DisconnectReasonCode::NormalDisconnection,
        )),
    }
}

/// The kind of a CONNACK refusal: credentials, or anything else the broker refused.
fn refusal(auth: bool, code: &dyn std::fmt::Debug) -> Failure {
    Failure::new(
        if auth {
            ErrorKind::AuthFailed
        } else {
            ErrorKind::Protocol
        },
        format!("CONNACK refused the connection: {code:?}"),
    )
}

fn decode4(p: v4::Packet) -> In {
    use v4::{ConnectReturnCode as C, Packet as P};
    match p {
        P::ConnAck(c) => In::ConnAck {
            session_present: c.session_present,
            refused: (c.code != C::Success).then(|| {
                refusal(
                    matches!(c.code, C::BadUserNamePassword | C::NotAuthorized),
                    &c.code,
                )
            }),
            receive_max: None,
        },
        P::Publish(p) => In::Publish {
            qos: p.qos as u8,
            pkid: p.pkid,
            payload: p.payload,
        },
        P::PubAck(a) => In::PubAck(a.pkid, None),
        P::PubRec(r) => In::PubRec(r.pkid, None),
        P::PubRel(r) => In::PubRel(r.pkid),
        P::PubComp(c) => In::PubComp(c.pkid, None),
        P::SubAck(s) => In::SubAck(
            match s.return_codes.contains(&v4::SubscribeReasonCode::Failure) {
                true => Err("SUBACK failure (0x80)".to_owned()),
                false => Ok(()),
            },
        ),
        P::PingResp => In::PingResp,
        _ => In::Other,
    }
}

fn decode5(p: v5::Packet) -> In {
    use v5::{ConnectReturnCode as C, Packet as P};
    let refused = |ok: bool, why: &dyn std::fmt::Debug| (!ok).then(|| format!("{why:?}"));
    match p {
        P::ConnAck(c) => In::ConnAck {
            session_present: c.session_present,
            refused: (c.code != C::Success).then(|| {
                refusal(
                    matches!(
                        c.code,
                        C::BadUserNamePassword
                            | C::NotAuthorized
                            | C::BadAuthenticationMethod
                            | C::Banned
                    ),
                    &c.code,
                )
            }),
            receive_max: c.properties.and_then(|p| p.receive_max),
        },
        P::Publish(p) => In::Publish {
            qos: p.qos as u8,
            pkid: p.pkid,
            payload: p.payload,
        },
        P::PubAck(a) => In::PubAck(
            a.pkid,
            refused(
                matches!(
                    a.reason,
                    v5::PubAckReason::Success | v5::PubAckReason::NoMatchingSubscribers
                ),
                &a.reason,
            ),
        ),
        P::PubRec(r) => In::PubRec(
            r.pkid,
            refused(
                matches!(
                    r.reason,
                    v5::PubRecReason::Success | v5::PubRecReason::NoMatchingSubscribers
                ),
                &r.reason,
            ),
        ),
        P::PubRel(r) => In::PubRel(r.pkid),
        P::PubComp(c) => In::PubComp(
            c.pkid,
            refused(c.reason == v5::PubCompReason::Success, &c.reason),
        ),
        P::SubAck(s) => In::SubAck(
            match s
                .return_codes
                .iter()
                .find(|c| !matches!(c, v5::SubscribeReasonCode::Success(_)))
            {
                Some(c) => Err(format!("SUBACK {c:?}")),
                None => Ok(()),
            },
        ),
        P::PingResp(_) => In::PingResp,
        P::Disconnect(d) => In::Disconnect(Failure::new(
            ErrorKind::ClosedByPeer,
            format!(
                "the broker sent DISCONNECT: {:?} {}",
                d.reason_code,
                d.properties
                    .and_then(|p| p.reason_string)
                    .unwrap_or_default()
            ),
        )),
        _ => In::Other,
    }
}

/// A packet the codec cannot read.
fn unreadable(e: &dyn std::fmt::Display) -> Failure {
    Failure::new(ErrorKind::Protocol, format!("unreadable MQTT packet: {e}"))
}

fn closed() -> Failure {
    Failure::new(ErrorKind::ClosedByPeer, "the broker closed the connection")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A machine for MQTT 5 or 3.1.1 at `qos`, at most `inflight` publishes in flight.
    fn machine(v5: bool, qos: u8, inflight: u16) -> Machine {
        Machine::new(&Setup {
            v5,
            qos,
            keep_alive: Duration::from_secs(60),
            self_ping: false,
            max_packet: 4096,
            read_chunk: 4096,
            max_inflight: inflight,
        })
    }

    /// The broker sends `p` (3.1.1).
    fn send4(m: &mut Machine, p: v4::Packet) {
        let mut b = BytesMut::new();
        p.write(&mut b, 4096).expect("encode");
        m.received(&b);
    }

    /// The broker sends `p` (MQTT 5).
    fn send5(m: &mut Machine, p: v5::Packet) {
        let mut b = BytesMut::new();
        p.write(&mut b, None).expect("encode");
        m.received(&b);
    }

    /// What the client wrote, as 3.1.1 packets.
    fn written4(m: &mut Machine) -> Vec<v4::Packet> {
        let mut b = m.take_written();
        let mut out = Vec::new();
        while !b.is_empty() {
            out.push(v4::Packet::read(&mut b, 1 << 20).expect("a client packet"));
        }
        out
    }

    /// What the client wrote, as MQTT 5 packets.
    fn written5(m: &mut Machine) -> Vec<v5::Packet> {
        let mut b = m.take_written();
        let mut out = Vec::new();
        while !b.is_empty() {
            out.push(v5::Packet::read(&mut b, None).expect("a client packet"));
        }
        out
    }

    /// The outcome the next step reports: tag and refusal.
    fn outcome(m: &mut Machine) -> (u64, Option<String>) {
        match m.step().expect("no failure") {
            Some(Incoming::Outcome { tag, refused }) => (tag, refused),
            other => panic!("expected an outcome, got {other:?}"),
        }
    }

    #[test]
    fn publishes_wait_for_a_free_in_flight_slot() {
        let mut m = machine(false, 1, 2);
        assert!(!m.full());
        m.publish(10, "t/a".into(), "one").expect("publish");
        m.publish(11, "t/a".into(), "two").expect("publish");
        assert!(m.full(), "two in flight of two");
        let ids: Vec<u16> = written4(&mut m)
            .into_iter()
            .map(|p| match p {
                v4::Packet::Publish(p) => {
                    assert_eq!(p.qos, QoS4::AtLeastOnce);
                    p.pkid
                }
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(ids, [1, 2]);
        // A PUBACK for no publish in flight frees nothing.
        send4(&mut m, v4::Packet::PubAck(v4::PubAck::new(9)));
        assert!(m.step().expect("ok").is_none());
        assert!(m.full());
        send4(&mut m, v4::Packet::PubAck(v4::PubAck::new(2)));
        assert_eq!(outcome(&mut m), (11, None));
        assert!(!m.full());
        // The freed id is not reused while id 1 is in flight; the next is 3.
        m.publish(12, "t/a".into(), "three").expect("publish");
        assert!(matches!(&written4(&mut m)[..], [v4::Packet::Publish(p)] if p.pkid == 3));
        // A second PUBACK for the same id is no second outcome.
        send4(&mut m, v4::Packet::PubAck(v4::PubAck::new(2)));
        assert!(m.step().expect("ok").is_none());
        assert_eq!(m.in_flight(), 2);
        // QoS 0 is never full.
        let mut m = machine(false, 0, 1);
        m.publish(1, "t".into(), "x").expect("publish");
        m.publish(2, "t".into(), "y").expect("publish");
        assert!(!m.full());
        assert_eq!(m.in_flight(), 0);
    }

    #[test]
    fn connack_reports_a_resumed_session_and_an_mqtt5_receive_maximum() {
        use v4::ConnectReturnCode as C4;
        use v5::ConnectReturnCode as C5;
        let hello = Hello {
            client_id: "c".into(),
            login: None,
            clean_start: false,
            expiry: 60,
        };
        let mut m = machine(false, 1, 8);
        m.connect(&hello).expect("connect");
        match &written4(&mut m)[..] {
            [v4::Packet::Connect(c)] => {
                assert!(!c.clean_session);
                assert_eq!(c.client_id, "c");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(m.connack().expect("wait"), None, "nothing read yet");
        send4(
            &mut m,
            v4::Packet::ConnAck(v4::ConnAck::new(C4::Success, true)),
        );
        assert_eq!(m.connack().expect("accepted"), Some(true));
        // A second CONNACK is a protocol error.
        send4(
            &mut m,
            v4::Packet::ConnAck(v4::ConnAck::new(C4::Success, false)),
        );
        assert_eq!(m.step().unwrap_err().kind, ErrorKind::Protocol);

        let mut m = machine(false, 1, 8);
        send4(
            &mut m,
            v4::Packet::ConnAck(v4::ConnAck::new(C4::Success, false)),
        );
        assert_eq!(m.connack().expect("accepted"), Some(false));
        let mut m = machine(false, 1, 8);
        let refused = v4::ConnAck::new(C4::BadUserNamePassword, false);
        send4(&mut m, v4::Packet::ConnAck(refused));
        assert_eq!(m.connack().unwrap_err().kind, ErrorKind::AuthFailed);

        let mut m = machine(true, 1, 8);
        let props = v5::ConnAckProperties {
            session_expiry_interval: None,
            receive_max: Some(1),
            max_qos: None,
            retain_available: None,
            max_packet_size: None,
            assigned_client_identifier: None,
            topic_alias_max: None,
            reason_string: None,
            user_properties: Vec::new(),
            wildcard_subscription_available: None,
            subscription_identifiers_available: None,
            shared_subscription_available: None,
            server_keep_alive: None,
            response_information: None,
            server_reference: None,
            authentication_method: None,
            authentication_data: None,
        };
        send5(
            &mut m,
            v5::Packet::ConnAck(v5::ConnAck {
                session_present: true,
                code: C5::Success,
                properties: Some(props),
            }),
        );
        assert_eq!(m.connack().expect("accepted"), Some(true));
        m.publish(1, "t".into(), "x").expect("publish");
        assert!(m.full(), "the broker's receive maximum of 1 is the limit");
    }

    #[test]
    fn a_qos2_publish_completes_through_pubrec_pubrel_pubcomp() {
        let mut m = machine(false, 2, 4);
        m.publish(7, "t".into(), "x").expect("publish");
        m.publish(8, "t".into(), "y").expect("publish");
        let _ = m.take_written();
        send4(&mut m, v4::Packet::PubRec(v4::PubRec::new(1)));
        assert!(m.step().expect("ok").is_none(), "PUBREC is no outcome yet");
        assert!(matches!(&written4(&mut m)[..], [v4::Packet::PubRel(r)] if r.pkid == 1));
        assert_eq!(m.in_flight(), 2);
        send4(&mut m, v4::Packet::PubComp(v4::PubComp::new(1)));
        assert_eq!(outcome(&mut m), (7, None));
        assert_eq!(m.in_flight(), 1);

        // MQTT 5: a PUBREC with a failure reason ends the publish, refused, without a
        // PUBREL.
        let mut m = machine(true, 2, 4);
        m.publish(9, "t".into(), "x").expect("publish");
        let _ = m.take_written();
        let mut rec = v5::PubRec::new(1, None);
        rec.reason = v5::PubRecReason::QuotaExceeded;
        send5(&mut m, v5::Packet::PubRec(rec));
        let (tag, refused) = outcome(&mut m);
        assert_eq!(tag, 9);
        assert!(refused.expect("refused").contains("QuotaExceeded"));
        assert!(written5(&mut m).is_empty());
        // No matching subscribers is not a refusal.
        m.publish(10, "t".into(), "y").expect("publish");
        let _ = m.take_written();
        let mut ack = v5::PubRec::new(2, None);
        ack.reason = v5::PubRecReason::NoMatchingSubscribers;
        send5(&mut m, v5::Packet::PubRec(ack));
        assert!(m.step().expect("ok").is_none());
        assert!(matches!(&written5(&mut m)[..], [v5::Packet::PubRel(r)] if r.pkid == 2));
    }

    #[test]
    fn a_received_qos2_message_is_acknowledged_through_pubrec_and_pubcomp() {
        let mut m = machine(false, 2, 4);
        let mut p = v4::Publish::new("t/u1", QoS4::ExactlyOnce, "ms1:body");
        p.pkid = 42;
        // A broker's retransmission after a reconnect carries DUP: the same message.
        p.dup = true;
        send4(&mut m, v4::Packet::Publish(p));
        match m.step().expect("ok") {
            Some(Incoming::Message { payload, ack }) => {
                assert_eq!(&payload[..], b"ms1:body");
                assert_eq!(ack, Some((2, 42)));
            }
            other => panic!("{other:?}"),
        }
        assert!(
            written4(&mut m).is_empty(),
            "acknowledged only once handed out"
        );
        m.ack(2, 42).expect("ack");
        assert!(matches!(&written4(&mut m)[..], [v4::Packet::PubRec(r)] if r.pkid == 42));
        send4(&mut m, v4::Packet::PubRel(v4::PubRel::new(42)));
        assert!(m.step().expect("ok").is_none());
        assert!(matches!(&written4(&mut m)[..], [v4::Packet::PubComp(c)] if c.pkid == 42));
        // QoS 1: PUBACK.
        let mut p = v4::Publish::new("t/u1", QoS4::AtLeastOnce, "b");
        p.pkid = 5;
        send4(&mut m, v4::Packet::Publish(p));
        let Some(Incoming::Message {
            ack: Some((1, 5)), ..
        }) = m.step().expect("ok")
        else {
            panic!("a QoS 1 message");
        };
        m.ack(1, 5).expect("ack");
        assert!(matches!(&written4(&mut m)[..], [v4::Packet::PubAck(a)] if a.pkid == 5));
    }

    #[test]
    fn packets_cut_anywhere_are_read_whole_and_garbage_fails() {
        let mut m = machine(false, 1, 4);
        m.publish(1, "t".into(), "x").expect("publish");
        let mut b = BytesMut::new();
        v4::Packet::PubAck(v4::PubAck::new(1))
            .write(&mut b, 4096)
            .expect("encode");
        for byte in b.iter() {
            assert!(m.step().expect("ok").is_none());
            m.received(&[*byte]);
        }
        assert_eq!(outcome(&mut m), (1, None));
        assert_eq!(m.rbuf.capacity(), 0, "no read buffer kept while idle");
        m.received(&[0x00, 0x00]);
        assert_eq!(m.step().unwrap_err().kind, ErrorKind::Protocol);
        // A whole MQTT 5 PUBREC whose properties run past its end (found by the fuzz
        // target): unreadable, not a packet still arriving that stalls those behind it.
        let mut m = machine(true, 2, 2);
        m.received(&[0x50, 0x04, 0x00, 0xff, 0xff, 0xff, 0xd0, 0x00]);
        assert_eq!(m.step().unwrap_err().kind, ErrorKind::Protocol);
        // MQTT 5 DISCONNECT ends the connection as the broker's close, with a reason
        // code (session taken over) or without one (normal: remaining length 0).
        for bytes in [&[0xE0, 0x02, 0x8E, 0x00][..], &[0xE0, 0x00]] {
            let mut m = machine(true, 1, 4);
            m.received(bytes);
            let f = m.step().unwrap_err();
            assert_eq!(f.kind, ErrorKind::ClosedByPeer, "{bytes:?}: {}", f.detail);
        }
    }

    /// A real mosquitto on a free loopback port, killed on drop (its configuration in
    /// a folder removed then).
    struct Broker {
        child: std::process::Child,
        port: u16,
        _dir: tempfile::TempDir,
    }

    impl Drop for Broker {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    fn broker() -> Broker {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let dir = tempfile::tempdir().expect("temp dir");
        let conf = dir.path().join("mosquitto.conf");
        let text = format!("listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n");
        std::fs::write(&conf, text).expect("conf");
        let child = std::process::Command::new("mosquitto")
            .arg("-c")
            .arg(&conf)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start mosquitto");
        let b = Broker {
            child,
            port,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "mosquitto does not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        b
    }

    /// The next report of `c`, within five seconds.
    async fn next(c: &mut Conn) -> Incoming {
        tokio::time::timeout(Duration::from_secs(5), c.next())
            .await
            .expect("a packet within 5 s")
            .expect("no failure")
    }

    /// A plain TCP connection to the broker on `port`.
    async fn plain(port: u16) -> crate::driver::kit::connect::Stream {
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .expect("connect to mosquitto");
        crate::driver::kit::connect::Stream::unmetered(tcp)
    }

    /// A message received and not acknowledged when the connection ends is delivered
    /// again by mosquitto to the resumed session, which the CONNACK reports present.
    #[tokio::test]
    #[cfg_attr(not(peer_mosquitto), ignore = "needs mosquitto")]
    async fn mosquitto_retransmits_an_unacknowledged_message_after_a_reconnect() {
        let b = broker();
        let setup = Setup {
            v5: false,
            qos: 1,
            keep_alive: Duration::from_secs(60),
            self_ping: false,
            max_packet: 4096,
            read_chunk: 4096,
            max_inflight: 4,
        };
        let hello = |id: &str, clean_start| Hello {
            client_id: id.into(),
            login: None,
            clean_start,
            expiry: 60,
        };
        let (mut sub, present) = Conn::open(plain(b.port).await, &setup, &hello("sub", false))
            .await
            .expect("sub");
        assert!(!present);
        sub.subscribe("t/x", false).expect("subscribe");
        sub.flush().await.expect("flush");
        assert!(matches!(next(&mut sub).await, Incoming::SubAck(Ok(()))));
        let (mut publisher, _) = Conn::open(plain(b.port).await, &setup, &hello("pub", true))
            .await
            .expect("pub");
        publisher
            .publish(77, "t/x".into(), "ms1:again")
            .await
            .expect("publish");
        publisher.flush().await.expect("flush");
        assert!(matches!(
            next(&mut publisher).await,
            Incoming::Outcome {
                tag: 77,
                refused: None
            }
        ));
        let Incoming::Message { payload, ack } = next(&mut sub).await else {
            panic!("the message");
        };
        assert_eq!(&payload[..], b"ms1:again");
        assert!(matches!(ack, Some((1, _))));
        // Gone without acknowledging it.
        drop(sub);
        let (mut sub, present) = Conn::open(plain(b.port).await, &setup, &hello("sub", false))
            .await
            .expect("again");
        assert!(present, "the broker resumed the session");
        let Incoming::Message { payload, ack } = next(&mut sub).await else {
            panic!("the retransmission");
        };
        assert_eq!(&payload[..], b"ms1:again");
        let (qos, pkid) = ack.expect("QoS 1");
        sub.ack(qos, pkid).expect("ack");
        sub.disconnect().await.expect("disconnect");
    }
}
