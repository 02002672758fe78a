//! Sends by template: `u:sends { direct = {…}, group = {…} }` (in `login` or a flow)
//! declares the request a direct or group message is, so that a send calls nothing in the
//! script: msgstorm takes the next request id (`u:next_id()`'s), fills the template's
//! `path` and `json` body with it, the destination and the message, and sends it with the
//! template's headers and answer shape, the id as its reference (the id the acceptance
//! carries). In `path`, `{id}` and `{to}` (percent-encoded) are replaced; in `json`, a
//! field whose value is exactly `"{id}"`, `"{to}"` or `"{body}"` takes that value, every
//! other field is sent as it is. The body is written by serde_json.

use std::sync::Arc;

use hyper::body::Bytes;
use mlua::{Lua, LuaSerdeExt, Table, UserData, Value};
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use serde_json::Value as Json;

use super::answers::{shape_of, AnswerShape};
use super::http::{headers_of, Headers, Request};
use super::said::{key_name, lua_type};

/// What a placeholder stands for.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Slot {
    Id,
    To,
    Body,
}

impl Slot {
    /// The placeholder `text` is, if it is one (`"{to}"`, …).
    fn of(text: &str) -> Option<Slot> {
        match text {
            "{id}" => Some(Slot::Id),
            "{to}" => Some(Slot::To),
            "{body}" => Some(Slot::Body),
            _ => None,
        }
    }
}

/// A piece of a path or a field's value: as written, or a placeholder.
#[derive(Debug, Clone, PartialEq)]
enum Part<T> {
    Fixed(T),
    Filled(Slot),
}

/// One kind of send's template.
#[derive(Debug)]
pub struct Template {
    method: String,
    path: Vec<Part<String>>,
    json: Vec<(String, Part<Json>)>,
    headers: Headers,
    answer: Option<Arc<AnswerShape>>,
}

/// The templates of a connection's sends, as the script holds them.
#[derive(Debug, Clone, Default)]
pub struct Sends {
    /// A direct message's.
    pub direct: Option<Arc<Template>>,
    /// A group message's.
    pub group: Option<Arc<Template>>,
}

impl UserData for Sends {}

/// The keys of a template.
const KEYS: [&str; 5] = ["method", "path", "json", "headers", "answer"];

/// Bytes kept as they are in a path's `{to}`: RFC 3986's unreserved characters.
const PATH: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// The error of `key` in the template of `kind`.
fn bad(kind: &str, key: &str, what: &str) -> mlua::Error {
    mlua::Error::runtime(format!("u:sends: {kind}.`{key}` {what}"))
}

/// `u:sends(t)`'s templates read from `t` (keys `direct` and `group`): an unknown key or a
/// value of the wrong type is an error naming it.
pub fn declare(lua: &Lua, t: Table) -> mlua::Result<Sends> {
    let mut sends = Sends::default();
    for pair in t.pairs::<Value, Value>() {
        let (k, v) = pair?;
        let kind = key_name(&k);
        let slot = match kind.as_str() {
            "direct" => &mut sends.direct,
            "group" => &mut sends.group,
            _ => {
                return Err(mlua::Error::runtime(format!(
                    "u:sends: `{kind}` is none of direct, group"
                )))
            }
        };
        let Value::Table(template) = v else {
            return Err(mlua::Error::runtime(format!(
                "u:sends: `{kind}` must be a table, not a {}",
                lua_type(&v)
            )));
        };
        *slot = Some(Arc::new(template_of(lua, &kind, &template)?));
    }
    Ok(sends)
}

