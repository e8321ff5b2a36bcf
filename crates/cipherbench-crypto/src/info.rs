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
}
