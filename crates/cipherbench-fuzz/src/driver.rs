//! The stable-Rust driver: a deterministic mutation loop over a seed corpus.
//!
//! It is not a coverage-guided fuzzer (no instrumentation, no corpus growth): each run
//! takes a seed picked by a fixed-seed PRNG (SplitMix64), applies one to four
//! libFuzzer-style mutations (bit flip, random byte, insert, erase, duplicate,
//! interesting integers, tokens, a splice with another seed) and calls the target.
//! The same seeds, seed and run count give the same inputs on every machine, so a
//! failure it reports is reproduced by running it again. It serves where libFuzzer
//! cannot (stable Rust: `cargo test`'s smoke run, `scripts/fuzz.sh --stable`).

use crate::Target;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::time::{Duration, Instant};

/// SplitMix64 (Steele, Lea, Flood 2014): tiny, fast, and fully determined by its seed.
pub struct Rng(u64);

impl Rng {
    /// A generator started at `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number below `n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// Text fragments the parsers care about, inserted whole.
const TOKENS: [&[u8]; 16] = [
    b",",
    b"KiB",
    b"MiB",
    b"GiB",
    b"kB",
    b"GB",
    b".",
    b"0x",
    b":",
    b"~",
    b"OPENSSL_ia32cap=",
    b" env:",
    b"{",
    b"\"",
    b"18446744073709551615",
    b"\\u0000",
];

/// Values that sit on boundaries.
const INTERESTING: [u64; 12] = [
    0,
    1,
    0x7f,
    0x80,
    0xff,
    0xffff,
    0x8000_0000,
    0xffff_ffff,
    0x1_0000_0000,
    0x7fff_ffff_ffff_ffff,
    u64::MAX,
    u64::MAX - 1,
];

/// One mutation of `input`, which stays at most `max_len` long.
fn mutate_once(rng: &mut Rng, input: &mut Vec<u8>, seeds: &[Vec<u8>], max_len: usize) {
    let len = input.len();
    match rng.below(10) {
        0 if len > 0 => {
            let at = rng.below(len);
            input[at] ^= 1 << rng.below(8);
        }
        1 if len > 0 => {
            let at = rng.below(len);
            input[at] = rng.next_u64() as u8;
        }
        2 => {
            let at = rng.below(len + 1);
            let n = 1 + rng.below(8);
            let bytes: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
            input.splice(at..at, bytes);
        }
        3 if len > 0 => {
            let at = rng.below(len);
            let n = 1 + rng.below((len - at).min(16));
            input.drain(at..at + n);
        }
        4 if len > 0 => {
            let from = rng.below(len);
            let n = 1 + rng.below((len - from).min(32));
            let copy = input[from..from + n].to_vec();
            let at = rng.below(len + 1);
            input.splice(at..at, copy);
        }
        5 if len > 0 => {
            let value = INTERESTING[rng.below(INTERESTING.len())];
            let width = [1usize, 2, 4, 8][rng.below(4)].min(len);
            let at = rng.below(len - width + 1);
            let bytes = if rng.below(2) == 0 {
                value.to_be_bytes()
            } else {
                value.to_le_bytes()
            };
            input[at..at + width].copy_from_slice(&bytes[8 - width..]);
        }
        6 => {
            let token = TOKENS[rng.below(TOKENS.len())];
            let at = rng.below(len + 1);
            input.splice(at..at, token.iter().copied());
        }
        7 if !seeds.is_empty() => {
            // Crossover: our head, another seed's tail.
            let other = &seeds[rng.below(seeds.len())];
            let cut = rng.below(len + 1);
            let from = rng.below(other.len() + 1);
            input.truncate(cut);
            input.extend_from_slice(&other[from..]);
        }
        8 if len > 0 => {
            let at = rng.below(len);
            input[at] = input[at].wrapping_add(rng.below(9) as u8).wrapping_sub(4);
        }
        9 if len > 0 => {
            let at = rng.below(len);
            input[at] = input[rng.below(len)];
        }
        _ => input.push(rng.next_u64() as u8),
    }
    input.truncate(max_len);
}

/// The seed files of a corpus folder, in name order (so runs are reproducible).
pub fn load_seeds(dir: &Path) -> std::io::Result<Vec<Vec<u8>>> {
    let mut paths: Vec<_> = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    paths.retain(|p| p.is_file());
    paths.sort();
    paths.iter().map(std::fs::read).collect()
}

/// What a run did.
#[derive(Debug, Clone, Copy)]
pub struct Stats {
    /// Inputs executed, seeds included.
    pub runs: u64,
    /// Wall time.
    pub elapsed: Duration,
}

impl Stats {
    /// Inputs per second.
    pub fn per_second(&self) -> f64 {
        self.runs as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// An input that broke a property (the panic message went to stderr).
#[derive(Debug)]
pub struct Failure {
    /// The input.
    pub input: Vec<u8>,
    /// Which run it was (0-based; seeds first).
    pub run: u64,
}

/// Runs `target` on every seed, then on mutants until `runs` inputs in all; stops at
/// the first input that panics.
pub fn run(target: Target, seeds: &[Vec<u8>], runs: u64, seed: u64) -> Result<Stats, Failure> {
    let start = Instant::now();
    let mut rng = Rng::new(seed);
    let mut done = 0u64;
    let mut input = Vec::with_capacity(target.max_len);
    while done < runs {
        input.clear();
        if (done as usize) < seeds.len() {
            input.extend_from_slice(&seeds[done as usize]);
            input.truncate(target.max_len);
        } else if seeds.is_empty() {
            mutate_once(&mut rng, &mut input, seeds, target.max_len);
        } else {
            input.extend_from_slice(&seeds[rng.below(seeds.len())]);
            for _ in 0..1 + rng.below(4) {
                mutate_once(&mut rng, &mut input, seeds, target.max_len);
            }
        }
        if catch_unwind(AssertUnwindSafe(|| (target.check)(&input))).is_err() {
            return Err(Failure {
                input: input.clone(),
                run: done,
            });
        }
        done += 1;
    }
    Ok(Stats {
        runs: done,
        elapsed: start.elapsed(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_gives_same_mutants() {
        let seeds = vec![b"16,1KiB".to_vec(), b"OPENSSL_ia32cap=0x1:0x2".to_vec()];
        let mutants = |seed| {
            let mut rng = Rng::new(seed);
            (0..200)
                .map(|_| {
                    let mut m = seeds[rng.below(2)].clone();
                    mutate_once(&mut rng, &mut m, &seeds, 64);
                    m
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(mutants(7), mutants(7));
        assert_ne!(mutants(7), mutants(8));
    }
}
