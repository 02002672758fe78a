//! One user's connection driven by the adapter script: the entry points called (hot ones
//! directly, waiting ones as coroutines), the frames they queue written, every incoming
//! frame judged by `receive` into the engine's events.

mod judge;
mod meta;
pub(super) mod signals;

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use mlua::{Function, MultiValue, Table, Thread, ThreadStatus, Value};

use super::frame::Frame;
use super::http::Request;
use super::items::{self, Items};
use super::limits::Guard;
use super::link::Link;
use super::long_poll::LongPoll;
use super::said::{Said, Scalar};
use super::sends::{Sends, Template};
use super::vm::{described, one_line, take_outbox, Out, Vm, REFUSED};
use crate::driver::directory::{self, Directory};
use crate::driver::kit::cursors::Cursors;
use crate::driver::{Dest, Event, Failure, Session, Signal, UserCtx};
use crate::metrics::ErrorKind;

/// A user's session under the script driver.
#[derive(Debug)]
pub struct ScriptSession {
    link: Link,
    lua: mlua::Lua,
    /// The interpreter's bounds: every call into the script goes through it.
    guard: Arc<Guard>,
    entry: Entry,
    /// The user object (`u`) the entry points get.
    user: Table,
    /// The metatable of `receive`'s `meta` tables (their headers built when read).
    meta: Table,
    id: String,
    /// Sends waiting for their acceptance: (id, tag), oldest first.
    pending: VecDeque<(String, u64)>,
    /// Requests waiting for their reply: (id, tag), oldest first.
    requests: VecDeque<(String, u64)>,
    /// Events judged and not handed out yet.
    ready: VecDeque<Event>,
    cursors: Cursors,
    reply_timeout: Duration,
    acceptance: bool,
    directory: Arc<dyn Directory>,
    /// The users this connection opened a conversation with (`open` ran for them).
    opened: HashSet<String>,
    /// The connection has carried traffic (a send, a request, an event): a fetch now is
    /// the final verification (`"verify"`), not a login's catch-up (`"missed"`).
    live: bool,
    /// The long poll the script declared (`u:long_poll`), which replaces `poll(u)`.
    long_poll: Option<LongPoll>,
    /// The sends the script declared by template (`u:sends`), which replace `direct` and
    /// `group`.
    sends: Sends,
}

/// The entry points, cloned from the [`Vm`] (cheap handles into its state).
#[derive(Debug, Clone)]
struct Entry {
    login: Function,
    receive: Function,
    direct: Option<Function>,
    group: Option<Function>,
    open: Option<Function>,
    join: Option<Function>,
    heartbeat: Option<Function>,
    fetch: Option<Function>,
    close: Option<Function>,
    request: Option<Function>,
    poll: Option<Function>,
    contacts: Option<Function>,
    receipt: Option<Function>,
    typing: Option<Function>,
    presence: Option<Function>,
}

/// Which flow a coroutine runs, for the kind of a refusal.
#[derive(Debug, Clone, Copy)]
enum Flow {
    Login,
    Open,
    Join,
    Fetch,
    Close,
    Contacts,
}

impl Flow {
    fn refused(self) -> ErrorKind {
        match self {
            Flow::Login => ErrorKind::AuthFailed,
            Flow::Open => ErrorKind::SendFailed,
            Flow::Join => ErrorKind::JoinFailed,
            Flow::Fetch | Flow::Close | Flow::Contacts => ErrorKind::Protocol,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Flow::Login => "login",
            Flow::Open => "open",
            Flow::Join => "join",
            Flow::Fetch => "fetch",
            Flow::Close => "close",
            Flow::Contacts => "contacts",
        }
    }
}

/// An HTTP operation of a script whose target is a socket.
fn not_http(what: &str) -> Failure {
    Failure::new(
        ErrorKind::Script,
        format!("{what} needs an http:// or https:// target (this one is a socket: u:send)"),
    )
}

