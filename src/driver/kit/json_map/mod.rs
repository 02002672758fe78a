//! Mapping an application's JSON protocol onto the driver interface, shared by the drivers
//! whose protocol is described in the scenario (`ws-json`, `socketio`): frame templates
//! with placeholders ([`template`]), JSON paths and the conditions built on them
//! ([`path`]), the values of a signal's template ([`signal`]), and small helpers; the options table they are read from is
//! the kit's `options::Table`.

pub mod path;
pub mod signal;
mod table;
pub mod template;

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::value::RawValue;

use crate::driver::Auth;
use path::as_str;

/// The username and password (or token) `user` logs in with.
pub fn credentials(auth: &Auth, user: &str) -> (String, String) {
    match auth {
        Auth::Password { username, password } => (
            username.replace("{user}", user),
            password.replace("{user}", user),
        ),
        Auth::Secret(secret) => (user.to_owned(), crate::wire::token(user, secret)),
        Auth::None => (user.to_owned(), String::new()),
    }
}

/// A string value unescaped, or any other value as its JSON text.
pub fn text_of(v: &RawValue) -> String {
    match as_str(v) {
        Some(s) => s.into_owned(),
        None => v.get().to_owned(),
    }
}

/// The first 120 characters of a frame, for error examples.
pub fn clip(text: &str) -> &str {
    match text.char_indices().nth(120) {
        Some((i, _)) => &text[..i],
        None => text,
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
