//! The measuring skeleton below the layers: what every layer's runner does the same
//! way, written once.
//!
//! A layer's run goes through the same steps whatever it measures:
//!
//! 1. **Resume** ([`resume`]): the results an earlier, interrupted run of the same
//!    plan saved are kept, so that only what is missing is measured; results of
//!    another plan are set aside.
//! 2. **The variants' start** ([`Variants::begin`]): accel's effect probes under every
//!    library of the layer (the [`Baseline`] each variant is judged against) and every
//!    provider's counter at zero, before any work.
//! 3. **The units** ([`each_unit`], [`Units`]), measured in the layer's own interleaved order (a cipher's rounds,
//!    a transform's variants, a TLS point's slots), saved after each; what the layer
//!    redoes whole when a run was cut short is its unit.
//! 4. **The variants' end** ([`Variants::end`]): each provider or engine variant's
//!    tally over the layer, and the variant judged on the layer's own ciphers (work
//!    that all fell back to the default provider is not the module's); a warning in
//!    `run.json` for every variant that did not take effect
//!    ([`Variants::warn_not_effective`]) or fell back ([`Variants::warn_fallbacks`]).

use crate::interrupt;
use crate::results::Session;
use crate::variant::{Baseline, Variant};
use anyhow::Result;
use cipherbench_model::variant::VariantRecord;
use cipherbench_model::RunRecord;

/// The results an earlier run saved, if it measured the same plan (`same`), else
/// `fresh()`: what a resumed run starts from.
pub fn resume<T>(
    earlier: Option<T>,
    same: impl FnOnce(&T) -> bool,
    fresh: impl FnOnce() -> T,
) -> T {
    match earlier {
        Some(e) if same(&e) => e,
        _ => fresh(),
    }
}

/// The CPU layout a layer places its processes on: the one the run recorded, or
/// this machine's.
pub fn topology(session: &Session) -> cipherbench_model::topology::Topology {
    session
        .record
        .environment
        .topology
        .clone()
        .unwrap_or_else(|| crate::machine::topology::this_machine(None))
}

/// A layer's work as units, each measured whole: a cipher with its variants' rounds
/// (speed), a transform with its variants (tunnel), what a resumed run redoes whole
/// when the run before was cut short within it, as its rounds belong together.
pub trait Units {
    /// One unit (an index into the plan, a transform with its variants).
    type Unit;
    /// Whether an earlier run measured `unit` whole: a resumed run skips it.
    fn done(&self, unit: &Self::Unit) -> bool;
    /// Counts a skipped unit as done in the progress line.
    fn skip(&mut self, unit: &Self::Unit);
    /// Drops what an earlier run measured of `unit`, before it is measured again.
    fn forget(&mut self, unit: &Self::Unit);
    /// Measures `unit`, saving as it goes.
    fn measure(&mut self, unit: &Self::Unit) -> Result<()>;
}

/// Measures, in order, every unit of `units` an earlier run did not finish, each
/// from a clean slate; stops at the first error or at Ctrl-C (between units; a unit's
/// own measuring checks too).
pub fn each_unit<U: Units>(units: &[U::Unit], layer: &mut U) -> Result<()> {
    for unit in units {
        interrupt::check()?;
        if layer.done(unit) {
            layer.skip(unit);
            continue;
        }
        layer.forget(unit);
        layer.measure(unit)?;
    }
    Ok(())
}

/// A layer's variants from its start to its end.
pub struct Variants {
    /// The layer, as its warnings name it (`speed`, `file`, `tls`, `tunnel`).
    layer: &'static str,
    /// The plan's variants, in its order.
    variants: Vec<Variant>,
    /// accel's probes under each library, measured at the start.
    pub baseline: Baseline,
}

impl Variants {
    /// The start of a layer: accel's probes measured under each library of
    /// `variants` and every provider variant's counter at zero.
    pub fn begin(layer: &'static str, variants: &[Variant]) -> Result<Variants> {
        let baseline = Baseline::measure(variants)?;
        Ok(Variants::with_baseline(layer, variants, baseline))
    }

