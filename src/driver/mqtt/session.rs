//! One user's MQTT connection ([`MqttSession`]): publishes with their acknowledgements,
//! subscriptions, what arrives handed to the engine before it is acknowledged, and the
//! replay of a persistent session collected until it goes quiet.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_tungstenite::tungstenite::Utf8Bytes;

use super::conn::{Conn, Incoming};
use super::options::Options;
use super::{Subscriptions, CLOSE_WAIT, REPLAY_LIMIT};
use crate::driver::{Body, Dest, Event, Failure, Session};
use crate::metrics::ErrorKind;

/// QoS and packet id of a received message to acknowledge (`None`: QoS 0).
pub(super) type Ack = Option<(u8, u16)>;

/// One user's MQTT connection.
///
/// Received messages are acknowledged (PUBACK / PUBREC) only once they are handed to the
/// engine: a message that arrives while the session closes stays unacknowledged, so the
/// broker delivers it again to the user's next connection instead of losing it.
#[derive(Debug)]
pub struct MqttSession {
    pub(super) conn: Conn,
    pub(super) opts: Arc<Options>,
    /// Events seen while waiting for something else, with the acknowledgement each one's
    /// message is owed once the engine has it.
    pub(super) pending: VecDeque<(Event, Ack)>,
    /// The broker resumed a session: what arrives first is its replay of queued messages.
    pub(super) replaying: bool,
    pub(super) resume: Subscriptions,
    pub(super) subscribe_timeout: Duration,
}

impl MqttSession {
    /// Turns what the connection reported into an engine event, or `None` for a SUBACK
    /// nobody waits for.
    pub(super) fn absorb(w: Incoming) -> Option<(Event, Ack)> {
        match w {
            Incoming::Message { payload, ack } => Some((
                Event::Delivered {
                    // Shares the read chunk (a reference count), no copy.
                    body: match Utf8Bytes::try_from(payload.clone()) {
                        Ok(text) => Body::from(text),
                        Err(_) => Body::from(String::from_utf8_lossy(&payload).into_owned()),
                    },
                },
                ack,
            )),
            Incoming::Outcome { tag, refused: None } => Some((Event::Accepted { tag }, None)),
            Incoming::Outcome {
                tag,
                refused: Some(why),
            } => Some((
                Event::Refused {
                    tag,
                    failure: Failure::new(ErrorKind::SendFailed, format!("broker refused: {why}")),
                },
                None,
            )),
            Incoming::SubAck(_) => None,
        }
    }

    /// The engine has the event: its message's acknowledgement goes out with the next
    /// write.
    pub(super) fn hand_out(&mut self, (ev, ack): (Event, Ack)) -> Event {
        if let Some((qos, pkid)) = ack {
            // A connection that failed reports it at the next read.
            let _ = self.conn.ack(qos, pkid);
        }
        ev
    }

    /// Subscribes to `filter` and waits for the SUBACK (one subscription at a time, so the
    /// next SUBACK is its answer).
    pub(super) async fn subscribe(&mut self, filter: &str, no_local: bool) -> Result<(), Failure> {
        let limit = self.subscribe_timeout;
        let wait = async {
            self.conn.subscribe(filter, no_local)?;
            loop {
                match self.conn.next().await? {
                    Incoming::SubAck(Ok(())) => return Ok(()),
                    Incoming::SubAck(Err(why)) => {
                        return Err(Failure::new(
                            ErrorKind::Protocol,
                            format!("subscribing to {filter}: {why}"),
                        ))
                    }
                    w => self.pending.extend(Self::absorb(w)),
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
        // Past `max_inflight` the send waits for an acknowledgement here, where the
        // engine sees (and reports) the wait as lag.
        while self.conn.full() {
            let w = self.conn.next().await?;
            self.pending.extend(Self::absorb(w));
        }
        self.conn.publish(tag, topic, body).await
    }

    async fn request(&mut self, _tag: u64, _name: &'static str) -> Result<(), Failure> {
        Err(Failure::new(
            ErrorKind::RequestFailed,
            "MQTT has no request/response workload",
        ))
    }

    async fn heartbeat(&mut self) -> Result<(), Failure> {
        self.conn.ping()
    }

    async fn flush(&mut self) -> Result<(), Failure> {
        self.conn.flush().await
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
            match tokio::time::timeout(quiet, self.conn.next()).await {
                Err(_) => break,
                Ok(Err(f)) => return Err(f),
                Ok(Ok(w)) => match Self::absorb(w) {
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
            match self.conn.next().await {
                Ok(w) => {
                    if let Some(held) = Self::absorb(w) {
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
        let _ = tokio::time::timeout(CLOSE_WAIT, self.conn.disconnect()).await;
        self.resume
    }

    fn into_resume(self) -> Subscriptions {
        self.resume
    }
}
