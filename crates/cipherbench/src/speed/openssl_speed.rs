//! `openssl speed -evp ... -mr` for a cross-check of our figures against the tool
//! every reader knows, as like for like as its loops allow (METHODOLOGY.md, "Cross-
//! check against openssl speed"): AEADs with `-aead` (one message per operation with
//! 13 bytes of AAD, as ours), the others as one stream of updates; both sides divided
//! by CPU time, as `openssl speed` does by default. Parsing is a pure function tested
//! on captured output.

use crate::supervisor::{Loader, Spawn};
use anyhow::{bail, Result};
use std::time::Duration;

/// Parses the `+F:` line of `openssl speed -mr`: bytes per second for each size, in
/// the order of the sizes asked. `+F:25:AES-128-GCM:1290035200.00` → `[1.29e9]`.
pub fn parse_mr(output: &str) -> Option<Vec<f64>> {
    let line = output.lines().find(|l| l.starts_with("+F:"))?;
    let fields: Vec<&str> = line.split(':').collect();
    if fields.len() < 4 {
        return None;
    }
    fields[3..]
        .iter()
        .map(|f| f.trim().parse::<f64>().ok())
        .collect()
}

/// One figure of `openssl speed -mr`'s public-key lines: field `at` (the tag being
/// field 0) of the line tagged `tag`. `+F9:13:15800.0:43408.0:28395.0` (a KEM's
/// keygen, encaps and decaps per second) has encaps at field 3.
pub fn parse_mr_field(output: &str, tag: &str, at: usize) -> Option<f64> {
    let line = output.lines().find(|l| l.split(':').next() == Some(tag))?;
    line.split(':')
        .nth(at)?
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|r| r.is_finite() && *r > 0.0)
}

/// The command for one point. Without `-elapsed`, openssl divides by its user CPU
/// time, and the check divides ours by our measuring thread's CPU time: a busy
/// machine then moves neither figure much. `-seconds` bounds it.
pub fn command(name: &str, aead: bool, decrypt: bool, size: u64, seconds: u32) -> Vec<String> {
    let mut args = vec![
        "speed".to_string(),
        "-seconds".into(),
        seconds.to_string(),
        "-bytes".into(),
        size.to_string(),
        "-evp".into(),
        name.into(),
    ];
    if aead {
        args.push("-aead".into());
    }
    if decrypt {
        args.push("-decrypt".into());
    }
    args.push("-mr".into());
    args
}

/// How openssl's AES-GCM `-aead` loop treats each message (apps/speed.c): since
/// OpenSSL PR #25823 (3.4, and backported to 3.0.16-ish, 3.1.8, 3.2.4, 3.3.3) it sets
/// the IV length and re-keys every message; before, it only set a new IV. Told apart
/// by effect of the change: the new loop's error string is in the binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AeadLoop {
    /// `EVP_CipherInit_ex(ctx, NULL, NULL, key, iv)` per message.
    RekeyEachMessage,
    /// `EVP_EncryptInit_ex(ctx, NULL, NULL, NULL, iv)` per message.
    NewIvOnly,
}

/// Which AEAD loop the `openssl` on PATH has (None: the binary could not be read).
pub fn aead_loop() -> Option<AeadLoop> {
    let path = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("openssl"))
            .find(|f| f.is_file())
    })?;
    let binary = std::fs::read(path).ok()?;
    Some(aead_loop_of(&binary))
}

/// The loop of an `openssl` binary's bytes.
pub fn aead_loop_of(binary: &[u8]) -> AeadLoop {
    let needle = b"Failed to set iv length";
    if binary.windows(needle.len()).any(|w| w == needle) {
        AeadLoop::RekeyEachMessage
    } else {
        AeadLoop::NewIvOnly
    }
}

/// What openssl measures per operation for a cipher, in a phrase for the record.
pub fn mode(name: &str, aead: bool, aead_loop: Option<AeadLoop>) -> String {
    if !aead {
        return "-evp: one stream of updates, no per-buffer IV (ours: a new IV per buffer)".into();
    }
    if !name.contains("gcm") {
        return "-aead, but openssl speed runs this AEAD as one stream of updates without per-message IV, AAD or tag (ours: per message): openssl's figure is an upper bound".into();
    }
    match aead_loop {
        Some(AeadLoop::RekeyEachMessage) => "-aead: one message per operation with 13 bytes of AAD and a new IV, re-keyed each message (ours keeps the key)".into(),
        Some(AeadLoop::NewIvOnly) => "-aead: one message per operation with 13 bytes of AAD and a new IV, key kept (as ours)".into(),
        None => "-aead: one message per operation with 13 bytes of AAD and a new IV".into(),
    }
}

