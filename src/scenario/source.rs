//! Where a value came from, and how to say so: byte spans → `file:line`, spans → dotted
//! key paths, and TOML/serde errors rewritten into `FILE:LINE: KEY: what is wrong`.
//!
//! Values set by `--set` overrides carry synthetic spans past the end of the text
//! (override `i` has span `len + 1 + i`), so every error about them names the override
//! instead of a line.

use std::ops::Range;
use std::path::Path;

use toml::de::{DeTable, DeValue};
use toml::Spanned;

use crate::Error;

/// The text being parsed, its file and its overrides.
pub struct Source<'a> {
    /// The scenario file (only used in messages).
    pub file: &'a Path,
    /// Its text.
    pub text: &'a str,
    /// The `--set KEY=VALUE` overrides.
    pub overrides: &'a [String],
}

impl Source<'_> {
    /// The synthetic span given to everything override `i` sets.
    pub fn override_span(&self, i: usize) -> Range<usize> {
        let at = self.text.len() + 1 + i;
        at..at + 1
    }

    /// A scenario error at `span`.
    pub fn error(
        &self,
        span: Range<usize>,
        key: impl Into<String>,
        msg: impl Into<String>,
    ) -> Error {
        let (key, msg) = (key.into(), msg.into());
        match span.start.checked_sub(self.text.len() + 1) {
            Some(i) => Error::Scenario {
                file: "--set".into(),
                line: 0,
                key,
                msg: match self.overrides.get(i) {
                    Some(o) if o.chars().count() > 120 => {
                        let head: String = o.chars().take(100).collect();
                        format!("{msg} (from `--set {head}…`)")
                    }
                    Some(o) => format!("{msg} (from `--set {o}`)"),
                    None => msg,
                },
            },
            None => Error::Scenario {
                file: self.file.to_path_buf(),
                line: line_of(self.text, span.start),
                key,
                msg,
            },
        }
    }

    /// A scenario error about a spanned value.
    pub fn at<T>(
        &self,
        value: &Spanned<T>,
        key: impl Into<String>,
        msg: impl Into<String>,
    ) -> Error {
        self.error(value.span(), key, msg)
    }

    /// Checks spanned value `v` with `check` (a parser of `values`); a complaint names `key`
    /// at the value's line.
    pub fn value<T: Copy, U>(
        &self,
        v: &Spanned<T>,
        key: impl Into<String>,
        check: impl FnOnce(T) -> Result<U, String>,
    ) -> Result<U, Error> {
        check(*v.get_ref()).map_err(|msg| self.at(v, key, msg))
    }

    /// Rewrites a TOML syntax error (no tree yet).
    pub fn syntax_error(&self, e: &toml::de::Error) -> Error {
        let span = e.span().unwrap_or(0..0);
        let msg = e.message().trim();
        if msg == "duplicate key" {
            let key = self.text.get(span.clone()).unwrap_or("").trim().to_string();
            let path = duplicate_path(self.text, &span).unwrap_or_else(|| key.clone());
            return self.error(span, path, format!("duplicate key `{key}`: set it once"));
        }
        self.error(span, "syntax", format!("TOML syntax: {msg}"))
    }

    /// Rewrites a serde error raised while reading `root` into the schema; `keys_at` gives
    /// the keys a table at a dotted path may hold, when they depend on its contents.
    pub fn schema_error(
        &self,
        root: &DeTable<'_>,
        e: &toml::de::Error,
        keys_at: impl Fn(&str) -> Option<Vec<&'static str>>,
    ) -> Error {
        let span = e.span().unwrap_or(0..0);
        let path = find_path(root, &span).unwrap_or_default();
        let msg = e.message().trim();
        let ticked = backticked(msg);
        if let Some(rest) = msg.strip_prefix("missing field ") {
            let field = ticked.first().map_or(rest, |s| s.as_str());
            let key = join(&path, field);
            return self.error(span, key, format!("missing required key `{field}`"));
        }
        let text = if msg.starts_with("unknown field ") {
            let parent = path.rsplit_once('.').map_or("", |(p, _)| p);
            match (keys_at(parent), ticked.first()) {
                (Some(keys), Some(word)) => unknown_among("key", word, &keys),
                _ => unknown("key", &ticked),
            }
        } else if msg.starts_with("unknown variant ") {
            unknown("value", &ticked)
        } else if msg.contains(" as i128") || msg.contains(" as u128") {
            let n = ticked.first().map_or("", |s| s.as_str());
            format!("integer `{n}` is out of range")
        } else if let Some(rest) = msg.strip_prefix("invalid type: ") {
            match rest.rsplit_once(", expected ") {
                Some((got, want)) => {
                    format!("wrong type: expected {}, got {}", noun(want), short(got))
                }
                None => format!("wrong type: {rest}"),
            }
        } else {
            msg.to_string()
        };
        self.error(span, path, text)
    }
}

