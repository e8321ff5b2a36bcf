//! Where nginx's private key lives for a measurement: a PEM file in the run's
//! workspace (the default), or a PKCS#11 module reached through OpenSSL's ENGINE API
//! (seed 002's "the server offloads its key to a module"), with SoftHSM2 as the
//! module cipherbench can set up by itself.
//!
//! For PKCS#11, everything lives in the run's workspace and goes when it goes: a
//! SoftHSM2 config (`SOFTHSM2_CONF`) pointing at a token directory there, a token
//! initialised with a throwaway PIN, the server key imported into it, and an
//! OpenSSL config (`OPENSSL_CONF`) that loads libengine-pkcs11-openssl's engine with
//! that module. Nothing system-wide is read or written (no p11-kit module list, no
//! `/etc/softhsm`). nginx then loads the key as `engine:pkcs11:<RFC 7512 URI>`; key
//! handles do not survive `fork`, so nginx runs with `master_process off` (one
//! process, one core).
//!
//! This module prepares; nginx.rs renders the config and starts nginx.

use super::handshake::KeyStore;
use super::nginx::Workspace;
use crate::supervisor::Spawn;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// SoftHSM2's module, as Debian installs it.
pub const SOFTHSM2_MODULES: &[&str] = &[
    "/usr/lib/softhsm/libsofthsm2.so",
    "/usr/lib/x86_64-linux-gnu/softhsm/libsofthsm2.so",
    "/usr/lib64/pkcs11/libsofthsm2.so",
    "/usr/lib/pkcs11/libsofthsm2.so",
];
/// libengine-pkcs11-openssl's engine (libp11), for OpenSSL 3's engine directory.
pub const PKCS11_ENGINES: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu/engines-3/pkcs11.so",
    "/usr/lib/aarch64-linux-gnu/engines-3/pkcs11.so",
    "/usr/lib64/engines-3/pkcs11.so",
    "/usr/lib/engines-3/pkcs11.so",
];
/// The token's label.
const TOKEN: &str = "cipherbench";
/// The key object's label.
const OBJECT: &str = "server";
/// The user PIN of the throwaway token (it guards nothing but this run's key, in a
/// directory removed with the run).
const PIN: &str = "1234";
/// The security officer's PIN of the same token.
const SO_PIN: &str = "12345678";

/// What nginx is given for `ssl_certificate_key`, and the environment it needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// A PEM file.
    File(PathBuf),
    /// A key inside a PKCS#11 token, through the `pkcs11` engine.
    Engine {
        /// `engine:pkcs11:pkcs11:token=...;object=...;type=private;pin-value=...`.
        directive: String,
        /// Environment nginx runs with (`OPENSSL_CONF`, `SOFTHSM2_CONF`).
        env: Vec<(String, String)>,
        /// The module, for the record.
        module: PathBuf,
    },
}

impl KeySource {
    /// The value of nginx's `ssl_certificate_key`.
    pub fn directive(&self) -> String {
        match self {
            KeySource::File(p) => p.display().to_string(),
            KeySource::Engine { directive, .. } => format!("\"{directive}\""),
        }
    }

    /// Whether nginx must run as one process (key handles break across `fork`).
    pub fn single_process(&self) -> bool {
        matches!(self, KeySource::Engine { .. })
    }

    /// Environment for nginx.
    pub fn env(&self) -> &[(String, String)] {
        match self {
            KeySource::File(_) => &[],
            KeySource::Engine { env, .. } => env,
        }
    }
}

/// The first of `candidates` that exists.
fn first_existing(candidates: &[&str]) -> Option<PathBuf> {
    candidates.iter().map(PathBuf::from).find(|p| p.is_file())
}

/// Checks, before anything starts, that a key store can be set up here: for
/// PKCS#11, the engine, the module and `softhsm2-util` (which writes the token).
pub fn check(store: &KeyStore) -> Result<()> {
    if let KeyStore::Pkcs11 { module } = store {
        engine_path()?;
        module_path(module.as_deref())?;
        softhsm2_util()?;
    }
    Ok(())
}

fn engine_path() -> Result<PathBuf> {
    first_existing(PKCS11_ENGINES).ok_or_else(|| {
        anyhow::anyhow!("--key-store pkcs11 needs OpenSSL's pkcs11 engine: install libengine-pkcs11-openssl (scripts/install-deps.sh does)")
    })
}

fn module_path(flag: Option<&Path>) -> Result<PathBuf> {
    match flag {
        Some(p) if p.is_file() => Ok(p.to_path_buf()),
        Some(p) => bail!(
            "--pkcs11-module {}: no such file: give the path of a PKCS#11 module (.so)",
            p.display()
        ),
        None => first_existing(SOFTHSM2_MODULES).ok_or_else(|| {
            anyhow::anyhow!("--key-store pkcs11 needs a PKCS#11 module: install softhsm2 (scripts/install-deps.sh does) or pass --pkcs11-module PATH")
        }),
    }
}

