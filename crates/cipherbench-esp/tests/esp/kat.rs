//! Wycheproof known answers through the engines `seal` and `open` call: the 12-byte
//! nonce split as ESP splits it (4-byte salt from the SA, 8-byte IV from the packet),
//! 16-byte ICVs, AES-256-CBC with whole blocks, HMAC-SHA-256 truncated to 128 bits.
//! Groups with other sizes are counted as skipped, not silently ignored.

use cipherbench_crypto::aead::AeadAlgorithm;
use cipherbench_crypto::cbc::{pkcs7_pad, pkcs7_unpad};
use cipherbench_esp::engine::{AeadEngine, CbcHmacEngine};
use serde_json::Value;
use std::path::PathBuf;

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

fn check_aead(file: &str, pick: fn(u64) -> Option<AeadAlgorithm>) -> Tally {
    let mut tally = Tally::default();
    for group in vectors(file)["testGroups"].as_array().unwrap() {
        let tests = group["tests"].as_array().unwrap();
        let alg = pick(group["keySize"].as_u64().unwrap());
        let esp_sizes = group["ivSize"] == 96 && group["tagSize"] == 128;
        let Some(alg) = alg.filter(|_| esp_sizes) else {
            tally.skipped += tests.len();
            continue;
        };
        for t in tests {
            let id = t["tcId"].as_u64().unwrap();
            let (key, iv, aad, msg, ct, tag) = (
                hex(&t["key"]),
                hex(&t["iv"]),
                hex(&t["aad"]),
                hex(&t["msg"]),
                hex(&t["ct"]),
                hex(&t["tag"]),
            );
            let salt: [u8; 4] = iv[..4].try_into().unwrap();
            let explicit: [u8; 8] = iv[4..].try_into().unwrap();
            let mut engine = AeadEngine::new(alg, &key, salt).unwrap();
            let mut out = vec![0xAAu8; ct.len()];
            if t["result"] == "valid" {
                let mut buf = msg.clone();
                let mut icv = vec![0u8; tag.len()];
                engine.seal(&explicit, &aad, &mut buf, &mut icv).unwrap();
                assert_eq!((&buf, &icv), (&ct, &tag), "{file} #{id}");
                engine.open(&explicit, &aad, &ct, &mut out, &tag).unwrap();
                assert_eq!(out, msg, "{file} #{id}");
                tally.valid += 1;
            } else {
                let opened = engine.open(&explicit, &aad, &ct, &mut out, &tag);
                assert!(opened.is_err(), "{file} #{id}: invalid case accepted");
                assert!(out.iter().all(|&b| b == 0), "{file} #{id}: plaintext left");
                tally.invalid += 1;
            }
        }
    }
    tally
}

#[test]
fn aes_gcm_vectors_through_the_esp_engine() {
    let t = check_aead("aes_gcm_test.json", |bits| match bits {
        128 => Some(AeadAlgorithm::Aes128Gcm),
        256 => Some(AeadAlgorithm::Aes256Gcm),
        _ => None,
    });
    assert!(t.valid >= 79 && t.invalid >= 54, "{t:?}");
}

#[test]
fn chacha20_poly1305_vectors_through_the_esp_engine() {
    let t = check_aead("chacha20_poly1305_test.json", |_| {
        Some(AeadAlgorithm::ChaCha20Poly1305)
    });
    assert!(t.valid >= 256 && t.invalid >= 60, "{t:?}");
}

#[test]
fn aes256_cbc_vectors_through_the_esp_engine() {
    let file = "aes_cbc_pkcs5_test.json";
    let mut tally = Tally::default();
    for group in vectors(file)["testGroups"].as_array().unwrap() {
        let tests = group["tests"].as_array().unwrap();
        if group["keySize"] != 256 {
            tally.skipped += tests.len();
            continue;
        }
        for t in tests {
            let id = t["tcId"].as_u64().unwrap();
            let (key, iv, msg, ct) = (hex(&t["key"]), hex(&t["iv"]), hex(&t["msg"]), hex(&t["ct"]));
            let iv: [u8; 16] = iv.try_into().unwrap();
            let mut engine = CbcHmacEngine::new(&key, &[0u8; 32]).unwrap();
            let mut plain = vec![0u8; ct.len()];
            let decrypted = engine
                .decrypt(&iv, &ct, &mut plain)
                .and_then(|_| pkcs7_unpad(&plain, 16).map(<[u8]>::to_vec));
            if t["result"] == "valid" {
                let mut buf = msg.clone();
                pkcs7_pad(&mut buf, 16);
                engine.encrypt(&iv, &mut buf).unwrap();
                assert_eq!(buf, ct, "{file} #{id}");
                assert_eq!(decrypted.unwrap(), msg, "{file} #{id}");
                tally.valid += 1;
            } else {
                assert!(decrypted.is_err(), "{file} #{id}: invalid case accepted");
                tally.invalid += 1;
            }
        }
    }
    assert!(tally.valid >= 24 && tally.invalid >= 48, "{tally:?}");
}

#[test]
fn hmac_sha256_128_vectors_through_the_esp_engine() {
    let file = "hmac_sha256_test.json";
    let mut tally = Tally::default();
    for group in vectors(file)["testGroups"].as_array().unwrap() {
        let tests = group["tests"].as_array().unwrap();
        if group["tagSize"] != 128 {
            tally.skipped += tests.len();
            continue;
        }
        for t in tests {
            let id = t["tcId"].as_u64().unwrap();
            let (key, msg, tag) = (hex(&t["key"]), hex(&t["msg"]), hex(&t["tag"]));
            let mut engine = CbcHmacEngine::new(&[0u8; 32], &key).unwrap();
            if t["result"] == "valid" {
                let mut icv = [0u8; 16];
                engine.compute_icv(&msg, &mut icv).unwrap();
                assert_eq!(icv.to_vec(), tag, "{file} #{id}");
                engine.verify_icv(&msg, &tag).unwrap();
                tally.valid += 1;
            } else {
                let accepted = tag.len() == 16 && engine.verify_icv(&msg, &tag).is_ok();
                assert!(!accepted, "{file} #{id}: invalid tag accepted");
                tally.invalid += 1;
            }
        }
    }
    assert!(tally.valid >= 33 && tally.invalid >= 54, "{tally:?}");
}
