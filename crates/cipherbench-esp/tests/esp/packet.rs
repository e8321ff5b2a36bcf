//! Packet level: seal then open is the identity for every transform and size, sealed
//! packets are what the RFCs say byte for byte, two gateways keyed from one secret
//! interoperate, and an SA stops at sequence exhaustion and at its lifetimes.

use crate::common::{gateways, ipv4, ipv6, iv_for, reference_seal, with_trailer};
use cipherbench_esp::udp::NAT_KEEPALIVE;
use cipherbench_esp::{
    derive_sa_pair, DropReason, Inbound, InboundSa, InboundSet, Lifetime, OutboundSa, Role,
    SaParams, SealError, Transform, MAX_SEQUENCE,
};
use proptest::prelude::*;

fn round_trip(t: Transform, inner: &[u8]) {
    let mut g = gateways(t, 128);
    let mut wire = vec![0u8; inner.len() + t.max_overhead()];
    let n = g.initiator_out.seal(inner, &mut wire).unwrap();
    assert_eq!(n, t.sealed_len(inner.len()));
    assert_eq!((n - 8 - t.iv_len() - t.icv_len()) % t.alignment(), 0);
    let mut out = vec![0u8; n];
    let m = g.responder_in.open(&wire[..n], &mut out).unwrap();
    assert_eq!(&out[..m], inner, "{t} {} bytes", inner.len());
}

#[test]
fn seal_then_open_is_identity_for_every_size_up_to_1500() {
    for t in Transform::ALL {
        let mut g = gateways(t, 128);
        let mut wire = vec![0u8; 2000];
        let mut out = vec![0u8; 2000];
        for payload in 0..=1500usize {
            for inner in [
                ipv4(20 + payload, payload as u8),
                ipv6(40 + payload, !payload as u8),
            ] {
                let n = g.initiator_out.seal(&inner, &mut wire).unwrap();
                let m = g.responder_in.open(&wire[..n], &mut out).unwrap();
                assert_eq!(&out[..m], &inner[..], "{t}: {} bytes", inner.len());
            }
        }
        let c = g
            .responder_in
            .get(g.initiator.outbound.spi)
            .unwrap()
            .counters();
        assert_eq!(c.opened_packets, 2 * 1501);
        assert_eq!(c.drops.total(), 0);
        assert_eq!(g.initiator_out.counters().sealed_packets, 2 * 1501);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]
    #[test]
    fn seal_then_open_is_identity(
        transform in proptest::sample::select(Transform::ALL.to_vec()),
        v6 in any::<bool>(),
        payload in proptest::collection::vec(any::<u8>(), 0..1500),
    ) {
        let mut inner = if v6 { ipv6(40 + payload.len(), 0) } else { ipv4(20 + payload.len(), 0) };
        let header = if v6 { 40 } else { 20 };
        inner[header..].copy_from_slice(&payload);
        round_trip(transform, &inner);
    }
}

#[test]
fn sealed_packets_match_the_rfc_layout_byte_for_byte() {
    for t in Transform::ALL {
        let mut g = gateways(t, 128);
        let params = g.initiator.outbound.clone();
        for (sequence, len) in [(1u32, 20usize), (2, 41), (3, 1400)] {
            let inner = ipv4(len, 7);
            let mut wire = vec![0u8; 1600];
            let n = g.initiator_out.seal(&inner, &mut wire).unwrap();
            // The CBC IV is random: take the one on the wire. The AEAD IV must be the
            // sequence counter.
            let iv = wire[8..8 + t.iv_len()].to_vec();
            if t.is_aead() {
                assert_eq!(iv, iv_for(t, sequence));
            }
            let expected = reference_seal(
                &params,
                sequence,
                &iv,
                &with_trailer(&inner, t.alignment(), 4),
            );
            assert_eq!(&wire[..n], &expected[..], "{t} #{sequence}");
        }
    }
}

#[test]
fn next_header_follows_the_inner_version() {
    let mut g = gateways(Transform::Null, 128);
    let mut wire = [0u8; 200];
    let n = g.initiator_out.seal(&ipv4(20, 0), &mut wire).unwrap();
    assert_eq!(wire[n - 1], 4);
    let n = g.initiator_out.seal(&ipv6(40, 0), &mut wire).unwrap();
    assert_eq!(wire[n - 1], 41);
    // Monotonic padding: 20 + 2 -> 24, so two pad bytes 1, 2 and pad length 2.
    let n = g.initiator_out.seal(&ipv4(20, 0), &mut wire).unwrap();
    assert_eq!(&wire[8 + 20..n], &[1, 2, 2, 4]);
}

#[test]
fn two_gateways_from_one_secret_interoperate_both_ways() {
    for t in Transform::SECURE {
        let mut g = gateways(t, 128);
        let mut wire = [0u8; 1600];
        let mut out = [0u8; 1600];
        for i in 0..50usize {
            let there = ipv4(20 + i * 7, i as u8);
            let n = g.initiator_out.seal(&there, &mut wire).unwrap();
            match g.responder_in.receive_udp(&wire[..n], &mut out) {
                Inbound::Packet { spi, inner } => {
                    assert_eq!(spi, g.initiator_out.spi());
                    assert_eq!(inner, &there[..]);
                }
                other => panic!("{t}: {other:?}"),
            }
            let back = ipv6(40 + i * 5, i as u8);
            let n = g.responder_out.seal(&back, &mut wire).unwrap();
            let m = g.initiator_in.open(&wire[..n], &mut out).unwrap();
            assert_eq!(&out[..m], &back[..]);
        }
    }
}

