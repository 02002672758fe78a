//! One logged-in user: sends, receipts, XEP-0198 acks, room joins, fetching what was
//! missed, signals ([`signals`]), and what the user keeps for its next connection.

mod signals;

use std::collections::{HashSet, VecDeque};
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use super::codec::{escape, Element, Item};
use super::disco;
use super::login::Login;
use super::mam::{self, Since};
use super::resume::XmppResume;
use super::sm::{acked, Sm, SmResume, Unacked};
use super::stream::{self, Stream};
use super::{error_condition, ns, stanza_error, Fetch, Options, XmppDriver};
use super::{CLOSE_WAIT, JOIN_ATTEMPTS, JOIN_RETRY, JOIN_SILENCE, OFFLINE_LIMIT, WRITE_BATCH};
use crate::driver::{Dest, Event, Failure, Session, Signal, UserCtx};
use crate::metrics::ErrorKind;

/// One page of a MAM query under way.
#[derive(Debug, Default)]
struct Page {
    /// The query's id (and queryid).
    id: String,
    /// Bodies of the messages others sent this user, so far in this fetch.
    bodies: Vec<String>,
    /// Results of this page, with or without a body.
    results: usize,
}

/// A room's presence for its joiner says the join created the room (status 201).
fn created(e: &Element) -> bool {
    e.child_ns("x", ns::MUC_USER).is_some_and(|x| {
        x.children
            .iter()
            .any(|c| c.name == "status" && c.attr("code") == Some("201"))
    })
}

/// How one attempt at joining a room ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Attempt {
    /// In the room.
    Joined,
    /// Refused for now: the room is being created by someone else; try again.
    Refused,
    /// No answer within [`JOIN_SILENCE`]: the room lost the join; send it again.
    Unanswered,
}

/// Something received, kept until the engine takes it.
#[derive(Debug)]
struct Held {
    event: Event,
    /// The XEP-0198 count of the stanza that carried a message (acknowledged only once the
    /// engine has it).
    stanza: Option<u32>,
    /// The archive id of a pushed message (`fetch = "mam"`): once the engine has it, the
    /// next MAM fetch starts after it.
    archive: Option<String>,
    /// A 1:1 message that moves no archive position (`fetch = "mam"`): pushed while the
    /// user fetched, or an offline copy (older than what the user may have had since). The
    /// next query may return it again.
    unplaced: bool,
}

impl Held {
    /// An event that no received message carried.
    fn event(event: Event) -> Held {
        Held {
            event,
            stanza: None,
            archive: None,
            unplaced: false,
        }
    }
}

/// One user's XMPP connection.
#[derive(Debug)]
pub struct XmppSession {
    stream: Stream,
    opts: Arc<Options>,
    domain: String,
    /// The MUC service's domain, or why it is unknown (for the join failures).
    muc: Result<String, String>,
    nick: String,
    /// This connection resumed the previous one: its rooms are still joined.
    resumed: bool,
    /// The username template: a user id's JID is this `@domain`.
    username: Arc<str>,
    /// This user's bare JID.
    me: String,
    /// When the run began (the MAM fetch of a user without an archived message).
    started: SystemTime,
    sm: Option<Sm>,
    pending: VecDeque<Held>,
    /// Offline messages may still be arriving (fetch missed not done yet).
    replaying: bool,
    /// The MAM query under way, collecting its results.
    archive_page: Option<Page>,
    resume: XmppResume,
    reply_timeout: Duration,
    next_id: u64,
    /// The engine published the user's unavailable presence: closing sends no other.
    left: bool,
    /// Contacts whose subscription request this session answered with its own.
    resubscribed: HashSet<String>,
}

