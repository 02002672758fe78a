//! Login tokens (HMAC-SHA256 of the user id, and optionally of an expiry, under the
//! server secret) and id rules.

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

/// Why a token was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// It is not a token of this user under this secret.
    Invalid,
    /// It was, until its expiry (Unix seconds) passed.
    Expired(u64),
}

/// Checks that `token` is a token of `user` under `secret` at `now` (Unix seconds):
/// either [`crate::wire::token`] (no expiry) or [`crate::wire::token_until`] with an
/// expiry after `now`; compared in constant time.
pub fn verify(user: &str, token: &str, secret: &str, now: u64) -> Result<(), Refused> {
    let (mac_hex, expires) = match token.split_once('.') {
        None => (token, None),
        Some((m, e)) => {
            let e: u64 = e.parse().map_err(|_| Refused::Invalid)?;
            (m, Some(e))
        }
    };
    let raw = unhex(mac_hex).ok_or(Refused::Invalid)?;
    let mut m = mac(secret);
    match expires {
        None => m.update(user.as_bytes()),
        Some(e) => m.update(format!("{user}|{e}").as_bytes()),
    }
    m.verify_slice(&raw).map_err(|_| Refused::Invalid)?;
    match expires {
        Some(e) if e <= now => Err(Refused::Expired(e)),
        _ => Ok(()),
    }
}

/// The current time in Unix seconds.
pub fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
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
    use crate::wire::{token, token_until};

    #[test]
    fn tokens_verify_only_for_their_user_and_secret() {
        let ok = |u: &str, t: &str, s: &str| verify(u, t, s, 100).is_ok();
        let t = token("alice", "s3cret");
        assert_eq!(t.len(), 64);
        assert!(ok("alice", &t, "s3cret"));
        assert!(!ok("bob", &t, "s3cret"));
        assert!(!ok("alice", &t, "other"));
        assert!(!ok("alice", "zz", "s3cret"));
        assert!(!ok("alice", "abc", "s3cret"));
    }

    #[test]
    fn expiring_tokens_verify_until_their_expiry() {
        let t = token_until("alice", "s3cret", 200);
        assert_eq!(verify("alice", &t, "s3cret", 199), Ok(()));
        assert_eq!(
            verify("alice", &t, "s3cret", 200),
            Err(Refused::Expired(200))
        );
        assert_eq!(
            verify("bob", &t, "s3cret", 0),
            Err(Refused::Invalid),
            "bound to the user"
        );
        let later = t.replace(".200", ".900");
        assert_eq!(
            verify("alice", &later, "s3cret", 300),
            Err(Refused::Invalid),
            "the expiry is signed"
        );
        assert_eq!(verify("alice", "ab.x", "s3cret", 0), Err(Refused::Invalid));
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
