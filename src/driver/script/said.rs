//! What `receive` said about a frame, one thing at a time, in Rust: the keys msgstorm reads
//! (`ack`, `push`, `signal`, `item`, `error`, `reply`, `protocol` and their `id`, `conv`,
//! `seq`, `from`), read once from the script's table or made straight from a JSON page by
//! `codec.json_items` ([`items`](super::items)), so the session judges both alike.

use std::borrow::Cow;

use mlua::{Table, Value};

/// A scalar one of those keys holds.
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar {
    /// A string (bytes as UTF-8, lossily).
    Text(String),
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A boolean.
    Bool(bool),
    /// Anything else, by its Lua type name (for the error that says so).
    Other(&'static str),
}

impl Scalar {
    /// A Lua value as a scalar (`None` for nil).
    pub fn of_lua(v: &Value) -> Option<Scalar> {
        Some(match v {
            Value::Nil => return None,
            Value::String(s) => Scalar::Text(s.to_string_lossy()),
            Value::Integer(i) => Scalar::Int(*i),
            Value::Number(n) => Scalar::Float(*n),
            Value::Boolean(b) => Scalar::Bool(*b),
            other => Scalar::Other(other.type_name()),
        })
    }

    /// As [`Scalar::text`], a string borrowed rather than copied (a conversation's name
    /// looked up once a message).
    pub fn as_text(&self) -> Cow<'_, str> {
        match self {
            Scalar::Text(s) => Cow::Borrowed(s),
            other => Cow::Owned(other.text()),
        }
    }

    /// As text: strings as they are, numbers and booleans printed.
    pub fn text(&self) -> String {
        match self {
            Scalar::Text(s) => s.clone(),
            Scalar::Int(i) => i.to_string(),
            Scalar::Float(n) => n.to_string(),
            Scalar::Bool(b) => b.to_string(),
            Scalar::Other(_) => String::new(),
        }
    }

    /// As a sequence number (0 when it is none).
    pub fn number(&self) -> u64 {
        match self {
            Scalar::Int(i) => u64::try_from(*i).unwrap_or(0),
            Scalar::Float(n) if *n >= 0.0 => *n as u64,
            Scalar::Text(s) => s.parse().unwrap_or(0),
            _ => 0,
        }
    }

    /// As a request id: a number or a string (`None` for anything else).
    pub fn id(&self) -> Option<String> {
        match self {
            Scalar::Int(i) => Some(i.to_string()),
            Scalar::Float(n) if n.fract() == 0.0 => Some(format!("{}", *n as i64)),
            Scalar::Float(n) => Some(n.to_string()),
            Scalar::Text(s) => Some(s.clone()),
            _ => None,
        }
    }

    /// Its Lua type name.
    pub fn type_name(&self) -> &'static str {
        match self {
            Scalar::Text(_) => "string",
            Scalar::Int(_) | Scalar::Float(_) => "number",
            Scalar::Bool(_) => "boolean",
            Scalar::Other(t) => t,
        }
    }
}

/// A Lua value's type as Lua's `type()` names it (`number` for integers too), for errors.
pub fn lua_type(v: &Value) -> &'static str {
    Scalar::of_lua(v).map_or("nil", |s| s.type_name())
}

/// A Lua value as text: strings as they are, numbers printed, `None` for nil; anything
/// else is an error holding its type.
pub fn lua_text(v: Value) -> Result<Option<String>, &'static str> {
    Ok(match v {
        Value::Nil => None,
        Value::String(s) => Some(s.to_string_lossy()),
        Value::Integer(i) => Some(i.to_string()),
        Value::Number(n) => Some(n.to_string()),
        other => return Err(lua_type(&other)),
    })
}

/// A table key for an error: a string as it is, anything else by its type.
pub fn key_name(k: &Value) -> String {
    match k {
        Value::String(s) => s.to_string_lossy(),
        other => format!("a {} key", lua_type(other)),
    }
}

/// One thing `receive` said: the keys msgstorm reads, each present or not.
#[derive(Debug, Clone, Default)]
pub struct Said {
    /// `ack`: the id of the send this accepts.
    pub ack: Option<Scalar>,
    /// `push`: a message's body.
    pub push: Option<Scalar>,
    /// `signal`: another user's signal token.
    pub signal: Option<Scalar>,
    /// `item`: a history item's body.
    pub item: Option<Scalar>,
    /// `error`: a refusal's reason.
    pub error: Option<Scalar>,
    /// `id`: what an `error` refuses.
    pub id: Option<Scalar>,
    /// `reply`: the id of the request this answers.
    pub reply: Option<Scalar>,
    /// `protocol`: a protocol error's reason.
    pub protocol: Option<Scalar>,
    /// `conv`: the conversation.
    pub conv: Option<Scalar>,
    /// `seq`: the position in `conv`.
    pub seq: Option<Scalar>,
    /// `from`: the sender.
    pub from: Option<Scalar>,
    /// Keys msgstorm does not read (named in the error when nothing else is there).
    pub others: Vec<String>,
    /// The script's table this was read from: a call's answer is that table.
    pub table: Option<Table>,
}

