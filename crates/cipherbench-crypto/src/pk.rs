//! The public-key operations layer 1 measures (`cipherbench speed --pk`): what a TLS
//! 1.3 handshake of 2026 spends its CPU on. ML-KEM (FIPS 203) key generation,
//! encapsulation and decapsulation, the post-quantum half of X25519MLKEM768; ML-DSA
//! (FIPS 204) signing and verification; X25519 and P-256 key agreement; ECDSA on P-256
//! and RSA signing and verification, the certificates' side.
//!
//! Each operation is the one `openssl speed` times for the same algorithm (its
//! `KEM_*_loop`, `SIG_*_loop`, `RSA_sign_loop`, `ECDSA_sign_loop`,
//! `ECDH_EVP_derive_key_loop`): one `EVP_PKEY` call on a context made once, over a
//! 32-byte input where something is signed. A benchmark ([`Bench`]) generates its keys
//! once and checks its own output once (the secret decapsulated is the one
//! encapsulated, the signature verifies, both sides agree), then hands one
//! [`BenchOp`] per thread.

use crate::catalogue::BenchOp;
use crate::ffi::{KeySpec, Pkey, PkeyCtx, Purpose};
use crate::CryptoError;

/// A public-key algorithm (with its parameter set) layer 1 can measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PkAlgorithm {
    /// ML-KEM-512 (FIPS 203, category 1).
    MlKem512,
    /// ML-KEM-768 (category 3): the KEM inside X25519MLKEM768.
    MlKem768,
    /// ML-KEM-1024 (category 5).
    MlKem1024,
    /// ML-DSA-44 (FIPS 204, category 2).
    MlDsa44,
    /// ML-DSA-65 (category 3).
    MlDsa65,
    /// ML-DSA-87 (category 5).
    MlDsa87,
    /// X25519 key agreement (RFC 7748): the classical half of X25519MLKEM768.
    X25519,
    /// NIST P-256: ECDH key agreement and ECDSA.
    P256,
    /// RSA with a 2048-bit modulus (PKCS #1 v1.5 signatures).
    Rsa2048,
    /// RSA with a 3072-bit modulus.
    Rsa3072,
}

/// Every algorithm, in the order reports list them.
pub const ALL: [PkAlgorithm; 10] = [
    PkAlgorithm::MlKem512,
    PkAlgorithm::MlKem768,
    PkAlgorithm::MlKem1024,
    PkAlgorithm::MlDsa44,
    PkAlgorithm::MlDsa65,
    PkAlgorithm::MlDsa87,
    PkAlgorithm::X25519,
    PkAlgorithm::P256,
    PkAlgorithm::Rsa2048,
    PkAlgorithm::Rsa3072,
];

/// One operation of an algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PkOp {
    /// Key-pair generation (a KEM's per-handshake cost on the client).
    Keygen,
    /// KEM encapsulation (the server's side of a hybrid key exchange).
    Encaps,
    /// KEM decapsulation (the client's).
    Decaps,
    /// Signing (the server's CertificateVerify).
    Sign,
    /// Verification (the client's).
    Verify,
    /// Key agreement with a peer's public key (ECDH, X25519).
    Derive,
}

impl PkOp {
    /// The name results record (`keygen`, `encaps`, ...).
    pub fn name(self) -> &'static str {
        match self {
            PkOp::Keygen => "keygen",
            PkOp::Encaps => "encaps",
            PkOp::Decaps => "decaps",
            PkOp::Sign => "sign",
            PkOp::Verify => "verify",
            PkOp::Derive => "derive",
        }
    }

    /// The operation named `name`.
    pub fn from_name(name: &str) -> Option<PkOp> {
        [
            PkOp::Keygen,
            PkOp::Encaps,
            PkOp::Decaps,
            PkOp::Sign,
            PkOp::Verify,
            PkOp::Derive,
        ]
        .into_iter()
        .find(|o| o.name() == name)
    }
}