/// The text of a scenario file, or an error at the line of its first byte that is not
/// UTF-8 (TOML is UTF-8 text).
pub fn decode(file: &Path, bytes: Vec<u8>) -> Result<String, Error> {
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let bytes = e.as_bytes();
        let line_start = bytes[..at]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        Error::Scenario {
            file: file.to_path_buf(),
            line: 1 + bytes[..at].iter().filter(|&&b| b == b'\n').count(),
            key: "encoding".into(),
            msg: format!(
                "byte 0x{:02X} at column {} is not UTF-8; a scenario file is UTF-8 text",
                bytes[at],
                at - line_start + 1
            ),
        }
    })
}

/// 1-based line of byte `at` in `text`.
pub fn line_of(text: &str, at: usize) -> usize {
    let at = at.min(text.len());
    1 + text.as_bytes()[..at]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
}

/// The full dotted path (`traffic[1].rate`, `target.mqtt.qos`) of the duplicated key at
/// `span` in `text`, which TOML reports by its last segment only. The key is renamed to a
/// name the text does not use (and so is every later duplicate), the text parsed again,
/// and the renamed key looked up in the tree. `None` when the text has other errors.
fn duplicate_path(text: &str, span: &Range<usize>) -> Option<String> {
    let key = text.get(span.clone())?;
    let fresh = |i: usize| format!("msgstorm-duplicate-{i}");
    if (0..64).any(|i| text.contains(&fresh(i))) {
        return None;
    }
    let mut edited = text.to_string();
    edited.replace_range(span.clone(), &fresh(0));
    for i in 1..64 {
        match DeTable::parse(&edited) {
            Ok(root) => {
                let renamed = span.start..span.start + fresh(0).len();
                let path = find_path(root.get_ref(), &renamed)?;
                let parent = path.strip_suffix(&fresh(0))?;
                return Some(format!("{parent}{key}"));
            }
            Err(e) if e.message().trim() == "duplicate key" => {
                let later = e.span()?;
                if later.start <= span.start {
                    return None;
                }
                edited.replace_range(later, &fresh(i));
            }
            Err(_) => return None,
        }
    }
    None
}

/// `prefix.key`, or `key` at the root.
pub fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

/// "unknown key `x`; did you mean `y`? allowed: a, b" from `[x, a, b, …]`.
pub fn unknown(what: &str, ticked: &[String]) -> String {
    let Some((word, allowed)) = ticked.split_first() else {
        return format!("unknown {what}");
    };
    let allowed: Vec<&str> = allowed.iter().map(String::as_str).collect();
    unknown_among(what, word, &allowed)
}

/// "unknown key `word`; did you mean `y`? allowed: a, b".
pub fn unknown_among(what: &str, word: &str, allowed: &[&str]) -> String {
    let mut msg = format!("unknown {what} `{word}`");
    if let Some(best) = did_you_mean(word, allowed) {
        msg.push_str(&format!("; did you mean `{best}`?"));
    }
    if allowed.is_empty() {
        msg.push_str("; this table takes no keys");
    } else {
        msg.push_str(&format!(" allowed: {}", allowed.join(", ")));
        if !msg.contains('?') {
            msg = msg.replacen(" allowed:", "; allowed:", 1);
        }
    }
    msg
}

