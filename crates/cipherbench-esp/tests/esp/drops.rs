//! Every drop reason from a crafted packet, for every transform: each is dropped
//! without a panic, increments exactly its own counter and leaves no plaintext behind.
//! Packets with a broken inside but a valid ICV come from the reference encoder.

use crate::common::{expect_drop, gateways, ipv4, ipv6, iv_for, reference_seal, with_trailer};
use cipherbench_esp::{DropReason, Inbound, InboundSa, InboundSet, Lifetime, Transform};

/// A set holding the responder's inbound SA for `t`, and its parameters.
fn receiver(t: Transform) -> (InboundSet, cipherbench_esp::SaParams) {
    let g = gateways(t, 128);
    (g.responder_in, g.initiator.outbound)
}

fn valid_packet(params: &cipherbench_esp::SaParams, sequence: u32, inner: &[u8]) -> Vec<u8> {
    let t = params.transform;
    reference_seal(
        params,
        sequence,
        &iv_for(t, sequence),
        &with_trailer(inner, t.alignment(), 4),
    )
}

#[test]
fn short_packets_are_truncated_whatever_their_length() {
    for t in Transform::ALL {
        let (mut set, params) = receiver(t);
        let full = valid_packet(&params, 1, &ipv4(20, 0));
        for len in 0..t.min_packet_len() {
            expect_drop(
                &mut set,
                &full[..len],
                DropReason::Truncated,
                &format!("{t}: {len} bytes"),
            );
        }
    }
}

#[test]
fn payloads_too_short_to_classify_are_dropped_before_any_sa() {
    // RFC 3948 §2: fewer than 4 bytes hold neither an SPI nor the non-ESP marker; only
    // the one-byte 0xFF keepalive is a payload that short.
    for t in Transform::ALL {
        let (mut set, _) = receiver(t);
        let mut out = [0u8; 64];
        for payload in [
            &[][..],
            &[0],
            &[0xFE],
            &[0xFF, 0xFF],
            &[0, 0],
            &[0, 0, 0],
            &[9; 3],
        ] {
            assert_eq!(
                set.receive_udp(payload, &mut out),
                Inbound::Dropped(DropReason::Unclassifiable),
                "{t}: {payload:?}"
            );
        }
        let a = set.accounting();
        assert_eq!(a.drops.get(DropReason::Unclassifiable), 7, "{t}");
        assert_eq!((a.received, a.drops.total(), a.unaccounted()), (7, 7, 0));
        assert_eq!(set.counters().drops.get(DropReason::Unclassifiable), 7);
    }
}

#[test]
fn unknown_spi_is_counted_by_the_set() {
    for t in Transform::ALL {
        let (mut set, mut params) = receiver(t);
        params.spi ^= 0x8000_0000;
        expect_drop(
            &mut set,
            &valid_packet(&params, 1, &ipv4(20, 0)),
            DropReason::UnknownSpi,
            t.name(),
        );
        assert_eq!(set.counters().drops.get(DropReason::UnknownSpi), 1);
    }
}

#[test]
fn ciphertext_that_is_not_whole_blocks_is_truncated() {
    for t in Transform::ALL {
        let (mut set, params) = receiver(t);
        let full = valid_packet(&params, 1, &ipv4(100, 0));
        let body_end = full.len() - t.icv_len();
        for cut in 1..t.alignment() {
            // Remove `cut` bytes from the end of the ciphertext, keeping the ICV.
            let mut short = full[..body_end - cut].to_vec();
            short.extend_from_slice(&full[body_end..]);
            expect_drop(
                &mut set,
                &short,
                DropReason::Truncated,
                &format!("{t}: cut {cut}"),
            );
        }
    }
}

