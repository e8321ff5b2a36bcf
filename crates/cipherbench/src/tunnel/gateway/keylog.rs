//! The ESP key log file (`tunnel --esp-keylog FILE`): Wireshark's ESP SA table with
//! every SA of a run, so that tshark can decrypt a capture of the tunnel, as
//! `SSLKEYLOGFILE` serves TLS. It holds secret keys.
//!
//! The runner checks the path when the flags are resolved ([`check`]) and creates or
//! opens the file before the run ([`prepare`]): mode 0600, never through a symbolic
//! link, and an existing file only if nobody but its owner can read or write it.
//! Each gateway then appends the record of the SA it seals with ([`append`]), one
//! `write` on an `O_APPEND` descriptor, so the two gateways' lines never mix. The
//! records themselves are `cipherbench_esp::keylog`'s. Nothing is written unless
//! asked for.

use anyhow::{bail, Context, Result};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The file's first lines: what it is, and that it is secret.
const HEADER: &str =
    "# cipherbench ESP key log: Wireshark's ESP SA table (esp_sa), one record per SA.\n\
# SECRET: these keys decrypt the tunnel's traffic. Use it as the esp_sa file of a\n\
# Wireshark configuration (cipherbench's README: Decrypting a capture of the tunnel).\n";

/// Permission bits that let anyone but the owner in.
const GROUP_OR_OTHER: u32 = 0o077;

/// Refuses a path that cannot be a key log, before anything starts; returns it
/// absolute (the gateways write it from their own processes). Creates nothing.
pub fn check(path: &Path) -> Result<PathBuf> {
    let shown = path.display();
    let absolute = std::path::absolute(path)
        .with_context(|| format!("--esp-keylog {shown}: cannot resolve the path"))?;
    if !absolute.parent().is_some_and(Path::is_dir) {
        bail!("--esp-keylog {shown}: the directory it would go in does not exist");
    }
    match std::fs::symlink_metadata(&absolute) {
        // Created by `prepare` when the run starts, before anything else.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => bail!("--esp-keylog {shown}: {e}"),
        Ok(m) => check_existing(&m, &shown.to_string())?,
    }
    Ok(absolute)
}

fn check_existing(m: &std::fs::Metadata, shown: &str) -> Result<()> {
    if m.file_type().is_symlink() {
        bail!("--esp-keylog {shown}: is a symbolic link; give the file itself (the key log is never written through a link)");
    }
    if !m.file_type().is_file() {
        bail!("--esp-keylog {shown}: not a regular file");
    }
    let mode = m.mode() & 0o777;
    if mode & GROUP_OR_OTHER != 0 {
        bail!("--esp-keylog {shown}: others may read or write it (mode {mode:03o}) and it will hold secret keys: chmod 600 it, or give a new file");
    }
    Ok(())
}

/// Opens the key log for appending without following a link, and checks what was
/// opened (the path may have changed since [`check`]).
fn open(path: &Path, create: bool) -> Result<File> {
    let file = OpenOptions::new()
        .append(true)
        .create(create)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .with_context(|| format!("opening the ESP key log {}", path.display()))?;
    let m = file.metadata()?;
    check_existing(&m, &path.display().to_string())?;
    Ok(file)
}

/// Creates the key log (mode 0600) or opens the existing one, writing the header
/// into an empty file. Returns whether it was created, so a run that fails before
/// any SA can remove it again.
pub fn prepare(path: &Path) -> Result<bool> {
    let existed = std::fs::symlink_metadata(path).is_ok();
    let mut file = open(path, true)?;
    if file.metadata()?.len() == 0 {
        file.write_all(HEADER.as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(!existed)
}

/// Removes a key log that [`prepare`] created and no gateway wrote to.
pub fn remove_if_unused(path: &Path) {
    let unused = std::fs::read_to_string(path).is_ok_and(|text| text == HEADER);
    if unused {
        let _ = std::fs::remove_file(path);
    }
}

/// Appends one record (from `cipherbench_esp::keylog`) in a single `write`.
pub fn append(path: &Path, record: &str) -> Result<()> {
    let mut file = open(path, false)?;
    // One write on an O_APPEND descriptor: the other gateway's record goes wholly
    // before or after this one. A regular file takes a short record whole.
    let written = file
        .write(record.as_bytes())
        .with_context(|| format!("writing the ESP key log {}", path.display()))?;
    if written != record.len() {
        bail!(
            "the ESP key log {} took {written} of {} bytes",
            path.display(),
            record.len()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("cb-keylog-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn creates_the_key_log_private_and_appends_whole_records() {
        let dir = scratch("create");
        let path = check(&dir.join("keys")).unwrap();
        assert!(path.is_absolute());
        assert!(!path.exists(), "check creates nothing");
        assert!(prepare(&path).unwrap(), "created");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        append(&path, "\"IPv4\",\"a\"\n").unwrap();
        append(&path, "\"IPv4\",\"b\"\n").unwrap();
        // A second run appends to it, as SSLKEYLOGFILE does.
        assert!(!prepare(&path).unwrap(), "existed");
        append(&path, "\"IPv4\",\"c\"\n").unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            format!("{HEADER}\"IPv4\",\"a\"\n\"IPv4\",\"b\"\n\"IPv4\",\"c\"\n")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn refuses_readable_files_links_directories_and_missing_directories() {
        let dir = scratch("refuse");
        let open_file = dir.join("open");
        std::fs::write(&open_file, "").unwrap();
        std::fs::set_permissions(&open_file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = check(&open_file).unwrap_err().to_string();
        assert!(e.contains("mode 644") && e.contains("chmod 600"), "{e}");
        // The same refusal when the mode changed after the check.
        assert!(prepare(&open_file).is_err());
        assert!(append(&open_file, "x\n").is_err());
        assert_eq!(std::fs::read_to_string(&open_file).unwrap(), "");

        let target = dir.join("target");
        std::fs::write(&target, "").unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
        let link = dir.join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(check(&link)
            .unwrap_err()
            .to_string()
            .contains("symbolic link"));
        assert!(prepare(&link).is_err(), "O_NOFOLLOW");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "");

        assert!(check(&dir)
            .unwrap_err()
            .to_string()
            .contains("regular file"));
        let missing = dir.join("no/such/dir/keys");
        assert!(check(&missing)
            .unwrap_err()
            .to_string()
            .contains("does not exist"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_unused_key_log_is_removed_and_a_used_one_kept() {
        let dir = scratch("unused");
        let path = dir.join("keys");
        prepare(&path).unwrap();
        remove_if_unused(&path);
        assert!(!path.exists());
        prepare(&path).unwrap();
        append(&path, "\"IPv4\"\n").unwrap();
        remove_if_unused(&path);
        assert!(path.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
