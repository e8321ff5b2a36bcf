//! The `cipherbench` binary: parse the command line and hand over to the library.
//! A keeper (`__keep`, see `supervisor.rs`) is dispatched before clap: it starts for
//! every child, and its program's arguments are not ours to parse.

use clap::Parser;

fn main() -> std::process::ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args
        .get(1)
        .is_some_and(|a| a == cipherbench::supervisor::KEEPER_COMMAND)
    {
        return cipherbench::supervisor::keeper_main(&args[2..]);
    }
    cipherbench::main(cipherbench::cli::Cli::parse())
}