/// A Lua error as the failure of a script: kind `script`, the script's line.
fn script_error(what: &str, e: &mlua::Error) -> Failure {
    Failure::new(ErrorKind::Script, format!("{what}: {}", one_line(e)))
}

/// The string form of a request id (a number or a string in the script).
fn id_key(v: &Value) -> Option<String> {
    Scalar::of_lua(v).and_then(|s| s.id())
}

impl ScriptSession {
    /// A session on `link` for `user`, its object made in `vm`.
    pub(super) fn new(
        link: Link,
        vm: &Vm,
        user: &UserCtx,
        (username, password, url): (&str, &str, &str),
        cursors: Cursors,
        (reply_timeout, acceptance): (Duration, bool),
        directory: Arc<dyn Directory>,
    ) -> Result<Self, (Failure, Cursors)> {
        let made = vm.guard.run(|| {
            vm.entry
                .new_user
                .call::<Table>((user.id.as_str(), user.ix, username, password, url))
        });
        let table = match made {
            Ok(t) => t,
            Err(e) => return Err((script_error("the user object", &e), cursors)),
        };
        let meta = match meta::metatable(&vm.lua) {
            Ok(t) => t,
            Err(e) => return Err((script_error("receive's meta", &e), cursors)),
        };
        let e = &vm.entry;
        Ok(ScriptSession {
            link,
            lua: vm.lua.clone(),
            guard: Arc::clone(&vm.guard),
            entry: Entry {
                login: e.login.clone(),
                receive: e.receive.clone(),
                direct: e.direct.clone(),
                group: e.group.clone(),
                open: e.open.clone(),
                join: e.join.clone(),
                heartbeat: e.heartbeat.clone(),
                fetch: e.fetch.clone(),
                close: e.close.clone(),
                request: e.request.clone(),
                poll: e.poll.clone(),
                contacts: e.contacts.clone(),
                receipt: e.receipt.clone(),
                typing: e.typing.clone(),
                presence: e.presence.clone(),
            },
            user: table,
            meta,
            id: user.id.clone(),
            pending: VecDeque::new(),
            requests: VecDeque::new(),
            ready: VecDeque::new(),
            cursors,
            reply_timeout,
            acceptance,
            directory,
            opened: HashSet::new(),
            live: false,
            long_poll: None,
            sends: Sends::default(),
        })
    }

    /// Runs the script's `login`.
    pub(super) async fn login(&mut self) -> Result<(), Failure> {
        let login = self.entry.login.clone();
        self.flow(Flow::Login, &login, MultiValue::new(), None)
            .await
    }

    /// What the user remembers for its next connection.
    pub(super) fn into_cursors(self) -> Cursors {
        self.cursors
    }

    /// Writes the frames (and sends the HTTP requests) the script queued in the user's
    /// outbox.
    async fn write_outbox(&mut self) -> Result<(), Failure> {
        let queued = take_outbox(&self.user).map_err(|e| script_error("send", &e))?;
        for q in queued {
            match (q, &mut self.link) {
                (Out::Frame(frame), link) => link.write(frame).await?,
                (Out::Request(r), Link::Http(h)) => h.request(r)?,
                (Out::Request(_), _) => return Err(not_http("u:request")),
            }
        }
        Ok(())
    }

    /// Runs `f(u, args…)` as a coroutine: each operation it yields is carried out and
    /// answered, the frames it queues are written, fetched messages go to `out`.
    async fn flow(
        &mut self,
        flow: Flow,
        f: &Function,
        args: MultiValue,
        mut out: Option<&mut Vec<String>>,
    ) -> Result<(), Failure> {
        let thread: Thread = self
            .lua
            .create_thread(f.clone())
            .map_err(|e| script_error(flow.name(), &e))?;
        let mut input = MultiValue::new();
        input.push_back(Value::Table(self.user.clone()));
        input.extend(args);
        loop {
            let yielded = self.guard.run(|| thread.resume::<MultiValue>(input));
            self.write_outbox().await?;
            self.link.flush().await?;
            let yielded = match yielded {
                Ok(y) => y,
                Err(e) => return Err(self.flow_error(flow, &e)),
            };
            if thread.status() != ThreadStatus::Resumable {
                return Ok(());
            }
            input = self.operation(flow, yielded, out.as_deref_mut()).await?;
        }
    }

