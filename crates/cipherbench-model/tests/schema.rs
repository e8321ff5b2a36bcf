//! The published schema (`docs/run.schema.json`) against records: the kept ones a
//! reader must still take (the report's fixtures and the fuzz seeds, written by
//! earlier builds under this schema version), and the same records broken so that a reader must refuse
//! them. The integration tests validate the run.json of every run they make.

use serde_json::Value;

fn schema() -> jsonschema::Validator {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/run.schema.json"
    ))
    .expect("docs/run.schema.json");
    let schema: Value = serde_json::from_str(&text).expect("the schema is JSON");
    jsonschema::draft202012::new(&schema).expect("the schema is a JSON Schema")
}

/// A kept record, by its path from the repository's root.
fn fixture(name: &str) -> Value {
    let path = format!("{}/../../{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(&path).expect(&path)).expect("JSON")
}

/// The whole records the repository keeps: the report's fixtures and the fuzz
/// targets' seeds (every layer, and an empty run).
const FIXTURES: [&str; 9] = [
    "crates/cipherbench-report/tests/fixtures/run-quick.json",
    "crates/cipherbench-report/tests/fixtures/compare-knight.json",
    "crates/cipherbench-report/tests/fixtures/compare-padawan.json",
    "crates/cipherbench-fuzz/data/all-layers.json",
    "crates/cipherbench-fuzz/data/speed.json",
    "crates/cipherbench-fuzz/data/file.json",
    "crates/cipherbench-fuzz/data/tls.json",
    "crates/cipherbench-fuzz/data/tunnel.json",
    "fuzz/seeds/report/empty-run.json",
];

#[test]
fn every_kept_record_is_valid() {
    let schema = schema();
    for name in FIXTURES {
        let record = fixture(name);
        let failures: Vec<String> = schema
            .iter_errors(&record)
            .take(3)
            .map(|e| format!("{e} at {}", e.instance_path()))
            .collect();
        assert!(failures.is_empty(), "{name}: {failures:?}");
    }
}

/// What a broken record lacks, and how it is broken.
type Breakage = (&'static str, fn(&mut Value));

#[test]
fn a_record_another_tool_would_misread_is_refused() {
    let schema = schema();
    let good = fixture(FIXTURES[0]);
    let broken: [Breakage; 6] = [
        ("another schema's name", |r| r["schema"] = "other".into()),
        ("another version", |r| r["schema_version"] = 2.into()),
        ("a figure as text", |r| {
            r["speed"]["points"][0]["throughput_bytes_per_sec"]["median"] = "fast".into();
        }),
        // serde_json writes a NaN as null: a figure that was not a number.
        ("a figure that was NaN", |r| {
            r["speed"]["points"][0]["throughput_bytes_per_sec"]["median"] = Value::Null;
        }),
        ("a required field gone", |r| {
            r["speed"]["points"][0]
                .as_object_mut()
                .unwrap()
                .remove("size_bytes");
        }),
        ("a negative count", |r| {
            r["speed"]["points"][0]["size_bytes"] = (-1).into();
        }),
    ];
    for (what, breaks) in broken {
        let mut record = good.clone();
        breaks(&mut record);
        assert!(!schema.is_valid(&record), "{what}: accepted");
    }
}
