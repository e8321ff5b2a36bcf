//! A point's variant x key-store slots: each with its nginx up, searched in turn,
//! then measured together in rounds of the final window, taking turns.

use super::*;

/// What a group's points share: suite, size, cores, and the CPUs the point runs on
/// (nginx's and the generator's: its noise window's).
#[derive(Clone, Copy)]
pub(crate) struct PointOf<'b> {
    pub suite: &'b crate::tls::suite::Suite,
    pub size: u64,
    pub cores: usize,
    pub cpus: &'b [usize],
}

/// What a slot's nginx speaks: TLS (the point's suite), or plain HTTP with
/// `sendfile` on or off (the plain-HTTP ceiling, `--plain-http`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Transport {
    Tls,
    Plain { sendfile: bool },
}

impl Transport {
    /// The slot's name in the record: the variant's, or the plain point's.
    pub(crate) fn slot_name(self, variant: &crate::variant::Variant) -> String {
        match self {
            Transport::Tls => variant.name(),
            Transport::Plain { sendfile: true } => cipherbench_model::tls::PLAIN_SENDFILE.into(),
            Transport::Plain { sendfile: false } => cipherbench_model::tls::PLAIN_COPY.into(),
        }
    }

    /// nginx's `ServerSpec::plain`.
    pub(crate) fn plain(self) -> Option<bool> {
        match self {
            Transport::Tls => None,
            Transport::Plain { sendfile } => Some(sendfile),
        }
    }
}

/// A variant x key-store slot of a point (or a plain-HTTP slot beside them): its
/// nginx stays up while the point's slots take turns in the final window's rounds.
pub(crate) struct GroupSlot<'a> {
    variant: &'a crate::variant::Variant,
    variant_name: String,
    /// The slot's own client where it is not the point's (plain HTTP).
    client: Option<&'a Client>,
    store: &'a KeyStore,
    server: Server,
    record: ServerRecord,
    target: Target,
    searched: Option<Searched>,
    /// The rounds so far, merged.
    measured: Option<Measured>,
    rounds: Vec<WindowRound>,
}

impl<'a> GroupSlot<'a> {
    /// A slot whose nginx is up, not yet searched.
    pub(crate) fn new(
        (variant, transport): (&'a crate::variant::Variant, Transport),
        client: Option<&'a Client>,
        store: &'a KeyStore,
        server: Server,
        record: ServerRecord,
        target: Target,
    ) -> Self {
        GroupSlot {
            variant,
            variant_name: transport.slot_name(variant),
            client,
            store,
            server,
            record,
            target,
            searched: None,
            measured: None,
            rounds: Vec::new(),
        }
    }

    /// Searches the slot's concurrency from `start` ([`search_concurrency`]).
    pub(crate) fn search(
        &mut self,
        plan: &SweepPlan,
        client: &Client,
        generator_cpus: &[usize],
        fleet: &mut Option<Fleet>,
        start: usize,
        of: PointOf<'_>,
    ) -> Result<()> {
        let searched = search_concurrency(
            plan,
            self.client.unwrap_or(client),
            &self.target,
            generator_cpus,
            Some(&self.server),
            start,
            fleet,
            self.labels(of),
        )?;
        self.searched = Some(searched);
        Ok(())
    }

    pub(super) fn labels<'b>(&'b self, of: PointOf<'b>) -> Labels<'b> {
        Labels {
            suite: of.suite.openssl,
            protocol: of.suite.protocol.as_str(),
            size: of.size,
            cores: of.cores,
            variant: &self.variant_name,
            key_store: self.store.name(),
            cpus: of.cpus,
        }
    }
}

/// Measures a group's searched slots in rounds ([`measure_rounds`]; one window
/// where the group has one slot), stops their nginx, and gives each slot's
/// variant, server record and point (None for a slot cut short before its first
/// round), with whether every round ran: what was measured is kept also when a
/// round was cut short (Ctrl-C), such a point having fewer rounds than the others.
#[allow(clippy::type_complexity)]
pub(crate) fn run_group<'a>(
    plan: &SweepPlan,
    client: &Client,
    generator_cpus: &[usize],
    fleet: &mut Option<Fleet>,
    mut group: Vec<GroupSlot<'a>>,
    of: PointOf<'_>,
) -> (
    Vec<(
        &'a crate::variant::Variant,
        ServerRecord,
        Option<SweepPoint>,
    )>,
    Result<()>,
) {
    let rounds = if group.len() > 1 {
        plan.rounds.max(1)
    } else {
        1
    };
    let (group_id, measured) =
        measure_rounds(plan, client, generator_cpus, fleet, &mut group, rounds, of);
    let done = group
        .into_iter()
        .map(|slot| {
            let labels = Labels {
                suite: of.suite.openssl,
                protocol: of.suite.protocol.as_str(),
                size: of.size,
                cores: of.cores,
                variant: &slot.variant_name,
                key_store: slot.store.name(),
                cpus: of.cpus,
            };
            let point = match (slot.searched, slot.measured) {
                (Some(searched), Some(m)) => {
                    let mut point = finish(plan, labels, searched, m);
                    if slot.rounds.len() > 1 {
                        point.interleave_group = group_id;
                        point.rounds = slot.rounds;
                    }
                    Some(point)
                }
                _ => None,
            };
            slot.server.stop();
            (slot.variant, slot.record, point)
        })
        .collect();
    (done, measured)
}

