//! The integration tests: one binary, one module per folder of `tests/` and one submodule
//! per file (`cli/verdict.rs` is `cli::verdict`). `common` is the shared fixture.

mod common;
// One set of cases run for every driver against its real peer.
mod conformance;

mod chaos;
mod cli;
mod compare;
mod echo;
mod engine;
mod find;
mod formats;
mod house;
mod html;
mod k8s;
#[cfg(all(feature = "live", feature = "prometheus"))]
mod live;
#[cfg(feature = "mqtt")]
mod mqtt;
mod native;
mod population;
mod run;
#[cfg(feature = "prometheus")]
mod scrape;
#[cfg(feature = "script")]
mod script;
mod serve;
mod signals;
#[cfg(feature = "socketio")]
mod socketio;
mod workloads;
mod ws_json;
#[cfg(feature = "xmpp")]
mod xmpp;
