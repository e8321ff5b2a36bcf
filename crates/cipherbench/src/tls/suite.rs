//! The TLS cipher suites layer 3 knows: OpenSSL and IANA names, protocol version,
//! the key type a server needs for them, and whether the library here offers them.
//!
//! A suite is named by its OpenSSL name (`AES128-SHA`) or its IANA name
//! (`TLS_RSA_WITH_AES_128_CBC_SHA`). A name not in [`SUITES`] is "unknown"; a known
//! suite the linked OpenSSL refuses (3DES, compiled out of Debian's) is "not offered",
//! and both are refused before anything starts, never silently substituted.

use anyhow::{anyhow, bail, Result};
use openssl::ssl::{SslContext, SslMethod, SslVersion};

/// TLS protocol version of a suite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// TLS 1.2 (RFC 5246).
    Tls12,
    /// TLS 1.3 (RFC 8446).
    Tls13,
}

impl Protocol {
    /// As OpenSSL spells it in `SSL_get_version` (`TLSv1.2`).
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Tls12 => "TLSv1.2",
            Protocol::Tls13 => "TLSv1.3",
        }
    }

    /// As nginx's `ssl_protocols` spells it.
    pub fn nginx(self) -> &'static str {
        self.as_str()
    }

    /// The openssl crate's constant.
    pub fn version(self) -> SslVersion {
        match self {
            Protocol::Tls12 => SslVersion::TLS1_2,
            Protocol::Tls13 => SslVersion::TLS1_3,
        }
    }
}

/// What key the server's certificate must carry for a suite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Auth {
    /// An RSA certificate (RSA key exchange, or ECDHE_RSA).
    Rsa,
    /// An ECDSA certificate.
    Ecdsa,
    /// Either (TLS 1.3 suites do not fix the signature algorithm).
    Any,
}

/// A server key type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyType {
    /// RSA 2048 bits (the default).
    Rsa2048,
    /// ECDSA on P-256.
    EcdsaP256,
    /// ML-DSA-65 (FIPS 204): OpenSSL 3.5 and later, TLS 1.3 only.
    MlDsa65,
}

impl KeyType {
    /// Parses `rsa2048` or `ecdsa-p256`.
    pub fn parse(text: &str) -> Result<KeyType> {
        match text.trim().to_ascii_lowercase().as_str() {
            "rsa2048" | "rsa" | "rsa-2048" => Ok(KeyType::Rsa2048),
            "ecdsa-p256" | "ecdsa" | "p256" | "p-256" => Ok(KeyType::EcdsaP256),
            "ml-dsa-65" | "mldsa65" => Ok(KeyType::MlDsa65),
            t => bail!("unknown key type '{t}': use rsa2048, ecdsa-p256 or ml-dsa-65"),
        }
    }

    /// The name recorded in results.
    pub fn name(self) -> &'static str {
        match self {
            KeyType::Rsa2048 => "rsa2048",
            KeyType::EcdsaP256 => "ecdsa-p256",
            KeyType::MlDsa65 => "ml-dsa-65",
        }
    }

    /// Whether TLS 1.2 can use the key (ML-DSA signs in TLS 1.3 only, RFC 8446's
    /// signature_algorithms; no TLS 1.2 suite names it).
    pub fn in_tls12(self) -> bool {
        !matches!(self, KeyType::MlDsa65)
    }

    fn fits(self, auth: Auth) -> bool {
        matches!(
            (self, auth),
            (_, Auth::Any) | (KeyType::Rsa2048, Auth::Rsa) | (KeyType::EcdsaP256, Auth::Ecdsa)
        )
    }
}

/// A known suite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Suite {
    /// OpenSSL's name, as `ssl_ciphers` and `SSL_CIPHER_get_name` spell it.
    pub openssl: &'static str,
    /// The IANA (RFC) name.
    pub iana: &'static str,
    /// Protocol version.
    pub protocol: Protocol,
    /// Certificate it needs.
    pub auth: Auth,
}

impl Suite {
    /// Whether the premaster secret is RSA-encrypted to the server's key (TLS 1.2
    /// `TLS_RSA_WITH_*`, RFC 5246 §7.4.7.1), not exchanged by (EC)DHE and signed.
    pub fn rsa_key_exchange(&self) -> bool {
        self.iana.starts_with("TLS_RSA_WITH_")
    }

