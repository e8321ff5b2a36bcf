//! `cipherbench tls handshake`: how many TLS handshakes one nginx core completes per
//! second, by server key (RSA-2048, ECDSA P-256), key-exchange group (X25519,
//! P-256), full against resumed, and variant (the public-key masks among them).
//!
//! Each point is a sweep point on a tiny file (keep-alive off, one request per
//! connection, so every request is one handshake): a fresh nginx offering exactly
//! the one group (`ssl_ecdh_curve`) and a client offering only that group, the
//! concurrency searched as the sweep searches it ([`super::sweep::search`]), and the
//! figure divided by the CPU nginx's workers used. "Resumed" turns nginx's session
//! cache and tickets on and has each generator thread offer its last session; the
//! share of handshakes that did resume is counted by the client
//! (`SSL_session_reused`) and recorded, so a "resumed" point that did not resume
//! says so. Variants innermost, so that the two sides of a ratio are measured a few
//! seconds apart.

use super::engine::Client;
use super::keystore::KeyStore;
use super::nginx::{self, ServerSpec, Workspace};
use super::suite::{KeyType, Protocol, Suite};
use super::SweepPlan;
use crate::campaign;
use crate::interrupt;
use crate::results::Session;
use crate::variant::Variant;
use anyhow::{anyhow, bail, Result};
use cipherbench_model::tls::{HandshakeConfig, HandshakePoint, HandshakeResults, ServerRecord};
use openssl::ssl::{SslContext, SslMethod};
use std::path::PathBuf;
use std::time::Duration;

/// A key-exchange group (RFC 8446 §4.2.7) by the name OpenSSL gives it: a classic
/// curve (X25519, P-256), a hybrid post-quantum group (X25519MLKEM768, which OpenSSL
/// 3.5 and later offer first in every handshake), or any other group the library
/// offers. What the library offers is asked of it ([`Group::check_offered`]), not
/// assumed from its version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group(String);

/// The groups cipherbench knows by name, in OpenSSL's spelling, with the other
/// spellings a user may type (OpenSSL's own `tlsname`s among them, as
/// `SSL_group_to_name` returns them). Post-quantum first, as OpenSSL 3.5 orders them.
const KNOWN: &[(&str, &[&str])] = &[
    ("X25519MLKEM768", &[]),
    ("SecP256r1MLKEM768", &[]),
    ("SecP384r1MLKEM1024", &[]),
    ("MLKEM512", &["ml-kem-512"]),
    ("MLKEM768", &["ml-kem-768"]),
    ("MLKEM1024", &["ml-kem-1024"]),
    ("X25519", &[]),
    ("X448", &[]),
    ("P-256", &["p256", "secp256r1", "prime256v1"]),
    ("P-384", &["p384", "secp384r1"]),
    ("P-521", &["p521", "secp521r1"]),
    ("ffdhe2048", &[]),
    ("ffdhe3072", &[]),
    ("ffdhe4096", &[]),
];

