//! One HTTP connection of a user: hyper's handle for sending requests, and what runs the
//! connection's I/O — the user's own task for an HTTP/1.1 connection only it uses (no task
//! of its own, so an answer wakes the user once instead of passing through two other
//! tasks), a task of its own for an HTTP/2 connection every role shares and for an event
//! stream's.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::HeaderValue;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Body as _, Bytes, Incoming};
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::task::JoinHandle;

use super::{Answer, Dial, Request, Version};
use crate::driver::kit::connect::Stream;
use crate::driver::Failure;
use crate::metrics::ErrorKind;

/// Who runs a new connection's I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Drive {
    /// The task that uses it, polling it with its requests ([`Conn::poll_io`]); HTTP/2's
    /// connections, shared by every role, still get a task of their own.
    Inline,
    /// A task of its own.
    Task,
}

/// What a connection's requests go through.
#[derive(Debug)]
enum Sender {
    /// HTTP/1.1: one request at a time.
    One(http1::SendRequest<Full<Bytes>>),
    /// HTTP/2: streams, as many at once as the server allows.
    Two(http2::SendRequest<Full<Bytes>>),
}

/// Aborts a connection's task when the last handle to it goes.
#[derive(Debug)]
struct Driving(JoinHandle<()>);

impl Drop for Driving {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// hyper's HTTP/1.1 connection future: the connection's reads and writes.
type Http1Io = Pin<Box<http1::Connection<TokioIo<Stream>, Full<Bytes>>>>;

/// What runs a connection's I/O.
enum Io {
    /// Polled by the user's task; `None` once the connection ended.
    Inline(Option<Http1Io>),
    /// A task of its own.
    Task(Arc<Driving>),
}

impl std::fmt::Debug for Io {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Io::Inline(c) => write!(f, "Inline(open: {})", c.is_some()),
            Io::Task(t) => f.debug_tuple("Task").field(t).finish(),
        }
    }
}

/// An answer being received: its head, then its whole body.
pub(super) type Answering = Pin<Box<dyn Future<Output = Result<Answer, AnswerError>> + Send>>;

/// Why a request got no answer.
#[derive(Debug)]
pub(super) enum AnswerError {
    /// The connection failed or closed before the answer came.
    Closed(hyper::Error),
    /// The answer's body failed or was longer than allowed.
    Body(Box<dyn std::error::Error + Send + Sync>),
}

impl AnswerError {
    /// The failure, naming `request`; `max` is the most bytes an answer may have.
    pub(super) fn failure(self, request: &Request, max: usize) -> Failure {
        match self {
            AnswerError::Closed(e) => closed("request", e),
            AnswerError::Body(e) => Failure::new(
                ErrorKind::Protocol,
                format!(
                    "HTTP answer to {} {}: {e} (at most {max} bytes)",
                    request.method, request.path
                ),
            ),
        }
    }
}

/// One keep-alive HTTP/1.1 connection, or a handle to a user's HTTP/2 connection.
#[derive(Debug)]
pub(super) struct Conn {
    sender: Sender,
    io: Io,
}

impl Conn {
    /// A new connection whose I/O `drive` runs, bounded by the connect timeout.
    pub(super) async fn open(dial: &Dial, drive: Drive) -> Result<Conn, Failure> {
        let made = async {
            let stream = dial.connector.connect(dial.ix).await?;
            let shake =
                |e: hyper::Error| Failure::new(ErrorKind::Protocol, format!("HTTP handshake: {e}"));
            match dial.version {
                Version::One => {
                    let (sender, conn) = http1::handshake(TokioIo::new(stream))
                        .await
                        .map_err(shake)?;
                    let io = match drive {
                        Drive::Inline => Io::Inline(Some(Box::pin(conn))),
                        Drive::Task => Io::Task(spawn_driving(conn)),
                    };
                    Ok(Conn {
                        sender: Sender::One(sender),
                        io,
                    })
                }
                Version::Two => {
                    agreed_h2(&stream)?;
                    let (sender, conn) =
                        http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
                            .await
                            .map_err(shake)?;
                    Ok(Conn {
                        sender: Sender::Two(sender),
                        io: Io::Task(spawn_driving(conn)),
                    })
                }
            }
        };
        dial.connector.within("HTTP connection", made).await
    }

    /// Another handle to the same connection: HTTP/2's, which carries many requests at
    /// once (`None` for HTTP/1.1's).
    pub(super) fn share(&self) -> Option<Conn> {
        match (&self.sender, &self.io) {
            (Sender::Two(s), Io::Task(t)) => Some(Conn {
                sender: Sender::Two(s.clone()),
                io: Io::Task(Arc::clone(t)),
            }),
            _ => None,
        }
    }

    /// The server closed it (or it failed).
    pub(super) fn is_closed(&self) -> bool {
        match &self.sender {
            Sender::One(s) => s.is_closed(),
            Sender::Two(s) => s.is_closed(),
        }
    }

    /// Runs the connection's reads and writes as far as they go now, when the caller's
    /// task runs them; wakes that task when there is more to do.
    pub(super) fn poll_io(&mut self, cx: &mut Context<'_>) {
        if let Io::Inline(slot) = &mut self.io {
            if let Some(conn) = slot {
                if conn.as_mut().poll(cx).is_ready() {
                    *slot = None;
                }
            }
        }
    }