    /// The catalogue cipher its records are encrypted with (what a provider variant
    /// is judged on); None for a suite whose record cipher the catalogue lacks.
    pub fn catalogue_cipher(&self) -> Option<&'static str> {
        cipherbench_model::tls::suite_cipher(self.openssl)
    }
}

const fn s(openssl: &'static str, iana: &'static str, protocol: Protocol, auth: Auth) -> Suite {
    Suite {
        openssl,
        iana,
        protocol,
        auth,
    }
}

use Auth::{Any, Ecdsa, Rsa};
use Protocol::{Tls12, Tls13};

/// Every suite cipherbench knows. The first two are the seeds' (000/003).
pub const SUITES: &[Suite] = &[
    s("AES128-SHA", "TLS_RSA_WITH_AES_128_CBC_SHA", Tls12, Rsa),
    s(
        "AES128-GCM-SHA256",
        "TLS_RSA_WITH_AES_128_GCM_SHA256",
        Tls12,
        Rsa,
    ),
    s("AES256-SHA", "TLS_RSA_WITH_AES_256_CBC_SHA", Tls12, Rsa),
    s(
        "AES128-SHA256",
        "TLS_RSA_WITH_AES_128_CBC_SHA256",
        Tls12,
        Rsa,
    ),
    s(
        "AES256-SHA256",
        "TLS_RSA_WITH_AES_256_CBC_SHA256",
        Tls12,
        Rsa,
    ),
    s(
        "AES256-GCM-SHA384",
        "TLS_RSA_WITH_AES_256_GCM_SHA384",
        Tls12,
        Rsa,
    ),
    s("DES-CBC3-SHA", "TLS_RSA_WITH_3DES_EDE_CBC_SHA", Tls12, Rsa),
    s(
        "ECDHE-RSA-AES128-SHA",
        "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
        Tls12,
        Rsa,
    ),
    s(
        "ECDHE-RSA-AES256-SHA",
        "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
        Tls12,
        Rsa,
    ),
    s(
        "ECDHE-RSA-AES128-GCM-SHA256",
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        Tls12,
        Rsa,
    ),
    s(
        "ECDHE-RSA-AES256-GCM-SHA384",
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        Tls12,
        Rsa,
    ),
    s(
        "ECDHE-RSA-CHACHA20-POLY1305",
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        Tls12,
        Rsa,
    ),
    s(
        "ECDHE-RSA-DES-CBC3-SHA",
        "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
        Tls12,
        Rsa,
    ),
    s(
        "ECDHE-ECDSA-AES128-SHA",
        "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
        Tls12,
        Ecdsa,
    ),
    s(
        "ECDHE-ECDSA-AES128-GCM-SHA256",
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        Tls12,
        Ecdsa,
    ),
    s(
        "ECDHE-ECDSA-AES256-GCM-SHA384",
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        Tls12,
        Ecdsa,
    ),
    s(
        "ECDHE-ECDSA-CHACHA20-POLY1305",
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
        Tls12,
        Ecdsa,
    ),
    s(
        "TLS_AES_128_GCM_SHA256",
        "TLS_AES_128_GCM_SHA256",
        Tls13,
        Any,
    ),
    s(
        "TLS_AES_256_GCM_SHA384",
        "TLS_AES_256_GCM_SHA384",
        Tls13,
        Any,
    ),
    s(
        "TLS_CHACHA20_POLY1305_SHA256",
        "TLS_CHACHA20_POLY1305_SHA256",
        Tls13,
        Any,
    ),
];

/// The seeds' pair: AES-CBC + HMAC-SHA1 against AES-GCM, TLS 1.2, RSA key exchange.
pub const SEED_SUITES: [&str; 2] = ["AES128-SHA", "AES128-GCM-SHA256"];

impl Suite {
    /// Finds a suite by OpenSSL or IANA name (case-insensitive).
    pub fn find(name: &str) -> Option<Suite> {
        let name = name.trim();
        SUITES
            .iter()
            .find(|s| s.openssl.eq_ignore_ascii_case(name) || s.iana.eq_ignore_ascii_case(name))
            .copied()
    }

    /// "AES128-SHA (TLS_RSA_WITH_AES_128_CBC_SHA)".
    pub fn display(&self) -> String {
        if self.openssl == self.iana {
            self.openssl.to_string()
        } else {
            format!("{} ({})", self.openssl, self.iana)
        }
    }

