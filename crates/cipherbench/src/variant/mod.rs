//! The acceleration variant, the idea every layer shares: what it is
//! ([`VariantKind`]), its name in records, the `OPENSSL_ia32cap` mask it runs under
//! for a given library version ([`mask`]), parsing a `--variants` list, and whether it
//! took effect.
//!
//! Whether a variant took effect is decided by effect, in every run: the variant's
//! process measures a treatment probe and control probes ([`crate::effect`]) and
//! [`judge`], a pure function of those figures, accel's, the vector the library
//! held (`judge.rs`). `facts.rs` gathers the facts (a probe child, `/proc/cpuinfo`,
//! `openssl info -cpusettings`, `/proc/<pid>/environ`) and calls it.
//!
//! A variant also carries the library its processes run under ([`Library`], the
//! system's by default); [`cross`] makes every variant once per library of an
//! `--openssl` list, and the later libraries' variants are named `accel@3.6.3`. The
//! mask, the probes and the accel a variant is judged against are its library's.
//!
//! The layers take variants from here; none of them owns the idea.

mod facts;
pub mod implementation;
mod judge;
pub mod mask;
#[cfg(test)]
mod tests;

pub use facts::{
    check_environ, check_openssl_cli, cpu_flags, cpu_has_aes, stand_in_records, Baseline,
    CONFIRMATIONS, CONFIRMATION_ROUNDS,
};
pub use judge::{judge, judge_layer_fallback, needs_confirmation, with_check, Facts};

use crate::library::Library;
use anyhow::{bail, Result};
use cipherbench_model::variant::{Expected, VariantRecord};

/// What a variant changes in the library under test. New ways to switch an
/// implementation (an OpenSSL provider, an engine) are new kinds here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VariantKind {
    /// The library's default paths (`OPENSSL_ia32cap` removed from the environment).
    Accel,
    /// Every AES and GHASH hardware path off ([`mask::noaesni_mask`]), everything
    /// else as detected.
    NoAesni,
    /// A user-given `OPENSSL_ia32cap` value (`ia32cap:MASK`), checked by
    /// [`mask::parse`].
    Ia32Cap(String),
    /// An OpenSSL configuration that loads a provider (`provider:CONF`), checked
    /// by [`implementation::provider`]; judged by which provider served the work.
    Provider {
        /// As the user wrote it (the variant's name).
        given: String,
        /// Its absolute path: the children's `OPENSSL_CONF`.
        conf: std::path::PathBuf,
        /// The counting provider's tally file for this variant.
        counter: std::path::PathBuf,
    },
    /// An ENGINE made the default for its algorithms (`engine:ID`) through a
    /// generated configuration; judged by the engine bound to the work.
    Engine {
        /// The engine's id.
        id: String,
        /// The generated configuration: the children's `OPENSSL_CONF`.
        conf: std::path::PathBuf,
        /// The tally file a counting engine (such as the test engine,
        /// `testdata/engine/cbcount.c`) keeps; others leave it unwritten.
        counter: std::path::PathBuf,
    },
    /// A public-key path off (`noifma`, `noadx`, `nopkaccel`), AES left alone.
    PublicKey(mask::PublicKeyMask),
}

/// An acceleration variant: the kind, and through it the environment its
/// processes run under, and the library they load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variant {
    /// What the variant changes.
    pub kind: VariantKind,
    /// The OpenSSL its processes load (the system's unless `--openssl` says).
    pub library: Library,
}

impl Variant {
    /// The library's default paths.
    pub fn accel() -> Variant {
        Variant::of(VariantKind::Accel)
    }

    /// Every AES and GHASH hardware path masked, everything else as detected.
    pub fn noaesni() -> Variant {
        Variant::of(VariantKind::NoAesni)
    }

    fn of(kind: VariantKind) -> Variant {
        Variant {
            kind,
            library: Library::system(),
        }
    }