/// Runs `openssl` with `args` under the variant's mask, on `cpu` (that of the
/// one-thread points it is compared with); bytes per second.
pub fn run(
    args: &[String],
    ia32cap: Option<&str>,
    env: &[(&str, std::ffi::OsString)],
    loader: Option<&Loader>,
    seconds: u32,
    cpu: Option<usize>,
) -> Result<f64> {
    let out = Spawn::new("openssl")
        .args(args)
        .ia32cap(ia32cap)
        .envs(env.iter().cloned())
        .loader(loader)
        .pinned(cpu)
        .output(Duration::from_secs(u64::from(seconds) + 30))?
        .success("openssl speed")?;
    match parse_mr(&out.stdout).and_then(|v| v.first().copied()) {
        Some(rate) => Ok(rate),
        None => bail!(
            "could not read a +F: line from `openssl {}`",
            args.join(" ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_captured_output() {
        let aead = include_str!("../../tests/fixtures/openssl-speed-mr-aead.txt");
        assert_eq!(parse_mr(aead), Some(vec![1_290_035_200.0]));
        let des = include_str!("../../tests/fixtures/openssl-speed-mr-des.txt");
        assert_eq!(parse_mr(des), Some(vec![22_708_224.0]));
        assert_eq!(parse_mr("+F:1:x:1.0:2.5\n"), Some(vec![1.0, 2.5]));
    }

    /// Each public-key operation reads its own column of openssl's line (captured
    /// from OpenSSL 3.6.3's `openssl speed -mr ML-KEM-768 ML-DSA-65 rsa2048
    /// ecdhx25519 ecdhp256 ecdsap256`, and 3.0.19's `rsa2048`).
    #[test]
    fn public_key_figures_come_from_their_own_columns() {
        use cipherbench_crypto::pk::{PkAlgorithm, PkOp};
        let out = "+DTP:ML-KEM-768:keygen:1\n+R15:15800:ML-KEM-768:1.00\n\
+F9:13:15800.000000:43408.080808:28395.000000\n\
+F10:10:5124.000000:1004.000000:4672.000000\n\
+F2:2:2048:2570.707071:43227.000000:35616.000000:2421.000000\n\
+F5:22:253:23753.000000:0.000042\n+F4:3:256:37726.262626:12480.000000\n";
        let read = |a: PkAlgorithm, op: PkOp| {
            let (tag, at) = (a.openssl_speed().1)(op).unwrap();
            parse_mr_field(out, tag, at)
        };
        assert_eq!(read(PkAlgorithm::MlKem768, PkOp::Keygen), Some(15800.0));
        assert_eq!(
            read(PkAlgorithm::MlKem768, PkOp::Encaps),
            Some(43408.080808)
        );
        assert_eq!(read(PkAlgorithm::MlKem768, PkOp::Decaps), Some(28395.0));
        assert_eq!(read(PkAlgorithm::MlDsa65, PkOp::Sign), Some(1004.0));
        assert_eq!(read(PkAlgorithm::MlDsa65, PkOp::Verify), Some(4672.0));
        assert_eq!(read(PkAlgorithm::Rsa2048, PkOp::Sign), Some(2570.707071));
        assert_eq!(read(PkAlgorithm::Rsa2048, PkOp::Verify), Some(43227.0));
        assert_eq!(read(PkAlgorithm::X25519, PkOp::Derive), Some(23753.0));
        assert_eq!(read(PkAlgorithm::P256, PkOp::Sign), Some(37726.262626));
        assert_eq!(read(PkAlgorithm::P256, PkOp::Verify), Some(12480.0));
        // 3.0.19's RSA line has no encryption columns; a missing line is None.
        assert_eq!(
            parse_mr_field("+F2:2:2048:2684.0:47783.0\n", "+F2", 4),
            Some(47783.0)
        );
        assert_eq!(parse_mr_field(out, "+F3", 3), None);
        assert_eq!(parse_mr_field("+F9:1:nan:x\n", "+F9", 2), None);
    }

    #[test]
    fn rejects_malformed_output() {
        assert_eq!(parse_mr("nothing"), None);
        assert_eq!(parse_mr("+F:25:AES\n"), None);
        assert_eq!(parse_mr("+F:25:AES:abc\n"), None);
    }

    #[test]
    fn builds_like_for_like_commands() {
        let c = command("aes-128-gcm", true, false, 1024, 1);
        assert!(c.contains(&"-aead".to_string()));
        // CPU time, as ours is divided by for the check.
        assert!(!c.contains(&"-elapsed".to_string()));
        assert!(!c.contains(&"-decrypt".to_string()));
        assert!(!command("aes-256-cbc", false, true, 16, 1).contains(&"-aead".to_string()));
    }

    #[test]
    fn says_what_openssl_s_loop_does_for_each_cipher() {
        let old = b"\0speed\0Failed to set tag length\0".as_slice();
        let new = b"xx Failed to set iv length yy".as_slice();
        assert_eq!(aead_loop_of(old), AeadLoop::NewIvOnly);
        assert_eq!(aead_loop_of(new), AeadLoop::RekeyEachMessage);
        assert!(mode("aes-128-gcm", true, Some(AeadLoop::RekeyEachMessage)).contains("re-keyed"));
        assert!(mode("aes-128-gcm", true, Some(AeadLoop::NewIvOnly)).contains("as ours"));
        assert!(mode("chacha20-poly1305", true, None).contains("upper bound"));
        assert!(mode("des-ede3-cbc", false, None).starts_with("-evp"));
    }
}
