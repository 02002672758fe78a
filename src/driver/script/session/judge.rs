//! Judging what comes in: a frame through the script's `receive` into what it said
//! ([`Said`]: one table, a list of them, or `codec.json_items`'s list as it is), and what
//! it said into the engine's events; fetched messages into the fetch's list.

use mlua::{Table, Value};

use super::{script_error, ScriptSession};
use crate::driver::kit::cursors::Push;
use crate::driver::script::frame::Frame;
use crate::driver::script::items::Items;
use crate::driver::script::said::{Said, Scalar};
use crate::driver::{Event, Failure};
use crate::metrics::ErrorKind;

impl ScriptSession {
    /// What `receive(u, frame, kind)` says the frame is: nil is nothing, a table one
    /// thing, a list of tables several (history a script held back to hand over in order),
    /// a `codec.json_items` list its items. A script error is kind `script` and the
    /// connection stays. (A frame the script's declarations judge is [`Self::declared`]'s.)
    pub(super) fn interpret_frame(&mut self, frame: Frame) -> Result<Vec<Said>, Failure> {
        let kind = match &frame.meta {
            Some(m) => m.kind,
            None if frame.text => "text",
            None => "binary",
        };
        let meta = match frame.meta {
            Some(m) => Value::Table(
                super::meta::table(&self.lua, m, &self.meta)
                    .map_err(|e| script_error("receive", &e))?,
            ),
            None => Value::Nil,
        };
        let frame = self
            .lua
            .create_string(&frame.bytes)
            .map_err(|e| script_error("receive", &e))?;
        let receive = &self.entry.receive;
        let user = self.user.clone();
        let returned = self
            .guard
            .run(|| receive.call::<Value>((user, frame, kind, meta)))
            .map_err(|e| script_error("receive", &e))?;
        let read = |t: &Table| Said::of_table(t).map_err(|e| script_error("receive", &e));
        match returned {
            // An empty table is an empty list: nothing.
            Value::Table(t) if t.is_empty() => Ok(Vec::new()),
            Value::Table(t) => match t.raw_get::<Value>(1) {
                Ok(Value::Table(_)) => t
                    .sequence_values::<Table>()
                    .map(|item| {
                        item.map_err(|e| script_error("receive (a list of tables)", &e))
                            .and_then(|item| read(&item))
                    })
                    .collect(),
                _ => Ok(vec![read(&t)?]),
            },
            Value::Nil => Ok(Vec::new()),
            Value::UserData(list) if list.is::<Items>() => {
                let mut list = list
                    .borrow_mut::<Items>()
                    .map_err(|e| script_error("receive", &e))?;
                Ok(list.take())
            }
            other => Err(Failure::new(
                ErrorKind::Script,
                format!(
                    "receive returned a {} (a table, a list of tables, codec.json_items' \
                     items, or nil to ignore the frame)",
                    other.type_name()
                ),
            )),
        }
    }

    /// What a frame is by what the script declared, with no call into it: a request's 2xx
    /// answer read by its answer shape, a declared long poll's 2xx page read by its reader
    /// (the cursor moved on, and kept where the declaration says). `None`: `receive` judges
    /// the frame.
    pub(super) fn declared(&mut self, frame: &Frame) -> Result<Option<Vec<Said>>, Failure> {
        let Some(meta) = &frame.meta else {
            return Ok(None);
        };
        match (meta.kind, &meta.answer, &mut self.long_poll) {
            ("response", Some(answer), _) => {
                Ok(answer.judge(meta.status, meta.reference.as_deref(), &frame.bytes))
            }
            ("poll", _, Some(poll)) => {
                let Some(items) = poll.page(meta.status, &frame.bytes) else {
                    return Ok(None);
                };
                poll.keep(&self.lua, &self.user)
                    .map_err(|e| script_error("u:long_poll", &e))?;
                Ok(Some(items))
            }
            _ => Ok(None),
        }
    }

