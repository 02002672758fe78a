//! Long polls declared once: `u:long_poll { path = "/sync?since=", cursor = "next",
//! since = …, items = reader, headers = … }` (in `login` or a flow) hands msgstorm the
//! whole loop, so that no poll calls into the script: msgstorm issues each poll itself
//! (`path` followed by the current cursor), reads a 2xx page with the `codec.json_items`
//! reader, takes the page's field `cursor` as the next cursor (kept in `u.kept[kept]` when
//! the declaration names `kept`, for a returning user) and judges the page's items as
//! `receive` returning them would be judged. A poll answered outside 2xx, or a page the
//! reader cannot read or that has no cursor, goes to `receive` as kind `"poll"` as
//! without the declaration; the cursor stays, and the next poll asks again a second later
//! (a server that fails every poll at once is not asked in a tight loop).

use std::sync::Arc;
use std::time::Duration;

use hyper::body::Bytes;
use mlua::{Lua, Table, UserData, Value};
use serde_json::Value as Json;

use super::http::{headers_of, Headers, Request};
use super::items::{Pages, Reader};
use super::said::{key_name, lua_text, lua_type, Said};

/// What a declaration says, the same for every poll.
#[derive(Debug)]
struct Declared {
    method: String,
    path: String,
    cursor: String,
    reader: Arc<Reader>,
    headers: Headers,
    kept: Option<String>,
}

/// A declared long poll and where it stands.
#[derive(Debug, Clone)]
pub struct LongPoll {
    declared: Arc<Declared>,
    /// The cursor the next poll asks from.
    since: String,
    /// The last poll's answer was not a page.
    failed: bool,
    /// Where the cursor is kept, once looked up: the user's `u.kept` and the key in it.
    kept_in: Option<(Table, mlua::String)>,
}

/// How long the next poll waits after one that failed.
pub const RETRY: Duration = Duration::from_secs(1);

impl UserData for LongPoll {}

/// The keys of a declaration.
const KEYS: [&str; 7] = [
    "method", "path", "cursor", "since", "items", "headers", "kept",
];

/// The error of a declaration's `key`.
fn bad(key: &str, what: &str) -> mlua::Error {
    mlua::Error::runtime(format!("u:long_poll: `{key}` {what}"))
}

/// A text value of the declaration (strings, and numbers as printed), `None` for nil.
fn text(key: &str, v: Value) -> mlua::Result<Option<String>> {
    lua_text(v).map_err(|t| bad(key, &format!("must be a string, not a {t}")))
}

/// `u:long_poll(t)`'s declaration read from `t`: an unknown key or a value of the wrong
/// type is an error naming the key.
pub fn declare(_: &Lua, t: Table) -> mlua::Result<LongPoll> {
    for pair in t.pairs::<Value, Value>() {
        let (k, _) = pair?;
        let name = key_name(&k);
        if !KEYS.contains(&name.as_str()) {
            return Err(bad(&name, &format!("is none of {}", KEYS.join(", "))));
        }
    }
    let field = |key: &str| t.raw_get::<Value>(key);
    let required = |key: &str| -> mlua::Result<String> {
        text(key, field(key)?)?.ok_or_else(|| bad(key, "is required"))
    };
    let reader = match field("items")? {
        Value::UserData(ud) if ud.is::<Pages>() => Arc::clone(&ud.borrow::<Pages>()?.0),
        Value::Nil => return Err(bad("items", "is required (a codec.json_items reader)")),
        other => {
            return Err(bad(
                "items",
                &format!(
                    "must be a codec.json_items reader, not a {}",
                    lua_type(&other)
                ),
            ))
        }
    };
    let headers = match field("headers")? {
        Value::Nil => Headers::from([]),
        Value::Table(h) => headers_of(&h)?,
        other => {
            return Err(bad(
                "headers",
                &format!("must be a table, not a {}", lua_type(&other)),
            ))
        }
    };
    let declared = Declared {
        method: text("method", field("method")?)?.unwrap_or_else(|| "GET".to_owned()),
        path: required("path")?,
        cursor: required("cursor")?,
        reader,
        headers,
        kept: text("kept", field("kept")?)?,
    };
    Ok(LongPoll {
        since: text("since", field("since")?)?.unwrap_or_default(),
        declared: Arc::new(declared),
        failed: false,
        kept_in: None,
    })
}

impl LongPoll {
    /// The next poll's request.
    pub fn request(&self) -> Request {
        let d = &self.declared;
        Request {
            method: d.method.clone(),
            path: [d.path.as_str(), &self.since].concat(),
            headers: d.headers.clone(),
            body: Bytes::new(),
            reference: None,
            answer: None,
        }
    }

    /// How long the next poll waits: [`RETRY`] after a failed one (told once).
    pub fn pause(&mut self) -> Option<Duration> {
        std::mem::take(&mut self.failed).then_some(RETRY)
    }

    /// Writes the cursor to `user`'s `u.kept` under the declaration's `kept` key, if it
    /// names one. The table and the key are looked up at the first page: the prelude's
    /// `u.kept` is the table a returning user gets back.
    pub fn keep(&mut self, lua: &Lua, user: &Table) -> mlua::Result<()> {
        let Some(key) = &self.declared.kept else {
            return Ok(());
        };
        let (kept, key) = match &self.kept_in {
            Some(known) => known,
            None => self
                .kept_in
                .insert((user.raw_get("kept")?, lua.create_string(key)?)),
        };
        kept.raw_set(key, self.since.as_str())
    }