impl Group {
    /// Parses a group name: one of [`KNOWN`] in any spelling and case, or another
    /// name as OpenSSL spells it (the library decides whether it offers it).
    pub fn parse(text: &str) -> Result<Group> {
        let t = text.trim();
        if let Some(name) = Group::canonical(t) {
            return Ok(Group(name.to_string()));
        }
        if t.is_empty()
            || !t
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            bail!(
                "--groups: '{t}' is not a group name: use names such as x25519, p-256 or X25519MLKEM768"
            );
        }
        Ok(Group(t.to_string()))
    }

    /// [`KNOWN`]'s spelling of `name`, in any of its spellings and cases.
    fn canonical(name: &str) -> Option<&'static str> {
        KNOWN.iter().find_map(|(canonical, aliases)| {
            (canonical.eq_ignore_ascii_case(name)
                || aliases.iter().any(|a| a.eq_ignore_ascii_case(name)))
            .then_some(*canonical)
        })
    }

    /// As OpenSSL's groups list and nginx's `ssl_ecdh_curve` spell it.
    pub fn openssl(&self) -> &str {
        &self.0
    }

    /// A hybrid or pure ML-KEM group: TLS 1.3 only (RFC 8446 key shares).
    pub fn post_quantum(&self) -> bool {
        self.0.to_ascii_uppercase().contains("MLKEM")
    }

    /// The same group, whichever of its spellings the two names use (a negotiated
    /// group read back as `secp256r1` is P-256).
    pub fn is(&self, name: &str) -> bool {
        Group::canonical(name)
            .unwrap_or(name)
            .eq_ignore_ascii_case(&self.0)
    }

    /// Whether the linked library takes the group as a client's only one.
    fn offered(name: &str) -> bool {
        SslContext::builder(SslMethod::tls_client())
            .and_then(|mut b| b.set_groups_list(name))
            .is_ok()
    }

    /// The groups of [`KNOWN`] the linked library offers, in [`KNOWN`]'s order.
    pub fn offered_here() -> Vec<&'static str> {
        KNOWN
            .iter()
            .map(|(name, _)| *name)
            .filter(|name| Group::offered(name))
            .collect()
    }

    /// Refuses, in one line naming what it has, a group the load generator's library
    /// does not offer (the one this process runs on: the generator runs in it, on the
    /// one `--openssl` library named, else on the system's), or a post-quantum group
    /// under TLS 1.2.
    pub fn check_offered(&self, protocol: Protocol) -> Result<()> {
        if !Group::offered(&self.0) {
            let post_quantum = if self.post_quantum() {
                " (ML-KEM groups need OpenSSL 3.5 or later: give such a build with --openssl DIR)"
            } else {
                ""
            };
            bail!(
                "--groups: {} is not offered by {}, the library the load generator runs on{post_quantum}; it offers {}",
                self.0,
                cipherbench_crypto::info::library_version(),
                Group::offered_here().join(", ")
            );
        }
        if self.post_quantum() && protocol == Protocol::Tls12 {
            bail!(
                "--groups: {} is a TLS 1.3 group: drop --protocol tls1.2, or pick x25519 or p-256",
                self.0
            );
        }
        Ok(())
    }
}

/// `tls handshake`, resolved.
#[derive(Debug, Clone)]
pub struct HandshakePlan {
    /// TLS 1.3 (`TLS_AES_128_GCM_SHA256`) or TLS 1.2 (`ECDHE-{RSA,ECDSA}-AES128-GCM-SHA256`).
    pub protocol: Protocol,
    /// Server keys.
    pub keys: Vec<KeyType>,
    /// Groups.
    pub groups: Vec<Group>,
    /// `false` full, `true` resumed, in order.
    pub sessions: Vec<bool>,
    /// Where nginx's key is.
    pub key_stores: Vec<KeyStore>,
    /// Variants.
    pub variants: Vec<Variant>,
    /// nginx workers.
    pub cores: usize,
    /// Body size of the file requested.
    pub size: u64,
    /// The measuring part, as a sweep of one size and one core count.
    pub sweep: SweepPlan,
    /// `--nginx`.
    pub nginx: Option<PathBuf>,
    /// `--port`.
    pub port: Option<u16>,
}

/// The suite for a key under a protocol: one AES-128-GCM suite, so that the record
/// layer costs the same across points and the handshake is what differs.
pub fn suite_for(protocol: Protocol, key: KeyType) -> Suite {
    let name = match (protocol, key) {
        (Protocol::Tls13, _) => "TLS_AES_128_GCM_SHA256",
        (Protocol::Tls12, KeyType::Rsa2048) => "ECDHE-RSA-AES128-GCM-SHA256",
        (Protocol::Tls12, KeyType::EcdsaP256) => "ECDHE-ECDSA-AES128-GCM-SHA256",
        // Refused by the plan (`KeyType::in_tls12`); TLS 1.3's suite, which the key
        // fits, should the plan ever let it through.
        (Protocol::Tls12, KeyType::MlDsa65) => "TLS_AES_128_GCM_SHA256",
    };
    // The three names are in the suite table (suite.rs); a test holds it so.
    Suite::find(name).expect("handshake suites are in the suite table")
}

