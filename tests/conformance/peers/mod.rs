//! Each driver's real peer, one file per peer.

pub mod loopback;
#[cfg(feature = "mqtt")]
pub mod mqtt;
pub mod reference;
#[cfg(feature = "socketio")]
pub mod socketio;
#[cfg(feature = "xmpp")]
pub mod xmpp;
