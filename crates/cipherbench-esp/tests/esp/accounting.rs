//! Every UDP payload received on the ESP-in-UDP port has exactly one outcome (RFC 3948
//! §2): a property test over random mixes of genuine ESP, duplicates, forgeries,
//! truncations, unknown SPIs, NAT keepalives, IKE behind the non-ESP marker, payloads
//! too short to classify (the empty one included) and noise. The outcomes
//! `receive_udp` returns, tallied here, must equal the set's own counters, and
//! `received = opened + drops by reason + keepalives + non-ESP` must hold exactly.

use crate::common::{gateways, ipv4};
use cipherbench_esp::udp::{NAT_KEEPALIVE, NON_ESP_MARKER};
use cipherbench_esp::{DropCounts, DropReason, Inbound, Transform};
use proptest::prelude::*;

/// What the test sends, chosen by proptest.
#[derive(Debug, Clone)]
enum Kind {
    /// The next genuine ESP packet.
    Fresh,
    /// A copy of an earlier one (by index, modulo what was sent so far).
    Duplicate(usize),
    /// A genuine packet with one bit flipped at a position (modulo its length).
    Forged(usize),
    /// A genuine packet cut to a length (modulo its length).
    Cut(usize),
    /// A genuine packet under another SPI.
    UnknownSpi,
    Keepalive,
    /// The non-ESP marker and these bytes.
    Ike(Vec<u8>),
    /// 0 to 3 bytes that are not a keepalive.
    Short(Vec<u8>),
    /// Any bytes at all.
    Noise(Vec<u8>),
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        6 => Just(Kind::Fresh),
        2 => any::<usize>().prop_map(Kind::Duplicate),
        1 => any::<usize>().prop_map(Kind::Forged),
        1 => any::<usize>().prop_map(Kind::Cut),
        1 => Just(Kind::UnknownSpi),
        1 => Just(Kind::Keepalive),
        1 => proptest::collection::vec(any::<u8>(), 0..40).prop_map(Kind::Ike),
        1 => proptest::collection::vec(any::<u8>(), 0..4).prop_map(Kind::Short),
        1 => proptest::collection::vec(any::<u8>(), 0..120).prop_map(Kind::Noise),
    ]
}

/// The outcomes as `receive_udp` returned them.
#[derive(Debug, Default, PartialEq, Eq)]
struct Tally {
    opened: u64,
    drops: DropCounts,
    keepalives: u64,
    non_esp: u64,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn every_received_payload_has_exactly_one_outcome(
        transform in proptest::sample::select(Transform::ALL.to_vec()),
        kinds in proptest::collection::vec(kind(), 1..200),
    ) {
        let mut g = gateways(transform, 64);
        let mut sent: Vec<Vec<u8>> = Vec::new();
        let seal = |g: &mut crate::common::Gateways, sent: &mut Vec<Vec<u8>>| {
            let mut wire = vec![0u8; 256];
            let n = g.initiator_out.seal(&ipv4(60, sent.len() as u8), &mut wire).unwrap();
            wire.truncate(n);
            sent.push(wire.clone());
            wire
        };
        let mut tally = Tally::default();
        // What RFC 3948 says the payloads are by their first bytes alone (noise can be a
        // keepalive or carry the non-ESP marker too).
        let (mut keepalives, mut ike) = (0u64, 0u64);
        let mut out = vec![0u8; 512];
        for k in &kinds {
            let payload = match k {
                Kind::Fresh => seal(&mut g, &mut sent),
                Kind::Duplicate(i) if !sent.is_empty() => sent[i % sent.len()].clone(),
                Kind::Duplicate(_) => seal(&mut g, &mut sent),
                Kind::Forged(at) => {
                    let mut p = seal(&mut g, &mut sent);
                    let at = at % p.len();
                    p[at] ^= 0x01;
                    p
                }
                Kind::Cut(len) => {
                    let p = seal(&mut g, &mut sent);
                    p[..len % p.len()].to_vec()
                }
                Kind::UnknownSpi => {
                    let mut p = seal(&mut g, &mut sent);
                    p[0] ^= 0x80;
                    p
                }
                Kind::Keepalive => NAT_KEEPALIVE.to_vec(),
                Kind::Ike(rest) => [&NON_ESP_MARKER[..], rest].concat(),
                Kind::Short(bytes) if bytes[..] == NAT_KEEPALIVE => vec![],
                Kind::Short(bytes) => bytes.clone(),
                Kind::Noise(bytes) => bytes.clone(),
            };
            if payload[..] == NAT_KEEPALIVE {
                keepalives += 1;
            } else if payload.starts_with(&NON_ESP_MARKER) {
                ike += 1;
            }
            let outcome = match g.responder_in.receive_udp(&payload, &mut out) {
                Inbound::Packet { .. } => {
                    tally.opened += 1;
                    "opened"
                }
                Inbound::Dropped(reason) => {
                    tally.drops.increment(reason);
                    reason.name()
                }
                Inbound::NatKeepalive => {
                    tally.keepalives += 1;
                    "keepalive"
                }
                Inbound::NonEsp(_) => {
                    tally.non_esp += 1;
                    "non_esp"
                }
            };
            // The classes RFC 3948 fixes by the first bytes alone.
            let expected = match k {
                Kind::Keepalive => Some("keepalive"),
                Kind::Ike(_) => Some("non_esp"),
                Kind::Short(_) => Some(DropReason::Unclassifiable.name()),
                _ => None,
            };
            if let Some(expected) = expected {
                prop_assert_eq!(outcome, expected, "{:?}", k);
            }
        }
        let a = g.responder_in.accounting();
        prop_assert_eq!(a.received, kinds.len() as u64);
        prop_assert_eq!(a.unaccounted(), 0, "{:?}", a);
        prop_assert_eq!(
            Tally {
                opened: a.opened_packets,
                drops: a.drops,
                keepalives: a.nat_keepalives,
                non_esp: a.non_esp,
            },
            tally
        );
        prop_assert_eq!(a.non_esp, ike);
        prop_assert_eq!(a.nat_keepalives, keepalives);
        // Nothing genuine was opened twice: at most one per sealed packet.
        prop_assert!(a.opened_packets <= sent.len() as u64);
    }
}

#[test]
fn noise_and_ike_noise_land_in_one_place_each() {
    // A deterministic companion to the property: the smallest payload of each class.
    let mut g = gateways(Transform::Aes256Gcm, 64);
    let mut out = [0u8; 64];
    let cases: [(&[u8], &str); 6] = [
        (&[], "unclassifiable"),
        (&[0xFF], "keepalive"),
        (&[0xFF, 0xFF, 0xFF], "unclassifiable"),
        (&[0, 0, 0, 0], "non_esp"),
        (&[0, 0, 0, 1], "truncated"),
        (&[0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 1, 2, 3], "unknown_spi"),
    ];
    for (payload, expected) in cases {
        let got = match g.responder_in.receive_udp(payload, &mut out) {
            Inbound::NatKeepalive => "keepalive",
            Inbound::NonEsp(_) => "non_esp",
            Inbound::Dropped(r) => r.name(),
            Inbound::Packet { .. } => "opened",
        };
        assert_eq!(got, expected, "{payload:?}");
    }
    let a = g.responder_in.accounting();
    assert_eq!((a.received, a.unaccounted()), (6, 0));
}