    /// A failed flow: `refuse(reason)` is the server's refusal, anything else a script
    /// error.
    fn flow_error(&self, flow: Flow, e: &mlua::Error) -> Failure {
        let line = one_line(e);
        match line.strip_prefix(REFUSED) {
            Some(reason) => {
                Failure::new(flow.refused(), format!("{} refused: {reason}", flow.name()))
            }
            None => Failure::new(ErrorKind::Script, format!("{}: {line}", flow.name())),
        }
    }

    /// Carries out one operation a flow yielded and returns its answer.
    async fn operation(
        &mut self,
        flow: Flow,
        yielded: MultiValue,
        out: Option<&mut Vec<String>>,
    ) -> Result<MultiValue, Failure> {
        let mut args = yielded.into_iter();
        let op = match args.next() {
            Some(Value::String(s)) => s.to_string_lossy(),
            _ => {
                return Err(Failure::new(
                    ErrorKind::Script,
                    format!(
                        "{}: coroutine.yield is msgstorm's: use u:call, u:await, u:upto, \
                         u:cover or u:deliver",
                        flow.name()
                    ),
                ))
            }
        };
        let mut arg = || args.next().unwrap_or(Value::Nil);
        let answer = match op.as_str() {
            "wait" => {
                let id = arg();
                let timeout = seconds(&arg()).unwrap_or(self.reply_timeout);
                Value::Table(self.wait(flow, &id, timeout, out).await?)
            }
            "upto" => {
                let conv = text(&arg());
                Value::Integer(self.cursors.upto(&conv) as i64)
            }
            "cover" => match arg() {
                Value::UserData(list) => {
                    let list = list
                        .borrow::<Items>()
                        .map_err(|e| script_error(flow.name(), &e))?;
                    for said in list.0.iter() {
                        if let (Some(conv), Some(seq)) = (&said.conv, &said.seq) {
                            let seq = seq.number();
                            self.cursors.cover(&conv.as_text(), seq);
                        }
                    }
                    Value::Nil
                }
                conv => {
                    let seq = number(&arg());
                    self.cursors.cover(&text(&conv), seq);
                    Value::Nil
                }
            },
            "deliver" => match arg() {
                Value::UserData(list) => {
                    // Shared with the list `having` made it from, most likely: read in place.
                    let list = std::mem::take(
                        &mut list
                            .borrow_mut::<Items>()
                            .map_err(|e| script_error(flow.name(), &e))?
                            .0,
                    );
                    Value::Integer(self.fetched_list(&list, out) as i64)
                }
                body => {
                    let (conv, seq, from) = (arg(), arg(), arg());
                    let said = Said {
                        item: Scalar::of_lua(&body),
                        conv: Scalar::of_lua(&conv),
                        seq: Scalar::of_lua(&seq),
                        from: Scalar::of_lua(&from),
                        ..Said::default()
                    };
                    Value::Boolean(self.fetched(&said, out))
                }
            },
            "http" => {
                let (method, path, body, headers) = (arg(), arg(), arg(), arg());
                let timeout = seconds(&arg()).unwrap_or(self.reply_timeout);
                Value::Table(
                    self.http(flow, [method, path, body, headers], timeout)
                        .await?,
                )
            }
            "sse" => {
                let (path, headers) = (arg(), arg());
                let request = Self::request_of(flow, [Value::Nil, path, Value::Nil, headers])?;
                match &mut self.link {
                    Link::Http(h) => h.sse(request).await?,
                    _ => return Err(not_http("u:sse")),
                }
                Value::Nil
            }
            "long_poll" => {
                self.long_poll = Some(declared::<LongPoll>(flow, "u:long_poll", arg())?);
                if !matches!(self.link, Link::Http(_)) {
                    return Err(not_http("u:long_poll"));
                }
                Value::Nil
            }
            "sends" => {
                self.sends = declared::<Sends>(flow, "u:sends", arg())?;
                if !matches!(self.link, Link::Http(_)) {
                    return Err(not_http("u:sends"));
                }
                Value::Nil
            }
            "sleep" => {
                // Bounded like any wait: a script cannot park a user for longer.
                let pause = seconds(&arg()).unwrap_or_default().min(self.reply_timeout);
                tokio::time::sleep(pause).await;
                Value::Nil
            }
            "publish" => {
                let (key, value) = (text(&arg()), text(&arg()));
                self.publish(flow, key, value, false).await?;
                Value::Nil
            }
            "claim" => {
                let (key, value) = (text(&arg()), text(&arg()));
                let winner = self.publish(flow, key, value, true).await?;
                Value::String(
                    self.lua
                        .create_string(winner)
                        .map_err(|e| script_error(flow.name(), &e))?,
                )
            }
            "lookup" => {
                let key = text(&arg());
                // A timeout of 0 asks once: nil when nobody published the key yet.
                let limit = arg();
                let peek = matches!(limit, Value::Integer(0))
                    || matches!(limit, Value::Number(n) if n == 0.0);
                let timeout = seconds(&limit).unwrap_or(self.reply_timeout);
                match self.lookup(flow, key, timeout, peek).await? {
                    Some(value) => Value::String(
                        self.lua
                            .create_string(value)
                            .map_err(|e| script_error(flow.name(), &e))?,
                    ),
                    None => Value::Nil,
                }
            }
            other => {
                return Err(Failure::new(
                    ErrorKind::Script,
                    format!("{}: unknown operation `{other}`", flow.name()),
                ))
            }
        };
        Ok(MultiValue::from_iter([answer]))
    }

