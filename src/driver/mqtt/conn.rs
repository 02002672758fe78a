//! One rumqttc connection, MQTT 3.1.1 or 5, behind one small interface.
//!
//! rumqttc splits a connection into a client (a channel of requests) and an event loop
//! that must be polled. `EventLoop::poll` is not cancel-safe (a request taken from the
//! channel may be half written when its future is dropped), so [`Conn`] never drops a
//! poll: it moves the event loop into a boxed future and keeps that future across calls
//! until it completes. [`Conn::next`] is therefore cancel-safe without a task or a channel
//! per connection. A failed poll ends the connection for good: rumqttc would reconnect on
//! the next poll, but reconnecting is the engine's decision.

use std::future::Future;
use std::pin::Pin;

use rumqttc::v5;

use super::super::Failure;
use crate::metrics::ErrorKind;

/// What the event loop reported, in protocol-neutral terms.
#[derive(Debug)]
pub enum Wire {
    /// The broker accepted the connection.
    ConnAck {
        /// The broker resumed a stored session.
        session_present: bool,
    },
    /// A message on a subscribed topic; acknowledge it with [`Conn::ack`] once the engine
    /// has it.
    Publish {
        /// The body.
        payload: Vec<u8>,
        /// QoS and packet id to acknowledge (`None` for QoS 0).
        ack: Option<(u8, u16)>,
    },
    /// A publish left with this packet id (0 for QoS 0), in the order sends were queued.
    Sent(u16),
    /// QoS 1 acknowledgement; `refused` holds an MQTT 5 failure reason.
    PubAck {
        /// Packet id.
        pkid: u16,
        /// Why the broker refused the message, if it did.
        refused: Option<String>,
    },
    /// QoS 2 first acknowledgement; only a refusal matters.
    PubRec {
        /// Packet id.
        pkid: u16,
        /// Why the broker refused the message, if it did.
        refused: Option<String>,
    },
    /// QoS 2 completion.
    PubComp {
        /// Packet id.
        pkid: u16,
        /// Why the broker refused the message, if it did.
        refused: Option<String>,
    },
    /// Answer to a subscription; `Err` names a refused filter.
    SubAck(Result<(), String>),
    /// Our DISCONNECT was written.
    DisconnectSent,
    /// Anything the driver does not act on (pings, PUBREL…).
    Other,
}

/// The two protocol versions' event loops.
enum Loop {
    V4(Box<rumqttc::EventLoop>),
    V5(Box<v5::EventLoop>),
}

/// The two protocol versions' request handles.
enum Client {
    V4(rumqttc::AsyncClient),
    V5(v5::AsyncClient),
}

type Polling = Pin<Box<dyn Future<Output = (Loop, Result<Wire, Failure>)> + Send>>;

enum State {
    Idle(Loop),
    Polling(Polling),
    Gone(Failure),
}

/// One MQTT connection (connecting on the first [`Conn::next`]).
pub struct Conn {
    client: Client,
    state: State,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match &self.state {
            State::Idle(_) => "idle",
            State::Polling(_) => "polling",
            State::Gone(_) => "gone",
        };
        f.debug_struct("Conn").field("state", &state).finish()
    }
}

/// Requests queued in the client channel before a send has to drive the event loop.
const REQUEST_CAPACITY: usize = 64;

impl Conn {
    /// An MQTT 3.1.1 connection with these options.
    pub fn v4(options: rumqttc::MqttOptions, network: rumqttc::NetworkOptions) -> Self {
        let (client, mut ev) = rumqttc::AsyncClient::new(options, REQUEST_CAPACITY);
        ev.set_network_options(network);
        Conn {
            client: Client::V4(client),
            state: State::Idle(Loop::V4(Box::new(ev))),
        }
    }

    /// An MQTT 5 connection with these options.
    pub fn v5(options: v5::MqttOptions) -> Self {
        let (client, ev) = v5::AsyncClient::new(options, REQUEST_CAPACITY);
        Conn {
            client: Client::V5(client),
            state: State::Idle(Loop::V5(Box::new(ev))),
        }
    }

    /// The next thing the connection did. Cancel-safe: an interrupted poll resumes on the
    /// next call. After a failure every call returns that failure.
    pub async fn next(&mut self) -> Result<Wire, Failure> {
        loop {
            match &mut self.state {
                State::Gone(f) => return Err(f.clone()),
                State::Polling(fut) => {
                    let (lp, result) = fut.await;
                    self.state = match &result {
                        Ok(_) => State::Idle(lp),
                        Err(f) => State::Gone(f.clone()),
                    };
                    return result;
                }
                State::Idle(_) => {
                    let placeholder = State::Gone(Failure::new(ErrorKind::Other, "polling"));
                    let State::Idle(lp) = std::mem::replace(&mut self.state, placeholder) else {
                        unreachable!("matched Idle above")
                    };
                    self.state = State::Polling(Box::pin(poll_once(lp)));
                }
            }
        }
    }

