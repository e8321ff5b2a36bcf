//! `OPENSSL_ia32cap` masks: the `noaesni` mask for each OpenSSL version, and the
//! grammar a user's `ia32cap:MASK` must follow. Pure functions.
//!
//! OpenSSL never rejects the variable: any string is accepted and whatever it cannot
//! read silently becomes 0 (crypto/cpuid.c, `ossl_strtouint64` and
//! `OPENSSL_cpuid_setup`, identical in 3.0 to 3.6). `zz` turns every capability off;
//! `~0x1g` is `~0x1`; `010` is octal 8; an empty field means 0 in 3.0-3.4 and "keep"
//! in 3.5 and later. So cipherbench accepts only the forms OpenSSL reads the way they
//! look, and refuses the rest before anything starts (METHODOLOGY.md, "Masks").

use cipherbench_model::env::Ia32Cap;
use std::fmt;

/// `noaesni` for OpenSSL 3.0-3.4, which read two fields: AES-NI and PCLMULQDQ (field
/// A bits 57 and 33) and VAES and VPCLMULQDQ (field B bits 41 and 42) off; field B
/// otherwise kept. Upstream 3.0 has no VAES path, 3.1-3.4 do (aes-gcm-avx512.pl),
/// and distributions backport it to 3.0.
pub const NOAESNI_TWO_FIELDS: &str = "~0x200000200000000:~0x60000000000";
/// `noaesni` for OpenSSL 3.5 and later, which read five fields and zero any that is
/// missing (fields C-E hold AVX-IFMA, SHA512, SM3/SM4 and AVX10): the same bits off,
/// fields C-E given as `~0` so they survive.
pub const NOAESNI_FIVE_FIELDS: &str = "~0x200000200000000:~0x60000000000:~0:~0:~0";

/// `noifma` for 3.0-3.4: AVX512_IFMA (field B bit 21, CPUID.7.0 EBX) off, which
/// `ossl_rsaz_avx512ifma_eligible` (crypto/bn/asm/rsaz-2k-avx512.pl) needs with
/// AVX512F, DQ and VL: RSA-2048/3072/4096's dual exponentiation
/// (`ossl_rsaz_mod_exp_avx512_x2`, crypto/bn/rsaz_exp_x2.c) falls back to two
/// single ones. Poly1305's base 2^44 path reads the same bit.
pub const NOIFMA_TWO_FIELDS: &str = "~0:~0x200000";
/// `noifma` for 3.5 and later: also AVX-IFMA (field C bit 55, CPUID.7.1 EAX bit 23),
/// which `ossl_rsaz_avxifma_eligible` (crypto/bn/asm/rsaz-2k-avxifma.pl) reads.
pub const NOIFMA_FIVE_FIELDS: &str = "~0:~0x200000:~0x80000000000000:~0:~0";
/// `noadx` for 3.0-3.4: BMI2 and ADX (field B bits 8 and 19) off: every MULX/ADCX/ADOX
/// big-number path tests `0x80100` (`bn_mul_mont`, x86_64-mont.pl; `rsaz_512_*`,
/// rsaz-x86_64.pl; `ecp_nistz256_*`, ecp_nistz256-x86_64.pl; `x25519_fe64_*`,
/// x25519-x86_64.pl) or `0x80108` with BMI1 (`bn_mul_mont_gather5`, `bn_power5`,
/// x86_64-mont5.pl).
pub const NOADX_TWO_FIELDS: &str = "~0:~0x80100";
/// `noadx` for 3.5 and later (fields C-E kept).
pub const NOADX_FIVE_FIELDS: &str = "~0:~0x80100:~0:~0:~0";
/// `nopkaccel` for 3.0-3.4: `noifma` and `noadx` together.
pub const NOPKACCEL_TWO_FIELDS: &str = "~0:~0x280100";
/// `nopkaccel` for 3.5 and later.
pub const NOPKACCEL_FIVE_FIELDS: &str = "~0:~0x280100:~0x80000000000000:~0:~0";

/// Which public-key paths a public-key mask turns off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PublicKeyMask {
    /// RSA's AVX-512 IFMA (and 3.5+'s AVX-IFMA) dual exponentiation.
    NoIfma,
    /// The MULX/ADX big-number and elliptic-curve code.
    NoAdx,
    /// Both.
    NoPkAccel,
}