    /// An HTTP request from a script's (method, path, body, headers).
    fn request_of(
        flow: Flow,
        [method, path, body, headers]: [Value; 4],
    ) -> Result<Request, Failure> {
        described([method, path, body, headers, Value::Nil])
            .map_err(|e| script_error(flow.name(), &e))
    }

    /// `u:http(…)`: the request's answer as `{ status, body, headers }`, within `timeout`.
    async fn http(
        &mut self,
        flow: Flow,
        described: [Value; 4],
        timeout: Duration,
    ) -> Result<Table, Failure> {
        let request = Self::request_of(flow, described)?;
        let Link::Http(h) = &mut self.link else {
            return Err(not_http("u:http"));
        };
        let answer = tokio::time::timeout(timeout, h.call(&request))
            .await
            .map_err(|_| {
                Failure::new(
                    ErrorKind::Timeout,
                    format!(
                        "{}: u:http {} {}: no answer within {timeout:?}",
                        flow.name(),
                        request.method,
                        request.path
                    ),
                )
            })??;
        let made = || -> mlua::Result<Table> {
            let t = self.lua.create_table()?;
            t.raw_set("status", answer.status)?;
            t.raw_set("body", self.lua.create_string(&answer.body)?)?;
            t.raw_set("headers", meta::headers_table(&self.lua, &answer.headers)?)?;
            Ok(t)
        };
        made().map_err(|e| script_error(flow.name(), &e))
    }

    /// Starts the next long poll when the target is HTTP, the script declared one or has
    /// `poll`, and none is out: the declared one's next request, or the one `poll(u)` says
    /// (nil: none now).
    async fn poll_next(&mut self) -> Result<(), Failure> {
        if let (Some(declared), Link::Http(h)) = (&mut self.long_poll, &mut self.link) {
            if !h.polling {
                match declared.pause() {
                    Some(pause) => h.poll_after(pause, declared.request())?,
                    None => h.poll(declared.request())?,
                }
            }
            return Ok(());
        }
        let (Some(poll), Link::Http(h)) = (self.entry.poll.clone(), &self.link) else {
            return Ok(());
        };
        if h.polling {
            return Ok(());
        }
        let user = self.user.clone();
        let got = self
            .guard
            .run(|| poll.call::<Table>(user))
            .map_err(|e| script_error("poll", &e))?;
        let at = |i: usize| got.raw_get::<Value>(i).unwrap_or(Value::Nil);
        let method = at(1);
        if matches!(method, Value::Nil) {
            return Ok(());
        }
        let request = Self::request_of(Flow::Fetch, [method, at(2), at(3), at(4)])?;
        if let Link::Http(h) = &mut self.link {
            h.poll(request)?;
        }
        Ok(())
    }

