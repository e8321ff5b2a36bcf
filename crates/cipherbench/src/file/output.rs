//! Where `seal` and `open` write: a temporary file beside the target that becomes the
//! target only when everything went well ([`AtomicFile::commit`]), and is removed on
//! any failure (drop without commit), so a failed `open` leaves no plaintext and a
//! failed `seal` no half file.
//!
//! The temporary file is unnamed (`O_TMPFILE`) where the file system allows: it
//! gets a name only at the commit, and the kernel frees it when the process ends,
//! so even a `kill -9` leaves nothing. Elsewhere it is a hidden name beside the
//! target (`.NAME.cipherbench-<pid>-<random>.tmp`), removed on every exit path but
//! SIGKILL. With `--force`, an unnamed file is linked under such a name and renamed
//! onto the target at once (the one moment a name exists).
//!
//! The last thing [`AtomicFile::commit`] does before the file takes the target's
//! name is to ask whether to stop (Ctrl-C or SIGTERM): a stop asked for at any time
//! until then, even during the final fsync, leaves nothing under the target's name.
//!
//! An existing target is never replaced without `--force`: the check happens before
//! any work, and the final step is a hard link (which fails if the name appeared
//! meanwhile) rather than a rename. With `--force` it is an atomic rename.
//!
//! When the output is to be fsynced anyway, it is written with `O_DIRECT`
//! ([`DirectWriter`]): no copy into the page cache and no pile of dirty pages for
//! the final fsync, two writes in flight while the pipeline computes. Where the file
//! system does not support that, writeback is started every few MiB instead
//! (`sync_file_range`), so the disk works while the pipeline computes and the final
//! fsync has little left to do.

use super::direct::DirectWriter;
use super::sys;
use crate::interrupt::Interrupted;
use anyhow::{bail, Context, Result};
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Bytes written between two writeback starts.
const WRITEBACK_STEP: u64 = 8 << 20;

/// How the temporary file is being written.
enum Writer {
    /// Through the page cache; `writeback` starts writeback as it goes.
    Buffered {
        file: File,
        writeback: bool,
        written: u64,
        flushed: u64,
    },
    /// Around the page cache.
    Direct(DirectWriter),
    /// Committed or failed.
    Done,
}

/// A file being written under a temporary name beside its target, or under none.
pub struct AtomicFile {
    target: PathBuf,
    /// The temporary name: where the file is (named), or what it is linked as for
    /// a forced rename (unnamed). Empty once committed.
    temporary: PathBuf,
    /// The file has no name (`O_TMPFILE`).
    unnamed: bool,
    writer: Writer,
    force: bool,
    durable: bool,
}

/// Refuses a target that is a directory, or that exists without `force`.
pub(crate) fn check_target(target: &Path, force: bool) -> Result<()> {
    match std::fs::symlink_metadata(target) {
        Ok(m) if m.is_dir() => bail!("{} is a directory", target.display()),
        Ok(_) if !force => bail!(
            "{} already exists; pass --force to replace it",
            target.display()
        ),
        _ => Ok(()),
    }
}

impl AtomicFile {
    /// Checks the target and creates the temporary file with `mode` (before the
    /// umask). `durable` says the output will be fsynced: write it around the page
    /// cache where possible, else start writeback as data is written.
    pub fn create(target: &Path, force: bool, mode: u32, durable: bool) -> Result<AtomicFile> {
        check_target(target, force)?;
        let dir = match target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let name = target
            .file_name()
            .with_context(|| format!("{} names no file", target.display()))?
            .to_string_lossy()
            .into_owned();
        let mut tag = [0u8; 6];
        cipherbench_crypto::random_bytes(&mut tag).context("random temporary name")?;
        let temporary = dir.join(format!(
            ".{name}.cipherbench-{}-{}.tmp",
            std::process::id(),
            cipherbench_crypto::digest::to_hex(&tag)
        ));
        let unnamed = sys::open_unnamed(&dir, mode)
            .with_context(|| format!("creating a temporary file in {}", dir.display()))?;
        let is_unnamed = unnamed.is_some();
        let file = match unnamed {
            Some(f) => f,
            None => OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(mode)
                .open(&temporary)
                .with_context(|| format!("creating a temporary file in {}", dir.display()))?,
        };
        let writer = if durable {
            match DirectWriter::new(file) {
                Ok(w) => Writer::Direct(w),
                Err((file, _unsupported)) => Writer::Buffered {
                    file,
                    writeback: true,
                    written: 0,
                    flushed: 0,
                },
            }
        } else {
            Writer::Buffered {
                file,
                writeback: false,
                written: 0,
                flushed: 0,
            }
        };
        Ok(AtomicFile {
            target: target.to_path_buf(),
            temporary,
            unnamed: is_unnamed,
            writer,
            force,
            durable,
        })
    }

