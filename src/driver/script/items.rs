//! `codec.json_items(text, key, shape)`: a JSON page holding an array of events (a long
//! poll's answer, a history page) made straight into the list `receive` returns, in Rust.
//! Each event becomes one [`Said`] whose keys are `shape`'s and whose values are the
//! event's fields `shape` names (`{ push = "body", conv = "room", … }`); the list is a
//! userdata ([`Items`]) that `receive` returns and `u:deliver` and `u:cover` take as it is,
//! so neither the decoded events nor a table per item pass through the interpreter one
//! value at a time. The rest of the page comes back as `codec.json_decode` makes it.

use mlua::{Lua, LuaSerdeExt, MetaMethod, String as LuaString, Table, UserData, Value};
use serde_json::Value as Json;

use super::said::{Said, Scalar};

/// A list of items made by `codec.json_items`: `#items` and `items[i]` (a table) read it;
/// returning it from `receive` or handing it to `u:deliver` empties it.
#[derive(Debug, Default)]
pub struct Items(pub Vec<Said>);

impl UserData for Items {
    fn add_methods<M: mlua::UserDataMethods<Self>>(m: &mut M) {
        m.add_meta_method(MetaMethod::Len, |_, items, ()| Ok(items.0.len()));
        m.add_meta_method(MetaMethod::Index, |lua, items, i: Value| {
            let at = match i {
                Value::Integer(i) => usize::try_from(i).ok(),
                _ => None,
            };
            match at
                .and_then(|i| i.checked_sub(1))
                .and_then(|i| items.0.get(i))
            {
                Some(said) => table_of(lua, said).map(Value::Table),
                None => Ok(Value::Nil),
            }
        });
    }
}

/// `said` as the table `receive` would have returned (keys without a scalar left out).
pub fn table_of(lua: &Lua, said: &Said) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    for (key, value) in said.known() {
        let value = match value {
            Some(Scalar::Text(s)) => Value::String(lua.create_string(s)?),
            Some(Scalar::Int(i)) => Value::Integer(*i),
            Some(Scalar::Float(n)) => Value::Number(*n),
            Some(Scalar::Bool(b)) => Value::Boolean(*b),
            Some(Scalar::Other(_)) | None => continue,
        };
        t.raw_set(key, value)?;
    }
    Ok(t)
}

/// `codec.json_items(text, key, shape)`: the page without `key` and the items of its array
/// `key` (none when it is missing or null); `nil, reason` when `text` is not a JSON object
/// of that form. A `shape` key msgstorm does not read is an error.
pub fn json_items(
    lua: &Lua,
    (text, key, shape): (LuaString, LuaString, Table),
) -> mlua::Result<(Value, Value)> {
    let shape = shape_of(&shape)?;
    let key = key.to_string_lossy();
    let made = page(&text.as_bytes(), &key, &shape);
    let (rest, items) = match made {
        Ok(made) => made,
        Err(reason) => {
            let reason = lua.create_string(format!("json_items: {reason}"))?;
            return Ok((Value::Nil, Value::String(reason)));
        }
    };
    super::limits::lifted(lua, || {
        Ok((
            lua.to_value(&rest)?,
            Value::UserData(lua.create_userdata(Items(items))?),
        ))
    })
}

/// `shape`'s pairs: (a key msgstorm reads, the event's field that fills it).
fn shape_of(shape: &Table) -> mlua::Result<Vec<(String, String)>> {
    let mut pairs = Vec::new();
    for pair in shape.pairs::<LuaString, LuaString>() {
        let (key, field) = pair.map_err(|e| {
            mlua::Error::runtime(format!("json_items: a shape maps names to names ({e})"))
        })?;
        let key = key.to_string_lossy();
        if Said::default().slot(key.as_bytes()).is_none() {
            let keys = Said::default().known().map(|(k, _)| k).join(", ");
            return Err(mlua::Error::runtime(format!(
                "json_items: shape key `{key}` is none of {keys}"
            )));
        }
        pairs.push((key, field.to_string_lossy()));
    }
    Ok(pairs)
}

