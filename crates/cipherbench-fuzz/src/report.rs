//! Target `report`: loading `run.json` (`RunRecord::from_json`) and rendering every
//! derived file from it (`cipherbench_report::render_all`: the CSVs, `summary.md`,
//! `report.html`), as `cipherbench report DIR` does with whatever it finds.
//!
//! Input: if it starts with `{` or white space it is a run.json text, loaded with
//! `RunRecord::from_json` as it is (a small real run.json is a valid seed). Otherwise byte 0 picks one of the small genuine records
//! in `data/` and the rest drives a structure-aware mutation of its JSON tree: each
//! node in turn (depth first, fields in name order) reads a control byte and is kept
//! (0, also past the end of the input), kept with all its children, or gets an
//! arbitrary or extreme number, a hostile string (markup, CSV and Markdown
//! separators, control characters), null, or loses an element or a field. That
//! reaches the renderers with values a byte-level mutation of JSON text rarely
//! produces (zero, negative and huge rates, NaN-free but degenerate samples); the
//! mutant is read straight from the tree (`serde_json::from_value`), the text path
//! being the first mode's.
//!
//! Properties, for every record that loads (refusing is fine):
//! - rendering never panics;
//! - the record saved again (`to_json`) loads again to an equal record;
//! - every CSV row has as many fields (RFC 4180) as its header;
//! - `report.html` stays script-free, whatever strings the record holds.

use cipherbench_model::{RunRecord, SCHEMA_NAME, SCHEMA_VERSION};
use serde_json::{Number, Value};
use std::sync::OnceLock;

/// Small genuine records (from the report crate's test fixtures, every array cut to
/// one or two elements).
const BASES: [&str; 6] = [
    include_str!("../data/all-layers.json"),
    include_str!("../data/speed.json"),
    include_str!("../data/file.json"),
    include_str!("../data/tls.json"),
    include_str!("../data/tunnel.json"),
    include_str!("../data/compare-knight.json"),
];

/// Strings that have broken renderers elsewhere: markup, separators, quotes, control
/// characters, non-ASCII, the empty string.
const HOSTILE: [&str; 12] = [
    "<script>alert(1)</script>",
    "\"><svg onload=alert(1)>",
    "a,b\"c",
    "line\nbreak\r\n",
    "| cell | cell |",
    "",
    "&amp;&lt;",
    "\u{0}\u{1b}[31m",
    "ünïcödé 🔐",
    "NaN",
    "-inf",
    "aes-256-gcm",
];

/// Extreme numbers (JSON has no NaN or infinity).
const EXTREME: [f64; 10] = [
    0.0,
    -0.0,
    -1.0,
    1.0,
    0.5,
    1e308,
    -1e308,
    5e-324,
    1.8446744073709552e19,
    4294967296.0,
];

/// Reads control bytes; zero past the end.
struct Controls<'a>(crate::Bytes<'a>);

impl Controls<'_> {
    /// Mutates `value` and its children in place, depth first.
    fn mutate(&mut self, value: &mut Value) {
        let c = self.0.u8();
        match c % 16 {
            1 => {
                if let Some(n) = Number::from_f64(f64::from_bits(self.0.u64())) {
                    *value = Value::Number(n);
                }
                return;
            }
            2 => {
                *value = Value::Number(Number::from(self.0.u64()));
                return;
            }
            3 => {
                *value = Value::Number(Number::from(-i64::from(self.0.u32())));
                return;
            }
            4 => {
                let x = EXTREME[usize::from(self.0.u8()) % EXTREME.len()];
                *value = Number::from_f64(x).map_or(Value::Null, Value::Number);
                return;
            }
            5 => {
                let s = HOSTILE[usize::from(self.0.u8()) % HOSTILE.len()];
                *value = Value::String(s.to_string());
                return;
            }
            6 => {
                let len = usize::from(self.0.u8());
                *value = Value::String(String::from_utf8_lossy(self.0.take(len)).into_owned());
                return;
            }
            7 => {
                *value = Value::Null;
                return;
            }
            8 => {
                *value = Value::Bool(self.0.u8() % 2 == 1);
                return;
            }
            9 => *value = Value::Array(Vec::new()),
            // Left whole, children included: a short input can pass over the
            // environment to reach a layer.
            13 => return,
            _ => {}
        }
        match value {
            Value::Array(items) => {
                match c % 16 {
                    10 if !items.is_empty() => {
                        let at = usize::from(self.0.u8()) % items.len();
                        items.remove(at);
                    }
                    11 if !items.is_empty() => {
                        let at = usize::from(self.0.u8()) % items.len();
                        let copy = items[at].clone();
                        items.push(copy);
                    }
                    _ => {}
                }
                for item in items {
                    self.mutate(item);
                }
            }
            Value::Object(fields) => {
                if c % 16 == 12 && !fields.is_empty() {
                    let at = usize::from(self.0.u8()) % fields.len();
                    let key = fields.keys().nth(at).cloned();
                    if let Some(key) = key {
                        fields.remove(&key);
                    }
                }
                for (_, field) in fields.iter_mut() {
                    self.mutate(field);
                }
            }
            _ => {}
        }
    }
}

