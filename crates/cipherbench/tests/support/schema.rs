//! A `run.json` read as other tools would read it: validated against the published
//! JSON Schema (`docs/run.schema.json`, compiled in, so a test run in a root or on a
//! bare server checks it too) by an independent validator, then parsed under the
//! model's types. Shared by the integration tests and the platform suite.

use cipherbench_model::RunRecord;
use std::path::Path;

/// The published schema, as the source tree holds it.
const SCHEMA: &str = include_str!("../../../../docs/run.schema.json");

/// Panics, naming the first few failures and where they are, unless `text` is valid
/// against the published schema.
pub fn validate(text: &str) {
    let schema: serde_json::Value =
        serde_json::from_str(SCHEMA).expect("docs/run.schema.json is JSON");
    let validator =
        jsonschema::draft202012::new(&schema).expect("docs/run.schema.json is a JSON Schema");
    let instance: serde_json::Value = serde_json::from_str(text).expect("run.json is JSON");
    let failures: Vec<String> = validator
        .iter_errors(&instance)
        .take(5)
        .map(|e| format!("{e} (at {})", e.instance_path()))
        .collect();
    assert!(
        failures.is_empty(),
        "run.json is not valid against docs/run.schema.json: {}",
        failures.join("; ")
    );
}

/// The record in `dir`'s `run.json`, valid against the schema and read under the
/// model's types.
#[allow(
    dead_code,
    reason = "the platform suite reads its records' text first and calls `validate`"
)]
pub fn record(dir: &Path) -> RunRecord {
    let text = std::fs::read_to_string(dir.join("run.json"))
        .unwrap_or_else(|e| panic!("reading {}/run.json: {e}", dir.display()));
    validate(&text);
    RunRecord::from_json(&text).expect("run.json reads under the schema")
}
