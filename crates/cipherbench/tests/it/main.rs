//! cipherbench's integration tests, end to end against the real binary and the real
//! parts (nginx, iperf3, OpenSSL, strongSwan, sshd, namespaces, TUN): one test crate,
//! one module per part, so the library is linked into one test binary instead of
//! thirteen. The platform suite (`tests/platform.rs`) stands apart: `make test` runs
//! it alone on the other stacks.
//!
//! Two locks keep the tests' figures their own ([`turns`]):
//! - a module's turn: tests of two modules never run at once, as when each module
//!   was its own binary, because a test's checks (nothing left, exact counts,
//!   variant judges) assume only its own module's tests beside it;
//! - [`turns::alone`]: the one lock of the tests that measure or drive a tunnel,
//!   sshd hosts or charon, which run one at a time.

mod common;
#[path = "../support/schema.rs"]
mod schema;
mod turns;

mod agents;
mod cli;
mod faults;
mod file;
mod gate;
mod handshake;
mod hosts;
mod library;
mod machine;
mod pk;
mod provider;
mod seal_faults;
mod strongswan_root;
mod tls;
mod tunnel_root;
mod variants;
