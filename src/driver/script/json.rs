//! `codec.json_decode`'s decoder: Lua values built straight from serde_json's parser, with
//! no `serde_json::Value` tree in between (a string and a map node per key, freed again),
//! and the very values the tree gave through mlua's serializer, which adapters rely on:
//!
//! - integers are Lua integers, and those above `i64::MAX` floats; numbers with a fraction
//!   or an exponent are floats (`1.0` stays a float, `-0` is what the parser says);
//! - `null` is `codec.null` (a light userdata), also in arrays, whose length it keeps;
//! - arrays carry mlua's array metatable, so an empty one encodes back as `[]`;
//! - an object's keys go into its table in sorted order, the last of duplicates winning,
//!   into a table sized for them: the same table as the tree's, down to the order `pairs`
//!   walks it in.

use std::cell::RefCell;
use std::fmt;

use mlua::{IntoLua, Lua, LuaSerdeExt, Value};
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};

/// The Lua value of the JSON text `bytes`; the outer error when it is not JSON, the inner
/// one when the interpreter failed (out of memory).
pub fn decode(lua: &Lua, bytes: &[u8]) -> mlua::Result<Result<Value, serde_json::Error>> {
    let failed = RefCell::new(None);
    let mut parser = serde_json::Deserializer::from_slice(bytes);
    let built = Build {
        lua,
        failed: &failed,
    }
    .deserialize(&mut parser)
    .and_then(|v| parser.end().map(|()| v));
    match failed.into_inner() {
        Some(e) => Err(e),
        None => Ok(built),
    }
}

/// Builds one value in `lua`; a Lua error is kept in `failed` and ends the parse.
#[derive(Clone, Copy)]
struct Build<'a> {
    lua: &'a Lua,
    failed: &'a RefCell<Option<mlua::Error>>,
}

impl Build<'_> {
    fn lua<T, E: de::Error>(self, made: mlua::Result<T>) -> Result<T, E> {
        made.map_err(|e| {
            *self.failed.borrow_mut() = Some(e);
            E::custom("the script's interpreter failed")
        })
    }
}

impl<'de> DeserializeSeed<'de> for Build<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Build<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: de::Error>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Boolean(b))
    }

    fn visit_i64<E: de::Error>(self, i: i64) -> Result<Value, E> {
        Ok(Value::Integer(i))
    }

    fn visit_u64<E: de::Error>(self, u: u64) -> Result<Value, E> {
        self.lua(u.into_lua(self.lua))
    }

    fn visit_f64<E: de::Error>(self, n: f64) -> Result<Value, E> {
        Ok(Value::Number(n))
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<Value, E> {
        self.lua(self.lua.create_string(s).map(Value::String))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(self.lua.null())
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(self.lua.null())
    }

    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        self.deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(self)? {
            items.push(item);
        }
        let made = || -> mlua::Result<Value> {
            let t = self.lua.create_table_with_capacity(items.len(), 0)?;
            t.set_metatable(Some(self.lua.array_metatable()))?;
            for (i, item) in items.into_iter().enumerate() {
                t.raw_seti(i + 1, item)?;
            }
            Ok(Value::Table(t))
        };
        self.lua(made())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut entries: Vec<(Key<'de>, Value)> = Vec::new();
        while let Some(key) = map.next_key_seed(KeySeed)? {
            entries.push((key, map.next_value_seed(self)?));
        }
        // Sorted and the last of equal keys kept: what a `BTreeMap` makes of them.
        entries.sort_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
        let mut kept: Vec<(Key<'de>, Value)> = Vec::with_capacity(entries.len());
        for (key, value) in entries {
            match kept.last_mut() {
                Some(last) if last.0.as_str() == key.as_str() => last.1 = value,
                _ => kept.push((key, value)),
            }
        }
        let made = || -> mlua::Result<Value> {
            let t = self.lua.create_table_with_capacity(0, kept.len())?;
            for (key, value) in kept {
                t.raw_set(self.lua.create_string(key.as_str())?, value)?;
            }
            Ok(Value::Table(t))
        };
        self.lua(made())
    }
}

/// An object's key: borrowed from the text unless it has escapes.
pub(super) enum Key<'de> {
    Borrowed(&'de str),
    Owned(String),
}

impl Key<'_> {
    /// The key.
    pub(super) fn as_str(&self) -> &str {
        match self {
            Key::Borrowed(s) => s,
            Key::Owned(s) => s,
        }
    }
}