    /// Ready when the connection can take the next request.
    pub(super) fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Failure>> {
        self.poll_io(cx);
        match &mut self.sender {
            Sender::One(s) => s.poll_ready(cx),
            Sender::Two(s) => s.poll_ready(cx),
        }
        .map_err(|e| closed("connection", e))
    }

    /// Sends `request` (the connection is ready: [`Conn::poll_ready`]); the answer, head
    /// and whole body of at most `dial.max_answer` bytes, comes from what it returns while
    /// the connection's I/O runs.
    pub(super) fn dispatch(
        &mut self,
        dial: &Dial,
        request: &Request,
    ) -> Result<Answering, Failure> {
        let built = self.built(dial, request)?;
        let max = dial.max_answer;
        Ok(match &mut self.sender {
            Sender::One(s) => {
                let sent = s.send_request(built);
                Box::pin(async move { answer(sent.await, max).await })
            }
            Sender::Two(s) => {
                let sent = s.send_request(built);
                Box::pin(async move { answer(sent.await, max).await })
            }
        })
    }

    /// Sends `request` on a connection with I/O of its own; returns the status and the
    /// body to read.
    pub(super) async fn start(
        &mut self,
        dial: &Dial,
        request: &Request,
    ) -> Result<(u16, Incoming), Failure> {
        std::future::poll_fn(|cx| self.poll_ready(cx)).await?;
        let built = self.built(dial, request)?;
        let answer = match &mut self.sender {
            Sender::One(s) => s.send_request(built).await,
            Sender::Two(s) => s.send_request(built).await,
        }
        .map_err(|e| closed("request", e))?;
        Ok((answer.status().as_u16(), answer.into_body()))
    }

    /// `request` as this connection sends it.
    fn built(&self, dial: &Dial, request: &Request) -> Result<http::Request<Full<Bytes>>, Failure> {
        // HTTP/2 names the scheme and authority in the URI, HTTP/1.1 in `Host`.
        let origin = matches!(self.sender, Sender::Two(_)).then_some(dial.origin.as_str());
        built(origin, &dial.base, &dial.host, request)
            .map_err(|e| Failure::new(ErrorKind::Script, e))
    }
}

/// A connection closed or failed while `what` (the connection, a request) was under way.
fn closed(what: &str, e: hyper::Error) -> Failure {
    Failure::new(ErrorKind::ClosedByPeer, format!("HTTP {what}: {e}"))
}

/// The answer `sent` brought, its body read whole (at most `max` bytes).
async fn answer(
    sent: hyper::Result<http::Response<Incoming>>,
    max: usize,
) -> Result<Answer, AnswerError> {
    let (head, body) = sent.map_err(AnswerError::Closed)?.into_parts();
    let body = whole(body, max).await.map_err(AnswerError::Body)?;
    Ok(Answer {
        status: head.status.as_u16(),
        headers: head.headers,
        body,
    })
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

/// `request` as hyper sends it, made in place, its URI `base` and its path: over HTTP/2
/// after the `origin` (`:scheme`, `:authority`), over HTTP/1.1 (no `origin`) with
/// `host` in `Host`.
fn built(
    origin: Option<&str>,
    base: &str,
    host: &HeaderValue,
    request: &Request,
) -> Result<http::Request<Full<Bytes>>, String> {
    let wrong = |e: &dyn std::fmt::Display| {
        format!("HTTP request {} {}: {e}", request.method, request.path)
    };
    let prefix = origin.unwrap_or_default();
    let mut uri = String::with_capacity(prefix.len() + base.len() + request.path.len());
    for part in [prefix, base, &request.path] {
        uri.push_str(part);
    }
    let mut built = http::Request::new(Full::new(request.body.clone()));
    *built.method_mut() =
        http::Method::from_bytes(request.method.as_bytes()).map_err(|e| wrong(&e))?;
    *built.uri_mut() = http::Uri::try_from(uri).map_err(|e| wrong(&e))?;
    let headers = built.headers_mut();
    headers.reserve(request.headers.len() + 1);
    if origin.is_none() {
        headers.insert(http::header::HOST, host.clone());
    }
    for (name, value) in request.headers.iter() {
        headers.append(name.clone(), value.clone());
    }
    Ok(built)
}

/// Runs a connection's I/O (hyper's connection future) until it ends or is aborted.
fn spawn_driving<F>(conn: F) -> Arc<Driving>
where
    F: Future + Send + 'static,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::script::http::Headers;

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

    #[test]
    fn a_request_names_its_host_over_http1_and_its_origin_over_http2() {
        let host = HeaderValue::from_static("example.test:8008");
        let one = built(None, "/api", &host, &request("PUT", "/send/1")).expect("a request");
        assert_eq!(
            (one.method().as_str(), one.uri().to_string().as_str()),
            ("PUT", "/api/send/1")
        );
        assert_eq!(one.headers()[http::header::HOST], "example.test:8008");
        assert_eq!(one.headers()[http::header::AUTHORIZATION], "Bearer t");
        assert_eq!(one.headers().len(), 2);
        let two = built(
            Some("http://example.test:8008"),
            "",
            &host,
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
        for (method, path) in [("NOT A METHOD", "/send/1"), ("GET", "/a b")] {
            let host = HeaderValue::from_static("h");
            let e = built(None, "", &host, &request(method, path)).expect_err(path);
            assert!(
                e.starts_with(&format!("HTTP request {method} {path}: ")),
                "{e}"
            );
        }
    }
}
