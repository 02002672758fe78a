//! `codec.json_items(key, shape)`: a reader of JSON pages holding an array of events (a
//! long poll's answer, a history page), made once, that turns a page straight into the
//! list `receive` returns, in Rust. Each event of the array `key` becomes one [`Said`]
//! whose keys are `shape`'s and whose values are the event's fields `shape` names
//! (`{ push = "body", conv = "room", … }`), read from the text with no JSON tree between;
//! the list is a userdata ([`Items`]) that `receive` returns and `u:deliver` and `u:cover`
//! take as it is, so neither the events nor a table per item pass through the interpreter
//! one value at a time. The rest of the page comes back as `codec.json_decode` makes it.

use std::fmt;
use std::sync::Arc;

use mlua::{Lua, LuaSerdeExt, MetaMethod, String as LuaString, Table, UserData, Value};
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value as Json};

use super::json::KeySeed;
use super::said::{Said, Scalar};

/// A list of items made by a `codec.json_items` reader: `#items` and `items[i]` (a table)
/// read it, `items:having(key)` is the list of those that have `key` (the same items,
/// shared, when all of them have it); returning it from `receive` or handing it to
/// `u:deliver` empties it.
#[derive(Debug, Default)]
pub struct Items(pub Arc<Vec<Said>>);

impl Items {
    /// The items, emptying the list: taken as they are unless a list made by `having`
    /// still shares them.
    pub fn take(&mut self) -> Vec<Said> {
        Arc::try_unwrap(std::mem::take(&mut self.0)).unwrap_or_else(|shared| (*shared).clone())
    }
}

