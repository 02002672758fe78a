//! The driver toolkit: what every driver is built from, so no driver writes its own
//! connect loop, error classifier, options parser or WebSocket client (a new driver takes
//! these, as `script` did). Nothing here names a driver; drivers never reach into each
//! other's folders, only into this one.
//!
//! | module | for |
//! |---|---|
//! | [`endpoint`] | the target URL parsed once ([`Endpoint`](endpoint::Endpoint)): host, port, path, TLS, credentials |
//! | `options` | reading a driver's `[target.<name>]` table (`Table`): typed values, each mistake an [`OptionError`](super::OptionError) naming the dotted key |
//! | [`connect`] | the connect skeleton: TCP from the user's source address, TLS (`tls`), the connect time limit ([`connect::within`]) |
//! | [`stamp`] | kernel receive times on a socket (`SO_TIMESTAMPNS`), read under a wake tick so that latencies do not include the tick |
//! | [`tls`] | the rustls client configuration, the `ca_file` and `server_name` options, handshake failures classified (feature `tls`) |
//! | [`io_error`] | the one classifier of socket failures (the generator's own exhaustion, refused, timed out, closed by the server) |
//! | [`ws`] | the WebSocket transport over [`connect`] (`native`, `echo`, `ws-json`, `socketio`, `script`) |
//! | [`json_map`] | a JSON protocol described in the scenario: templates, paths, matchers (`ws-json`, `socketio`) |
//! | `inbox` | a request/reply session's bookkeeping: request ids, acks owed, frames held while a reply is awaited, pongs owed (`ws-json`, `socketio`) |
//! | `exchange` | the read loops over that bookkeeping: the next event (held frames first, pings answered), waiting for one answer (`ws-json`, `socketio`) |
//! | [`cursors`] | per-conversation sync positions, merging pushes with fetched pages (`native`, `ws-json`, `script`) |
//! | [`body`] | a delivered body without a copy ([`Body`](body::Body)) |

pub mod body;
pub mod connect;
pub mod cursors;
pub mod endpoint;
pub(crate) mod exchange;
pub(crate) mod inbox;
pub mod io_error;
pub mod json_map;
pub(crate) mod options;
pub mod stamp;
#[cfg(feature = "tls")]
pub mod tls;
pub mod ws;
