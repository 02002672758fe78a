//! The drivers built into this msgstorm — each `pub mod` line of `driver/mod.rs` whose
//! folder implements [`Driver`], listed by the build script (`build/drivers.rs`) — and one
//! dispatch from a driver's name to its type.
//!
//! The engine is generic over [`Driver`], so running "the driver the scenario names" needs
//! one place where the name becomes a type: [`with_driver`] builds it and hands it to a
//! [`WithDriver`] job (the CLI's run). Everything else about a driver is its [`Spec`].

use std::future::Future;

use super::{Caps, Config, Driver, OptionError, Signals, Spec};

/// A job that runs with whichever driver the scenario names.
pub trait WithDriver {
    /// What the job produces.
    type Output;

    /// Runs the job with `driver`.
    fn run<D: Driver>(self, driver: D) -> impl Future<Output = Self::Output>;
}

/// The error for a driver name that is not built in.
fn not_built(name: &str) -> OptionError {
    OptionError {
        key: "target.driver".to_owned(),
        msg: format!("driver `{name}` is not built into this msgstorm"),
    }
}

/// Generates the registry functions from the list of driver types.
macro_rules! drivers {
    ($($(#[$attr:meta])* $ty:ty),* $(,)?) => {
        /// Calls `f` with every built-in driver's spec, in registry order.
        pub fn for_each_spec(mut f: impl FnMut(&'static Spec)) {
            $($(#[$attr])* f(&<$ty as Driver>::SPEC);)*
        }

        /// Builds the driver `config` names (checking its options) and returns what it
        /// can do as configured; nothing connects.
        pub fn check(config: &Config) -> Result<(Caps, Signals), OptionError> {
            $($(#[$attr])* if config.spec.name == <$ty as Driver>::SPEC.name {
                return <$ty as Driver>::new(config).map(|d| (d.caps(), d.signals()));
            })*
            Err(not_built(config.spec.name))
        }

        /// The dry run of the driver `config` names ([`Driver::dry_run`]); nothing
        /// connects.
        pub fn dry_run(
            config: &Config,
            user: &str,
            to: &str,
            group: &str,
        ) -> Result<Option<Vec<String>>, OptionError> {
            $($(#[$attr])* if config.spec.name == <$ty as Driver>::SPEC.name {
                return <$ty as Driver>::new(config).map(|d| d.dry_run(user, to, group));
            })*
            Err(not_built(config.spec.name))
        }

        /// Builds the driver `config` names and runs `job` with it.
        pub async fn with_driver<J: WithDriver>(
            config: &Config,
            job: J,
        ) -> Result<J::Output, OptionError> {
            $($(#[$attr])* if config.spec.name == <$ty as Driver>::SPEC.name {
                let driver = <$ty as Driver>::new(config)?;
                return Ok(job.run(driver).await);
            })*
            Err(not_built(config.spec.name))
        }
    };
}

// The list of drivers: each `pub mod` line of `driver/mod.rs` whose folder implements
// `Driver`, with its `#[cfg]` (written by `build/drivers.rs`).
include!(concat!(env!("OUT_DIR"), "/drivers.rs"));

/// Every built-in driver's spec, in registry order.
pub fn specs() -> Vec<&'static Spec> {
    let mut all = Vec::new();
    for_each_spec(|s| all.push(s));
    all
}

/// The built-in driver called `name`.
pub fn spec(name: &str) -> Option<&'static Spec> {
    specs().into_iter().find(|s| s.name == name)
}