    /// Publishes `value` under `key` in the run-wide directory — when `claim`, only if
    /// the key is free — and returns the value under the key then.
    async fn publish(
        &self,
        flow: Flow,
        key: String,
        value: String,
        claim: bool,
    ) -> Result<String, Failure> {
        directory::check(&key, Some(&value))
            .map_err(|why| Failure::new(ErrorKind::Script, format!("{}: {why}", flow.name())))?;
        let dir = Arc::clone(&self.directory);
        let put = move || {
            if claim {
                dir.claim(&key, &value)
            } else {
                dir.publish(&key, &value).map(|()| value)
            }
        };
        let done = if self.directory.remote() {
            tokio::task::spawn_blocking(put)
                .await
                .map_err(std::io::Error::other)
                .and_then(|r| r)
        } else {
            put()
        };
        done.map_err(|e| {
            Failure::new(
                ErrorKind::Other,
                format!("{}: the run's directory: {e}", flow.name()),
            )
        })
    }

    /// The value under `key` in the run-wide directory, waiting up to `timeout` for some
    /// user (of any shard) to publish it; with `peek`, asked once (None: not published).
    async fn lookup(
        &self,
        flow: Flow,
        key: String,
        timeout: Duration,
        peek: bool,
    ) -> Result<Option<String>, Failure> {
        directory::check(&key, None)
            .map_err(|why| Failure::new(ErrorKind::Script, format!("{}: {why}", flow.name())))?;
        let deadline = tokio::time::Instant::now() + timeout;
        let mut poll = LOOKUP_POLL;
        loop {
            let dir = Arc::clone(&self.directory);
            let k = key.clone();
            let found = if dir.remote() {
                tokio::task::spawn_blocking(move || dir.lookup(&k))
                    .await
                    .map_err(std::io::Error::other)
                    .and_then(|r| r)
            } else {
                dir.lookup(&k)
            };
            match found {
                Ok(Some(v)) => return Ok(Some(v)),
                Ok(None) if peek => return Ok(None),
                Ok(None) if tokio::time::Instant::now() >= deadline => {
                    return Err(Failure::new(
                        ErrorKind::Timeout,
                        format!(
                            "{}: u:lookup(\"{key}\"): nobody published it within {timeout:?}",
                            flow.name()
                        ),
                    ))
                }
                // Published by another user's flow soon: a bounded poll (the directory
                // may be another process), backing off so that many users waiting on a
                // remote directory do not flood shard 0.
                Ok(None) => {
                    let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                    tokio::time::sleep(poll.min(left)).await;
                    poll = (poll * 2).min(LOOKUP_POLL_MAX);
                }
                Err(e) => {
                    return Err(Failure::new(
                        ErrorKind::Other,
                        format!("{}: the run's directory: {e}", flow.name()),
                    ))
                }
            }
        }
    }