impl PublicKeyMask {
    /// The variant's name.
    pub fn name(self) -> &'static str {
        match self {
            PublicKeyMask::NoIfma => "noifma",
            PublicKeyMask::NoAdx => "noadx",
            PublicKeyMask::NoPkAccel => "nopkaccel",
        }
    }

    /// The mask for the library whose `OpenSSL_version()` is `library_version`. Pure.
    pub fn mask(self, library_version: &str) -> &'static str {
        let two = fields_read(library_version) == 2;
        match (self, two) {
            (PublicKeyMask::NoIfma, true) => NOIFMA_TWO_FIELDS,
            (PublicKeyMask::NoIfma, false) => NOIFMA_FIVE_FIELDS,
            (PublicKeyMask::NoAdx, true) => NOADX_TWO_FIELDS,
            (PublicKeyMask::NoAdx, false) => NOADX_FIVE_FIELDS,
            (PublicKeyMask::NoPkAccel, true) => NOPKACCEL_TWO_FIELDS,
            (PublicKeyMask::NoPkAccel, false) => NOPKACCEL_FIVE_FIELDS,
        }
    }

    /// The probes it must slow, each with the factor it must slow them by: RSA
    /// signing by 1.5x where IFMA is masked (2.3-2.5x measured here, Zen 4, both
    /// libraries), RSA verification by 1.2x where ADX and BMI2 are (1.37x). Pure.
    pub fn treatments(self) -> &'static [(&'static str, f64)] {
        match self {
            PublicKeyMask::NoIfma => &[("rsa2048-sign", 1.5)],
            PublicKeyMask::NoAdx => &[("rsa2048-verify", 1.2)],
            PublicKeyMask::NoPkAccel => &[("rsa2048-sign", 1.5), ("rsa2048-verify", 1.2)],
        }
    }

    /// Probes it moves by design and that are therefore neither treatment nor
    /// control, recorded and shown but not judged: ChaCha20-Poly1305 where IFMA is
    /// masked (Poly1305's base 2^44 IFMA path, poly1305-x86_64.pl; 1.24x measured
    /// here), and P-256 ECDH where ADX is (`ecp_nistz256`'s MULX/ADX path: 1.07x in
    /// the probe, 1.17x in `openssl speed ecdhp256`, too close to a shared
    /// machine's noise to judge by). Pure.
    pub fn affected(self) -> &'static [&'static str] {
        match self {
            PublicKeyMask::NoIfma => &["chacha20-poly1305"],
            PublicKeyMask::NoAdx => &["ecdh-p256"],
            PublicKeyMask::NoPkAccel => &["chacha20-poly1305", "ecdh-p256"],
        }
    }

    /// The CPU flags (`/proc/cpuinfo`) without which there is nothing to mask: any of
    /// them present is enough.
    pub fn cpu_flags(self) -> &'static [&'static str] {
        match self {
            PublicKeyMask::NoIfma => &["avx512ifma", "avx_ifma"],
            PublicKeyMask::NoAdx | PublicKeyMask::NoPkAccel => &["adx"],
        }
    }
}

/// The fields OpenSSL reads (3.5 and later: five; before: two).
pub const MAX_FIELDS: usize = 5;

/// `(major, minor, patch)` of an `OpenSSL_version()` string such as `OpenSSL 3.6.3 9
/// Jun 2026` (a distribution suffix such as `3.0.13-0ubuntu3` is ignored).
pub fn openssl_version(library_version: &str) -> Option<(u32, u32, u32)> {
    let number = library_version
        .strip_prefix("OpenSSL ")?
        .split_whitespace()
        .next()?;
    let mut parts = number.split(['.', '-', '+']).map(|p| {
        let digits: String = p.chars().take_while(char::is_ascii_digit).collect();
        digits.parse::<u32>().ok()
    });
    Some((
        parts.next()??,
        parts.next()??,
        parts.next().flatten().unwrap_or(0),
    ))
}

/// How many fields of the variable this library reads (2 before 3.5, 5 from 3.5;
/// 5 when the version is unknown, as later fields are ignored by older versions).
pub fn fields_read(library_version: &str) -> usize {
    match openssl_version(library_version) {
        Some((major, minor, _)) if major < 3 || (major == 3 && minor <= 4) => 2,
        _ => MAX_FIELDS,
    }
}

