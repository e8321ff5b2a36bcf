//! The `cipherbench` binary: parse the command line and hand over to the library.

use clap::Parser;

fn main() -> std::process::ExitCode {
    cipherbench::main(cipherbench::cli::Cli::parse())
}
