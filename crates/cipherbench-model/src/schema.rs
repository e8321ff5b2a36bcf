//! The `run.json` schema: one record per `cipherbench run` (or per layer command),
//! versioned, carrying the environment and every raw sample.
//!
//! Compatibility rule: a new optional field does not change [`SCHEMA_VERSION`]; a
//! renamed, removed or re-interpreted field does. Readers refuse a version newer than
//! the one they know and say so (see [`RunRecord::from_json`]).

use crate::env::Environment;
use crate::file::FileResults;
use crate::speed::SpeedResults;
use crate::tls::TlsResults;
use crate::tunnel::TunnelResults;
use serde::{Deserialize, Serialize};

/// The value of the `schema` field.
pub const SCHEMA_NAME: &str = "cipherbench.run";
/// The current schema version.
pub const SCHEMA_VERSION: u32 = 1;

/// A warning that travels with the data: noisy samples, a saturated load generator, a
/// variant that did not take effect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Warning {
    /// Layer (`speed`, `file`, `tls`, `tunnel`) or `run`.
    pub layer: String,
    /// Stable machine-readable kind (`high_spread`, `variant_not_effective`, ...).
    pub kind: String,
    /// One sentence for a person.
    pub message: String,
}

/// One results directory's canonical record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunRecord {
    /// Always [`SCHEMA_NAME`].
    pub schema: String,
    /// [`SCHEMA_VERSION`] at the time of writing.
    pub schema_version: u32,
    /// cipherbench's version.
    pub tool_version: String,
    /// The command line that produced this record.
    pub command_line: Vec<String>,
    /// Preset name (`quick`, `full`, `tiny`, or `custom`).
    pub preset: String,
    /// A rehearsal (`run --rehearse`): the preset's plan, every part of it, at the
    /// tiny preset's lengths, to show the machine can run it. Its figures are not
    /// the preset's.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rehearsal: bool,
    /// Start, RFC 3339 UTC.
    pub started_at: String,
    /// End, RFC 3339 UTC; None while running or if interrupted.
    pub finished_at: Option<String>,
    /// The run ended before all scenarios were measured (Ctrl-C or an error); what is
    /// here was measured.
    pub interrupted: bool,
    /// The machine and software.
    pub environment: Environment,
    /// Layer 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed: Option<SpeedResults>,
    /// Layer 2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<FileResults>,
    /// Layer 3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsResults>,
    /// Layer 4.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tunnel: Option<TunnelResults>,
    /// Warnings.
    #[serde(default)]
    pub warnings: Vec<Warning>,
    /// Layers of `cipherbench run` that finished, in order: a resumed run skips them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub completed_layers: Vec<String>,
    /// The TLS throughput the user plans for (`--target-gbps`), Gbit/s: the report's
    /// capacity line says how many cores each suite needs for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_gbps: Option<f64>,
    /// Where the run placed its processes (whole cores per role), when it placed them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<crate::topology::Placement>,
    /// The machine's fitness to benchmark at the start of the run (`probe --check`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fitness: Option<crate::fitness::Fitness>,
}

/// Why a `run.json` could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    /// Not JSON, or not of our shape.
    #[error("not a cipherbench run.json: {0}")]
    Malformed(serde_json::Error),
    /// Another program's JSON.
    #[error("not a cipherbench run.json: schema is '{0}', expected '{SCHEMA_NAME}'")]
    WrongSchema(String),
    /// Written by a newer cipherbench.
    #[error("run.json has schema version {found}, newer than this cipherbench understands ({SCHEMA_VERSION}); upgrade cipherbench to read it")]
    TooNew {
        /// Version in the file.
        found: u32,
    },
    /// Written by an older cipherbench whose format we no longer read.
    #[error("run.json has schema version {found}, older than the oldest this cipherbench reads ({SCHEMA_VERSION}); re-run the measurement")]
    TooOld {
        /// Version in the file.
        found: u32,
    },
}

// Not `#[from]`: that would also make the library's error the source, and a chain
// printed with its causes (`{:#}`) would say the library's message twice.
impl From<serde_json::Error> for SchemaError {
    fn from(e: serde_json::Error) -> Self {
        SchemaError::Malformed(e)
    }
}

/// Just enough to check the schema before parsing the whole record.
#[derive(Deserialize)]
struct Header {
    schema: String,
    schema_version: u32,
}

impl RunRecord {
    /// Parses a record, checking the schema name and version first so that an old or
    /// new file gets a clear message instead of a field error.
    pub fn from_json(text: &str) -> Result<RunRecord, SchemaError> {
        let header: Header = serde_json::from_str(text)?;
        if header.schema != SCHEMA_NAME {
            return Err(SchemaError::WrongSchema(header.schema));
        }
        if header.schema_version > SCHEMA_VERSION {
            return Err(SchemaError::TooNew {
                found: header.schema_version,
            });
        }
        if header.schema_version < SCHEMA_VERSION {
            return Err(SchemaError::TooOld {
                found: header.schema_version,
            });
        }
        Ok(serde_json::from_str(text)?)
    }

