//! Text from outside msgstorm, made fit to show: what servers and adapters said (error
//! examples, close reasons, protocol errors), what a scenario or a result file names
//! (peers, URLs, process names) and the notes quoting them. Every text output — the
//! terminal report and its first line, notes and findings, `report`, `compare`, `find`,
//! Markdown, the HTML pages, the CLI's error line — shows such text through this module,
//! so that it can neither control the terminal nor break a line.
//!
//! Characters that would act instead of show are written as visible escapes: C0 controls
//! and DEL as `\x1b` (`\n`, `\r`, `\t` by name), C1 controls (U+0080–U+009F) and the
//! bidirectional formatting characters (U+061C, U+200E, U+200F, U+202A–U+202E,
//! U+2066–U+2069) as `\u{202e}`, and the Unicode line and paragraph separators
//! (U+2028, U+2029) the same way. Long text is cut on a character boundary with a marker
//! saying how much of it is left out: `… (N more bytes)`.
//!
//! A backslash is left as it is, so that showing shown text again changes nothing: a
//! sentence that quotes a shown example can be shown whole, and a renderer need not know
//! whether the words layer below it showed a piece already. The data (`result.json`,
//! `--format json`'s fields other than the reasons' sentences) keeps the exact text.
//!
//! Hand-written rather than a crate: `strip-ansi-escapes` removes escape sequences instead
//! of showing them and leaves newlines and bidirectional overrides in; the standard
//! library's `escape_debug` escapes quotes and backslashes too (so text shown twice would
//! double them) and writes ESC as `\u{1b}`. Neither cuts.
//!
//! A leaf: it imports nothing of the crate, so every renderer may use it.

use std::borrow::Cow;
use std::fmt::Write;

/// The most bytes a quoted piece of outside text (an error's example, a delivery
/// problem's detail, a name) takes once shown, the cut's marker included.
pub const QUOTE_MAX: usize = 400;

/// The most bytes a whole line that carries outside text (a note, a check's reason, an
/// error message) takes once shown, the cut's marker included.
pub const LINE_MAX: usize = 2000;

/// Whether `c` is shown as an escape rather than as itself: a control character (C0,
/// DEL, C1), a bidirectional formatting character, or a line or paragraph separator.
pub fn is_hidden(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061C}'
                | '\u{200E}'
                | '\u{200F}'
                | '\u{202A}'..='\u{202E}'
                | '\u{2066}'..='\u{2069}'
                | '\u{2028}'
                | '\u{2029}'
        )
}

/// A piece of outside text quoted in msgstorm's words, shown on one line and cut at
/// [`QUOTE_MAX`] bytes.
pub fn quote(s: &str) -> Cow<'_, str> {
    cut(s, QUOTE_MAX)
}

/// A whole line that carries outside text, shown on one line and cut at [`LINE_MAX`]
/// bytes.
pub fn line(s: &str) -> Cow<'_, str> {
    cut(s, LINE_MAX)
}

/// `s` with every [hidden](is_hidden) character escaped, cut to at most `max` bytes
/// (marker included) when longer; `s` itself when it has neither.
pub fn cut(s: &str, max: usize) -> Cow<'_, str> {
    if s.len() <= max && !s.chars().any(is_hidden) {
        return Cow::Borrowed(s);
    }
    let whole = escape(s);
    if whole.len() <= max {
        return Cow::Owned(whole);
    }
    // Room for the longest marker this text can need: the count is at most `s.len()`.
    let room = max.saturating_sub(marker(s.len()).len());
    let mut out = String::with_capacity(max);
    let mut shown = 0;
    let mut one = String::new();
    for (i, c) in s.char_indices() {
        one.clear();
        push(&mut one, c);
        if out.len() + one.len() > room {
            break;
        }
        out.push_str(&one);
        shown = i + c.len_utf8();
    }
    out.push_str(&marker(s.len() - shown));
    Cow::Owned(out)
}

/// `s` with every hidden character escaped, not cut.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        push(&mut out, c);
    }
    out
}

/// Appends `c` as shown: itself, or its escape.
fn push(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if !is_hidden(c) => out.push(c),
        c if c.is_ascii() => {
            let _ = write!(out, "\\x{:02x}", u32::from(c));
        }
        c => {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        }
    }
}

