//! The commands that measure nothing: `probe` (the machine), `report` (re-render a
//! results directory) and `compare` (results directories side by side).

use super::flags;
use crate::progress::{errln, out, outln};
use crate::results;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Exit status of `probe --check` when the machine is not fit to benchmark now.
pub const EXIT_NOT_FIT: u8 = 3;

/// Exit status of `compare --fail-above` when a figure regressed; an error (a
/// directory without run.json) exits 1, as every command's, so CI can tell them apart.
pub const EXIT_REGRESSED: u8 = 4;

/// `cipherbench probe`, and `probe --check`.
pub fn probe(json: bool, check: bool) -> Result<ExitCode> {
    if check {
        let fitness = crate::probe::fitness(std::time::Duration::from_secs(1));
        if json {
            outln!("{}", serde_json::to_string_pretty(&fitness)?);
        } else {
            out!("{}", cipherbench_report::machine::fitness(&fitness));
        }
        return Ok(if fitness.fit {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(EXIT_NOT_FIT)
        });
    }
    let env = crate::probe::collect();
    if json {
        outln!("{}", serde_json::to_string_pretty(&env)?);
    } else {
        out!("{}", cipherbench_report::text::probe(&env));
        if let Some(t) = &env.topology {
            out!("{}", cipherbench_report::machine::topology(t));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `cipherbench report DIR`: holds the directory's lock while it rewrites the
/// derived files (a run still writing there is not raced), and removes what a
/// killed run left in it (saying so in one line); reads nothing but `run.json`.
pub fn report(dir: &Path, target_gbps: Option<f64>) -> Result<ExitCode> {
    // Refuse what is not a results directory before locking or sweeping it.
    results::load(dir)?;
    let opened = results::open_existing(dir)?;
    if let Some(note) = opened.swept().note() {
        errln!("note: {note}");
    }
    let mut record = results::load(dir)?;
    if let Some(t) = target_gbps {
        record.target_gbps = Some(flags::target_gbps(t)?);
    }
    for file in cipherbench_report::render_all(&record) {
        results::write_atomic(&dir.join(&file.name), file.contents.as_bytes())?;
    }
    outln!("{}", dir.join("report.html").display());
    Ok(ExitCode::SUCCESS)
}

/// `cipherbench compare DIR DIR...`.
pub fn compare(
    dirs: &[PathBuf],
    out: Option<&Path>,
    fail_above: Option<&str>,
    json: bool,
) -> Result<ExitCode> {
    // Bad flags are refused before anything is read or written.
    let threshold = fail_above
        .map(cipherbench_report::gate::parse_threshold)
        .transpose()
        .map_err(anyhow::Error::msg)?;
    if threshold.is_some() && dirs.len() != 2 {
        anyhow::bail!(
            "--fail-above judges one run against a baseline: give two results directories, BASELINE then NEW, not {}",
            dirs.len()
        );
    }
    let records = dirs
        .iter()
        .map(|d| results::load(d))
        .collect::<Result<Vec<_>>>()?;
    let labels = compare_labels(&records, dirs);
    let comparison = cipherbench_report::compare::analyze(&records, &labels);
    if !json {
        out!("{}", cipherbench_report::compare::text(&comparison));
    }
    if let Some(out) = out {
        std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
        results::write_atomic(
            &out.join("compare.md"),
            cipherbench_report::compare::markdown(&comparison).as_bytes(),
        )?;
        results::write_atomic(
            &out.join("compare.html"),
            cipherbench_report::compare::html(&comparison).as_bytes(),
        )?;
        if !json {
            outln!("\nwritten: {}", out.join("compare.html").display());
        }
    }
    let Some(threshold) = threshold else {
        return Ok(ExitCode::SUCCESS);
    };
    let gate = cipherbench_report::gate::judge(&comparison, threshold);
    if json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&cipherbench_report::gate::json(&gate, &labels))?
        );
    } else {
        out!("\n{}", cipherbench_report::gate::text(&gate, &labels));
    }
    Ok(if gate.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_REGRESSED)
    })
}

/// A label per record: the host name, or the directory name where hosts repeat.
fn compare_labels(records: &[cipherbench_model::RunRecord], dirs: &[PathBuf]) -> Vec<String> {
    let hosts: Vec<String> = records
        .iter()
        .map(|r| r.environment.hostname.clone())
        .collect();
    let unique = hosts
        .iter()
        .all(|h| hosts.iter().filter(|x| *x == h).count() == 1);
    if unique {
        return hosts;
    }
    dirs.iter()
        .map(|d| {
            d.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| d.display().to_string())
        })
        .collect()
}
