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
use std::path::PathBuf;
use std::time::Duration;

/// A key-exchange group (RFC 8446 §4.2.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    /// X25519 (RFC 7748).
    X25519,
    /// NIST P-256 (secp256r1).
    P256,
}

impl Group {
    /// Parses `x25519` or `p-256` (`p256`, `secp256r1`, `prime256v1`).
    pub fn parse(text: &str) -> Result<Group> {
        match text.trim().to_ascii_lowercase().as_str() {
            "x25519" => Ok(Group::X25519),
            "p-256" | "p256" | "secp256r1" | "prime256v1" => Ok(Group::P256),
            t => bail!("--groups: unknown group '{t}': use x25519 or p-256"),
        }
    }

    /// As OpenSSL's groups list and nginx's `ssl_ecdh_curve` spell it.
    pub fn openssl(self) -> &'static str {
        match self {
            Group::X25519 => "X25519",
            Group::P256 => "P-256",
        }
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
        plan.sweep.estimate() * plan.total_points() as u32,
    );
    for &key in &plan.keys {
        suite_for(plan.protocol, key).check_offered()?;
    }
    let mut units = Vec::new();
    for k in 0..plan.keys.len() {
        for st in 0..plan.key_stores.len() {
            for &group in &plan.groups {
                for &resumed in &plan.sessions {
                    units.push(Point {
                        key: k,
                        store: st,
                        group,
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
            group: p.group,
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
            let mut slot = super::sweep::GroupSlot::new(variant, store, server, record, target);
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
            for k in [KeyType::Rsa2048, KeyType::EcdsaP256] {
                let s = suite_for(p, k);
                assert_eq!(s.protocol, p);
                s.check_key(k).unwrap();
            }
        }
    }

    #[test]
    fn groups_and_sessions_parse_and_refuse_in_one_line() {
        assert_eq!(Group::parse("X25519").unwrap(), Group::X25519);
        assert_eq!(Group::parse("prime256v1").unwrap(), Group::P256);
        assert!(Group::parse("ffdhe2048")
            .unwrap_err()
            .to_string()
            .contains("x25519 or p-256"));
        assert_eq!(
            parse_sessions("full,resumed,full").unwrap(),
            vec![false, true]
        );
        assert!(parse_sessions("half").is_err());
    }
}