/// The mask that turns off every AES and GHASH hardware path of this library and
/// nothing else (METHODOLOGY.md has the table of which bit gates which code).
pub fn noaesni_mask(library_version: &str) -> &'static str {
    if fields_read(library_version) == 2 {
        NOAESNI_TWO_FIELDS
    } else {
        NOAESNI_FIVE_FIELDS
    }
}

/// One field of a mask: `~N` (CPUID AND NOT N) or `N` (replace the field by N).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// Written with `~`.
    pub complement: bool,
    /// The number.
    pub value: u64,
}

/// A mask OpenSSL reads exactly as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mask {
    /// The fields, A first.
    pub fields: Vec<Field>,
}

impl Mask {
    /// Whether the mask turns AES-NI off: field A `~N` with bit 57 (or bit 24, FXSR,
    /// which OpenSSL extends to AES-NI), or a plain field A without bit 57.
    pub fn clears_aesni(&self) -> bool {
        let aesni = Ia32Cap::AESNI.1;
        match self.fields.first() {
            Some(f) if f.complement => f.value & (aesni | 1 << 24) != 0,
            Some(f) => f.value & aesni == 0,
            None => false,
        }
    }
}

/// Why a mask was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MaskError {
    mask: String,
    why: String,
}

impl fmt::Display for MaskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid OPENSSL_ia32cap mask '{}': {}; write 1 to {MAX_FIELDS} fields separated by ':', each ~ (optional) then 0x-hex or decimal, e.g. ia32cap:{NOAESNI_FIVE_FIELDS}",
            self.mask, self.why
        )
    }
}

impl std::error::Error for MaskError {}

/// Parses a mask, accepting only what OpenSSL reads as written.
pub fn parse(mask: &str) -> Result<Mask, MaskError> {
    let refuse = |why: String| MaskError {
        mask: mask.to_string(),
        why,
    };
    if mask.is_empty() {
        return Err(refuse(
            "it is empty, which OpenSSL reads as every capability off".into(),
        ));
    }
    let parts: Vec<&str> = mask.split(':').collect();
    if parts.len() > MAX_FIELDS {
        return Err(refuse(format!(
            "it has {} fields; OpenSSL reads at most {MAX_FIELDS} and ignores the rest",
            parts.len()
        )));
    }
    let fields = parts
        .iter()
        .enumerate()
        .map(|(i, text)| parse_field(i + 1, text).map_err(&refuse))
        .collect::<Result<Vec<Field>, MaskError>>()?;
    Ok(Mask { fields })
}

