//! The integration tests: one binary, one module per area. `common` is the shared fixture.

mod common;

#[path = "echo/smoke.rs"]
mod echo_smoke;
#[cfg(feature = "mqtt")]
#[path = "mqtt/delivery.rs"]
mod mqtt_delivery;
#[cfg(feature = "mqtt")]
#[path = "mqtt/failures.rs"]
mod mqtt_failures;
#[cfg(feature = "mqtt")]
#[path = "mqtt/offline.rs"]
mod mqtt_offline;
#[cfg(feature = "mqtt-tls")]
#[path = "mqtt/tls.rs"]
mod mqtt_tls;
#[path = "serve/durability.rs"]
mod serve_durability;
#[path = "serve/faults.rs"]
mod serve_faults;
#[path = "serve/limits.rs"]
mod serve_limits;
#[path = "serve/login.rs"]
mod serve_login;
#[path = "serve/messaging.rs"]
mod serve_messaging;
#[path = "serve/rpc.rs"]
mod serve_rpc;
#[path = "serve/slow.rs"]
mod serve_slow;

#[path = "engine/delivery.rs"]
mod engine_delivery;
#[path = "engine/exit_codes.rs"]
mod engine_exit_codes;
#[path = "engine/faults.rs"]
mod engine_faults;
#[path = "engine/report.rs"]
mod engine_report;
#[path = "engine/shards.rs"]
mod engine_shards;
#[path = "engine/signals.rs"]
mod engine_signals;
