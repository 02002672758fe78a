//! `receive`'s fourth argument for a frame of an HTTP transport, made for every answer on
//! the hot path: `status`, `ref` and `event` are set at once, and `headers` is built from
//! the answer's own only when the script reads it (most adapters never do), through a
//! metatable shared by every `meta` of a session.

use std::ffi::c_void;

use mlua::{LightUserData, Lua, Table, UserData, Value};

use crate::driver::script::frame::Meta;

/// Its address is the key under which a `meta` table keeps its answer's headers until the
/// script reads them: a light userdata, which no script can name.
static PENDING: u8 = 0;

fn pending_key() -> Value {
    Value::LightUserData(LightUserData(
        std::ptr::addr_of!(PENDING).cast_mut().cast::<c_void>(),
    ))
}

/// An answer's headers, waiting in a `meta` table.
struct Pending(http::HeaderMap);

impl UserData for Pending {}

/// The metatable every `meta` of a session shares: its `__index` builds `headers` (names in
/// lower case, values as sent) on the first read and keeps it in the table.
pub(super) fn metatable(lua: &Lua) -> mlua::Result<Table> {
    let mt = lua.create_table()?;
    let index = lua.create_function(|lua, (t, k): (Table, Value)| {
        if !matches!(&k, Value::String(s) if s.as_bytes().as_ref() == b"headers") {
            return Ok(Value::Nil);
        }
        let headers = match t.raw_get::<Value>(pending_key())? {
            Value::UserData(ud) => ud.take::<Pending>()?.0,
            _ => http::HeaderMap::new(),
        };
        t.raw_set(pending_key(), Value::Nil)?;
        let built = headers_table(lua, &headers)?;
        t.raw_set("headers", &built)?;
        Ok(Value::Table(built))
    })?;
    mt.raw_set("__index", index)?;
    Ok(mt)
}

/// `meta` for a frame of an HTTP transport, its headers moved in unread; `mt` is the
/// session's [`metatable`].
pub(super) fn table(lua: &Lua, m: Meta, mt: &Table) -> mlua::Result<Table> {
    let t = lua.create_table_with_capacity(0, 4)?;
    t.raw_set("status", m.status)?;
    if let Some(r) = &m.reference {
        t.raw_set("ref", r.as_str())?;
    }
    if let Some(e) = &m.event {
        t.raw_set("event", e.as_str())?;
    }
    if !m.headers.is_empty() {
        t.raw_set(pending_key(), lua.create_userdata(Pending(m.headers))?)?;
    }
    t.set_metatable(Some(mt.clone()))?;
    Ok(t)
}

/// An answer's headers as a Lua table, names in lower case (hyper's), values as sent.
pub(super) fn headers_table(lua: &Lua, headers: &http::HeaderMap) -> mlua::Result<Table> {
    let t = lua.create_table_with_capacity(0, headers.keys_len())?;
    for (k, v) in headers {
        t.raw_set(k.as_str(), lua.create_string(v.as_bytes())?)?;
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(headers: &[(&'static str, &'static str)]) -> Meta {
        let mut map = http::HeaderMap::new();
        for (k, v) in headers {
            map.insert(*k, http::HeaderValue::from_static(v));
        }
        Meta {
            kind: "response",
            status: 201,
            reference: Some("7".into()),
            event: None,
            headers: map,
            answer: None,
        }
    }

    #[test]
    fn meta_headers_are_built_when_read_and_stay_the_same_table() {
        let lua = Lua::new();
        let mt = metatable(&lua).expect("metatable");
        let t = table(&lua, meta(&[("content-type", "application/json")]), &mt).expect("meta");
        lua.globals().set("meta", t).expect("set");
        let got: String = lua
            .load(
                "local h = meta.headers \
                 assert(rawequal(h, meta.headers), 'built once') \
                 local n = 0 for _ in pairs(h) do n = n + 1 end \
                 return meta.status .. ' ' .. meta.ref .. ' ' .. h['content-type'] .. ' ' .. n \
                   .. ' ' .. tostring(meta.event) .. ' ' .. tostring(meta.other)",
            )
            .eval()
            .expect("runs");
        assert_eq!(got, "201 7 application/json 1 nil nil");
    }

    #[test]
    fn meta_without_headers_reads_an_empty_table() {
        let lua = Lua::new();
        let mt = metatable(&lua).expect("metatable");
        let t = table(&lua, meta(&[]), &mt).expect("meta");
        lua.globals().set("meta", t).expect("set");
        let got: bool = lua
            .load("return type(meta.headers) == 'table' and next(meta.headers) == nil")
            .eval()
            .expect("runs");
        assert!(got);
    }
}