#[test]
fn a_flipped_bit_anywhere_is_caught() {
    for t in Transform::SECURE {
        let (mut set, params) = receiver(t);
        let packet = valid_packet(&params, 5, &ipv4(33, 9));
        for byte in 0..packet.len() {
            for bit in 0..8 {
                let mut forged = packet.clone();
                forged[byte] ^= 1 << bit;
                let reason = if byte < 4 {
                    DropReason::UnknownSpi
                } else {
                    // Sequence, IV, ciphertext, ICV: all covered by the ICV.
                    DropReason::AuthenticationFailed
                };
                expect_drop(
                    &mut set,
                    &forged,
                    reason,
                    &format!("{t}: byte {byte} bit {bit}"),
                );
            }
        }
        // None of the forgeries moved the window: the genuine packet still opens.
        let mut out = [0u8; 200];
        assert_eq!(set.open(&packet, &mut out), Ok(33));
    }
}

#[test]
fn replayed_and_too_old_packets_are_dropped_before_decryption() {
    for t in Transform::ALL {
        let (mut set, params) = receiver(t);
        let mut out = [0u8; 200];
        let first = valid_packet(&params, 1, &ipv4(20, 0));
        assert_eq!(set.open(&first, &mut out), Ok(20));
        expect_drop(&mut set, &first, DropReason::Replayed, t.name());
        assert_eq!(
            set.open(&valid_packet(&params, 500, &ipv4(20, 0)), &mut out),
            Ok(20)
        );
        let old = valid_packet(&params, 372, &ipv4(20, 0));
        expect_drop(&mut set, &old, DropReason::TooOld, t.name());
        expect_drop(
            &mut set,
            &valid_packet(&params, 0, &ipv4(20, 0)),
            DropReason::TooOld,
            t.name(),
        );
        assert_eq!(
            set.open(&valid_packet(&params, 373, &ipv4(20, 0)), &mut out),
            Ok(20)
        );
    }
}

#[test]
fn bad_padding_is_dropped() {
    for t in Transform::ALL {
        let (mut set, params) = receiver(t);
        let inner = ipv4(21, 0);
        let good = with_trailer(&inner, t.alignment(), 4);
        let n = good.len();
        // Pad length pointing past the start of the payload.
        let mut past = good.clone();
        past[n - 2] = (n - 1) as u8;
        // Padding bytes that are not 1, 2, 3...
        let mut wrong = good.clone();
        let pad = usize::from(good[n - 2]);
        assert!(pad >= 1, "{t}: 21 + 2 must need padding");
        wrong[n - 3] ^= 0x40;
        for (i, crafted) in [past, wrong].into_iter().enumerate() {
            let packet = reference_seal(&params, 1 + i as u32, &iv_for(t, 1), &crafted);
            expect_drop(
                &mut set,
                &packet,
                DropReason::BadPadding,
                &format!("{t} case {i}"),
            );
        }
        // The ICV verified, so the window moved: the same packets are now replays.
        let replay = reference_seal(&params, 1, &iv_for(t, 1), &good);
        let expected = if t == Transform::Null {
            Ok(21)
        } else {
            Err(DropReason::Replayed)
        };
        assert_eq!(set.open(&replay, &mut [0u8; 200]), expected, "{t}");
    }
}

#[test]
fn next_headers_other_than_ipv4_and_ipv6_are_dropped() {
    for t in Transform::ALL {
        let (mut set, params) = receiver(t);
        for (i, next_header) in [0u8, 6, 17, 50, 59, 255].into_iter().enumerate() {
            let crafted = with_trailer(&ipv4(40, 0), t.alignment(), next_header);
            let packet = reference_seal(&params, 1 + i as u32, &iv_for(t, 1), &crafted);
            expect_drop(
                &mut set,
                &packet,
                DropReason::BadNextHeader,
                &format!("{t} nh {next_header}"),
            );
        }
    }
}

