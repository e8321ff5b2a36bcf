//! Provider and engine variants: what they put in a child's environment, the check
//! that their configuration loads before anything starts, and the answer a child
//! gives about which implementation served each algorithm.
//!
//! A provider variant (`provider:CONF`) runs every process of a layer with
//! `OPENSSL_CONF=CONF` (absolute), so the user's configuration picks the provider
//! and its properties; `OPENSSL_MODULES` and `LD_LIBRARY_PATH` pass through from the
//! user's environment. An engine variant (`engine:ID`) runs them with a generated
//! configuration that loads the engine and makes it the default for every
//! algorithm it has (`default_algorithms = ALL`), as an administrator would.
//!
//! Neither is trusted by its name: OpenSSL goes on without a provider that fails
//! to load, and an engine may switch itself off on a CPU it does not support. So
//! each variant's own process (the speed worker, the gateway, the probe child with
//! nginx's environment) asks its library who serves every algorithm the layers
//! fetch ([`crate::effect::implementation_here`]), and `judge` calls the variant's work on a cipher a fallback
//! when the default provider served it (METHODOLOGY.md, "Provider and engine
//! variants"). A provider or engine that keeps a tally (the counting test provider,
//! `testdata/provider/counting.c`, and test engine, `testdata/engine/cbcount.c`)
//! writes it to the file named by [`COUNTER_ENV`], one per variant, read after each
//! layer: an independent check that it took work.

use crate::lifetime::RunDir;
use anyhow::{bail, Context, Result};
use cipherbench_model::variant::ProviderCalls;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// The variable naming the file a counting provider keeps its tally in.
pub const COUNTER_ENV: &str = "CIPHERBENCH_PROVIDER_COUNTER";
/// The tally's first word: "COUNTING" in little-endian ASCII.
const COUNTER_MAGIC: u64 = 0x474e_4954_4e55_4f43;
/// Providers that are not a variant's own: what a fetch falls back to.
const LIBRARY_PROVIDERS: [&str; 3] = ["default", "base", "null"];

/// A checked `provider:CONF`: the configuration's absolute path and the counter
/// file its processes tally in.
pub fn provider(conf: &str) -> Result<(PathBuf, PathBuf)> {
    let given = Path::new(conf);
    if conf.is_empty() {
        bail!("provider: needs an OpenSSL configuration file: provider:/path/to/openssl.cnf");
    }
    let path = std::fs::canonicalize(given).with_context(|| {
        format!("provider:{conf}: no such OpenSSL configuration file; give the path of an openssl.cnf that loads the provider")
    })?;
    if !path.is_file() {
        bail!(
            "provider:{conf}: not a file; give the path of an openssl.cnf that loads the provider"
        );
    }
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("provider:{conf}: reading {}", path.display()))?;
    let declared = declared_providers(&text);
    let check = cipherbench_crypto::info::config_check(&path, &declared).map_err(|e| {
        anyhow::anyhow!("provider:{conf}: OpenSSL cannot load this configuration: {e}")
    })?;
    if let Some((name, why)) = check.failed.first() {
        bail!(
            "provider:{conf}: provider '{name}' did not load ({why}); give its module an absolute path or set OPENSSL_MODULES to its directory"
        );
    }
    if !check
        .active
        .iter()
        .any(|p| !LIBRARY_PROVIDERS.contains(&p.as_str()))
    {
        bail!(
            "provider:{conf}: the configuration activates no provider besides OpenSSL's own ({}); it needs a [provider_sect] entry with 'module' and 'activate = 1'",
            check.active.join(", ")
        );
    }
    Ok((path, counter_path()?))
}

/// A checked `engine:ID`: the generated configuration that makes the engine the
/// default for its algorithms, and the counter file its processes may tally in.
/// The engine must load and initialise here (`openssl engine -t` says
/// `available`), else one line says what OpenSSL said.
pub fn engine(id: &str) -> Result<(PathBuf, PathBuf)> {
    if id.is_empty()
        || !id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
    {
        bail!("engine:{id}: an engine id is letters, digits, '_', '-' or '.', as `openssl engine` lists them");
    }
    let out = crate::supervisor::Spawn::new("openssl")
        .args(["engine", "-t", id])
        .output(std::time::Duration::from_secs(10))
        .with_context(|| format!("engine:{id}: running openssl engine -t {id}"))?;
    if !out.status.success() || !out.stdout.contains("[ available ]") {
        // The verdict line (`(id) name; [ unavailable ]`), else OpenSSL's first
        // error without its thread and source prefix.
        let said = if out.stdout.contains("[ unavailable ]") {
            out.stdout
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect::<Vec<_>>()
                .join(" ")
        } else {
            let first = out.stderr.lines().map(str::trim).find(|l| !l.is_empty());
            match first {
                Some(l) => l
                    .split_once(":error:")
                    .map(|(_, rest)| rest.to_string())
                    .unwrap_or_else(|| l.to_string()),
                None => format!("exit {}", out.status),
            }
        };
        bail!(
            "engine:{id}: the engine does not load or initialise here (openssl engine -t {id}: {said}); install it, or set OPENSSL_ENGINES to its directory"
        );
    }
    let path = scratch()?.join(format!("engine-{id}.cnf"));
    std::fs::write(
        &path,
        format!(
            "# Written by cipherbench for the variant engine:{id}.\nopenssl_conf = openssl_init\n\n[openssl_init]\nengines = engine_sect\n\n[engine_sect]\n{id} = {id}_sect\n\n[{id}_sect]\nengine_id = {id}\ndefault_algorithms = ALL\ninit = 1\n"
        ),
    )
    .with_context(|| format!("writing {}", path.display()))?;
    Ok((path, counter_path()?))
}

