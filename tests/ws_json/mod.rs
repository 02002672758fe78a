//! The `ws-json` driver against the reference server and real JSON-over-WebSocket servers.

mod centrifuge;
pub(crate) mod native;
mod options;
pub(crate) mod peer;
mod signals;
mod socketcluster;
mod sync;