impl XmppSession {
    /// The session of a completed login, with what arrived during it absorbed.
    pub(super) fn new(
        d: &XmppDriver,
        user: &UserCtx,
        login: Login,
        resume: XmppResume,
    ) -> Result<XmppSession, Box<(Failure, XmppResume)>> {
        let mut s = XmppSession {
            stream: login.stream,
            opts: d.opts.clone(),
            domain: d.domain.clone(),
            muc: match d.muc_domain.get() {
                Some(Some(m)) => Ok(m.clone()),
                _ => Err("the MUC service is not known yet".to_owned()),
            },
            nick: d.opts.nick.replace("{user}", &user.id),
            username: d.username.as_str().into(),
            me: format!("{}@{}", d.username.replace("{user}", &user.id), d.domain),
            started: d.started,
            sm: login.sm,
            resumed: login.resumed,
            pending: VecDeque::new(),
            replaying: true,
            archive_page: None,
            resume,
            reply_timeout: d.connector.timeout(),
            next_id: 0,
            left: false,
            resubscribed: HashSet::new(),
        };
        s.pending.extend(login.settled.into_iter().map(Held::event));
        for e in login.early {
            if let Err(f) = s.absorb(e) {
                return Err(Box::new((f, s.resume)));
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
            "message" => match &mut self.archive_page {
                Some(page) => match mam::result(&e, &page.id, &self.me) {
                    Some(a) => {
                        page.results += 1;
                        page.bodies.extend(a.body);
                        self.resume.mam_after = Some(a.id);
                        Ok(())
                    }
                    None => self.message(e, count),
                },
                None => self.message(e, count),
            },
            "iq" => {
                self.answer_iq(&e);
                Ok(())
            }
            "presence" => {
                if let Some(event) = self.presence_in(&e) {
                    self.hold(event, count);
                }
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
                    while let Some(u) = sm.tags.front() {
                        if !acked(u.n, h) {
                            break;
                        }
                        let tag = u.tag;
                        sm.tags.pop_front();
                        self.pending.push_back(Held::event(Event::Accepted { tag }));
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
            let failure = Failure::new(ErrorKind::SendFailed, detail);
            self.pending
                .push_back(Held::event(Event::ProtocolError(failure)));
            return Ok(());
        }
        let Some(body) = e.child("body").map(|b| b.text.clone()) else {
            if let Some(event) = self.signal_in(&e) {
                self.hold(event, count);
            }
            return Ok(());
        };
        // Only live pushes move the archive position: what arrives while fetching, and an
        // offline copy (`<delay>`) whenever it comes, may be older than what the archive
        // query has to return (a late offline copy would move it back, and the final
        // verification's query would return messages the user had had).
        let mam = self.opts.fetch == Fetch::Mam;
        let unplaced = self.replaying || e.child_ns("delay", ns::DELAY).is_some();
        let archive = match mam && !unplaced {
            true => mam::stanza_id(&e, &self.me).map(str::to_owned),
            false => None,
        };
        // The offline storage's copy of a message the archive returned: not a duplicate.
        if self.resume.copies.repeats(&body) {
            return Ok(());
        }
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
            event: Event::Delivered { body: body.into() },
            stanza: count,
            archive,
            unplaced: mam && unplaced && kind != "groupchat",
        });
        Ok(())
    }

    /// Keeps a received signal's token for the engine, acknowledged once the engine has
    /// it (as a message).
    fn hold(&mut self, event: Event, stanza: Option<u32>) {
        self.pending.push_back(Held {
            event,
            stanza,
            archive: None,
            unplaced: false,
        });
    }

    /// Queues `xml`, a stanza whose acceptance the engine waits for as `tag` (an XEP-0198
    /// ack; kept to send again when the session resumes).
    fn tracked(&mut self, tag: u64, xml: String) {
        self.stanza(&xml);
        if let Some(sm) = &mut self.sm {
            let xml = sm.id.is_some().then_some(xml);
            sm.tags.push_back(Unacked {
                n: sm.sent,
                tag,
                xml,
            });
        }
    }

    /// Answers an `<iq>` the server sent: a ping or a roster push (RFC 6121 §2.1.6) gets
    /// its result, any other request an error; results and errors of our own requests
    /// need nothing.
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
        let ours = e.child_ns("ping", ns::PING).is_some()
            || (kind == "set" && e.child_ns("query", ns::ROSTER).is_some());
        let reply = if ours {
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

    /// Asks that the new room `room`, locked until configured, be an instant room; returns
    /// the request's id.
    fn configure_instant(&mut self, room: &str) -> String {
        let id = self.id("cfg");
        self.stanza(&format!(
            "<iq type='set' id='{id}' to='{}'><query xmlns='{}'>\
             <x xmlns='jabber:x:data' type='submit'/></query></iq>",
            escape(room),
            ns::MUC_OWNER
        ));
        id
    }

    /// Joins room `room` once, waiting for its answer up to [`JOIN_SILENCE`].
    async fn join_once(&mut self, room: &str, history: u32) -> Result<Attempt, Failure> {
        let me = format!("{room}/{}", self.nick);
        self.stanza(&format!(
            "<presence to='{}'><x xmlns='{}'><history maxstanzas='{history}'/></x></presence>",
            escape(&me),
            ns::MUC
        ));
        let mut configuring: Option<String> = None;
        let (mut joined, mut subject) = (false, false);
        let silence = Instant::now() + JOIN_SILENCE;
        loop {
            self.write().await?;
            let Ok(e) = tokio::time::timeout_at(silence.into(), self.stream.element()).await else {
                return Ok(Attempt::Unanswered);
            };
            let e = e?;
            let from = e.attr("from").unwrap_or_default();
            if e.name == "presence" && from == me {
                self.count_stanza_in();
                if e.attr("type") == Some("error") {
                    return match error_condition(&e) {
                        // Locked while its creator configures it, or gone meanwhile.
                        Some("item-not-found" | "not-allowed" | "conflict") => Ok(Attempt::Refused),
                        _ => Err(Failure::new(
                            ErrorKind::JoinFailed,
                            format!("joining {room} refused: {}", stanza_error(&e)),
                        )),
                    };
                }
                if created(&e) {
                    configuring = Some(self.configure_instant(room));
                }
                joined = true;
                continue;
            }
            if e.name == "iq" && configuring.is_some() && e.attr("id") == configuring.as_deref() {
                self.count_stanza_in();
                if e.attr("type") != Some("result") {
                    return Err(Failure::new(
                        ErrorKind::JoinFailed,
                        format!("configuring new room {room}: {}", stanza_error(&e)),
                    ));
                }
                configuring = None;
                if joined && subject {
                    return Ok(Attempt::Joined);
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
                    return Ok(Attempt::Joined);
                }
                continue;
            }
            self.absorb(e)?;
        }
    }

    /// The JID of `group`'s room, or why the MUC service is unknown.
    fn room(&self, group: &str) -> Result<String, &str> {
        match &self.muc {
            Ok(service) => Ok(format!(
                "{}@{service}",
                self.opts.room.replace("{group}", group)
            )),
            Err(why) => Err(why),
        }
    }

    /// Absorbs what arrives until the answer to our request `id` (counted, and returned),
    /// within the reply timeout.
    async fn until_reply(&mut self, id: &str, what: &str) -> Result<Element, Failure> {
        let limit = self.reply_timeout;
        let reply = async {
            loop {
                self.write().await?;
                let e = self.stream.element().await?;
                if e.name == "iq" && e.attr("id") == Some(id) {
                    self.count_stanza_in();
                    return Ok::<Element, Failure>(e);
                }
                self.absorb(e)?;
            }
        };
        match tokio::time::timeout(limit, reply).await {
            Ok(r) => r,
            Err(_) => Err(Failure::new(
                ErrorKind::Timeout,
                format!("no answer to {what} within {limit:?}"),
            )),
        }
    }

    /// Pages through this user's MAM archive after the last message it had (or from the
    /// run's start): the bodies others sent it in 1:1 chat, oldest first. Pushes arriving
    /// meanwhile are kept in `pending`.
    async fn fetch_archive(&mut self) -> Result<Vec<String>, Failure> {
        let mut bodies = Vec::new();
        loop {
            let id = self.id("mam");
            let since = match &self.resume.mam_after {
                Some(after) => Since::After(after),
                None => Since::Time(self.started),
            };
            let q = mam::query(&id, since);
            self.stanza(&q);
            self.archive_page = Some(Page {
                id: id.clone(),
                bodies: std::mem::take(&mut bodies),
                results: 0,
            });
            let iq = self.until_reply(&id, "a MAM query").await;
            let page = self.archive_page.take().unwrap_or_default();
            bodies = page.bodies;
            let iq = iq?;
            if iq.attr("type") != Some("result") {
                return Err(Failure::new(
                    ErrorKind::Protocol,
                    format!(
                        "MAM query refused: {} (`fetch = \"mam\"` needs a server with \
                         XEP-0313 enabled for the user)",
                        stanza_error(&iq)
                    ),
                ));
            }
            if mam::fin(&iq) != Some(false) || page.results == 0 {
                return Ok(bodies);
            }
        }
    }

    /// Asks the server for its MUC service (see [`disco`]): the first item of the domain
    /// that is one, `None` when none is.
    pub(super) async fn discover_muc(&mut self) -> Result<Option<String>, Failure> {
        let id = self.id("disco");
        let domain = self.domain.clone();
        self.stanza(&disco::query(&id, &domain, disco::ITEMS));
        let items = disco::items(&self.until_reply(&id, "a disco#items query").await?);
        for jid in items.into_iter().filter(|j| disco::is_service(j)) {
            let id = self.id("disco");
            self.stanza(&disco::query(&id, &jid, disco::INFO));
            if disco::is_muc(&self.until_reply(&id, "a disco#info query").await?) {
                return Ok(Some(jid));
            }
        }
        Ok(None)
    }

    /// Sets the MUC service to what [`XmppSession::discover_muc`] found.
    pub(super) fn set_muc(&mut self, found: Result<Option<String>, Failure>) {
        self.muc = match found {
            Ok(Some(service)) => Ok(service),
            Ok(None) => Err(format!(
                "{} lists no MUC service (disco#items, then disco#info for {}): set \
                 `target.xmpp.muc_domain`",
                self.domain,
                ns::MUC
            )),
            Err(f) => Err(format!("finding the MUC service failed: {}", f.detail)),
        };
    }

    /// Counts a received stanza the driver consumed itself.
    fn count_stanza_in(&mut self) {
        if let Some(sm) = &mut self.sm {
            sm.received = sm.received.wrapping_add(1);
        }
    }

    /// Moves the messages waiting in `pending` to `out` (other events stay), dropping
    /// copies of what the archive returned while they waited.
    fn take_delivered(&mut self, out: &mut Vec<String>) {
        let mut rest = VecDeque::with_capacity(self.pending.len());
        for held in std::mem::take(&mut self.pending) {
            match held.event {
                Event::Delivered { body } if self.resume.copies.repeats(&body) => {}
                Event::Delivered { body } => {
                    self.handing(held.archive, held.unplaced, &body);
                    out.push(body.into());
                }
                event => rest.push_back(Held { event, ..held }),
            }
        }
        self.pending = rest;
    }

    /// A pushed message goes to the engine: the archive position moves past it, or the
    /// archive may return it again.
    fn handing(&mut self, archive: Option<String>, unplaced: bool, body: &str) {
        if archive.is_some() {
            self.resume.mam_after = archive;
        }
        if unplaced {
            self.resume.copies.pushed_unplaced(body);
        }
    }
}

impl Session for XmppSession {
    type Resume = XmppResume;

    async fn send(&mut self, tag: u64, dest: Dest<'_>, body: &str) -> Result<(), Failure> {
        let (to, kind) = self.conv(dest)?;
        // The envelope's header as id: a reader's marker names it (XEP-0333).
        let id = match signals::message_id(body) {
            Some(header) => escape(header).into_owned(),
            None => format!("m{tag}"),
        };
        let xml = format!(
            "<message type='{kind}' to='{}' id='{id}'><body>{}</body></message>",
            escape(&to),
            escape(body)
        );
        self.tracked(tag, xml);
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
        let room = self
            .room(group)
            .map_err(|why| Failure::new(ErrorKind::JoinFailed, why))?;
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
                match self.join_once(&room, history).await? {
                    Attempt::Joined => return Ok(()),
                    Attempt::Refused => tokio::time::sleep(JOIN_RETRY).await,
                    // Said in the report: the join goes again, the room having lost it.
                    Attempt::Unanswered => {
                        self.pending
                            .push_back(Held::event(Event::ProtocolError(Failure::new(
                                ErrorKind::Timeout,
                                format!(
                                    "joining {room}: no answer within {JOIN_SILENCE:?}, \
                                 the join was sent again"
                                ),
                            ))))
                    }
                }
            }
            Err(Failure::new(
                ErrorKind::JoinFailed,
                format!("could not join {room} in {JOIN_ATTEMPTS} attempts"),
            ))
        };
        match tokio::time::timeout(limit, attempts).await {
            Ok(r) => r,
            Err(_) => Err(Failure::new(
                ErrorKind::JoinFailed,
                format!("joining {room}: no answer within {limit:?}"),
            )),
        }
    }

