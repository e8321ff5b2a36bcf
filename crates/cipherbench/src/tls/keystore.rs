//! Where nginx's private key lives for a measurement: a PEM file in the run's
//! workspace (the default), or a PKCS#11 module reached through OpenSSL's ENGINE API
//! (the IXP425 offload paper's "the server offloads its key to a module", seed 002),
//! with SoftHSM2 as the module cipherbench can set up by itself.
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
//! The same module any PKCS#11 module given by path goes through: the token is
//! initialised and the key imported with `softhsm2-util --module PATH`, which speaks
//! plain PKCS#11 to whichever module it is given.
//!
//! This module parses `--key-store`, prepares, and checks by effect that a started
//! nginx did take its key from the module ([`check_served`]); nginx.rs renders the
//! config and starts nginx. `tls handshake`, `tls sweep` and `tls ramp` share it.

use super::nginx::{Server, Workspace};
use super::suite::Suite;
use crate::supervisor::Spawn;
use anyhow::{bail, Context, Result};
use cipherbench_model::tls::{KeyStoreCheck, KeyStoreSkip};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where nginx's private key is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyStore {
    /// A PEM file in the run's workspace.
    File,
    /// A PKCS#11 module (SoftHSM2 unless a module path is given), reached through
    /// libengine-pkcs11-openssl.
    Pkcs11 {
        /// The module (`--pkcs11-module`), None: SoftHSM2's.
        module: Option<PathBuf>,
    },
}

impl KeyStore {
    /// The name in records.
    pub fn name(&self) -> &'static str {
        match self {
            KeyStore::File => "file",
            KeyStore::Pkcs11 { .. } => "pkcs11",
        }
    }

    /// Whether nginx serves this key from one process (a module's key handles do
    /// not survive `fork`).
    pub fn single_process(&self) -> bool {
        matches!(self, KeyStore::Pkcs11 { .. })
    }
}

/// Parses a `--key-store` list (file first whenever it is in it: the other stores
/// are compared with it) and checks each store can be set up here.
pub fn parse(text: &str, module: Option<&Path>) -> Result<Vec<KeyStore>> {
    let mut out = Vec::new();
    for t in text.split(',') {
        let k = match t.trim() {
            "file" => KeyStore::File,
            "pkcs11" => KeyStore::Pkcs11 {
                module: module.map(|m| m.to_path_buf()),
            },
            t => bail!("--key-store: unknown '{t}': use file, pkcs11, or file,pkcs11"),
        };
        if !out.contains(&k) {
            out.push(k);
        }
    }
    if module.is_some() && !out.iter().any(KeyStore::single_process) {
        bail!("--pkcs11-module applies only with --key-store pkcs11");
    }
    out.sort_by_key(|k| k.single_process());
    for k in &out {
        check(k)?;
    }
    Ok(out)
}

/// Why a store cannot serve `suite` on `cores` nginx cores, if it cannot: a
/// module's key only on one core (one nginx process), and not for RSA key exchange
/// (OpenSSL 3's TLS decrypts the premaster with `RSA_PKCS1_WITH_TLS_PADDING`, which
/// the pkcs11 engine's RSA method refuses: "illegal or unsupported padding mode").
pub fn cannot_serve(store: &KeyStore, suite: &Suite, cores: usize) -> Option<String> {
    if !store.single_process() {
        return None;
    }
    if suite.rsa_key_exchange() {
        return Some(format!(
            "not measured with the key in {}: {} uses RSA key exchange, and the pkcs11 engine cannot decrypt with the padding OpenSSL 3's TLS asks for (nginx logs 'illegal or unsupported padding mode'); ECDHE and TLS 1.3 suites sign with the key and are measured",
            store.name(),
            suite.openssl
        ));
    }
    if cores > 1 {
        return Some(format!(
            "not measured with the key in {}: nginx serves a PKCS#11 module's key from one process (master_process off: the module's key handles do not survive fork), so at {cores} cores it would be one process against {cores} workers; measured at 1 core",
            store.name()
        ));
    }
    None
}

/// What each store will not be measured at in a plan of `suites` x `cores`: a suite
/// it cannot serve at all, then each core count above one.
pub fn skips(stores: &[KeyStore], suites: &[Suite], cores: &[usize]) -> Vec<KeyStoreSkip> {
    let mut out = Vec::new();
    for k in stores.iter().filter(|k| k.single_process()) {
        let servable: Vec<&Suite> = suites
            .iter()
            .filter(|s| {
                let why = cannot_serve(k, s, 1);
                if let Some(reason) = &why {
                    out.push(KeyStoreSkip {
                        key_store: k.name().into(),
                        cores: None,
                        suite: Some(s.openssl.into()),
                        reason: reason.clone(),
                    });
                }
                why.is_none()
            })
            .collect();
        for &c in cores {
            if let Some(reason) = servable.first().and_then(|s| cannot_serve(k, s, c)) {
                out.push(KeyStoreSkip {
                    key_store: k.name().into(),
                    cores: Some(c),
                    suite: None,
                    reason,
                });
            }
        }
    }
    out
}

