//! The manual the package installs, made from the clap definitions so that it
//! cannot drift from the flags: `cipherbench completions SHELL` prints a shell's
//! completion script, and `cipherbench __manpages DIR` writes `cipherbench.1` and a
//! page per command (`cipherbench-tls-sweep.1`, ...). `scripts/dist.sh` calls both.

use super::Cli;
use crate::progress::{out, outln};
use anyhow::{Context, Result};
use clap::CommandFactory;
use std::path::Path;
use std::process::ExitCode;

/// Prints the completion script of `shell` for `cipherbench` on stdout.
pub fn completions(shell: clap_complete::Shell) -> Result<ExitCode> {
    let mut command = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "cipherbench", &mut script);
    out!("{}", String::from_utf8_lossy(&script));
    Ok(ExitCode::SUCCESS)
}

/// Writes the man pages into `dir` (made if missing) and names each on stdout.
pub fn manpages(dir: &Path) -> Result<ExitCode> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut command = Cli::command();
    command.build();
    for (name, page) in pages(&command, "") {
        let path = dir.join(format!("{name}.1"));
        std::fs::write(&path, page).with_context(|| format!("writing {}", path.display()))?;
        outln!("{}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// Each visible command's page, named `cipherbench[-SUB[-SUB]]`, the parent's
/// before its subcommands'.
fn pages(command: &clap::Command, prefix: &str) -> Vec<(String, Vec<u8>)> {
    let name = if prefix.is_empty() {
        command.get_name().to_string()
    } else {
        format!("{prefix}-{}", command.get_name())
    };
    let mut page = Vec::new();
    // Rendering into a Vec cannot fail.
    let _ = clap_mangen::Man::new(command.clone().name(name.clone())).render(&mut page);
    let mut out = vec![(name.clone(), page)];
    for sub in command.get_subcommands() {
        if sub.is_hide_set() || sub.get_name() == "help" {
            continue;
        }
        out.extend(pages(sub, &name));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_visible_command_has_a_page_and_no_internal_one_does() {
        let mut command = Cli::command();
        command.build();
        let names: Vec<String> = pages(&command, "").into_iter().map(|(n, _)| n).collect();
        for want in [
            "cipherbench",
            "cipherbench-speed",
            "cipherbench-run",
            "cipherbench-tunnel",
            "cipherbench-completions",
        ] {
            assert!(names.iter().any(|n| n == want), "{want} missing: {names:?}");
        }
        assert!(names.iter().all(|n| !n.contains("__")), "{names:?}");
        let (_, main) = &pages(&command, "")[0];
        let text = String::from_utf8_lossy(main);
        assert!(text.starts_with(".ie"), "{}", &text[..80.min(text.len())]);
        assert!(
            text.contains("cipherbench\\-speed(1)"),
            "the main page lists the commands"
        );
    }
}
