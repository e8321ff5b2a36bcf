//! The variant module's tests: parsing, the judge, the confirmation's combining.

use super::facts::*;
use super::judge::*;
use super::*;
use cipherbench_model::variant::{Effect, ProbeFigure, ProbeRole, Probes, ProcessCheck, Verdict};

const ACCEL: &str = "OPENSSL_ia32cap=0xfffa32034f8bffff:0x1b415fdef1bf27eb";
const NOAESNI: &str =
    "OPENSSL_ia32cap=0xfdfa32014f8bffff:0x1b4159def1bf27eb env:~0x200000200000000:~0x60000000000";
const OLD_MASK: &str =
    "OPENSSL_ia32cap=0xfdfa32014f8bffff:0x1b415fdef1bf27eb env:~0x200000200000000:~0x0";

fn probes(settings: &str, gcm: f64, chacha: f64, des: f64) -> Probes {
    let figure = |cipher: &str, role, rate: f64| ProbeFigure {
        cipher: cipher.into(),
        role,
        size_bytes: 16384,
        bytes_per_cpu_sec: rate,
        rounds_bytes_per_cpu_sec: vec![rate; 3],
        sets_bytes_per_cpu_sec: Vec::new(),
    };
    Probes {
        library_version: "OpenSSL 3.6.3 9 Jun 2026".into(),
        cpu_settings: settings.into(),
        measured_in: "test".into(),
        figures: vec![
            figure("aes-128-gcm", ProbeRole::Treatment, gcm),
            figure("chacha20-poly1305", ProbeRole::Control, chacha),
            figure("des-ede3-cbc", ProbeRole::Control, des),
        ],
        implementation: None,
    }
}

fn judged(variant: &Variant, mask: Option<&str>, mine: &Probes, accel: &Probes) -> VariantRecord {
    judge(
        variant,
        &Facts {
            settings: &mine.cpu_settings,
            cpu_has_aes: true,
            cpu_flags: &[],
            mask,
            probes: Some(mine),
            accel_probes: Some(accel),
            process_check: None,
        },
    )
}

fn accel_probes() -> Probes {
    probes(ACCEL, 11e9, 3.7e9, 31e6)
}

fn with_public_key(mut p: Probes, sign: f64, verify: f64, ecdh: f64) -> Probes {
    for (name, rate) in [
        ("rsa2048-sign", sign),
        ("rsa2048-verify", verify),
        ("ecdh-p256", ecdh),
    ] {
        p.figures.push(ProbeFigure {
            cipher: name.into(),
            role: ProbeRole::Control,
            size_bytes: 0,
            bytes_per_cpu_sec: rate,
            rounds_bytes_per_cpu_sec: vec![rate; 3],
            sets_bytes_per_cpu_sec: Vec::new(),
        });
    }
    p
}

fn judged_pk(variant: &Variant, mine: &Probes, flags: &[String]) -> VariantRecord {
    let accel = with_public_key(accel_probes(), 4200.0, 60_000.0, 31_000.0);
    judge(
        variant,
        &Facts {
            settings: &mine.cpu_settings,
            cpu_has_aes: true,
            cpu_flags: flags,
            mask: variant.mask(&mine.library_version).as_deref(),
            probes: Some(mine),
            accel_probes: Some(&accel),
            process_check: None,
        },
    )
}

