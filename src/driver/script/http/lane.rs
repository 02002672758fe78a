//! A lane of requests: the requests of one role (`u:request`'s, the long polls) carried in
//! order over one keep-alive connection, each answer told as a frame. A lane has no task of
//! its own: the user's task moves it on whenever it waits for what the transport heard, so
//! an answer costs one wake-up of that task and no hand-off between tasks.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use super::super::frame::{Frame, Meta};
use super::conn::{Answering, Conn, Drive};
use super::{Answer, Dial, Heard, Request};
use crate::driver::Failure;

/// What a lane takes from its queue, in order.
#[derive(Debug)]
enum Job {
    /// A request to send.
    Send(Request),
    /// A pause before the next request.
    Pause(Duration),
}

/// What a lane is doing.
enum Step {
    /// Waiting for an answer to `Request`.
    Answer(Answering, Request),
    /// Pausing before the next request.
    Pause(Pin<Box<tokio::time::Sleep>>),
    /// Making a connection (the last one was closed).
    Open(Pin<Box<dyn Future<Output = Result<Conn, Failure>> + Send>>),
}

/// The requests of one role and the connection they go over.
pub(super) struct Lane {
    /// The kind of the frames its answers come as (`"response"`, `"poll"`).
    kind: &'static str,
    conn: Option<Conn>,
    jobs: VecDeque<Job>,
    step: Option<Step>,
    /// A connection could not be made: nothing more goes out.
    dead: bool,
}

impl std::fmt::Debug for Lane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lane")
            .field("kind", &self.kind)
            .field("conn", &self.conn)
            .field("jobs", &self.jobs.len())
            .field("busy", &self.step.is_some())
            .field("dead", &self.dead)
            .finish()
    }
}

impl Lane {
    /// A lane whose answers are frames of `kind`, over `conn` (or one made when needed).
    pub(super) fn new(kind: &'static str, conn: Option<Conn>) -> Lane {
        Lane {
            kind,
            conn,
            jobs: VecDeque::new(),
            step: None,
            dead: false,
        }
    }

    /// Queues `request`; `Err` when the lane is dead.
    pub(super) fn send(&mut self, request: Request) -> Result<(), ()> {
        self.push(Job::Send(request))
    }

    /// Queues a pause before the next request; `Err` when the lane is dead.
    pub(super) fn pause(&mut self, pause: Duration) -> Result<(), ()> {
        self.push(Job::Pause(pause))
    }

    fn push(&mut self, job: Job) -> Result<(), ()> {
        if self.dead {
            return Err(());
        }
        self.jobs.push_back(job);
        Ok(())
    }

    /// Every request queued has its answer, or none will come (the lane is dead).
    pub(super) fn is_done(&self) -> bool {
        self.dead || (self.step.is_none() && self.jobs.is_empty())
    }

    /// Moves the lane on: ready with the next answer (or the failure that ended the lane);
    /// pending when it waits for the network, a pause or a request to send.
    pub(super) fn poll(&mut self, dial: &Arc<Dial>, cx: &mut Context<'_>) -> Poll<Heard> {
        loop {
            if let Some(conn) = &mut self.conn {
                conn.poll_io(cx);
            }
            match self.step.take() {
                Some(Step::Answer(mut answering, request)) => {
                    let Poll::Ready(got) = answering.as_mut().poll(cx) else {
                        self.step = Some(Step::Answer(answering, request));
                        return Poll::Pending;
                    };
                    let got = got.map_err(|e| e.failure(&request, dial.max_answer));
                    if got.is_err() || self.conn.as_ref().is_some_and(Conn::is_closed) {
                        self.conn = None;
                    }
                    return Poll::Ready(got.map(|a| frame(self.kind, a, request)));
                }
                Some(Step::Pause(mut sleep)) => {
                    if sleep.as_mut().poll(cx).is_pending() {
                        self.step = Some(Step::Pause(sleep));
                        return Poll::Pending;
                    }
                }
                Some(Step::Open(mut open)) => match open.as_mut().poll(cx) {
                    Poll::Pending => {
                        self.step = Some(Step::Open(open));
                        return Poll::Pending;
                    }
                    Poll::Ready(Ok(conn)) => self.conn = Some(conn),
                    Poll::Ready(Err(f)) => {
                        self.dead = true;
                        self.jobs.clear();
                        return Poll::Ready(Err(f));
                    }
                },
                None => {
                    if let Poll::Ready(told) = self.next_job(dial, cx) {
                        return Poll::Ready(told);
                    }
                    if self.step.is_none() {
                        return Poll::Pending;
                    }
                }
            }
        }
    }

    /// Starts the next job, when there is one and the connection can take it; ready only
    /// with a request that failed before it went out.
    fn next_job(&mut self, dial: &Arc<Dial>, cx: &mut Context<'_>) -> Poll<Heard> {
        if let Some(Job::Pause(pause)) = self.jobs.front() {
            self.step = Some(Step::Pause(Box::pin(tokio::time::sleep(*pause))));
            self.jobs.pop_front();
            return Poll::Pending;
        }
        if self.jobs.is_empty() || self.dead {
            return Poll::Pending;
        }
        let conn = match &mut self.conn {
            Some(c) if !c.is_closed() => c,
            _ => {
                let dial = Arc::clone(dial);
                self.step = Some(Step::Open(Box::pin(async move {
                    Conn::open(&dial, Drive::Inline).await
                })));
                return Poll::Pending;
            }
        };
        let ready = std::task::ready!(conn.poll_ready(cx));
        let Some(Job::Send(request)) = self.jobs.pop_front() else {
            return Poll::Pending;
        };
        let dispatched = ready.and_then(|()| conn.dispatch(dial, &request));
        match dispatched {
            Ok(answering) => {
                self.step = Some(Step::Answer(answering, request));
                Poll::Pending
            }
            Err(f) => {
                self.conn = None;
                Poll::Ready(Err(f))
            }
        }
    }
}

/// `answer` to `request` as the frame `receive` gets, of `kind`.
fn frame(kind: &'static str, answer: Answer, request: Request) -> Frame {
    Frame {
        text: false,
        bytes: answer.body,
        meta: Some(Meta {
            kind,
            status: answer.status,
            reference: request.reference,
            event: None,
            headers: answer.headers,
            answer: request.answer,
        }),
    }
}
