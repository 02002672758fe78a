//! JSON paths of the scenario-described protocols (`push.pub.data`, `msgs.0.body`,
//! `data.@json.body`; `[target.ws-json]`, `[target.socketio]`) and the conditions built on
//! them, walked over a borrowed parse of a frame.
//!
//! A frame is checked once as JSON ([`parse`]); each path then scans only the values on its
//! way, borrowing keys and values from the frame: matching a frame allocates nothing unless
//! a path crosses `@json` (a JSON document inside a string, which must be unescaped first).
//! Hand-written because JSON-pointer crates walk an owned `serde_json::Value`, which is one
//! allocation per value of every frame.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserializer as _;
use serde_json::value::RawValue;

/// One step of a path.
#[derive(Debug, Clone, PartialEq)]
enum Seg {
    /// A key of an object.
    Key(String),
    /// An element of an array (or, in an object, the key spelled as this number).
    Index(usize, String),
    /// The string here holds a JSON document: continue inside it.
    Json,
}

/// A compiled path: dot-separated keys, array indices and `@json`.
#[derive(Debug, Clone, PartialEq)]
pub struct Path {
    text: String,
    segs: Vec<Seg>,
    /// Where a [`Frame`] keeps the value under this path's first key (see [`Index`]).
    slot: Option<usize>,
}

impl Path {
    /// Compiles `text`; the error says what is wrong with it.
    pub fn parse(text: &str) -> Result<Path, String> {
        if text.is_empty() {
            return Err("an empty path; name a key, as in `data.body`".to_owned());
        }
        let mut segs = Vec::new();
        for part in text.split('.') {
            let seg = match part {
                "" => {
                    return Err(format!(
                        "`{text}` has an empty step (two dots, or a dot at an end)"
                    ))
                }
                "@json" => Seg::Json,
                p if p.starts_with('@') => {
                    return Err(format!("`{p}` in `{text}`: the only `@` step is `@json`"))
                }
                p if p.bytes().all(|b| b.is_ascii_digit()) => match p.parse() {
                    Ok(i) => Seg::Index(i, p.to_owned()),
                    Err(_) => return Err(format!("index `{p}` in `{text}` is too large")),
                },
                p => Seg::Key(p.to_owned()),
            };
            segs.push(seg);
        }
        if segs.last() == Some(&Seg::Json) {
            return Err(format!(
                "`{text}` ends with `@json`; name the value inside, as in `data.@json.body`"
            ));
        }
        Ok(Path {
            text: text.to_owned(),
            segs,
            slot: None,
        })
    }

    /// The path without its last step: the value that holds this one (`None` for a path
    /// of one step, held by the whole document).
    pub fn parent(&self) -> Option<Path> {
        let (_, init) = self.segs.split_last()?;
        if init.is_empty() {
            return None;
        }
        let cut = self.text.rfind('.').unwrap_or(0);
        Some(Path {
            text: self.text[..cut].to_owned(),
            segs: init.to_vec(),
            slot: None,
        })
    }

    /// Calls `f` with the value at this path in `doc` (`None` when it is not there).
    pub fn with<D: Doc + ?Sized, R>(&self, doc: &D, f: impl FnOnce(Option<&RawValue>) -> R) -> R {
        doc.walk(self, f)
    }

    /// Calls `f` with the elements of the array at this path: `None` when nothing is there,
    /// `Some(None)` when it is not an array.
    pub fn with_items<R>(
        &self,
        root: &RawValue,
        f: impl FnOnce(Option<Option<&[&RawValue]>>) -> R,
    ) -> R {
        self.with(root, |v| match v {
            None => f(None),
            Some(v) => {
                let items = serde_json::from_str::<Vec<&RawValue>>(v.get()).ok();
                f(Some(items.as_deref()))
            }
        })
    }

    /// The string at this path, unescaped.
    pub fn string<D: Doc + ?Sized>(&self, root: &D) -> Option<String> {
        self.with(root, |v| v.and_then(as_str).map(Cow::into_owned))
    }

    /// The unsigned number (or string of digits) at this path.
    pub fn u64<D: Doc + ?Sized>(&self, root: &D) -> Option<u64> {
        self.with(root, |v| v.and_then(as_u64))
    }

