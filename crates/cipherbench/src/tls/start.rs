//! An nginx of a point started for a layer: its CPUs assigned and applied, its key
//! from its key store, its variant's environment checked on its own processes, the
//! libraries it loaded noted, and its server record.

use super::*;

/// Server and generator CPUs from the topology planner: nginx's workers on whole
/// cores of their own (one worker per core), the generator on other whole cores, or
/// on those asked for; where the machine cannot keep them apart the placement says
/// so (`cipherbench_model::topology::place_tls`).
pub(crate) fn assign_cpus(
    topology: &cipherbench_model::topology::Topology,
    cores: usize,
    generator: Option<&[usize]>,
) -> Result<cipherbench_model::topology::TlsCpus> {
    cipherbench_model::topology::place_tls(topology, cores, generator).map_err(|e| anyhow!(e))
}

/// Applies nginx's side of a placement to a started server: its master (and so
/// anything it forks later) to the workers' CPUs, each worker already pinned to its
/// own by `worker_cpu_affinity`; then checks by effect that every process is on the
/// CPUs the placement gives nginx. Returns what did not hold, one sentence.
pub(crate) fn apply_placement(server: &nginx::Server, cpus: &[usize]) -> Option<String> {
    if let Err(e) = crate::host::set_process_affinity(server.pid(), cpus) {
        return Some(format!(
            "could not restrict nginx's master (pid {}) to CPUs {}: {e}",
            server.pid(),
            cipherbench_model::topology::format_cpu_list(cpus)
        ));
    }
    let mut pids = vec![server.pid()];
    pids.extend_from_slice(server.workers());
    for pid in pids {
        match crate::host::process_affinity(pid) {
            Ok(set) if set.iter().all(|c| cpus.contains(c)) => {}
            Ok(set) => {
                return Some(format!(
                    "nginx process {pid} may run on CPUs {}, outside its placement {}",
                    cipherbench_model::topology::format_cpu_list(&set),
                    cipherbench_model::topology::format_cpu_list(cpus)
                ))
            }
            Err(e) => return Some(format!("reading nginx process {pid}'s CPUs: {e}")),
        }
    }
    None
}

/// The placement's warnings that change figures, once per run (every point of a
/// sweep shares them): a placement that is not disjoint, and no core left for the
/// rest of the machine. What only qualifies a placement (virtual CPUs, siblings not
/// reported) stays in the placement's record.
pub(crate) fn warn_placement(
    session: &mut Session,
    placement: &cipherbench_model::topology::Placement,
) {
    let matters = |w: &&String| {
        !placement.disjoint && !w.starts_with("the CPUs are virtual")
            || w.starts_with("no whole core left")
    };
    for w in placement.warnings.iter().filter(matters) {
        session.record.warn(
            "tls",
            if placement.disjoint {
                "placement"
            } else {
                "placement_shared"
            },
            format!(
                "nginx on CPUs {}, load generator on CPUs {}: {w}",
                cipherbench_model::topology::format_cpu_list(
                    placement.cpus_of("nginx").unwrap_or_default()
                ),
                cipherbench_model::topology::format_cpu_list(
                    placement.cpus_of("generator").unwrap_or_default()
                )
            ),
        );
    }
}

/// What run.json keeps of a point's nginx beyond what its [`nginx::ServerSpec`] says.
pub(crate) struct SlotRecord<'a> {
    /// The server key's type.
    pub key: KeyType,
    /// Where the key is.
    pub store: &'a keystore::KeyStore,
    /// Cores under test.
    pub cores: usize,
    /// The generator's CPUs as recorded (empty when agents make the load).
    pub generator_cpus: Vec<usize>,
    /// The placement planned for the point.
    pub placement: &'a cipherbench_model::topology::Placement,
}

/// Starts the nginx of one variant x key-store slot of a point (sweep, ramp and
/// handshake alike): restricts its master to the workers' CPUs (a failure is a
/// placement warning), notes the libraries it mapped, and gives the record run.json
/// keeps of it (the variant judged on it, the key store checked by effect) and the
/// target that fetches the `size` file from it.
pub(crate) fn start_nginx(
    session: &mut Session,
    spec: &nginx::ServerSpec<'_>,
    client: &engine::Client,
    variants: &NginxVariants,
    slot: SlotRecord<'_>,
    size: u64,
) -> Result<(
    nginx::Server,
    cipherbench_model::tls::ServerRecord,
    engine::Target,
)> {
    let server = nginx::Server::start(spec, client)?;
    let mut placement = slot.placement.clone();
    if let Some(why) = apply_placement(&server, &spec.cpus) {
        placement.disjoint = false;
        placement.warnings.push(why);
    }
    warn_placement(session, &placement);
    note_libraries(session, spec.variant, &server);
    let record = cipherbench_model::tls::ServerRecord {
        kind: "nginx".into(),
        version: Some(spec.info.version.clone()),
        library: server_library(spec.info, spec.variant),
        suite: spec.suite.openssl.to_string(),
        key: slot.key.name().to_string(),
        key_store: slot.store.name().into(),
        key_store_check: keystore::check_served(&spec.key_source, &server),
        cores: slot.cores,
        server_cpus: spec.cpus.clone(),
        generator_cpus: slot.generator_cpus,
        variant: variants.record(spec.variant, &server, &spec.suite),
        config: server.config().to_string(),
        placement: Some(placement),
    };
    let target = engine::Target {
        addr: server.addr(),
        host: "127.0.0.1".into(),
        path: nginx::Workspace::url_path(size),
        expected_len: Some(size),
        content: Some(spec.workspace.content_key()),
    };
    Ok((server, record, target))
}

