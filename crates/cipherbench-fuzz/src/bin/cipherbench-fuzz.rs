//! `cipherbench-fuzz TARGET --seeds DIR [--runs N] [--seed S] [--artifacts DIR]`: the
//! stable-Rust driver ([`cipherbench_fuzz::driver`]) from the command line, for
//! `scripts/fuzz.sh --stable`. Prints one line of figures; on a broken property
//! writes the input to `ARTIFACTS/crash-<run>` and exits 1.

use cipherbench_fuzz::driver;
use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str =
    "usage: cipherbench-fuzz TARGET --seeds DIR [--runs N] [--seed S] [--artifacts DIR]";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut name, mut seeds, mut runs, mut seed, mut artifacts) =
        (None, None, 10_000u64, 1u64, PathBuf::from("fuzz/artifacts"));
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().cloned();
        match a.as_str() {
            "--seeds" => seeds = value().map(PathBuf::from),
            "--artifacts" => artifacts = value().map(PathBuf::from).unwrap_or(artifacts),
            "--runs" | "--seed" => {
                let Some(n) = value().and_then(|v| v.parse::<u64>().ok()) else {
                    eprintln!("cipherbench-fuzz: {a} needs a whole number; {USAGE}");
                    return ExitCode::from(2);
                };
                if a == "--runs" {
                    runs = n;
                } else {
                    seed = n;
                }
            }
            t if name.is_none() && !t.starts_with('-') => name = Some(t.to_string()),
            other => {
                eprintln!("cipherbench-fuzz: unexpected '{other}'; {USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    let names: Vec<_> = cipherbench_fuzz::TARGETS.iter().map(|t| t.name).collect();
    let Some(target) = name.as_deref().and_then(cipherbench_fuzz::target) else {
        eprintln!(
            "cipherbench-fuzz: name a target ({}); {USAGE}",
            names.join(", ")
        );
        return ExitCode::from(2);
    };
    let Some(dir) = seeds else {
        eprintln!("cipherbench-fuzz: --seeds DIR is required; {USAGE}");
        return ExitCode::from(2);
    };
    let corpus = match driver::load_seeds(&dir) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("cipherbench-fuzz: cannot read seeds {}: {e}", dir.display());
            return ExitCode::from(2);
        }
    };
    match driver::run(target, &corpus, runs, seed) {
        Ok(stats) => {
            println!(
                "{}: {} inputs in {:.1} s ({:.0} exec/s), {} seeds, seed {seed}, no property broken",
                target.name,
                stats.runs,
                stats.elapsed.as_secs_f64(),
                stats.per_second(),
                corpus.len()
            );
            ExitCode::SUCCESS
        }
        Err(failure) => {
            let dir = artifacts.join(target.name);
            let path = dir.join(format!("crash-{}", failure.run));
            let saved =
                std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, &failure.input));
            match saved {
                Ok(()) => eprintln!(
                    "cipherbench-fuzz: {}: input {} broke a property (above); saved as {}",
                    target.name,
                    failure.run,
                    path.display()
                ),
                Err(e) => eprintln!(
                    "cipherbench-fuzz: {}: input {} broke a property (above); could not save it: {e}",
                    target.name, failure.run
                ),
            }
            ExitCode::FAILURE
        }
    }
}