    async fn fetch_missed(&mut self, out: &mut Vec<String>) -> Result<(), Failure> {
        // Fetching until the end of this call (pushes do not move the archive position).
        if !std::mem::replace(&mut self.replaying, true) {
            // A session that is already live (the final verification): presence off and
            // on again makes the server hand over what its offline storage still holds for
            // this user — messages it stored while the user was online, as ejabberd does
            // when a message races the presence of a login. Rooms see the user leave; this
            // runs only once traffic is over.
            self.stanza("<presence type='unavailable'/>");
            self.stanza("<presence/>");
        }
        // A ping round trip: the server has had our presence (and sent the offline
        // messages it triggers) before it answers.
        let id = self.id("ping");
        self.stanza(&format!(
            "<iq type='get' id='{id}' to='{}'><ping xmlns='{}'/></iq>",
            escape(&self.domain),
            ns::PING
        ));
        self.until_reply(&id, "a ping").await?;
        self.take_delivered(out);
        if self.opts.fetch == Fetch::Mam {
            let bodies = self.fetch_archive().await?;
            // From here on, what arrives is newer than the archive's answer.
            self.replaying = false;
            // Pushes arriving during the query first, then what the archive returned that
            // no push brought (each message comes once: `mam::Copies`).
            self.take_delivered(out);
            for b in bodies {
                if self.resume.copies.archived(&b) {
                    out.push(b);
                }
            }
        }
        let quiet = self.opts.offline_quiet;
        let until = Instant::now() + OFFLINE_LIMIT;
        while Instant::now() < until {
            match tokio::time::timeout(quiet, self.step()).await {
                Err(_) => break,
                Ok(r) => r?,
            }
            self.take_delivered(out);
        }
        self.resume.copies.fetch_done();
        self.write().await
    }