    /// The same variant under another library.
    pub fn with_library(&self, library: &Library) -> Variant {
        Variant {
            kind: self.kind.clone(),
            library: library.clone(),
        }
    }

    /// accel under this variant's library: the variant every ratio of its library
    /// divides by.
    pub fn its_accel(&self) -> Variant {
        Variant::accel().with_library(&self.library)
    }

    /// Parses `accel`, `noaesni`, `ia32cap:MASK`, `provider:CONF` or `engine:ID`; a
    /// mask OpenSSL would not read as written, a configuration whose provider does
    /// not load, an engine that does not initialise are refused with the reason.
    pub fn parse(text: &str) -> Result<Variant> {
        let t = text.trim();
        if let Some(conf) = t.strip_prefix("provider:") {
            let (path, counter) = implementation::provider(conf)?;
            return Ok(Variant::of(VariantKind::Provider {
                given: conf.to_string(),
                conf: path,
                counter,
            }));
        }
        if let Some(id) = t.strip_prefix("engine:") {
            let (conf, counter) = implementation::engine(id)?;
            return Ok(Variant::of(VariantKind::Engine {
                id: id.to_string(),
                conf,
                counter,
            }));
        }
        match t {
            "accel" => Ok(Variant::accel()),
            "noaesni" => Ok(Variant::noaesni()),
            "noifma" => Ok(Variant::of(VariantKind::PublicKey(mask::PublicKeyMask::NoIfma))),
            "noadx" => Ok(Variant::of(VariantKind::PublicKey(mask::PublicKeyMask::NoAdx))),
            "nopkaccel" => Ok(Variant::of(VariantKind::PublicKey(
                mask::PublicKeyMask::NoPkAccel,
            ))),
            t => match t.strip_prefix("ia32cap:") {
                Some(m) => {
                    mask::parse(m)?;
                    Ok(Variant::of(VariantKind::Ia32Cap(m.to_string())))
                }
                None => bail!(
                    "unknown variant '{t}': use accel, noaesni, noifma, noadx, nopkaccel, ia32cap:MASK (an OPENSSL_ia32cap value such as {}), provider:CONF (an openssl.cnf loading a provider) or engine:ID",
                    mask::NOAESNI_FIVE_FIELDS
                ),
            },
        }
    }

    /// The environment the variant adds to its children beside the mask:
    /// `OPENSSL_CONF` (and the counter file) for a provider or engine variant,
    /// nothing for the others (the user's own `OPENSSL_CONF`, if any, passes).
    pub fn environment(&self) -> Vec<(&'static str, std::ffi::OsString)> {
        match &self.kind {
            VariantKind::Provider { conf, counter, .. }
            | VariantKind::Engine { conf, counter, .. } => vec![
                ("OPENSSL_CONF", conf.clone().into_os_string()),
                (
                    implementation::COUNTER_ENV,
                    counter.clone().into_os_string(),
                ),
            ],
            _ => Vec::new(),
        }
    }

    /// What should serve a provider or engine variant's work (None for the others).
    pub fn expected(&self) -> Option<Expected> {
        match &self.kind {
            VariantKind::Provider { .. } => Some(Expected::Provider),
            VariantKind::Engine { id, .. } => Some(Expected::Engine(id.clone())),
            _ => None,
        }
    }

    /// The counter file of a provider or engine variant.
    pub fn counter(&self) -> Option<&std::path::Path> {
        match &self.kind {
            VariantKind::Provider { counter, .. } | VariantKind::Engine { counter, .. } => {
                Some(counter)
            }
            _ => None,
        }
    }

    /// Zeroes the variant's provider tally before a layer's work.
    pub fn reset_counter(&self) {
        if let Some(c) = self.counter() {
            implementation::reset_counter(c);
        }
    }

    /// Puts the provider's tally over the layer's work into the variant's record.
    pub fn note_counter(&self, record: &mut VariantRecord) {
        if let Some(c) = self.counter() {
            record.provider_calls = implementation::read_counter(c);
        }
    }

