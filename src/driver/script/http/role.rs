//! A role's requests (`u:request`'s, or the long polls) carried in order over one
//! keep-alive connection by the user's own task: the one out is a future the transport
//! polls while the session reads ([`Http::next`](super::Http::next)), waits for a call or
//! closes, so its answer reaches the session with no task between (no channel, no
//! wake-up of another task per answer).

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use super::{Conn, Dial, Heard, Request};
use crate::driver::script::frame::{Frame, Meta};

/// The request out and its answer, with the connection to carry the next one.
type Flight = Pin<Box<dyn Future<Output = (Option<Conn>, Heard)> + Send>>;

/// One role of a user's transport.
pub(super) struct Role {
    /// What its answers are to `receive` (`"response"`, `"poll"`).
    kind: &'static str,
    conn: Option<Conn>,
    queue: VecDeque<Request>,
    /// In a mutex only so that the transport is `Sync`; reached by `get_mut`, never locked.
    flight: Mutex<Option<Flight>>,
}

impl std::fmt::Debug for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Role")
            .field("kind", &self.kind)
            .field("queued", &self.queue.len())
            .finish_non_exhaustive()
    }
}

impl Role {
    /// A role whose first connection is `conn` (others are made when needed).
    pub(super) fn new(kind: &'static str, conn: Option<Conn>) -> Role {
        Role {
            kind,
            conn,
            queue: VecDeque::new(),
            flight: Mutex::new(None),
        }
    }

    /// Queues `request`, out at once when none is.
    pub(super) fn push(&mut self, dial: &Arc<Dial>, request: Request) {
        self.queue.push_back(request);
        self.start(dial);
    }

    /// No request queued or out.
    pub(super) fn idle(&mut self) -> bool {
        self.queue.is_empty()
            && self
                .flight
                .get_mut()
                .unwrap_or_else(PoisonError::into_inner)
                .is_none()
    }

    /// Starts the next queued request when none is out.
    fn start(&mut self, dial: &Arc<Dial>) {
        let flight = self
            .flight
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        if flight.is_some() {
            return;
        }
        let Some(request) = self.queue.pop_front() else {
            return;
        };
        let (conn, dial, kind) = (self.conn.take(), Arc::clone(dial), self.kind);
        *flight = Some(Box::pin(async move {
            let c = match conn {
                Some(c) if !c.is_closed() => c,
                _ => match Conn::open(&dial).await {
                    Ok(c) => c,
                    Err(f) => return (None, Err(f)),
                },
            };
            let (kept, answer) = c.send(&dial, &request).await;
            let heard = answer.map(|a| Frame {
                text: std::str::from_utf8(&a.body).is_ok(),
                bytes: Vec::from(a.body),
                meta: Some(Meta {
                    kind,
                    status: a.status,
                    reference: request.reference,
                    event: None,
                    headers: a.headers,
                }),
            });
            (kept, heard)
        }));
    }

    /// The answer of the request out, once it came; the next one goes out then.
    pub(super) fn poll_answer(&mut self, cx: &mut Context<'_>, dial: &Arc<Dial>) -> Poll<Heard> {
        let flight = self
            .flight
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        let Some(out) = flight.as_mut() else {
            return Poll::Pending;
        };
        let Poll::Ready((kept, heard)) = out.as_mut().poll(cx) else {
            return Poll::Pending;
        };
        *flight = None;
        self.conn = kept;
        self.start(dial);
        Poll::Ready(heard)
    }
}
