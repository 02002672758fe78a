//! HTTP for adapters (`http://`, `https://` targets): a large part of real IM runs over
//! HTTP rather than a socket — Matrix's client-server API, REST plus push, Server-Sent
//! Events. Over HTTP/1.1 (the default) one user holds a few keep-alive connections
//! (hyper's client), each made on first use and again when the server closes it; over
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
//! The requests and the polls have no task of their own: each role is a [`lane::Lane`] that
//! the user's task moves on whenever it waits for what the transport heard, and it runs
//! the reads and writes of the role's HTTP/1.1 connection itself. An answer then wakes the
//! user's task once; with a task per role and one per connection it passed through two
//! other tasks first (`bench/results/2026-11-28-script-http-budget.md`). An event stream
//! reads in a task of its own and tells [`Http::next`] over a channel. A request made is
//! not yet a request sent (it waits its turn behind the ones before it), so a close first
//! waits for the answers of those made before it ([`Http::requests_answered`]): a presence
//! change made just before a logout reaches the server and is not dropped with the
//! transport.

mod conn;
mod lane;
mod sse;

use std::collections::VecDeque;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{HeaderName, HeaderValue};
use hyper::body::Bytes;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::answers::AnswerShape;
use super::frame::Frame;
use crate::driver::kit::connect::Connector;
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
    /// Headers besides `Host` (and `Content-Length`, which hyper sets); shared by the
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

/// What a user's HTTP transport heard: an answer, a poll's answer, an event, or why the
/// transport failed.
type Heard = Result<Frame, Failure>;

