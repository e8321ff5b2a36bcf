//! The anti-replay window of RFC 4303 §3.4.3, as the RFC 6479 ring of 64-bit words:
//! advancing the window clears whole words instead of shifting the bitmap, so the
//! cost per packet does not grow with the window.
//!
//! Checking and updating are separate steps on purpose: `open` checks before it
//! decrypts and updates only after the ICV verifies, so a forged packet cannot move
//! the window. The window holds only 32-bit sequence numbers (no ESN).

use crate::counters::DropReason;

/// What the window says about a sequence number before the ICV is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayCheck {
    /// Not seen and not too old: go on to verify the ICV.
    Fresh,
    /// Dropped (`Replayed` or `TooOld`).
    Drop(DropReason),
}

/// An anti-replay window of `size` packets.
#[derive(Debug, Clone)]
pub struct ReplayWindow {
    /// The highest sequence number accepted so far (0: none yet).
    top: u64,
    size: u64,
    /// Ring of bits, bit `sequence % (64 * words)`; at least one word more than the
    /// window needs (RFC 6479 §2), so advancing never clears a bit still inside it.
    bits: Vec<u64>,
    /// `bits.len() - 1`; the word count is a power of two.
    word_mask: u64,
}

impl ReplayWindow {
    /// A window of `size` packets. The caller validates the size
    /// (`MIN_REPLAY_WINDOW..=MAX_REPLAY_WINDOW`).
    pub fn new(size: u32) -> ReplayWindow {
        let size = u64::from(size.max(1));
        let words = (size.div_ceil(64) + 1).next_power_of_two();
        ReplayWindow {
            top: 0,
            size,
            bits: vec![0; words as usize],
            word_mask: words - 1,
        }
    }

    /// The highest sequence number accepted so far (0 before the first).
    pub fn top(&self) -> u64 {
        self.top
    }

    fn slot(&self, sequence: u64) -> (usize, u64) {
        (
            ((sequence >> 6) & self.word_mask) as usize,
            1u64 << (sequence & 63),
        )
    }

    /// RFC 4303 §3.4.3: may a packet with this sequence number go on to ICV
    /// verification? Does not change the window.
    pub fn check(&self, sequence: u64) -> ReplayCheck {
        if sequence == 0 {
            // §3.3.3: the first packet carries 1; 0 is never sent.
            return ReplayCheck::Drop(DropReason::TooOld);
        }
        if sequence > self.top {
            return ReplayCheck::Fresh;
        }
        if self.top - sequence >= self.size {
            return ReplayCheck::Drop(DropReason::TooOld);
        }
        let (word, bit) = self.slot(sequence);
        if self.bits[word] & bit != 0 {
            ReplayCheck::Drop(DropReason::Replayed)
        } else {
            ReplayCheck::Fresh
        }
    }

