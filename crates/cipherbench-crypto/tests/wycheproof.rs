//! Known-answer tests: every Wycheproof vector for the algorithms in the catalogue,
//! through the same calls the layers use, in the current process's acceleration
//! variant and (by re-running this test binary with AES-NI masked) in `noaesni`.
//!
//! A valid case must match byte for byte and open again; an invalid case must be
//! rejected. AES-192 groups are skipped (no catalogue cipher uses AES-192) and
//! counted, so the test fails if it ever silently tests nothing.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test; clippy's allow-unwrap-in-tests does not reach helpers outside #[test] functions"
)]

use cipherbench_crypto::aead::{Aead, AeadAlgorithm};
use cipherbench_crypto::cbc::{pkcs7_pad, pkcs7_unpad, Cbc, CbcAlgorithm};
use cipherbench_crypto::hmac::{Hmac, HmacDigest};
use cipherbench_crypto::CryptoError;
use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

fn vectors(file: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/wycheproof")
        .join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

fn hex(v: &Value) -> Vec<u8> {
    let s = v.as_str().unwrap_or("");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[derive(Default, Debug)]
struct Tally {
    valid: usize,
    invalid: usize,
    skipped: usize,
}

fn check_aead(file: &str, pick: fn(usize) -> Option<AeadAlgorithm>) -> Tally {
    let mut tally = Tally::default();
    for group in vectors(file)["testGroups"].as_array().unwrap() {
        let key_bits = group["keySize"].as_u64().unwrap() as usize;
        let Some(alg) = pick(key_bits) else {
            tally.skipped += group["tests"].as_array().unwrap().len();
            continue;
        };
        for t in group["tests"].as_array().unwrap() {
            let id = t["tcId"].as_u64().unwrap();
            let (key, iv, aad, msg, ct, tag) = (
                hex(&t["key"]),
                hex(&t["iv"]),
                hex(&t["aad"]),
                hex(&t["msg"]),
                hex(&t["ct"]),
                hex(&t["tag"]),
            );
            let aead = Aead::with_nonce_len(alg, &key, iv.len());
            match t["result"].as_str().unwrap() {
                "valid" => {
                    let mut aead = match aead {
                        Ok(a) => a,
                        // OpenSSL caps GCM nonces at 128 bytes; longer ones (valid per
                        // SP 800-38D, used by nobody) are counted as skipped. The
                        // 12-byte nonce every protocol here uses must always work.
                        Err(CryptoError::BadNonceLength { .. }) if iv.len() > 128 => {
                            tally.skipped += 1;
                            continue;
                        }
                        Err(e) => panic!("{file} #{id}: {e}"),
                    };
                    let mut buf = msg.clone();
                    let mut got_tag = vec![0u8; tag.len()];
                    aead.seal_in_place(&iv, &aad, &mut buf, &mut got_tag)
                        .unwrap();
                    assert_eq!(buf, ct, "{file} #{id}: ciphertext");
                    assert_eq!(got_tag, tag, "{file} #{id}: tag");
                    aead.open_in_place(&iv, &aad, &mut buf, &tag)
                        .unwrap_or_else(|e| panic!("{file} #{id}: open {e}"));
                    assert_eq!(buf, msg, "{file} #{id}: plaintext");
                    tally.valid += 1;
                }
                _ => {
                    if let Ok(mut aead) = aead {
                        let mut buf = ct.clone();
                        let opened = aead.open_in_place(&iv, &aad, &mut buf, &tag);
                        assert!(opened.is_err(), "{file} #{id}: invalid case accepted");
                        assert!(buf.iter().all(|&b| b == 0), "{file} #{id}: plaintext left");
                    }
                    tally.invalid += 1;
                }
            }
        }
    }
    tally
}

fn kat_gcm() -> Tally {
    check_aead("aes_gcm_test.json", |bits| match bits {
        128 => Some(AeadAlgorithm::Aes128Gcm),
        256 => Some(AeadAlgorithm::Aes256Gcm),
        _ => None,
    })
}

fn kat_chacha() -> Tally {
    check_aead("chacha20_poly1305_test.json", |_| {
        Some(AeadAlgorithm::ChaCha20Poly1305)
    })
}

fn kat_cbc() -> Tally {
    let mut tally = Tally::default();
    let file = "aes_cbc_pkcs5_test.json";
    for group in vectors(file)["testGroups"].as_array().unwrap() {
        let alg = match group["keySize"].as_u64().unwrap() {
            128 => CbcAlgorithm::Aes128Cbc,
            256 => CbcAlgorithm::Aes256Cbc,
            _ => {
                tally.skipped += group["tests"].as_array().unwrap().len();
                continue;
            }
        };
        for t in group["tests"].as_array().unwrap() {
            let id = t["tcId"].as_u64().unwrap();
            let (key, iv, msg, ct) = (hex(&t["key"]), hex(&t["iv"]), hex(&t["msg"]), hex(&t["ct"]));
            let mut cbc = Cbc::new(alg, &key).unwrap();
            let mut plain = ct.clone();
            let decrypted = cbc
                .decrypt_in_place(&iv, &mut plain)
                .and_then(|_| pkcs7_unpad(&plain, 16).map(<[u8]>::to_vec));
            if t["result"] == "valid" {
                let mut buf = msg.clone();
                pkcs7_pad(&mut buf, 16);
                cbc.encrypt_in_place(&iv, &mut buf).unwrap();
                assert_eq!(buf, ct, "{file} #{id}");
                assert_eq!(decrypted.unwrap(), msg, "{file} #{id}");
                tally.valid += 1;
            } else {
                assert!(decrypted.is_err(), "{file} #{id}: invalid case accepted");
                tally.invalid += 1;
            }
        }
    }
    tally
}

fn kat_hmac(file: &str, digest: HmacDigest) -> Tally {
    let mut tally = Tally::default();
    for group in vectors(file)["testGroups"].as_array().unwrap() {
        let tag_bytes = group["tagSize"].as_u64().unwrap() as usize / 8;
        for t in group["tests"].as_array().unwrap() {
            let id = t["tcId"].as_u64().unwrap();
            let (key, msg, tag) = (hex(&t["key"]), hex(&t["msg"]), hex(&t["tag"]));
            let mut hmac = Hmac::new(digest, &key).unwrap();
            if t["result"] == "valid" {
                let mut got = vec![0u8; tag_bytes];
                hmac.compute(&[&msg], &mut got).unwrap();
                assert_eq!(got, tag, "{file} #{id}");
                hmac.verify(&[&msg], &tag).unwrap();
                tally.valid += 1;
            } else {
                let accepted = tag.len() == tag_bytes && hmac.verify(&[&msg], &tag).is_ok();
                assert!(!accepted, "{file} #{id}: invalid tag accepted");
                tally.invalid += 1;
            }
        }
    }
    tally
}

/// All known-answer suites in this process; returns a one-line summary.
fn run_all() -> String {
    let results = [
        ("aes-gcm", kat_gcm()),
        ("chacha20-poly1305", kat_chacha()),
        ("aes-cbc", kat_cbc()),
        (
            "hmac-sha256",
            kat_hmac("hmac_sha256_test.json", HmacDigest::Sha256),
        ),
        (
            "hmac-sha1",
            kat_hmac("hmac_sha1_test.json", HmacDigest::Sha1),
        ),
    ];
    for (name, t) in &results {
        assert!(
            t.valid >= 40 && t.invalid >= 20,
            "{name}: too few cases ran: {t:?}"
        );
    }
    results
        .iter()
        .map(|(n, t)| {
            format!(
                "{n}: {} valid, {} invalid, {} skipped",
                t.valid, t.invalid, t.skipped
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[test]
fn wycheproof_vectors_in_this_process() {
    eprintln!(
        "{} [{}]",
        run_all(),
        cipherbench_crypto::info::cpu_settings().unwrap_or_default()
    );
}

/// Re-runs the test above in a child whose OpenSSL has AES-NI and PCLMULQDQ masked,
/// and checks that the mask really took effect there.
#[test]
fn wycheproof_vectors_with_aesni_masked() {
    if std::env::var_os("OPENSSL_ia32cap").is_some() {
        return; // We are the child (or the user chose a mask): nothing to re-run.
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "wycheproof_vectors_in_this_process",
            "--nocapture",
        ])
        // noaesni's mask: AES-NI, PCLMULQDQ, VAES and VPCLMULQDQ off (the software
        // AES and GHASH paths, also on libraries with the VAES AES-GCM path).
        .env(
            "OPENSSL_ia32cap",
            "~0x200000200000000:~0x60000000000:~0:~0:~0",
        )
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "noaesni run failed:\n{stderr}");
    let settings = stderr
        .lines()
        .find_map(|l| {
            l.split_once('[')
                .map(|(_, s)| s.trim_end_matches(']').to_string())
        })
        .expect("child printed its cpu settings");
    let cap = cipherbench_model_free_parse(&settings);
    assert_eq!(cap & (1 << 57), 0, "AES-NI still on in child: {settings}");
}

/// The first word of an `OPENSSL_ia32cap=0x...:0x...` string.
fn cipherbench_model_free_parse(settings: &str) -> u64 {
    let value = settings
        .split_whitespace()
        .find_map(|t| t.strip_prefix("OPENSSL_ia32cap=0x"))
        .unwrap();
    u64::from_str_radix(value.split(':').next().unwrap(), 16).unwrap()
}