#[test]
fn a_different_secret_does_not_interoperate() {
    let t = Transform::Aes256Gcm;
    let ours = derive_sa_pair(&[1u8; 32], "run", t, Role::Initiator).unwrap();
    let theirs = derive_sa_pair(&[2u8; 32], "run", t, Role::Responder).unwrap();
    let mut out_sa = OutboundSa::new(ours.outbound.clone()).unwrap();
    let mut wire = [0u8; 200];
    let n = out_sa.seal(&ipv4(60, 1), &mut wire).unwrap();
    let mut set = InboundSet::new();
    set.insert(InboundSa::new(theirs.inbound.clone()).unwrap())
        .unwrap();
    assert_eq!(
        set.open(&wire[..n], &mut [0u8; 200]),
        Err(DropReason::UnknownSpi)
    );
    // Same SPI, other keys: the ICV fails.
    let mut forged_keys = theirs.inbound;
    forged_keys.spi = ours.outbound.spi;
    let mut sa = InboundSa::new(forged_keys).unwrap();
    assert_eq!(
        sa.open(&wire[..n], &mut [0u8; 200]),
        Err(DropReason::AuthenticationFailed)
    );
}

#[test]
fn sequence_numbers_stop_at_exhaustion_and_never_wrap() {
    for t in Transform::ALL {
        let g = gateways(t, 128);
        let mut out_sa =
            OutboundSa::starting_at(g.initiator.outbound.clone(), MAX_SEQUENCE - 2).unwrap();
        let mut in_sa = InboundSa::new(g.initiator.outbound.clone()).unwrap();
        let mut wire = [0u8; 200];
        let mut out = [0u8; 200];
        for expected in [u32::MAX - 2, u32::MAX - 1, u32::MAX] {
            let n = out_sa.seal(&ipv4(40, 3), &mut wire).unwrap();
            assert_eq!(u32::from_be_bytes(wire[4..8].try_into().unwrap()), expected);
            in_sa.open(&wire[..n], &mut out).unwrap();
        }
        for _ in 0..3 {
            let refused = out_sa.seal(&ipv4(40, 3), &mut wire);
            assert_eq!(
                refused,
                Err(SealError::SequenceExhausted { spi: out_sa.spi() }),
                "{t}"
            );
        }
        assert!(refused_message_mentions_rekey(&out_sa));
        assert_eq!(out_sa.counters().sealed_packets, 3);
        assert_eq!(out_sa.counters().seal_refused, 3);
        assert_eq!(in_sa.window().top(), MAX_SEQUENCE);
    }
    let g = gateways(Transform::Aes128Gcm, 128);
    assert!(OutboundSa::starting_at(g.initiator.outbound.clone(), MAX_SEQUENCE + 2).is_err());
    assert!(OutboundSa::starting_at(g.initiator.outbound, 0).is_err());
}

fn refused_message_mentions_rekey(sa: &OutboundSa) -> bool {
    let text = SealError::SequenceExhausted { spi: sa.spi() }.to_string();
    text.contains("RFC 4303 §3.3.3") && text.contains("rekeyed")
}

#[test]
fn lifetimes_stop_both_directions() {
    let g = gateways(Transform::ChaCha20Poly1305, 128);
    let mut params = g.initiator.outbound.clone();
    params.lifetime = Lifetime {
        packets: Some(3),
        bytes: None,
    };
    let mut out_sa = OutboundSa::new(params.clone()).unwrap();
    let mut wire = [0u8; 200];
    let mut packets = Vec::new();
    for _ in 0..3 {
        let n = out_sa.seal(&ipv4(40, 0), &mut wire).unwrap();
        packets.push(wire[..n].to_vec());
    }
    assert!(matches!(
        out_sa.seal(&ipv4(40, 0), &mut wire),
        Err(SealError::LifetimeExpired { .. })
    ));

    params.lifetime = Lifetime {
        packets: None,
        bytes: Some(50),
    };
    let mut in_sa = InboundSa::new(params).unwrap();
    let mut out = [0u8; 200];
    in_sa.open(&packets[0], &mut out).unwrap();
    in_sa.open(&packets[1], &mut out).unwrap(); // 80 bytes: this one crosses the limit
    assert_eq!(
        in_sa.open(&packets[2], &mut out),
        Err(DropReason::SaExpired)
    );
    assert_eq!(in_sa.counters().drops.get(DropReason::SaExpired), 1);
}

