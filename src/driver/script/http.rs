//! HTTP for adapters (`http://`, `https://` targets): a large part of real IM runs over
//! HTTP rather than a socket — Matrix's client-server API, REST plus push, Server-Sent
//! Events. Over HTTP/1.1 (the default) one user holds a few keep-alive connections
//! ([`h1`]: each run by the task that uses it), each made on first use and again when the
//! server closes it; over
//! HTTP/2 (`[target.script] http = "2"`: by ALPN over TLS, by prior knowledge over
//! `http://`) all of them are streams of one connection per user, multiplexed (a role
//! whose connection the server closed makes a new one for itself):
//!
//! - **requests** (`u:request(…)`, not waiting: a send on the hot path) go out in order on
//!   one connection; each answer comes back to `receive` as a frame of kind `"response"`
//!   with its status and the reference the script gave;
//! - **calls** (`u:http(…)`, waiting: in `login`, `join`, `fetch`, …) get their answer as
//!   the call's value, on a connection of their own;
//! - **polls** (the script's `poll(u)`: the next long-poll request, `/sync?since=…`) run
//!   one at a time on a third, each answer a frame of kind `"poll"`;
//! - **event streams** (`u:sse(path)`) each hold a connection whose Server-Sent Events
//!   come to `receive` as frames of kind `"event"`.
//!
//! The tasks that carry requests and read streams hand what they hear over one channel,
//! read by [`Http::next`]; they end with the user's connection. A request made is not yet
//! a request sent (it waits its turn behind the ones before it), so a close first waits
//! for the answers of those made before it ([`Http::requests_answered`]): a presence
//! change made just before a logout reaches the server and is not dropped with the
//! transport.

use std::sync::Arc;

use http::{HeaderName, HeaderValue};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Body as _, Bytes, Incoming};
use hyper::client::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::answers::AnswerShape;
use super::frame::{Frame, Meta};
use super::h1;
use crate::driver::kit::connect::{Connector, Stream};
use crate::driver::Failure;
use crate::metrics::wires::Wire;
use crate::metrics::ErrorKind;

/// The version of HTTP a user speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// HTTP/1.1, a keep-alive connection per role.
    One,
    /// HTTP/2, one connection per user.
    Two,
}

impl Version {
    /// The transport its connections are counted as.
    pub fn wire(self) -> Wire {
        match self {
            Version::One => Wire::Http1,
            Version::Two => Wire::Http2,
        }
    }
}

/// An HTTP request an adapter makes.
#[derive(Debug, Clone)]
pub struct Request {
    /// `GET`, `PUT`, `POST`, …
    pub method: String,
    /// The path and query, after the target URL's own path.
    pub path: String,
    /// Headers besides `Host` (and `Content-Length`, which the transport sets); shared by the
    /// requests of a declaration.
    pub headers: Headers,
    /// The body (empty: none).
    pub body: Bytes,
    /// What the answer's frame carries back to `receive` (`meta.ref`).
    pub reference: Option<String>,
    /// How msgstorm judges a 2xx answer itself, if the script said.
    pub answer: Option<Arc<AnswerShape>>,
}

/// A request's headers, names and values checked as HTTP's.
pub type Headers = Arc<[(HeaderName, HeaderValue)]>;

/// The answer to a request.
#[derive(Debug)]
pub struct Answer {
    /// Its status code.
    pub status: u16,
    /// Its headers.
    pub headers: http::HeaderMap,
    /// Its body.
    pub body: Bytes,
}

/// Where a user's HTTP connections go.
#[derive(Debug, Clone)]
pub struct Dial {
    /// TCP (and TLS for `https://`) to the target.
    pub connector: Connector,
    /// The user, for its source address.
    pub ix: u32,
    /// `Host`: the URL's authority (checked once, shared by every request).
    pub host: HeaderValue,
    /// `http://` or `https://` and the authority: HTTP/2's `:scheme` and `:authority`.
    pub origin: String,
    /// HTTP/1.1 or HTTP/2.
    pub version: Version,
    /// The URL's path, before every request's own (no trailing `/`).
    pub base: String,
    /// The most bytes of an event of a stream (one message and what wraps it).
    pub max_body: usize,
    /// The most bytes of an answer's body ([`answer_limit`]).
    pub max_answer: usize,
}

