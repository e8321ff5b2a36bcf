//! Layer 2: file encryption through the disk.
//!
//! - `cipherbench seal` / `open` ([`seal`]): the streaming format of
//!   `cipherbench-stream` made into a tool: key files and passphrases ([`keys`]), a
//!   parallel bounded pipeline ([`pipeline`]), outputs that appear only when
//!   complete ([`output`]).
//! - `cipherbench file` ([`bench`]): the time to encrypt a file with `cp` (no
//!   encryption), `openssl enc`, `age`, `gpg` and `cipherbench seal` ([`tools`]),
//!   per acceleration variant, cache state and durability mode.
//!
//! The format itself (what bytes mean) is not here: it is the `cipherbench-stream`
//! crate, pure and tested alone. Linux calls beyond `std` are in [`sys`]. The flags
//! are the command line's, above this layer: it gets resolved options and plans.

pub mod bench;
pub mod direct;
pub mod keys;
pub mod output;
pub mod pipeline;
pub mod seal;
pub mod sys;
pub mod tools;
