//! Target `esp_receive`: a gateway's whole receive path, `InboundSet::receive_udp`
//! (RFC 3948 classification, SPI lookup, then `open`), on a sequence of UDP payloads
//! for a set of two SAs (as during a rekey), every transform.
//!
//! Input: `transforms (1) | window (1)`, then records `kind (1) | length (2, BE) |
//! bytes` (a short tail is ignored). By `kind % 4`:
//! - 0: the bytes as they are (raw);
//! - 1: `sequence (4) | IV | plaintext`, sealed with the SA's keys around the
//!   fuzzer's plaintext *without* `seal`'s checks (broken trailers and inner packets
//!   behind a valid ICV, so the parsers after the ICV are reached);
//! - 2: `sequence (4) | inner bytes`, a consistent IP packet sealed by the peer's
//!   outbound SA (a genuine packet, maybe out of order or replayed);
//! - 3: RFC 3948 specials: a NAT keepalive, the non-ESP marker and bytes, or 1-3 bytes.
//!
//! Bit 2 of `kind` picks the SA. Properties:
//! - every payload has exactly one outcome, and the counters say which: received =
//!   datagrams; opened packets and bytes, keepalives, non-ESP and the drops *per
//!   reason* equal what `receive_udp` returned; `Accounting::unaccounted() == 0`;
//! - an accepted packet is a consistent IPv4/IPv6 packet, and a genuine one opens to
//!   exactly what was sealed;
//! - a raw (unsealed) payload never opens on an SA with integrity;
//! - a genuine packet is only ever refused by the replay window (replayed, too old).

use crate::esp_open::{ip_packet, params};
use crate::Bytes;
use cipherbench_crypto::aead::AeadAlgorithm;
use cipherbench_esp::engine::{AeadEngine, CbcHmacEngine};
use cipherbench_esp::udp::{NAT_KEEPALIVE, NON_ESP_MARKER};
use cipherbench_esp::{
    DropCounts, DropReason, Inbound, InboundSa, InboundSet, OutboundSa, SaParams, Transform,
    MAX_SEQUENCE, MIN_REPLAY_WINDOW,
};

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
    match t {
        Transform::Null => packet.extend_from_slice(plaintext),
        Transform::Aes256Sha256 => {
            let whole = plaintext.len() / 16 * 16;
            let mut body = plaintext[..whole].to_vec();
            let mut engine = CbcHmacEngine::new(key, rest).expect("keymat is the transform's");
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
            let mut engine =
                AeadEngine::new(algorithm, key, salt).expect("keymat is the transform's");
            let iv: [u8; 8] = iv.try_into().expect("8-byte IV cut by the caller");
            let mut body = plaintext.to_vec();
            let mut icv = [0u8; 16];
            engine
                .seal(&iv, &packet[..8], &mut body, &mut icv)
                .expect("AEAD seal");
            packet.extend_from_slice(&body);
            packet.extend_from_slice(&icv);
        }
    }
    packet
}

/// Is `p` what `seal` would accept as an inner packet: IPv4 with its total length, or
/// IPv6 with its payload length, equal to its size?
fn consistent_ip(p: &[u8]) -> bool {
    match p.first().map(|b| b >> 4) {
        Some(4) => {
            p.len() >= 20
                && usize::from(p[0] & 0x0f) * 4 >= 20
                && usize::from(p[0] & 0x0f) * 4 <= p.len()
                && usize::from(u16::from_be_bytes([p[2], p[3]])) == p.len()
        }
        Some(6) => p.len() >= 40 && 40 + usize::from(u16::from_be_bytes([p[4], p[5]])) == p.len(),
        _ => false,
    }
}

/// What one payload was made as.
enum Made {
    Raw,
    Crafted,
    Genuine(Vec<u8>),
    Special,
}

