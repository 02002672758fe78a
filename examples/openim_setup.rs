//! Registers a scenario's users and groups with a running OpenIM (peers/openim/stack.sh)
//! through its REST API and prints each user's token as a TOML line, for the scenario's
//! `[target.script.vars.tokens]` table (scenarios/openim*.toml end with it):
//! `cargo run --example openim_setup -- SCENARIO >> SCENARIO`.

#![allow(clippy::print_stdout)]

#[path = "../tests/script/openim/setup.rs"]
mod setup;

fn main() -> Result<(), String> {
    let file = std::env::args()
        .nth(1)
        .ok_or("usage: openim_setup SCENARIO")?;
    let text = std::fs::read_to_string(&file).map_err(|e| format!("{file}: {e}"))?;
    for (user, token) in setup::register(&text, file.as_ref())? {
        println!("{user} = \"{token}\"");
    }
    Ok(())
}