fn session_name(resumed: bool) -> &'static str {
    if resumed {
        "resumed"
    } else {
        "full"
    }
}

impl HandshakePlan {
    /// Points to measure.
    pub fn total_points(&self) -> usize {
        self.keys.len()
            * self.groups.len()
            * self.sessions.len()
            * self.key_stores.len()
            * self.variants.len()
    }

    fn config(&self) -> HandshakeConfig {
        HandshakeConfig {
            protocol: self.protocol.as_str().into(),
            keys: self.keys.iter().map(|k| k.name().into()).collect(),
            groups: self.groups.iter().map(|g| g.openssl().into()).collect(),
            sessions: self
                .sessions
                .iter()
                .map(|&r| session_name(r).into())
                .collect(),
            key_stores: self.key_stores.iter().map(|k| k.name().into()).collect(),
            variants: self.variants.iter().map(|v| v.name()).collect(),
            cores: self.cores,
            size_bytes: self.size,
            window_ns: self.sweep.window.as_nanos() as u64,
            probe_ns: self.sweep.probe.as_nanos() as u64,
            warmup_ns: self.sweep.warmup.as_nanos() as u64,
            latency_limit_ns: self.sweep.limit.as_nanos() as u64,
            max_concurrency: self.sweep.max_concurrency,
            rounds: self.sweep.rounds,
        }
    }
}

/// Runs every point, saving after each.
pub fn run(plan: &HandshakePlan, session: &mut Session) -> Result<()> {
    let config = plan.config();
    if let Some(tls) = session.record.tls.as_mut() {
        if tls.handshake.as_ref().is_some_and(|h| h.config != config) {
            tls.handshake = None;
        }
    }
    super::defaults::note(session, &crate::variant::libraries_of(&plan.variants));
    let binary = nginx::resolve_nginx(plan.nginx.as_deref())?;
    let info = nginx::nginx_info(&binary)?;
    if let Some(p) = plan.port {
        // A point's variants run side by side: --port and the ports after it.
        nginx::check_ports(p, plan.variants.len())?;
    }
    let topology = campaign::topology(session);
    let placed = super::assign_cpus(&topology, plan.cores, plan.sweep.generator_cpus.as_deref())?;
    let variants = super::NginxVariants::judge(&plan.variants)?;
    session.progress.layer(
        "tls handshake",
        plan.total_points(),
        // The sweep plan inside has no suites or sizes: its points are these.
        plan.sweep.estimate_per_point() * plan.total_points() as u32,
    );
    for &key in &plan.keys {
        suite_for(plan.protocol, key).check_offered()?;
    }
    let mut units = Vec::new();
    for k in 0..plan.keys.len() {
        for st in 0..plan.key_stores.len() {
            for group in &plan.groups {
                for &resumed in &plan.sessions {
                    units.push(Point {
                        key: k,
                        store: st,
                        group: group.clone(),
                        resumed,
                    });
                }
            }
        }
    }
    campaign::each_unit(
        &units,
        &mut Points {
            plan,
            config: &config,
            session: &mut *session,
            binary: &binary,
            info: &info,
            placed: &placed,
            variants: &variants,
            prepared: Vec::new(),
        },
    )
}

/// A point of the handshakes: a key, a key store, a group and a session mode,
/// measured by its variants side by side.
struct Point {
    /// Index into the plan's keys.
    key: usize,
    /// Index into the plan's key stores.
    store: usize,
    group: Group,
    resumed: bool,
}

/// The handshakes' units: their points. A resumed run keeps the variants an
/// earlier one measured and measures the others, together.
struct Points<'a> {
    plan: &'a HandshakePlan,
    config: &'a HandshakeConfig,
    session: &'a mut Session,
    binary: &'a std::path::Path,
    info: &'a nginx::NginxInfo,
    placed: &'a cipherbench_model::topology::TlsCpus,
    variants: &'a super::NginxVariants,
    /// Per (key, key store), the workspace and key source its points share, made
    /// when the first of them is measured.
    prepared: Vec<((usize, usize), Workspace, super::keystore::KeySource)>,
}

