//! The driver registry, read off `src/driver/mod.rs`: each `pub mod NAME;` line there whose
//! folder's `mod.rs` implements the driver trait (`impl super::Driver for TYPE`) is a
//! built-in driver, gated by the `#[cfg(…)]` lines above it. Written to
//! `$OUT_DIR/drivers.rs` as the `drivers!` list that `src/driver/registry.rs` includes, so
//! that adding a driver is its folder plus its `pub mod` line — and the module stays a
//! plain item, which `cargo fmt` formats (it does not follow modules declared inside a
//! macro).

use std::path::{Path, PathBuf};

/// The line of a driver's `mod.rs` that names its type.
const IMPL: &str = "impl super::Driver for ";

/// Writes the registry list into `out_dir`; returns the files it was read from.
pub fn write(root: &Path, out_dir: &Path) -> Vec<PathBuf> {
    let dir = root.join("src/driver");
    let declared = dir.join("mod.rs");
    let text = std::fs::read_to_string(&declared)
        .unwrap_or_else(|e| panic!("{}: {e}", declared.display()));
    let mut watched = vec![declared];
    let mut list = String::from("drivers! {\n");
    let mut attrs: Vec<&str> = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with("#[cfg(") {
            attrs.push(line);
            continue;
        }
        if let Some(name) = line
            .strip_prefix("pub mod ")
            .and_then(|l| l.strip_suffix(';'))
        {
            let file = dir.join(name).join("mod.rs");
            let ty = std::fs::read_to_string(&file).ok().and_then(|src| {
                src.lines()
                    .find_map(|l| l.strip_prefix(IMPL))
                    .and_then(|rest| rest.split_whitespace().next())
                    .map(str::to_owned)
            });
            if let Some(ty) = ty {
                for a in &attrs {
                    list.push_str(&format!("    {a}\n"));
                }
                list.push_str(&format!("    super::{name}::{ty},\n"));
                watched.push(file);
            }
        }
        attrs.clear();
    }
    list.push_str("}\n");
    let out = out_dir.join("drivers.rs");
    std::fs::write(&out, list).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
    watched
}
