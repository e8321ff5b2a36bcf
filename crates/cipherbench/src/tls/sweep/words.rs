//! How the sweep says things: limits, rates, a point's name, CPU shares.

use super::*;

pub(super) fn limit_words(l: Option<Limit>) -> &'static str {
    match l {
        Some(Limit::Server) => "nginx's cores",
        Some(Limit::Generator) => "the load generator",
        Some(Limit::Latency) => "the latency limit",
        Some(Limit::Undetermined) => "neither side (both had CPU to spare)",
        Some(Limit::Fixed) => "the fixed concurrency",
        None => "an unrecorded limit",
    }
}

/// An invalid point's reason with its failed requests (`failures`, from
/// [`cipherbench_model::tls::failures_note`]) added when it does not say them.
pub(crate) fn with_failures(why: String, failures: Option<&str>) -> String {
    match failures {
        Some(f) if !why.contains(f) => format!("{why}; and {f} in the window"),
        _ => why,
    }
}

/// A request rate as the progress says it: whole requests per second, with a
/// decimal (or two) below 10 (`0.5 req/s`, not `0 req/s`).
pub(crate) fn format_rate(per_sec: f64) -> String {
    if per_sec >= 10.0 || per_sec == 0.0 {
        format!("{per_sec:.0}")
    } else if per_sec >= 0.1 {
        format!("{per_sec:.1}")
    } else {
        format!("{per_sec:.2}")
    }
}

/// A point as the progress and the warnings name it: suite, size, cores, variant,
/// and the key store when it is not a file.
pub(crate) fn point_name(p: &SweepPoint) -> String {
    format!(
        "{} {} x{} {}{}",
        p.suite,
        ByteSize(p.size_bytes),
        p.cores,
        p.variant,
        store_suffix(&p.key_store)
    )
}

/// " key in pkcs11" for a key store other than a file, else nothing.
pub(crate) fn store_suffix(key_store: &str) -> String {
    match key_store {
        "" | "file" => String::new(),
        k => format!(" key in {k}"),
    }
}

/// Each generator thread's CPU, as "[52 %, 49 %]".
pub(crate) fn per_thread(cpu: &[f64]) -> String {
    let v: Vec<String> = cpu.iter().map(|c| format!("{:.0} %", c * 100.0)).collect();
    format!("[{}]", v.join(", "))
}