impl Points<'_> {
    fn labels<'v>(&self, p: &Point, variant: &'v Variant) -> PointLabels<'v> {
        PointLabels {
            key: self.plan.keys[p.key],
            group: p.group.clone(),
            resumed: p.resumed,
            store: self.plan.key_stores[p.store].name(),
            variant,
        }
    }

    /// The workspace and key source of `p`'s key and key store, made once.
    fn prepare(&mut self, p: &Point) -> Result<usize> {
        if let Some(i) = self.prepared.iter().position(|x| x.0 == (p.key, p.store)) {
            return Ok(i);
        }
        let workspace = Workspace::create(&[self.plan.size], self.plan.keys[p.key])?;
        let key_source = super::keystore::prepare(&self.plan.key_stores[p.store], &workspace)?;
        self.prepared
            .push(((p.key, p.store), workspace, key_source));
        Ok(self.prepared.len() - 1)
    }
}

impl campaign::Units for Points<'_> {
    type Unit = Point;

    fn done(&self, p: &Point) -> bool {
        self.plan
            .variants
            .iter()
            .all(|v| measured(self.session, &self.labels(p, v)))
    }

    fn skip(&mut self, _: &Point) {
        self.session.progress.skip(self.plan.variants.len());
    }

    /// Nothing: a variant measured whole keeps its point.
    fn forget(&mut self, _: &Point) {}

    /// The variants of a point up side by side, searched in turn, then measured in
    /// rounds, taking turns (`sweep::run_group`).
    fn measure(&mut self, p: &Point) -> Result<()> {
        let plan = self.plan;
        let (key, store) = (plan.keys[p.key], &plan.key_stores[p.store]);
        let suite = suite_for(plan.protocol, key);
        let prepared = self.prepare(p)?;
        let client = Client::with_groups(&suite, p.resumed, Some(p.group.openssl()))?;
        let (server_cpus, generator_cpus) = (&self.placed.server, &self.placed.generator);
        let placement_cpus = self.placed.placement.all_cpus();
        let mut todo = Vec::new();
        for variant in &plan.variants {
            if measured(self.session, &self.labels(p, variant)) {
                self.session.progress.skip(1);
            } else {
                todo.push(variant);
            }
        }
        let point_of = super::sweep::PointOf {
            suite: &suite,
            size: plan.size,
            cores: plan.cores,
            cpus: &placement_cpus,
        };
        let mut group_slots = Vec::new();
        for (k, variant) in todo.into_iter().enumerate() {
            interrupt::check()?;
            let (_, workspace, key_source) = &self.prepared[prepared];
            let spec = ServerSpec {
                nginx: self.binary,
                info: self.info,
                workspace,
                suite,
                cpus: server_cpus.clone(),
                variant,
                ia32cap: self.variants.mask(variant),
                // One port per variant: they run side by side.
                port: plan.port.map(|port| port + k as u16),
                resumption: p.resumed,
                groups: Some(p.group.openssl().into()),
                key_source: key_source.clone(),
                plain: None,
                also_listen: Vec::new(),
            };
            let (server, record, target) = super::start_nginx(
                self.session,
                &spec,
                &client,
                self.variants,
                super::SlotRecord {
                    key,
                    store,
                    cores: plan.cores,
                    generator_cpus: generator_cpus.clone(),
                    placement: &self.placed.placement,
                },
                plan.size,
            )?;
            let mut slot = super::sweep::GroupSlot::new(
                (variant, super::sweep::Transport::Tls),
                None,
                store,
                server,
                record,
                target,
            );
            slot.search(&plan.sweep, &client, generator_cpus, &mut None, 1, point_of)?;
            group_slots.push(slot);
        }
        let (done, ran) = super::sweep::run_group(
            &plan.sweep,
            &client,
            generator_cpus,
            &mut None,
            group_slots,
            point_of,
        );
        for (variant, record, point) in done {
            if let Some(point) = point {
                let point = handshake_point(&self.labels(p, variant), point);
                record_point(self.session, self.config, record, point)?;
            }
        }
        ran
    }
}

