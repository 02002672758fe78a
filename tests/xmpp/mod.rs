//! The XMPP driver against real ejabberd and Prosody.

mod delivery;
mod failures;
mod offline;
mod resume;
mod rooms;
mod signals;
mod tls;
