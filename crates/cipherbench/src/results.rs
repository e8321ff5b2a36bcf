//! The results directory: `run.json` (canonical), CSV per layer, `summary.md` and
//! `report.html`,
//! written atomically after every scenario so an interrupted run keeps what it
//! measured.
//!
//! A directory is checked for writability before anything is measured; if the run
//! then fails before measuring anything, a directory this run created is removed
//! again, so bad input leaves nothing behind.

use crate::progress::Progress;
use anyhow::{bail, Context, Result};
use cipherbench_model::env::Environment;
use cipherbench_model::{RunRecord, SCHEMA_NAME, SCHEMA_VERSION};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

/// A measuring command's state: the record being filled, where it is saved, and the
/// progress observer.
pub struct Session {
    /// The record.
    pub record: RunRecord,
    /// The observer.
    pub progress: Progress,
    dir: Option<ResultsDir>,
}

struct ResultsDir {
    path: PathBuf,
    /// The topmost directory this run created (removed if nothing gets measured).
    created: Option<PathBuf>,
}

/// The current time in seconds since the epoch.
pub fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// `results/<timestamp>-<host>`.
pub fn default_dir(hostname: &str) -> PathBuf {
    let host: String = hostname
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    PathBuf::from("results").join(format!(
        "{}-{}",
        cipherbench_model::time::compact_utc(now_unix()),
        if host.is_empty() { "host" } else { &host }
    ))
}

impl Session {
    /// Starts a record. With `dir`, prepares the directory (created if missing,
    /// checked for writability, refused if it already holds a run).
    pub fn start(
        environment: Environment,
        preset: &str,
        dir: Option<PathBuf>,
        progress: Progress,
    ) -> Result<Session> {
        let dir = dir.map(ResultsDir::prepare).transpose()?;
        let mut session = Session {
            record: RunRecord {
                schema: SCHEMA_NAME.into(),
                schema_version: SCHEMA_VERSION,
                tool_version: env!("CARGO_PKG_VERSION").into(),
                command_line: std::env::args().collect(),
                preset: preset.into(),
                started_at: cipherbench_model::time::rfc3339_utc(now_unix()),
                finished_at: None,
                interrupted: false,
                environment,
                speed: None,
                file: None,
                tls: None,
                tunnel: None,
                warnings: Vec::new(),
                completed_layers: Vec::new(),
                target_gbps: None,
                placement: None,
                fitness: None,
            },
            progress,
            dir,
        };
        session.note_user_ia32cap();
        Ok(session)
    }

    /// An `OPENSSL_ia32cap` in the user's environment (even empty or malformed) does
    /// not reach the measurements: every variant sets its own in its processes and
    /// accel removes it. Said once, in the notes and the record, with the value.
    fn note_user_ia32cap(&mut self) {
        let Some(value) = self.record.environment.openssl.ia32cap_env.clone() else {
            return;
        };
        let message = format!(
            "OPENSSL_ia32cap='{value}' is set in your environment: every variant sets its own in the processes it measures (accel removes it), so it does not change the figures; it does apply to cipherbench's own process, where the TLS load generator runs"
        );
        self.progress.note(&message);
        self.record.warn("run", "ia32cap_in_environment", message);
    }

    /// Resumes the run in `dir` if it holds one that did not finish: the record is
    /// loaded and the layers skip what it already has. Refuses a finished run, another
    /// preset's run, or one measured on another machine. `None` if `dir` holds no run.
    pub fn resume(
        dir: &Path,
        environment: &Environment,
        preset: &str,
        progress: Progress,
    ) -> Result<Option<Session>> {
        if !dir.join("run.json").exists() {
            return Ok(None);
        }
        let mut record = load(dir)?;
        if record.finished_at.is_some() && !record.interrupted {
            bail!(
                "{} already holds a finished run; choose another --results directory, or re-render it with `cipherbench report {}`",
                dir.display(),
                dir.display()
            );
        }
        if record.preset != preset {
            bail!(
                "{} holds an unfinished '{}' run; resume it with --preset {}, or choose another --results directory",
                dir.display(),
                record.preset,
                record.preset
            );
        }
        if record.environment.cpu.model != environment.cpu.model
            || record.environment.hostname != environment.hostname
        {
            bail!(
                "{} holds a run measured on {} ({}), not this machine; choose another --results directory",
                dir.display(),
                record.environment.hostname,
                record.environment.cpu.model
            );
        }
        record.interrupted = false;
        record.finished_at = None;
        record.warn(
            "run",
            "resumed",
            format!(
                "resumed at {}: scenarios measured before the interruption were kept, not measured again",
                cipherbench_model::time::rfc3339_utc(now_unix())
            ),
        );
        let dir = ResultsDir {
            path: dir.to_path_buf(),
            created: None,
        };
        dir.check_writable()?;
        Ok(Some(Session {
            record,
            progress,
            dir: Some(dir),
        }))
    }

