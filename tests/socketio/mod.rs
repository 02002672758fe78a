//! The `socketio` driver against the real Socket.IO app of `peers/socketio`.

pub(crate) mod chat;
mod failures;
mod recovery;
mod signals;
