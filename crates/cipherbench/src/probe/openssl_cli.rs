//! Asking the `openssl` command line tool (and other programs) about themselves:
//! version, engines, providers. Each call is bounded in time; a missing program is
//! reported as `None`, never an error.

use crate::supervisor::Spawn;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(10);

fn openssl(args: &[&str]) -> Option<String> {
    let out = Spawn::new("openssl").args(args).output(TIMEOUT).ok()?;
    out.status
        .success()
        .then(|| format!("{}{}", out.stdout, out.stderr))
}

/// `openssl version` of the CLI on PATH.
pub fn version() -> Option<String> {
    openssl(&["version"]).map(|s| s.trim().to_string())
}

/// The directory `openssl version -e` or `-m` names.
fn dir(flag: &str, key: &str) -> Option<String> {
    let out = openssl(&["version", flag])?;
    out.trim().strip_prefix(key).map(|v| {
        v.trim()
            .trim_start_matches(':')
            .trim()
            .trim_matches('"')
            .to_string()
    })
}

/// Engines found in the engines directory, each tested: `padlock: VIA PadLock
/// (no-RNG, no-ACE) [unavailable]`. OpenSSL 3 still loads engines (the EC2 AES-NI
/// blog post, seed 001, used the aesni engine of 1.0); an offload device's engine
/// (qatengine) would appear here.
pub fn engines() -> Vec<String> {
    let Some(engines_dir) = dir("-e", "ENGINESDIR") else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(&engines_dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.strip_suffix(".so").map(str::to_string)
        })
        // loader_attic is a store loader, not a crypto engine.
        .filter(|n| n != "loader_attic")
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|name| {
            let out = Spawn::new("openssl")
                .args(["engine", "-t", &name])
                .output(TIMEOUT);
            match out {
                Ok(o) if o.status.success() => {
                    let text = o.stdout.split_whitespace().collect::<Vec<_>>().join(" ");
                    format!("{name}: {text}")
                }
                _ => format!("{name}: does not initialise here"),
            }
        })
        .collect()
}

/// Providers: those loaded by default (`openssl list -providers`) and the modules
/// available to load.
pub fn providers() -> Vec<String> {
    let mut out = Vec::new();
    if let Some(text) = openssl(&["list", "-providers"]) {
        let mut current = None;
        for line in text.lines() {
            let depth = line.len() - line.trim_start().len();
            let t = line.trim();
            if depth == 2 {
                current = Some(t.to_string());
            } else if let (Some(name), Some(status)) = (&current, t.strip_prefix("status:")) {
                out.push(format!("{name} ({})", status.trim()));
            }
        }
    }
    if let Some(modules_dir) = dir("-m", "MODULESDIR") {
        if let Ok(entries) = std::fs::read_dir(&modules_dir) {
            let mut modules: Vec<String> = entries
                .flatten()
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    name.strip_suffix(".so")
                        .map(|n| format!("{n} (module available)"))
                })
                .collect();
            modules.sort();
            out.extend(modules);
        }
    }
    out
}

/// The first line a program prints about its version, if it is installed.
pub fn tool_version(name: &str) -> Option<String> {
    // nginx prints its version with -v (to stderr); the others take --version.
    let args = if name == "nginx" {
        ["-v"]
    } else {
        ["--version"]
    };
    let out = Spawn::new(name).args(args).output(TIMEOUT).ok()?;
    let text = format!("{}{}", out.stdout, out.stderr);
    text.lines()
        .find(|l| !l.trim().is_empty())
        .map(|l| l.trim().to_string())
}
