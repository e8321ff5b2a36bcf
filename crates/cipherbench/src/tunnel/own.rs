//! The own stack: cipherbench's gateways, a fresh pair per variant change, each
//! transform a campaign unit measured in interleaved rounds; each variant judged by
//! the probes its gateway measured.

use super::*;

/// The own stack's units: a transform with its variants, measured in interleaved
/// rounds through fresh gateway pairs ([`rounds::interleaved`]). A half-measured
/// transform is measured again whole: its variants' rounds belong together.
impl campaign::Units for OwnStand<'_> {
    type Unit = (Transform, Vec<Variant>);

    fn done(&self, (transform, variants): &Self::Unit) -> bool {
        transform_done(self.plan, self.results.points.iter(), *transform, variants)
    }

    fn skip(&mut self, (_, variants): &Self::Unit) {
        self.session
            .progress
            .skip(variants.len() * self.plan.protocols.len());
    }

    fn forget(&mut self, (transform, _): &Self::Unit) {
        self.results
            .points
            .retain(|p| p.transform != transform.name());
    }

    fn measure(&mut self, (transform, variants): &Self::Unit) -> Result<()> {
        self.transform = *transform;
        self.variants.clone_from(variants);
        let (plan, underlay_tcp) = (self.plan, self.underlay_tcp);
        let mut sequence = self.sequence;
        let outcome = rounds::interleaved(plan, variants.len(), self, underlay_tcp, &mut sequence);
        self.sequence = sequence;
        outcome
    }
}

/// Whether `points` hold a point of every one of `variants` and every protocol of
/// the plan for `transform`: a transform a resumed run skips.
pub(crate) fn transform_done<'p>(
    plan: &TunnelPlan,
    points: impl Iterator<Item = &'p TunnelPoint> + Clone,
    transform: Transform,
    variants: &[Variant],
) -> bool {
    variants.iter().all(|v| {
        plan.protocols.iter().all(|protocol| {
            points.clone().any(|p| {
                p.transform == transform.name() && p.variant == v.name() && p.protocol == *protocol
            })
        })
    })
}

/// One transform through cipherbench's own gateways, for [`rounds::interleaved`]:
/// a fresh pair per variant change, each with a key label of its own.
pub(crate) struct OwnStand<'a> {
    pub(super) plan: &'a TunnelPlan,
    pub(super) lab: &'a Lab,
    pub(super) session: &'a mut Session,
    pub(super) results: &'a mut TunnelResults,
    pub(super) baseline: &'a Baseline,
    pub(super) program: &'a std::path::Path,
    pub(super) secret: &'a [u8],
    /// Pairs started so far in the layer: part of each start's key label.
    pub(super) starts: usize,
    pub(super) noise_cpus: &'a [usize],
    pub(super) underlay_tcp: Option<f64>,
    /// The transform being measured, and its variants.
    pub(super) transform: Transform,
    pub(super) variants: Vec<Variant>,
    /// The next run's place in the measuring order.
    pub(super) sequence: usize,
}

/// The sender's and the receiver's variant when `variant` runs on `side`: the
/// other side runs accel on the same library (the library is the whole tunnel's,
/// the variant one side's).
pub(crate) fn side_variants(side: VariantSide, variant: &Variant) -> (Variant, Variant) {
    match side {
        VariantSide::Both => (variant.clone(), variant.clone()),
        VariantSide::Sender => (variant.clone(), variant.its_accel()),
        VariantSide::Receiver => (variant.its_accel(), variant.clone()),
    }
}

