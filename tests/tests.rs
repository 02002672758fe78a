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
#[path = "serve/hostile.rs"]
mod serve_hostile;
#[path = "serve/limits.rs"]
mod serve_limits;
#[path = "serve/login.rs"]
mod serve_login;
#[path = "serve/messaging.rs"]
mod serve_messaging;
#[path = "serve/policy.rs"]
mod serve_policy;
#[path = "serve/rpc.rs"]
mod serve_rpc;
#[path = "serve/slow.rs"]
mod serve_slow;

#[path = "cli/delivery.rs"]
mod cli_delivery;
#[path = "cli/drivers.rs"]
mod cli_drivers;
#[path = "cli/exit_codes.rs"]
mod cli_exit_codes;
#[path = "cli/faults.rs"]
mod cli_faults;
#[path = "cli/report.rs"]
mod cli_report;
#[path = "cli/shards.rs"]
mod cli_shards;
#[path = "cli/signals.rs"]
mod cli_signals;

#[path = "find/capacity.rs"]
mod find_capacity;

#[path = "find/sizing.rs"]
mod find_sizing;
#[path = "workloads/w3.rs"]
mod workloads_w3;
