//! Logging a user in: TCP (and TLS), stream features, in-band registration, SASL, then
//! either resuming the user's XEP-0198 session or binding a resource, enabling stream
//! management and sending the initial presence.

use std::time::{Duration, Instant};

use super::codec::{escape, Element, Item};
use super::resume::XmppResume;
use super::sasl::{self, Mechanism, Scram};
use super::sm::{acked, Sm, SmResume, Unacked};
use super::stream::{self, Stream};
use super::{error_condition, ns, stanza_error, Sasl, Tls, XmppDriver};
use crate::driver::{Account, Event, Failure, UserCtx};
use crate::metrics::ErrorKind;

/// The id of the ping that follows the initial presence.
const AVAILABLE: &str = "available";

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
    pub(super) async fn login(
        &self,
        user: &UserCtx,
        resume: &mut XmppResume,
        started: Instant,
    ) -> Result<Login, Failure> {
        let io = self.connector.connect(user.ix).await?;
        let mut stream = Stream::new(io, self.max_body);
        let mut features = self.open(&mut stream).await?;
        if self.opts.tls == Tls::StartTls {
            stream = self.starttls(stream, &features).await?;
            features = self.open(&mut stream).await?;
        }
        let handshake = started.elapsed();
        let username = self.username.replace("{user}", &user.id);
        let password = self.password.replace("{user}", &user.id);
        if self.opts.register && !resume.registered {
            resume.account = Some(register(&mut stream, &username, &password).await?);
            resume.registered = true;
        }
        self.authenticate(&mut stream, &features, &username, &password, resume)
            .await?;
        stream.restart();
        let features = self.open(&mut stream).await?;
        let mut settled = Vec::new();
        if let Some(prev) = resume.sm.take() {
            match resume_session(&mut stream, &prev).await {
                Ok(Some((sm, accepted))) => {
                    return Ok(Login {
                        stream,
                        sm: Some(sm),
                        resumed: true,
                        handshake,
                        early: Vec::new(),
                        settled: accepted,
                    })
                }
                // A new session: what the old one had not delivered is not sent again
                // (the server may have had it without acknowledging it yet).
                Ok(None) => settled = not_resumed(&prev),
                Err(f) => {
                    // The session may still be there for the next attempt.
                    resume.sm = Some(prev);
                    return Err(f);
                }
            }
        }
        let resource = self.opts.resource.replace("{user}", &user.id);
        let (sm, early) = self.bind(&mut stream, &features, &resource).await?;
        Ok(Login {
            stream,
            sm,
            resumed: false,
            handshake,
            early,
            settled,
        })
    }

    /// STARTTLS on `stream`, whose `features` must offer it.
    async fn starttls(&self, mut stream: Stream, features: &Element) -> Result<Stream, Failure> {
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
        let client = self
            .starttls
            .as_ref()
            .ok_or_else(|| Failure::new(ErrorKind::Other, "TLS was not configured"))?;
        stream.tls(client).await
    }

    /// Binds `resource`, enables stream management when the options ask for it and sends
    /// the initial presence: the session's XEP-0198 state, and what arrived meanwhile.
    async fn bind(
        &self,
        stream: &mut Stream,
        features: &Element,
        resource: &str,
    ) -> Result<(Option<Sm>, Vec<Element>), Failure> {
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
            escape(resource)
        ));
        if sm {
            stream.queue(&format!("<enable xmlns='{}' resume='true'/>", ns::SM));
        }
        // A ping after the presence: its answer comes once the server has made the
        // session available, so from the end of the login on, what is sent to the user
        // (a chat state, a contact's presence) reaches it instead of being dropped.
        stream.queue(&format!(
            "<presence/><iq type='get' id='{AVAILABLE}' to='{}'><ping xmlns='{}'/></iq>",
            escape(&self.domain),
            ns::PING
        ));
        stream.flush().await?;
        let (mut bound, mut enabled, mut available) = (false, !sm, false);
        let mut sm_id = None;
        let mut early = Vec::new();
        while !(bound && enabled && available) {
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
                // Any answer (an error from a server without XEP-0199) comes in order;
                // absorbed with the rest, so stanzas are counted as they came.
                "iq" if e.attr("id") == Some(AVAILABLE) => {
                    available = true;
                    early.push(e);
                }
                _ => early.push(e),
            }
        }
        // The initial presence and the ping are the first stanzas counted.
        let sm = sm.then(|| Sm {
            sent: 2,
            requested: 2,
            id: sm_id,
            ..Sm::default()
        });
        Ok((sm, early))
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
        let mechanism = self.mechanism(features)?;
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

    /// The SASL mechanism the options ask for, if `features` offer it.
    fn mechanism(&self, features: &Element) -> Result<Mechanism, Failure> {
        let offered: Vec<&str> = features
            .child_ns("mechanisms", ns::SASL)
            .map(|m| m.children.iter().map(|c| c.text.trim()).collect())
            .unwrap_or_default();
        let has = |m: Mechanism| offered.contains(&m.name());
        match self.opts.sasl {
            Sasl::Auto if has(Mechanism::ScramSha1) => Ok(Mechanism::ScramSha1),
            Sasl::Auto | Sasl::Plain if has(Mechanism::Plain) => Ok(Mechanism::Plain),
            Sasl::ScramSha1 if has(Mechanism::ScramSha1) => Ok(Mechanism::ScramSha1),
            _ => Err(Failure::new(
                ErrorKind::AuthFailed,
                format!(
                    "no usable SASL mechanism: the server offers [{}]",
                    offered.join(", ")
                ),
            )),
        }
    }
}