/// Reads a key as a [`Key`].
pub(super) struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Key<'de>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Key<'de>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Key<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object's key")
    }

    fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Key<'de>, E> {
        Ok(Key::Borrowed(s))
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<Key<'de>, E> {
        Ok(Key::Owned(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deep comparison in Lua: types, integer or float, the sign of zero, metatables, and
    /// the order `pairs` walks each table in.
    const SAME: &str = r#"
        local function same(a, b, at)
          if type(a) ~= type(b) then return at .. ": " .. type(a) .. " vs " .. type(b) end
          if type(a) == "number" then
            if math.type(a) ~= math.type(b) then return at .. ": " .. math.type(a) .. " vs " .. math.type(b) end
            if a ~= b or (a == 0 and 1 / a ~= 1 / b) then return at .. ": " .. a .. " vs " .. b end
            return nil
          end
          if type(a) ~= "table" then
            if a ~= b then return at .. ": " .. tostring(a) .. " vs " .. tostring(b) end
            return nil
          end
          if getmetatable(a) ~= getmetatable(b) then return at .. ": metatables differ" end
          if #a ~= #b then return at .. ": lengths " .. #a .. " vs " .. #b end
          local ka, kb = {}, {}
          for k in pairs(a) do ka[#ka + 1] = k end
          for k in pairs(b) do kb[#kb + 1] = k end
          if #ka ~= #kb then return at .. ": " .. #ka .. " vs " .. #kb .. " keys" end
          for i = 1, #ka do
            if ka[i] ~= kb[i] then return at .. ": pairs order differs at " .. i end
            local why = same(a[ka[i]], b[ka[i]], at .. "." .. tostring(ka[i]))
            if why then return why end
          end
          return nil
        end
        return same
    "#;

    #[test]
    fn the_direct_decoder_gives_the_tree_decoders_values() {
        let lua = Lua::new();
        let same: mlua::Function = lua.load(SAME).eval().expect("same");
        let texts = [
            r#"{"ctrl":{"id":"7","code":200,"params":{"what":"data","count":24},"ts":"2026-11-28T12:00:00.000Z"}}"#,
            r#"{"data":{"topic":"grpX","from":"usrA","seq":101,"content":"hello","head":{"mime":"text/plain"}}}"#,
            r#"{"next":12,"events":[{"conv":"u1:u2","seq":1,"from":"u1","body":"x"},{"signal":"t","conv":"r:u1","seq":2}]}"#,
            "[1, -1, 0, -0, 1.0, -0.0, 1e2, 1E-2, 2.5, 9007199254740993, 9223372036854775807, 9223372036854775808, 18446744073709551615, 18446744073709551616, -9223372036854775808, -9223372036854775809]",
            "[null, 1, null]",
            r#"{"a":null,"b":[],"c":{},"d":[[]],"e":[{}]}"#,
            r#"{"k":1,"k":2,"j":3,"k":4}"#,
            r#"{"z":1,"y":2,"x":3,"w":4,"v":5,"u":6,"t":7,"s":8,"r":9,"q":10,"p":11,"o":12,"n":13,"m":14}"#,
            r#"{"esc\"aped":"a\u00e9\n","\u0041":"b","":"empty","🙂":"😀"}"#,
            r#""just a string""#,
            "true",
            "null",
            "  42  ",
        ];
        for text in texts {
            let tree: serde_json::Value = serde_json::from_str(text).expect(text);
            let tree = lua.to_value(&tree).expect("tree");
            let direct = decode(&lua, text.as_bytes())
                .expect("no Lua error")
                .expect(text);
            let why: Option<String> = same.call((tree, direct, "$")).expect("compares");
            assert_eq!(why, None, "{text}");
        }
        for bad in ["{oops", "[1,]", "1 2", "", r#"{"a":1"#] {
            let tree = serde_json::from_str::<serde_json::Value>(bad).map(|_| ());
            let direct = decode(&lua, bad.as_bytes())
                .expect("no Lua error")
                .map(|_| ());
            assert_eq!(
                direct.map_err(|e| e.to_string()),
                tree.map_err(|e| e.to_string()),
                "{bad}"
            );
        }
    }

    #[test]
    fn decoded_numbers_keep_their_kind_through_an_encode() {
        let lua = Lua::new();
        crate::driver::script::codecs::install(&lua, &prost_reflect::DescriptorPool::new())
            .expect("install");
        let got: String = lua
            .load(
                r#"local t = codec.json_decode('{"before":101,"f":1.0,"big":18446744073709551615,"a":[],"n":[null]}')
                   return codec.json_encode(t) .. " " .. math.type(t.before)"#,
            )
            .eval()
            .expect("runs");
        assert_eq!(
            got,
            r#"{"a":[],"before":101,"big":1.8446744073709552e+19,"f":1.0,"n":[null]} integer"#
        );
    }
}