/// The most bytes an answer's body may have, for a run whose largest event is `max_body`
/// bytes: [`MIN_ANSWER_LIMIT`] at least, since an answer is often a page of many messages
/// (a sync, a history) that one message's bound would cut short.
pub fn answer_limit(max_body: usize) -> usize {
    max_body.max(MIN_ANSWER_LIMIT)
}

/// The least bytes an answer's body may have (16 MiB).
pub const MIN_ANSWER_LIMIT: usize = 16 << 20;

/// What the tasks of a user's HTTP transport heard.
type Heard = Result<Frame, Failure>;

/// What a task carrying requests takes from its queue, in order.
#[derive(Debug)]
enum Job {
    /// A request to send.
    Send(Request),
    /// Told once every request queued before it has its answer.
    Mark(oneshot::Sender<()>),
    /// A pause before the next request.
    Pause(std::time::Duration),
}

/// One user's HTTP transport.
#[derive(Debug)]
pub struct Http {
    dial: Arc<Dial>,
    /// Requests for the request task.
    requests: mpsc::UnboundedSender<Job>,
    /// Long-poll requests for the poll task.
    polls: mpsc::UnboundedSender<Job>,
    /// What the tasks heard.
    heard: mpsc::UnboundedReceiver<Heard>,
    /// Where the event-stream tasks tell it.
    tell: mpsc::UnboundedSender<Heard>,
    /// The connection of waiting calls, once made.
    calls: Option<Conn>,
    /// A poll is out: the next one waits for its answer to be judged.
    pub polling: bool,
    /// The tasks, stopped with the transport.
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Http {
    fn drop(&mut self) {
        self.tasks.iter().for_each(JoinHandle::abort);
    }
}

impl Http {
    /// A user's transport: its first connection made now (so that a target that is not
    /// there fails the login as for any transport), the others on first use.
    pub async fn open(dial: Dial) -> Result<Http, Failure> {
        let dial = Arc::new(dial);
        let first = Conn::open(&dial).await?;
        // HTTP/2: every role a stream of the first connection.
        let shared = first.share();
        let (tell, heard) = mpsc::unbounded_channel();
        let (requests, queued) = mpsc::unbounded_channel();
        let (polls, polled) = mpsc::unbounded_channel();
        let tasks = vec![
            tokio::spawn(carry(
                Arc::clone(&dial),
                Some(first),
                queued,
                tell.clone(),
                "response",
            )),
            tokio::spawn(carry(
                Arc::clone(&dial),
                shared.as_ref().and_then(Conn::share),
                polled,
                tell.clone(),
                "poll",
            )),
        ];
        Ok(Http {
            dial,
            requests,
            polls,
            heard,
            tell,
            calls: shared,
            polling: false,
            tasks,
        })
    }

    /// Sends `request` without waiting: its answer comes back from [`Http::next`].
    pub fn request(&self, request: Request) -> Result<(), Failure> {
        self.requests.send(Job::Send(request)).map_err(|_| gone())
    }

    /// Waits until every request made so far ([`Http::request`]) has its answer, or the
    /// task carrying them has ended (its connection failed).
    pub async fn requests_answered(&self) {
        let (mark, told) = oneshot::channel();
        if self.requests.send(Job::Mark(mark)).is_ok() {
            // An error: the task ended, and nothing it held will go out.
            let _ = told.await;
        }
    }

    /// Sends the long-poll `request`; its answer comes back from [`Http::next`].
    pub fn poll(&mut self, request: Request) -> Result<(), Failure> {
        self.polling = true;
        self.polls.send(Job::Send(request)).map_err(|_| gone())
    }

    /// Sends the long-poll `request` after `pause` (the one before it failed).
    pub fn poll_after(
        &mut self,
        pause: std::time::Duration,
        request: Request,
    ) -> Result<(), Failure> {
        self.polls.send(Job::Pause(pause)).map_err(|_| gone())?;
        self.poll(request)
    }

