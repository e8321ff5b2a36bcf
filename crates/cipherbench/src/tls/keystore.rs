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

/// Checks, before anything starts, that every library the variants name can serve
/// with every key store: nginx (`--nginx`, else the one found, else the one built
/// against the library: [`crate::library::Library::nginx_for`]) must load the
/// library (Debian's nginx cannot load an OpenSSL 4), and a PKCS#11 store needs an OpenSSL 3 (the pkcs11 engine needs the
/// ENGINE API OpenSSL 4 removed, and the system's pkcs11-provider is built for
/// `libcrypto.so.3`).
pub fn check_libraries(
    variants: &[crate::variant::Variant],
    nginx: Option<&Path>,
    stores: &[KeyStore],
) -> Result<()> {
    let libraries = crate::variant::libraries_of(variants);
    if libraries.iter().all(|l| l.is_system()) {
        return Ok(());
    }
    let binary = super::nginx::resolve_nginx(nginx)?;
    for library in &libraries {
        library.nginx_for(&binary)?;
        if library.soname() >= 4 {
            if let Some(k) = stores.iter().find(|k| k.single_process()) {
                bail!(
                    "--key-store {} on --openssl {} ({}): the pkcs11 engine needs the ENGINE API OpenSSL 4 removed, and the system's pkcs11-provider is built for libcrypto.so.3; measure the key store on an OpenSSL 3 library",
                    k.name(),
                    library.name(),
                    library.version()
                );
            }
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
/// pkcs11-provider's module (Debian 13 and later), in OpenSSL's modules directory.
pub const PKCS11_PROVIDERS: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu/ossl-modules/pkcs11.so",
    "/usr/lib/aarch64-linux-gnu/ossl-modules/pkcs11.so",
    "/usr/lib64/ossl-modules/pkcs11.so",
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

/// How OpenSSL reaches the PKCS#11 module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Through {
    /// pkcs11-provider (the path of its module): OpenSSL 3's provider interface,
    /// what OpenSSL 4.0 and RHEL 10 leave; nginx is given a PEM file holding only the
    /// key's PKCS#11 URI, which the provider's decoder turns into its key.
    Provider(PathBuf),
    /// libp11's pkcs11 engine (the path of the engine): OpenSSL's ENGINE API, where
    /// the provider is not installed (Debian 12); nginx is given `engine:pkcs11:URI`.
    Engine(PathBuf),
}

impl Through {
    /// `provider` or `engine`, as records say.
    pub fn name(&self) -> &'static str {
        match self {
            Through::Provider(_) => "provider",
            Through::Engine(_) => "engine",
        }
    }

    /// The provider's or engine's shared object.
    pub fn path(&self) -> &Path {
        match self {
            Through::Provider(p) | Through::Engine(p) => p,
        }
    }
}

/// What nginx is given for `ssl_certificate_key`, and the environment it needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// A PEM file.
    File(PathBuf),
    /// A key inside a PKCS#11 token.
    Pkcs11 {
        /// `engine:pkcs11:pkcs11:token=...;object=...;type=private;pin-value=...`,
        /// or the path of the PEM file holding the URI (provider).
        directive: String,
        /// Environment nginx runs with (`OPENSSL_CONF`, `SOFTHSM2_CONF`).
        env: Vec<(String, String)>,
        /// The module, for the record.
        module: PathBuf,
        /// The provider or engine loading it.
        through: Through,
    },
}

impl KeySource {
    /// The value of nginx's `ssl_certificate_key`.
    pub fn directive(&self) -> String {
        match self {
            KeySource::File(p) => p.display().to_string(),
            KeySource::Pkcs11 { directive, .. } => format!("\"{directive}\""),
        }
    }

    /// Whether nginx must run as one process (key handles break across `fork`).
    pub fn single_process(&self) -> bool {
        matches!(self, KeySource::Pkcs11 { .. })
    }