#[test]
fn public_key_masks_are_judged_by_their_own_treatments_and_controls() {
    let flags = vec!["avx512ifma".to_string(), "adx".to_string()];
    let noifma = Variant::parse("noifma").unwrap();
    assert_eq!(
        noifma.mask("OpenSSL 3.0.19 27 Jan 2026").as_deref(),
        Some("~0:~0x200000")
    );
    // Measured here: signing 2.5x slower, ChaCha20-Poly1305 1.24x (Poly1305's
    // IFMA path: affected, not a control), everything else put.
    let mine = with_public_key(probes(ACCEL, 11e9, 3.0e9, 31e6), 1680.0, 60_500.0, 31_000.0);
    let r = judged_pk(&noifma, &mine, &flags);
    assert!(r.took_effect, "{:?}", r.effect);
    let e = r.effect.unwrap();
    let role = |c: &str| e.ratios.iter().find(|r| r.cipher == c).unwrap().role;
    assert_eq!(role("rsa2048-sign"), ProbeRole::Treatment);
    assert_eq!(role("chacha20-poly1305"), ProbeRole::Affected);
    assert_eq!(role("aes-128-gcm"), ProbeRole::Control);
    // A mask that missed: signing did not fall.
    let missed = with_public_key(probes(ACCEL, 11e9, 3.7e9, 31e6), 4100.0, 60_000.0, 31_000.0);
    let r = judged_pk(&noifma, &missed, &flags);
    assert_eq!(
        r.effect.as_ref().unwrap().verdict,
        Verdict::TreatmentDidNotMove
    );
    // Without the CPU flag there is nothing to mask, and the record says so.
    let r = judged_pk(&noifma, &missed, &[]);
    assert!(r.effect.unwrap().reason.contains("no such path"));
    // AES moved: the mask changed more than the public-key code.
    let nopk = Variant::parse("nopkaccel").unwrap();
    let aes_moved = with_public_key(probes(ACCEL, 2e9, 3.0e9, 31e6), 2100.0, 44_000.0, 27_000.0);
    let r = judged_pk(&nopk, &aes_moved, &flags);
    assert_eq!(r.effect.unwrap().verdict, Verdict::ControlMoved);
    let ok = with_public_key(probes(ACCEL, 11e9, 3.0e9, 31e6), 2100.0, 44_000.0, 27_000.0);
    assert!(judged_pk(&nopk, &ok, &flags).took_effect);
    // noaesni keeps the public-key probes as controls.
    let noaesni = Variant::noaesni();
    let mine = with_public_key(
        probes(NOAESNI, 0.5e9, 3.7e9, 31e6),
        1000.0,
        60_000.0,
        31_000.0,
    );
    let r = judged(
        &noaesni,
        Some(mask::NOAESNI_FIVE_FIELDS),
        &mine,
        &with_public_key(accel_probes(), 4200.0, 60_000.0, 31_000.0),
    );
    assert_eq!(r.effect.unwrap().verdict, Verdict::ControlMoved);
}

#[test]
fn a_library_list_crosses_the_variants_and_tags_the_later_ones() {
    let variants = parse_variants("accel,noaesni").unwrap();
    let tagged = Library {
        dir: None,
        tag: Some("3.6.3".into()),
    };
    let crossed = cross(&variants, &[Library::system(), tagged.clone()]).unwrap();
    let names: Vec<String> = crossed.iter().map(Variant::name).collect();
    assert_eq!(names, ["accel", "noaesni", "accel@3.6.3", "noaesni@3.6.3"]);
    assert!(crossed[2].is_accel() && crossed[2].mask("OpenSSL 3.6.3").is_none());
    assert_eq!(crossed[3].its_accel(), crossed[2]);
    assert_eq!(crossed[1].its_accel(), crossed[0]);
    assert_eq!(libraries_of(&crossed), [Library::system(), tagged]);
    // No list: the variants as they were, under the system's library.
    assert_eq!(cross(&variants, &[]).unwrap(), variants);
}

fn provider_variant() -> Variant {
    Variant::of(VariantKind::Provider {
        given: "counting.cnf".into(),
        conf: "/etc/counting.cnf".into(),
        counter: "/tmp/counting.count".into(),
    })
}

fn served_by(gcm: &str) -> Probes {
    let mut p = probes(ACCEL, 9e9, 3.7e9, 31e6);
    let s = |cipher: &str, algorithm: &str, provider: &str| cipherbench_model::variant::Served {
        cipher: cipher.into(),
        algorithm: algorithm.into(),
        kind: "cipher".into(),
        provider: Some(provider.into()),
        engine: None,
    };
    p.implementation = Some(cipherbench_model::variant::Implementation {
        providers: vec!["counting".into(), "default".into()],
        served: vec![
            s("aes-128-gcm", "AES-128-GCM", gcm),
            s("chacha20-poly1305", "ChaCha20-Poly1305", "default"),
        ],
        cpu_vendor: "AuthenticAMD".into(),
    });
    p
}