struct PointLabels<'a> {
    key: KeyType,
    group: Group,
    resumed: bool,
    store: &'static str,
    variant: &'a Variant,
}

fn measured(session: &Session, l: &PointLabels<'_>) -> bool {
    session
        .record
        .tls
        .as_ref()
        .and_then(|t| t.handshake.as_ref())
        .is_some_and(|h| {
            h.point(
                l.key.name(),
                l.group.openssl(),
                session_name(l.resumed),
                l.store,
                &l.variant.name(),
            )
            .is_some()
        })
}

/// The handshake figures of a measured sweep point. Pure.
fn handshake_point(
    l: &PointLabels<'_>,
    point: cipherbench_model::tls::SweepPoint,
) -> HandshakePoint {
    let per_core = point.server_cpu.as_ref().and_then(|c| {
        let used = c.total * point.cores as f64;
        (used > 0.0).then(|| point.requests_per_sec / used)
    });
    let resumed_fraction = if point.requests_ok_total > 0 {
        point.requests_resumed_total as f64 / point.requests_ok_total as f64
    } else {
        0.0
    };
    HandshakePoint {
        key: l.key.name().into(),
        group: l.group.openssl().into(),
        session: session_name(l.resumed).into(),
        key_store: l.store.into(),
        handshakes_per_sec: point.requests_per_sec,
        handshakes_per_core_sec: per_core,
        resumed_fraction,
        point,
    }
}

/// A "resumed" point must have resumed most handshakes (each generator thread's first
/// connections, opened before any session exists, cannot), a "full" one none:
/// otherwise the figure is not what its label says.
pub const RESUMED_AT_LEAST: f64 = 0.75;

fn record_point(
    session: &mut Session,
    config: &HandshakeConfig,
    server: ServerRecord,
    point: HandshakePoint,
) -> Result<()> {
    let label = format!(
        "{} {} {} {} {}: {:.0} handshakes/s{}, {:.0} % resumed at {} client(s), nginx {}{}",
        point.key,
        point.group,
        point.session,
        point.key_store,
        point.point.variant,
        point.handshakes_per_sec,
        point
            .handshakes_per_core_sec
            .map(|c| format!(" ({c:.0} per core)"))
            .unwrap_or_default(),
        point.resumed_fraction * 100.0,
        point.point.concurrency,
        point
            .point
            .server_cpu
            .as_ref()
            .map(|c| format!("{:.0} %", c.total * 100.0))
            .unwrap_or_else(|| "-".into()),
        if point.point.valid { "" } else { " [INVALID]" }
    );
    session.progress.point(&label);
    let what = format!(
        "{} {} {} {} {}",
        point.key, point.group, point.session, point.key_store, point.point.variant
    );
    let wrong_resumption = match point.session.as_str() {
        "resumed" => point.resumed_fraction < RESUMED_AT_LEAST,
        _ => point.point.requests_resumed_total > 0,
    };
    if wrong_resumption {
        session.record.warn(
            "tls",
            "resumption_mismatch",
            format!(
                "{what}: {:.0} % of the handshakes resumed a session: the point does not measure what its label says",
                point.resumed_fraction * 100.0
            ),
        );
    }
    // Both sides offered the one group, so another one read back means the label
    // is wrong (a library that maps names differently, say): said, not assumed.
    if let Some(read) = &point.point.negotiated_group {
        if !Group(point.group.clone()).is(read) {
            session.record.warn(
                "tls",
                "group_mismatch",
                format!(
                    "{what}: the client negotiated {read}, not {}: the point does not measure what its label says",
                    point.group
                ),
            );
        }
    }
    if let Some(reason) = &point.point.invalid_reason {
        session.record.warn(
            "tls",
            "handshake_point_invalid",
            format!("{what}: {reason}"),
        );
    }
    super::warn_server(session, &what, &server);
    let tls = super::results(session);
    super::record_server(tls, server);
    tls.handshake
        .get_or_insert_with(|| HandshakeResults {
            config: config.clone(),
            points: Vec::new(),
        })
        .points
        .push(point);
    session.save()
}