/// Refuses a plan in which a store asked for would measure nothing: every suite
/// one it cannot serve, or no core count it can serve on. `cores_flag` says how to
/// give one core.
pub fn check_plan(
    stores: &[KeyStore],
    suites: &[Suite],
    cores: &[usize],
    cores_flag: &str,
) -> Result<()> {
    for k in stores.iter().filter(|k| k.single_process()) {
        if !suites.is_empty() && suites.iter().all(|s| s.rsa_key_exchange()) {
            bail!(
                "--key-store {}: every suite asked for uses RSA key exchange, which the pkcs11 engine cannot decrypt under OpenSSL 3's TLS: add an ECDHE or TLS 1.3 suite (--suites ECDHE-RSA-AES128-GCM-SHA256,AES128-GCM-SHA256)",
                k.name()
            );
        }
        if !cores.contains(&1) {
            return Err(one_process_only(cores_flag));
        }
    }
    Ok(())
}

/// The one line for a PKCS#11 key store asked of more than one nginx core.
pub fn one_process_only(flag: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "--key-store pkcs11 runs nginx as one process (key handles break across fork): {flag}"
    )
}

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
        /// OpenSSL's pkcs11 engine loading it.
        engine: PathBuf,
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
    let module_arg = module.display().to_string();
    let run = |args: &[&str], what: &str| -> Result<()> {
        // `--module`: the token is made in the module nginx will use, whichever it is.
        Spawn::new(&util)
            .args(["--module", module_arg.as_str()])
            .args(args)
            .env("SOFTHSM2_CONF", &softhsm_conf)
            .output(Duration::from_secs(60))
            .with_context(|| format!("running softhsm2-util to {what}"))?
            .success(&format!(
                "PKCS#11 module {}: softhsm2-util --module (to {what})",
                module.display()
            ))
            .map_err(|e| {
                // softhsm2-util may print the bytes of a library that is no module.
                let said: String = format!("{e:#}")
                    .chars()
                    .filter(|c| !c.is_control() && *c != char::REPLACEMENT_CHARACTER)
                    .collect();
                anyhow::anyhow!("{said}; check that --pkcs11-module names a PKCS#11 module whose tokens can be initialised")
            })?;
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
        engine,
    })
}

/// Checks by effect that a started nginx took its key from the module: every
/// serving process has the module and the engine mapped (`/proc/<pid>/maps`), and
/// its config names the key only by its PKCS#11 URI, so the handshake
/// [`Server::start`] completed was signed (or decrypted) by the module's key. None
/// for a key in a file.
pub fn check_served(source: &KeySource, server: &Server) -> Option<KeyStoreCheck> {
    let KeySource::Engine { module, engine, .. } = source else {
        return None;
    };
    let mut pids = vec![server.pid()];
    for &w in server.workers() {
        if !pids.contains(&w) {
            pids.push(w);
        }
    }
    let config_ok =
        !server.config().contains("key.pem") && server.config().contains("engine:pkcs11:");
    let mut missing = Vec::new();
    for &pid in &pids {
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
        for (what, path) in [("module", module), ("engine", engine)] {
            if !maps_contain(&maps, path) {
                missing.push(format!("pid {pid} has no {what} {} mapped", path.display()));
            }
        }
    }
    let served = config_ok && missing.is_empty();
    let explanation = if served {
        format!(
            "nginx (pid {}) served handshakes with the module {} and the engine {} mapped, its config naming the key only by its PKCS#11 URI",
            pids.iter().map(u32::to_string).collect::<Vec<_>>().join(", "),
            module.display(),
            engine.display()
        )
    } else if !config_ok {
        "nginx's config names a key file, not the module's key".to_string()
    } else {
        format!(
            "{}: the key may not have come from the module",
            missing.join("; ")
        )
    };
    Some(KeyStoreCheck {
        module: module.display().to_string(),
        engine: engine.display().to_string(),
        pids,
        served,
        explanation,
    })
}

/// Whether a `/proc/<pid>/maps` text maps `path` (or the file it links to). Pure
/// but for resolving the link.
fn maps_contain(maps: &str, path: &Path) -> bool {
    let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    crate::library::mapped_paths(maps).any(|m| m == path || m == real)
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
            engine: PathBuf::from("/e.so"),
        };
        assert!(k.single_process());
        assert_eq!(k.directive(), "\"engine:pkcs11:pkcs11:token=t;object=o\"");
        assert!(!KeySource::File(PathBuf::from("/k.pem")).single_process());
    }

    #[test]
    fn a_mapped_module_is_found_by_its_path_in_the_maps() {
        let maps = "7f00-7f10 r-xp 00000000 08:01 42 /usr/lib/softhsm/libsofthsm2.so\n7f20-7f30 r--p 00000000 00:00 0 \n";
        assert!(maps_contain(
            maps,
            Path::new("/usr/lib/softhsm/libsofthsm2.so")
        ));
        assert!(!maps_contain(maps, Path::new("/usr/lib/other/libp11.so")));
    }

    #[test]
    fn key_stores_parse_file_first_and_refuse_in_one_line() {
        assert_eq!(parse("file", None).unwrap(), vec![KeyStore::File]);
        let err = parse("hsm", None).unwrap_err().to_string();
        assert!(err.contains("file, pkcs11"), "{err}");
        let err = parse("file", Some(Path::new("/m.so")))
            .unwrap_err()
            .to_string();
        assert!(err.contains("only with --key-store pkcs11"), "{err}");
    }
}