#[test]
fn a_provider_variant_ran_where_its_provider_served_and_fell_back_elsewhere() {
    let v = provider_variant();
    assert_eq!(v.name(), "provider:counting.cnf");
    assert_eq!(v.mask("OpenSSL 3.0.19"), None);
    let env: Vec<String> = v
        .environment()
        .iter()
        .map(|(k, val)| format!("{k}={}", val.to_string_lossy()))
        .collect();
    assert_eq!(
        env,
        [
            "OPENSSL_CONF=/etc/counting.cnf",
            "CIPHERBENCH_PROVIDER_COUNTER=/tmp/counting.count"
        ]
    );
    let mine = served_by("counting");
    let r = judged(&v, None, &mine, &accel_probes());
    assert!(r.took_effect, "{r:?}");
    assert_eq!(r.effect.as_ref().unwrap().verdict, Verdict::TookEffect);
    assert_eq!(r.fallback("aes-128-gcm"), None);
    assert_eq!(
        r.fallback("chacha20-poly1305").as_deref(),
        Some("fallback: default provider served chacha20-poly1305")
    );
    assert_eq!(
        r.not_applicable_for("chacha20-poly1305").as_deref(),
        Some("n/a: fallback: default provider served chacha20-poly1305")
    );
    // Nothing served by the provider: a fallback, not taken.
    let none = judged(&v, None, &served_by("default"), &accel_probes());
    assert!(!none.took_effect);
    assert_eq!(none.effect.unwrap().verdict, Verdict::Fallback);
    // A process that did not say is not judged.
    let silent = judged(&v, None, &accel_probes(), &accel_probes());
    assert_eq!(silent.effect.unwrap().verdict, Verdict::Unjudged);
}

#[test]
fn a_layer_whose_every_cipher_fell_back_did_not_take_effect_and_keeps_its_ciphers() {
    let v = provider_variant();
    let r = judged(&v, None, &served_by("counting"), &accel_probes());
    let mut only_chacha = r.clone();
    judge_layer_fallback(&mut only_chacha, &["chacha20-poly1305"]);
    assert!(!only_chacha.took_effect);
    assert_eq!(
        only_chacha.effect.as_ref().unwrap().verdict,
        Verdict::Fallback
    );
    let served = &only_chacha
        .probes
        .as_ref()
        .unwrap()
        .implementation
        .as_ref()
        .unwrap()
        .served;
    assert_eq!(served.len(), 1);
    let mut both = r.clone();
    judge_layer_fallback(&mut both, &["aes-128-gcm", "chacha20-poly1305"]);
    assert!(both.took_effect);
    // Other variants are left alone.
    let mut accel = judged(&Variant::accel(), None, &accel_probes(), &accel_probes());
    let before = accel.clone();
    judge_layer_fallback(&mut accel, &["chacha20-poly1305"]);
    assert_eq!(accel, before);
}

#[test]
fn parses_variants_and_refuses_unknown_ones() {
    let v = parse_variants("accel,noaesni,ia32cap:~0x0:~0x60000000000").unwrap();
    assert_eq!(v[0].mask("OpenSSL 3.6.3"), None);
    assert_eq!(
        v[1].mask("OpenSSL 3.0.19 27 Jan 2026").as_deref(),
        Some("~0x200000200000000:~0x60000000000")
    );
    assert_eq!(
        v[1].mask("OpenSSL 3.6.3 9 Jun 2026").as_deref(),
        Some("~0x200000200000000:~0x60000000000:~0:~0:~0")
    );
    assert_eq!(v[2].mask("any").as_deref(), Some("~0x0:~0x60000000000"));
    let err = parse_variants("fast").unwrap_err().to_string();
    assert!(err.contains("unknown variant 'fast'"), "{err}");
}

#[test]
fn refuses_a_mask_openssl_would_misread_in_one_line() {
    for bad in [
        "ia32cap:zz",
        "ia32cap:",
        "ia32cap:~0x1g:~0",
        "ia32cap:~0::~0",
    ] {
        let err = format!("{:#}", Variant::parse(bad).unwrap_err());
        assert!(err.starts_with("invalid OPENSSL_ia32cap mask"), "{err}");
        assert!(err.contains("e.g. ia32cap:~0x200000200000000"), "{err}");
        assert!(!err.contains('\n'));
    }
}

