//! `[[chaos]]` steps: faults injected mid-run into real targets and real peers, and what the report makes of them.

mod aftermath;
#[cfg(feature = "mqtt")]
mod mosquitto;
mod process;
#[cfg(feature = "socketio")]
mod socketio;
mod steps;
mod validate;
