//! msgstorm: load, capacity and delivery-reliability testing for IM and long-connection
//! servers.
//!
//! # Layout
//!
//! The modules follow the data flow of a run:
//!
//! ```text
//! scenario.toml ─▶ scenario ─▶ Plan ─▶ engine ─▶ driver Session ◀──wire──▶ target
//!                                        │            └─ bodies ─▶ envelope ─▶ ledger
//!                                        └─ due times, outcomes ─────────────▶ metrics
//!                          ledger + metrics + monitor ─▶ artifact (result.json, mergeable)
//!                                                             artifact(s) ─▶ report
//! ```
//!
//! - [`scenario`] parses and validates a scenario file and lowers it into a [`scenario::Plan`].
//! - [`wire`] holds the reference server's frame types, shared by `serve` and the native driver.
//! - [`envelope`] marks every test message body so a receiver knows run, stream, sequence
//!   and due time, and whether the body arrived intact.
//! - [`ledger`] accounts delivery per stream × recipient: lost, duplicated, reordered,
//!   corrupted, late, repaired by sync.
//! - [`metrics`] holds HDR histograms, counters, per-second series and the error taxonomy.
//! - [`engine`] runs the virtual users open-loop through a [`driver`] and feeds ledger and metrics.
//! - [`run`] runs one plan to one artifact: the embedded server or a probe of the target,
//!   the monitor, the rendezvous of shards, the engine; or a plan's shards through a
//!   launcher. It reports stages, progress and notes as events to a sink the caller gives.
//! - [`driver`] speaks one wire protocol per folder behind the `Driver`/`Session` traits;
//!   each driver declares what it is (`Spec`) and checks its own options, and its `pub mod`
//!   line (the registry line) makes it choosable by name (`loopback` is an in-process hub
//!   for engine tests); the drivers share a toolkit (connect skeleton, I/O-error
//!   classifier, JSON mapping, cursors, the request/reply read loops).
//! - [`monitor`] samples CPU and memory of the generator and of target processes.
//! - [`chaos`] carries out a plan's fault steps during the load (processes killed, paused
//!   or restarted, connections cut, the network slowed through its own proxy) and says
//!   what each cost.
//! - [`artifact`] is the versioned, mergeable result file; [`report`] computes one model from
//!   artifacts (checks, findings, series) and renders it through one renderer trait in
//!   each format (text, JSON, HTML, JUnit, Markdown). Both, the scenario's checks and the
//!   live endpoint name metrics by the one catalog in [`vocab::metric`].
//! - [`launch`] runs the shards of one run (local processes, or the pods of a Kubernetes
//!   Indexed Job it writes), has them meet before traffic, and collects their results;
//!   [`clock`] is the generator's wall clock, corrected to the run's reference clock.
//! - [`serve`] is the reference IM server; [`sys`] the few OS facts (fd limit, CPU time);
//!   [`runtime`] the async runtime the binary runs on, with the wake tick.
//! - [`cli`] is the only place that prints; [`error`] is the crate error and the exit-code contract.
//! - [`untrusted`] shows text from outside msgstorm (what servers and adapters said, names
//!   from a scenario or a result file) on one line with its controls as visible escapes:
//!   every text output goes through it.

pub mod artifact;
pub mod chaos;
pub mod cli;
pub mod clock;
pub mod driver;
pub mod engine;
pub mod envelope;
pub mod error;
pub mod find;
#[doc(hidden)]
pub mod fuzzing;
#[cfg(any(feature = "prometheus", feature = "live"))]
pub mod http1;
pub mod launch;
pub mod ledger;
#[cfg(feature = "live")]
pub mod live;
pub mod metrics;
pub mod monitor;
pub mod report;
pub mod run;
pub mod runtime;
pub mod scenario;
pub mod scrape;
#[cfg(feature = "serve")]
pub mod serve;
pub mod sizing;
pub mod sys;
pub mod untrusted;
pub mod vocab;
pub mod wire;

pub use error::{Error, Result};