#[test]
fn seal_refuses_what_is_not_an_ip_packet_and_small_buffers() {
    let mut g = gateways(Transform::Aes128Gcm, 128);
    let mut wire = [0u8; 200];
    for bad in [&[][..], &[0x45][..], &[0x50u8; 40][..], &ipv4(40, 0)[..39]] {
        assert_eq!(
            g.initiator_out.seal(bad, &mut wire),
            Err(SealError::MalformedInner)
        );
    }
    let inner = ipv4(100, 0);
    let needed = Transform::Aes128Gcm.sealed_len(100);
    assert_eq!(
        g.initiator_out.seal(&inner, &mut wire[..needed - 1]),
        Err(SealError::OutputTooSmall {
            needed,
            available: needed - 1
        })
    );
    assert_eq!(g.initiator_out.counters().seal_refused, 5);
    // Refusals consume no sequence number.
    assert_eq!(g.initiator_out.next_sequence(), 1);
    assert_eq!(g.initiator_out.seal(&inner, &mut wire), Ok(needed));
}

#[test]
fn sa_parameters_are_validated() {
    let g = gateways(Transform::Aes256Sha256, 128);
    let good = g.initiator.outbound.clone();
    let mut reserved = good.clone();
    reserved.spi = 255;
    assert!(OutboundSa::new(reserved).is_err());
    let mut small_window = good.clone();
    small_window.replay_window = 31;
    assert!(InboundSa::new(small_window).is_err());
    let mut min_window = good.clone();
    min_window.replay_window = 32;
    assert!(InboundSa::new(min_window).is_ok());
    let short = SaParams::new(
        good.spi,
        Transform::Aes256Sha256,
        cipherbench_crypto::secret::SecretBytes::new(vec![0; 63]),
    );
    assert!(OutboundSa::new(short).is_err());
    let mut set = InboundSet::new();
    set.insert(InboundSa::new(good.clone()).unwrap()).unwrap();
    assert!(set.insert(InboundSa::new(good.clone()).unwrap()).is_err());
    assert!(set.remove(good.spi).is_some());
    assert!(set.is_empty());
}

#[test]
fn keepalives_and_ike_are_recognised_and_counted_not_parsed() {
    let mut g = gateways(Transform::Aes128Gcm, 128);
    let mut out = [0u8; 100];
    assert_eq!(
        g.responder_in.receive_udp(&NAT_KEEPALIVE, &mut out),
        Inbound::NatKeepalive
    );
    let ike = [0, 0, 0, 0, 0x21, 0x22];
    assert_eq!(
        g.responder_in.receive_udp(&ike, &mut out),
        Inbound::NonEsp(&[0x21, 0x22])
    );
    assert_eq!(
        g.responder_in.receive_udp(&[1, 2, 3], &mut out),
        Inbound::Dropped(DropReason::Unclassifiable)
    );
    let c = g.responder_in.counters();
    assert_eq!((c.received, c.nat_keepalives, c.non_esp), (3, 1, 1));
    assert_eq!(g.responder_in.total_drops().total(), 1);
    let stats = serde_json::to_value(c).unwrap();
    assert_eq!(stats["drops"]["unclassifiable"], 1);
    assert_eq!(g.responder_in.accounting().unaccounted(), 0);
}

#[test]
fn sealing_a_packet_in_place_gives_the_packet_seal_gives() {
    for t in Transform::ALL {
        let g = gateways(t, 128);
        let mut copying = OutboundSa::new(g.initiator.outbound.clone()).unwrap();
        let mut placing = OutboundSa::new(g.initiator.outbound.clone()).unwrap();
        let mut receiver = gateways(t, 128).responder_in;
        for (i, inner) in [ipv4(20, 1), ipv4(1400, 2), ipv6(41, 3), ipv4(333, 4)]
            .iter()
            .enumerate()
        {
            let mut copied = vec![0u8; 2048];
            let n = copying.seal(inner, &mut copied).unwrap();
            let mut placed = vec![0xeeu8; 2048];
            let at = placing.inner_offset();
            assert_eq!(at, 8 + t.iv_len(), "{t}");
            placed[at..at + inner.len()].copy_from_slice(inner);
            let m = placing.seal_placed(inner.len(), &mut placed).unwrap();
            assert_eq!(m, n, "{t} packet {i}");
            if t == Transform::Aes256Sha256 {
                // CBC draws a random IV: the packets differ, both open.
                let mut out = vec![0u8; 2048];
                let k = receiver.open(&placed[..m], &mut out).unwrap();
                assert_eq!(&out[..k], &inner[..], "{t} packet {i}");
            } else {
                assert_eq!(placed[..m], copied[..n], "{t} packet {i}");
            }
        }
        assert_eq!(placing.counters(), copying.counters(), "{t}");
        // What seal refuses, the placed seal refuses alike, and counts.
        let mut small = vec![0u8; 100];
        let at = placing.inner_offset();
        small[at] = 0x45;
        assert!(matches!(
            placing.seal_placed(200, &mut small),
            Err(SealError::OutputTooSmall { .. })
        ));
        let mut junk = vec![0u8; 2048];
        assert_eq!(
            placing.seal_placed(60, &mut junk),
            Err(SealError::MalformedInner)
        );
        assert_eq!(placing.counters().seal_refused, 2, "{t}");
    }
}