    /// Reads frames until the one `receive` says answers `id` (`reply`, `error` or `ack`
    /// with that id), judging every other one; bounded by `timeout`.
    async fn wait(
        &mut self,
        flow: Flow,
        id: &Value,
        timeout: Duration,
        mut out: Option<&mut Vec<String>>,
    ) -> Result<Table, Failure> {
        let want = id_key(id);
        let exchange = async {
            loop {
                let frame = self.link.next().await?;
                let mut answer = None;
                for said in self.receive(frame).await? {
                    let answers = want.as_deref().is_some_and(|w| said.answers(w));
                    if answers && answer.is_none() {
                        answer = Some(said);
                    } else if said.item.is_some() && matches!(flow, Flow::Fetch) {
                        self.fetched(&said, out.as_deref_mut());
                    } else {
                        self.interpret(said);
                    }
                }
                if let Some(out) = out.as_deref_mut() {
                    self.divert(out);
                }
                if let Some(said) = answer {
                    return match said.table {
                        Some(t) => Ok(t),
                        None => items::table_of(&self.lua, &said)
                            .map_err(|e| script_error(flow.name(), &e)),
                    };
                }
            }
        };
        match tokio::time::timeout(timeout, exchange).await {
            Ok(r) => r,
            Err(_) => Err(Failure::new(
                ErrorKind::Timeout,
                format!(
                    "{}: no reply with id {} within {timeout:?}",
                    flow.name(),
                    want.unwrap_or_else(|| "nil".into())
                ),
            )),
        }
    }

    /// Moves the messages pushed while a fetch runs into what it fetched, in the order
    /// they came: the ledger then sees the user's arrivals in order (a push that came
    /// before a fetched page is not a reordering of it).
    fn divert(&mut self, out: &mut Vec<String>) {
        if !self
            .ready
            .iter()
            .any(|e| matches!(e, Event::Delivered { .. }))
        {
            return;
        }
        let mut rest = VecDeque::with_capacity(self.ready.len());
        for ev in self.ready.drain(..) {
            match ev {
                Event::Delivered { body } => out.push(body.as_str().to_owned()),
                other => rest.push_back(other),
            }
        }
        self.ready = rest;
    }

    /// What `receive(u, frame, kind)` says the frame is (none, one or several things),
    /// after writing what it sent in answer (a pong, a subscription the frame asked for).
    /// A frame the script's declarations judge calls nothing in it, so nothing is queued.
    async fn receive(&mut self, frame: Frame) -> Result<Vec<Said>, Failure> {
        if let Some(said) = self.declared(&frame)? {
            return Ok(said);
        }
        let interpreted = self.interpret_frame(frame)?;
        if self.outbox_len() > 0 {
            self.write_outbox().await?;
            self.link.flush().await?;
        }
        Ok(interpreted)
    }

    /// How many frames the script queued.
    fn outbox_len(&self) -> usize {
        self.user
            .raw_get::<Table>("_out")
            .map_or(0, |t| t.raw_len())
    }

    /// `fetch`'s second argument: why it runs (`"start"`, `"missed"` or `"verify"`).
    fn why(&self, why: &str) -> Result<MultiValue, Failure> {
        let why = self
            .lua
            .create_string(why)
            .map_err(|e| script_error("fetch", &e))?;
        Ok(MultiValue::from_iter([Value::String(why)]))
    }

    /// Notes the send `tag` as waiting for the acceptance that carries `id`, which the
    /// entry point `what` returned.
    fn awaits_acceptance(&mut self, what: &str, id: &Value, tag: u64) -> Result<(), Failure> {
        match id_key(id) {
            Some(id) => {
                self.pending.push_back((id, tag));
                Ok(())
            }
            None => Err(Failure::new(
                ErrorKind::Script,
                format!(
                    "{what} returned no id for its acceptance (return the request id, or set \
                     acceptance = false)"
                ),
            )),
        }
    }

    /// The tag of the pending send with id `id`, removed.
    fn take_pending(&mut self, id: &str) -> Option<u64> {
        take(&mut self.pending, id)
    }

    /// Sends `body` to `to` by the declared `template`, with the user's next request id,
    /// and notes the send `tag` as waiting for the acceptance that carries it.
    fn send_templated(
        &mut self,
        tag: u64,
        template: &Template,
        to: &str,
        body: &str,
    ) -> Result<(), Failure> {
        let next = || -> mlua::Result<i64> {
            let id = self.user.raw_get::<i64>("_id")? + 1;
            self.user.raw_set("_id", id)?;
            Ok(id)
        };
        let id = next().map_err(|e| script_error("u:sends", &e))?.to_string();
        let Link::Http(h) = &self.link else {
            return Err(not_http("u:sends"));
        };
        h.request(template.request(&id, to, body))?;
        if self.acceptance {
            self.pending.push_back((id, tag));
        }
        Ok(())
    }

