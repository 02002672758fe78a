//! Login tokens (HMAC-SHA256 of the user id under the server secret) and id rules.

use std::io::Read;

use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// Longest user id or group name accepted.
pub const MAX_ID_LEN: usize = 64;

fn mac(secret: &str) -> HmacSha256 {
    // HMAC accepts keys of any length, so this cannot fail.
    HmacSha256::new_from_slice(secret.as_bytes()).expect("HMAC takes keys of any length")
}

/// True when `token` is the token of `user` under `secret` ([`crate::wire::token`]),
/// compared in constant time.
pub fn verify(user: &str, token: &str, secret: &str) -> bool {
    let Some(raw) = unhex(token) else {
        return false;
    };
    let mut m = mac(secret);
    m.update(user.as_bytes());
    m.verify_slice(&raw).is_ok()
}

/// True for a usable user id or group name: 1 to 64 characters of `A-Z a-z 0-9 _ - .`
/// (no `:`, which separates the parts of a conversation id).
pub fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// A fresh random secret (32 hex digits from the OS, or from a seeded RNG when the OS
/// source is unavailable).
pub fn generate_secret() -> String {
    let mut buf = [0u8; 16];
    let from_os = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut buf))
        .is_ok();
    if !from_os {
        buf.iter_mut().for_each(|b| *b = fastrand::u8(..));
    }
    hex(&buf)
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    s
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    let digit = |c: u8| {
        char::from(c)
            .to_digit(16)
            .and_then(|d| u8::try_from(d).ok())
    };
    s.as_bytes()
        .chunks(2)
        .map(|p| Some(digit(p[0])? << 4 | digit(p[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::token;

    #[test]
    fn tokens_verify_only_for_their_user_and_secret() {
        let t = token("alice", "s3cret");
        assert_eq!(t.len(), 64);
        assert!(verify("alice", &t, "s3cret"));
        assert!(!verify("bob", &t, "s3cret"));
        assert!(!verify("alice", &t, "other"));
        assert!(!verify("alice", "zz", "s3cret"));
        assert!(!verify("alice", "abc", "s3cret"));
    }

    #[test]
    fn ids_exclude_separators() {
        assert!(valid_id("u-1_a.b"));
        assert!(!valid_id(""));
        assert!(!valid_id("a:b"));
        assert!(!valid_id(&"x".repeat(65)));
    }

    #[test]
    fn generated_secrets_differ() {
        assert_ne!(generate_secret(), generate_secret());
    }
}