#[test]
fn names_variants_as_records_always_have() {
    let v = parse_variants("accel, noaesni ,ia32cap:~0x0:~0x60000000000").unwrap();
    let names: Vec<String> = v.iter().map(Variant::name).collect();
    assert_eq!(names, ["accel", "noaesni", "ia32cap:~0x0:~0x60000000000"]);
    assert!(v[0].is_accel() && !v[1].is_accel() && !v[2].is_accel());
}

#[test]
fn a_masking_variant_whose_treatment_fell_and_controls_held_took_effect() {
    let accel = accel_probes();
    let mine = probes(NOAESNI, 0.33e9, 3.8e9, 30e6);
    let r = judged(
        &Variant::noaesni(),
        Some(mask::NOAESNI_FIVE_FIELDS),
        &mine,
        &accel,
    );
    assert!(r.took_effect, "{r:?}");
    let e = r.effect.unwrap();
    assert_eq!(e.verdict, Verdict::TookEffect);
    assert!(e.reason.contains("aes-128-gcm fell 33.3x"), "{}", e.reason);
    assert_eq!(e.ratios.len(), 3);
    assert_eq!(e.working_mask, None);
    assert!(!r.aesni && !r.pclmulqdq);
}

#[test]
fn a_treatment_that_did_not_move_is_flagged_with_the_mask_that_works() {
    // The old mask on 3.6.3: the VAES path keeps AES-GCM at full speed.
    let accel = accel_probes();
    let mine = probes(OLD_MASK, 10.8e9, 3.7e9, 31e6);
    let v = Variant::parse("ia32cap:~0x200000200000000:~0x0").unwrap();
    let r = judged(&v, Some("~0x200000200000000:~0x0"), &mine, &accel);
    assert!(!r.took_effect);
    let e = r.effect.as_ref().unwrap();
    assert_eq!(e.verdict, Verdict::TreatmentDidNotMove);
    assert_eq!(
        e.working_mask.as_deref(),
        Some("~0x200000200000000:~0x60000000000:~0:~0:~0")
    );
    assert!(
        r.explanation().contains("missed the AES-GCM path"),
        "{}",
        r.explanation()
    );
    // 2.5x is not enough either.
    let half = probes(OLD_MASK, 4.4e9, 3.7e9, 31e6);
    assert!(!judged(&Variant::noaesni(), None, &half, &accel).took_effect);
}

#[test]
fn a_control_that_moved_is_flagged() {
    // The second word zeroed: AES falls, and ChaCha20 loses AVX-512 too.
    let accel = accel_probes();
    let mine = probes(NOAESNI, 0.33e9, 0.9e9, 31e6);
    let r = judged(
        &Variant::parse("ia32cap:~0x200000200000000").unwrap(),
        Some("~0x200000200000000"),
        &mine,
        &accel,
    );
    let e = r.effect.unwrap();
    assert!(!r.took_effect);
    assert_eq!(e.verdict, Verdict::ControlMoved);
    assert!(e.reason.contains("chacha20-poly1305 0.24x"), "{}", e.reason);
    assert!(e.working_mask.is_some());
    // 3DES moving alone is enough.
    let des = probes(NOAESNI, 0.33e9, 3.7e9, 20e6);
    assert!(!judged(&Variant::noaesni(), None, &des, &accel).took_effect);
    // Within the tolerance is not a move.
    let ok = probes(NOAESNI, 0.33e9, 3.7e9 * 0.8, 31e6 * 1.2);
    assert!(judged(&Variant::noaesni(), None, &ok, &accel).took_effect);
}

