//! Fuzz target for the inbound path: `InboundSet::receive_udp` (RFC 3948
//! classification, then `open`) on a sequence of datagrams, for every transform.
//!
//! A fuzzer cannot forge an ICV, so raw datagrams only reach the checks before
//! decryption. Records of the second kind are therefore sealed with the SA's own keys
//! through `cipherbench_esp::engine` around fuzzer-chosen plaintext (trailer and inner
//! packet included), so the padding, next-header and inner-header parsers behind a
//! valid ICV are fuzzed too. Invariants: no panic; an accepted packet is a consistent
//! IP packet no longer than its datagram; every datagram is counted exactly once.
//!
//! Input: byte 0 picks the transform; then records of `kind (1) | length (2, BE) |
//! bytes`, kind even = raw datagram, kind odd = `sequence (4) | IV (8/16) | plaintext`
//! sealed first. A short tail is ignored.

#![no_main]

use cipherbench_crypto::aead::AeadAlgorithm;
use cipherbench_esp::engine::{AeadEngine, CbcHmacEngine};
use cipherbench_esp::{derive_sa_pair, Inbound, InboundSa, InboundSet, Role, SaParams, Transform};
use libfuzzer_sys::fuzz_target;

/// Seals `plaintext` as the peer would, without `seal`'s own checks (so broken
/// trailers and inner packets get a valid ICV). CBC needs whole blocks: the plaintext
/// is cut down to them.
fn craft(params: &SaParams, sequence: [u8; 4], iv: &[u8], plaintext: &[u8]) -> Vec<u8> {
    let t = params.transform;
    let keymat = params.keymat.expose();
    let (key, rest) = keymat.split_at(t.encryption_key_len());
    let mut packet = params.spi.to_be_bytes().to_vec();
    packet.extend_from_slice(&sequence);
    packet.extend_from_slice(iv);
    let header_len = packet.len();
    match t {
        Transform::Null => packet.extend_from_slice(plaintext),
        Transform::Aes256Sha256 => {
            let whole = plaintext.len() / 16 * 16;
            let mut body = plaintext[..whole].to_vec();
            let mut engine = CbcHmacEngine::new(key, rest).expect("keymat length is the transform's");
            let iv: [u8; 16] = iv.try_into().expect("16-byte IV cut by the caller");
            engine.encrypt(&iv, &mut body).expect("whole blocks");
            packet.extend_from_slice(&body);
            let mut icv = [0u8; 16];
            engine.compute_icv(&packet, &mut icv).expect("HMAC");
            packet.extend_from_slice(&icv);
        }
        _ => {
            let algorithm = match t {
                Transform::Aes128Gcm => AeadAlgorithm::Aes128Gcm,
                Transform::Aes256Gcm => AeadAlgorithm::Aes256Gcm,
                _ => AeadAlgorithm::ChaCha20Poly1305,
            };
            let salt: [u8; 4] = rest[..4].try_into().expect("4-byte salt");
            let mut engine = AeadEngine::new(algorithm, key, salt).expect("keymat length is the transform's");
            let iv: [u8; 8] = iv.try_into().expect("8-byte IV cut by the caller");
            let mut body = plaintext.to_vec();
            let mut icv = [0u8; 16];
            engine.seal(&iv, &packet[..8], &mut body, &mut icv).expect("AEAD seal");
            packet.extend_from_slice(&body);
            packet.extend_from_slice(&icv);
        }
    }
    debug_assert!(packet.len() >= header_len);
    packet
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, mut rest)) = data.split_first() else { return };
    let transform = Transform::ALL[usize::from(pick) % Transform::ALL.len()];
    let pair = derive_sa_pair(&[0x11; 32], "fuzz", transform, Role::Responder).expect("valid secret");
    let mut params = pair.inbound.clone();
    params.replay_window = 32 + u32::from(pick >> 3) * 8;
    let mut set = InboundSet::new();
    set.insert(InboundSa::new(params.clone()).expect("valid SA")).expect("first SA");

    let mut out = vec![0u8; 2048];
    let mut datagrams = 0u64;
    while rest.len() >= 3 {
        let kind = rest[0];
        let len = usize::from(u16::from_be_bytes([rest[1], rest[2]])).min(rest.len() - 3);
        let bytes = &rest[3..3 + len];
        rest = &rest[3 + len..];
        let iv_len = transform.iv_len();
        let datagram = if kind % 2 == 1 && bytes.len() >= 4 + iv_len {
            let sequence = [bytes[0], bytes[1], bytes[2], bytes[3]];
            craft(&params, sequence, &bytes[4..4 + iv_len], &bytes[4 + iv_len..])
        } else {
            bytes.to_vec()
        };
        datagrams += 1;
        match set.receive_udp(&datagram, &mut out) {
            Inbound::Packet { inner, .. } => {
                assert!(inner.len() <= datagram.len());
                assert!(matches!(inner[0] >> 4, 4 | 6), "accepted a non-IP packet");
            }
            Inbound::NatKeepalive | Inbound::NonEsp(_) | Inbound::Dropped(_) => {}
        }
    }
    let counted = set.total_drops().total()
        + set.counters().nat_keepalives
        + set.counters().non_esp
        + set.iter().map(|sa| sa.counters().opened_packets).sum::<u64>();
    assert_eq!(counted, datagrams, "every datagram counted exactly once");
});