    /// Pretty JSON.
    pub fn to_json(&self) -> String {
        // Serialising plain data structs with string keys cannot fail.
        serde_json::to_string_pretty(self).expect("run record serialises")
    }

    /// Adds a warning unless an identical one is already there.
    pub fn warn(&mut self, layer: &str, kind: &str, message: impl Into<String>) {
        let w = Warning {
            layer: layer.to_string(),
            kind: kind.to_string(),
            message: message.into(),
        };
        if !self.warnings.contains(&w) {
            self.warnings.push(w);
        }
    }
}

/// Where the schema of [`RunRecord`] is published: `docs/run.schema.json` in the
/// source tree, and in the package's documentation.
pub const SCHEMA_ID: &str = "https://cipherbench.dev/schemas/run-1.schema.json";

/// `run.json`'s JSON Schema (draft 2020-12), generated from these types: every field
/// with its doc comment as its description, `schema` and `schema_version` pinned to
/// this version's values. `docs/run.schema.json` is this, pretty-printed; a test
/// keeps the two equal, and the integration tests validate real records against
/// the file.
pub fn run_schema() -> serde_json::Value {
    let mut schema = schemars::schema_for!(RunRecord).to_value();
    schema["$id"] = SCHEMA_ID.into();
    schema["title"] = "cipherbench run.json".into();
    let props = &mut schema["properties"];
    props["schema"]["const"] = SCHEMA_NAME.into();
    props["schema_version"]["const"] = SCHEMA_VERSION.into();
    schema
}

/// [`run_schema`] as the file holds it: pretty JSON and a final newline.
pub fn run_schema_text() -> String {
    let mut text = serde_json::to_string_pretty(&run_schema()).expect("a schema serialises");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_other_schemas_and_versions() {
        assert!(matches!(
            RunRecord::from_json(r#"{"schema":"other","schema_version":1}"#),
            Err(SchemaError::WrongSchema(_))
        ));
        assert!(matches!(
            RunRecord::from_json(r#"{"schema":"cipherbench.run","schema_version":99}"#),
            Err(SchemaError::TooNew { found: 99 })
        ));
        assert!(matches!(
            RunRecord::from_json(r#"{"schema":"cipherbench.run","schema_version":0}"#),
            Err(SchemaError::TooOld { found: 0 })
        ));
        assert!(matches!(
            RunRecord::from_json("not json"),
            Err(SchemaError::Malformed(_))
        ));
    }

    #[test]
    fn reads_every_float_exactly_so_a_saved_record_loads_unchanged() {
        // Found by fuzzing (target `report`): without serde_json's `float_roundtrip`
        // its fast parser misread this by two ULPs, so a run.json loaded and saved
        // (resume, report) changed its numbers in the last digits every time.
        for text in [
            "9080068.596017705",
            "0.1",
            "1e-300",
            "1.7976931348623157e308",
        ] {
            let read: f64 = serde_json::from_str(text).unwrap();
            assert_eq!(read, text.parse::<f64>().unwrap(), "{text}");
            assert_eq!(
                serde_json::to_string(&read)
                    .unwrap()
                    .parse::<f64>()
                    .unwrap(),
                read
            );
        }
    }

    #[test]
    fn the_published_schema_is_the_one_these_types_make() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/run.schema.json");
        let made = run_schema_text();
        if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
            std::fs::write(path, &made).unwrap();
        }
        let published = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            published == made,
            "docs/run.schema.json is not the schema of these types: UPDATE_SNAPSHOTS=1 \
             cargo test -p cipherbench-model schema writes it again (and a renamed, \
             removed or re-interpreted field needs SCHEMA_VERSION raised)"
        );
        let schema = run_schema();
        assert_eq!(schema["properties"]["schema"]["const"], SCHEMA_NAME);
        assert_eq!(
            schema["properties"]["schema_version"]["const"],
            SCHEMA_VERSION
        );
        // Every layer's record is described, not left open.
        for layer in ["speed", "file", "tls", "tunnel"] {
            assert!(schema["properties"][layer].is_object(), "{layer}");
        }
    }

    #[test]
    fn a_malformed_file_says_the_parser_error_once() {
        let err = RunRecord::from_json("not json").unwrap_err();
        // A source would be printed again by every `{:#}` chain.
        assert!(std::error::Error::source(&err).is_none());
        assert!(err.to_string().starts_with("not a cipherbench run.json: "));
    }
}