    /// Environment for nginx.
    pub fn env(&self) -> &[(String, String)] {
        match self {
            KeySource::File(_) => &[],
            KeySource::Pkcs11 { env, .. } => env,
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
        through()?;
        module_path(module.as_deref())?;
        softhsm2_util()?;
    }
    Ok(())
}

/// pkcs11-provider where it is installed, else the pkcs11 engine.
pub fn through() -> Result<Through> {
    through_of(
        first_existing(PKCS11_PROVIDERS),
        first_existing(PKCS11_ENGINES),
    )
}

/// The choice of [`through`], from what is installed. Pure.
fn through_of(provider: Option<PathBuf>, engine: Option<PathBuf>) -> Result<Through> {
    match (provider, engine) {
        (Some(p), _) => Ok(Through::Provider(p)),
        (None, Some(e)) => Ok(Through::Engine(e)),
        (None, None) => bail!("--key-store pkcs11 needs pkcs11-provider (Debian 13 and later) or OpenSSL's pkcs11 engine (libengine-pkcs11-openssl): `cipherbench doctor` gives the command for the one this system has"),
    }
}

fn module_path(flag: Option<&Path>) -> Result<PathBuf> {
    match flag {
        Some(p) if p.is_file() => Ok(p.to_path_buf()),
        Some(p) => bail!(
            "--pkcs11-module {}: no such file: give the path of a PKCS#11 module (.so)",
            p.display()
        ),
        None => first_existing(SOFTHSM2_MODULES).ok_or_else(|| {
            anyhow::anyhow!("--key-store pkcs11 needs a PKCS#11 module: install softhsm2 (`cipherbench doctor` gives the command for this system) or pass --pkcs11-module PATH")
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
            anyhow::anyhow!("--key-store pkcs11 writes its token with softhsm2-util: install softhsm2 (`cipherbench doctor` gives the command for this system)")
        })
}

/// Sets the key store up in `workspace` (whose `key.pem` is the server key) and
/// returns what nginx is given.
pub fn prepare(store: &KeyStore, workspace: &Workspace) -> Result<KeySource> {
    let module = match store {
        KeyStore::File => return Ok(KeySource::File(workspace.dir().join("key.pem"))),
        KeyStore::Pkcs11 { module } => module_path(module.as_deref())?,
    };
    let through = through()?;
    let util = softhsm2_util()?;
    let dir = workspace.dir().join("pkcs11");
    let tokens = dir.join("tokens");
    std::fs::create_dir_all(&tokens).with_context(|| format!("creating {}", tokens.display()))?;
    let softhsm_conf = dir.join("softhsm2.conf");
    std::fs::write(&softhsm_conf, softhsm2_conf(&tokens))
        .with_context(|| format!("writing {}", softhsm_conf.display()))?;
    let openssl_conf = dir.join("openssl.cnf");
    let conf = match &through {
        Through::Engine(engine) => openssl_conf_text(engine, &module),
        Through::Provider(provider) => provider_conf_text(provider, &module),
    };
    std::fs::write(&openssl_conf, conf)
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
    let directive = match &through {
        Through::Engine(_) => format!(
            "engine:pkcs11:pkcs11:token={TOKEN};object={OBJECT};type=private;pin-value={PIN}"
        ),
        Through::Provider(_) => {
            let uri_pem = dir.join("key-uri.pem");
            std::fs::write(
                &uri_pem,
                uri_pem_text(&format!(
                    "pkcs11:token={TOKEN};object={OBJECT};type=private"
                )),
            )
            .with_context(|| format!("writing {}", uri_pem.display()))?;
            uri_pem.display().to_string()
        }
    };
    Ok(KeySource::Pkcs11 {
        directive,
        env: vec![
            ("OPENSSL_CONF".into(), openssl_conf.display().to_string()),
            ("SOFTHSM2_CONF".into(), softhsm_conf.display().to_string()),
        ],
        module,
        through,
    })
}

/// Checks by effect that a started nginx took its key from the module: every
/// serving process has the module and the engine mapped (`/proc/<pid>/maps`), and
/// its config names the key only by its PKCS#11 URI, so the handshake
/// [`Server::start`] completed was signed (or decrypted) by the module's key. None
/// for a key in a file.
pub fn check_served(source: &KeySource, server: &Server) -> Option<KeyStoreCheck> {
    let KeySource::Pkcs11 {
        module,
        through,
        directive,
        ..
    } = source
    else {
        return None;
    };
    let mut pids = vec![server.pid()];
    for &w in server.workers() {
        if !pids.contains(&w) {
            pids.push(w);
        }
    }
    // The key named only by its URI: `engine:pkcs11:URI`, or the provider's PEM
    // file, which holds the URI and no key.
    let config_ok = !server.config().contains("/key.pem") && server.config().contains(directive);
    let mut missing = Vec::new();
    for &pid in &pids {
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
        for (what, path) in [
            ("module", module.as_path()),
            (through.name(), through.path()),
        ] {
            if !maps_contain(&maps, path) {
                missing.push(format!("pid {pid} has no {what} {} mapped", path.display()));
            }
        }
    }
    let served = config_ok && missing.is_empty();
    let explanation = if served {
        format!(
            "nginx (pid {}) served handshakes with the module {} and the {} {} mapped, its config naming the key only by its PKCS#11 URI",
            pids.iter().map(u32::to_string).collect::<Vec<_>>().join(", "),
            module.display(),
            through.name(),
            through.path().display()
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
        engine: through.path().display().to_string(),
        through: through.name().to_string(),
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

/// An OpenSSL config that loads pkcs11-provider beside the default provider, with
/// `module` and the token's PIN, so that the PEM file holding the key's URI decodes
/// to the token's key in nginx. Pure.
pub fn provider_conf_text(provider: &Path, module: &Path) -> String {
    format!(
        "# Generated by cipherbench for one run; removed with it.\nopenssl_conf = openssl_init\n\n[openssl_init]\nproviders = provider_section\n\n[provider_section]\ndefault = default_section\npkcs11 = pkcs11_section\n\n[default_section]\nactivate = 1\n\n[pkcs11_section]\nmodule = {}\npkcs11-module-path = {}\npkcs11-module-token-pin = {PIN}\nactivate = 1\n",
        provider.display(),
        module.display()
    )
}

/// pkcs11-provider's PEM form of a key's URI (`-----BEGIN PKCS#11 PROVIDER
/// URI-----`), for programs that load keys from files, as nginx before 1.27 does: the
/// DER of `SEQUENCE { desc VisibleString, uri UTF8String }` (the provider's
/// `uri2pem.py`). Pure.
pub fn uri_pem_text(uri: &str) -> String {
    fn tlv(tag: u8, body: &[u8]) -> Vec<u8> {
        let mut out = vec![tag];
        match body.len() {
            n @ 0..=127 => out.push(n as u8),
            n @ 128..=255 => out.extend([0x81, n as u8]),
            n => out.extend([0x82, (n >> 8) as u8, n as u8]),
        }
        out.extend_from_slice(body);
        out
    }
    let mut inner = tlv(0x1a, b"PKCS#11 Provider URI v1.0");
    inner.extend(tlv(0x0c, uri.as_bytes()));
    let der = tlv(0x30, &inner);
    let b64 = base64_encode(&der);
    let mut pem = String::from("-----BEGIN PKCS#11 PROVIDER URI-----\n");
    for line in b64.as_bytes().chunks(64) {
        pem.push_str(std::str::from_utf8(line).unwrap_or_default());
        pem.push('\n');
    }
    pem.push_str("-----END PKCS#11 PROVIDER URI-----\n");
    pem
}

/// Standard base64 with padding. Pure.
fn base64_encode(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
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

    /// The PEM is byte for byte what pkcs11-provider's uri2pem.py writes for the
    /// run's URI (and what the provider decoded in Debian 13's nginx 1.26.3).
    #[test]
    fn the_uri_pem_is_the_provider_s_format() {
        assert_eq!(
            uri_pem_text("pkcs11:token=cipherbench;object=server;type=private"),
            "-----BEGIN PKCS#11 PROVIDER URI-----\n\
MFAaGVBLQ1MjMTEgUHJvdmlkZXIgVVJJIHYxLjAMM3BrY3MxMTp0b2tlbj1jaXBo\n\
ZXJiZW5jaDtvYmplY3Q9c2VydmVyO3R5cGU9cHJpdmF0ZQ==\n\
-----END PKCS#11 PROVIDER URI-----\n"
        );
        assert_eq!(base64_encode(b"ab"), "YWI=");
        assert_eq!(base64_encode(b"abc"), "YWJj");
        assert_eq!(base64_encode(b"a"), "YQ==");
        // A long URI takes the two-byte length form.
        let long = uri_pem_text(&format!("pkcs11:object={}", "x".repeat(300)));
        assert!(long.lines().nth(1).unwrap().starts_with("MIIB"), "{long}");
    }

    #[test]
    fn the_provider_wins_where_both_are_installed_and_none_is_one_line() {
        let (p, e) = (PathBuf::from("/p.so"), PathBuf::from("/e.so"));
        assert_eq!(
            through_of(Some(p.clone()), Some(e.clone())).unwrap(),
            Through::Provider(p)
        );
        assert_eq!(
            through_of(None, Some(e.clone())).unwrap(),
            Through::Engine(e)
        );
        let err = through_of(None, None).unwrap_err().to_string();
        assert!(
            err.contains("pkcs11-provider") && err.contains("libengine-pkcs11-openssl"),
            "{err}"
        );
        let conf = provider_conf_text(Path::new("/p.so"), Path::new("/m.so"));
        assert!(
            conf.contains("module = /p.so\npkcs11-module-path = /m.so\n"),
            "{conf}"
        );
        assert!(conf.contains("[default_section]\nactivate = 1"), "{conf}");
    }

    #[test]
    fn an_engine_key_needs_one_process_and_a_quoted_directive() {
        let k = KeySource::Pkcs11 {
            directive: "engine:pkcs11:pkcs11:token=t;object=o".into(),
            env: vec![("OPENSSL_CONF".into(), "/x".into())],
            module: PathBuf::from("/m.so"),
            through: Through::Engine(PathBuf::from("/e.so")),
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
