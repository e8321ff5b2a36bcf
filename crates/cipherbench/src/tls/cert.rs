//! The server's certificate: a fresh key (RSA 2048 by default, ECDSA P-256 or
//! ML-DSA-65 as options) and a self-signed certificate for 127.0.0.1/localhost,
//! written as PEM for nginx. Made per run, never reused, never trusted by anything else.

use super::suite::KeyType;
use anyhow::{Context, Result};
use cipherbench_crypto::pk::PkAlgorithm;
use foreign_types::ForeignType;
use openssl::asn1::Asn1Time;
use openssl::bn::{BigNum, MsbOption};
use openssl::ec::{EcGroup, EcKey};
use openssl::hash::MessageDigest;
use openssl::nid::Nid;
use openssl::pkey::{Id, PKey, Private};
use openssl::rsa::Rsa;
use openssl::x509::extension::SubjectAlternativeName;
use openssl::x509::{X509NameBuilder, X509};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// A key of the given type.
pub fn key(kind: KeyType) -> Result<PKey<Private>> {
    Ok(match kind {
        KeyType::Rsa2048 => PKey::from_rsa(Rsa::generate(2048)?)?,
        KeyType::EcdsaP256 => {
            let group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1)?;
            PKey::from_ec_key(EcKey::generate(&group)?)?
        }
        // The `openssl` crate cannot generate ML-DSA: libcrypto does, through the
        // crypto crate, and the key comes over as PKCS #8.
        KeyType::MlDsa65 => {
            let der = cipherbench_crypto::pk::private_key_pkcs8(PkAlgorithm::MlDsa65).map_err(
                |e| match e {
                    cipherbench_crypto::CryptoError::Unavailable { .. } => anyhow::anyhow!(
                        "ml-dsa-65 keys need OpenSSL 3.5 or later, and this process runs {}: give such a build with --openssl DIR",
                        cipherbench_crypto::info::library_version()
                    ),
                    other => anyhow::anyhow!("generating an ML-DSA-65 key: {other}"),
                },
            )?;
            PKey::private_key_from_pkcs8(&der)?
        }
    })
}

/// A self-signed certificate for `key`, valid for a day, for 127.0.0.1 and localhost.
pub fn self_signed(key: &PKey<Private>) -> Result<X509> {
    let mut name = X509NameBuilder::new()?;
    name.append_entry_by_text("CN", "cipherbench")?;
    let name = name.build();
    let mut b = X509::builder()?;
    b.set_version(2)?;
    let mut serial = BigNum::new()?;
    serial.rand(64, MsbOption::MAYBE_ZERO, false)?;
    let serial = serial.to_asn1_integer()?;
    b.set_serial_number(&serial)?;
    b.set_subject_name(&name)?;
    b.set_issuer_name(&name)?;
    b.set_pubkey(key)?;
    let (from, until) = (Asn1Time::days_from_now(0)?, Asn1Time::days_from_now(1)?);
    b.set_not_before(&from)?;
    b.set_not_after(&until)?;
    let san = SubjectAlternativeName::new()
        .ip("127.0.0.1")
        .dns("localhost")
        .build(&b.x509v3_context(None, None))?;
    b.append_extension(san)?;
    if one_shot(key) {
        let cert = b.build();
        // SAFETY: both pointers are live for the call (owned here); X509_sign fills
        // the certificate's signature in place.
        unsafe {
            cipherbench_crypto::sign_certificate(cert.as_ptr().cast(), key.as_ptr().cast())?;
        }
        return Ok(cert);
    }
    b.sign(key, MessageDigest::sha256())?;
    Ok(b.build())
}

/// Whether `key` signs its message whole (ML-DSA), with no digest of the
/// certificate's choosing: the `openssl` crate knows RSA and EC keys by id, and
/// anything else here is ML-DSA.
fn one_shot(key: &PKey<Private>) -> bool {
    !matches!(key.id(), Id::RSA | Id::EC)
}

/// Writes a new certificate and key as PEM (the key readable by its owner only).
pub fn write(kind: KeyType, cert_path: &Path, key_path: &Path) -> Result<()> {
    let k = key(kind).context("generating the server key")?;
    let cert = self_signed(&k).context("making the server certificate")?;
    std::fs::write(cert_path, cert.to_pem()?)
        .with_context(|| format!("writing {}", cert_path.display()))?;
    std::fs::write(key_path, k.private_key_to_pem_pkcs8()?)
        .with_context(|| format!("writing {}", key_path.display()))?;
    std::fs::set_permissions(key_path, std::fs::Permissions::from_mode(0o600))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn makes_certificates_of_both_kinds() {
        for kind in [KeyType::Rsa2048, KeyType::EcdsaP256] {
            let k = key(kind).unwrap();
            let c = self_signed(&k).unwrap();
            assert!(c.public_key().unwrap().public_eq(&k));
            assert!(c.verify(&k).unwrap());
        }
    }
}