    /// Calls a hot entry point (it must not wait) and writes what it queued; returns what
    /// it returned.
    async fn call_hot(
        &mut self,
        what: &str,
        f: &Function,
        args: MultiValue,
    ) -> Result<Value, Failure> {
        let mut all = MultiValue::new();
        all.push_back(Value::Table(self.user.clone()));
        all.extend(args);
        let ret = self
            .guard
            .run(|| f.call::<Value>(all))
            .map_err(|e| script_error(what, &e))?;
        self.write_outbox().await?;
        Ok(ret)
    }
}

/// What a declaration (`u:long_poll`, `u:sends`) yielded: the prelude's reader made it.
fn declared<T: mlua::UserData + Clone + 'static>(
    flow: Flow,
    what: &str,
    v: Value,
) -> Result<T, Failure> {
    match v {
        Value::UserData(ud) => ud.borrow::<T>().map(|d| d.clone()).ok(),
        _ => None,
    }
    .ok_or_else(|| {
        Failure::new(
            ErrorKind::Script,
            format!("{}: {what} takes a table", flow.name()),
        )
    })
}

/// The tag waiting under `id` in `waiting`, removed.
fn take(waiting: &mut VecDeque<(String, u64)>, id: &str) -> Option<u64> {
    let i = waiting.iter().position(|(r, _)| r == id)?;
    waiting.remove(i).map(|(_, tag)| tag)
}

/// How soon a lookup asks the directory again, at first.
const LOOKUP_POLL: Duration = Duration::from_millis(20);
/// The longest a lookup waits between two asks.
const LOOKUP_POLL_MAX: Duration = Duration::from_millis(500);

/// A timeout in seconds given by the script, if any.
fn seconds(v: &Value) -> Option<Duration> {
    match v {
        Value::Integer(s) if *s > 0 => Some(Duration::from_secs(*s as u64)),
        Value::Number(s) if *s > 0.0 => Some(Duration::from_secs_f64(*s)),
        _ => None,
    }
}

/// A Lua value as text (strings as they are, numbers printed).
fn text(v: &Value) -> String {
    Scalar::of_lua(v).map(|s| s.text()).unwrap_or_default()
}

/// A Lua value as a sequence number (0 when it is none).
fn number(v: &Value) -> u64 {
    Scalar::of_lua(v).map_or(0, |s| s.number())
}

impl Session for ScriptSession {
    type Resume = Cursors;

    async fn send(&mut self, tag: u64, dest: Dest<'_>, body: &str) -> Result<(), Failure> {
        self.live = true;
        if let (Dest::User(to), Some(open)) = (&dest, &self.entry.open) {
            if !self.opened.contains(*to) {
                let open = open.clone();
                let peer = self
                    .lua
                    .create_string(to)
                    .map_err(|e| script_error("open", &e))?;
                let args = MultiValue::from_iter([Value::String(peer)]);
                self.flow(Flow::Open, &open, args, None).await?;
                self.opened.insert((*to).to_owned());
            }
        }
        let (template, f, to, what) = match dest {
            Dest::User(u) => (&self.sends.direct, self.entry.direct.clone(), u, "direct"),
            Dest::Group(g) => (&self.sends.group, self.entry.group.clone(), g, "group"),
        };
        if let Some(template) = template.clone() {
            return self.send_templated(tag, &template, to, body);
        }
        let Some(f) = f else {
            return Err(Failure::new(
                ErrorKind::Script,
                format!("the script defines no function `{what}`"),
            ));
        };
        let args = MultiValue::from_iter([
            Value::String(
                self.lua
                    .create_string(to)
                    .map_err(|e| script_error(what, &e))?,
            ),
            Value::String(
                self.lua
                    .create_string(body)
                    .map_err(|e| script_error(what, &e))?,
            ),
        ]);
        let id = self.call_hot(what, &f, args).await?;
        if self.acceptance {
            self.awaits_acceptance(what, &id, tag)?;
        }
        Ok(())
    }

