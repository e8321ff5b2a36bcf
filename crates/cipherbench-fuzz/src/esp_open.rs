//! Target `esp_open`: one SA's `open` (RFC 4303 §3.4) against genuine and forged
//! packets, for every transform.
//!
//! Input: `transform (1) | window (1) | first sequence (4) | edit op (1) | a (2) |
//! b (2) | value (1) | IP version (1) | inner bytes`. The inner bytes become a
//! consistent IPv4 or IPv6 packet, which an outbound SA seals at the chosen sequence
//! number. Properties:
//! - a forged packet never opens: the genuine packet edited (a byte changed, cut,
//!   extended, or its header rewritten) is refused by a fresh inbound SA whenever the
//!   transform has integrity (all but the `null` baseline), leaves no plaintext in the
//!   output buffer, and does not move the replay window (§3.4.3): the genuine packet
//!   still opens after it;
//! - the genuine packet opens to exactly the inner packet, once: the second time it is
//!   refused as replayed;
//! - the SA counts each packet once: opened 1, drops = the refusals.

use crate::Bytes;
use cipherbench_esp::{
    derive_sa_pair, DropReason, InboundSa, OutboundSa, Role, SaParams, Transform, MAX_SEQUENCE,
    MIN_REPLAY_WINDOW,
};
use std::sync::OnceLock;

/// The SA parameters of each transform, derived once (HKDF per input would be most of
/// the time spent).
pub(crate) fn params(transform: Transform) -> SaParams {
    static ALL: OnceLock<Vec<SaParams>> = OnceLock::new();
    let all = ALL.get_or_init(|| {
        Transform::ALL
            .iter()
            .map(|&t| {
                derive_sa_pair(&[0x11; 32], "fuzz", t, Role::Initiator)
                    .expect("a 32-byte secret derives")
                    .outbound
            })
            .collect()
    });
    let at = Transform::ALL
        .iter()
        .position(|&t| t == transform)
        .expect("every transform is in Transform::ALL");
    all[at].clone()
}

/// A consistent inner packet around `body`: IPv4 (20-byte header) or IPv6 (40), with
/// the length field matching, so `seal` accepts it.
pub(crate) fn ip_packet(ipv6: bool, body: &[u8]) -> Vec<u8> {
    let header = if ipv6 { 40 } else { 20 };
    let len = (header + body.len()).min(u16::MAX as usize);
    let mut packet = vec![0u8; header];
    packet.extend_from_slice(&body[..len - header]);
    if ipv6 {
        packet[0] = 0x60;
        packet[4..6].copy_from_slice(&((len - header) as u16).to_be_bytes());
    } else {
        packet[0] = 0x45;
        packet[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    }
    packet
}

/// Bytes a dropped packet may leave in an output buffer that was filled with 0xEE:
/// untouched, or zeroed. Anything else is plaintext (or ciphertext) left behind.
fn no_plaintext_left(out: &[u8]) -> bool {
    out.iter().all(|&b| b == 0xEE || b == 0)
}

/// See the module documentation.
pub fn check(data: &[u8]) {
    let mut input = Bytes::new(data);
    let transform = Transform::ALL[usize::from(input.u8()) % Transform::ALL.len()];
    let mut params = params(transform);
    params.replay_window = MIN_REPLAY_WINDOW + u32::from(input.u8()) * 8;
    let first = 1 + u64::from(input.u32()) % MAX_SEQUENCE;
    let (op, a, b, value) = (input.u8(), input.u16(), input.u16(), input.u8());
    let ipv6 = input.u8() % 2 == 1;
    let inner = ip_packet(ipv6, input.rest());

    let mut outbound = OutboundSa::starting_at(params.clone(), first).expect("valid SA");
    let mut packet = vec![0u8; transform.sealed_len(inner.len())];
    let n = outbound
        .seal(&inner, &mut packet)
        .expect("a consistent inner packet seals");
    assert_eq!(n, packet.len(), "sealed_len is what seal writes");

    let forged = edit(&packet, op, usize::from(a), usize::from(b), value);
    let mut sa = InboundSa::new(params).expect("valid SA");
    let mut out = vec![0xEEu8; packet.len().max(forged.len())];
    let mut refused = 0;
    if forged != packet {
        match sa.open(&forged, &mut out) {
            Ok(len) => {
                assert_eq!(
                    transform,
                    Transform::Null,
                    "a forged {} packet opened",
                    transform.name()
                );
                assert!(len <= forged.len());
            }
            Err(_) => {
                refused += 1;
                assert!(
                    no_plaintext_left(&out),
                    "a refused packet left bytes in out"
                );
            }
        }
    }
    out.fill(0xEE);
    // With the null baseline an accepted forgery may move the window past the genuine
    // sequence number; with integrity nothing forged may.
    match sa.open(&packet, &mut out) {
        Ok(len) => assert_eq!(&out[..len], &inner[..], "opened to something else"),
        Err(reason) => {
            assert_eq!(
                transform,
                Transform::Null,
                "the genuine packet was refused: {reason:?}"
            );
            refused += 1;
        }
    }
    out.fill(0xEE);
    let again = sa.open(&packet, &mut out);
    if transform == Transform::Null {
        // An accepted forgery with a higher sequence number may have left it too old.
        assert!(
            matches!(again, Err(DropReason::Replayed | DropReason::TooOld)),
            "opened twice"
        );
    } else {
        assert_eq!(again, Err(DropReason::Replayed), "opened twice");
    }
    assert!(
        no_plaintext_left(&out),
        "a replayed packet left bytes in out"
    );
    refused += 1;

    let c = sa.counters();
    assert_eq!(c.drops.total(), refused, "each refusal counted once");
    assert_eq!(
        c.opened_packets + c.drops.total(),
        1 + u64::from(forged != packet) + 1,
        "each packet has one outcome"
    );
}

/// Edits a genuine packet: change a byte, cut, extend, rewrite the SPI or sequence
/// number, or rotate everything after the header.
fn edit(packet: &[u8], op: u8, a: usize, b: usize, value: u8) -> Vec<u8> {
    let mut out = packet.to_vec();
    match op % 6 {
        0 => {
            let i = a % out.len();
            out[i] ^= value.max(1);
        }
        1 => out.truncate(a % out.len()),
        2 => out.extend(std::iter::repeat_n(value, 1 + b % 64)),
        3 => out[4..8].copy_from_slice(&((a as u32) << 16 | b as u32).to_be_bytes()),
        4 => {
            // Two bytes changed far apart (a CBC block and its neighbour, a tag).
            let (i, j) = (a % out.len(), b % out.len());
            out[i] ^= value.max(1);
            out[j] ^= value.rotate_left(3).max(1);
        }
        _ => {
            // Everything after the header rotated by `b`: same length, same bytes.
            let n = out.len() - 8;
            out[8..].rotate_right(b % n);
        }
    }
    out
}