#[test]
fn a_cpu_without_aes_has_nothing_to_mask() {
    let accel = probes("OPENSSL_ia32cap=0xfdfa32014f8bffff:0x0", 0.3e9, 1.0e9, 30e6);
    let r = judge(
        &Variant::noaesni(),
        &Facts {
            settings: &accel.cpu_settings,
            cpu_has_aes: false,
            cpu_flags: &[],
            mask: Some(mask::NOAESNI_FIVE_FIELDS),
            probes: Some(&accel),
            accel_probes: Some(&accel),
            process_check: None,
        },
    );
    assert!(!r.took_effect);
    assert!(r.explanation().contains("no AES-NI"), "{}", r.explanation());
    assert_eq!(r.effect.unwrap().working_mask, None);
}

#[test]
fn other_user_masks_took_effect_if_the_vector_changed_and_say_what_moved() {
    let accel = accel_probes();
    let vaes_off =
        "OPENSSL_ia32cap=0xfffa32034f8bffff:0x1b4159def1bf27eb env:~0:~0x60000000000:~0:~0:~0";
    let mine = probes(vaes_off, 4.5e9, 3.7e9, 31e6);
    let v = Variant::parse("ia32cap:~0:~0x60000000000:~0:~0:~0").unwrap();
    let r = judged(&v, Some("~0:~0x60000000000:~0:~0:~0"), &mine, &accel);
    assert!(r.took_effect);
    assert!(
        r.explanation().contains("aes-128-gcm 0.41x"),
        "{}",
        r.explanation()
    );
    let same = probes(ACCEL, 11e9, 3.7e9, 31e6);
    let r = judged(
        &Variant::parse("ia32cap:~0:~0").unwrap(),
        Some("~0:~0"),
        &same,
        &accel,
    );
    assert!(!r.took_effect);
    assert_eq!(r.effect.unwrap().verdict, Verdict::Unchanged);
}

#[test]
fn a_moved_control_or_a_grey_treatment_is_measured_again_and_a_clear_one_is_not() {
    let accel = accel_probes();
    let judged_noaesni = |p: &Probes| judged(&Variant::noaesni(), None, p, &accel);
    // 3DES 1.30x on a busy machine: measured again.
    assert!(needs_confirmation(&judged_noaesni(&probes(
        NOAESNI, 0.33e9, 3.7e9, 40e6
    ))));
    // 2.2x: between no effect and the factor.
    assert!(needs_confirmation(&judged_noaesni(&probes(
        NOAESNI, 5e9, 3.7e9, 31e6
    ))));
    // 3.5x: took effect, but close to the factor.
    assert!(needs_confirmation(&judged_noaesni(&probes(
        NOAESNI, 3.1e9, 3.7e9, 31e6
    ))));
    // Clear either way: 33x with the controls put, or 1.02x.
    assert!(!needs_confirmation(&judged_noaesni(&probes(
        NOAESNI, 0.33e9, 3.7e9, 31e6
    ))));
    assert!(!needs_confirmation(&judged_noaesni(&probes(
        OLD_MASK, 10.8e9, 3.7e9, 31e6
    ))));
    // A mask whose factor is 1.5x (IFMA's RSA sign): 1.47x is near, 1.2x is not.
    let mut near = judged_noaesni(&probes(NOAESNI, 5e9, 3.7e9, 31e6));
    let set = |r: &mut VariantRecord, slowdown: f64| {
        let e = r.effect.as_mut().unwrap();
        e.treatment_factor = 1.5;
        for ratio in &mut e.ratios {
            if ratio.role == ProbeRole::Treatment {
                ratio.slowdown = slowdown;
            }
        }
    };
    set(&mut near, 1.47);
    assert!(needs_confirmation(&near));
    set(&mut near, 1.2);
    assert!(!needs_confirmation(&near));
    // Took effect near its own factor (2.2x of 1.5x): measured again; well above it
    // (2.4x), not, though both are under AES's 4.5x.
    let mut took = judged_noaesni(&probes(NOAESNI, 0.33e9, 3.7e9, 31e6));
    set(&mut took, 2.2);
    assert!(needs_confirmation(&took));
    set(&mut took, 2.4);
    assert!(!needs_confirmation(&took));
}