impl Said {
    /// The keys msgstorm reads, in the order of [`Said::known`].
    pub const KEYS: [&'static str; 11] = [
        "ack", "push", "signal", "item", "error", "id", "reply", "protocol", "conv", "seq", "from",
    ];

    /// The slot of `key`, if msgstorm reads it.
    pub fn slot(&mut self, key: &[u8]) -> Option<&mut Option<Scalar>> {
        let i = Said::KEYS.iter().position(|k| k.as_bytes() == key)?;
        Some(self.slot_at(i))
    }

    /// The slot of `Said::KEYS[i]`.
    pub fn slot_at(&mut self, i: usize) -> &mut Option<Scalar> {
        match i {
            0 => &mut self.ack,
            1 => &mut self.push,
            2 => &mut self.signal,
            3 => &mut self.item,
            4 => &mut self.error,
            5 => &mut self.id,
            6 => &mut self.reply,
            7 => &mut self.protocol,
            8 => &mut self.conv,
            9 => &mut self.seq,
            _ => &mut self.from,
        }
    }

    /// What the table `t` says, read in one walk over its keys.
    pub fn of_table(t: &Table) -> mlua::Result<Said> {
        let mut said = Said {
            table: Some(t.clone()),
            ..Said::default()
        };
        for pair in t.pairs::<Value, Value>() {
            let (k, v) = pair?;
            let Value::String(k) = k else { continue };
            let key = k.as_bytes();
            match said.slot(&key) {
                Some(slot) => *slot = Scalar::of_lua(&v),
                None => said.others.push(String::from_utf8_lossy(&key).into_owned()),
            }
        }
        Ok(said)
    }

    /// The keys msgstorm reads, with their values, in that order.
    pub fn known(&self) -> [(&'static str, &Option<Scalar>); 11] {
        let k = Said::KEYS;
        [
            (k[0], &self.ack),
            (k[1], &self.push),
            (k[2], &self.signal),
            (k[3], &self.item),
            (k[4], &self.error),
            (k[5], &self.id),
            (k[6], &self.reply),
            (k[7], &self.protocol),
            (k[8], &self.conv),
            (k[9], &self.seq),
            (k[10], &self.from),
        ]
    }

    /// The keys present, those msgstorm reads first.
    pub fn keys(&self) -> Vec<&str> {
        let present = self.known().into_iter().filter(|(_, v)| v.is_some());
        present
            .map(|(k, _)| k)
            .chain(self.others.iter().map(String::as_str))
            .collect()
    }

    /// Whether `from` names the user `id`.
    pub fn sent_by(&self, id: &str) -> bool {
        matches!(&self.from, Some(Scalar::Text(f)) if f == id)
    }

    /// Whether this answers the call waiting for `want`: its `reply`, `ack` or `id` (an
    /// error's) is that id.
    pub fn answers(&self, want: &str) -> bool {
        [&self.reply, &self.ack, &self.id]
            .into_iter()
            .any(|v| v.as_ref().and_then(Scalar::id).as_deref() == Some(want))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_receive_table_reads_as_the_keys_msgstorm_knows_and_the_rest() {
        let lua = mlua::Lua::new();
        let t: Table = lua
            .load(r#"return { push = "hi", conv = 7, seq = 3.0, from = "u1", extra = {} }"#)
            .eval()
            .expect("table");
        let said = Said::of_table(&t).expect("reads");
        assert_eq!(said.push, Some(Scalar::Text("hi".into())));
        assert_eq!(said.conv.as_ref().map(Scalar::text).as_deref(), Some("7"));
        assert_eq!(said.seq.as_ref().map(Scalar::number), Some(3));
        assert!(said.sent_by("u1"));
        assert_eq!(said.others, ["extra"]);
        assert!(said.ack.is_none() && said.signal.is_none());
    }

    #[test]
    fn a_call_is_answered_by_a_reply_an_ack_or_an_errors_id() {
        let error = Said {
            error: Some(Scalar::Text("no".into())),
            id: Some(Scalar::Int(4)),
            ..Said::default()
        };
        assert!(error.answers("4"));
        assert!(!error.answers("5"));
        let reply = Said {
            reply: Some(Scalar::Float(4.0)),
            ..Said::default()
        };
        assert!(reply.answers("4"));
        let push = Said {
            push: Some(Scalar::Text("4".into())),
            ..Said::default()
        };
        assert!(!push.answers("4"));
    }
}