/// The base records, parsed once (a parse per input would be most of the time).
fn bases() -> &'static [Value] {
    static PARSED: OnceLock<Vec<Value>> = OnceLock::new();
    PARSED.get_or_init(|| {
        BASES
            .iter()
            .map(|b| serde_json::from_str(b).expect("the bases are JSON"))
            .collect()
    })
}

/// The record the input describes: run.json text as it is (None if it does not
/// load), or a mutated base record (None if the mutant no longer fits the schema).
fn record_of(data: &[u8]) -> Option<RunRecord> {
    match data.first()? {
        b'{' | b' ' | b'\n' | b'\t' | b'\r' => {
            RunRecord::from_json(&String::from_utf8_lossy(data)).ok()
        }
        &pick => {
            let mut value = bases()[usize::from(pick) % BASES.len()].clone();
            Controls(crate::Bytes::new(&data[1..])).mutate(&mut value);
            let Value::Object(fields) = &mut value else {
                return None;
            };
            // Keep the header valid so most mutants get past it.
            fields.insert("schema".into(), Value::String(SCHEMA_NAME.into()));
            fields.insert("schema_version".into(), Value::from(SCHEMA_VERSION));
            // The text round trip through `from_json` is the text mode's business:
            // straight from the tree is several times faster.
            serde_json::from_value(value).ok()
        }
    }
}

/// Does `html` hold `<script` in any case?
fn has_script_tag(html: &str) -> bool {
    html.as_bytes()
        .windows(7)
        .any(|w| w[0] == b'<' && w[1..].eq_ignore_ascii_case(b"script"))
}

/// RFC 4180 fields per record of a CSV text (quoted fields may hold commas, quotes
/// and line breaks).
fn csv_field_counts(text: &str) -> Vec<usize> {
    let mut counts = Vec::new();
    let (mut fields, mut quoted, mut at_start, mut any) = (1, false, true, false);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        any = true;
        if quoted {
            if c == '"' {
                if chars.peek() == Some(&'"') {
                    chars.next();
                } else {
                    quoted = false;
                }
            }
            continue;
        }
        match c {
            '"' if at_start => quoted = true,
            ',' => {
                fields += 1;
                at_start = true;
                continue;
            }
            '\n' => {
                counts.push(fields);
                (fields, any) = (1, false);
                at_start = true;
                continue;
            }
            _ => {}
        }
        at_start = false;
    }
    assert!(!quoted, "a quoted CSV field never closes");
    if any {
        counts.push(fields);
    }
    counts
}

/// The properties of a record that loaded.
fn check_record(record: &RunRecord) {
    let files = cipherbench_report::render_all(record);
    let saved = record.to_json();
    let again = RunRecord::from_json(&saved).expect("a record that loaded saves to one that loads");
    assert!(
        again == *record,
        "the saved record loads to a different one"
    );
    for file in &files {
        if file.name.ends_with(".csv") {
            let counts = csv_field_counts(&file.contents);
            let header = *counts.first().expect("a CSV has a header");
            assert!(
                counts.iter().all(|&n| n == header),
                "{}: rows of {counts:?} fields under a header of {header}",
                file.name
            );
        }
        if file.name.ends_with(".html") {
            assert!(
                !has_script_tag(&file.contents),
                "{}: a script got in",
                file.name
            );
            assert!(
                !file.contents.contains("<svg onload"),
                "{}: markup got in unescaped",
                file.name
            );
        }
    }
}

/// See the module documentation.
pub fn check(data: &[u8]) {
    if let Some(record) = record_of(data) {
        check_record(&record);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_base_record_loads() {
        for base in BASES {
            RunRecord::from_json(base).expect("a base record loads");
        }
    }

    #[test]
    fn finds_script_tags_in_any_case() {
        assert!(has_script_tag("<p><ScRiPt>x</script>"));
        assert!(!has_script_tag("<p>&lt;script&gt;</p>"));
    }

    #[test]
    fn counts_rfc4180_fields() {
        assert_eq!(csv_field_counts("a,b\n1,\"x,\"\"y\"\"\nz\"\n"), [2, 2]);
        assert_eq!(csv_field_counts("a\n"), [1]);
    }
}
