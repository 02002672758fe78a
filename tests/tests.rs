//! The integration tests: one binary, one module per area. `common` is the shared fixture.

mod common;

#[path = "echo/smoke.rs"]
mod echo_smoke;

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
