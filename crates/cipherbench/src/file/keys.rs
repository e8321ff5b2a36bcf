//! Secrets for `seal` and `open`: key files (generated with mode 0600, refused when
//! group or others can read or write them), passphrase files (the same rule) and a
//! passphrase typed at the terminal. A key is never taken from the command line or
//! the environment, where other processes can see it.

use super::sys;
use anyhow::{bail, Context, Result};
use cipherbench_crypto::secret::SecretBytes;
use cipherbench_stream::KEY_LEN;
use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Where the secret comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretSource {
    /// A 32-byte key file.
    KeyFile(PathBuf),
    /// A file holding a passphrase (one trailing newline is ignored).
    PassphraseFile(PathBuf),
    /// Ask on the terminal.
    Prompt,
}

/// A loaded secret.
pub enum Secret {
    /// Key bytes.
    Key(SecretBytes),
    /// Passphrase bytes.
    Passphrase(SecretBytes),
}

impl Secret {
    /// The stream crate's view of it.
    pub fn credential(&self) -> cipherbench_stream::Credential<'_> {
        match self {
            Secret::Key(k) => cipherbench_stream::Credential::Key(k.expose()),
            Secret::Passphrase(p) => cipherbench_stream::Credential::Passphrase(p.expose()),
        }
    }
}

/// Creates a new key file: 32 random bytes, mode 0600, never replacing a file.
pub fn generate_key_file(path: &Path) -> Result<()> {
    let key = SecretBytes::random(KEY_LEN).context("generating a key")?;
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| {
            if path.exists() {
                format!(
                    "{} already exists; a key file is never overwritten",
                    path.display()
                )
            } else {
                format!("creating the key file {}", path.display())
            }
        })?;
    // The umask cannot widen 0600, but a narrower umask could make it 0400 or less;
    // set it exactly.
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    let written = file.write_all(key.expose()).and_then(|()| file.sync_all());
    if let Err(e) = written {
        let _ = std::fs::remove_file(path);
        return Err(e).with_context(|| format!("writing the key file {}", path.display()));
    }
    if let Some(dir) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}

/// Opens a secret file after checking that it is a regular file that only its owner
/// can read or write.
fn read_secret_file(path: &Path, what: &str, max_len: usize) -> Result<SecretBytes> {
    let file = std::fs::File::open(path)
        .with_context(|| format!("cannot read the {what} {}", path.display()))?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        bail!("the {what} {} is not a regular file", path.display());
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        bail!(
            "the {what} {} is accessible to group or others (mode {mode:04o}); run `chmod 600 {}`",
            path.display(),
            path.display()
        );
    }
    let mut bytes = Vec::with_capacity(max_len.min(4096));
    file.take(max_len as u64 + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("reading the {what} {}", path.display()))?;
    Ok(SecretBytes::new(bytes))
}

/// Reads a 32-byte key file.
pub fn read_key_file(path: &Path) -> Result<SecretBytes> {
    let key = read_secret_file(path, "key file", KEY_LEN)?;
    if key.len() != KEY_LEN {
        bail!(
            "the key file {} is not a cipherbench key: {} bytes, expected {KEY_LEN} (make one with `cipherbench seal --gen-key FILE`)",
            path.display(),
            if key.len() > KEY_LEN { format!("more than {KEY_LEN}") } else { key.len().to_string() }
        );
    }
    Ok(key)
}

/// Reads a passphrase file: its contents up to one trailing newline.
pub fn read_passphrase_file(path: &Path) -> Result<SecretBytes> {
    const MAX: usize = 4096;
    let raw = read_secret_file(path, "passphrase file", MAX)?;
    if raw.len() > MAX {
        bail!(
            "the passphrase file {} is longer than {MAX} bytes",
            path.display()
        );
    }
    let passphrase = strip_newline(raw.expose());
    if passphrase.is_empty() {
        bail!("the passphrase file {} is empty", path.display());
    }
    Ok(SecretBytes::new(passphrase.to_vec()))
}

fn strip_newline(bytes: &[u8]) -> &[u8] {
    let b = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    b.strip_suffix(b"\r").unwrap_or(b)
}

/// Loads the secret; `confirm` asks a typed passphrase twice (for sealing).
pub fn load(source: &SecretSource, confirm: bool) -> Result<Secret> {
    match source {
        SecretSource::KeyFile(p) => Ok(Secret::Key(read_key_file(p)?)),
        SecretSource::PassphraseFile(p) => Ok(Secret::Passphrase(read_passphrase_file(p)?)),
        SecretSource::Prompt => {
            let first = SecretBytes::new(sys::prompt_passphrase("passphrase: ")?);
            if first.is_empty() {
                bail!("an empty passphrase is not accepted");
            }
            if confirm {
                let again = SecretBytes::new(sys::prompt_passphrase("passphrase (again): ")?);
                if !cipherbench_crypto::constant_time_eq(first.expose(), again.expose()) {
                    bail!("the two passphrases differ");
                }
            }
            Ok(Secret::Passphrase(first))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("cb-keys-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn generated_key_files_are_private_and_never_overwritten() {
        let d = scratch("gen");
        let k = d.join("k");
        generate_key_file(&k).unwrap();
        let meta = std::fs::metadata(&k).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(meta.len(), 32);
        let before = std::fs::read(&k).unwrap();
        let err = generate_key_file(&k).unwrap_err();
        assert!(format!("{err:#}").contains("never overwritten"), "{err:#}");
        assert_eq!(std::fs::read(&k).unwrap(), before);
        assert_eq!(read_key_file(&k).unwrap().expose(), &before[..]);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn refuses_key_files_others_can_read_and_wrong_sizes() {
        let d = scratch("mode");
        let k = d.join("k");
        generate_key_file(&k).unwrap();
        for mode in [0o644, 0o640, 0o602] {
            std::fs::set_permissions(&k, std::fs::Permissions::from_mode(mode)).unwrap();
            let err = read_key_file(&k).unwrap_err().to_string();
            assert!(err.contains("chmod 600"), "{mode:o}: {err}");
        }
        std::fs::set_permissions(&k, std::fs::Permissions::from_mode(0o400)).unwrap();
        assert!(read_key_file(&k).is_ok(), "read-only for the owner is fine");
        let short = d.join("short");
        std::fs::write(&short, [1u8; 31]).unwrap();
        std::fs::set_permissions(&short, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(read_key_file(&short)
            .unwrap_err()
            .to_string()
            .contains("31 bytes"));
        std::fs::write(&short, [1u8; 33]).unwrap();
        assert!(read_key_file(&short)
            .unwrap_err()
            .to_string()
            .contains("more than 32"));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn passphrase_files_lose_one_trailing_newline() {
        let d = scratch("pass");
        let p = d.join("p");
        for (content, want) in [
            (&b"hunter2\n"[..], &b"hunter2"[..]),
            (b"hunter2\r\n", b"hunter2"),
            (b"two words\n\n", b"two words\n"),
            (b"no newline", b"no newline"),
        ] {
            std::fs::write(&p, content).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
            assert_eq!(read_passphrase_file(&p).unwrap().expose(), want);
        }
        std::fs::write(&p, b"\n").unwrap();
        assert!(read_passphrase_file(&p)
            .unwrap_err()
            .to_string()
            .contains("empty"));
        std::fs::remove_dir_all(&d).unwrap();
    }
}
