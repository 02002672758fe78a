//! Writes the driver registry's list (`build/drivers.rs`), and tells the integration tests
//! which real peers are installed: `cfg(peer_<name>)` for each one found the way the tests
//! find it (`tests/common/detect.rs`), so that a test whose peer is missing is marked
//! ignored with the reason instead of passing without its peer. Under `CI=true` every peer
//! is declared installed: there a missing one fails its tests. Re-run only when `CI` or
//! `PATH` change, a peer is installed or removed, or a driver is added or renamed.

use std::path::PathBuf;

#[path = "tests/common/detect.rs"]
mod detect;
#[path = "build/drivers.rs"]
mod drivers;

fn main() {
    let root = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let ci = std::env::var("CI").as_deref() == Ok("true");
    let peers = detect::peers(&root);
    let mut out = vec![
        "cargo::rerun-if-env-changed=CI".to_owned(),
        "cargo::rerun-if-env-changed=PATH".to_owned(),
    ];
    let names: Vec<String> = peers.iter().map(|(n, _)| format!("peer_{n}")).collect();
    out.push(format!("cargo::rustc-check-cfg=cfg({})", names.join(", ")));
    for (name, installed) in peers {
        if ci || installed {
            out.push(format!("cargo::rustc-cfg=peer_{name}"));
        }
    }
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default());
    for path in drivers::write(&root, &out_dir) {
        out.push(format!("cargo::rerun-if-changed={}", path.display()));
    }
    for path in detect::watched(&root) {
        out.push(format!("cargo::rerun-if-changed={}", path.display()));
    }
    emit(&out);
}

/// Cargo reads a build script's instructions from its standard output.
#[allow(clippy::print_stdout)]
fn emit(lines: &[String]) {
    for line in lines {
        println!("{line}");
    }
}