    /// The items of a poll's answer `body` with `status`, the cursor moved on to the page's;
    /// `None` when the answer is not a 2xx page the reader reads with a cursor (then it
    /// goes to `receive`).
    pub fn page(&mut self, status: u16, body: &[u8]) -> Option<Vec<Said>> {
        let read = self.read(status, body);
        self.failed = read.is_none();
        let (since, items) = read?;
        self.since = since;
        Some(items)
    }

    /// The next cursor and the items of a 2xx page.
    fn read(&self, status: u16, body: &[u8]) -> Option<(String, Vec<Said>)> {
        if !(200..300).contains(&status) {
            return None;
        }
        let (cursor, items) = self
            .declared
            .reader
            .read_cursor(body, &self.declared.cursor)
            .ok()?;
        let since = match cursor? {
            Json::String(s) => s,
            Json::Number(n) => n.to_string(),
            _ => return None,
        };
        Some((since, items))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lua() -> Lua {
        let lua = crate::driver::script::codecs::with_codecs();
        let f = lua.create_function(declare).expect("a function");
        lua.globals().set("long_poll", f).expect("set");
        lua
    }

    const READER: &str = r#"local items = codec.json_items("events", { push = "body", conv = "conv", seq = "seq" })"#;

    #[test]
    fn a_long_poll_asks_from_its_cursor_and_moves_it_to_each_page() {
        let lua = lua();
        let ud: mlua::AnyUserData = lua
            .load(format!(
                r#"{READER} return long_poll {{ path = "/sync?since=", cursor = "next", since = 3,
                   items = items, headers = {{ Authorization = "Bearer t" }}, kept = "since" }}"#
            ))
            .eval()
            .expect("declared");
        let mut poll = ud.borrow::<LongPoll>().expect("a LongPoll").clone();
        let first = poll.request();
        assert_eq!(
            (first.method.as_str(), first.path.as_str()),
            ("GET", "/sync?since=3")
        );
        assert_eq!(first.headers.len(), 1);
        let items = poll
            .page(200, br#"{"next":5,"events":[{"conv":"c","seq":4,"body":"a"},{"conv":"c","seq":5,"body":"b"}]}"#)
            .expect("a page");
        assert_eq!(items.len(), 2);
        assert_eq!(poll.since, "5");
        assert_eq!(poll.request().path, "/sync?since=5");
        let user: Table = lua.load("return { kept = {} }").eval().expect("a user");
        poll.keep(&lua, &user).expect("kept");
        let kept: Table = user.get("kept").expect("u.kept");
        assert_eq!(kept.get::<String>("since").expect("the cursor"), "5");
        for (status, body) in [
            (500, &br#"{"next":9,"events":[]}"#[..]),
            (200, b"<html>"),
            (200, br#"{"events":[]}"#),
        ] {
            assert!(poll.page(status, body).is_none(), "{status}");
            assert_eq!(poll.since, "5", "the cursor stays");
            assert_eq!(poll.pause(), Some(RETRY), "asked again later");
            assert_eq!(poll.pause(), None, "once");
        }
    }

    #[test]
    fn a_page_s_cursor_is_read_whatever_else_the_page_holds() {
        let lua = lua();
        let ud: mlua::AnyUserData = lua
            .load(format!(
                r#"{READER} return long_poll {{ path = "/sync?since=", cursor = "next_batch", items = items }}"#
            ))
            .eval()
            .expect("declared");
        let mut poll = ud.borrow::<LongPoll>().expect("a LongPoll").clone();
        let items = poll
            .page(
                200,
                br#"{"rooms":{"a":[1,{"next_batch":"no"}]},"next_batch":"s_72","events":[{"conv":"c","seq":1,"body":"a"}],"next":9}"#,
            )
            .expect("a page");
        assert_eq!(items.len(), 1);
        assert_eq!(poll.since, "s_72");
        assert_eq!(poll.request().path, "/sync?since=s_72");
        assert!(poll
            .page(200, br#"{"next_batch":null,"events":[]}"#)
            .is_none());
        assert_eq!(poll.since, "s_72", "a page without a cursor moves nothing");
    }

    #[test]
    fn a_bad_declaration_names_its_key() {
        let lua = lua();
        for (decl, want) in [
            (
                r#"path = "/s", cursor = "next", items = items, timeout = 3"#,
                "u:long_poll: `timeout` is none of method, path",
            ),
            (
                r#"path = {}, cursor = "next", items = items"#,
                "u:long_poll: `path` must be a string, not a table",
            ),
            (
                r#"path = "/s", items = items"#,
                "u:long_poll: `cursor` is required",
            ),
            (
                r#"path = "/s", cursor = "next", items = codec.json_decode"#,
                "u:long_poll: `items` must be a codec.json_items reader, not a function",
            ),
            (
                r#"path = "/s", cursor = "next", items = items, headers = "x""#,
                "u:long_poll: `headers` must be a table, not a string",
            ),
        ] {
            let e = lua
                .load(format!("{READER} return long_poll {{ {decl} }}"))
                .exec()
                .expect_err(decl);
            assert!(e.to_string().contains(want), "{decl}: {e}");
        }
    }
}