impl UserData for Items {
    fn add_methods<M: mlua::UserDataMethods<Self>>(m: &mut M) {
        m.add_method("having", |_, items, key: LuaString| {
            let Some(i) = Said::KEYS
                .iter()
                .position(|k| k.as_bytes() == &*key.as_bytes())
            else {
                return Err(mlua::Error::runtime(format!(
                    "items:having: `{}` is none of {}",
                    key.to_string_lossy(),
                    Said::KEYS.join(", ")
                )));
            };
            let has = |said: &&Said| said.known()[i].1.is_some();
            if items.0.iter().all(|said| has(&said)) {
                return Ok(Items(Arc::clone(&items.0)));
            }
            Ok(Items(Arc::new(
                items.0.iter().filter(has).cloned().collect(),
            )))
        });
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

/// `codec.json_items(key, shape)`: the reader of pages whose array `key` holds the events
/// `shape` describes. The reader's `read(text)` gives the page without `key` and the items
/// (none when `key` is missing or null), or `nil, reason` when `text` is not such a page.
/// A `shape` key msgstorm does not read is an error.
pub fn json_items(_: &Lua, (key, shape): (LuaString, Table)) -> mlua::Result<Pages> {
    Ok(Pages(Arc::new(Reader {
        key: key.to_string_lossy(),
        fields: fields_of("json_items", &shape)?,
    })))
}

/// A `codec.json_items` reader as the script holds it: called on a page's text, and taken
/// as it is by a declared long poll (`u:long_poll { items = … }`).
#[derive(Debug, Clone)]
pub struct Pages(pub Arc<Reader>);

impl UserData for Pages {
    fn add_methods<M: mlua::UserDataMethods<Self>>(m: &mut M) {
        m.add_meta_method(MetaMethod::Call, |lua, pages, text: LuaString| {
            let (rest, items) = match pages.0.read(&text.as_bytes()) {
                Ok(read) => read,
                Err(e) => {
                    let reason = lua.create_string(format!("json_items: {e}"))?;
                    return Ok((Value::Nil, Value::String(reason)));
                }
            };
            super::limits::lifted(lua, || {
                Ok((
                    lua.to_value(&Json::Object(rest))?,
                    Value::UserData(lua.create_userdata(Items(Arc::new(items)))?),
                ))
            })
        });
    }
}

/// `shape`'s pairs as (the event's field, the slot of [`Said::KEYS`] it fills); `what`
/// names the codec in errors.
pub fn fields_of(what: &str, shape: &Table) -> mlua::Result<Vec<(String, usize)>> {
    let mut fields = Vec::new();
    for pair in shape.pairs::<LuaString, LuaString>() {
        let (key, field) = pair.map_err(|e| {
            mlua::Error::runtime(format!("{what}: a shape maps names to names ({e})"))
        })?;
        let key = key.to_string_lossy();
        let Some(slot) = Said::KEYS.iter().position(|k| *k == key) else {
            return Err(mlua::Error::runtime(format!(
                "{what}: shape key `{key}` is none of {}",
                Said::KEYS.join(", ")
            )));
        };
        fields.push((field.to_string_lossy(), slot));
    }
    Ok(fields)
}

/// A reader of pages: the array's key and the shape of its events.
#[derive(Debug)]
pub struct Reader {
    key: String,
    fields: Vec<(String, usize)>,
}

impl Reader {
    /// A reader of single objects (no array): each field `fields` names fills its slot.
    pub fn of_object(fields: Vec<(String, usize)>) -> Reader {
        Reader {
            key: String::new(),
            fields,
        }
    }

    /// The page `text` without the array, and the array's items.
    pub fn read(&self, text: &[u8]) -> serde_json::Result<(Map<String, Json>, Vec<Said>)> {
        self.page(text, None).map(|(rest, _, items)| (rest, items))
    }

    /// The field `cursor` of the page `text` (`None` when it has none) and the array's
    /// items; the page's other fields are skipped, not kept.
    pub fn read_cursor(
        &self,
        text: &[u8],
        cursor: &str,
    ) -> serde_json::Result<(Option<Json>, Vec<Said>)> {
        self.page(text, Some(cursor))
            .map(|(_, cursor, items)| (cursor, items))
    }

    /// The page `text` read by [`Page`].
    fn page(&self, text: &[u8], cursor: Option<&str>) -> serde_json::Result<PageRead> {
        let mut parser = serde_json::Deserializer::from_str(utf8(text)?);
        let read = Page {
            reader: self,
            cursor,
        }
        .deserialize(&mut parser)?;
        parser.end()?;
        Ok(read)
    }

    /// The object `text` read as one item.
    pub fn one(&self, text: &[u8]) -> serde_json::Result<Said> {
        let mut parser = serde_json::Deserializer::from_str(utf8(text)?);
        let said = Event(self).deserialize(&mut parser)?;
        parser.end()?;
        Ok(said)
    }
}

/// `text` checked as UTF-8 once, so that the parser need not check each of its strings
/// again (a page's cost is mostly its strings).
fn utf8(text: &[u8]) -> serde_json::Result<&str> {
    std::str::from_utf8(text).map_err(|e| de::Error::custom(format!("not UTF-8: {e}")))
}

/// A page as [`Page`] reads it: its other fields kept, the cursor's value, the items.
type PageRead = (Map<String, Json>, Option<Json>, Vec<Said>);

/// Reads a page: an object, its array read as items; of its other keys, the one `cursor`
/// names alone (the others skipped) or, without a `cursor`, all of them kept as JSON.
struct Page<'r> {
    reader: &'r Reader,
    cursor: Option<&'r str>,
}

impl<'de> DeserializeSeed<'de> for Page<'_> {
    type Value = PageRead;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Page<'_> {
    type Value = PageRead;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "a JSON object with an array `{}`", self.reader.key)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let (mut rest, mut cursor, mut items) = (Map::new(), None, Vec::new());
        while let Some(key) = map.next_key_seed(KeySeed)? {
            let key = key.as_str();
            if key == self.reader.key {
                items = map.next_value_seed(List(self.reader))?;
            } else if self.cursor.is_none() {
                rest.insert(key.to_owned(), map.next_value::<Json>()?);
            } else if self.cursor == Some(key) {
                cursor = Some(map.next_value::<Json>()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok((rest, cursor, items))
    }
}

/// Reads the array of events (null: none).
struct List<'r>(&'r Reader);

