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
//! crate, pure and tested alone. Linux calls beyond `std` are in [`sys`].

pub mod args;
pub mod bench;
pub mod direct;
pub mod keys;
pub mod output;
pub mod pipeline;
pub mod seal;
pub mod sys;
pub mod tools;

use crate::results::Session;
use anyhow::Result;
use args::{FileArgs, OpenArgs, SealArgs, SealCommand};

/// `cipherbench seal`: silent on success, like `cp`.
pub fn seal_command(args: &SealArgs) -> Result<()> {
    match args.plan()? {
        SealCommand::GenKey(path) => keys::generate_key_file(&path),
        SealCommand::Seal(options) => {
            crate::interrupt::install_interrupting();
            seal::seal(&options).map(|_| ())
        }
    }
}

/// `cipherbench open`.
pub fn open_command(args: &OpenArgs) -> Result<()> {
    let options = args.plan()?;
    crate::interrupt::install_interrupting();
    seal::open(&options).map(|_| ())
}

/// `cipherbench file`: resolves the plan, measures into a session (returned with
/// the outcome, for the caller to finish and summarise).
pub fn file_command(args: &FileArgs, quiet: bool) -> Result<(Session, Result<()>)> {
    let plan = args.plan()?;
    let mut session = crate::start_session(&args.output, "custom", quiet)?;
    let outcome = bench::run(&plan, &mut session);
    Ok((session, outcome))
}
