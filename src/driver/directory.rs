//! The run-wide directory: values a server assigns (a user id, a group's id) published by
//! one user and looked up by others, in this process or across the shards of a run (the
//! rendezvous's folder or shard 0 keep it; see `launch`). The `script` driver gives it to
//! adapters as `u:publish` and `u:lookup`.

use std::collections::HashMap;
use std::sync::Mutex;

/// Where published values are kept. Blocking calls, each bounded in time by the backend:
/// call them off the async runtime's threads for a remote backend.
pub trait Directory: Send + Sync + std::fmt::Debug {
    /// Publishes `value` under `key` (a later publish replaces it).
    fn publish(&self, key: &str, value: &str) -> std::io::Result<()>;

    /// The value under `key`, if it was published yet.
    fn lookup(&self, key: &str) -> std::io::Result<Option<String>>;

    /// Publishes `value` under `key` unless a value is there already, atomically for the
    /// whole run; returns the value under `key` then (this one, or the earlier one). Decides
    /// who of several users does something once (creates a group, say).
    fn claim(&self, key: &str, value: &str) -> std::io::Result<String>;

    /// Whether the values live in another process (calls may block on the network).
    fn remote(&self) -> bool {
        false
    }
}

/// The longest key, bytes.
pub const MAX_KEY: usize = 256;
/// The longest value, bytes.
pub const MAX_VALUE: usize = 1024;

/// Checks a key and a value before they are published: bounded, on one line, and the key
/// without spaces (the shards' line protocol carries them).
pub fn check(key: &str, value: Option<&str>) -> Result<(), String> {
    if key.is_empty() || key.len() > MAX_KEY || key.chars().any(char::is_whitespace) {
        return Err(format!(
            "a directory key is 1 to {MAX_KEY} bytes without spaces, got {key:?}"
        ));
    }
    if let Some(v) = value {
        if v.len() > MAX_VALUE || v.contains(['\n', '\r']) {
            return Err(format!(
                "a directory value is at most {MAX_VALUE} bytes on one line (under {key:?})"
            ));
        }
    }
    Ok(())
}

/// A directory in this process only (a run without shards).
#[derive(Debug, Default)]
pub struct Local {
    values: Mutex<HashMap<String, String>>,
}

impl Directory for Local {
    fn publish(&self, key: &str, value: &str) -> std::io::Result<()> {
        self.values
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key.to_owned(), value.to_owned());
        Ok(())
    }

    fn lookup(&self, key: &str) -> std::io::Result<Option<String>> {
        Ok(self
            .values
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
            .cloned())
    }

    fn claim(&self, key: &str, value: &str) -> std::io::Result<String> {
        Ok(self
            .values
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(key.to_owned())
            .or_insert_with(|| value.to_owned())
            .clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_published_replaced_and_checked() {
        let d = Local::default();
        assert_eq!(d.lookup("grp").expect("lookup"), None);
        d.publish("grp", "grpAbc").expect("publish");
        d.publish("grp", "grpXyz").expect("publish");
        assert_eq!(d.lookup("grp").expect("lookup").as_deref(), Some("grpXyz"));
        assert_eq!(d.claim("creator", "u1").expect("claim"), "u1");
        assert_eq!(
            d.claim("creator", "u2").expect("claim"),
            "u1",
            "the first claim stays"
        );
        assert!(check("a b", None).is_err());
        assert!(check("", None).is_err());
        assert!(check("k", Some("two\nlines")).is_err());
        assert!(check("k", Some(&"x".repeat(MAX_VALUE + 1))).is_err());
        assert!(check("k", Some("usr:Abc def")).is_ok());
    }
}