    /// Sends `request` and waits for its answer (on the connection of calls).
    pub async fn call(&mut self, request: &Request) -> Result<Answer, Failure> {
        let conn = Conn::reuse(self.calls.take(), &self.dial).await?;
        let (conn, answer) = conn.send(&self.dial, request).await;
        self.calls = conn;
        answer
    }

    /// Opens an event stream by `request` (a `GET`): its events come back from
    /// [`Http::next`]. Fails when the server does not answer 2xx.
    pub async fn sse(&mut self, request: Request) -> Result<(), Failure> {
        let conn = Conn::reuse(self.calls.as_ref().and_then(Conn::share), &self.dial).await?;
        let body = conn.start(&self.dial, &request).await?;
        let status = match &body {
            Started::One(status, _) | Started::Two { status, .. } => *status,
        };
        if !(200..300).contains(&status) {
            return Err(Failure::new(
                ErrorKind::HttpStatus,
                format!("event stream {}: HTTP status {status}", request.path),
            ));
        }
        let tell = self.tell.clone();
        let max = self.dial.max_body;
        self.tasks
            .push(tokio::spawn(stream_events(body, tell, max)));
        Ok(())
    }

    /// The next thing heard: an answer, a poll's answer, an event.
    pub async fn next(&mut self) -> Result<Frame, Failure> {
        match self.heard.recv().await {
            Some(heard) => {
                if let Ok(Frame { meta: Some(m), .. }) = &heard {
                    if m.kind == "poll" {
                        self.polling = false;
                    }
                }
                heard
            }
            None => Err(gone()),
        }
    }
}

/// A script's table of request headers (names to values), each checked as HTTP's.
pub fn headers_of(h: &mlua::Table) -> mlua::Result<Headers> {
    h.pairs::<mlua::String, mlua::String>()
        .map(|pair| {
            let (name, value) = pair?;
            header(&name.as_bytes(), &value.as_bytes())
        })
        .collect()
}

/// A request header from a script's name and value, checked as HTTP's.
fn header(name: &[u8], value: &[u8]) -> mlua::Result<(HeaderName, HeaderValue)> {
    let bad = |what: String| {
        mlua::Error::runtime(format!(
            "HTTP request: header `{}`: {what}",
            String::from_utf8_lossy(name)
        ))
    };
    Ok((
        HeaderName::from_bytes(name).map_err(|e| bad(e.to_string()))?,
        HeaderValue::from_bytes(value).map_err(|e| bad(e.to_string()))?,
    ))
}

/// The transport's tasks have ended (the user is closing).
fn gone() -> Failure {
    Failure::new(ErrorKind::ClosedByPeer, "the HTTP transport is closed")
}

/// Aborts a connection's task when the last handle to it goes.
#[derive(Debug)]
struct Driving(JoinHandle<()>);

impl Drop for Driving {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// One keep-alive HTTP/1.1 connection, or a handle to a user's HTTP/2 connection.
#[derive(Debug)]
enum Conn {
    /// HTTP/1.1: one exchange at a time, run by the task that holds it.
    One(Box<h1::Connection>),
    /// HTTP/2: streams, as many at once as the server allows, over the connection hyper's
    /// task runs (stopped when its last handle goes).
    Two(http2::SendRequest<Full<Bytes>>, Arc<Driving>),
}

/// An answer's status and the body still to read.
enum Started {
    /// Read from an HTTP/1.1 connection, which the body holds.
    One(u16, Box<h1::Connection>),
    /// Read from an HTTP/2 stream.
    Two {
        status: u16,
        body: Incoming,
        /// Keeps the connection's task running while the body is read.
        _conn: Arc<Driving>,
    },
}

impl Conn {
    /// A new connection, bounded by the connect timeout.
    async fn open(dial: &Dial) -> Result<Conn, Failure> {
        let made = async {
            let stream = dial.connector.connect(dial.ix).await?;
            match dial.version {
                Version::One => Ok(Conn::One(Box::new(h1::Connection::new(stream)))),
                Version::Two => {
                    agreed_h2(&stream)?;
                    let (sender, conn) =
                        http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
                            .await
                            .map_err(|e| {
                                Failure::new(ErrorKind::Protocol, format!("HTTP handshake: {e}"))
                            })?;
                    Ok(Conn::Two(sender, spawn_driving(conn)))
                }
            }
        };
        dial.connector.within("HTTP connection", made).await
    }