    /// Makes the file the target: fsync (if created `durable`), then, unless `stop`
    /// says to stop ([`Interrupted`]; the temporary file is removed), link or
    /// rename it into place and fsync the directory.
    pub fn commit(mut self, stop: &dyn Fn() -> bool) -> Result<()> {
        let file = match std::mem::replace(&mut self.writer, Writer::Done) {
            Writer::Buffered { file, .. } => file,
            Writer::Direct(w) => w
                .finish()
                .with_context(|| format!("writing {}", self.temporary.display()))?,
            Writer::Done => bail!("output already committed"),
        };
        if self.durable {
            file.sync_all().with_context(|| {
                format!("flushing the output for {} to disk", self.target.display())
            })?;
        }
        if stop() {
            // Drop removes the temporary file (an unnamed one went with `file`).
            return Err(Interrupted.into());
        }
        if self.unnamed {
            self.link_into_place(&file)?;
            drop(file);
        } else {
            drop(file);
            self.rename_into_place()?;
        }
        // Committed: nothing for drop to remove.
        self.temporary = PathBuf::new();
        if self.durable {
            let dir = match self.target.parent() {
                Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
                _ => PathBuf::from("."),
            };
            if let Ok(d) = File::open(&dir) {
                d.sync_all()
                    .with_context(|| format!("flushing the directory {}", dir.display()))?;
            }
        }
        Ok(())
    }
}

impl AtomicFile {
    /// Names an unnamed file: the target itself (refused if it appeared), or with
    /// `--force` a temporary name renamed onto the target.
    fn link_into_place(&mut self, file: &File) -> Result<()> {
        if !self.force {
            return match sys::link_unnamed(file, &self.target) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => bail!(
                    "{} appeared while writing; pass --force to replace it",
                    self.target.display()
                ),
                Err(e) => Err(e)
                    .with_context(|| format!("linking the output to {}", self.target.display())),
            };
        }
        sys::link_unnamed(file, &self.temporary)
            .with_context(|| format!("naming the output {}", self.temporary.display()))?;
        // From here the named temporary is removed on failure (drop).
        self.unnamed = false;
        std::fs::rename(&self.temporary, &self.target)
            .with_context(|| format!("renaming the output onto {}", self.target.display()))
    }

    /// Moves a named temporary onto the target: a rename with `--force`, else a hard
    /// link (refused if the name appeared), else, on a file system without links, a
    /// rename after a last check.
    fn rename_into_place(&mut self) -> Result<()> {
        if self.force {
            std::fs::rename(&self.temporary, &self.target)
                .with_context(|| format!("renaming the output onto {}", self.target.display()))?;
            return Ok(());
        }
        match std::fs::hard_link(&self.temporary, &self.target) {
            Ok(()) => {
                std::fs::remove_file(&self.temporary)
                    .with_context(|| format!("removing {}", self.temporary.display()))?;
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => bail!(
                "{} appeared while writing; pass --force to replace it",
                self.target.display()
            ),
            // File systems without hard links (FAT, some FUSE): a rename after a
            // last check; the window is the length of one syscall.
            Err(_) if !self.target.exists() => {
                std::fs::rename(&self.temporary, &self.target).with_context(|| {
                    format!("renaming the output onto {}", self.target.display())
                })?;
            }
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("linking the output to {}", self.target.display()))
            }
        }
        Ok(())
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut self.writer {
            Writer::Buffered {
                file,
                writeback,
                written,
                flushed,
            } => {
                let n = file.write(buf)?;
                *written += n as u64;
                if *writeback && *written - *flushed >= WRITEBACK_STEP {
                    // Advisory: a failure here only loses the overlap, never data.
                    let _ = sys::start_writeback(file, *flushed, *written - *flushed);
                    *flushed = *written;
                }
                Ok(n)
            }
            Writer::Direct(w) => w.write(buf),
            Writer::Done => Err(io::Error::other("output already committed")),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.writer {
            Writer::Buffered { file, .. } => file.flush(),
            Writer::Direct(w) => w.flush(),
            Writer::Done => Ok(()),
        }
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        // Stop the writer (its threads) before removing the file it writes.
        self.writer = Writer::Done;
        if !self.unnamed && !self.temporary.as_os_str().is_empty() {
            let _ = std::fs::remove_file(&self.temporary);
        }
    }
}

