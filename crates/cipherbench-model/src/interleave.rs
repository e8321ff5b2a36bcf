//! The order in which a layer measures several variants of the same points: short
//! rounds that alternate the variants (A B A B ..., and B A in every other round, so
//! neither variant always goes first) instead of all of A and then all of B, so that
//! a drift of the machine (a neighbour's load, thermal state, a cron job) lands on
//! both variants alike and cancels in their ratio.
//!
//! [`schedule`] is pure: the layer asks it for the order and keeps the round number
//! of every sample in run.json, which lets a ratio pair round i of A with round i of
//! B ([`crate::interval::Pairing::Paired`]).

use serde::{Deserialize, Serialize};

/// One measurement to take: a round of one variant at one point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Slot {
    /// Round number, from 0.
    pub round: usize,
    /// The point, by index into the layer's points.
    pub point: usize,
    /// The variant, by index into the layer's variants.
    pub variant: usize,
}

/// How rounds are laid over points.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Order {
    /// Each point's rounds together (point 0: A B, B A, A B; then point 1): for
    /// layers whose setup per point is costly (a server to start), drift within one
    /// point's rounds cancels.
    PointByPoint,
    /// One round of every point, then the next round (round 0 over all points, round
    /// 1 over all points): a drift across the whole run reaches every point alike.
    RoundByRound,
}

/// The variants' order in round `round` (from 0): rotated by one each round (A B,
/// B A, A B, ...), the order within each round of [`schedule`]. For a layer that
/// takes a point for a round (the sweep and the ramp turn their slots from one
/// point to the next).
pub fn round_order(variants: usize, round: usize) -> impl Iterator<Item = usize> {
    (0..variants).map(move |k| (k + round) % variants)
}

/// The measuring order of `rounds` rounds of `variants` variants at `points` points.
/// Within a round the variants run back to back, in rotated order from round to
/// round (with two variants: A B, B A, A B, ...), so each variant leads as often as
/// the others and sits next to each of them.
pub fn schedule(points: usize, variants: usize, rounds: usize, order: Order) -> Vec<Slot> {
    let mut out = Vec::with_capacity(points * variants * rounds);
    let round_of = |out: &mut Vec<Slot>, point: usize, round: usize| {
        out.extend(round_order(variants, round).map(|variant| Slot {
            round,
            point,
            variant,
        }));
    };
    match order {
        Order::PointByPoint => {
            for point in 0..points {
                for round in 0..rounds {
                    round_of(&mut out, point, round);
                }
            }
        }
        Order::RoundByRound => {
            for round in 0..rounds {
                for point in 0..points {
                    round_of(&mut out, point, round);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn letters(slots: &[Slot]) -> String {
        slots
            .iter()
            .map(|s| (b'A' + s.variant as u8) as char)
            .collect()
    }

    #[test]
    fn two_variants_alternate_and_take_turns_leading() {
        let s = schedule(1, 2, 4, Order::PointByPoint);
        assert_eq!(letters(&s), "ABBAABBA");
        assert_eq!(
            s.iter().map(|s| s.round).collect::<Vec<_>>(),
            vec![0, 0, 1, 1, 2, 2, 3, 3]
        );
    }

    #[test]
    fn three_variants_rotate() {
        assert_eq!(
            letters(&schedule(1, 3, 3, Order::PointByPoint)),
            "ABCBCACAB"
        );
    }

    #[test]
    fn round_by_round_visits_every_point_before_the_next_round() {
        let s = schedule(3, 2, 2, Order::RoundByRound);
        let points: Vec<usize> = s.iter().map(|s| s.point).collect();
        assert_eq!(points, vec![0, 0, 1, 1, 2, 2, 0, 0, 1, 1, 2, 2]);
        assert!(s[..6].iter().all(|s| s.round == 0));
    }

    #[test]
    fn every_round_of_every_variant_at_every_point_comes_exactly_once() {
        for order in [Order::PointByPoint, Order::RoundByRound] {
            for (p, v, r) in [(1, 1, 1), (4, 2, 5), (3, 3, 2), (2, 4, 3)] {
                let s = schedule(p, v, r, order);
                assert_eq!(s.len(), p * v * r);
                let unique: HashSet<Slot> = s.iter().copied().collect();
                assert_eq!(unique.len(), s.len());
                // Each variant leads a round as often as any other (to within one).
                let mut leads = vec![0; v];
                for chunk in s.chunks(v) {
                    leads[chunk[0].variant] += 1;
                }
                let (lo, hi) = (leads.iter().min().unwrap(), leads.iter().max().unwrap());
                assert!(hi - lo <= p, "{leads:?}");
            }
        }
        assert!(schedule(0, 2, 3, Order::RoundByRound).is_empty());
    }
}
