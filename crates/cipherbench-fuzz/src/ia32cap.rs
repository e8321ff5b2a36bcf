//! Target `ia32cap`: `Ia32Cap::parse_settings`, which reads OpenSSL's effective
//! capability vector out of `openssl info -cpusettings` (the evidence every variant's
//! "took effect" judgement rests on). The `ia32cap:MASK` validator is target `mask`.
//!
//! Input: byte 0 picks the mode. Even: bytes 1..17 are two words and the rest a
//! suffix; `OPENSSL_ia32cap=0x<w0>:0x<w1>` followed by ` env:<suffix>` (and by
//! nothing) parses to exactly those words, whatever the suffix holds. Odd: the rest is
//! text (lossy UTF-8): no panic, and a vector that parses prints in OpenSSL's form and
//! parses back to itself.

use crate::Bytes;
use cipherbench_model::env::Ia32Cap;

/// The vector as OpenSSL prints it.
fn settings(cap: Ia32Cap) -> String {
    format!("OPENSSL_ia32cap=0x{:x}:0x{:x}", cap.word0, cap.word1)
}

/// See the module documentation.
pub fn check(data: &[u8]) {
    let mut input = Bytes::new(data);
    if input.u8().is_multiple_of(2) {
        let cap = Ia32Cap {
            word0: input.u64(),
            word1: input.u64(),
        };
        let suffix = String::from_utf8_lossy(input.rest());
        let plain = settings(cap);
        assert_eq!(Ia32Cap::parse_settings(&plain), Some(cap), "{plain}");
        let with_env = format!("{plain} env:{suffix}");
        assert_eq!(
            Ia32Cap::parse_settings(&with_env),
            Some(cap),
            "{with_env:?}"
        );
    } else {
        let text = String::from_utf8_lossy(input.rest());
        if let Some(cap) = Ia32Cap::parse_settings(&text) {
            assert_eq!(Ia32Cap::parse_settings(&settings(cap)), Some(cap));
        }
    }
}
