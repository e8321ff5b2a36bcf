//! cipherbench-esp's integration tests, one binary: known answers through the SA's
//! crypto calls, packet-level round trips and interop, every drop reason from a crafted
//! packet, exactly one outcome for every received payload, sequence exhaustion, and an
//! in-memory two-gateway network with loss, reordering and duplication, and the
//! ordered parallel pipeline with concurrent workers.
//!
//! Every test here involves crypto, so the whole binary runs twice: in this process
//! (the library's default, accelerated paths) and, from [`variants`], in a child with
//! AES-NI and PCLMULQDQ masked (`noaesni`).

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test; clippy's allow-unwrap-in-tests does not reach helpers outside #[test] functions"
)]

mod accounting;
mod common;
mod concurrent;
mod drops;
mod harness;
mod kat;
mod packet;
mod pipeline;
mod variants;