    /// As [`Variants::begin`], with a baseline already measured (a stack that shares
    /// its layer's): only the counters go to zero.
    pub fn with_baseline(
        layer: &'static str,
        variants: &[Variant],
        baseline: Baseline,
    ) -> Variants {
        for v in variants {
            v.reset_counter();
        }
        Variants {
            layer,
            variants: variants.to_vec(),
            baseline,
        }
    }

    /// A run.json warning for `record` if its variant did not take effect, naming
    /// where it was judged (`in the gateway`, `for nginx`; empty: the layer's own
    /// process).
    pub fn warn_not_effective(&self, run: &mut RunRecord, record: &VariantRecord, place: &str) {
        warn_not_effective(run, self.layer, record, place);
    }

    /// The end of a layer's work: each provider or engine variant's tally, and the
    /// variant judged on `ciphers`, the layer's own (work that all fell back to the
    /// default provider: not taken). `records` are the layer's variant records.
    pub fn end(&self, records: &mut [VariantRecord], ciphers: &[&str]) {
        for v in &self.variants {
            if let Some(r) = records.iter_mut().find(|r| r.name == v.name()) {
                v.note_counter(r);
                crate::variant::judge_layer_fallback(r, ciphers);
            }
        }
    }

    /// A run.json warning for every cipher of `ciphers` a provider or engine variant
    /// of `records` did not serve itself.
    pub fn warn_fallbacks(&self, run: &mut RunRecord, records: &[VariantRecord], ciphers: &[&str]) {
        for r in records {
            for c in ciphers {
                if let Some(f) = r.fallback(c) {
                    run.warn(
                        self.layer,
                        "variant_fallback",
                        format!("variant {}: {f}", r.name),
                    );
                }
            }
        }
    }
}

/// A run.json warning for `record` if its variant did not take effect in `layer`,
/// naming where it was judged (empty: the layer's own process). For runners that
/// judge outside a [`Variants`] (nginx's per-server records).
pub fn warn_not_effective(run: &mut RunRecord, layer: &str, record: &VariantRecord, place: &str) {
    if let Some(message) = record.not_effective_warning(place) {
        run.warn(layer, "variant_not_effective", message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_resumes_only_from_the_same_plan() {
        let fresh = || (2, Vec::<u32>::new());
        let earlier = Some((1, vec![7]));
        assert_eq!(resume(earlier.clone(), |e| e.0 == 1, fresh), (1, vec![7]));
        assert_eq!(resume(earlier, |e| e.0 == 2, fresh), (2, vec![]));
        assert_eq!(resume(None, |_: &(u32, Vec<u32>)| true, fresh), (2, vec![]));
    }

    /// Units 0..n, with what an earlier run left: `whole` ones and `part` ones.
    struct Fake {
        whole: Vec<usize>,
        part: Vec<usize>,
        calls: Vec<String>,
        fail_at: Option<usize>,
    }

    impl Units for Fake {
        type Unit = usize;
        fn done(&self, u: &usize) -> bool {
            self.whole.contains(u)
        }
        fn skip(&mut self, u: &usize) {
            self.calls.push(format!("skip {u}"));
        }
        fn forget(&mut self, u: &usize) {
            if self.part.contains(u) {
                self.calls.push(format!("forget {u}"));
            }
        }
        fn measure(&mut self, u: &usize) -> Result<()> {
            if self.fail_at == Some(*u) {
                anyhow::bail!("unit {u} failed");
            }
            self.calls.push(format!("measure {u}"));
            Ok(())
        }
    }

    #[test]
    fn a_resumed_layer_skips_whole_units_and_redoes_a_half_done_one_whole() {
        let mut layer = Fake {
            whole: vec![0],
            part: vec![1],
            calls: Vec::new(),
            fail_at: None,
        };
        each_unit(&[0, 1, 2], &mut layer).unwrap();
        assert_eq!(
            layer.calls,
            ["skip 0", "forget 1", "measure 1", "measure 2"]
        );
        // The first error ends the layer: nothing after it is measured.
        let mut failing = Fake {
            whole: vec![],
            part: vec![],
            calls: Vec::new(),
            fail_at: Some(1),
        };
        let e = each_unit(&[0, 1, 2], &mut failing).unwrap_err();
        assert_eq!(e.to_string(), "unit 1 failed");
        assert_eq!(failing.calls, ["measure 0"]);
    }
}