    async fn contacts(&mut self, ids: &[&str]) -> Result<(), Failure> {
        self.add_contacts(ids).await
    }

    async fn signal(&mut self, tag: u64, signal: Signal<'_>, token: &str) -> Result<(), Failure> {
        self.send_signal(tag, signal, token).await
    }

    async fn next_event(&mut self) -> Event {
        // The engine reads events without fetching first: what arrives is pushes.
        self.replaying = false;
        loop {
            // Taken out of `pending`, a message counts as handed to the engine (`handed`).
            if let Some(held) = self.pending.pop_front() {
                if let Event::Delivered { body } = &held.event {
                    self.handing(held.archive, held.unplaced, body);
                }
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
        // Unavailable first, as a client logging off says: from then on the server stores
        // new messages offline instead of routing them to a session that is going away.
        // (ejabberd 23.01 reads a recipient's sessions and then routes to one of them;
        // a session closed in between silently loses the message, `ejabberd_sm:
        // route_message`, "Race condition". Without the presence, every message routed
        // until the close takes that risk.)
        if !self.left {
            self.stanza("<presence type='unavailable'/>");
        }
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

    /// A resumable XEP-0198 session sends its unacknowledged messages again once resumed.
    fn resends_unacked(&self) -> bool {
        self.sm.as_ref().is_some_and(|sm| sm.id.is_some())
    }

    /// The connection is gone: keep what resuming its XEP-0198 session takes.
    fn into_resume(mut self) -> XmppResume {
        let handed = self.sm.as_ref().map(|sm| self.handed(sm));
        self.resume.sm = self.sm.take().and_then(|sm| {
            Some(SmResume {
                id: sm.id?,
                handed: handed?,
                unacked: sm.tags,
            })
        });
        self.resume
    }
}