#[test]
fn probe_sets_combine_into_their_median_with_every_round() {
    let sets = [
        probes(ACCEL, 10e9, 3.0e9, 20e6),
        probes(ACCEL, 12e9, 4.0e9, 30e6),
    ];
    let c = combine(&sets, "both").unwrap();
    assert_eq!(c.figure("aes-128-gcm").unwrap().bytes_per_cpu_sec, 11e9);
    assert_eq!(
        c.figure("des-ede3-cbc")
            .unwrap()
            .rounds_bytes_per_cpu_sec
            .len(),
        6
    );
    assert_eq!(c.measured_in, "both");
    assert!(combine(&[], "none").is_none());
}

#[test]
fn the_confirmation_judges_round_by_round_ratios_so_one_slow_round_is_outvoted() {
    // The variant masks AES (GCM 20x slower) and leaves ChaCha and 3DES alone;
    // a slow spell (0.7x for everything) covers the variant's first probe and
    // accel's second one.
    let accel = [
        probes(ACCEL, 10e9, 2e9, 100e6),
        probes(ACCEL, 7e9, 1.4e9, 70e6),
        probes(ACCEL, 10e9, 2e9, 100e6),
    ];
    let mine = [
        probes(NOAESNI, 0.35e9, 1.4e9, 70e6),
        probes(NOAESNI, 0.35e9, 1.4e9, 70e6),
        probes(NOAESNI, 0.5e9, 2e9, 100e6),
    ];
    // Each side's own median would say the controls moved by 30 %.
    let (a, m) = (combine(&accel, "a").unwrap(), combine(&mine, "m").unwrap());
    let chacha = |p: &Probes| p.figure("chacha20-poly1305").unwrap().bytes_per_cpu_sec;
    assert!((chacha(&m) / chacha(&a) - 0.7).abs() < 1e-9);
    // Round by round, the ratios are 0.7, 1.0, 1.0: the controls did not move.
    let (a, m) = combine_paired(&accel, &mine).unwrap();
    assert!((chacha(&m) / chacha(&a) - 1.0).abs() < 1e-9);
    let gcm = |p: &Probes| p.figure("aes-128-gcm").unwrap().bytes_per_cpu_sec;
    assert!(
        (gcm(&a) / gcm(&m) - 20.0).abs() < 1e-6,
        "{}",
        gcm(&a) / gcm(&m)
    );
    let r = judged(&Variant::noaesni(), None, &m, &a);
    assert!(r.took_effect, "{}", r.explanation());
    // All of the rounds stay in the record.
    let des = m.figure("des-ede3-cbc").unwrap();
    assert_eq!(des.rounds_bytes_per_cpu_sec.len(), 9);
}

/// accel and noaesni probed alternately, ChaCha's rate scaled per round by `spread`
/// (the machine's swings, on both), and noaesni's ChaCha at `moved` of accel's in
/// every round; judged as the confirmation judges.
fn confirmed_with(spread: &[f64], accel_spread: &[f64], moved: f64) -> Effect {
    let accel: Vec<Probes> = accel_spread
        .iter()
        .map(|k| probes(ACCEL, 10e9, 2e9 * k, 100e6))
        .collect();
    let mine: Vec<Probes> = spread
        .iter()
        .map(|k| probes(NOAESNI, 0.4e9, 2e9 * k * moved, 100e6))
        .collect();
    let (a, m) = combine_paired(&accel, &mine).unwrap();
    judged(&Variant::noaesni(), None, &m, &a).effect.unwrap()
}

#[test]
fn a_control_held_if_it_moved_no_more_than_accel_against_itself_up_to_the_limit() {
    // accel's five processes spread 0.70-1.30x around their median on ChaCha; the
    // variant's ChaCha ran at 0.72x of accel round by round: inside accel's own
    // spread, so no evidence the mask reached it.
    let spread = [1.0, 0.7, 1.3, 1.0, 1.0];
    let e = confirmed_with(&spread, &spread, 0.72);
    assert_eq!(e.verdict, Verdict::TookEffect, "{}", e.reason);
    assert!(
        e.reason
            .contains("chacha20-poly1305 0.72x (accel against itself 0.70-1.30x)"),
        "{}",
        e.reason
    );
    assert!(e.reason.contains("or as far as accel moved against itself"));
    // The same move with accel steady is a move.
    let e = confirmed_with(&spread, &[1.0; 5], 0.72);
    assert_eq!(e.verdict, Verdict::ControlMoved, "{}", e.reason);
    // However noisy accel is, a control at 1/1.5 or beyond moved: the band stops
    // at CONTROL_BAND_LIMIT.
    let wild = [1.0, 0.4, 2.0, 1.0, 1.0];
    let e = confirmed_with(&wild, &wild, 0.6);
    assert_eq!(e.verdict, Verdict::ControlMoved, "{}", e.reason);
    assert!(
        e.reason
            .contains("chacha20-poly1305 0.60x (accel against itself 0.67-1.50x)"),
        "{}",
        e.reason
    );
}