fn parse_field(n: usize, text: &str) -> Result<Field, String> {
    if text.is_empty() {
        return Err(format!(
            "field {n} is empty, which OpenSSL 3.0-3.4 read as 0 and 3.5+ as 'keep' (write ~0 to keep a field)"
        ));
    }
    let (complement, number) = match text.strip_prefix('~') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (digits, radix) = match number.strip_prefix("0x").or(number.strip_prefix("0X")) {
        Some(hex) => (hex, 16),
        None => (number, 10),
    };
    let valid = digits.chars().take_while(|c| c.is_digit(radix)).count();
    if valid == 0 {
        return Err(format!(
            "field {n} ('{text}') is not a number, which OpenSSL silently reads as 0"
        ));
    }
    if let Some(junk) = digits[valid..].chars().next() {
        return Err(format!(
            "field {n} ('{text}') has '{junk}' after the number, which OpenSSL silently ignores"
        ));
    }
    if radix == 10 && digits.len() > 1 && digits.starts_with('0') {
        return Err(format!(
            "field {n} ('{text}') starts with 0, which OpenSSL reads as octal"
        ));
    }
    let value = u64::from_str_radix(digits, radix).map_err(|_| {
        format!("field {n} ('{text}') does not fit in 64 bits, which OpenSSL silently wraps")
    })?;
    Ok(Field { complement, value })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_key_masks_follow_the_fields_the_library_reads() {
        for m in [
            PublicKeyMask::NoIfma,
            PublicKeyMask::NoAdx,
            PublicKeyMask::NoPkAccel,
        ] {
            let two = m.mask("OpenSSL 3.0.19 27 Jan 2026");
            let five = m.mask("OpenSSL 3.6.3 9 Jun 2026");
            assert_eq!(parse(two).unwrap().fields.len(), 2, "{two}");
            assert_eq!(parse(five).unwrap().fields.len(), 5, "{five}");
            // Field A is kept whole: AES-NI and everything else of CPUID.1 stay on.
            assert!(two.starts_with("~0:") && five.starts_with("~0:"));
            assert!(!parse(two).unwrap().clears_aesni());
        }
        // nopkaccel is exactly noifma and noadx together, field by field.
        let b = |m: &str| parse(m).unwrap().fields[1].value;
        assert_eq!(
            b(NOPKACCEL_TWO_FIELDS),
            b(NOIFMA_TWO_FIELDS) | b(NOADX_TWO_FIELDS)
        );
        assert_eq!(b(NOIFMA_TWO_FIELDS), 1 << 21);
        assert_eq!(b(NOADX_TWO_FIELDS), (1 << 8) | (1 << 19));
        assert_eq!(parse(NOIFMA_FIVE_FIELDS).unwrap().fields[2].value, 1 << 55);
    }
    use proptest::prelude::*;

    /// OpenSSL's reading of one field (crypto/cpuid.c: `ossl_strtouint64` after an
    /// optional `~`), as capbits' R2/R3 state it: `0x` hex, a leading `0` octal, else
    /// decimal; stops at the first character that is not a digit of the base; wraps
    /// mod 2^64. Returns the complement flag, the value and whether the whole field was
    /// consumed.
    fn openssl_field(field: &str) -> (bool, u64, bool) {
        let bytes = field.as_bytes();
        let mut i = 0;
        let complement = bytes.first() == Some(&b'~');
        if complement {
            i += 1;
        }
        let mut base = 10u64;
        if bytes.get(i) == Some(&b'0') {
            base = 8;
            i += 1;
            if matches!(bytes.get(i), Some(b'x') | Some(b'X')) {
                base = 16;
                i += 1;
            }
        }
        let mut value = 0u64;
        while let Some(&c) = bytes.get(i) {
            let digit = match c {
                b'0'..=b'9' => u64::from(c - b'0'),
                b'a'..=b'f' => u64::from(c - b'a' + 10),
                b'A'..=b'F' => u64::from(c - b'A' + 10),
                _ => 16,
            };
            if digit >= base {
                break;
            }
            value = value.wrapping_mul(base).wrapping_add(digit);
            i += 1;
        }
        (complement, value, i == bytes.len())
    }

    /// Whether OpenSSL reads `field` as a person reading it would: the whole field is
    /// a number, written in hex or in decimal without a leading zero, with a digit,
    /// and without wrapping.
    fn read_as_written(field: &str) -> bool {
        let (_, value, whole) = openssl_field(field);
        let number = field.strip_prefix('~').unwrap_or(field);
        let lower = number.to_ascii_lowercase();
        let intended = if let Some(hex) = lower.strip_prefix("0x") {
            u64::from_str_radix(hex, 16).ok()
        } else if number.len() > 1 && number.starts_with('0') {
            None // octal to OpenSSL, decimal to a reader
        } else {
            number
                .parse::<u64>()
                .ok()
                .filter(|_| !number.starts_with('+'))
        };
        whole && intended == Some(value)
    }

    #[test]
    fn the_noaesni_mask_follows_the_library_version() {
        assert_eq!(
            noaesni_mask("OpenSSL 3.0.19 27 Jan 2026"),
            "~0x200000200000000:~0x60000000000"
        );
        assert_eq!(
            noaesni_mask("OpenSSL 3.4.1 11 Feb 2025"),
            NOAESNI_TWO_FIELDS
        );
        assert_eq!(
            noaesni_mask("OpenSSL 3.5.5 27 Jan 2026"),
            "~0x200000200000000:~0x60000000000:~0:~0:~0"
        );
        assert_eq!(
            noaesni_mask("OpenSSL 3.6.3 9 Jun 2026"),
            NOAESNI_FIVE_FIELDS
        );
        assert_eq!(
            noaesni_mask("OpenSSL 4.0.3 1 Jan 2027"),
            NOAESNI_FIVE_FIELDS
        );
        assert_eq!(
            noaesni_mask("OpenSSL 3.0.13-0ubuntu3.5 30 Jan 2024"),
            NOAESNI_TWO_FIELDS
        );
        // Unknown: five fields, which every version reads correctly.
        assert_eq!(noaesni_mask(""), NOAESNI_FIVE_FIELDS);
        assert_eq!(noaesni_mask("LibreSSL 3.8.2"), NOAESNI_FIVE_FIELDS);
        assert_eq!(openssl_version("OpenSSL 3.6.3 9 Jun 2026"), Some((3, 6, 3)));
    }

    #[test]
    fn both_noaesni_masks_turn_off_aes_ni_pclmulqdq_vaes_and_vpclmulqdq_only() {
        for m in [NOAESNI_TWO_FIELDS, NOAESNI_FIVE_FIELDS] {
            let mask = parse(m).unwrap();
            assert!(mask.clears_aesni());
            assert_eq!(
                mask.fields[0].value,
                Ia32Cap::AESNI.1 | Ia32Cap::PCLMULQDQ.1
            );
            assert_eq!(
                mask.fields[1].value,
                Ia32Cap::VAES.1 | Ia32Cap::VPCLMULQDQ.1
            );
            assert!(mask.fields.iter().all(|f| f.complement));
            assert!(mask.fields[2..].iter().all(|f| f.value == 0));
        }
    }

    #[test]
    fn accepts_the_forms_openssl_reads_as_written() {
        for ok in [
            "~0x200000200000000:~0x0",
            "~0X200000200000000:~0",
            "0x5:~0",
            "~0:~0x60000000000:~0:~0:~0",
            "18446744073709551615",
            "~0x00000000000000000001",
            "~0",
        ] {
            assert!(parse(ok).is_ok(), "{ok}");
        }
        assert!(parse("~0x1000000:~0").unwrap().clears_aesni(), "FXSR");
        assert!(
            parse("0x5:~0").unwrap().clears_aesni(),
            "plain A without bit 57"
        );
        assert!(!parse("~0:~0x60000000000").unwrap().clears_aesni());
    }

    #[test]
    fn refuses_what_openssl_would_read_otherwise_and_says_why() {
        for (bad, why) in [
            ("", "empty"),
            ("zz", "'zz') is not a number"),
            ("0x", "not a number"),
            ("~", "not a number"),
            (" ~0x1", "not a number"),
            ("-1", "not a number"),
            ("~0x1g:~0", "has 'g' after the number"),
            ("~0x200000200000000:~0x0 ", "has ' ' after"),
            ("010", "octal"),
            ("~08:~0", "octal"),
            ("~0x200000200000000::~0", "field 2 is empty"),
            (":~0", "field 1 is empty"),
            ("~0:", "field 2 is empty"),
            ("~0:~0:~0:~0:~0:~0", "6 fields"),
            ("0x10000000000000000", "does not fit in 64 bits"),
            ("18446744073709551616", "does not fit"),
            ("~~1", "not a number"),
        ] {
            let e = parse(bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad:?}: {e}");
            assert!(e.contains("e.g. ia32cap:~0x200000200000000:~0x60000000000:~0:~0:~0"));
            assert!(!e.contains('\n'));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]

        /// Accepted exactly when OpenSSL reads every field as written, the fields
        /// number 1 to 5 and none is empty; and then with OpenSSL's values.
        #[test]
        fn agrees_with_openssl_s_parser(mask in "[~0-9a-gxX: -]{0,24}") {
            let fields: Vec<&str> = mask.split(':').collect();
            let openssl_reads_it = !mask.is_empty()
                && fields.len() <= MAX_FIELDS
                && fields.iter().all(|f| !f.is_empty() && read_as_written(f));
            match parse(&mask) {
                Ok(parsed) => {
                    prop_assert!(openssl_reads_it, "accepted {mask:?}");
                    for (f, text) in parsed.fields.iter().zip(&fields) {
                        let (complement, value, _) = openssl_field(text);
                        prop_assert_eq!((f.complement, f.value), (complement, value));
                    }
                }
                Err(_) => prop_assert!(!openssl_reads_it, "refused {mask:?}"),
            }
        }

        /// Any u64 written in hex or decimal, with or without `~`, is read back.
        #[test]
        fn reads_back_any_value(a in any::<u64>(), b in any::<u64>(), tilde in any::<bool>()) {
            let t = if tilde { "~" } else { "" };
            let text = format!("{t}{a:#x}:{t}{b}");
            let m = parse(&text).unwrap();
            prop_assert_eq!(m.fields, vec![
                Field { complement: tilde, value: a },
                Field { complement: tilde, value: b },
            ]);
        }
    }
}