    async fn request(&mut self, tag: u64, name: &'static str) -> Result<(), Failure> {
        self.live = true;
        let Some(f) = self.entry.request.clone() else {
            return Err(Failure::new(
                ErrorKind::Script,
                format!("the script defines no function `request` (for request `{name}`)"),
            ));
        };
        let args = MultiValue::from_iter([Value::String(
            self.lua
                .create_string(name)
                .map_err(|e| script_error("request", &e))?,
        )]);
        let id = self.call_hot("request", &f, args).await?;
        match id_key(&id) {
            Some(id) => {
                self.requests.push_back((id, tag));
                Ok(())
            }
            None => Err(Failure::new(
                ErrorKind::Script,
                "request returned no id for its reply",
            )),
        }
    }

    async fn heartbeat(&mut self) -> Result<(), Failure> {
        match self.entry.heartbeat.clone() {
            Some(f) => self
                .call_hot("heartbeat", &f, MultiValue::new())
                .await
                .map(drop),
            None => self.link.ping().await,
        }
    }

    async fn flush(&mut self) -> Result<(), Failure> {
        self.link.flush().await
    }

    async fn join(&mut self, group: &str) -> Result<(), Failure> {
        let Some(f) = self.entry.join.clone() else {
            return Err(Failure::new(
                ErrorKind::Script,
                "the script defines no function `join`",
            ));
        };
        let name = self
            .lua
            .create_string(group)
            .map_err(|e| script_error("join", &e))?;
        self.flow(
            Flow::Join,
            &f,
            MultiValue::from_iter([Value::String(name)]),
            None,
        )
        .await
    }

    async fn skip_history(&mut self) -> Result<(), Failure> {
        match self.entry.fetch.clone() {
            Some(f) => {
                let why = self.why("start")?;
                self.flow(Flow::Fetch, &f, why, None).await
            }
            None => Ok(()),
        }
    }

    async fn contacts(&mut self, ids: &[&str]) -> Result<(), Failure> {
        self.tell_contacts(ids).await
    }

    async fn signal(&mut self, tag: u64, signal: Signal<'_>, token: &str) -> Result<(), Failure> {
        self.live = true;
        self.send_signal(tag, signal, token).await
    }

    async fn fetch_missed(&mut self, out: &mut Vec<String>) -> Result<(), Failure> {
        match self.entry.fetch.clone() {
            Some(f) => {
                // What was pushed before the fetch came before what it fetches.
                self.divert(out);
                let why = self.why(if self.live { "verify" } else { "missed" })?;
                self.flow(Flow::Fetch, &f, why, Some(out)).await
            }
            None => Ok(()),
        }
    }

    async fn next_event(&mut self) -> Event {
        self.live = true;
        loop {
            if let Some(ev) = self.ready.pop_front() {
                return ev;
            }
            if let Err(f) = self.poll_next().await {
                if f.kind == ErrorKind::Script {
                    return Event::ProtocolError(f);
                }
                return Event::Closed(f);
            }
            let frame = match self.link.next().await {
                Ok(f) => f,
                Err(f) => return Event::Closed(f),
            };
            match self.receive(frame).await {
                Ok(said) => said.into_iter().for_each(|s| self.interpret(s)),
                Err(f) if f.kind == ErrorKind::Script => return Event::ProtocolError(f),
                Err(f) => return Event::Closed(f),
            }
        }
    }

    async fn close(mut self) -> Cursors {
        // What the user sent before (a presence going offline) reaches the server before
        // the script's `close` logs out, and is not dropped with the transport.
        let _ = tokio::time::timeout(self.reply_timeout, self.link.sent()).await;
        if let Some(f) = self.entry.close.clone() {
            let _ = self.flow(Flow::Close, &f, MultiValue::new(), None).await;
        }
        self.link.close().await;
        self.cursors
    }

    fn into_resume(self) -> Cursors {
        self.cursors
    }
}
