//! What OpenSSL cipherbench links, and which CPU capabilities it uses.

/// `OpenSSL_version(OPENSSL_VERSION)`, such as `OpenSSL 3.0.19 27 Jan 2026`.
pub fn library_version() -> String {
    crate::ffi::library_version()
}

/// `OpenSSL_version(OPENSSL_VERSION)` of the library file at `path`, opened beside
/// this process's own (see `ffi::version_of_file`): what a library the loader refuses
/// says it is. Only for a short-lived process made for the purpose.
pub fn version_of_file(path: &std::path::Path) -> Result<String, String> {
    crate::ffi::version_of_file(path)
}

/// The capability vector the library uses in this process, as `openssl info
/// -cpusettings` prints it: `OPENSSL_ia32cap=0x...:0x...`, followed by `env:...` when
/// `OPENSSL_ia32cap` was set. OpenSSL reads the variable once, at start-up, so a
/// process can only report the vector its own environment produced.
pub fn cpu_settings() -> Option<String> {
    crate::ffi::cpu_settings()
}

/// Who serves one algorithm in this process: the provider a default fetch returns,
/// and the ENGINE bound to it as its default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    /// `OSSL_PROVIDER_get0_name` of the fetched algorithm's provider (None: the
    /// library has no implementation).
    pub provider: Option<String>,
    /// The id of the ENGINE bound to the algorithm (None: none, or a library built
    /// without engines).
    pub engine: Option<String>,
}

/// Who serves the cipher `name` (OpenSSL's spelling, `AES-128-GCM`) here.
pub fn cipher_served_by(name: &str) -> Served {
    let s = crate::ffi::served_by(name, false);
    Served {
        provider: s.provider,
        engine: s.engine,
    }
}

/// Who serves the digest `name` (`SHA256`) here.
pub fn digest_served_by(name: &str) -> Served {
    let s = crate::ffi::served_by(name, true);
    Served {
        provider: s.provider,
        engine: s.engine,
    }
}

/// The providers active in this process's default library context.
pub fn active_providers() -> Vec<String> {
    crate::ffi::active_providers()
}

/// What loading an OpenSSL configuration file shows, in a fresh library context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigCheck {
    /// The providers active after the configuration is loaded.
    pub active: Vec<String>,
    /// Each declared provider that is not active, with OpenSSL's error on loading it
    /// by name.
    pub failed: Vec<(String, String)>,
}

/// Loads the OpenSSL configuration file at `path` into a fresh library context and
/// says which providers came up, and why each of `declared` that did not failed.
/// The default context, reading `OPENSSL_CONF` at start-up, goes on without a
/// provider that failed and says nothing, so this is how a failure is seen.
pub fn config_check(path: &std::path::Path, declared: &[String]) -> Result<ConfigCheck, String> {
    let (active, failed) = crate::ffi::config_check(path, declared)?;
    Ok(ConfigCheck { active, failed })
}

#[cfg(test)]
mod tests {
    #[test]
    fn reports_a_version_and_settings() {
        assert!(super::library_version().starts_with("OpenSSL "));
        if cfg!(target_arch = "x86_64") {
            let s = super::cpu_settings().expect("x86 builds report cpu settings");
            assert!(s.contains("OPENSSL_ia32cap=0x"), "{s}");
        }
    }

    #[test]
    fn the_default_provider_serves_the_default_fetch() {
        let s = super::cipher_served_by("AES-128-GCM");
        assert_eq!(s.provider.as_deref(), Some("default"));
        assert_eq!(
            super::digest_served_by("SHA256").provider.as_deref(),
            Some("default")
        );
        assert_eq!(super::cipher_served_by("NO-SUCH-CIPHER").provider, None);
        assert!(super::active_providers().contains(&"default".to_string()));
    }

    #[test]
    fn a_configuration_whose_module_does_not_load_is_an_error() {
        let dir = std::env::temp_dir().join(format!("cb-conf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let conf = dir.join("bad.cnf");
        std::fs::write(
            &conf,
            "openssl_conf = i\n[i]\nproviders = p\n[p]\nx = x\n[x]\nmodule = /nonexistent/x.so\nactivate = 1\n",
        )
        .unwrap();
        let check = super::config_check(&conf, &["x".to_string()]).unwrap();
        assert!(!check.active.contains(&"x".to_string()), "{check:?}");
        assert_eq!(check.failed.len(), 1);
        assert!(check.failed[0].1.contains("x.so"), "{check:?}");
        let good = dir.join("good.cnf");
        std::fs::write(&good, "openssl_conf = i\n[i]\n").unwrap();
        let check = super::config_check(&good, &[]).unwrap();
        assert!(check.failed.is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