    /// The name in records and on screen: `accel`, `noaesni`, or `ia32cap:MASK`,
    /// followed by `@TAG` under a library that is not the first of a list
    /// (`accel@3.6.3`).
    pub fn name(&self) -> String {
        let kind = match &self.kind {
            VariantKind::Accel => "accel".into(),
            VariantKind::NoAesni => "noaesni".into(),
            VariantKind::Ia32Cap(mask) => format!("ia32cap:{mask}"),
            VariantKind::Provider { given, .. } => format!("provider:{given}"),
            VariantKind::Engine { id, .. } => format!("engine:{id}"),
            VariantKind::PublicKey(m) => m.name().into(),
        };
        match &self.library.tag {
            Some(tag) => format!("{kind}@{tag}"),
            None => kind,
        }
    }

    /// The `OPENSSL_ia32cap` the variant's processes run under with the library whose
    /// `OpenSSL_version()` is `library_version` (None: removed, the library's
    /// defaults). Pure.
    pub fn mask(&self, library_version: &str) -> Option<String> {
        match &self.kind {
            VariantKind::Accel | VariantKind::Provider { .. } | VariantKind::Engine { .. } => None,
            VariantKind::NoAesni => Some(mask::noaesni_mask(library_version).to_string()),
            VariantKind::Ia32Cap(mask) => Some(mask.clone()),
            VariantKind::PublicKey(m) => Some(m.mask(library_version).to_string()),
        }
    }

    /// Whether this is the library's default (the baseline of every ratio).
    pub fn is_accel(&self) -> bool {
        self.kind == VariantKind::Accel
    }

    /// Whether the variant means to turn AES off, so that it is judged as `noaesni`
    /// is: a user mask counts if it clears AES-NI.
    fn masks_aes(&self) -> bool {
        match &self.kind {
            VariantKind::Accel | VariantKind::Provider { .. } | VariantKind::Engine { .. } => false,
            VariantKind::NoAesni => true,
            VariantKind::Ia32Cap(m) => mask::parse(m).is_ok_and(|m| m.clears_aesni()),
            VariantKind::PublicKey(_) => false,
        }
    }

    /// The public-key mask, if this is one.
    fn public_key(&self) -> Option<mask::PublicKeyMask> {
        match self.kind {
            VariantKind::PublicKey(m) => Some(m),
            _ => None,
        }
    }
}

/// Parses a comma-separated variant list.
pub fn parse_variants(text: &str) -> Result<Vec<Variant>> {
    let v: Vec<Variant> = text.split(',').map(Variant::parse).collect::<Result<_>>()?;
    Ok(v)
}

/// Every variant under every library, library by library (so a layer that goes
/// through its variants in order measures one library's, then the next's); an
/// empty list of libraries leaves the variants as they are. Pure.
pub fn cross(variants: &[Variant], libraries: &[Library]) -> Result<Vec<Variant>> {
    if libraries.is_empty() {
        return Ok(variants.to_vec());
    }
    // OpenSSL 4 removed the ENGINE API: an engine variant has nothing to load there.
    for l in libraries.iter().filter(|l| l.soname() >= 4) {
        if let Some(v) = variants
            .iter()
            .find(|v| matches!(v.kind, VariantKind::Engine { .. }))
        {
            bail!(
                "{} on --openssl {} ({}): OpenSSL 4 has no ENGINE API; reach the same hardware through a provider (provider:CONF), or measure the engine on an OpenSSL 3 library",
                v.name(),
                l.name(),
                l.version()
            );
        }
    }
    Ok(libraries
        .iter()
        .flat_map(|l| variants.iter().map(move |v| v.with_library(l)))
        .collect())
}

/// The libraries of a list of variants, each once, in first-seen order.
pub fn libraries_of(variants: &[Variant]) -> Vec<Library> {
    let mut out: Vec<Library> = Vec::new();
    for v in variants {
        if !out.contains(&v.library) {
            out.push(v.library.clone());
        }
    }
    out
}