/// What stands for the `left` bytes a cut left out.
fn marker(left: usize) -> String {
    format!("… ({left} more bytes)")
}

/// Text as a hostile peer would send it, for the property tests of every renderer: any
/// characters, with controls, escape sequences, bidirectional overrides and line breaks
/// much more often than chance would give them.
#[cfg(test)]
pub(crate) fn text() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    let hostile = prop_oneof![
        Just("\x1b[2J".to_owned()),
        Just("\x1b]0;pwned\x07".to_owned()),
        Just("\x1b]52;c;cHduZWQ=\x07".to_owned()),
        Just("\x1b]8;;http://x\x1b\\".to_owned()),
        Just("\n".to_owned()),
        Just("\r".to_owned()),
        Just("\u{9b}".to_owned()),
        Just("\u{202e}".to_owned()),
        Just("\u{2066}".to_owned()),
        Just("\u{2028}".to_owned()),
        Just("|`*_<b>&".to_owned()),
        (0u32..0x20).prop_map(|c| char::from_u32(c).map(String::from).unwrap_or_default()),
        (0x7fu32..0xa0).prop_map(|c| char::from_u32(c).map(String::from).unwrap_or_default()),
    ];
    let piece = prop_oneof![
        2 => any::<char>().prop_map(String::from),
        2 => "[a-z ]{1,8}",
        1 => hostile,
    ];
    proptest::collection::vec(piece, 1..40).prop_map(|v| v.concat())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The issue's hostile server text.
    const HOSTILE: &str = "bad\x1b[2J\x1b]0;pwned\x07 frame\n\rSECOND LINE";

    #[test]
    fn controls_and_newlines_show_as_escapes() {
        assert_eq!(
            quote(HOSTILE),
            "bad\\x1b[2J\\x1b]0;pwned\\x07 frame\\n\\rSECOND LINE"
        );
        assert_eq!(quote("a\tb\0c\x7f"), "a\\tb\\x00c\\x7f");
        // C1 (CSI, NEL), bidirectional overrides and isolates, line separators.
        assert_eq!(
            quote("\u{9b}2J\u{85}x\u{202e}evil\u{2066}\u{200f}\u{61c}\u{2028}"),
            "\\u{9b}2J\\u{85}x\\u{202e}evil\\u{2066}\\u{200f}\\u{61c}\\u{2028}"
        );
    }

    #[test]
    fn plain_text_is_left_alone_and_not_copied() {
        for s in ["", "login refused: bad_token", "ünïcödé → ok", "a \\x1b b"] {
            assert!(matches!(quote(s), Cow::Borrowed(b) if b == s), "{s}");
        }
    }

    #[test]
    fn long_text_is_cut_with_a_marker_on_a_char_boundary() {
        let long = "é".repeat(300);
        let shown = quote(&long);
        assert!(shown.len() <= QUOTE_MAX, "{}", shown.len());
        assert!(shown.ends_with(" more bytes)"), "{shown}");
        let kept = shown.split('…').next().unwrap_or_default();
        let left: usize = shown
            .rsplit('(')
            .next()
            .and_then(|s| s.split(' ').next())
            .and_then(|n| n.parse().ok())
            .expect("a count");
        assert_eq!(kept.len() + left, long.len(), "{shown}");
        // Escapes are never cut in half either.
        let escapes = "\x1b".repeat(500);
        let shown = quote(&escapes);
        let kept = shown.split('…').next().unwrap_or_default();
        assert_eq!(kept.len() % 4, 0, "{shown}");
        assert!(kept.chars().all(|c| "\\x1b".contains(c)));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Whatever the text: nothing hidden is left, the limit holds, showing again
        /// changes nothing, and text without anything to escape or cut is kept.
        #[test]
        fn shown_text_is_one_safe_line(s in text(), max in 40usize..600) {
            let shown = cut(&s, max);
            prop_assert!(!shown.chars().any(is_hidden), "{:?}", shown);
            prop_assert!(shown.len() <= max, "{} > {max}", shown.len());
            prop_assert_eq!(cut(&shown, max), shown.clone());
            if s.len() <= max && !s.chars().any(is_hidden) {
                prop_assert_eq!(shown, Cow::Borrowed(s.as_str()));
            }
        }
    }
}
