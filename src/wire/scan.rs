//! Reading a push or an ack exactly as the reference server spells it, without a JSON
//! parser: the fast path of [`Hot::parse`](super::Hot::parse).
//!
//! Written by hand because a load generator reads one of these frames per delivery, and
//! serde_json (even borrowing, through [`MsgRef`]) spends about 2,700 instructions on a
//! 200-byte push: matching each key, a visitor per field, strings checked byte by byte.
//! No crate reads a fixed JSON spelling. The server writes both frames with serde_json
//! from [`ServerFrame`](super::ServerFrame): the fields in declaration order after the
//! tag, no spaces, unsigned integers in plain decimal, and strings escaped only where
//! JSON requires it (`"`, `\`, control characters). This reads exactly that and nothing
//! else: any other spelling — a space, another key order, an escape inside a string, a
//! number that is not a plain `u64` — gives `None`, and the caller reads the frame with
//! serde_json instead. So a frame is never read differently, only faster (the
//! `scanner_agrees_with_serde_json` property test below holds it to that).

use std::borrow::Cow;

use super::{AckRef, MsgRef};

/// The rest of a push after `{"type":"msg",`, read as the server writes it.
pub(super) fn msg(rest: &str) -> Option<MsgRef<'_>> {
    let mut s = Scan { rest };
    s.lit("\"conv\":\"")?;
    let conv = s.string()?;
    s.lit(",\"seq\":")?;
    let seq = s.number()?;
    s.lit(",\"from\":\"")?;
    let from = s.string()?;
    s.lit(",\"body\":\"")?;
    let body = s.string()?;
    s.lit(",\"ts\":")?;
    let ts = s.number()?;
    s.end()?;
    Some(MsgRef {
        conv: Cow::Borrowed(conv),
        seq,
        from: Cow::Borrowed(from),
        body: Cow::Borrowed(body),
        ts,
    })
}

/// The rest of an ack after `{"type":"ack",`, read as the server writes it.
pub(super) fn ack(rest: &str) -> Option<AckRef<'_>> {
    let mut s = Scan { rest };
    s.lit("\"ref\":")?;
    let r#ref = s.number()?;
    s.lit(",\"conv\":\"")?;
    let conv = s.string()?;
    s.lit(",\"seq\":")?;
    let seq = s.number()?;
    s.lit(",\"ts\":")?;
    let ts = s.number()?;
    s.end()?;
    Some(AckRef {
        r#ref,
        conv: Cow::Borrowed(conv),
        seq,
        ts,
    })
}

/// What is left of a frame to read.
struct Scan<'a> {
    rest: &'a str,
}

impl<'a> Scan<'a> {
    /// Exactly `lit` next.
    fn lit(&mut self, lit: &str) -> Option<()> {
        self.rest = self.rest.strip_prefix(lit)?;
        Some(())
    }

