//! SASL for XMPP logins: PLAIN and SCRAM-SHA-1 (RFC 5802), client side.
//!
//! Written here on RustCrypto's HMAC, SHA-1 and PBKDF2 (already in the tree for the
//! WebSocket handshake and the native tokens): the SCRAM crates on crates.io either bring a
//! second crypto stack or a random-number crate for the nonce, and the client side of one
//! mechanism is a few dozen lines. Passwords are used as given (no SASLprep): load-test
//! accounts have ASCII passwords.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha1::{Digest, Sha1};

/// A SASL mechanism this driver speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    /// Username and password in the clear (RFC 4616).
    Plain,
    /// Salted challenge-response (RFC 5802).
    ScramSha1,
}

impl Mechanism {
    /// The name in `<mechanism>` and `<auth mechanism=…>`.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::ScramSha1 => "SCRAM-SHA-1",
        }
    }
}

/// The initial response of PLAIN, base64.
pub fn plain(user: &str, password: &str) -> String {
    B64.encode(format!("\0{user}\0{password}"))
}

/// A salted password kept between two logins of one user: deriving it is most of a SCRAM
/// login's CPU, and the server's salt and iteration count do not change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Salted {
    salt: Vec<u8>,
    iterations: u32,
    key: [u8; 20],
}

/// One SCRAM-SHA-1 exchange in progress.
#[derive(Debug)]
pub struct Scram {
    client_first_bare: String,
    nonce: String,
    password: String,
    server_signature: Option<[u8; 20]>,
}

type HmacSha1 = Hmac<Sha1>;

fn hmac(key: &[u8], data: &[u8]) -> [u8; 20] {
    let mut mac = HmacSha1::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(data);
    mac.finalize().into_bytes().into()
}

impl Scram {
    /// Starts an exchange: the exchange and the initial response (base64).
    pub fn start(user: &str, password: &str) -> (Scram, String) {
        // The nonce only has to be unique per exchange; it is not a secret of the test.
        let nonce: String = (0..24).map(|_| fastrand::alphanumeric()).collect();
        let name = user.replace('=', "=3D").replace(',', "=2C");
        let client_first_bare = format!("n={name},r={nonce}");
        let initial = B64.encode(format!("n,,{client_first_bare}"));
        let scram = Scram {
            client_first_bare,
            nonce,
            password: password.to_owned(),
            server_signature: None,
        };
        (scram, initial)
    }

    /// Answers the server's challenge (base64): the response (base64). `cache` holds the
    /// salted password of an earlier login and receives this one's.
    pub fn respond(
        &mut self,
        challenge: &str,
        cache: &mut Option<Salted>,
    ) -> Result<String, String> {
        let server_first = B64
            .decode(challenge.trim())
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .ok_or("the SCRAM challenge is not base64 text")?;
        let field = |k: &str| {
            server_first
                .split(',')
                .find_map(|f| f.strip_prefix(k))
                .ok_or_else(|| format!("the SCRAM challenge has no `{k}`: {server_first}"))
        };
        let nonce = field("r=")?;
        if !nonce.starts_with(&self.nonce) {
            return Err("the SCRAM challenge does not extend our nonce".to_owned());
        }
        let salt = B64
            .decode(field("s=")?)
            .map_err(|_| "the SCRAM salt is not base64".to_owned())?;
        let iterations: u32 = field("i=")?
            .parse()
            .map_err(|_| "the SCRAM iteration count is not a number".to_owned())?;
        let key = match cache {
            Some(s) if s.salt == salt && s.iterations == iterations => s.key,
            _ => {
                let mut key = [0u8; 20];
                pbkdf2::pbkdf2::<HmacSha1>(self.password.as_bytes(), &salt, iterations, &mut key)
                    .map_err(|e| format!("SCRAM key derivation: {e}"))?;
                *cache = Some(Salted {
                    salt,
                    iterations,
                    key,
                });
                key
            }
        };
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{server_first},{without_proof}", self.client_first_bare);
        let client_key = hmac(&key, b"Client Key");
        let stored_key: [u8; 20] = Sha1::digest(client_key).into();
        let signature = hmac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(signature)
            .map(|(k, s)| k ^ s)
            .collect();
        let server_key = hmac(&key, b"Server Key");
        self.server_signature = Some(hmac(&server_key, auth_message.as_bytes()));
        Ok(B64.encode(format!("{without_proof},p={}", B64.encode(proof))))
    }

    /// Checks the server's final message (the text of `<success>`, base64): the server
    /// proves it knows the password too.
    pub fn verify(&self, success: &str) -> Result<(), String> {
        let Some(expected) = self.server_signature else {
            return Err("SASL success before the SCRAM challenge".to_owned());
        };
        let text = B64
            .decode(success.trim())
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .unwrap_or_default();
        let got = text
            .split(',')
            .find_map(|f| f.strip_prefix("v="))
            .and_then(|v| B64.decode(v).ok());
        match got {
            Some(v) if v == expected => Ok(()),
            _ => Err("the server's SCRAM signature does not match".to_owned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example exchange of RFC 5802, section 5.
    #[test]
    fn rfc5802_example() {
        let mut s = Scram {
            client_first_bare: "n=user,r=fyko+d2lbbFgONRv9qkxdawL".to_owned(),
            nonce: "fyko+d2lbbFgONRv9qkxdawL".to_owned(),
            password: "pencil".to_owned(),
            server_signature: None,
        };
        let challenge =
            B64.encode("r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096");
        let mut cache = None;
        let resp = s.respond(&challenge, &mut cache).expect("valid challenge");
        assert_eq!(
            String::from_utf8(B64.decode(resp).expect("base64")).expect("utf-8"),
            "c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts="
        );
        assert!(s
            .verify(&B64.encode("v=rmF9pqV8S7suAoZWja4dJRkFsKQ="))
            .is_ok());
        assert!(s.verify(&B64.encode("v=AAAA")).is_err());
        assert!(cache.is_some());
    }
}