    /// Whether the linked OpenSSL offers this suite; the error names the suite and
    /// the library.
    pub fn check_offered(&self) -> Result<()> {
        let offered = (|| -> Result<(), openssl::error::ErrorStack> {
            let mut b = SslContext::builder(SslMethod::tls_client())?;
            match self.protocol {
                Protocol::Tls12 => b.set_cipher_list(self.openssl)?,
                Protocol::Tls13 => b.set_ciphersuites(self.openssl)?,
            }
            Ok(())
        })();
        if offered.is_err() {
            bail!(
                "suite {} is not offered by {} on this machine{}: choose another suite",
                self.display(),
                cipherbench_crypto::info::library_version(),
                if self.openssl.contains("DES-CBC3") {
                    " (Debian builds OpenSSL without 3DES)"
                } else {
                    ""
                }
            );
        }
        Ok(())
    }

    /// Refuses a suite whose certificate type does not match the server key.
    pub fn check_key(&self, key: KeyType) -> Result<()> {
        if !key.fits(self.auth) {
            bail!(
                "suite {} needs an {} certificate, not {}: pass --key {}",
                self.openssl,
                if self.auth == Auth::Ecdsa {
                    "ECDSA"
                } else {
                    "RSA"
                },
                key.name(),
                if self.auth == Auth::Ecdsa {
                    "ecdsa-p256"
                } else {
                    "rsa2048"
                }
            );
        }
        Ok(())
    }
}

/// Parses a comma-separated suite list: unknown names are refused with examples,
/// and suites the library does not offer are refused naming the library.
pub fn parse_suites(text: &str, key: KeyType) -> Result<Vec<Suite>> {
    let mut out: Vec<Suite> = Vec::new();
    for name in text.split(',') {
        let suite = Suite::find(name).ok_or_else(|| {
            anyhow!(
                "unknown suite '{}': use an OpenSSL or IANA name such as AES128-SHA, AES128-GCM-SHA256, ECDHE-RSA-AES128-GCM-SHA256, ECDHE-RSA-CHACHA20-POLY1305 or TLS_AES_128_GCM_SHA256",
                name.trim()
            )
        })?;
        suite.check_offered()?;
        suite.check_key(key)?;
        if !out.contains(&suite) {
            out.push(suite);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_suites_by_either_name() {
        let a = Suite::find("aes128-sha").unwrap();
        assert_eq!(a.iana, "TLS_RSA_WITH_AES_128_CBC_SHA");
        assert_eq!(
            Suite::find("TLS_RSA_WITH_AES_128_GCM_SHA256")
                .unwrap()
                .openssl,
            "AES128-GCM-SHA256"
        );
        assert_eq!(
            Suite::find("TLS_CHACHA20_POLY1305_SHA256")
                .unwrap()
                .protocol,
            Protocol::Tls13
        );
        assert!(Suite::find("RC4-MD5").is_none());
    }

    #[test]
    fn the_seed_suites_are_offered_here() {
        let suites = parse_suites(&SEED_SUITES.join(","), KeyType::Rsa2048).unwrap();
        assert_eq!(suites.len(), 2);
    }

    #[test]
    fn refuses_unknown_and_unoffered_suites_clearly() {
        let err = parse_suites("AES128-SHA,RC4-MD5", KeyType::Rsa2048)
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown suite 'RC4-MD5'"), "{err}");
        // Debian's OpenSSL has no 3DES; elsewhere it may, so only check the wording
        // when it is refused.
        if let Err(e) = parse_suites("DES-CBC3-SHA", KeyType::Rsa2048) {
            let e = e.to_string();
            assert!(
                e.contains("DES-CBC3-SHA") && e.contains("OpenSSL") && e.contains("not offered"),
                "{e}"
            );
        }
    }

    #[test]
    fn refuses_a_suite_that_needs_another_key() {
        let err = parse_suites("ECDHE-ECDSA-AES128-GCM-SHA256", KeyType::Rsa2048)
            .unwrap_err()
            .to_string();
        assert!(err.contains("--key ecdsa-p256"), "{err}");
        assert!(parse_suites("TLS_AES_128_GCM_SHA256", KeyType::EcdsaP256).is_ok());
    }
}