/// Parses a `--sessions` list: `full`, `resumed`.
pub fn parse_sessions(text: &str) -> Result<Vec<bool>> {
    let mut out = Vec::new();
    for t in text.split(',') {
        let r = match t.trim() {
            "full" => false,
            "resumed" => true,
            t => {
                return Err(anyhow!(
                    "--sessions: unknown '{t}': use full, resumed or both"
                ))
            }
        };
        if !out.contains(&r) {
            out.push(r);
        }
    }
    Ok(out)
}

/// The default window of a handshake point: short, as handshakes are small and many.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(4);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_and_protocol_has_a_suite_the_key_fits() {
        for p in [Protocol::Tls12, Protocol::Tls13] {
            for k in [KeyType::Rsa2048, KeyType::EcdsaP256, KeyType::MlDsa65] {
                if p == Protocol::Tls12 && !k.in_tls12() {
                    continue;
                }
                let s = suite_for(p, k);
                assert_eq!(s.protocol, p);
                s.check_key(k).unwrap();
            }
        }
    }

    #[test]
    fn groups_and_sessions_parse_and_refuse_in_one_line() {
        assert_eq!(Group::parse("x25519").unwrap().openssl(), "X25519");
        assert_eq!(Group::parse("prime256v1").unwrap().openssl(), "P-256");
        assert_eq!(
            Group::parse("x25519mlkem768").unwrap().openssl(),
            "X25519MLKEM768"
        );
        assert!(Group::parse("X25519MLKEM768").unwrap().post_quantum());
        assert!(!Group::parse("p-384").unwrap().post_quantum());
        // A name cipherbench does not know is the library's to judge.
        assert_eq!(
            Group::parse("brainpoolP256r1tls13").unwrap().openssl(),
            "brainpoolP256r1tls13"
        );
        assert!(Group::parse("p 256")
            .unwrap_err()
            .to_string()
            .contains("not a group name"));
        assert!(Group::parse("").is_err());
        // The names OpenSSL reads back are the same groups.
        assert!(Group::parse("p-256").unwrap().is("secp256r1"));
        assert!(Group::parse("X25519").unwrap().is("x25519"));
        assert!(!Group::parse("X25519").unwrap().is("X25519MLKEM768"));
        assert_eq!(
            parse_sessions("full,resumed,full").unwrap(),
            vec![false, true]
        );
        assert!(parse_sessions("half").is_err());
    }

    /// Against the linked library: X25519 and P-256 are offered by every OpenSSL 3;
    /// a group the library lacks is refused naming what it has; ML-KEM needs TLS 1.3.
    #[test]
    fn groups_are_checked_against_the_linked_library() {
        let here = Group::offered_here();
        assert!(
            here.contains(&"X25519") && here.contains(&"P-256"),
            "{here:?}"
        );
        Group::parse("x25519")
            .unwrap()
            .check_offered(Protocol::Tls12)
            .unwrap();
        let made_up = Group::parse("NoSuchGroup1").unwrap();
        let e = made_up
            .check_offered(Protocol::Tls13)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("not offered by") && e.contains("it offers X25519"),
            "{e}"
        );
        let hybrid = Group::parse("X25519MLKEM768").unwrap();
        let e = hybrid
            .check_offered(Protocol::Tls12)
            .unwrap_err()
            .to_string();
        if here.contains(&"X25519MLKEM768") {
            assert!(e.contains("TLS 1.3 group"), "{e}");
            hybrid.check_offered(Protocol::Tls13).unwrap();
        } else {
            assert!(e.contains("need OpenSSL 3.5 or later"), "{e}");
        }
    }
}