    /// Whether there is a value (even `null`) at this path.
    pub fn exists<D: Doc + ?Sized>(&self, root: &D) -> bool {
        self.with(root, |v| v.is_some())
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// A parsed document that paths can be walked in.
pub trait Doc {
    /// Calls `f` with the value at `path` (`None` when it is not there).
    fn walk<R>(&self, path: &Path, f: impl FnOnce(Option<&RawValue>) -> R) -> R;
}

impl Doc for RawValue {
    fn walk<R>(&self, path: &Path, f: impl FnOnce(Option<&RawValue>) -> R) -> R {
        walk(self, &path.segs, f)
    }
}

impl<T: Doc + ?Sized> Doc for &T {
    fn walk<R>(&self, path: &Path, f: impl FnOnce(Option<&RawValue>) -> R) -> R {
        (**self).walk(path, f)
    }
}

/// The most top-level keys a [`Frame`] indexes.
const MAX_SLOTS: usize = 16;

/// The top-level keys that the paths of a set of rules start with, each given a slot, so
/// that one pass over a frame finds all of them ([`Frame`]) instead of one pass per path.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Index {
    keys: Vec<String>,
}

impl Index {
    /// Gives `path`'s first key a slot (a path starting with `@json`, or past
    /// [`MAX_SLOTS`] keys, keeps walking from the root).
    pub fn add(&mut self, path: &mut Path) {
        let key = match path.segs.first() {
            Some(Seg::Key(k) | Seg::Index(_, k)) => k,
            _ => return,
        };
        path.slot = match self.keys.iter().position(|k| k == key) {
            Some(i) => Some(i),
            None if self.keys.len() < MAX_SLOTS => {
                self.keys.push(key.clone());
                Some(self.keys.len() - 1)
            }
            None => None,
        };
    }
}

/// A frame with the values under its indexed top-level keys found in one pass.
#[derive(Debug)]
pub struct Frame<'a> {
    root: &'a RawValue,
    /// `None` when the frame is not an object (paths then walk from the root).
    top: Option<[Option<&'a RawValue>; MAX_SLOTS]>,
}

impl<'a> Frame<'a> {
    /// Indexes `root` by the keys of `index`.
    pub fn new(root: &'a RawValue, index: &Index) -> Frame<'a> {
        let top = if index.keys.is_empty() {
            None
        } else {
            let mut de = serde_json::Deserializer::from_str(root.get());
            de.deserialize_any(Top(&index.keys)).ok().flatten()
        };
        Frame { root, top }
    }
}

impl Doc for Frame<'_> {
    fn walk<R>(&self, path: &Path, f: impl FnOnce(Option<&RawValue>) -> R) -> R {
        match (path.slot, &self.top) {
            (Some(i), Some(top)) => match top[i] {
                Some(v) => walk(v, &path.segs[1..], f),
                None => f(None),
            },
            _ => walk(self.root, &path.segs, f),
        }
    }
}

/// One pass over a top-level object, keeping the value of each indexed key.
struct Top<'k>(&'k [String]);

impl<'de> Visitor<'de> for Top<'_> {
    type Value = Option<[Option<&'de RawValue>; MAX_SLOTS]>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut top = [None; MAX_SLOTS];
        while let Some(slot) = map.next_key_seed(KeySlot(self.0))? {
            match slot {
                Some(i) if top[i].is_none() => top[i] = Some(map.next_value::<&RawValue>()?),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Some(top))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
}

/// Reads an object key and returns its slot among the indexed keys, without allocating.
struct KeySlot<'k>(&'k [String]);

impl<'de> DeserializeSeed<'de> for KeySlot<'_> {
    type Value = Option<usize>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Option<usize>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySlot<'_> {
    type Value = Option<usize>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Option<usize>, E> {
        Ok(self.0.iter().position(|k| k == v))
    }
}

/// Checks that `text` is one JSON value and returns it, borrowed.
pub fn parse(text: &str) -> Result<&RawValue, serde_json::Error> {
    serde_json::from_str(text)
}

fn walk<R>(raw: &RawValue, segs: &[Seg], f: impl FnOnce(Option<&RawValue>) -> R) -> R {
    let Some((first, rest)) = segs.split_first() else {
        return f(Some(raw));
    };
    if *first == Seg::Json {
        let Some(inner) = as_str(raw) else {
            return f(None);
        };
        return match parse(&inner) {
            Ok(doc) => walk(doc, rest, f),
            Err(_) => f(None),
        };
    }
    let mut de = serde_json::Deserializer::from_str(raw.get());
    match de.deserialize_any(Step(first)) {
        Ok(Some(next)) => walk(next, rest, f),
        _ => f(None),
    }
}

