//! `schema/scenario.schema.json`, the scenario file's JSON Schema for editors: every shipped
//! scenario and every `msgstorm new` starting point is valid by it, and it catches what an
//! editor should underline — a misspelled key, a value of the wrong type.

use std::path::Path;

const SCHEMA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/schema/scenario.schema.json");

/// The schema, compiled (checked against its metaschema on the way).
fn schema() -> (boon::Schemas, boon::SchemaIndex) {
    let mut schemas = boon::Schemas::new();
    let mut compiler = boon::Compiler::new();
    compiler.enable_format_assertions();
    let index = compiler
        .compile(SCHEMA, &mut schemas)
        .unwrap_or_else(|e| panic!("{SCHEMA}: {e:#}"));
    (schemas, index)
}

/// A TOML text as the JSON an editor validates.
fn json(text: &str, from: &str) -> serde_json::Value {
    let value: toml::Value = toml::from_str(text).unwrap_or_else(|e| panic!("{from}: {e}"));
    serde_json::to_value(value).expect("TOML as JSON")
}

/// Why `text` is not valid by the schema, if it is not.
fn invalid(text: &str, from: &str) -> Option<String> {
    let (schemas, index) = schema();
    schemas
        .validate(&json(text, from), index)
        .err()
        .map(|e| format!("{e:#}"))
}

#[test]
fn every_shipped_scenario_and_starting_point_is_valid_by_the_schema() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut checked = 0;
    for entry in std::fs::read_dir(root.join("scenarios")).expect("scenarios/") {
        let path = entry.expect("an entry").path();
        if path.extension().is_some_and(|e| e == "toml") {
            let text = std::fs::read_to_string(&path).expect("read");
            let from = path.display().to_string();
            assert_eq!(invalid(&text, &from), None, "{from}");
            checked += 1;
        }
    }
    assert!(checked >= 20, "only {checked} scenarios found");
    let new = root.join("src/cli/new");
    let body = std::fs::read_to_string(new.join("body.toml")).expect("body.toml");
    for entry in std::fs::read_dir(&new).expect("src/cli/new") {
        let path = entry.expect("an entry").path();
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default();
        if path.extension().is_some_and(|e| e == "toml") && stem != "body" {
            let text = std::fs::read_to_string(&path).expect("read") + &body;
            let from = path.display().to_string();
            assert_eq!(invalid(&text, &from), None, "{from}");
        }
    }
}

#[test]
fn the_schema_catches_misspelled_keys_and_wrong_types() {
    let base = "[population]\nusers = 10\n";
    for (text, says) in [
        (format!("{base}[[traffic]]\nkind = \"direct\"\nsendrs = 1\n"), "sendrs"),
        (format!("populaton = 1\n{base}"), "populaton"),
        (format!("drain = 5\n{base}"), "drain"),
        (format!("drain = \"soon\"\n{base}"), "drain"),
        (
            format!("[target]\ndriver = \"script\"\n[target.script]\nfile = \"a.lua\"\ncall_limit = 1\n{base}"),
            "call_limit",
        ),
        (format!("[target]\ndriver = \"carrier-pigeon\"\n{base}"), "driver"),
        ("[population]\nusers = 0\n".to_owned(), "users"),
    ] {
        let why = invalid(&text, "case").unwrap_or_else(|| panic!("valid: {text}"));
        assert!(why.contains(says), "{text}\n{why}");
    }
}