impl rounds::Stand for OwnStand<'_> {
    type Pair = GatewayPair;
    type Run = TunnelRun;

    fn start(&mut self, v: usize) -> Result<GatewayPair> {
        let (plan, names) = (self.plan, self.lab.names());
        let variant = &self.variants[v];
        let (sender_variant, receiver_variant) = &side_variants(plan.variant_side, variant);
        let pinning = &self.results.config.pinning;
        let options = PairOptions {
            program: self.program.to_path_buf(),
            transform: self.transform,
            secret: self.secret.to_vec(),
            // Unique per start: no two starts key an SA alike.
            label: format!(
                "{}/{}/{}/{}",
                names.run,
                self.transform.name(),
                variant.name(),
                self.starts
            ),
            batch: plan.batch,
            offload: plan.offload,
            udp_offload: plan.udp_offload,
            mtu: plan.mtu as usize,
            sender_cpus: pinning.sender_gateway.clone(),
            receiver_cpus: pinning.receiver_gateway.clone(),
            threads: plan.gateway_threads,
            replay_window: gateway::REPLAY_WINDOW,
            sender_peer: None,
            esp_keylog: plan.esp_keylog.clone(),
        };
        self.starts += 1;
        let baseline = self.baseline;
        let pair = GatewayPair::start(names, &options, sender_variant, receiver_variant, |v| {
            baseline.mask(v)
        })?;
        for (side, gateway) in [("sender", &pair.sender), ("receiver", &pair.receiver)] {
            crate::library::note(
                &mut self.session.record.environment,
                gateway.variant.library.part(
                    "tunnel",
                    &format!("ESP gateway ({side})"),
                    &gateway.loaded,
                    "its own report",
                    true,
                ),
            );
            note_variant(&mut self.results.variants, gateway, baseline, self.session);
        }
        Ok(pair)
    }

    fn stop(&mut self, pair: GatewayPair) -> Result<()> {
        pair.stop().map(|_| ())
    }

    fn run(
        &mut self,
        pair: &mut GatewayPair,
        protocol: Protocol,
        seconds: u64,
        rate: Option<f64>,
    ) -> Result<TunnelRun> {
        let pinning = &self.results.config.pinning;
        let affinity = pinning.iperf3_client.zip(pinning.iperf3_server);
        let client = iperf_client(
            self.plan,
            self.lab,
            affinity,
            topology::INNER_RECEIVER,
            protocol,
            seconds,
            rate,
        );
        measured_run_on(
            &client,
            pair,
            self.lab.names(),
            self.plan.underlay_rate.as_ref().map(|r| r.1),
            self.noise_cpus,
        )
    }

    fn point(
        &mut self,
        v: usize,
        protocol: Protocol,
        search: Option<cipherbench_model::tunnel::UdpSearch>,
        runs: Vec<TunnelRun>,
    ) -> Result<()> {
        let point = tunnel_point(
            self.transform,
            &self.variants[v],
            self.plan.variant_side,
            protocol,
            search,
            runs,
            self.underlay_tcp,
        );
        record_point(self.session, self.results, point, None)
    }
}

/// The catalogue cipher an ESP transform encrypts with: what a provider variant is
/// judged on in the tunnel layer.
fn transform_cipher(t: Transform) -> Option<&'static str> {
    match t {
        Transform::Null => None,
        Transform::Aes256Sha256 => Some("aes-256-cbc-hmac-sha256"),
        Transform::Aes128Gcm => Some("aes-128-gcm"),
        Transform::Aes256Gcm => Some("aes-256-gcm"),
        Transform::ChaCha20Poly1305 => Some("chacha20-poly1305"),
    }
}

/// After a stack's work: each provider variant's tally over it, and the variant
/// judged on the transforms' own ciphers (a fallback on all of them: not taken).
pub(crate) fn note_implementations(
    life: &campaign::Variants,
    plan: &TunnelPlan,
    records: &mut [VariantRecord],
) {
    let ciphers: Vec<&str> = plan
        .transforms
        .iter()
        .filter_map(|&t| transform_cipher(t))
        .collect();
    life.end(records, &ciphers);
}

/// Judges a gateway's variant by the probes it measured, the first time the variant
/// runs (every gateway of a variant loads the same library under the same
/// environment).
fn note_variant(
    known: &mut Vec<VariantRecord>,
    gateway: &Gateway,
    baseline: &Baseline,
    session: &mut Session,
) {
    let variant = &gateway.variant;
    if known.iter().any(|v| v.name == variant.name()) {
        return;
    }
    let mut record = baseline.judge(variant, gateway.probes.as_ref(), known, None);
    if gateway.probes.is_none() {
        record.cpu_settings = gateway.cpu_settings.clone();
    }
    campaign::warn_not_effective(&mut session.record, "tunnel", &record, "in the gateway");
    known.push(record);
}
