//! The lab a tunnel is measured in: the prerequisites, the namespaces' topology
//! with its iperf3 server, and the iperf3 client every stack measures with.

use super::*;

/// Refuses to start where the layer cannot run, saying why.
pub fn check_prerequisites() -> Result<()> {
    if !crate::host::is_root() {
        bail!("the tunnel layer needs root (network namespaces, veth and TUN devices); run cipherbench as root or with sudo");
    }
    if !std::path::Path::new("/dev/net/tun").exists() {
        bail!("/dev/net/tun is missing: this kernel or container has no TUN support (modprobe tun, or give the container the device)");
    }
    for (program, flag) in [("ip", "-V"), ("tc", "-V"), ("iperf3", "--version")] {
        crate::supervisor::Spawn::new(program)
            .args([flag])
            .output(Duration::from_secs(5))
            .with_context(|| format!("the tunnel layer needs {program}"))?;
    }
    Ok(())
}

/// The topology with its iperf3 server running: what [`run`] measures in, and what
/// the root-only tests drive directly. Dropping it stops the server and removes the
/// topology.
pub struct Lab {
    // Field order is drop order: the server goes before its namespace.
    server: crate::supervisor::Child,
    topology: Topology,
}

impl Lab {
    /// Checks the prerequisites, builds a fresh topology and starts the server.
    pub fn start(options: &TopologyOptions) -> Result<Lab> {
        check_prerequisites()?;
        let topology = Topology::build(Names::new()?, options)?;
        let names = topology.names();
        let server =
            iperf::start_server(&names.receiver_ns, &names.dir.join("iperf3-server.json"))?;
        Ok(Lab { server, topology })
    }

    /// The iperf3 server's pid (`ip netns exec` becomes iperf3 in place).
    pub fn server_pid(&self) -> u32 {
        self.server.pid()
    }

    /// The names of its objects.
    pub fn names(&self) -> &Names {
        self.topology.names()
    }

    /// An iperf3 client run from the sender's namespace to `server`.
    pub fn client(&self, server: &str, protocol: Protocol, seconds: u64) -> iperf::ClientRun {
        iperf::ClientRun {
            netns: self.names().sender_ns.clone(),
            server: server.to_string(),
            protocol,
            seconds,
            omit_seconds: 0,
            // The seed's datagram; TCP writes iperf3's default (TunnelPlan::tcp_length).
            length_bytes: (protocol == Protocol::Udp).then_some(1220),
            rate_bits_per_sec: None,
            window_bytes: None,
            affinity: None,
            parallel: 1,
        }
    }

    /// Stops the server and removes the topology, reporting failures.
    pub fn stop(self) -> Result<()> {
        let Lab {
            mut server,
            topology,
        } = self;
        server.stop();
        topology.teardown()
    }
}

/// The iperf3 client every stack measures with: the plan's length for the protocol, UDP window,
/// `-O` for TCP and `-P`, from the sender's namespace to `server`.
pub(crate) fn iperf_client(
    plan: &TunnelPlan,
    lab: &Lab,
    affinity: Option<(usize, usize)>,
    server: &str,
    protocol: Protocol,
    seconds: u64,
    rate: Option<f64>,
) -> iperf::ClientRun {
    iperf::ClientRun {
        omit_seconds: if protocol == Protocol::Tcp {
            plan.omit_seconds
        } else {
            0
        },
        length_bytes: plan.length_for(protocol),
        rate_bits_per_sec: rate,
        window_bytes: if protocol == Protocol::Udp {
            plan.udp_window
        } else {
            None
        },
        affinity,
        parallel: plan.iperf3_parallel,
        ..lab.client(server, protocol, seconds)
    }
}