/// The sends a connection left unacknowledged, refused: the session could not be resumed,
/// and the server may have had them without acknowledging them yet.
fn not_resumed(prev: &SmResume) -> Vec<Event> {
    prev.unacked
        .iter()
        .map(|u| Event::Refused {
            tag: u.tag,
            failure: Failure::new(
                ErrorKind::SendFailed,
                "unacknowledged when the connection broke, and the session could not be \
                 resumed",
            ),
        })
        .collect()
}

/// A login that went through.
pub(super) struct Login {
    pub(super) stream: Stream,
    /// XEP-0198 state, when it is on.
    pub(super) sm: Option<Sm>,
    /// The server resumed the user's previous session (XEP-0198): same resource,
    /// presence and rooms, and it retransmits what the user had not taken.
    pub(super) resumed: bool,
    /// How long the part before SASL took.
    pub(super) handshake: Duration,
    /// Elements that arrived before the login was complete, for the session.
    pub(super) early: Vec<Element>,
    /// Outcomes of sends of the previous connection, for the engine.
    pub(super) settled: Vec<Event>,
}

/// In-band registration (XEP-0077) of `username`; an account that exists already is fine.
async fn register(stream: &mut Stream, username: &str, password: &str) -> Result<Account, Failure> {
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
        Some("result") => Ok(Account::Created),
        _ if error_condition(&answer) == Some("conflict") => Ok(Account::Existing),
        _ => Err(Failure::new(
            ErrorKind::Registration,
            format!(
                "in-band registration of {username} refused: {}",
                stanza_error(&answer)
            ),
        )),
    }
}

/// Asks the server to resume `prev`: the session's XEP-0198 state when it did, with the
/// outcomes of the sends it had not acknowledged before (accepted up to its `h`; the rest
/// are queued again, as XEP-0198 §4 asks), `None` when the session is gone (the caller
/// binds a new one on the same stream).
pub(super) async fn resume_session(
    stream: &mut Stream,
    prev: &SmResume,
) -> Result<Option<(Sm, Vec<Event>)>, Failure> {
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
            let mut sm = Sm {
                id: Some(prev.id.clone()),
                sent: h,
                requested: h,
                received: prev.handed,
                ..Sm::default()
            };
            let mut accepted = Vec::new();
            for u in &prev.unacked {
                match &u.xml {
                    _ if acked(u.n, h) => accepted.push(Event::Accepted { tag: u.tag }),
                    Some(xml) => {
                        stream.queue(xml);
                        sm.sent = sm.sent.wrapping_add(1);
                        sm.tags.push_back(Unacked {
                            n: sm.sent,
                            tag: u.tag,
                            xml: Some(xml.clone()),
                        });
                    }
                    // Not kept: the session was not resumable when it was sent.
                    None => accepted.push(Event::Refused {
                        tag: u.tag,
                        failure: Failure::new(ErrorKind::SendFailed, "not kept for a resend"),
                    }),
                }
            }
            Ok(Some((sm, accepted)))
        }
        "failed" => Ok(None),
        other => Err(Failure::new(
            ErrorKind::Protocol,
            format!("unexpected <{other}> in answer to <resume/>"),
        )),
    }
}