    /// `conn` when it can carry a request still, else a new connection.
    async fn reuse(conn: Option<Conn>, dial: &Dial) -> Result<Conn, Failure> {
        match conn {
            Some(mut c) => {
                if c.is_closed() {
                    Conn::open(dial).await
                } else {
                    Ok(c)
                }
            }
            None => Conn::open(dial).await,
        }
    }

    /// Another handle to the same connection: HTTP/2's, which carries many requests at
    /// once (`None` for HTTP/1.1's).
    fn share(&self) -> Option<Conn> {
        match self {
            Conn::One(_) => None,
            Conn::Two(s, task) => Some(Conn::Two(s.clone(), Arc::clone(task))),
        }
    }

    /// The server closed it (or it failed, or an HTTP/1.1 answer is not read whole).
    fn is_closed(&mut self) -> bool {
        match self {
            Conn::One(c) => c.is_closed(),
            Conn::Two(s, _) => s.is_closed(),
        }
    }

    /// Sends `request` and reads its whole answer; the connection comes back when it can
    /// carry the next one.
    async fn send(self, dial: &Dial, request: &Request) -> (Option<Conn>, Result<Answer, Failure>) {
        let answered = |e| answered(request, e);
        match self {
            Conn::One(mut c) => {
                let answer = async {
                    let bytes = h1_request(&dial.base, &dial.host, request)?;
                    let head = c.start(&bytes, request.method == "HEAD");
                    let head = head.await.map_err(answered)?;
                    let body = c.body(dial.max_answer).await.map_err(answered)?;
                    Ok(Answer {
                        status: head.status,
                        headers: head.headers,
                        body,
                    })
                }
                .await;
                (c.reusable().then_some(Conn::One(c)), answer)
            }
            Conn::Two(mut s, task) => {
                let answer = async {
                    let (status, headers, body) = two_start(&mut s, dial, request).await?;
                    let body = whole(body, dial.max_answer).await.map_err(|e| {
                        answered(Failure::new(
                            ErrorKind::Protocol,
                            format!("{e} (at most {} bytes)", dial.max_answer),
                        ))
                    })?;
                    Ok(Answer {
                        status,
                        headers,
                        body,
                    })
                }
                .await;
                let keep = answer.is_ok() && !s.is_closed();
                (keep.then_some(Conn::Two(s, task)), answer)
            }
        }
    }

