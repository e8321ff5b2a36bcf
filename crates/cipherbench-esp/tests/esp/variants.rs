//! The `noaesni` variant: this whole test binary again, in a child process whose
//! OpenSSL has every AES and GHASH hardware path masked (the mask `noaesni` uses), and
//! a check that the mask really took effect there.

use std::process::Command;

/// AES-NI, PCLMULQDQ, VAES and VPCLMULQDQ off, as `noaesni` masks them for OpenSSL 3.5+
/// (and, extra fields ignored, for 3.0-3.4): the software AES and GHASH paths.
const NOAESNI_MASK: &str = "~0x200000200000000:~0x60000000000:~0:~0:~0";

/// Prints the capability vector this process's OpenSSL uses, for the parent to check.
#[test]
fn reports_the_acceleration_variant() {
    let settings = cipherbench_crypto::info::cpu_settings().unwrap_or_default();
    eprintln!("cpu-settings[{settings}]");
}

#[test]
fn every_test_passes_with_aesni_masked() {
    if std::env::var_os("OPENSSL_ia32cap").is_some() {
        return; // We are the child, or the user chose a mask: nothing to re-run.
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--skip",
            "every_test_passes_with_aesni_masked",
            "--nocapture",
        ])
        .env("OPENSSL_ia32cap", NOAESNI_MASK)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "noaesni run failed:\n{stdout}\n{stderr}"
    );
    let settings = stderr
        .lines()
        .find_map(|l| {
            l.strip_prefix("cpu-settings[")
                .map(|s| s.trim_end_matches(']').to_string())
        })
        .expect("the child printed its cpu settings");
    let first_word = settings
        .split_whitespace()
        .find_map(|t| t.strip_prefix("OPENSSL_ia32cap=0x"))
        .and_then(|v| u64::from_str_radix(v.split(':').next()?, 16).ok())
        .expect("an OPENSSL_ia32cap=0x... value");
    assert_eq!(
        first_word & (1 << 57),
        0,
        "AES-NI still on in the child: {settings}"
    );
    assert!(stdout.contains("test result: ok"), "{stdout}");
}