#[test]
fn inner_packets_inconsistent_with_their_header_are_dropped() {
    for t in Transform::ALL {
        let (mut set, params) = receiver(t);
        let mut wrong_total = ipv4(60, 0);
        wrong_total[3] = 61;
        let mut long_ihl = ipv4(40, 0);
        long_ihl[0] = 0x4f;
        let mut wrong_payload = ipv6(60, 0);
        wrong_payload[5] = 21;
        let cases: [(Vec<u8>, u8); 6] = [
            (ipv4(40, 0), 41), // IPv4 packet labelled IPv6
            (ipv6(60, 0), 4),  // IPv6 packet labelled IPv4
            (wrong_total, 4),
            (long_ihl, 4),
            (wrong_payload, 41),
            (vec![0x45; 12], 4), // shorter than an IPv4 header
        ];
        for (i, (inner, next_header)) in cases.into_iter().enumerate() {
            let crafted = with_trailer(&inner, t.alignment(), next_header);
            let packet = reference_seal(&params, 1 + i as u32, &iv_for(t, 1), &crafted);
            expect_drop(
                &mut set,
                &packet,
                DropReason::MalformedInner,
                &format!("{t} case {i}"),
            );
        }
    }
}

#[test]
fn payloads_larger_than_the_output_buffer_are_dropped() {
    for t in Transform::ALL {
        let (mut set, params) = receiver(t);
        let packet = valid_packet(&params, 1, &ipv4(1000, 0));
        let mut small = vec![0u8; 999];
        assert_eq!(
            set.open(&packet, &mut small),
            Err(DropReason::TooLarge),
            "{t}"
        );
        assert_eq!(set.total_drops().get(DropReason::TooLarge), 1);
        assert_eq!(set.total_drops().total(), 1);
        // Not a replay afterwards: nothing was checked, nothing moved.
        let mut big = vec![0u8; 2000];
        assert_eq!(set.open(&packet, &mut big), Ok(1000));
    }
}

#[test]
fn an_expired_inbound_sa_drops_everything() {
    for t in Transform::ALL {
        let (_, mut params) = receiver(t);
        params.lifetime = Lifetime {
            packets: Some(1),
            bytes: None,
        };
        let mut set = InboundSet::new();
        set.insert(InboundSa::new(params.clone()).unwrap()).unwrap();
        let mut out = [0u8; 200];
        assert_eq!(
            set.open(&valid_packet(&params, 1, &ipv4(20, 0)), &mut out),
            Ok(20)
        );
        let next = valid_packet(&params, 2, &ipv4(20, 0));
        expect_drop(&mut set, &next, DropReason::SaExpired, t.name());
    }
}

#[test]
fn every_reason_is_exercised_here() {
    // A reminder that keeps this file honest: each reason has a test above.
    let covered = [
        DropReason::Unclassifiable,
        DropReason::Truncated,
        DropReason::UnknownSpi,
        DropReason::TooLarge,
        DropReason::SaExpired,
        DropReason::TooOld,
        DropReason::Replayed,
        DropReason::AuthenticationFailed,
        DropReason::BadPadding,
        DropReason::BadNextHeader,
        DropReason::MalformedInner,
    ];
    assert_eq!(covered, DropReason::ALL);
}

#[test]
fn random_garbage_never_panics() {
    // A cheap stand-in for the fuzzer in every `cargo test`: deterministic noise of
    // every length, with and without a known SPI in front.
    for t in Transform::ALL {
        let (mut set, params) = receiver(t);
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut out = vec![0u8; 600];
        for len in 0..600 {
            let mut packet: Vec<u8> = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state as u8
                })
                .collect();
            if len >= 4 && len % 2 == 0 {
                packet[..4].copy_from_slice(&params.spi.to_be_bytes());
            }
            let _ = set.receive_udp(&packet, &mut out);
        }
        let a = set.accounting();
        assert_eq!(a.received, 600, "{t}");
        assert_eq!(a.unaccounted(), 0, "{t}: every input accounted for: {a:?}");
        if t != Transform::Null {
            assert_eq!(a.opened_packets, 0, "{t}: garbage accepted");
        }
    }
}