/// The final window of a group's slots, cut into `rounds` rounds of
/// `plan.window / rounds` each, the slots taking turns (A B, B A, A B: the
/// interleaving schedule), each slot's rounds merged into its `measured` and listed
/// in its `rounds`. The first round of each slot may step its concurrency down as
/// the single final window does; later rounds keep what the first kept. Returns the
/// group's id (the first round's wall-clock start) and whether every round ran; on
/// an error (Ctrl-C) the rounds measured so far stay in the slots.
pub(super) fn measure_rounds(
    plan: &SweepPlan,
    client: &Client,
    generator_cpus: &[usize],
    fleet: &mut Option<Fleet>,
    group: &mut [GroupSlot<'_>],
    rounds: usize,
    of: PointOf<'_>,
) -> (Option<u64>, Result<()>) {
    let window = (plan.window / rounds as u32).max(Duration::from_millis(1));
    let group_id = Some(crate::agent::unix_ns());
    let order = cipherbench_model::interleave::schedule(
        1,
        group.len(),
        rounds,
        cipherbench_model::interleave::Order::PointByPoint,
    );
    for (sequence, turn) in order.iter().enumerate() {
        if let Err(e) = interrupt::check() {
            return (group_id, Err(e.into()));
        }
        let slot = &mut group[turn.variant];
        let Some(mut searched) = slot.searched.take() else {
            continue;
        };
        let m = final_window(
            plan,
            slot.client.unwrap_or(client),
            &slot.target,
            generator_cpus,
            Some(&slot.server),
            fleet,
            &mut searched,
            window,
            turn.round == 0,
            slot.labels(of),
        );
        slot.searched = Some(searched);
        let m = match m {
            Ok(m) => m,
            Err(e) => return (group_id, Err(e)),
        };
        slot.rounds.push(WindowRound {
            round: turn.round,
            sequence,
            window_ns: m.report.window.as_nanos() as u64,
            throughput_bytes_per_sec: m.report.throughput_bytes_per_sec(),
            requests: m.report.ok,
            max_first_byte_ns: m.report.max_first_byte.as_nanos() as u64,
            server_cpu: m.server_cpu.as_ref().map(|c| c.total),
        });
        let merged = match slot.measured.take() {
            None => Ok(m),
            Some(mut acc) => acc.absorb(m).map(|()| acc),
        };
        match merged {
            Ok(acc) => slot.measured = Some(acc),
            Err(e) => return (group_id, Err(e)),
        }
    }
    (group_id, Ok(()))
}