/// The provider names a configuration declares: the keys of the section its
/// `providers = SECTION` line names. A reading good enough to name a provider that
/// failed; OpenSSL's own reading decides what loads.
pub fn declared_providers(text: &str) -> Vec<String> {
    let lines: Vec<(Option<String>, String, String)> = {
        let mut section: Option<String> = None;
        let mut out = Vec::new();
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or("").trim();
            if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                section = Some(name.trim().to_string());
            } else if let Some((k, v)) = line.split_once('=') {
                out.push((section.clone(), k.trim().to_string(), v.trim().to_string()));
            }
        }
        out
    };
    let Some(sect) = lines
        .iter()
        .find(|(_, k, _)| k == "providers")
        .map(|(_, _, v)| v.clone())
    else {
        return Vec::new();
    };
    lines
        .iter()
        .filter(|(s, _, _)| s.as_deref() == Some(sect.as_str()))
        .map(|(_, k, _)| k.clone())
        .collect()
}

/// A fresh counter file's path for one provider or engine variant (the file is
/// made by the provider or engine, in this run's scratch directory).
fn counter_path() -> Result<PathBuf> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    Ok(scratch()?.join(format!(
        "provider-{}.count",
        NEXT.fetch_add(1, Ordering::SeqCst)
    )))
}

static SCRATCH: Mutex<Option<RunDir>> = Mutex::new(None);

/// This run's directory for counter files and generated configurations, made on
/// first use under the run's temp root (owner-tagged, swept if we are killed).
fn scratch() -> Result<PathBuf> {
    let mut guard = SCRATCH.lock().unwrap_or_else(|p| p.into_inner());
    if guard.is_none() {
        *guard = Some(RunDir::create(
            "implementation",
            "provider and engine variant files",
        )?);
    }
    Ok(guard
        .as_ref()
        .map(|d| d.path().to_path_buf())
        .unwrap_or_default())
}

/// Removes the scratch directory (at the end of a command).
pub fn release() {
    SCRATCH.lock().unwrap_or_else(|p| p.into_inner()).take();
}

/// Reads a counter file (None if no process wrote it or it is not a tally).
pub fn read_counter(path: &Path) -> Option<ProviderCalls> {
    let bytes = std::fs::read(path).ok()?;
    parse_counter(&bytes)
}

/// A tally from the counter file's bytes: four native-endian 64-bit words, magic
/// first. Pure.
pub fn parse_counter(bytes: &[u8]) -> Option<ProviderCalls> {
    let word = |i: usize| -> Option<u64> {
        Some(u64::from_ne_bytes(
            bytes.get(i * 8..i * 8 + 8)?.try_into().ok()?,
        ))
    };
    (word(0)? == COUNTER_MAGIC).then_some(ProviderCalls {
        contexts: word(1)?,
        calls: word(2)?,
        bytes: word(3)?,
    })
}

/// Zeroes a counter before a layer, so that what it reads after is the layer's.
/// The processes of the layer before have ended, so nothing writes meanwhile.
pub fn reset_counter(path: &Path) {
    let _ = std::fs::remove_file(path);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_providers_a_configuration_declares() {
        let text = "openssl_conf = init\n[init]\nproviders = p # ours\n\n[p]\ndefault = d\ncounting = c\n[c]\nmodule = counting.so\n";
        assert_eq!(declared_providers(text), ["default", "counting"]);
        assert!(declared_providers("[x]\na = b\n").is_empty());
    }

    #[test]
    fn reads_a_tally_only_with_its_magic() {
        let mut bytes = Vec::new();
        for w in [COUNTER_MAGIC, 2, 40, 65536] {
            bytes.extend_from_slice(&w.to_ne_bytes());
        }
        let c = parse_counter(&bytes).unwrap();
        assert_eq!((c.contexts, c.calls, c.bytes), (2, 40, 65536));
        bytes[0] ^= 1;
        assert_eq!(parse_counter(&bytes), None);
        assert_eq!(parse_counter(&[0; 8]), None);
    }

    #[test]
    fn refuses_a_missing_configuration_in_one_line() {
        let err = format!("{:#}", provider("/nonexistent/openssl.cnf").unwrap_err());
        assert!(
            err.starts_with(
                "provider:/nonexistent/openssl.cnf: no such OpenSSL configuration file"
            ),
            "{err}"
        );
        assert!(!err.contains('\n'));
    }

    #[test]
    fn this_process_is_served_by_the_default_provider() {
        let imp = crate::effect::implementation_here();
        let gcm = imp
            .served
            .iter()
            .find(|s| s.algorithm == "AES-128-GCM")
            .unwrap();
        assert_eq!(gcm.provider.as_deref(), Some("default"));
        assert_eq!(gcm.cipher, "aes-128-gcm");
        assert!(imp.served.iter().any(|s| s.kind == "digest"));
        assert!(!imp.cpu_vendor.is_empty());
    }
}
