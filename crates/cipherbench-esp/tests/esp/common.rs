//! Shared test helpers: inner packets, SA pairs, and a reference ESP encoder written
//! from the RFCs directly on the crypto crate, independent of `seal`, so crafted
//! packets (bad padding, bad next header, ...) carry a valid ICV.

use cipherbench_crypto::aead::{Aead, AeadAlgorithm};
use cipherbench_crypto::cbc::{Cbc, CbcAlgorithm};
use cipherbench_crypto::hmac::{Hmac, HmacDigest};
use cipherbench_esp::{
    derive_sa_pair, Counters, DropCounts, DropReason, InboundSa, InboundSet, OutboundSa, Role,
    SaPair, SaParams, Transform,
};

/// An IPv4 packet of `len` bytes (at least 20) with a consistent header; the payload
/// bytes are `fill` patterns so corruption shows.
pub fn ipv4(len: usize, fill: u8) -> Vec<u8> {
    assert!((20..=65535).contains(&len));
    let mut p: Vec<u8> = (0..len).map(|i| fill.wrapping_add(i as u8)).collect();
    p[0] = 0x45;
    p[1] = 0;
    p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    p
}

/// An IPv6 packet of `len` bytes (at least 40) with a consistent header.
pub fn ipv6(len: usize, fill: u8) -> Vec<u8> {
    assert!((40..=65535 + 40).contains(&len));
    let mut p: Vec<u8> = (0..len).map(|i| fill.wrapping_add(i as u8)).collect();
    p[0] = 0x60;
    p[4..6].copy_from_slice(&((len - 40) as u16).to_be_bytes());
    p
}

/// The SAs of two gateways keyed from one secret.
pub struct Gateways {
    pub initiator_out: OutboundSa,
    pub initiator_in: InboundSet,
    pub responder_out: OutboundSa,
    pub responder_in: InboundSet,
    /// The initiator's parameters (its outbound is the responder's inbound).
    pub initiator: SaPair,
}

pub fn gateways(transform: Transform, window: u32) -> Gateways {
    let secret = b"a per-run secret for the tests!!";
    let mut initiator = derive_sa_pair(secret, "test", transform, Role::Initiator).unwrap();
    let mut responder = derive_sa_pair(secret, "test", transform, Role::Responder).unwrap();
    for p in [&mut initiator.inbound, &mut responder.inbound] {
        p.replay_window = window;
    }
    let mut initiator_in = InboundSet::new();
    initiator_in
        .insert(InboundSa::new(initiator.inbound.clone()).unwrap())
        .unwrap();
    let mut responder_in = InboundSet::new();
    responder_in
        .insert(InboundSa::new(responder.inbound.clone()).unwrap())
        .unwrap();
    Gateways {
        initiator_out: OutboundSa::new(initiator.outbound.clone()).unwrap(),
        initiator_in,
        responder_out: OutboundSa::new(responder.outbound).unwrap(),
        responder_in,
        initiator,
    }
}

/// RFC 4303 §2.4 trailer: padding 1, 2, 3.. to `alignment`, pad length, next header.
pub fn with_trailer(inner: &[u8], alignment: usize, next_header: u8) -> Vec<u8> {
    let mut v = inner.to_vec();
    let pad = (alignment - (inner.len() + 2) % alignment) % alignment;
    v.extend((1..=pad).map(|i| i as u8));
    v.push(pad as u8);
    v.push(next_header);
    v
}

/// Builds an ESP packet from the RFCs on the crypto crate directly: `plaintext` is the
/// whole encrypted part (inner packet and trailer, possibly malformed on purpose). For
/// CBC its length must be whole blocks; `iv` is the IV on the wire.
pub fn reference_seal(params: &SaParams, sequence: u32, iv: &[u8], plaintext: &[u8]) -> Vec<u8> {
    let t = params.transform;
    let keymat = params.keymat.expose();
    let (key, rest) = keymat.split_at(t.encryption_key_len());
    let mut packet = Vec::new();
    packet.extend_from_slice(&params.spi.to_be_bytes());
    packet.extend_from_slice(&sequence.to_be_bytes());
    packet.extend_from_slice(iv);
    assert_eq!(iv.len(), t.iv_len());
    match t {
        Transform::Null => packet.extend_from_slice(plaintext),
        Transform::Aes256Sha256 => {
            let mut body = plaintext.to_vec();
            Cbc::new(CbcAlgorithm::Aes256Cbc, key)
                .unwrap()
                .encrypt_in_place(iv, &mut body)
                .unwrap();
            packet.extend_from_slice(&body);
            let mut icv = [0u8; 16];
            Hmac::new(HmacDigest::Sha256, rest)
                .unwrap()
                .compute(&[&packet], &mut icv)
                .unwrap();
            packet.extend_from_slice(&icv);
        }
        _ => {
            let alg = match t {
                Transform::Aes128Gcm => AeadAlgorithm::Aes128Gcm,
                Transform::Aes256Gcm => AeadAlgorithm::Aes256Gcm,
                _ => AeadAlgorithm::ChaCha20Poly1305,
            };
            // RFC 4106 §4: nonce = salt || IV; §5: AAD = SPI || sequence.
            let nonce: Vec<u8> = rest[..4].iter().chain(iv).copied().collect();
            let aad = packet[..8].to_vec();
            let mut body = plaintext.to_vec();
            let mut icv = [0u8; 16];
            Aead::new(alg, key)
                .unwrap()
                .seal_in_place(&nonce, &aad, &mut body, &mut icv)
                .unwrap();
            packet.extend_from_slice(&body);
            packet.extend_from_slice(&icv);
        }
    }
    packet
}

/// An IV of the right length for the transform (the AEAD ones: the sequence number,
/// as `seal` does; any IV is valid for the receiver).
pub fn iv_for(t: Transform, sequence: u32) -> Vec<u8> {
    match t.iv_len() {
        0 => vec![],
        8 => u64::from(sequence).to_be_bytes().to_vec(),
        n => (0..n as u8).map(|b| b ^ sequence as u8).collect(),
    }
}

/// Every counter of a set and its SAs, to check that exactly one moved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub drops: DropCounts,
    pub sa: Vec<Counters>,
}

pub fn snapshot(set: &InboundSet) -> Snapshot {
    Snapshot {
        drops: set.total_drops(),
        sa: set.iter().map(|sa| *sa.counters()).collect(),
    }
}

/// Opens `packet` through the set and checks it was dropped for `reason`, that exactly
/// that one counter went up by one, and that nothing was delivered.
pub fn expect_drop(set: &mut InboundSet, packet: &[u8], reason: DropReason, what: &str) {
    let before = snapshot(set);
    let mut out = vec![0xAAu8; 70_000];
    let got = set.open(packet, &mut out);
    assert_eq!(got, Err(reason), "{what}");
    let after = snapshot(set);
    for r in DropReason::ALL {
        let delta = after.drops.get(r) - before.drops.get(r);
        assert_eq!(
            delta,
            u64::from(r == reason),
            "{what}: counter {} moved by {delta}",
            r.name()
        );
    }
    for (b, a) in before.sa.iter().zip(&after.sa) {
        assert_eq!(a.opened_packets, b.opened_packets, "{what}: delivered");
    }
    // Whatever was decrypted of a dropped packet is not left behind.
    let end = packet.len().min(out.len());
    assert!(
        out[..end].iter().all(|&b| b == 0 || b == 0xAA),
        "{what}: plaintext left in the output buffer"
    );
}