impl PkAlgorithm {
    /// Catalogue name (what `--pk` takes and results record).
    pub fn name(self) -> &'static str {
        match self {
            PkAlgorithm::MlKem512 => "ml-kem-512",
            PkAlgorithm::MlKem768 => "ml-kem-768",
            PkAlgorithm::MlKem1024 => "ml-kem-1024",
            PkAlgorithm::MlDsa44 => "ml-dsa-44",
            PkAlgorithm::MlDsa65 => "ml-dsa-65",
            PkAlgorithm::MlDsa87 => "ml-dsa-87",
            PkAlgorithm::X25519 => "x25519",
            PkAlgorithm::P256 => "p-256",
            PkAlgorithm::Rsa2048 => "rsa-2048",
            PkAlgorithm::Rsa3072 => "rsa-3072",
        }
    }

    /// The algorithm named `name` (case and `_`/`-` insensitive: `ML-KEM-768`,
    /// `mlkem768`, `P256` and `rsa2048` are all understood).
    pub fn from_name(name: &str) -> Option<PkAlgorithm> {
        let key = |s: &str| -> String {
            s.chars()
                .filter(|c| c.is_ascii_alphanumeric())
                .map(|c| c.to_ascii_lowercase())
                .collect()
        };
        let wanted = key(name.trim());
        ALL.into_iter().find(|a| key(a.name()) == wanted)
    }

    /// The operations measured, in order.
    pub fn ops(self) -> &'static [PkOp] {
        use PkAlgorithm::*;
        match self {
            MlKem512 | MlKem768 | MlKem1024 => &[PkOp::Keygen, PkOp::Encaps, PkOp::Decaps],
            MlDsa44 | MlDsa65 | MlDsa87 | Rsa2048 | Rsa3072 => &[PkOp::Sign, PkOp::Verify],
            X25519 => &[PkOp::Derive],
            P256 => &[PkOp::Derive, PkOp::Sign, PkOp::Verify],
        }
    }

    /// What an operation is called where the algorithm's name alone does not say
    /// (P-256's key agreement is ECDH, its signatures ECDSA).
    pub fn scheme(self, op: PkOp) -> Option<&'static str> {
        match (self, op) {
            (PkAlgorithm::P256, PkOp::Derive) => Some("ECDH"),
            (PkAlgorithm::P256, _) => Some("ECDSA"),
            _ => None,
        }
    }

    /// The OpenSSL release that first has the algorithm in its default provider.
    pub fn since(self) -> &'static str {
        use PkAlgorithm::*;
        match self {
            MlKem512 | MlKem768 | MlKem1024 | MlDsa44 | MlDsa65 | MlDsa87 => "3.5",
            X25519 | P256 | Rsa2048 | Rsa3072 => "1.1.0",
        }
    }

    /// The key `EVP_PKEY_CTX_new_from_name` generates.
    fn spec(self) -> KeySpec {
        let named = |name| KeySpec {
            name,
            group: None,
            bits: None,
        };
        match self {
            PkAlgorithm::MlKem512 => named("ML-KEM-512"),
            PkAlgorithm::MlKem768 => named("ML-KEM-768"),
            PkAlgorithm::MlKem1024 => named("ML-KEM-1024"),
            PkAlgorithm::MlDsa44 => named("ML-DSA-44"),
            PkAlgorithm::MlDsa65 => named("ML-DSA-65"),
            PkAlgorithm::MlDsa87 => named("ML-DSA-87"),
            PkAlgorithm::X25519 => named("X25519"),
            PkAlgorithm::P256 => KeySpec {
                group: Some("P-256"),
                ..named("EC")
            },
            PkAlgorithm::Rsa2048 => KeySpec {
                bits: Some(2048),
                ..named("RSA")
            },
            PkAlgorithm::Rsa3072 => KeySpec {
                bits: Some(3072),
                ..named("RSA")
            },
        }
    }

    /// The `openssl speed` arguments that time this algorithm, and where in its `-mr`
    /// output each operation's figure is: the line's tag and the field (counted from
    /// 0, the tag being field 0). `+F9:k:keygen:encaps:decaps` for a KEM,
    /// `+F10:k:keygen:sign:verify` for a signature algorithm, `+F2:k:bits:sign:verify`
    /// for RSA, `+F4:k:bits:sign:verify` for ECDSA, `+F5:k:bits:ops:seconds` for ECDH.
    pub fn openssl_speed(self) -> (&'static [&'static str], OpensslField) {
        use PkAlgorithm::*;
        fn kem(op: PkOp) -> Option<(&'static str, usize)> {
            match op {
                PkOp::Keygen => Some(("+F9", 2)),
                PkOp::Encaps => Some(("+F9", 3)),
                PkOp::Decaps => Some(("+F9", 4)),
                _ => None,
            }
        }
        fn sig(op: PkOp) -> Option<(&'static str, usize)> {
            match op {
                PkOp::Sign => Some(("+F10", 3)),
                PkOp::Verify => Some(("+F10", 4)),
                _ => None,
            }
        }
        fn rsa(op: PkOp) -> Option<(&'static str, usize)> {
            match op {
                PkOp::Sign => Some(("+F2", 3)),
                PkOp::Verify => Some(("+F2", 4)),
                _ => None,
            }
        }
        fn ec(op: PkOp) -> Option<(&'static str, usize)> {
            match op {
                PkOp::Derive => Some(("+F5", 3)),
                PkOp::Sign => Some(("+F4", 3)),
                PkOp::Verify => Some(("+F4", 4)),
                _ => None,
            }
        }
        match self {
            MlKem512 => (&["ML-KEM-512"], kem),
            MlKem768 => (&["ML-KEM-768"], kem),
            MlKem1024 => (&["ML-KEM-1024"], kem),
            MlDsa44 => (&["ML-DSA-44"], sig),
            MlDsa65 => (&["ML-DSA-65"], sig),
            MlDsa87 => (&["ML-DSA-87"], sig),
            X25519 => (&["ecdhx25519"], ec),
            P256 => (&["ecdhp256", "ecdsap256"], ec),
            Rsa2048 => (&["rsa2048"], rsa),
            Rsa3072 => (&["rsa3072"], rsa),
        }
    }
}