    /// Sends `request`; returns the status and the body to read, which holds the
    /// connection (HTTP/1.1) or a stream of it (HTTP/2).
    async fn start(self, dial: &Dial, request: &Request) -> Result<Started, Failure> {
        match self {
            Conn::One(mut c) => {
                let bytes = h1_request(&dial.base, &dial.host, request)?;
                let head = c.start(&bytes, false).await;
                Ok(Started::One(
                    head.map_err(|e| answered(request, e))?.status,
                    c,
                ))
            }
            Conn::Two(mut s, task) => {
                let (status, _, body) = two_start(&mut s, dial, request).await?;
                Ok(Started::Two {
                    status,
                    body,
                    _conn: task,
                })
            }
        }
    }
}

impl Started {
    /// The next piece of the body, `None` at its end.
    async fn piece(&mut self) -> Result<Option<Bytes>, Failure> {
        match self {
            Started::One(_, c) => c.piece().await,
            Started::Two { body, .. } => loop {
                match body.frame().await {
                    None => return Ok(None),
                    Some(Err(e)) => {
                        return Err(Failure::new(ErrorKind::ClosedByPeer, e.to_string()))
                    }
                    Some(Ok(frame)) => {
                        if let Ok(data) = frame.into_data() {
                            return Ok(Some(data));
                        }
                    }
                }
            },
        }
    }
}

/// `e`, a failure of the answer to `request`, naming the request.
fn answered(request: &Request, e: Failure) -> Failure {
    Failure::new(
        e.kind,
        format!(
            "HTTP answer to {} {}: {}",
            request.method, request.path, e.detail
        ),
    )
}

/// `request` as HTTP/1.1 writes it, after the target's base path and with its `Host`.
fn h1_request(base: &str, host: &HeaderValue, request: &Request) -> Result<Vec<u8>, Failure> {
    h1::encode(
        &request.method,
        base,
        &request.path,
        host,
        &request.headers,
        &request.body,
    )
    .map_err(|e| {
        Failure::new(
            ErrorKind::Script,
            format!("HTTP request {} {}: {e}", request.method, request.path),
        )
    })
}

/// Sends `request` as a stream of the HTTP/2 connection `s`; returns the status, the
/// headers and the body to read.
async fn two_start(
    s: &mut http2::SendRequest<Full<Bytes>>,
    dial: &Dial,
    request: &Request,
) -> Result<(u16, http::HeaderMap, Incoming), Failure> {
    let built =
        built(&dial.origin, &dial.base, request).map_err(|e| Failure::new(ErrorKind::Script, e))?;
    let closed = |what: &str, e: hyper::Error| {
        Failure::new(ErrorKind::ClosedByPeer, format!("HTTP {what}: {e}"))
    };
    s.ready().await.map_err(|e| closed("connection", e))?;
    let answer = s
        .send_request(built)
        .await
        .map_err(|e| closed("request", e))?;
    let (head, body) = answer.into_parts();
    Ok((head.status.as_u16(), head.headers, body))
}

/// The whole of an answer's `body`, at most `max` bytes. Most answers come in one chunk,
/// taken as it is; the chunks after a first are collected (http-body-util) and joined to it.
async fn whole(
    mut body: Incoming,
    max: usize,
) -> Result<Bytes, Box<dyn std::error::Error + Send + Sync>> {
    let first = match body.frame().await {
        None => return Ok(Bytes::new()),
        Some(frame) => frame?.into_data().unwrap_or_default(),
    };
    if first.len() > max {
        return Err("length limit exceeded".into());
    }
    if body.is_end_stream() {
        return Ok(first);
    }
    let rest = Limited::new(body, max - first.len())
        .collect()
        .await?
        .to_bytes();
    if rest.is_empty() {
        return Ok(first);
    }
    Ok([first, rest].concat().into())
}

/// `request` as hyper sends it over HTTP/2, made in place: its URI the `origin` (`:scheme`,
/// `:authority`), the target's `base` path and the request's path.
fn built(
    origin: &str,
    base: &str,
    request: &Request,
) -> Result<http::Request<Full<Bytes>>, String> {
    let wrong = |e: &dyn std::fmt::Display| {
        format!("HTTP request {} {}: {e}", request.method, request.path)
    };
    let mut uri = String::with_capacity(origin.len() + base.len() + request.path.len());
    for part in [origin, base, &request.path] {
        uri.push_str(part);
    }
    let mut built = http::Request::new(Full::new(request.body.clone()));
    *built.method_mut() =
        http::Method::from_bytes(request.method.as_bytes()).map_err(|e| wrong(&e))?;
    *built.uri_mut() = http::Uri::try_from(uri).map_err(|e| wrong(&e))?;
    let headers = built.headers_mut();
    headers.reserve(request.headers.len());
    for (name, value) in request.headers.iter() {
        headers.append(name.clone(), value.clone());
    }
    Ok(built)
}

/// Carries the requests of `queue` in order over one keep-alive connection (`first`, or
/// one made when needed), telling each answer as a frame of `kind` and each mark that
/// the requests before it are answered.
async fn carry(
    dial: Arc<Dial>,
    mut conn: Option<Conn>,
    mut queue: mpsc::UnboundedReceiver<Job>,
    tell: mpsc::UnboundedSender<Heard>,
    kind: &'static str,
) {
    while let Some(job) = queue.recv().await {
        let request = match job {
            Job::Send(r) => r,
            Job::Mark(told) => {
                let _ = told.send(());
                continue;
            }
            Job::Pause(pause) => {
                tokio::time::sleep(pause).await;
                continue;
            }
        };
        let c = match Conn::reuse(conn.take(), &dial).await {
            Ok(c) => c,
            Err(f) => {
                let _ = tell.send(Err(f));
                return;
            }
        };
        let (kept, answer) = c.send(&dial, &request).await;
        conn = kept;
        let heard = answer.map(|a| Frame {
            text: false,
            bytes: a.body,
            meta: Some(Meta {
                kind,
                status: a.status,
                reference: request.reference,
                event: None,
                headers: a.headers,
                answer: request.answer,
            }),
        });
        if tell.send(heard).is_err() {
            return;
        }
    }
}

/// Runs a connection's I/O (hyper's connection future) until it ends or is aborted.
fn spawn_driving<F>(conn: F) -> Arc<Driving>
where
    F: std::future::Future + Send + 'static,
{
    Arc::new(Driving(tokio::spawn(async move {
        let _ = conn.await;
    })))
}

/// Over TLS, that the server agreed to HTTP/2 by ALPN: a server that picked HTTP/1.1
/// (or nothing) would read HTTP/2's preface as a bad request.
fn agreed_h2(stream: &Stream) -> Result<(), Failure> {
    if !stream.is_tls() {
        return Ok(());
    }
    match stream.alpn() {
        Some(b"h2") => Ok(()),
        other => Err(Failure::new(
            ErrorKind::Protocol,
            format!(
                "HTTP/2 over TLS: the server did not agree to `h2` by ALPN (it chose {})",
                other.map_or("none".into(), |p| format!(
                    "`{}`",
                    String::from_utf8_lossy(p)
                ))
            ),
        )),
    }
}

/// Reads a Server-Sent Events stream, telling each event that carries data.
async fn stream_events(mut body: Started, tell: mpsc::UnboundedSender<Heard>, max: usize) {
    let mut buf = Vec::new();
    loop {
        let chunk = match body.piece().await {
            Ok(Some(data)) => data,
            Err(e) => {
                let _ = tell.send(Err(Failure::new(
                    e.kind,
                    format!("event stream: {}", e.detail),
                )));
                return;
            }
            Ok(None) => {
                let _ = tell.send(Err(Failure::new(
                    ErrorKind::ClosedByPeer,
                    "the event stream ended",
                )));
                return;
            }
        };
        buf.extend_from_slice(&chunk);
        let mut taken = 0;
        while let Some((event, len)) = next_event(&buf[taken..]) {
            taken += len;
            if let Some(event) = event {
                if tell.send(Ok(event)).is_err() {
                    return;
                }
            }
        }
        buf.drain(..taken);
        if buf.len() > max {
            let _ = tell.send(Err(Failure::new(
                ErrorKind::Protocol,
                format!("an event of more than {max} bytes"),
            )));
            return;
        }
    }
}

/// The first whole event at the start of `bytes`, by the SSE rules, and how many bytes it
/// took; `None` while no event has ended. Events end with a blank line (lines end with LF or
/// CRLF); `data:` lines join with a newline, `event:` and `id:` name it, lines starting with
/// `:` are comments; an event without data is `Some((None, len))`, skipped. Each line is
/// read once, in place: a chunk of many events costs one pass.
fn next_event(bytes: &[u8]) -> Option<(Option<Frame>, usize)> {
    let (mut data, mut event, mut id) = (Vec::new(), None, None);
    let mut has_data = false;
    let mut at = 0;
    loop {
        let end = at + memchr::memchr(b'\n', &bytes[at..])?;
        let line = bytes[at..end]
            .strip_suffix(b"\r")
            .unwrap_or(&bytes[at..end]);
        at = end + 1;
        if line.is_empty() {
            let frame = has_data.then(|| event_frame(data, event, id));
            return Some((frame, at));
        }
        let (field, value) = match memchr::memchr(b':', line) {
            Some(colon) => (&line[..colon], &line[colon + 1..]),
            None => (line, &b""[..]),
        };
        let value = value.strip_prefix(b" ").unwrap_or(value);
        match field {
            b"data" => {
                if has_data {
                    data.push(b'\n');
                }
                data.extend_from_slice(value);
                has_data = true;
            }
            b"event" => event = Some(String::from_utf8_lossy(value).into_owned()),
            b"id" => id = Some(String::from_utf8_lossy(value).into_owned()),
            _ => {}
        }
    }
}

/// An event's frame: its `data` (invalid UTF-8 replaced, as a text frame's), its name and id.
fn event_frame(data: Vec<u8>, event: Option<String>, id: Option<String>) -> Frame {
    let bytes = match String::from_utf8_lossy(&data) {
        std::borrow::Cow::Borrowed(_) => data,
        std::borrow::Cow::Owned(text) => text.into_bytes(),
    };
    Frame {
        bytes: bytes.into(),
        text: true,
        meta: Some(Meta {
            kind: "event",
            status: 200,
            reference: id,
            event,
            headers: http::HeaderMap::new(),
            answer: None,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(method: &str, path: &str) -> Request {
        Request {
            method: method.to_owned(),
            path: path.to_owned(),
            headers: Headers::from([(
                http::header::AUTHORIZATION,
                HeaderValue::from_static("Bearer t"),
            )]),
            body: Bytes::from_static(b"{}"),
            reference: None,
            answer: None,
        }
    }

    const HOST: HeaderValue = HeaderValue::from_static("example.test:8008");

    #[test]
    fn a_request_names_its_host_over_http1_and_its_origin_over_http2() {
        let one = h1_request("/api", &HOST, &request("PUT", "/send/1")).expect("a request");
        assert_eq!(
            String::from_utf8(one).expect("text"),
            "PUT /api/send/1 HTTP/1.1\r\nhost: example.test:8008\r\nauthorization: Bearer t\r\n\
             content-length: 2\r\n\r\n{}"
        );
        let two = built(
            "http://example.test:8008",
            "",
            &request("GET", "/sync?since=4"),
        )
        .expect("a request");
        assert_eq!(
            two.uri().to_string(),
            "http://example.test:8008/sync?since=4"
        );
        assert!(!two.headers().contains_key(http::header::HOST));
        assert_eq!(two.headers().len(), 1);
    }

    #[test]
    fn a_request_that_http_refuses_names_its_method_and_path() {
        for (method, path) in [
            ("NOT A METHOD", "/send/1"),
            ("GET", "/a b"),
            ("GET", "/a\r\nX: y"),
        ] {
            let one = h1_request("", &HOST, &request(method, path)).expect_err(path);
            let two = built("http://h", "", &request(method, path)).expect_err(path);
            for e in [one.detail, two] {
                assert!(
                    e.starts_with(&format!("HTTP request {method} {path}: ")),
                    "{e}"
                );
            }
        }
    }

    #[test]
    fn an_http1_request_whose_path_does_not_start_with_a_slash_is_refused() {
        for path in ["", "send/1", "?since=4"] {
            let e = h1_request("", &HOST, &request("GET", path)).expect_err(path);
            assert_eq!(
                e.detail,
                format!("HTTP request GET {path}: the path must start with `/`")
            );
        }
        h1_request("/api", &HOST, &request("GET", "?since=4")).expect("after a base path");
    }

    /// Every event of `bytes` that carries data, and the bytes left (an event not ended).
    fn events(bytes: &[u8]) -> (Vec<Frame>, &[u8]) {
        let (mut out, mut at) = (Vec::new(), 0);
        while let Some((event, len)) = next_event(&bytes[at..]) {
            at += len;
            out.extend(event);
        }
        (out, &bytes[at..])
    }

    #[test]
    fn events_are_cut_by_blank_lines_with_their_names_and_ids() {
        let bytes = b": hello\n\nevent: msg\nid: 7\ndata: {\"a\":1}\ndata: more\n\nretry: 5\n\ndata: x\r\n\r\ndata: \xff!\n\ndata: part";
        let (got, rest) = events(bytes);
        let bodies: Vec<&[u8]> = got.iter().map(|f| &f.bytes[..]).collect();
        // Invalid UTF-8 is replaced, as in a text frame.
        let replaced = "\u{FFFD}!".as_bytes();
        assert_eq!(bodies, [&b"{\"a\":1}\nmore"[..], b"x", replaced]);
        let meta = got[0].meta.as_ref().expect("meta");
        assert_eq!(
            (meta.event.as_deref(), meta.reference.as_deref()),
            (Some("msg"), Some("7"))
        );
        assert_eq!(rest, b"data: part", "an event not ended yet");
    }
}