    /// Marks `sequence` received, sliding the window if it is new on the right. Call
    /// only after [`ReplayWindow::check`] said `Fresh` and the ICV verified.
    pub fn update(&mut self, sequence: u64) {
        if sequence > self.top {
            let old_block = self.top >> 6;
            let new_block = sequence >> 6;
            let advance = new_block - old_block;
            if advance > self.word_mask {
                self.bits.fill(0);
            } else {
                for block in old_block + 1..=new_block {
                    self.bits[(block & self.word_mask) as usize] = 0;
                }
            }
            self.top = sequence;
        }
        let (word, bit) = self.slot(sequence);
        self.bits[word] |= bit;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    /// The RFC's definition, with no cleverness: every accepted number remembered.
    struct Naive {
        size: u64,
        top: u64,
        seen: BTreeSet<u64>,
    }

    impl Naive {
        fn check(&self, s: u64) -> ReplayCheck {
            if s == 0 || (s <= self.top && self.top - s >= self.size) {
                ReplayCheck::Drop(DropReason::TooOld)
            } else if self.seen.contains(&s) {
                ReplayCheck::Drop(DropReason::Replayed)
            } else {
                ReplayCheck::Fresh
            }
        }
        fn update(&mut self, s: u64) {
            self.top = self.top.max(s);
            self.seen.insert(s);
        }
    }

    /// One step of a table: a packet arrives; `authentic` false means its ICV fails,
    /// so the window is checked but never updated.
    struct Step {
        sequence: u64,
        authentic: bool,
        expect: ReplayCheck,
    }

    const FRESH: ReplayCheck = ReplayCheck::Fresh;
    const REPLAYED: ReplayCheck = ReplayCheck::Drop(DropReason::Replayed);
    const TOO_OLD: ReplayCheck = ReplayCheck::Drop(DropReason::TooOld);

    fn ok(sequence: u64, expect: ReplayCheck) -> Step {
        Step {
            sequence,
            authentic: true,
            expect,
        }
    }
    fn forged(sequence: u64, expect: ReplayCheck) -> Step {
        Step {
            sequence,
            authentic: false,
            expect,
        }
    }

    fn run_table(size: u32, table: &[Step]) {
        let mut window = ReplayWindow::new(size);
        let mut naive = Naive {
            size: u64::from(size),
            top: 0,
            seen: BTreeSet::new(),
        };
        for (i, step) in table.iter().enumerate() {
            let got = window.check(step.sequence);
            assert_eq!(got, step.expect, "step {i}: sequence {}", step.sequence);
            assert_eq!(
                naive.check(step.sequence),
                step.expect,
                "naive model, step {i}"
            );
            if got == FRESH && step.authentic {
                window.update(step.sequence);
                naive.update(step.sequence);
            }
        }
    }

    #[test]
    fn accepts_in_order_and_rejects_duplicates() {
        run_table(
            128,
            &[
                ok(1, FRESH),
                ok(2, FRESH),
                ok(3, FRESH),
                ok(3, REPLAYED),
                ok(1, REPLAYED),
                ok(4, FRESH),
            ],
        );
    }

    #[test]
    fn rejects_sequence_number_zero() {
        run_table(128, &[ok(0, TOO_OLD), ok(1, FRESH), ok(0, TOO_OLD)]);
    }

    #[test]
    fn accepts_out_of_order_inside_the_window_once() {
        run_table(
            128,
            &[
                ok(10, FRESH),
                ok(5, FRESH),
                ok(7, FRESH),
                ok(5, REPLAYED),
                ok(1, FRESH),
                ok(9, FRESH),
                ok(9, REPLAYED),
                ok(11, FRESH),
                ok(6, FRESH),
            ],
        );
    }

    #[test]
    fn window_edges_are_exact() {
        // Top 200, size 128: 73..=200 inside, 72 just outside.
        run_table(
            128,
            &[
                ok(200, FRESH),
                ok(73, FRESH),
                ok(73, REPLAYED),
                ok(72, TOO_OLD),
                ok(201, FRESH),
                ok(73, TOO_OLD),
                ok(74, FRESH),
            ],
        );
        // The minimum window, 32.
        run_table(
            32,
            &[ok(40, FRESH), ok(9, FRESH), ok(8, TOO_OLD), ok(9, REPLAYED)],
        );
    }

    #[test]
    fn far_jumps_clear_the_old_bits() {
        run_table(
            128,
            &[
                ok(1, FRESH),
                ok(2, FRESH),
                ok(1_000, FRESH),
                ok(2, TOO_OLD),
                ok(900, FRESH),
                ok(873, FRESH),
                ok(872, TOO_OLD),
                ok(873, REPLAYED),
                ok(1_064, FRESH),
                ok(1_000, REPLAYED),
                ok(900, TOO_OLD),
                ok(5_000_000, FRESH),
                ok(1_000, TOO_OLD),
                ok(4_999_999, FRESH),
                ok(u32::MAX as u64, FRESH),
                ok(u32::MAX as u64 - 127, FRESH),
                ok(u32::MAX as u64 - 128, TOO_OLD),
                ok(u32::MAX as u64, REPLAYED),
            ],
        );
    }

    #[test]
    fn forged_far_future_packet_does_not_advance_the_window() {
        run_table(
            128,
            &[
                ok(100, FRESH),
                forged(1_000_000, FRESH),
                // Were the window advanced, these would be too old.
                ok(99, FRESH),
                ok(50, FRESH),
                forged(u32::MAX as u64, FRESH),
                ok(101, FRESH),
                ok(1_000_000, FRESH),
                ok(101, TOO_OLD),
            ],
        );
        let mut w = ReplayWindow::new(128);
        w.update(100);
        assert_eq!(w.check(1_000_000), FRESH);
        assert_eq!(w.top(), 100, "check alone never moves the window");
    }

    proptest! {
        #[test]
        fn agrees_with_the_naive_model(
            size in prop_oneof![Just(32u32), Just(64), Just(100), Just(128), Just(1024)],
            steps in proptest::collection::vec((0u64..3, 0u64..400, any::<bool>()), 1..300),
        ) {
            let mut window = ReplayWindow::new(size);
            let mut naive = Naive { size: u64::from(size), top: 0, seen: BTreeSet::new() };
            let mut base = 0u64;
            for (kind, delta, authentic) in steps {
                // Mostly near the top, sometimes behind it, sometimes a jump.
                let sequence = match kind {
                    0 => base + delta / 8,
                    1 => base.saturating_sub(delta),
                    _ => base + delta * 16,
                };
                let got = window.check(sequence);
                prop_assert_eq!(got, naive.check(sequence), "sequence {}", sequence);
                if got == ReplayCheck::Fresh && authentic {
                    window.update(sequence);
                    naive.update(sequence);
                    base = naive.top;
                }
            }
        }
    }
}