/// The string value of `raw` (borrowed unless it has escapes), `None` for other types.
pub fn as_str(raw: &RawValue) -> Option<Cow<'_, str>> {
    let text = raw.get().trim();
    if !text.starts_with('"') {
        return None;
    }
    match serde_json::from_str::<&str>(text) {
        Ok(s) => Some(Cow::Borrowed(s)),
        Err(_) => serde_json::from_str::<String>(text).ok().map(Cow::Owned),
    }
}

/// An unsigned integer, written as a number or as a string of digits.
pub fn as_u64(raw: &RawValue) -> Option<u64> {
    let text = raw.get().trim();
    text.strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .unwrap_or(text)
        .parse()
        .ok()
}

/// Takes one step into a borrowed value: the value under a key or at an index.
struct Step<'s>(&'s Seg);

impl<'de> Visitor<'de> for Step<'_> {
    type Value = Option<&'de RawValue>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let key = match self.0 {
            Seg::Key(k) | Seg::Index(_, k) => Some(k.as_str()),
            Seg::Json => None,
        };
        let mut found = None;
        while let Some(hit) = map.next_key_seed(KeyIs(key))? {
            if hit && found.is_none() {
                found = Some(map.next_value::<&RawValue>()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let want = match self.0 {
            Seg::Index(i, _) => Some(*i),
            _ => None,
        };
        let mut found = None;
        let mut i = 0;
        loop {
            if Some(i) == want {
                match seq.next_element::<&RawValue>()? {
                    Some(v) => found = Some(v),
                    None => break,
                }
            } else if seq.next_element::<IgnoredAny>()?.is_none() {
                break;
            }
            i += 1;
        }
        Ok(found)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
}

/// Reads an object key and says whether it is the one wanted, without allocating.
struct KeyIs<'k>(Option<&'k str>);

impl<'de> DeserializeSeed<'de> for KeyIs<'_> {
    type Value = bool;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeyIs<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<bool, E> {
        Ok(self.0 == Some(v))
    }
}

/// A value a condition expects, from the scenario.
#[derive(Debug, Clone, PartialEq)]
pub enum Want {
    /// A string.
    Str(String),
    /// An integer (also matches the same number written as a float).
    Int(i64),
    /// A float.
    Float(f64),
    /// `true` or `false`.
    Bool(bool),
}

impl Want {
    /// Whether `raw` is this value.
    pub fn matches(&self, raw: &RawValue) -> bool {
        let text = raw.get().trim();
        match self {
            Want::Str(s) => as_str(raw).is_some_and(|v| v == s.as_str()),
            Want::Int(i) => {
                text.parse::<i64>().ok() == Some(*i) || text.parse::<f64>().ok() == Some(*i as f64)
            }
            Want::Float(x) => text.parse::<f64>().ok() == Some(*x),
            Want::Bool(b) => text == if *b { "true" } else { "false" },
        }
    }
}

/// Which frames a rule applies to: every `when` path holds its value, every `has` path is
/// there, and the frame is `text` exactly when that is given.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Matcher {
    /// Paths and the values they must hold.
    pub when: Vec<(Path, Want)>,
    /// Paths that must be present.
    pub has: Vec<Path>,
    /// The whole frame, exactly (surrounding white space aside).
    pub text: Option<String>,
}

impl Matcher {
    /// Whether this matcher has no condition (it would match every frame).
    pub fn is_empty(&self) -> bool {
        self.when.is_empty() && self.has.is_empty() && self.text.is_none()
    }

    /// Whether this matcher has only a `text` condition and `text` is it: such rules apply
    /// to frames that are not JSON too (`#1`, an empty frame).
    pub fn matches_text(&self, text: &str) -> bool {
        self.when.is_empty() && self.has.is_empty() && self.text.as_deref() == Some(text.trim())
    }