    /// Turns what `receive` said into an event for the engine, queued in `ready`.
    pub(super) fn interpret(&mut self, mut said: Said) {
        // A text id is taken as it is; anything else stays for the error that names it.
        let ack = match said.ack.take() {
            Some(Scalar::Text(id)) => Some(id),
            other => {
                said.ack = other;
                said.ack.as_ref().and_then(Scalar::id)
            }
        };
        if let Some(ack) = ack {
            if let (Some(conv), Some(seq)) = (&said.conv, &said.seq) {
                let seq = seq.number();
                self.cursors.with(&conv.as_text(), |s| s.mark(seq));
            }
            match self.take_pending(&ack) {
                Some(tag) => self.ready.push_back(Event::Accepted { tag }),
                None => self.protocol(format!("an acceptance of no pending send: id {ack}")),
            }
            return;
        }
        if let Some(error) = &said.error {
            let reason = error.text();
            let id = said.id.as_ref().and_then(Scalar::id);
            let refused = |tag, kind| Event::Refused {
                tag,
                failure: Failure::new(kind, reason.clone()),
            };
            let ev = if let Some(tag) = id.as_deref().and_then(|id| self.take_pending(id)) {
                refused(tag, ErrorKind::SendFailed)
            } else if let Some(tag) = id
                .as_deref()
                .and_then(|id| super::take(&mut self.requests, id))
            {
                refused(tag, ErrorKind::RequestFailed)
            } else {
                Event::ProtocolError(Failure::new(
                    ErrorKind::Protocol,
                    format!("error frame: {reason}"),
                ))
            };
            return self.ready.push_back(ev);
        }
        if let Some(body) = said.push.take() {
            return self.pushed(&said, "push", body);
        }
        // Another user's signal: its token, handed back as a delivery.
        if let Some(token) = said.signal.take() {
            return self.pushed(&said, "signal", token);
        }
        if let Some(why) = &said.protocol {
            return self.protocol(why.text());
        }
        // History outside a fetch (a server that sends it unasked): a push like any other,
        // merged with what the user has by its conv/seq.
        if let Some(body) = said.item.take() {
            return self.pushed(&said, "item", body);
        }
        if let Some(id) = said.reply.as_ref().and_then(Scalar::id) {
            // Otherwise the late reply of a call that timed out, or one nobody asked for.
            if let Some(tag) = super::take(&mut self.requests, &id) {
                self.ready.push_back(Event::Reply { tag });
            }
            return;
        }
        self.ready.push_back(Event::ProtocolError(Failure::new(
            ErrorKind::Script,
            format!(
                "receive returned a table with none of ack, push, signal, reply, error, \
                 item, protocol (keys: {})",
                said.keys().join(", ")
            ),
        )));
    }

    /// A push (its body `body`, taken from `said`'s `key`): delivered unless the user sent
    /// it or a fetch returned it already.
    fn pushed(&mut self, said: &Said, key: &str, body: Scalar) {
        let own = said.sent_by(&self.id);
        let mut kind = Push::New;
        if let (Some(conv), Some(seq)) = (&said.conv, &said.seq) {
            let seq = seq.number();
            kind = self.cursors.with(&conv.as_text(), |s| s.push(seq));
        }
        if own || kind == Push::Synced {
            return;
        }
        match body {
            Scalar::Text(body) => self.ready.push_back(Event::Delivered { body: body.into() }),
            other => self.ready.push_back(Event::ProtocolError(Failure::new(
                ErrorKind::Script,
                format!(
                    "receive: `{key}` must be the body (a string), not a {}",
                    other.type_name()
                ),
            ))),
        }
    }

    pub(super) fn protocol(&mut self, why: String) {
        self.ready
            .push_back(Event::ProtocolError(Failure::new(ErrorKind::Protocol, why)));
    }

    /// A message a fetch returned (its body the `push`, `signal` or `item`): handed to
    /// `out` (when fetching for the ledger) unless the user sent it or already has it.
    /// Returns whether it was new.
    pub(super) fn fetched(&mut self, said: &Said, out: Option<&mut Vec<String>>) -> bool {
        let new = match (&said.conv, &said.seq) {
            (Some(conv), Some(seq)) => {
                let seq = seq.number();
                self.cursors.with(&conv.as_text(), |s| s.mark(seq))
            }
            _ => true,
        };
        if new && !said.sent_by(&self.id) {
            if let Some(out) = out {
                let body = said.push.as_ref().or(said.signal.as_ref());
                out.push(
                    body.or(said.item.as_ref())
                        .map(Scalar::text)
                        .unwrap_or_default(),
                );
            }
        }
        new
    }

    /// The messages of a `codec.json_items` list a fetch hands over at once
    /// (`u:deliver(items)`), each as [`fetched`](Self::fetched); returns how many were new.
    pub(super) fn fetched_list(
        &mut self,
        list: &[Said],
        mut out: Option<&mut Vec<String>>,
    ) -> usize {
        list.iter()
            .map(|said| self.fetched(said, out.as_deref_mut()))
            .filter(|new| *new)
            .count()
    }
}