/// The template of `kind` read from `t`.
fn template_of(lua: &Lua, kind: &str, t: &Table) -> mlua::Result<Template> {
    for pair in t.pairs::<Value, Value>() {
        let (k, _) = pair?;
        let name = key_name(&k);
        if !KEYS.contains(&name.as_str()) {
            return Err(bad(kind, &name, &format!("is none of {}", KEYS.join(", "))));
        }
    }
    let string = |key: &str| -> mlua::Result<Option<String>> {
        match t.raw_get::<Value>(key)? {
            Value::Nil => Ok(None),
            Value::String(s) => Ok(Some(s.to_string_lossy())),
            other => Err(bad(
                kind,
                key,
                &format!("must be a string, not a {}", lua_type(&other)),
            )),
        }
    };
    let path = string("path")?.ok_or_else(|| bad(kind, "path", "is required"))?;
    Ok(Template {
        method: string("method")?.unwrap_or_else(|| "POST".to_owned()),
        path: path_parts(&path),
        json: json_fields(lua, kind, t.raw_get("json")?)?,
        headers: template_headers(kind, t.raw_get("headers")?)?,
        answer: shape_of(t.raw_get("answer")?, |what| bad(kind, "answer", what))?,
    })
}

/// A path cut at its placeholders.
fn path_parts(path: &str) -> Vec<Part<String>> {
    let mut parts = Vec::new();
    let mut rest = path;
    while let Some(open) = rest.find('{') {
        let slot = rest[open..]
            .find('}')
            .and_then(|close| Slot::of(&rest[open..open + close + 1]).map(|s| (s, close)));
        match slot {
            Some((slot, close)) => {
                if open > 0 {
                    parts.push(Part::Fixed(rest[..open].to_owned()));
                }
                parts.push(Part::Filled(slot));
                rest = &rest[open + close + 1..];
            }
            None => {
                parts.push(Part::Fixed(rest[..=open].to_owned()));
                rest = &rest[open + 1..];
            }
        }
    }
    if !rest.is_empty() {
        parts.push(Part::Fixed(rest.to_owned()));
    }
    parts
}

/// The body's fields (sorted by name), their placeholders found.
fn json_fields(lua: &Lua, kind: &str, json: Value) -> mlua::Result<Vec<(String, Part<Json>)>> {
    let t = match json {
        Value::Nil => return Ok(Vec::new()),
        Value::Table(t) => t,
        other => {
            return Err(bad(
                kind,
                "json",
                &format!("must be a table, not a {}", lua_type(&other)),
            ))
        }
    };
    let mut fields = Vec::new();
    for pair in t.pairs::<Value, Value>() {
        let (k, v) = pair?;
        let Value::String(name) = &k else {
            return Err(bad(kind, "json", "names its fields by strings"));
        };
        let name = name.to_string_lossy();
        let part = match &v {
            Value::String(s) => match Slot::of(&s.to_string_lossy()) {
                Some(slot) => Part::Filled(slot),
                None => Part::Fixed(Json::String(s.to_string_lossy())),
            },
            other => Part::Fixed(
                lua.from_value(other.clone())
                    .map_err(|e| bad(kind, &format!("json.{name}"), &e.to_string()))?,
            ),
        };
        fields.push((name, part));
    }
    fields.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(fields)
}

/// A template's headers.
fn template_headers(kind: &str, headers: Value) -> mlua::Result<Headers> {
    match headers {
        Value::Nil => Ok(Headers::from([])),
        Value::Table(h) => headers_of(&h),
        other => Err(bad(
            kind,
            "headers",
            &format!("must be a table, not a {}", lua_type(&other)),
        )),
    }
}

/// A body's fields with the values of one send.
struct Filled<'a> {
    fields: &'a [(String, Part<Json>)],
    values: [&'a str; 3],
}

impl Filled<'_> {
    fn value(&self, slot: Slot) -> &str {
        self.values[slot as usize]
    }
}

impl Serialize for Filled<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.fields.len()))?;
        for (name, part) in self.fields {
            match part {
                Part::Fixed(v) => map.serialize_entry(name, v)?,
                Part::Filled(slot) => map.serialize_entry(name, self.value(*slot))?,
            }
        }
        map.end()
    }
}

