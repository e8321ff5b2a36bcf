//! The gateway's stats file: what a gateway has done so far, written atomically (a
//! temporary file, then rename) once a second, on request (SIGUSR1) and at exit, and
//! read by the runner before and after each iperf3 run. Counters only ever grow, so
//! the runner works with differences between two snapshots.
//!
//! This module owns the format and the arithmetic on it; the gateway fills it and the
//! runner reads it.

use cipherbench_esp::{Accounting, Counters};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// One thread's CPU time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadCpu {
    /// `tun->udp` (seal and send) or `udp->tun` (receive and open); with several
    /// gateway threads also the pipelines' `seal/I`, `seal-out`, `open/I` and
    /// `open-out` (see [`super::parallel`]).
    pub name: String,
    /// CPU time so far.
    pub cpu_ns: u64,
    /// The core it is pinned to, if any (None for a thread allowed on a set).
    pub pinned_cpu: Option<usize>,
}

/// What the TUN-to-UDP direction counted (beyond the outbound SA's own counters).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxCounters {
    /// Reads from the TUN device.
    pub tun_reads: u64,
    /// Packets handed to `seal` (after segmentation of offloaded super-packets).
    pub inner_packets: u64,
    /// TUN reads that were offloaded super-packets split into several.
    pub segmented_reads: u64,
    /// Offloaded packets that could not be split (malformed or unsupported).
    pub offload_errors: u64,
    /// Inner packets larger than the tunnel can carry (never sealed).
    pub oversize: u64,
    /// ESP-in-UDP datagrams sent.
    pub udp_packets: u64,
    /// Their bytes (UDP payload: the ESP packets).
    pub udp_bytes: u64,
    /// `sendmmsg` calls.
    pub send_calls: u64,
    /// Datagrams the kernel refused to send.
    pub send_errors: u64,
    /// Datagrams sent inside a GSO message with others (UDP segmentation offload).
    #[serde(default)]
    pub gso_datagrams: u64,
}

/// What the UDP-to-TUN direction counted (beyond the inbound SAs' own counters).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RxCounters {
    /// UDP datagrams read from the socket (ESP or not): the I/O shell's own count,
    /// which the inbound accounting's `received` must equal.
    pub udp_packets: u64,
    /// Their bytes (UDP payload).
    pub udp_bytes: u64,
    /// `recvmmsg` calls that returned datagrams.
    pub receive_calls: u64,
    /// Inner packets written to the TUN device (each possibly several coalesced).
    pub tun_writes: u64,
    /// Inner packets that were coalesced into an earlier one instead of written.
    pub coalesced: u64,
    /// Datagrams that arrived in one buffer with others (`UDP_GRO`).
    #[serde(default)]
    pub gro_datagrams: u64,
    /// Writes the TUN device refused.
    pub tun_write_errors: u64,
}

impl TxCounters {
    /// Adds another thread's counts (a pipeline's jobs, summed by its consumer).
    pub fn add(&mut self, o: &TxCounters) {
        self.tun_reads += o.tun_reads;
        self.inner_packets += o.inner_packets;
        self.segmented_reads += o.segmented_reads;
        self.offload_errors += o.offload_errors;
        self.oversize += o.oversize;
        self.udp_packets += o.udp_packets;
        self.udp_bytes += o.udp_bytes;
        self.send_calls += o.send_calls;
        self.send_errors += o.send_errors;
        self.gso_datagrams += o.gso_datagrams;
    }
}

impl RxCounters {
    /// Adds another thread's counts (a pipeline's workers count the datagrams they
    /// opened, its consumer the TUN writes).
    pub fn add(&mut self, o: &RxCounters) {
        self.udp_packets += o.udp_packets;
        self.udp_bytes += o.udp_bytes;
        self.receive_calls += o.receive_calls;
        self.tun_writes += o.tun_writes;
        self.coalesced += o.coalesced;
        self.gro_datagrams += o.gro_datagrams;
        self.tun_write_errors += o.tun_write_errors;
    }
}

/// A snapshot of one gateway.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GatewayStats {
    /// Increases with every write.
    pub snapshot: u64,
    /// CLOCK_MONOTONIC when taken.
    pub monotonic_ns: u64,
    /// The transform.
    pub transform: String,
    /// What this process's OpenSSL uses (`OPENSSL_info(CPU_SETTINGS)`): the evidence
    /// that the variant took effect in the gateway.
    pub cpu_settings: String,
    /// The outbound SA's counters (sealed).
    pub outbound: Counters,
    /// Every datagram the UDP-to-TUN path handed to the ESP core, by outcome: opened,
    /// dropped by reason (before an SA was found and by the SAs), NAT keepalive,
    /// non-ESP (IKE).
    pub inbound: Accounting,
    /// TUN-to-UDP.
    pub tx: TxCounters,
    /// UDP-to-TUN.
    pub rx: RxCounters,
    /// Datagrams the kernel dropped because the gateway's UDP receive buffer was full
    /// (`/proc/net/udp`'s drops column for our socket): the receiving gateway not
    /// keeping up.
    pub socket_drops: u64,
    /// CPU time of the whole process.
    pub process_cpu_ns: u64,
    /// Per worker thread.
    pub threads: Vec<ThreadCpu>,
    /// On a gateway's one core ([`super::pump::run_both`]): when its `tun<->udp`
    /// thread left the socket's side to its spare for good, if it has. Absent from
    /// the snapshots of gateways (and peer agents) from before it was recorded.
    #[serde(default)]
    pub split: Option<ThreadSplit>,
}

/// The one-core gateway's `tun<->udp` thread split into two threads.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ThreadSplit {
    /// CLOCK_MONOTONIC when it split.
    pub monotonic_ns: u64,
    /// The share of the judge's last period (200 ms) it had waited for its core,
    /// over [`super::pump::SPLIT_WAIT`].
    pub wait_share: f64,
}

impl GatewayStats {
    /// Reads a stats file.
    pub fn read(path: &Path) -> anyhow::Result<GatewayStats> {
        let text = std::fs::read_to_string(path)?;
        Ok(serde_json::from_str(&text)?)
    }

    /// Writes the stats atomically (temp file and rename), so a reader never sees
    /// half a file.
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        let tmp = path.with_extension("tmp");
        std::fs::write(
            &tmp,
            serde_json::to_vec(self).map_err(std::io::Error::other)?,
        )?;
        std::fs::rename(&tmp, path)
    }
}

/// The drops column of our socket's line in `/proc/net/udp` (found by inode).
pub fn socket_drops(proc_net_udp: &str, inode: u64) -> Option<u64> {
    proc_net_udp.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // sl local rem st tx:rx tr:when retrnsmt uid timeout inode ref pointer drops
        if fields.get(9)?.parse::<u64>().ok()? == inode {
            fields.get(12)?.parse().ok()
        } else {
            None
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_our_socket_drops_by_inode() {
        let text = "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n\
  123: 00000000:1194 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 44321 2 0000000000000000 17\n\
  124: 00000000:14E9 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 55555 2 0000000000000000 0\n";
        assert_eq!(socket_drops(text, 44321), Some(17));
        assert_eq!(socket_drops(text, 55555), Some(0));
        assert_eq!(socket_drops(text, 1), None);
        assert_eq!(socket_drops("", 1), None);
    }
}