fn softhsm2_util() -> Result<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join("softhsm2-util"))
        .chain([PathBuf::from("/usr/bin/softhsm2-util")])
        .find(|p| p.is_file())
        .ok_or_else(|| {
            anyhow::anyhow!("--key-store pkcs11 writes its token with softhsm2-util: install softhsm2 (scripts/install-deps.sh does)")
        })
}

/// Sets the key store up in `workspace` (whose `key.pem` is the server key) and
/// returns what nginx is given.
pub fn prepare(store: &KeyStore, workspace: &Workspace) -> Result<KeySource> {
    let module = match store {
        KeyStore::File => return Ok(KeySource::File(workspace.dir().join("key.pem"))),
        KeyStore::Pkcs11 { module } => module_path(module.as_deref())?,
    };
    let engine = engine_path()?;
    let util = softhsm2_util()?;
    let dir = workspace.dir().join("pkcs11");
    let tokens = dir.join("tokens");
    std::fs::create_dir_all(&tokens).with_context(|| format!("creating {}", tokens.display()))?;
    let softhsm_conf = dir.join("softhsm2.conf");
    std::fs::write(&softhsm_conf, softhsm2_conf(&tokens))
        .with_context(|| format!("writing {}", softhsm_conf.display()))?;
    let openssl_conf = dir.join("openssl.cnf");
    std::fs::write(&openssl_conf, openssl_conf_text(&engine, &module))
        .with_context(|| format!("writing {}", openssl_conf.display()))?;
    let run = |args: &[&str], what: &str| -> Result<()> {
        Spawn::new(&util)
            .args(args)
            .env("SOFTHSM2_CONF", &softhsm_conf)
            .output(Duration::from_secs(60))
            .with_context(|| format!("running softhsm2-util to {what}"))?
            .success(&format!("softhsm2-util ({what})"))?;
        Ok(())
    };
    run(
        &[
            "--init-token",
            "--free",
            "--label",
            TOKEN,
            "--pin",
            PIN,
            "--so-pin",
            SO_PIN,
        ],
        "initialise the run's token",
    )?;
    let key_pem = workspace.dir().join("key.pem");
    let key_arg = key_pem.display().to_string();
    run(
        &[
            "--import", &key_arg, "--token", TOKEN, "--label", OBJECT, "--id", "01", "--pin", PIN,
        ],
        "import the server key into the token",
    )?;
    Ok(KeySource::Engine {
        directive: format!(
            "engine:pkcs11:pkcs11:token={TOKEN};object={OBJECT};type=private;pin-value={PIN}"
        ),
        env: vec![
            ("OPENSSL_CONF".into(), openssl_conf.display().to_string()),
            ("SOFTHSM2_CONF".into(), softhsm_conf.display().to_string()),
        ],
        module,
    })
}

/// SoftHSM2's config: tokens in the run's directory, file store, errors only. Pure.
pub fn softhsm2_conf(tokens: &Path) -> String {
    format!(
        "# Generated by cipherbench for one run; removed with it.\ndirectories.tokendir = {}\nobjectstore.backend = file\nlog.level = ERROR\nslots.removable = false\n",
        tokens.display()
    )
}

/// An OpenSSL config that loads the pkcs11 engine with `module` (libp11's
/// `MODULE_PATH`) and initialises it, so `ENGINE_by_id("pkcs11")` in nginx finds
/// it ready. Pure.
pub fn openssl_conf_text(engine: &Path, module: &Path) -> String {
    format!(
        "# Generated by cipherbench for one run; removed with it.\nopenssl_conf = openssl_init\n\n[openssl_init]\nengines = engine_section\n\n[engine_section]\npkcs11 = pkcs11_section\n\n[pkcs11_section]\nengine_id = pkcs11\ndynamic_path = {}\nMODULE_PATH = {}\n",
        engine.display(),
        module.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_point_only_at_the_run_directory_and_the_module() {
        let s = softhsm2_conf(Path::new("/tmp/cb/pkcs11/tokens"));
        assert!(s.contains("directories.tokendir = /tmp/cb/pkcs11/tokens\n"));
        let o = openssl_conf_text(
            Path::new("/usr/lib/x86_64-linux-gnu/engines-3/pkcs11.so"),
            Path::new("/usr/lib/softhsm/libsofthsm2.so"),
        );
        assert!(o.starts_with("# Generated"));
        assert!(o.contains("openssl_conf = openssl_init"));
        assert!(o.contains("dynamic_path = /usr/lib/x86_64-linux-gnu/engines-3/pkcs11.so"));
        assert!(o.contains("MODULE_PATH = /usr/lib/softhsm/libsofthsm2.so"));
    }

    #[test]
    fn an_engine_key_needs_one_process_and_a_quoted_directive() {
        let k = KeySource::Engine {
            directive: "engine:pkcs11:pkcs11:token=t;object=o".into(),
            env: vec![("OPENSSL_CONF".into(), "/x".into())],
            module: PathBuf::from("/m.so"),
        };
        assert!(k.single_process());
        assert_eq!(k.directive(), "\"engine:pkcs11:pkcs11:token=t;object=o\"");
        assert!(!KeySource::File(PathBuf::from("/k.pem")).single_process());
    }
}