/// Records which library a started nginx's master and workers mapped (checked by
/// [`nginx::Server::start`]), and, once, the load generator's own: it runs in this
/// process, on the library `--openssl` names when it names one alone (cipherbench
/// started itself again under it, [`crate::library::run_under`]), else on the
/// system's.
pub(crate) fn note_libraries(session: &mut Session, variant: &Variant, server: &nginx::Server) {
    let env = &mut session.record.environment;
    let source = format!("/proc/<pid>/maps of {}", server.binary().display());
    for (part, loaded) in server.loaded() {
        crate::library::note(
            env,
            variant.library.part("tls", part, loaded, &source, true),
        );
    }
    let generator = if crate::library::runs_under(&variant.library) {
        variant.library.part(
            "tls",
            "load generator (cipherbench, started again under it)",
            &crate::library::this_process(),
            "its own report",
            true,
        )
    } else {
        crate::library::Library::system().part(
            "tls",
            "load generator (cipherbench, not swapped)",
            &crate::library::this_process(),
            "its own report",
            false,
        )
    };
    crate::library::note(env, generator);
}

/// The library nginx runs with under `variant`: nginx's own `-V` for the system's,
/// the version the library reported for a directory's.
pub(crate) fn server_library(info: &nginx::NginxInfo, variant: &Variant) -> Option<String> {
    if variant.library.is_system() {
        info.library.clone()
    } else {
        Some(variant.library.version())
    }
}

/// The key stores of a run, set up once in its workspace (a PKCS#11 token is made
/// and the key imported here), each with what nginx is given.
pub(crate) fn key_sources(
    stores: &[keystore::KeyStore],
    workspace: &nginx::Workspace,
) -> Result<Vec<(keystore::KeyStore, keystore::KeySource)>> {
    stores
        .iter()
        .map(|s| Ok((s.clone(), keystore::prepare(s, workspace)?)))
        .collect()
}

/// Warns when an nginx given a module's key did not show that it used the module
/// ([`keystore::check_served`]), and when its variant did not take effect for nginx.
pub(crate) fn warn_server(
    session: &mut Session,
    what: &str,
    server: &cipherbench_model::tls::ServerRecord,
) {
    if let Some(c) = server.key_store_check.as_ref().filter(|c| !c.served) {
        session.record.warn(
            "tls",
            "key_store_not_effective",
            format!("{what}: key store {}: {}", server.key_store, c.explanation),
        );
    }
    campaign::warn_not_effective(&mut session.record, "tls", &server.variant, "for nginx");
}

/// The variants of a sweep or a ramp, judged by effect once per command: nginx cannot
/// run the probes, so a `cipherbench __variant-probe` child with the environment each
/// nginx gets measures them, and every nginx started is checked to run under that
/// environment (its master's and workers' `OPENSSL_ia32cap`).
pub(crate) struct NginxVariants {
    life: campaign::Variants,
    records: std::collections::BTreeMap<String, cipherbench_model::variant::VariantRecord>,
}

impl NginxVariants {
    /// Measures accel's probes and each variant's with nginx's environment.
    pub(crate) fn judge(variants: &[Variant]) -> Result<NginxVariants> {
        let life = campaign::Variants::begin("tls", variants)?;
        let records = crate::variant::stand_in_records(variants, &life.baseline, "nginx");
        Ok(NginxVariants { life, records })
    }

    /// After a server's load: the provider's tally so far in this layer, in every
    /// server record of the variant (one tally per variant, all of nginx's workers).
    pub(crate) fn note_counter(session: &mut Session, variant: &Variant) {
        if variant.counter().is_none() {
            return;
        }
        for s in results(session)
            .servers
            .iter_mut()
            .filter(|s| s.variant.name == variant.name())
        {
            variant.note_counter(&mut s.variant);
        }
    }

    /// The `OPENSSL_ia32cap` nginx runs under for a variant.
    pub(crate) fn mask(&self, variant: &Variant) -> Option<String> {
        self.life.baseline.mask(variant)
    }

    /// The record of one running nginx: its stand-in's judgement (measured once per
    /// command), with the check of that nginx's own processes.
    /// A provider or engine variant is judged on the suite's cipher: the record
    /// keeps who served it, and a fallback there is a fallback of this server.
    pub(crate) fn record(
        &self,
        variant: &Variant,
        server: &nginx::Server,
        suite: &Suite,
    ) -> cipherbench_model::variant::VariantRecord {
        let Some(record) = self.records.get(&variant.name()) else {
            let known: Vec<_> = self.records.values().cloned().collect();
            return self.life.baseline.judge(variant, None, &known, None);
        };
        let mut pids = vec![server.pid()];
        pids.extend_from_slice(server.workers());
        let mask = self.mask(variant);
        let check =
            crate::variant::check_environ("nginx's master and workers", &pids, mask.as_deref());
        let mut record = crate::variant::with_check(record, check);
        if let Some(cipher) = suite.catalogue_cipher() {
            crate::variant::judge_layer_fallback(&mut record, &[cipher]);
        }
        record
    }
}