    /// The failure that ended the connection, if it ended.
    pub fn failure(&self) -> Option<&Failure> {
        match &self.state {
            State::Gone(f) => Some(f),
            _ => None,
        }
    }

    /// Queues a publish. `Ok(false)`: the request channel is full; drive [`Conn::next`]
    /// and try again.
    pub fn publish(&self, topic: &str, qos: u8, body: &str) -> Result<bool, Failure> {
        let payload = body.as_bytes().to_vec();
        let queued = match &self.client {
            Client::V4(c) => c.try_publish(topic, qos4(qos), false, payload).is_ok(),
            Client::V5(c) => c.try_publish(topic, qos5(qos), false, payload).is_ok(),
        };
        self.queued(queued)
    }

    /// Queues a subscription (`no_local` is honoured by MQTT 5 only). `Ok(false)` as for
    /// [`Conn::publish`].
    pub fn subscribe(&self, filter: &str, qos: u8, no_local: bool) -> Result<bool, Failure> {
        let queued = match &self.client {
            Client::V4(c) => c.try_subscribe(filter, qos4(qos)).is_ok(),
            Client::V5(c) => {
                let mut f = v5::mqttbytes::v5::Filter::new(filter, qos5(qos));
                f.nolocal = no_local;
                c.try_subscribe_many([f]).is_ok()
            }
        };
        self.queued(queued)
    }

    /// Queues the acknowledgement (PUBACK, or PUBREC for QoS 2) of a received publish.
    /// `Ok(false)` as for [`Conn::publish`].
    pub fn ack(&self, qos: u8, pkid: u16) -> Result<bool, Failure> {
        let queued = match &self.client {
            Client::V4(c) => {
                let mut p = rumqttc::Publish::new("", qos4(qos), Vec::new());
                p.pkid = pkid;
                c.try_ack(&p).is_ok()
            }
            Client::V5(c) => {
                let mut p = v5::mqttbytes::v5::Publish::new("", qos5(qos), Vec::new(), None);
                p.pkid = pkid;
                c.try_ack(&p).is_ok()
            }
        };
        self.queued(queued)
    }

    /// Queues a DISCONNECT.
    pub fn disconnect(&self) -> Result<bool, Failure> {
        let queued = match &self.client {
            Client::V4(c) => c.try_disconnect().is_ok(),
            Client::V5(c) => c.try_disconnect().is_ok(),
        };
        self.queued(queued)
    }

    fn queued(&self, queued: bool) -> Result<bool, Failure> {
        match (&self.state, queued) {
            (State::Gone(f), _) => Err(f.clone()),
            (_, q) => Ok(q),
        }
    }
}

fn qos4(q: u8) -> rumqttc::QoS {
    match q {
        0 => rumqttc::QoS::AtMostOnce,
        1 => rumqttc::QoS::AtLeastOnce,
        _ => rumqttc::QoS::ExactlyOnce,
    }
}

fn qos5(q: u8) -> v5::mqttbytes::QoS {
    match q {
        0 => v5::mqttbytes::QoS::AtMostOnce,
        1 => v5::mqttbytes::QoS::AtLeastOnce,
        _ => v5::mqttbytes::QoS::ExactlyOnce,
    }
}

/// Polls the event loop once and hands it back with what happened.
async fn poll_once(mut lp: Loop) -> (Loop, Result<Wire, Failure>) {
    let result = match &mut lp {
        Loop::V4(ev) => ev.poll().await.map(wire4).map_err(|e| classify4(&e)),
        Loop::V5(ev) => ev.poll().await.map(wire5).map_err(|e| classify5(&e)),
    };
    (lp, result)
}

fn wire4(ev: rumqttc::Event) -> Wire {
    use rumqttc::{Event, Outgoing, Packet, SubscribeReasonCode};
    match ev {
        Event::Incoming(Packet::ConnAck(c)) => Wire::ConnAck {
            session_present: c.session_present,
        },
        Event::Incoming(Packet::Publish(p)) => Wire::Publish {
            ack: (p.qos != rumqttc::QoS::AtMostOnce).then_some((p.qos as u8, p.pkid)),
            payload: p.payload.into(),
        },
        Event::Incoming(Packet::PubAck(a)) => Wire::PubAck {
            pkid: a.pkid,
            refused: None,
        },
        Event::Incoming(Packet::PubComp(c)) => Wire::PubComp {
            pkid: c.pkid,
            refused: None,
        },
        Event::Incoming(Packet::SubAck(s)) => Wire::SubAck(
            match s.return_codes.contains(&SubscribeReasonCode::Failure) {
                true => Err("SUBACK failure (0x80)".to_owned()),
                false => Ok(()),
            },
        ),
        Event::Outgoing(Outgoing::Publish(pkid)) => Wire::Sent(pkid),
        Event::Outgoing(Outgoing::Disconnect) => Wire::DisconnectSent,
        _ => Wire::Other,
    }
}