/// One user's HTTP transport.
#[derive(Debug)]
pub struct Http {
    dial: Arc<Dial>,
    /// The requests `u:request` makes.
    requests: Lane,
    /// The long polls.
    polls: Lane,
    /// What the lanes heard while the user waited for something else (a call, the
    /// requests' answers), in order.
    ready: VecDeque<Heard>,
    /// What the event-stream tasks heard.
    heard: mpsc::UnboundedReceiver<Heard>,
    /// Where the event-stream tasks tell it.
    tell: mpsc::UnboundedSender<Heard>,
    /// The connection of waiting calls, once made.
    calls: Option<Conn>,
    /// A poll is out: the next one waits for its answer to be judged.
    pub polling: bool,
    /// The event-stream tasks, stopped with the transport.
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
        let first = Conn::open(&dial, Drive::Inline).await?;
        // HTTP/2: every role a stream of the first connection.
        let shared = first.share();
        let (tell, heard) = mpsc::unbounded_channel();
        Ok(Http {
            dial,
            requests: Lane::new("response", Some(first)),
            polls: Lane::new("poll", shared.as_ref().and_then(Conn::share)),
            ready: VecDeque::new(),
            heard,
            tell,
            calls: shared,
            polling: false,
            tasks: Vec::new(),
        })
    }

    /// Sends `request` without waiting: its answer comes back from [`Http::next`].
    pub fn request(&mut self, request: Request) -> Result<(), Failure> {
        self.requests.send(request).map_err(|()| gone())
    }

    /// Waits until every request made so far ([`Http::request`]) has its answer, or its
    /// connection failed.
    pub async fn requests_answered(&mut self) {
        std::future::poll_fn(|cx| {
            self.keep_heard(cx);
            match self.requests.is_done() {
                true => Poll::Ready(()),
                false => Poll::Pending,
            }
        })
        .await;
    }

    /// Sends the long-poll `request`; its answer comes back from [`Http::next`].
    pub fn poll(&mut self, request: Request) -> Result<(), Failure> {
        self.polling = true;
        self.polls.send(request).map_err(|()| gone())
    }

    /// Sends the long-poll `request` after `pause` (the one before it failed).
    pub fn poll_after(&mut self, pause: Duration, request: Request) -> Result<(), Failure> {
        self.polls.pause(pause).map_err(|()| gone())?;
        self.poll(request)
    }

    /// Sends `request` and waits for its answer (on the connection of calls); the
    /// requests and polls go on meanwhile.
    pub async fn call(&mut self, request: &Request) -> Result<Answer, Failure> {
        let kept = match self.calls.take() {
            // Its I/O runs first: a close the server sent while it was idle is seen now.
            Some(mut c) => {
                std::future::poll_fn(|cx| {
                    c.poll_io(cx);
                    Poll::Ready(())
                })
                .await;
                (!c.is_closed()).then_some(c)
            }
            None => None,
        };
        let mut conn = match kept {
            Some(c) => c,
            None => Conn::open(&self.dial, Drive::Inline).await?,
        };
        std::future::poll_fn(|cx| {
            self.keep_heard(cx);
            conn.poll_ready(cx)
        })
        .await?;
        let mut answering = conn.dispatch(&self.dial, request)?;
        let answer = std::future::poll_fn(|cx| {
            self.keep_heard(cx);
            conn.poll_io(cx);
            answering.as_mut().poll(cx)
        })
        .await
        .map_err(|e| e.failure(request, self.dial.max_answer));
        if answer.is_ok() && !conn.is_closed() {
            self.calls = Some(conn);
        }
        answer
    }

    /// Opens an event stream by `request` (a `GET`): its events come back from
    /// [`Http::next`]. Fails when the server does not answer 2xx.
    pub async fn sse(&mut self, request: Request) -> Result<(), Failure> {
        let mut conn = match self.calls.as_ref().and_then(Conn::share) {
            Some(c) if !c.is_closed() => c,
            _ => Conn::open(&self.dial, Drive::Task).await?,
        };
        let (status, body) = conn.start(&self.dial, &request).await?;
        if !(200..300).contains(&status) {
            return Err(Failure::new(
                ErrorKind::HttpStatus,
                format!("event stream {}: HTTP status {status}", request.path),
            ));
        }
        let tell = self.tell.clone();
        let max = self.dial.max_body;
        self.tasks.push(tokio::spawn(async move {
            let _conn = conn;
            sse::stream_events(body, tell, max).await;
        }));
        Ok(())
    }

    /// The next thing heard: an answer, a poll's answer, an event.
    pub async fn next(&mut self) -> Result<Frame, Failure> {
        let heard = match self.ready.pop_front() {
            Some(heard) => heard,
            None => std::future::poll_fn(|cx| self.poll_heard(cx)).await,
        };
        if let Ok(Frame { meta: Some(m), .. }) = &heard {
            if m.kind == "poll" {
                self.polling = false;
            }
        }
        heard
    }

    /// Moves the lanes on; ready with the first thing heard.
    fn poll_heard(&mut self, cx: &mut Context<'_>) -> Poll<Heard> {
        self.idle_io(cx);
        if let Poll::Ready(heard) = self.requests.poll(&self.dial, cx) {
            return Poll::Ready(heard);
        }
        if let Poll::Ready(heard) = self.polls.poll(&self.dial, cx) {
            return Poll::Ready(heard);
        }
        self.heard
            .poll_recv(cx)
            .map(|h| h.unwrap_or_else(|| Err(gone())))
    }

    /// Runs the I/O of the idle connection of calls, which sees a close by the server.
    fn idle_io(&mut self, cx: &mut Context<'_>) {
        if let Some(c) = &mut self.calls {
            c.poll_io(cx);
        }
    }

    /// Moves the lanes on while the user waits for something else, keeping what they hear
    /// for [`Http::next`].
    fn keep_heard(&mut self, cx: &mut Context<'_>) {
        self.idle_io(cx);
        while let Poll::Ready(heard) = self.requests.poll(&self.dial, cx) {
            self.ready.push_back(heard);
        }
        while let Poll::Ready(heard) = self.polls.poll(&self.dial, cx) {
            self.ready.push_back(heard);
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

use conn::{Conn, Drive};
use lane::Lane;