    /// Whether the frame `text`, parsed as `root`, matches.
    pub fn matches<D: Doc + ?Sized>(&self, text: &str, root: &D) -> bool {
        self.text.as_deref().is_none_or(|t| t == text.trim())
            && self.has.iter().all(|p| p.exists(root))
            && self
                .when
                .iter()
                .all(|(p, want)| p.with(root, |v| v.is_some_and(|v| want.matches(v))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(path: &str, doc: &str) -> Option<String> {
        let root = parse(doc).expect("json");
        Path::parse(path)
            .expect("path")
            .with(root, |v| v.map(|v| v.get().to_owned()))
    }

    #[test]
    fn paths_walk_objects_arrays_and_json_strings() {
        let doc = r#"{"a":{"b":[1,{"c":"x\"y"}]},"s":"{\"k\":{\"v\":7}}","1":"one"}"#;
        assert_eq!(at("a.b.0", doc).as_deref(), Some("1"));
        assert_eq!(at("a.b.1.c", doc).as_deref(), Some(r#""x\"y""#));
        assert_eq!(at("s.@json.k.v", doc).as_deref(), Some("7"));
        assert_eq!(at("1", doc).as_deref(), Some(r#""one""#));
        assert_eq!(at("a.b.2", doc), None);
        assert_eq!(at("a.x", doc), None);
        assert_eq!(at("a.b.1.c.d", doc), None);
        let root = parse(doc).expect("json");
        let c = Path::parse("a.b.1.c").expect("path");
        assert_eq!(c.string(root).as_deref(), Some("x\"y"));
        assert_eq!(Path::parse("s.@json.k.v").expect("p").u64(root), Some(7));
    }

    #[test]
    fn a_path_knows_the_value_holding_it() {
        let p = |s: &str| Path::parse(s).expect("path");
        assert_eq!(p("history.publications").parent(), Some(p("history")));
        assert_eq!(p("a.@json.b.0").parent(), Some(p("a.@json.b")));
        assert_eq!(p("msgs").parent(), None);
    }

    #[test]
    fn bad_paths_are_refused() {
        assert!(Path::parse("").is_err());
        assert!(Path::parse("a..b").is_err());
        assert!(Path::parse("a.@xml").is_err());
        assert!(Path::parse("a.@json").is_err());
        assert!(Path::parse("a.99999999999999999999999").is_err());
    }

    #[test]
    fn matchers_compare_values_and_presence() {
        let doc = r#"{"type":"ack","ref":"12","n":2.0,"ok":true,"e":{}}"#;
        let root = parse(doc).expect("json");
        let p = |s: &str| Path::parse(s).expect("path");
        let m = Matcher {
            when: vec![
                (p("type"), Want::Str("ack".into())),
                (p("n"), Want::Int(2)),
                (p("ok"), Want::Bool(true)),
            ],
            has: vec![p("e")],
            text: None,
        };
        assert!(m.matches(doc, root));
        assert_eq!(p("ref").u64(root), Some(12));
        let other = Matcher {
            when: vec![(p("type"), Want::Str("msg".into()))],
            ..Matcher::default()
        };
        assert!(!other.matches(doc, root));
        let empty = Matcher {
            text: Some("{}".into()),
            ..Matcher::default()
        };
        assert!(empty.matches(" {} ", parse("{}").expect("json")));
        assert!(!empty.matches(doc, root));
    }
}

#[cfg(test)]
mod frame_tests {
    use super::*;

    /// Paths walked from a one-pass index of the top-level keys find what a walk from the
    /// root finds, for objects, arrays, `@json` and keys beyond the index.
    #[test]
    fn indexed_frames_find_what_walks_find() {
        let texts = [
            "type",
            "a.b.1.c",
            "s.@json.k.v",
            "missing",
            "a.x",
            "0",
            "1",
            "type.deeper",
        ];
        let mut paths: Vec<Path> = texts
            .iter()
            .map(|t| Path::parse(t).expect("path"))
            .collect();
        let mut index = Index::default();
        paths.iter_mut().for_each(|p| index.add(p));
        for doc in [
            r#"{"type":"msg","a":{"b":[1,{"c":"x"}]},"s":"{\"k\":{\"v\":7}}","1":"one","type":"second"}"#,
            r#"[{"type":"x"},"y"]"#,
            r#""a string""#,
            "{}",
        ] {
            let root = parse(doc).expect("json");
            let frame = Frame::new(root, &index);
            for p in &paths {
                let direct = p.with(root, |v| v.map(|v| v.get().to_owned()));
                let indexed = p.with(&frame, |v| v.map(|v| v.get().to_owned()));
                assert_eq!(direct, indexed, "{p} in {doc}");
            }
        }
    }
}