impl Template {
    /// The request of the send `id` of `body` to `to`.
    pub fn request(&self, id: &str, to: &str, body: &str) -> Request {
        let mut path = String::new();
        for part in &self.path {
            match part {
                Part::Fixed(p) => path.push_str(p),
                Part::Filled(Slot::To) => path.extend(utf8_percent_encode(to, PATH)),
                Part::Filled(Slot::Id) => path.push_str(id),
                Part::Filled(Slot::Body) => path.extend(utf8_percent_encode(body, PATH)),
            }
        }
        let body = if self.json.is_empty() {
            Bytes::new()
        } else {
            let filled = Filled {
                fields: &self.json,
                values: [id, to, body],
            };
            // A map of strings and JSON values always serializes.
            Bytes::from(serde_json::to_vec(&filled).unwrap_or_default())
        };
        Request {
            method: self.method.clone(),
            path,
            headers: self.headers.clone(),
            body,
            reference: Some(id.to_owned()),
            answer: self.answer.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lua() -> Lua {
        let lua = crate::driver::script::codecs::with_codecs();
        let f = lua.create_function(declare).expect("a function");
        lua.globals().set("sends", f).expect("set");
        lua
    }

    #[test]
    fn a_template_fills_the_path_and_escapes_the_body_as_json() {
        let lua = lua();
        let ud: mlua::AnyUserData = lua
            .load(
                r#"return sends { direct = { method = "PUT", path = "/rooms/{to}/send/{id}",
                   json = { to = "{to}", body = "{body}", kind = "m.text", n = 2 },
                   headers = { Authorization = "Bearer t" },
                   answer = codec.json_ack { conv = "conv" } } }"#,
            )
            .eval()
            .expect("declared");
        let sends = ud.borrow::<Sends>().expect("Sends").clone();
        assert!(sends.group.is_none());
        let r = sends
            .direct
            .expect("direct")
            .request("7", "!a:b c", "say \"hi\"\n\u{1}é");
        assert_eq!(r.method, "PUT");
        assert_eq!(r.path, "/rooms/%21a%3Ab%20c/send/7");
        assert_eq!(r.reference.as_deref(), Some("7"));
        assert!(r.answer.is_some());
        assert_eq!(r.headers.len(), 1);
        let body: Json = serde_json::from_slice(&r.body).expect("JSON");
        assert_eq!(
            body,
            serde_json::json!({ "to": "!a:b c", "body": "say \"hi\"\n\u{1}é", "kind": "m.text", "n": 2 })
        );
    }

    #[test]
    fn a_bad_template_names_its_key() {
        let lua = lua();
        for (decl, want) in [
            (
                r#"{ dm = { path = "/s" } }"#,
                "u:sends: `dm` is none of direct, group",
            ),
            (
                r#"{ direct = "/s" }"#,
                "u:sends: `direct` must be a table, not a string",
            ),
            (
                r#"{ group = { path = "/s", bodi = {} } }"#,
                "u:sends: group.`bodi` is none of method, path",
            ),
            (
                r#"{ direct = { path = 3 } }"#,
                "u:sends: direct.`path` must be a string, not a number",
            ),
            (
                r#"{ direct = { method = "PUT" } }"#,
                "u:sends: direct.`path` is required",
            ),
            (
                r#"{ direct = { path = "/s", answer = {} } }"#,
                "u:sends: direct.`answer` must be a shape of codec.json_ack",
            ),
        ] {
            let e = lua
                .load(format!("return sends {decl}"))
                .exec()
                .expect_err(decl);
            assert!(e.to_string().contains(want), "{decl}: {e}");
        }
    }

    #[test]
    fn a_path_without_placeholders_or_with_unknown_braces_stays_as_written() {
        assert_eq!(path_parts("/send"), [Part::Fixed("/send".to_owned())]);
        let parts = path_parts("/a{x}/{id}");
        assert_eq!(
            parts,
            [
                Part::Fixed("/a{".to_owned()),
                Part::Fixed("x}/".to_owned()),
                Part::Filled(Slot::Id)
            ]
        );
    }
}