fn wire5(ev: v5::Event) -> Wire {
    use rumqttc::Outgoing;
    use v5::mqttbytes::v5::SubscribeReasonCode;
    use v5::mqttbytes::v5::{Packet, PubAckReason, PubCompReason, PubRecReason};
    use v5::Event;
    let refused = |ok: bool, why: &dyn std::fmt::Debug| (!ok).then(|| format!("{why:?}"));
    match ev {
        Event::Incoming(Packet::ConnAck(c)) => Wire::ConnAck {
            session_present: c.session_present,
        },
        Event::Incoming(Packet::Publish(p)) => Wire::Publish {
            ack: (p.qos != v5::mqttbytes::QoS::AtMostOnce).then_some((p.qos as u8, p.pkid)),
            payload: p.payload.into(),
        },
        Event::Incoming(Packet::PubAck(a)) => Wire::PubAck {
            pkid: a.pkid,
            refused: refused(
                matches!(
                    a.reason,
                    PubAckReason::Success | PubAckReason::NoMatchingSubscribers
                ),
                &a.reason,
            ),
        },
        Event::Incoming(Packet::PubRec(r)) => Wire::PubRec {
            pkid: r.pkid,
            refused: refused(
                matches!(
                    r.reason,
                    PubRecReason::Success | PubRecReason::NoMatchingSubscribers
                ),
                &r.reason,
            ),
        },
        Event::Incoming(Packet::PubComp(c)) => Wire::PubComp {
            pkid: c.pkid,
            refused: refused(c.reason == PubCompReason::Success, &c.reason),
        },
        Event::Incoming(Packet::SubAck(s)) => Wire::SubAck(
            match s
                .return_codes
                .iter()
                .find(|c| !matches!(c, SubscribeReasonCode::Success(_)))
            {
                Some(c) => Err(format!("SUBACK {c:?}")),
                None => Ok(()),
            },
        ),
        Event::Outgoing(Outgoing::Publish(pkid)) => Wire::Sent(pkid),
        Event::Outgoing(Outgoing::Disconnect) => Wire::DisconnectSent,
        _ => Wire::Other,
    }
}

/// Classifies an I/O failure for the error taxonomy.
fn classify_io(e: &std::io::Error) -> Failure {
    match e.kind() {
        std::io::ErrorKind::ConnectionRefused => {
            Failure::new(ErrorKind::ConnectRefused, e.to_string())
        }
        std::io::ErrorKind::TimedOut => Failure::new(ErrorKind::ConnectTimeout, e.to_string()),
        _ if e.raw_os_error() == Some(libc::EMFILE) => Failure::new(
            ErrorKind::Other,
            format!("file descriptor limit reached: {e}"),
        ),
        _ => Failure::new(ErrorKind::ClosedByPeer, e.to_string()),
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

fn classify4(e: &rumqttc::ConnectionError) -> Failure {
    use rumqttc::{ConnectReturnCode as C, ConnectionError as E, StateError as S};
    match e {
        E::ConnectionRefused(code) => refusal(
            matches!(code, C::BadUserNamePassword | C::NotAuthorized),
            code,
        ),
        E::Io(io) | E::MqttState(S::Io(io)) => classify_io(io),
        E::NetworkTimeout => Failure::new(ErrorKind::ConnectTimeout, "no CONNACK in time"),
        E::FlushTimeout => Failure::new(ErrorKind::Timeout, "writing to the broker timed out"),
        E::MqttState(S::ConnectionAborted) => {
            Failure::new(ErrorKind::ClosedByPeer, "the broker closed the connection")
        }
        E::MqttState(S::AwaitPingResp) => {
            Failure::new(ErrorKind::Timeout, "no PINGRESP within the keep-alive")
        }
        other => Failure::new(ErrorKind::Protocol, other.to_string()),
    }
}

fn classify5(e: &v5::ConnectionError) -> Failure {
    use v5::mqttbytes::v5::ConnectReturnCode as C;
    use v5::{ConnectionError as E, StateError as S};
    let auth = |c: &C| {
        matches!(
            c,
            C::BadUserNamePassword | C::NotAuthorized | C::BadAuthenticationMethod | C::Banned
        )
    };
    match e {
        E::ConnectionRefused(code) | E::MqttState(S::ConnFail { reason: code }) => {
            refusal(auth(code), code)
        }
        E::Io(io) | E::MqttState(S::Io(io)) => classify_io(io),
        E::Timeout(_) => Failure::new(ErrorKind::ConnectTimeout, "no CONNACK in time"),
        E::MqttState(S::ConnectionAborted) => {
            Failure::new(ErrorKind::ClosedByPeer, "the broker closed the connection")
        }
        E::MqttState(S::ServerDisconnect {
            reason_code,
            reason_string,
        }) => Failure::new(
            ErrorKind::ClosedByPeer,
            format!(
                "the broker sent DISCONNECT: {reason_code:?} {}",
                reason_string.as_deref().unwrap_or_default()
            ),
        ),
        E::MqttState(S::AwaitPingResp) => {
            Failure::new(ErrorKind::Timeout, "no PINGRESP within the keep-alive")
        }
        other => Failure::new(ErrorKind::Protocol, other.to_string()),
    }
}