    /// Where results go, if anywhere.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_ref().map(|d| d.path.as_path())
    }

    /// Whether any layer has data.
    pub fn has_measurements(&self) -> bool {
        self.record.speed.is_some()
            || self.record.file.is_some()
            || self.record.tls.is_some()
            || self.record.tunnel.is_some()
    }

    /// Saves `run.json` and the CSV files (not the HTML: that is rendered at the end,
    /// and by `cipherbench report`).
    pub fn save(&mut self) -> Result<()> {
        let Some(dir) = &self.dir else { return Ok(()) };
        write_atomic(&dir.path.join("run.json"), self.record.to_json().as_bytes())?;
        for file in cipherbench_report::render_csv(&self.record) {
            write_atomic(&dir.path.join(&file.name), file.contents.as_bytes())?;
        }
        Ok(())
    }

    /// Ends the session. On success or interruption the record is saved and the
    /// report rendered; on an error with nothing measured, a directory this run
    /// created is removed.
    pub fn finish(&mut self, outcome: &Result<()>) -> Result<()> {
        // Any early end (Ctrl-C or an error) marks the record incomplete.
        let interrupted = outcome.is_err();
        if interrupted && !self.has_measurements() {
            if let Some(dir) = self.dir.take() {
                dir.remove_if_created();
            }
            return Ok(());
        }
        self.record.interrupted = interrupted;
        self.record.finished_at = Some(cipherbench_model::time::rfc3339_utc(now_unix()));
        self.save()?;
        if let Some(dir) = &self.dir {
            // run.json is already safe on disk: a rendering problem cannot lose data.
            for file in cipherbench_report::render_documents(&self.record) {
                write_atomic(&dir.path.join(&file.name), file.contents.as_bytes())?;
            }
        }
        Ok(())
    }
}

impl ResultsDir {
    fn prepare(path: PathBuf) -> Result<ResultsDir> {
        if path.join("run.json").exists() {
            bail!(
                "{} already holds a run (run.json); choose another --results directory, or re-render it with `cipherbench report {}`",
                path.display(),
                path.display()
            );
        }
        // Find the topmost missing ancestor, so a failure can remove exactly what we
        // made.
        let mut created = None;
        let mut probe = path.as_path();
        while !probe.as_os_str().is_empty() && !probe.exists() {
            created = Some(probe.to_path_buf());
            match probe.parent() {
                Some(p) => probe = p,
                None => break,
            }
        }
        fs::create_dir_all(&path).with_context(|| {
            format!(
                "cannot create the results directory {}; pass --results with a writable path",
                path.display()
            )
        })?;
        let dir = ResultsDir { path, created };
        if let Err(e) = dir.check_writable() {
            dir.remove_if_created();
            return Err(e);
        }
        Ok(dir)
    }

    fn check_writable(&self) -> Result<()> {
        let test = self.path.join(".cipherbench-write-test");
        let writable = fs::File::create(&test).and_then(|mut f| f.write_all(b"ok"));
        let _ = fs::remove_file(&test);
        if let Err(e) = writable {
            bail!(
                "cannot write to the results directory {} ({e}); pass --results with a writable path",
                self.path.display()
            );
        }
        Ok(())
    }

    fn remove_if_created(self) {
        if let Some(top) = self.created {
            let _ = fs::remove_dir_all(top);
        }
    }
}

/// Writes a file atomically: a temporary file beside it, fsync, rename, fsync the
/// directory. A reader sees the old file or the new one, never half of one.
pub fn write_atomic(path: &Path, contents: &[u8]) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| -> std::io::Result<()> {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(contents)?;
        f.sync_all()?;
        fs::rename(&tmp, path)?;
        if let Ok(d) = fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if let Err(e) = result {
        let _ = fs::remove_file(&tmp);
        return Err(e).with_context(|| format!("writing {}", path.display()));
    }
    Ok(())
}

/// Reads a results directory's `run.json`.
pub fn load(dir: &Path) -> Result<RunRecord> {
    let path = dir.join("run.json");
    let text = fs::read_to_string(&path).with_context(|| {
        format!(
            "cannot read {}: is {} a cipherbench results directory?",
            path.display(),
            dir.display()
        )
    })?;
    RunRecord::from_json(&text).with_context(|| format!("reading {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_whole_files() {
        let dir = std::env::temp_dir().join(format!("cb-atomic-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let f = dir.join("x.json");
        write_atomic(&f, b"one").unwrap();
        write_atomic(&f, b"two").unwrap();
        assert_eq!(fs::read_to_string(&f).unwrap(), "two");
        let leftovers: Vec<_> = fs::read_dir(&dir).unwrap().flatten().collect();
        assert_eq!(leftovers.len(), 1);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_failed_prepare_leaves_nothing() {
        let base = std::env::temp_dir().join(format!("cb-prep-{}", std::process::id()));
        let target = base.join("a/b");
        let dir = ResultsDir::prepare(target.clone()).unwrap();
        assert!(target.is_dir());
        dir.remove_if_created();
        assert!(!base.exists());
    }

    #[test]
    fn refuses_a_directory_that_already_holds_a_run() {
        let dir = std::env::temp_dir().join(format!("cb-held-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("run.json"), "{}").unwrap();
        let err = ResultsDir::prepare(dir.clone()).err().unwrap().to_string();
        assert!(err.contains("already holds a run"), "{err}");
        fs::remove_dir_all(&dir).unwrap();
    }
}