#[test]
fn accel_is_the_baseline_only_without_a_mask_and_with_the_cpu_s_aes_ni() {
    let accel = accel_probes();
    let r = judged(&Variant::accel(), None, &accel, &accel);
    assert!(r.took_effect && r.aesni && r.pclmulqdq);
    assert_eq!(r.effect.unwrap().verdict, Verdict::Baseline);
    let leaked = probes(OLD_MASK, 11e9, 3.7e9, 31e6);
    assert!(!judged(&Variant::accel(), None, &leaked, &accel).took_effect);
    let without_aes_in_cpu = judge(
        &Variant::accel(),
        &Facts {
            settings: ACCEL,
            cpu_has_aes: false,
            cpu_flags: &[],
            mask: None,
            probes: Some(&accel),
            accel_probes: Some(&accel),
            process_check: None,
        },
    );
    assert!(!without_aes_in_cpu.took_effect);
}

#[test]
fn a_variant_without_probes_or_with_a_failed_process_check_is_not_taken() {
    let accel = accel_probes();
    let none = judge(
        &Variant::noaesni(),
        &Facts {
            settings: NOAESNI,
            cpu_has_aes: true,
            cpu_flags: &[],
            mask: None,
            probes: None,
            accel_probes: Some(&accel),
            process_check: None,
        },
    );
    assert!(!none.took_effect);
    assert_eq!(none.effect.unwrap().verdict, Verdict::Unjudged);
    let mine = probes(NOAESNI, 0.33e9, 3.7e9, 31e6);
    let check = ProcessCheck {
        what: "OPENSSL_ia32cap in /proc/<pid>/environ of nginx's workers".into(),
        passed: false,
        detail: "expected ~0; found 12: unset".into(),
    };
    let r = judge(
        &Variant::noaesni(),
        &Facts {
            settings: NOAESNI,
            cpu_has_aes: true,
            cpu_flags: &[],
            mask: None,
            probes: Some(&mine),
            accel_probes: Some(&accel),
            process_check: Some(&check),
        },
    );
    assert!(!r.took_effect);
    assert!(
        r.explanation().contains("found 12: unset"),
        "{}",
        r.explanation()
    );
}

#[test]
fn a_process_check_keeps_the_stand_ins_verdict_or_leaves_it_unjudged() {
    let accel = accel_probes();
    // A stand-in judged after a confirmation: what it said first is kept.
    let mut stand_in = judged(
        &Variant::noaesni(),
        None,
        &probes(NOAESNI, 0.33e9, 3.7e9, 31e6),
        &accel,
    );
    stand_in.effect.as_mut().unwrap().first_judgement = Some("3DES moved".into());
    let passed = ProcessCheck {
        what: "OPENSSL_ia32cap in /proc/<pid>/environ of nginx's workers".into(),
        passed: true,
        detail: "as given".into(),
    };
    let r = with_check(&stand_in, passed.clone());
    assert!(r.took_effect);
    assert_eq!(r.effect, stand_in.effect);
    assert_eq!(r.process_check, Some(passed));
    let failed = ProcessCheck {
        passed: false,
        detail: "expected ~0; found 12: unset".into(),
        ..r.process_check.clone().unwrap()
    };
    let r = with_check(&stand_in, failed);
    assert!(!r.took_effect);
    assert_eq!(r.effect.as_ref().unwrap().verdict, Verdict::Unjudged);
    assert!(r.explanation().contains("found 12: unset"));
}