impl<'de> DeserializeSeed<'de> for List<'_> {
    type Value = Vec<Said>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Vec<Said>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for List<'_> {
    type Value = Vec<Said>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "`{}` an array of objects", self.0.key)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Vec<Said>, E> {
        Ok(Vec::new())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<Said>, A::Error> {
        // A long poll's page often holds one item: room for one is a small allocation,
        // where the first growth's room for four is a large one.
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(1));
        while let Some(said) = seq.next_element_seed(Event(self.0))? {
            items.push(said);
        }
        Ok(items)
    }
}

/// Reads one event into the slots its shape names; other fields are skipped.
struct Event<'r>(&'r Reader);

impl<'de> DeserializeSeed<'de> for Event<'_> {
    type Value = Said;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Said, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Event<'_> {
    type Value = Said;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "an event of `{}` (an object)", self.0.key)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Said, A::Error> {
        let mut said = Said::default();
        while let Some(key) = map.next_key_seed(KeySeed)? {
            let slot = self.0.fields.iter().find(|(f, _)| f == key.as_str());
            match slot {
                Some((_, i)) => *said.slot_at(*i) = map.next_value_seed(Field)?,
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(said)
    }
}

/// Reads a field as a scalar, numbers as `codec.json_decode` makes them (null: none; an
/// array or an object: `Other("table")`).
struct Field;

impl<'de> DeserializeSeed<'de> for Field {
    type Value = Option<Scalar>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Option<Scalar>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Field {
    type Value = Option<Scalar>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: de::Error>(self, b: bool) -> Result<Self::Value, E> {
        Ok(Some(Scalar::Bool(b)))
    }

    fn visit_i64<E: de::Error>(self, i: i64) -> Result<Self::Value, E> {
        Ok(Some(Scalar::Int(i)))
    }

    fn visit_u64<E: de::Error>(self, u: u64) -> Result<Self::Value, E> {
        Ok(Some(match i64::try_from(u) {
            Ok(i) => Scalar::Int(i),
            Err(_) => Scalar::Float(u as f64),
        }))
    }

    fn visit_f64<E: de::Error>(self, n: f64) -> Result<Self::Value, E> {
        Ok(Some(Scalar::Float(n)))
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
        Ok(Some(Scalar::Text(s.to_owned())))
    }

    fn visit_string<E: de::Error>(self, s: String) -> Result<Self::Value, E> {
        Ok(Some(Scalar::Text(s)))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Some(Scalar::Other("table")))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Some(Scalar::Other("table")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lua() -> Lua {
        crate::driver::script::codecs::with_codecs()
    }

    const READ: &str = r#"local read = codec.json_items("events", { push = "body", signal = "signal", conv = "conv", seq = "seq", from = "from" })"#;

    #[test]
    fn json_items_gives_the_page_and_one_item_per_event_in_the_shape() {
        let lua = lua();
        let got: String = lua
            .load(format!(
                r#"{READ}
                local page, items = read(
                  '{{"next":12,"events":[{{"conv":"u1:u2","seq":1,"from":"u1","body":"x","ts":{{"a":[1]}}}},{{"signal":"t","conv":"r:u1","seq":2.5,"from":"u3","body":null}}],"big":18446744073709551615}}')
                local a, b = items[1], items[2]
                return table.concat({{ math.type(page.next), page.next, tostring(page.events), math.type(page.big),
                  #items, a.push, a.conv, math.type(a.seq), a.seq, a.from, tostring(a.ts), tostring(a.signal),
                  b.signal, tostring(b.push), math.type(b.seq), tostring(items[3]) }}, " ")"#
            ))
            .eval()
            .expect("runs");
        assert_eq!(
            got,
            "integer 12 nil float 2 x u1:u2 integer 1 u1 nil nil t nil float nil"
        );
    }

    #[test]
    fn json_items_without_the_array_gives_no_items() {
        let lua = lua();
        let got: String = lua
            .load(format!(
                r#"{READ}
                local _, missing = read('{{"next":1}}')
                local _, null = read('{{"events":null}}')
                local _, empty = read('{{"events":[]}}')
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
                "json_items: key must be a string at line 1 column 2",
            ),
            (
                "[1]",
                "json_items: invalid type: sequence, expected a JSON object with an array \
                 `events` at line 1 column 0",
            ),
            (
                r#"{"events":3}"#,
                "json_items: invalid type: integer `3`, expected `events` an array of objects \
                 at line 1 column 11",
            ),
            (
                r#"{"events":[{},"x"]}"#,
                "json_items: invalid type: string \"x\", expected an event of `events` (an \
                 object) at line 1 column 17",
            ),
            (
                r#"{"events":[]} 1"#,
                "json_items: trailing characters at line 1 column 15",
            ),
        ] {
            let (page, reason): (Value, String) = lua
                .load(format!("{READ} return read(...)"))
                .call(text)
                .expect("runs");
            assert!(page.is_nil(), "{text}");
            assert_eq!(reason, want);
        }
    }

    #[test]
    fn a_page_that_is_not_utf8_is_refused_as_such() {
        let reader = Reader {
            key: "events".to_owned(),
            fields: vec![("body".to_owned(), 1)],
        };
        let e = reader
            .read(b"{\"events\":[{\"body\":\"a\xff\"}]}")
            .expect_err("refused");
        assert!(e.to_string().starts_with("not UTF-8: "), "{e}");
        assert!(reader.one(b"{\"body\":\"\xc3\"}").is_err());
        let said = reader.one("{\"body\":\"é\"}".as_bytes()).expect("UTF-8");
        assert_eq!(said.push, Some(Scalar::Text("é".to_owned())));
    }

    #[test]
    fn having_keeps_the_items_with_that_key_and_leaves_the_list_whole() {
        let lua = lua();
        let got: String = lua
            .load(format!(
                r#"{READ}
                local _, items = read('{{"events":[{{"signal":"a","from":"u1"}},{{"body":"b","conv":"c","seq":1}},{{"signal":"d","conv":"r:u1","seq":2}}]}}')
                local stored = items:having("conv")
                return #stored .. " " .. stored[1].push .. " " .. stored[2].signal .. " " .. #items"#
            ))
            .eval()
            .expect("runs");
        assert_eq!(got, "2 b d 3");
        let e = lua
            .load(format!(
                r#"{READ} local _, items = read('{{}}') return items:having("body")"#
            ))
            .exec()
            .expect_err("refused");
        assert!(
            e.to_string()
                .contains("items:having: `body` is none of ack"),
            "{e}"
        );
    }

    #[test]
    fn having_shares_the_items_when_all_have_the_key_and_taking_them_leaves_the_list_whole() {
        let lua = lua();
        let (all, stored): (mlua::AnyUserData, mlua::AnyUserData) = lua
            .load(format!(
                r#"{READ}
                local _, items = read('{{"events":[{{"body":"a","conv":"c","seq":1}},{{"body":"b","conv":"c","seq":2}}]}}')
                return items, items:having("conv")"#
            ))
            .eval()
            .expect("runs");
        let all = all.borrow::<Items>().expect("items");
        let mut stored = stored.borrow_mut::<Items>().expect("items");
        assert!(Arc::ptr_eq(&all.0, &stored.0), "shared, not copied");
        let taken = stored.take();
        assert_eq!(taken.len(), 2);
        assert!(stored.0.is_empty(), "taking empties the list taken from");
        assert_eq!(all.0.len(), 2, "and leaves the list it shared whole");
    }

    #[test]
    fn a_shape_key_msgstorm_does_not_read_is_an_error() {
        let lua = lua();
        let e = lua
            .load(r#"return codec.json_items("events", { body = "body" })"#)
            .exec()
            .expect_err("refused");
        assert!(
            e.to_string()
                .contains("json_items: shape key `body` is none of ack, push"),
            "{e}"
        );
    }
}
