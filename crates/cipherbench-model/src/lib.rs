//! cipherbench's data model: units, samples and their statistics, the environment
//! fingerprint and the versioned `run.json` schema.
//!
//! Everything here is plain data and pure functions. Nothing in this crate reads a
//! file, a clock or a socket: the app measures, this crate describes what was
//! measured, and the report crate renders it.

#![forbid(unsafe_code)]

pub mod agents;
pub mod env;
pub mod file;
pub mod fitness;
pub mod interleave;
pub mod interval;
pub mod noise;
pub mod schema;
pub mod speed;
pub mod stats;
pub mod time;
pub mod tls;
pub mod topology;
pub mod tunnel;
pub mod units;
pub mod variant;

pub use schema::{RunRecord, Warning, SCHEMA_NAME, SCHEMA_VERSION};
pub use stats::Summary;
pub use units::{ByteSize, ParseSizeError};
