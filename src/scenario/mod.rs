//! Scenario files: the TOML schema, validation with file:line:key errors, and lowering into
//! a [`Plan`].
//!
//! The steps, one file each:
//! 1. `source`: the text is parsed into a spanned TOML tree; every error is located by span
//!    as `FILE:LINE: KEY: what is wrong` ([`crate::Error::Scenario`]).
//! 2. `overrides`: `--set KEY=VALUE` edits the tree, with spans that name the override.
//! 3. `schema`: the tree is read into serde types that deny unknown keys.
//! 4. `validate` (with `target`, `population`, `arrival`, `traffic`): every value and
//!    combination is checked and resolved to numbers, before anything connects. `values`
//!    is the leaf of value parsers and limits; `traffic` checks what every `[[traffic]]`
//!    entry shares and hands the rest to its kind's own file in `kinds/` (the table of
//!    kinds is `kind`, one line each).
//!    `find` checks the `[find]` table of `msgstorm find`; `warnings` lists what a valid
//!    scenario cannot verify with its driver (printed, never an error).
//! 5. `lower`: users, groups and stream ids are chosen from the seed (`draw`) into a
//!    [`Plan`], each kind lowering its own patterns.
//!
//! `docs/scenario.md` documents every key.

mod arrival;
mod chaos;
mod chaos_step;
mod contacts;
mod dist;
mod draw;
mod find;
mod groups;
mod kinds;
mod lower;
mod overrides;
pub mod plan;
mod population;
mod schema;
mod sessions;
mod signals;
mod source;
mod target;
mod trace;
mod traffic;
mod validate;
mod values;
mod warnings;

use std::path::Path;

use serde::Deserialize;
use toml::de::DeTable;
use toml::Spanned;

pub use crate::vocab::TrafficKind;
pub use plan::*;

use crate::{Error, Result};

/// The built-in default scenario (`scenarios/default.toml`), run by `msgstorm run` with no
/// arguments against the embedded reference server.
pub const DEFAULT_SCENARIO: &str = include_str!("../../scenarios/default.toml");

/// The secret the embedded reference server must be started with: the default
/// `[target.auth] secret` of drivers that mint tokens.
pub use target::DEFAULT_SECRET;
pub use validate::push_url;

/// A duration as people write it (`12.5s`, `200ms`), as validation shows them.
pub use values::show as show_duration;

/// Reads, overrides, validates and lowers the scenario file at `path`.
pub fn load(path: &Path, overrides: &[String], shard: Shard) -> Result<Plan> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    let text = source::decode(path, bytes)?;
    parse(&text, path, overrides, shard)
}

/// Parses scenario `text` (read from `file`, named in errors), applies `--set KEY=VALUE`
/// `overrides`, validates it and lowers it into a [`Plan`] for `shard`.
pub fn parse(text: &str, file: &Path, overrides: &[String], shard: Shard) -> Result<Plan> {
    if shard.count == 0 || shard.index >= shard.count {
        return Err(Error::Usage(format!(
            "shard {} of {}: the index must be below the count, and the count at least 1",
            shard.index, shard.count
        )));
    }
    let src = source::Source {
        file,
        text,
        overrides,
    };
    let doc = DeTable::parse(text).map_err(|e| src.syntax_error(&e))?;
    let span = doc.span();
    let mut root: DeTable<'_> = doc.into_inner();
    overrides::apply(&mut root, &src)?;
    // The drivers' own tables are checked by the drivers, not by the schema.
    let mut rest = root.clone();
    let tables = target::take_driver_tables(&mut rest);
    let de = toml::de::Deserializer::from(Spanned::new(span, rest));
    let keys_at = |path: &str| match path {
        "target" => Some(target::target_keys()),
        _ => traffic::keys_at(&root, path),
    };
    let scenario =
        schema::Scenario::deserialize(de).map_err(|e| src.schema_error(&root, &e, keys_at))?;
    let checked = validate::validate(&src, &scenario, &root, &tables, file)?;
    Ok(lower::lower(checked, shard))
}

/// The built-in default scenario as a plan.
pub fn default_plan() -> Plan {
    parse(
        DEFAULT_SCENARIO,
        Path::new("default.toml"),
        &[],
        Shard::WHOLE,
    )
    .expect("the built-in default scenario is valid (tested)")
}

#[cfg(test)]
mod tests;
