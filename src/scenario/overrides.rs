//! `--set KEY=VALUE` overrides, applied to the parsed document before it is read into the
//! schema, so overridden values are validated exactly like written ones.
//!
//! KEY is a dotted path with array indexes (`population.users`, `traffic[1].rate`,
//! `population.arrival[0].duration`); missing tables on the way are created, array indexes
//! must exist. VALUE is parsed as a TOML value (`500`, `0.5`, `true`, `[100, 500]`,
//! `{ fraction = 0.1, at = "10s" }`, `"20s"`); when it is not valid TOML it is taken as a
//! string, so `--set traffic[0].duration=20s` works without quotes.

use std::borrow::Cow;
use std::ops::Range;

use toml::de::{DeArray, DeTable, DeValue};
use toml::Spanned;

use super::source::Source;
use crate::Result;

/// One step of a key path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seg {
    /// A table key.
    Key(String),
    /// An array index.
    Index(usize),
}

/// Applies every override of `src` to `root`, in order (a later one wins).
pub fn apply<'a>(root: &mut DeTable<'a>, src: &Source<'a>) -> Result<()> {
    for (i, o) in src.overrides.iter().enumerate() {
        let span = src.override_span(i);
        let Some((key, value)) = o.split_once('=') else {
            return Err(src.error(
                span,
                o.trim(),
                "an override is KEY=VALUE, e.g. `--set traffic[0].rate=500`",
            ));
        };
        let key = key.trim();
        let segs = parse_path(key).map_err(|m| src.error(span.clone(), key, m))?;
        let value = respan(parse_value(value.trim()), &span);
        let (first, rest) = match segs.split_first() {
            Some((Seg::Key(k), rest)) => (k, rest),
            _ => return Err(src.error(span, key, "a key path starts with a name")),
        };
        set_in_table(root, first, first, rest, value, &span)
            .map_err(|m| src.error(span.clone(), key, m))?;
    }
    Ok(())
}

/// `traffic[1].rate` → `[Key(traffic), Index(1), Key(rate)]`.
fn parse_path(key: &str) -> Result<Vec<Seg>, String> {
    let bad = || {
        format!("`{key}` is not a key path (use names, dots and [index], e.g. `traffic[0].rate`)")
    };
    let mut segs = Vec::new();
    for part in key.split('.') {
        let (name, mut idx) = part.split_once('[').map_or((part, ""), |(n, i)| (n, i));
        let valid = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
        if name.is_empty() || !name.chars().all(valid) {
            return Err(bad());
        }
        segs.push(Seg::Key(name.to_string()));
        if !idx.is_empty() {
            idx = idx.strip_suffix(']').ok_or_else(bad)?;
            for n in idx.split("][") {
                segs.push(Seg::Index(n.parse().map_err(|_| bad())?));
            }
        }
    }
    Ok(segs)
}

/// A TOML value, or the text as a string when it is not one.
fn parse_value(text: &str) -> Spanned<DeValue<'_>> {
    DeValue::parse(text)
        .unwrap_or_else(|_| Spanned::new(0..0, DeValue::String(Cow::Borrowed(text))))
}

/// Gives `v` and everything inside it the override's span.
fn respan<'a>(v: Spanned<DeValue<'a>>, span: &Range<usize>) -> Spanned<DeValue<'a>> {
    let inner = match v.into_inner() {
        DeValue::Table(t) => DeValue::Table(
            t.into_iter()
                .map(|(k, v)| (Spanned::new(span.clone(), k.into_inner()), respan(v, span)))
                .collect(),
        ),
        DeValue::Array(a) => DeValue::Array(
            a.into_iter()
                .map(|e| respan(e, span))
                .collect::<DeArray<'a>>(),
        ),
        other => other,
    };
    Spanned::new(span.clone(), inner)
}

fn set_in_table<'a>(
    t: &mut DeTable<'a>,
    path: &str,
    key: &str,
    rest: &[Seg],
    value: Spanned<DeValue<'a>>,
    span: &Range<usize>,
) -> Result<(), String> {
    let Some(next) = rest.first() else {
        t.insert(
            Spanned::new(span.clone(), Cow::Owned(key.to_string())),
            value,
        );
        return Ok(());
    };
    if t.get(key).is_none() {
        if let Seg::Index(_) = next {
            return Err(format!("there is no `{path}` array to index"));
        }
        let empty = Spanned::new(span.clone(), DeValue::Table(DeTable::new()));
        t.insert(
            Spanned::new(span.clone(), Cow::Owned(key.to_string())),
            empty,
        );
    }
    match t.get_mut(key) {
        Some(slot) => set_in_value(slot, path, rest, value, span),
        None => Err(format!("cannot set `{path}`")),
    }
}

fn set_in_value<'a>(
    slot: &mut Spanned<DeValue<'a>>,
    path: &str,
    segs: &[Seg],
    value: Spanned<DeValue<'a>>,
    span: &Range<usize>,
) -> Result<(), String> {
    let (seg, rest) = match segs.split_first() {
        Some(x) => x,
        None => {
            *slot = value;
            return Ok(());
        }
    };
    match (slot.get_mut(), seg) {
        (DeValue::Table(t), Seg::Key(k)) => {
            set_in_table(t, &format!("{path}.{k}"), k, rest, value, span)
        }
        (DeValue::Array(a), Seg::Index(i)) => {
            let len = a.len();
            match a.get_mut(*i) {
                Some(elem) => set_in_value(elem, &format!("{path}[{i}]"), rest, value, span),
                None => Err(format!(
                    "index {i} is out of range: `{path}` has {len} entries"
                )),
            }
        }
        (_, Seg::Key(k)) => Err(format!("`{path}` is not a table, so it has no key `{k}`")),
        (_, Seg::Index(_)) => Err(format!("`{path}` is not an array")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_parse() {
        assert_eq!(
            parse_path("traffic[1].rate").unwrap(),
            vec![
                Seg::Key("traffic".into()),
                Seg::Index(1),
                Seg::Key("rate".into())
            ]
        );
        assert!(parse_path("traffic[x]").is_err());
        assert!(parse_path("a..b").is_err());
        assert!(parse_path("a[1").is_err());
    }

    #[test]
    fn bare_words_become_strings() {
        assert!(matches!(parse_value("20s").get_ref(), DeValue::String(s) if s == "20s"));
        assert!(matches!(parse_value("500").get_ref(), DeValue::Integer(_)));
        assert!(matches!(parse_value("[1, 2]").get_ref(), DeValue::Array(_)));
    }
}