/// The page `text` without `key`, and the items of its array `key`.
fn page(text: &[u8], key: &str, shape: &[(String, String)]) -> Result<(Json, Vec<Said>), String> {
    let page: Json = serde_json::from_slice(text).map_err(|e| format!("not JSON: {e}"))?;
    let Json::Object(mut page) = page else {
        return Err(format!("not a JSON object but {}", kind(&page)));
    };
    let events = match page.remove(key) {
        None | Some(Json::Null) => Vec::new(),
        Some(Json::Array(events)) => events,
        Some(other) => return Err(format!("`{key}` is {}, not an array", kind(&other))),
    };
    let mut items = Vec::with_capacity(events.len());
    for (i, event) in events.into_iter().enumerate() {
        let Json::Object(mut fields) = event else {
            return Err(format!(
                "{key}[{}] is {}, not an object",
                i + 1,
                kind(&event)
            ));
        };
        let mut said = Said::default();
        for (to, field) in shape {
            if let (Some(slot), Some(v)) = (said.slot(to.as_bytes()), fields.remove(field)) {
                *slot = Scalar::of_json(v);
            }
        }
        items.push(said);
    }
    Ok((Json::Object(page), items))
}

/// What a JSON value is, for an error.
fn kind(v: &Json) -> &'static str {
    match v {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "an array",
        Json::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lua() -> Lua {
        let lua = Lua::new();
        crate::driver::script::codecs::install(&lua, &prost_reflect::DescriptorPool::new())
            .expect("install");
        lua
    }

    const SHAPE: &str = r#"local SHAPE = { push = "body", signal = "signal", conv = "conv", seq = "seq", from = "from" }"#;

    #[test]
    fn json_items_gives_the_page_and_one_item_per_event_in_the_shape() {
        let lua = lua();
        let got: String = lua
            .load(format!(
                r#"{SHAPE}
                local page, items = codec.json_items(
                  '{{"next":12,"events":[{{"conv":"u1:u2","seq":1,"from":"u1","body":"x","ts":5}},{{"signal":"t","conv":"r:u1","seq":2.5,"from":"u3"}}]}}',
                  "events", SHAPE)
                local a, b = items[1], items[2]
                return table.concat({{ math.type(page.next), page.next, tostring(page.events), #items,
                  a.push, a.conv, math.type(a.seq), a.seq, a.from, tostring(a.ts), tostring(a.signal),
                  b.signal, tostring(b.push), math.type(b.seq), tostring(items[3]) }}, " ")"#
            ))
            .eval()
            .expect("runs");
        assert_eq!(
            got,
            "integer 12 nil 2 x u1:u2 integer 1 u1 nil nil t nil float nil"
        );
    }

    #[test]
    fn json_items_without_the_array_gives_no_items() {
        let lua = lua();
        let got: String = lua
            .load(format!(
                r#"{SHAPE}
                local _, missing = codec.json_items('{{"next":1}}', "events", SHAPE)
                local _, null = codec.json_items('{{"events":null}}', "events", SHAPE)
                local _, empty = codec.json_items('{{"events":[]}}', "events", SHAPE)
                return #missing .. #null .. #empty"#
            ))
            .eval()
            .expect("runs");
        assert_eq!(got, "000");
    }

    #[test]
    fn json_items_names_what_is_wrong_with_a_page() {
        let lua = lua();
        for (text, want) in [
            (
                "{oops",
                "json_items: not JSON: key must be a string at line 1 column 2",
            ),
            ("[1]", "json_items: not a JSON object but an array"),
            (
                r#"{"events":3}"#,
                "json_items: `events` is a number, not an array",
            ),
            (
                r#"{"events":[{},"x"]}"#,
                "json_items: events[2] is a string, not an object",
            ),
        ] {
            let (page, reason): (Value, String) = lua
                .load(format!(
                    "{SHAPE} return codec.json_items(..., 'events', SHAPE)"
                ))
                .call(text)
                .expect("runs");
            assert!(page.is_nil(), "{text}");
            assert_eq!(reason, want);
        }
    }

    #[test]
    fn a_shape_key_msgstorm_does_not_read_is_an_error() {
        let lua = lua();
        let e = lua
            .load(r#"return codec.json_items('{}', "events", { body = "body" })"#)
            .exec()
            .expect_err("refused");
        assert!(
            e.to_string()
                .contains("json_items: shape key `body` is none of ack, push"),
            "{e}"
        );
    }
}