/// Where an operation's figure is in `openssl speed -mr`'s output: the line's tag
/// and the field, or None for an operation the algorithm's lines do not have.
pub type OpensslField = fn(PkOp) -> Option<(&'static str, usize)>;

/// The names `--pk` takes, for an error message.
pub fn known_names() -> String {
    ALL.iter().map(|a| a.name()).collect::<Vec<_>>().join(", ")
}

/// Whether this process's library (with its providers) has `algorithm`: the reason
/// it does not, in OpenSSL's words.
pub fn available(algorithm: PkAlgorithm) -> Result<(), String> {
    match PkeyCtx::keygen(&algorithm.spec()) {
        Ok(_) => Ok(()),
        Err(CryptoError::Unavailable { reason, .. }) => Err(reason),
        Err(e) => Err(e.to_string()),
    }
}

/// A fresh key of `algorithm` as PKCS #8 DER: how a caller that works with another
/// API (the `openssl` crate's `PKey`) gets keys of algorithms that API cannot
/// generate, ML-DSA among them. `Unavailable` where the library lacks it.
pub fn private_key_pkcs8(algorithm: PkAlgorithm) -> Result<Vec<u8>, CryptoError> {
    PkeyCtx::keygen(&algorithm.spec())?.generate()?.pkcs8_der()
}

/// What is signed: a digest-sized message, as a TLS 1.3 CertificateVerify signs a
/// transcript hash (`openssl speed` signs 36 bytes with RSA, 20 with ECDSA and a
/// zero SHA-256-sized buffer with ML-DSA: the same cost within noise).
const TBS: [u8; 32] = [0x5a; 32];

/// One operation's benchmark: its keys, generated once and checked.
pub struct Bench {
    algorithm: PkAlgorithm,
    op: PkOp,
    key: Pkey,
    /// The second party's key, for key agreement.
    peer: Option<Pkey>,
    /// A ciphertext (decapsulation) or signature (verification) made by the key.
    input: Vec<u8>,
}

impl Bench {
    /// Generates the keys for `op` of `algorithm` and checks one run of it: a
    /// decapsulated secret equals the encapsulated one, a signature verifies, both
    /// sides of a key agreement derive the same secret.
    pub fn new(algorithm: PkAlgorithm, op: PkOp) -> Result<Bench, CryptoError> {
        if !algorithm.ops().contains(&op) {
            return Err(CryptoError::Library(format!(
                "{} has no {} operation",
                algorithm.name(),
                op.name()
            )));
        }
        let mut keygen = PkeyCtx::keygen(&algorithm.spec())?;
        let key = keygen.generate()?;
        let mut bench = Bench {
            algorithm,
            op,
            key,
            peer: None,
            input: Vec::new(),
        };
        match op {
            PkOp::Keygen | PkOp::Encaps => {}
            PkOp::Decaps => {
                let (mut wrapped, mut secret) = (Vec::new(), Vec::new());
                PkeyCtx::on(&bench.key, Purpose::Encapsulate)?
                    .encapsulate(&mut wrapped, &mut secret)?;
                let mut got = vec![0u8; secret.len()];
                let n = PkeyCtx::on(&bench.key, Purpose::Decapsulate)?
                    .decapsulate(&wrapped, &mut got)?;
                if got[..n] != secret[..] {
                    return Err(bench.wrong("the decapsulated secret is not the encapsulated one"));
                }
                bench.input = wrapped;
            }
            PkOp::Sign | PkOp::Verify => {
                let mut sig = Vec::new();
                PkeyCtx::on(&bench.key, Purpose::Sign)?.sign(&TBS, &mut sig)?;
                if !PkeyCtx::on(&bench.key, Purpose::Verify)?.verify(&sig, &TBS)? {
                    return Err(bench.wrong("its own signature does not verify"));
                }
                bench.input = sig;
            }
            PkOp::Derive => {
                let peer = keygen.generate()?;
                let (mut ours, mut theirs) = (Vec::new(), Vec::new());
                let n = PkeyCtx::on(&bench.key, Purpose::Derive(&peer))?.derive(&mut ours)?;
                let m = PkeyCtx::on(&peer, Purpose::Derive(&bench.key))?.derive(&mut theirs)?;
                if ours[..n] != theirs[..m] {
                    return Err(bench.wrong("the two sides derived different secrets"));
                }
                bench.peer = Some(peer);
            }
        }
        Ok(bench)
    }

    fn wrong(&self, what: &str) -> CryptoError {
        CryptoError::Library(format!(
            "{} {}: {what}",
            self.algorithm.name(),
            self.op.name()
        ))
    }

    /// One thread's operation: its own context on the shared keys.
    pub fn op(&self) -> Result<Box<dyn BenchOp>, CryptoError> {
        Ok(match self.op {
            PkOp::Keygen => Box::new(Keygen(PkeyCtx::keygen(&self.algorithm.spec())?)),
            PkOp::Encaps => Box::new(Encaps {
                ctx: PkeyCtx::on(&self.key, Purpose::Encapsulate)?,
                wrapped: Vec::new(),
                secret: Vec::new(),
            }),
            PkOp::Decaps => Box::new(Decaps {
                ctx: PkeyCtx::on(&self.key, Purpose::Decapsulate)?,
                wrapped: self.input.clone(),
                secret: vec![0u8; 64],
            }),
            PkOp::Sign => Box::new(Sign {
                ctx: PkeyCtx::on(&self.key, Purpose::Sign)?,
                sig: Vec::new(),
            }),
            PkOp::Verify => Box::new(Verify {
                ctx: PkeyCtx::on(&self.key, Purpose::Verify)?,
                sig: self.input.clone(),
            }),
            PkOp::Derive => {
                let peer = self
                    .peer
                    .as_ref()
                    .ok_or_else(|| self.wrong("no peer key"))?;
                Box::new(Derive {
                    ctx: PkeyCtx::on(&self.key, Purpose::Derive(peer))?,
                    out: Vec::new(),
                })
            }
        })
    }
}

struct Keygen(PkeyCtx);
struct Encaps {
    ctx: PkeyCtx,
    wrapped: Vec<u8>,
    secret: Vec<u8>,
}
struct Decaps {
    ctx: PkeyCtx,
    wrapped: Vec<u8>,
    secret: Vec<u8>,
}
struct Sign {
    ctx: PkeyCtx,
    sig: Vec<u8>,
}
struct Verify {
    ctx: PkeyCtx,
    sig: Vec<u8>,
}
struct Derive {
    ctx: PkeyCtx,
    out: Vec<u8>,
}

/// Every public-key operation counts one "byte" per operation, so that a sample's
/// bytes are its operations and its rate operations per second.
impl BenchOp for Keygen {
    fn run(&mut self) -> Result<(), CryptoError> {
        self.0.generate().map(drop)
    }
    fn payload_len(&self) -> usize {
        1
    }
}

impl BenchOp for Encaps {
    fn run(&mut self) -> Result<(), CryptoError> {
        self.ctx.encapsulate(&mut self.wrapped, &mut self.secret)
    }
    fn payload_len(&self) -> usize {
        1
    }
}

impl BenchOp for Decaps {
    fn run(&mut self) -> Result<(), CryptoError> {
        self.ctx
            .decapsulate(&self.wrapped, &mut self.secret)
            .map(drop)
    }
    fn payload_len(&self) -> usize {
        1
    }
}

impl BenchOp for Sign {
    fn run(&mut self) -> Result<(), CryptoError> {
        self.ctx.sign(&TBS, &mut self.sig)
    }
    fn payload_len(&self) -> usize {
        1
    }
}

impl BenchOp for Verify {
    fn run(&mut self) -> Result<(), CryptoError> {
        if self.ctx.verify(&self.sig, &TBS)? {
            Ok(())
        } else {
            Err(CryptoError::Library(
                "verify: the benchmark's own signature did not verify".into(),
            ))
        }
    }
    fn payload_len(&self) -> usize {
        1
    }
}

impl BenchOp for Derive {
    fn run(&mut self) -> Result<(), CryptoError> {
        self.ctx.derive(&mut self.out).map(drop)
    }
    fn payload_len(&self) -> usize {
        1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_understood_in_every_spelling_and_round_trip() {
        for a in ALL {
            assert_eq!(PkAlgorithm::from_name(a.name()), Some(a));
            for &op in a.ops() {
                assert_eq!(PkOp::from_name(op.name()), Some(op));
            }
        }
        assert_eq!(
            PkAlgorithm::from_name("ML-KEM-768"),
            Some(PkAlgorithm::MlKem768)
        );
        assert_eq!(
            PkAlgorithm::from_name("mlkem768"),
            Some(PkAlgorithm::MlKem768)
        );
        assert_eq!(PkAlgorithm::from_name("P256"), Some(PkAlgorithm::P256));
        assert_eq!(
            PkAlgorithm::from_name("rsa2048"),
            Some(PkAlgorithm::Rsa2048)
        );
        assert_eq!(PkAlgorithm::from_name("rsa-4096"), None);
        assert_eq!(PkOp::from_name("encrypt"), None);
    }

    #[test]
    fn every_operation_has_its_openssl_speed_field() {
        for a in ALL {
            let (args, field) = a.openssl_speed();
            assert!(!args.is_empty());
            for &op in a.ops() {
                assert!(field(op).is_some(), "{} {}", a.name(), op.name());
            }
        }
    }

    /// The classical algorithms are in every OpenSSL 3; each operation runs and
    /// checks itself (a wrong secret or signature is an error, not a figure).
    #[test]
    fn the_classical_operations_run_and_check_themselves() {
        for a in [PkAlgorithm::X25519, PkAlgorithm::P256, PkAlgorithm::Rsa2048] {
            available(a).unwrap();
            for &op in a.ops() {
                let bench =
                    Bench::new(a, op).unwrap_or_else(|e| panic!("{} {}: {e}", a.name(), op.name()));
                let mut one = bench.op().unwrap();
                for _ in 0..3 {
                    one.run().unwrap();
                }
                assert_eq!(one.payload_len(), 1);
            }
        }
        assert!(Bench::new(PkAlgorithm::X25519, PkOp::Sign).is_err());
    }

    #[test]
    fn a_key_exports_as_pkcs8() {
        let der = private_key_pkcs8(PkAlgorithm::P256).unwrap();
        // SEQUENCE, then version 0 and the id-ecPublicKey AlgorithmIdentifier.
        assert_eq!(der[0], 0x30);
        assert!(der
            .windows(7)
            .any(|w| w == [0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d]));
        match private_key_pkcs8(PkAlgorithm::MlDsa65) {
            Ok(der) => assert!(der.len() > 32),
            Err(e) => assert!(matches!(e, CryptoError::Unavailable { .. }), "{e}"),
        }
    }

    /// ML-KEM where the library has it (OpenSSL 3.5 and later); where it does not,
    /// the reason is OpenSSL's and the benchmark refuses as unavailable.
    #[test]
    fn ml_kem_runs_where_the_library_has_it_and_is_unavailable_elsewhere() {
        match available(PkAlgorithm::MlKem768) {
            Ok(()) => {
                for &op in PkAlgorithm::MlKem768.ops() {
                    Bench::new(PkAlgorithm::MlKem768, op)
                        .unwrap()
                        .op()
                        .unwrap()
                        .run()
                        .unwrap();
                }
            }
            Err(reason) => {
                assert!(!reason.is_empty());
                assert!(matches!(
                    Bench::new(PkAlgorithm::MlKem768, PkOp::Encaps),
                    Err(CryptoError::Unavailable { .. })
                ));
            }
        }
    }
}