    /// The characters of a string up to its closing quote (the opening one was part of
    /// the literal before it), when it holds no escape and no control character.
    fn string(&mut self) -> Option<&'a str> {
        let bytes = self.rest.as_bytes();
        let end = memchr::memchr2(b'"', b'\\', bytes)?;
        // Both are ASCII, so `end` is a character boundary.
        let (text, after) = self.rest.split_at(end);
        // Counted without an early exit so that it compiles to a few vector steps.
        let controls = text.bytes().fold(0u8, |n, b| n | u8::from(b < 0x20));
        if bytes[end] != b'"' || controls != 0 {
            return None;
        }
        self.rest = &after[1..];
        Some(text)
    }

    /// An unsigned integer in plain decimal (no sign, no leading zero, no fraction),
    /// within `u64`.
    fn number(&mut self) -> Option<u64> {
        let bytes = self.rest.as_bytes();
        let mut value: u64 = 0;
        let mut len = 0;
        while let Some(digit) = bytes
            .get(len)
            .map(|b| b.wrapping_sub(b'0'))
            .filter(|&d| d < 10)
        {
            value = value.wrapping_mul(10).wrapping_add(u64::from(digit));
            len += 1;
        }
        let (digits, rest) = self.rest.split_at(len);
        if len == 0 || (len > 1 && bytes[0] == b'0') {
            return None;
        }
        // Up to 19 digits never overflow; 20 may.
        if len > 19 {
            value = digits.parse().ok()?;
        }
        self.rest = rest;
        Some(value)
    }

    /// The closing brace, and nothing after it.
    fn end(&self) -> Option<()> {
        (self.rest == "}").then_some(())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::super::{Hot, Msg, ServerFrame, ACK_START, MSG_START};
    use super::*;

    fn pushed(msg: &Msg) -> String {
        serde_json::to_string(&ServerFrame::Msg(msg.clone())).expect("json")
    }

    /// Every push and ack the server writes without an escape in it is read by the
    /// scanner, to the same fields.
    #[test]
    fn reads_what_the_server_writes() {
        let m = Msg {
            conv: "g:grüppe".into(),
            seq: u64::MAX,
            from: "u7".into(),
            body: "ms1:body with spaces, {braces} and \u{7f}".into(),
            ts: 0,
        };
        let text = pushed(&m);
        let got = msg(&text[MSG_START.len()..]).expect("scanned");
        assert_eq!(
            (&*got.conv, got.seq, &*got.from, &*got.body, got.ts),
            (&*m.conv, m.seq, &*m.from, &*m.body, m.ts)
        );
        let text = serde_json::to_string(&ServerFrame::Ack {
            r#ref: 9,
            conv: "d:a:b".into(),
            seq: 10,
            ts: 11,
        })
        .expect("json");
        let got = ack(&text[ACK_START.len()..]).expect("scanned");
        assert_eq!(
            (got.r#ref, &*got.conv, got.seq, got.ts),
            (9, "d:a:b", 10, 11)
        );
    }

    /// Other spellings are left to serde_json, which still reads the valid ones.
    #[test]
    fn other_spellings_are_left_to_serde_json() {
        let frames = [
            r#"{"type":"msg","conv":"c","seq":1,"from":"a","body":"x\"y","ts":1}"#,
            r#"{"type":"msg","conv":"c","seq":1,"from":"a","body":"x\u0041","ts":1}"#,
            r#"{"type":"msg","conv":"c","seq":1, "from":"a","body":"x","ts":1}"#,
            r#"{"type":"msg","seq":1,"conv":"c","from":"a","body":"x","ts":1}"#,
            r#"{"type":"msg","conv":"c","seq":1,"from":"a","body":"x","ts":1} "#,
            r#"{"type":"msg","conv":"c","seq":1,"from":"a","body":"x","ts":1,"more":2}"#,
            r#"{"type":"msg","conv":"c","seq":01,"from":"a","body":"x","ts":1}"#,
            r#"{"type":"msg","conv":"c","seq":1.0,"from":"a","body":"x","ts":1}"#,
            r#"{"type":"msg","conv":"c","seq":18446744073709551616,"from":"a","body":"x","ts":1}"#,
            "{\"type\":\"msg\",\"conv\":\"c\",\"seq\":1,\"from\":\"a\",\"body\":\"x\ty\",\"ts\":1}",
            r#"{"type":"msg","conv":"c","seq":1,"from":"a","body":"x","ts":1"#,
        ];
        for text in frames {
            assert!(msg(&text[MSG_START.len()..]).is_none(), "{text}");
        }
        let Some(Ok(Hot::Msg(m))) = Hot::parse(frames[0]) else {
            panic!("serde_json reads an escaped body");
        };
        assert!(matches!(m.body, Cow::Owned(_)));
        assert_eq!(m.body, "x\"y");
        assert!(matches!(Hot::parse(frames[2]), Some(Ok(Hot::Msg(_)))));
        assert!(matches!(Hot::parse(frames[6]), Some(Err(_))));
        assert!(matches!(Hot::parse(frames[9]), Some(Err(_))));
        assert!(ack(r#""ref":1,"conv":"c","seq":1,"ts":-1}"#).is_none());
    }

    fn any_text() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop::sample::select(vec!['a', 'z', '0', ':', '"', '\\', '\n', 'é', ' ', '\u{1}']),
            0..12,
        )
        .prop_map(|v| v.into_iter().collect())
    }

    fn any_msg() -> impl Strategy<Value = Msg> {
        (
            any_text(),
            any::<u64>(),
            any_text(),
            any_text(),
            any::<u64>(),
        )
            .prop_map(|(conv, seq, from, body, ts)| Msg {
                conv,
                seq,
                from,
                body,
                ts,
            })
    }

    proptest! {
        /// The scanner reads every push the server writes without escapes, and whatever
        /// it reads serde_json reads the same.
        #[test]
        fn scanner_agrees_with_serde_json(m in any_msg(), at in any::<prop::sample::Index>(), to in any::<u8>()) {
            let text = pushed(&m);
            let escaped = text.contains('\\');
            let scanned = msg(&text[MSG_START.len()..]);
            prop_assert_eq!(scanned.is_some(), !escaped);
            if let Some(got) = scanned {
                prop_assert_eq!(&*got.body, &*m.body);
                prop_assert_eq!((&*got.conv, got.seq, &*got.from, got.ts), (&*m.conv, m.seq, &*m.from, m.ts));
            }
            // One byte changed anywhere after the tag: read alike or left to serde_json.
            let mut bytes = text.into_bytes();
            let i = MSG_START.len() + at.index(bytes.len() - MSG_START.len());
            bytes[i] = to;
            if let Ok(changed) = String::from_utf8(bytes) {
                if let Some(got) = msg(&changed[MSG_START.len()..]) {
                    let serde: MsgRef<'_> = serde_json::from_str(&changed).expect("serde_json reads it too");
                    prop_assert_eq!(got, serde);
                }
            }
        }
    }
}
