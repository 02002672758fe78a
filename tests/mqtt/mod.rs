//! The MQTT driver against a real mosquitto.

mod delivery;
mod failures;
mod keepalive;
mod offline;
#[cfg(feature = "mqtt-tls")]
mod tls;
