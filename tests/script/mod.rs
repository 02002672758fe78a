//! The `script` driver against real servers, each spoken by a Lua script.

mod check_adapter;
mod ergonomics;
mod http;
#[cfg(feature = "tls")]
mod http2;
mod http_declared;
mod matrix;
mod native;
mod netty;
mod openim;
mod runaway;
#[cfg(feature = "socketio")]
mod socketio;
mod tinode;
