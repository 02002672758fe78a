//! Scenario files: the TOML schema, validation with file:line:key errors, and lowering into
//! a [`Plan`].

pub mod plan;

pub use plan::*;