/// The allowed word closest to `word`, if it is close enough to be a typo.
pub fn did_you_mean<'a>(word: &str, allowed: &[&'a str]) -> Option<&'a str> {
    allowed
        .iter()
        .map(|a| (edit_distance(word, a), *a))
        .filter(|(d, a)| *d <= 2.max(a.len() / 3) && *d < a.len().max(word.len()))
        .min_by_key(|(d, _)| *d)
        .map(|(_, a)| a)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// The `backticked` words of a serde message, in order.
fn backticked(msg: &str) -> Vec<String> {
    msg.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// A serde "got …" phrase with a float written as people read it (`1e-300`, not three
/// hundred zeros).
fn short(got: &str) -> String {
    let float = got
        .strip_prefix("floating point `")
        .and_then(|r| r.strip_suffix('`'))
        .and_then(|x| x.parse::<f64>().ok());
    match float {
        Some(x) if x != 0.0 && x.is_finite() && !(1e-4..1e15).contains(&x.abs()) => {
            format!("floating point `{x:e}`")
        }
        _ => got.to_string(),
    }
}

/// A serde "expected …" phrase in scenario words.
fn noun(want: &str) -> String {
    match want {
        "i64" | "u64" | "i32" | "u32" | "usize" => "an integer".into(),
        "f64" | "f32" => "a number".into(),
        "a sequence" => "an array".into(),
        "a map" => "a table".into(),
        w if w.starts_with("struct ") => "a table".into(),
        w if w.starts_with("enum ") => "a string".into(),
        w => w.into(),
    }
}

/// The dotted path (`traffic[1].rate`) of the deepest key or value whose span is `span`.
pub fn find_path(root: &DeTable<'_>, span: &Range<usize>) -> Option<String> {
    let mut best = None;
    search_table(root, span, "", 0, &mut best);
    best.map(|(_, path)| path)
}

type Best = Option<(usize, String)>;

fn consider(best: &mut Best, depth: usize, path: &str) {
    if best.as_ref().is_none_or(|(d, _)| depth > *d) {
        *best = Some((depth, path.to_string()));
    }
}

fn search_table(t: &DeTable<'_>, span: &Range<usize>, prefix: &str, depth: usize, best: &mut Best) {
    for (k, v) in t.iter() {
        let path = join(prefix, k.get_ref());
        if k.span() == *span || v.span() == *span {
            consider(best, depth, &path);
        }
        search_value(v, span, &path, depth + 1, best);
    }
}

fn search_value(
    v: &Spanned<DeValue<'_>>,
    span: &Range<usize>,
    path: &str,
    depth: usize,
    best: &mut Best,
) {
    match v.get_ref() {
        DeValue::Table(t) => search_table(t, span, path, depth, best),
        DeValue::Array(a) => {
            for (i, e) in a.iter().enumerate() {
                let p = format!("{path}[{i}]");
                if e.span() == *span {
                    consider(best, depth, &p);
                }
                search_value(e, span, &p, depth + 1, best);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_one_based() {
        assert_eq!(line_of("a\nb\nc", 0), 1);
        assert_eq!(line_of("a\nb\nc", 2), 2);
        assert_eq!(line_of("a\nb\nc", 99), 3);
    }

    #[test]
    fn suggestions_catch_typos_only() {
        assert_eq!(did_you_mean("rat", &["rate", "size"]), Some("rate"));
        assert_eq!(
            did_you_mean("sendrs", &["senders", "size"]),
            Some("senders")
        );
        assert_eq!(did_you_mean("zzzzzz", &["rate", "size"]), None);
    }

    #[test]
    fn unknown_lists_allowed() {
        let m = unknown_among("key", "rat", &["rate", "size"]);
        assert_eq!(
            m,
            "unknown key `rat`; did you mean `rate`? allowed: rate, size"
        );
        let m = unknown_among("key", "q", &["rate"]);
        assert_eq!(m, "unknown key `q`; allowed: rate");
    }
}