/// See the module documentation.
#[expect(
    clippy::too_many_lines,
    reason = "one fuzz target: set up, feed every datagram, then check each property on the same state"
)]
pub fn check(data: &[u8]) {
    let mut input = Bytes::new(data);
    let pick = usize::from(input.u8());
    let transforms = [
        Transform::ALL[pick % Transform::ALL.len()],
        Transform::ALL[(pick / Transform::ALL.len()) % Transform::ALL.len()],
    ];
    let window = MIN_REPLAY_WINDOW + u32::from(input.u8()) * 8;
    let mut sas: Vec<SaParams> = Vec::new();
    let mut set = InboundSet::new();
    for t in transforms {
        let mut p = params(t);
        p.replay_window = window;
        if sas.iter().any(|s| s.spi == p.spi) {
            continue; // the same transform twice: one SA
        }
        set.insert(InboundSa::new(p.clone()).expect("valid SA"))
            .expect("a new SPI");
        sas.push(p);
    }

    let mut out = vec![0u8; 8192];
    let (mut datagrams, mut opened, mut opened_bytes) = (0u64, 0u64, 0u64);
    let (mut keepalives, mut non_esp, mut drops) = (0u64, 0u64, DropCounts::default());
    while !input.is_empty() {
        let kind = input.u8();
        let len = usize::from(input.u16());
        let bytes = input.take(len);
        let sa = &sas[usize::from(kind >> 2) % sas.len()];
        let t = sa.transform;
        let (made, datagram) = match kind % 4 {
            1 if bytes.len() >= 4 + t.iv_len() => {
                let sequence = [bytes[0], bytes[1], bytes[2], bytes[3]];
                let iv = &bytes[4..4 + t.iv_len()];
                (
                    Made::Crafted,
                    craft(sa, sequence, iv, &bytes[4 + t.iv_len()..]),
                )
            }
            2 if bytes.len() >= 5 => {
                let sequence =
                    1 + u64::from(u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
                        % MAX_SEQUENCE;
                let inner = ip_packet(bytes[4] % 2 == 1, &bytes[5..]);
                let mut peer = OutboundSa::starting_at(sa.clone(), sequence).expect("valid SA");
                let mut packet = vec![0u8; t.sealed_len(inner.len())];
                peer.seal(&inner, &mut packet)
                    .expect("a consistent inner packet seals");
                (Made::Genuine(inner), packet)
            }
            3 => {
                let special = match bytes.len() % 3 {
                    0 => NAT_KEEPALIVE.to_vec(),
                    1 => [&NON_ESP_MARKER[..], bytes].concat(),
                    _ => bytes[..bytes.len().min(3)].to_vec(),
                };
                (Made::Special, special)
            }
            _ => (Made::Raw, bytes.to_vec()),
        };
        datagrams += 1;
        match set.receive_udp(&datagram, &mut out) {
            Inbound::Packet { spi, inner } => {
                opened += 1;
                opened_bytes += inner.len() as u64;
                assert!(inner.len() <= datagram.len());
                assert!(
                    consistent_ip(inner),
                    "accepted an inconsistent inner packet"
                );
                let by = sas
                    .iter()
                    .find(|s| s.spi == spi)
                    .expect("an SA of the set opened it");
                match &made {
                    Made::Genuine(sealed) => {
                        assert_eq!(&inner[..], &sealed[..], "opened to something else")
                    }
                    Made::Raw | Made::Special => assert_eq!(
                        by.transform,
                        Transform::Null,
                        "an unsealed payload opened on {}",
                        by.transform.name()
                    ),
                    Made::Crafted => {}
                }
            }
            Inbound::NatKeepalive => {
                keepalives += 1;
                assert_eq!(datagram, NAT_KEEPALIVE);
            }
            Inbound::NonEsp(ike) => {
                non_esp += 1;
                assert_eq!(
                    ike,
                    &datagram[4..],
                    "the IKE bytes are those after the marker"
                );
            }
            Inbound::Dropped(reason) => {
                drops.increment(reason);
                if let Made::Genuine(_) = made {
                    assert!(
                        matches!(reason, DropReason::Replayed | DropReason::TooOld),
                        "a genuine packet was refused as {reason:?}"
                    );
                }
            }
        }
    }
    let a = set.accounting();
    assert_eq!(a.received, datagrams, "every payload counted as received");
    assert_eq!(a.opened_packets, opened);
    assert_eq!(a.opened_bytes, opened_bytes);
    assert_eq!(a.nat_keepalives, keepalives);
    assert_eq!(a.non_esp, non_esp);
    assert_eq!(a.drops, drops, "drops per reason are the outcomes returned");
    assert_eq!(
        a.unaccounted(),
        0,
        "received = opened + dropped + keepalive + non-ESP"
    );
}