/// Whether two paths name the same existing file (so `seal x x` is refused rather
/// than replacing its own input).
pub fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("cb-out-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn commits_into_place_and_leaves_no_temporary() {
        let d = scratch("commit");
        let target = d.join("out");
        let mut f = AtomicFile::create(&target, false, 0o600, true).unwrap();
        f.write_all(b"hello").unwrap();
        assert!(!target.exists(), "the target appears only on commit");
        f.commit(&|| false).unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"hello");
        assert_eq!(entries(&d), vec!["out"]);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn dropping_without_commit_removes_the_temporary() {
        let d = scratch("drop");
        let mut f = AtomicFile::create(&d.join("out"), false, 0o600, false).unwrap();
        f.write_all(b"secret").unwrap();
        // Unnamed where the file system allows (nothing to see), else one hidden name.
        assert_eq!(entries(&d).len(), usize::from(!f.unnamed));
        drop(f);
        assert!(entries(&d).is_empty());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_stop_before_the_rename_leaves_neither_target_nor_temporary() {
        let d = scratch("stop");
        for durable in [false, true] {
            let mut f = AtomicFile::create(&d.join("out"), false, 0o600, durable).unwrap();
            f.write_all(b"whole, but stopped").unwrap();
            let err = f.commit(&|| true).unwrap_err();
            assert!(err.downcast_ref::<Interrupted>().is_some(), "{err}");
            assert!(entries(&d).is_empty(), "{:?}", entries(&d));
        }
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn an_existing_target_needs_force() {
        let d = scratch("force");
        let target = d.join("out");
        std::fs::write(&target, b"old").unwrap();
        let err = AtomicFile::create(&target, false, 0o600, false)
            .err()
            .unwrap();
        assert!(err.to_string().contains("--force"), "{err}");
        // Appearing while writing is caught too.
        std::fs::remove_file(&target).unwrap();
        let mut f = AtomicFile::create(&target, false, 0o600, false).unwrap();
        f.write_all(b"new").unwrap();
        std::fs::write(&target, b"raced").unwrap();
        assert!(f.commit(&|| false).is_err());
        assert_eq!(std::fs::read(&target).unwrap(), b"raced");
        assert_eq!(entries(&d), vec!["out"]);
        let mut f = AtomicFile::create(&target, true, 0o600, false).unwrap();
        f.write_all(b"forced").unwrap();
        f.commit(&|| false).unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"forced");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn recognises_the_same_file_under_two_names() {
        let d = scratch("same");
        std::fs::write(d.join("a"), b"x").unwrap();
        std::fs::hard_link(d.join("a"), d.join("b")).unwrap();
        assert!(same_file(&d.join("a"), &d.join("./b")));
        assert!(!same_file(&d.join("a"), &d.join("c")));
        std::fs::remove_dir_all(&d).unwrap();
    }
}
