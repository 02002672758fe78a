//! Writing a send frame exactly as serde_json spells [`SendRef`], without serde: the fast
//! path of [`SendRef::to_json`].
//!
//! Written by hand because a load generator writes one of these per message sent, and
//! serde_json spends about 5,000 instructions on one with a 100-byte body (every byte of
//! every string checked for escapes one at a time, the tagged struct's machinery, a buffer
//! grown on the way): 6 % of the generator's instructions per delivery with groups of 10.
//! No crate writes a fixed JSON spelling. This one checks its strings many bytes at a time
//! and copies them whole, into a buffer sized once. It writes only frames whose strings
//! need no escape (no `"`, `\` or control character: every envelope and every id msgstorm
//! makes); for any other frame it gives `None` and the caller uses serde_json. So the
//! bytes are always serde_json's (the `spelling_agrees_with_serde_json` property test
//! below holds it to that).

use super::{DestRef, SendRef};

/// The frame as serde_json writes it, or `None` when one of its strings needs an escape.
pub(super) fn send(frame: &SendRef<'_>) -> Option<String> {
    let (kind, to) = match frame.to {
        DestRef::User(u) => ("user", u),
        DestRef::Group(g) => ("group", g),
    };
    if needs_escape(to) || needs_escape(frame.body) {
        return None;
    }
    let mut number = itoa::Buffer::new();
    let r#ref = number.format(frame.r#ref);
    let parts = [
        r#"{"type":"send","ref":"#,
        r#ref,
        r#","to":{""#,
        kind,
        r#"":""#,
        to,
        r#""},"body":""#,
        frame.body,
        r#""}"#,
    ];
    let mut out = String::with_capacity(parts.iter().map(|p| p.len()).sum());
    for part in parts {
        out.push_str(part);
    }
    Some(out)
}

/// Whether JSON needs an escape in `s`: a `"`, a `\` or a control character (what
/// serde_json escapes; everything else it copies as it is).
fn needs_escape(s: &str) -> bool {
    // Folded, not short-circuited, so that the compiler checks many bytes per step.
    s.bytes().fold(false, |any, b| {
        any | (b < 0x20) | (b == b'"') | (b == b'\\')
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn any_dest() -> impl Strategy<Value = (bool, String)> {
        (
            any::<bool>(),
            "\\PC{0,12}|[a-z0-9:\"\\\\\\x00-\\x1f\\x7f]{0,12}",
        )
    }

    proptest! {
        /// Every frame written here is byte for byte what serde_json writes; only frames
        /// with a string that needs an escape are left to serde_json.
        #[test]
        fn spelling_agrees_with_serde_json(
            r#ref in any::<u64>(),
            (group, to) in any_dest(),
            body in "\\PC{0,200}|[0-9A-Za-z:\"\\\\\\x00-\\x1f\\x7f]{0,200}",
        ) {
            let frame = SendRef {
                r#ref,
                to: if group { DestRef::Group(&to) } else { DestRef::User(&to) },
                body: &body,
            };
            let serde = serde_json::to_string(&frame).expect("serializes");
            match send(&frame) {
                Some(spelled) => prop_assert_eq!(spelled, serde),
                None => prop_assert!(serde.contains('\\'), "left to serde_json without an escape: {}", serde),
            }
        }
    }

    #[test]
    fn an_envelope_to_a_user_is_spelled_here() {
        let frame = SendRef {
            r#ref: 12,
            to: DestRef::User("u7"),
            body: "ms1:0a1b2c3d:ffffffff:1:2:5f:00000000:abcXYZ",
        };
        assert_eq!(
            send(&frame).as_deref(),
            Some(
                r#"{"type":"send","ref":12,"to":{"user":"u7"},"body":"ms1:0a1b2c3d:ffffffff:1:2:5f:00000000:abcXYZ"}"#
            )
        );
    }
}
