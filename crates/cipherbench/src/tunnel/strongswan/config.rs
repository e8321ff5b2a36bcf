//! What cipherbench tells strongSwan: the crypto backends (charon's plugin lists),
//! the transforms as ESP proposals, and the generated `strongswan.conf` and
//! `swanctl.conf` of one charon. Pure text generation and parsing of swanctl's
//! output, no processes.
//!
//! Everything a charon reads is generated into the run's scratch directory: charon
//! gets it through `STRONGSWAN_CONF`, swanctl through `--file` (which also makes
//! swanctl look for credentials under that directory, not `/etc/swanctl`). Nothing
//! includes `/etc/strongswan.d`, so a system's configuration neither leaks into the
//! measurement nor is touched by it.

use anyhow::{bail, Result};
use cipherbench_esp::Transform;
use std::fmt::Write as _;
use std::path::Path;

/// strongSwan's crypto backends: three arms of one experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Backend {
    /// The `openssl` plugin: every algorithm from libcrypto, so `OPENSSL_ia32cap`
    /// (the `accel` / `noaesni` variants) reaches ESP.
    Openssl,
    /// The `aesni` plugin (AES-CBC and AES-GCM with AES-NI and PCLMULQDQ
    /// intrinsics, chosen by CPUID: `OPENSSL_ia32cap` does not reach it), SHA-2 and
    /// HMAC in C, ChaCha20-Poly1305 from `chapoly`.
    Aesni,
    /// strongSwan's own C implementations: `aes` (tables), `gcm`, `sha2`, `hmac`,
    /// `chapoly` (which picks its SSSE3 code by CPUID where the CPU has it).
    C,
}

impl Backend {
    /// Every backend, in the order a run measures them.
    pub const ALL: [Backend; 3] = [Backend::Openssl, Backend::Aesni, Backend::C];

    /// The name on the command line and in records.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Openssl => "openssl",
            Backend::Aesni => "aesni",
            Backend::C => "c",
        }
    }

    /// Parses a name, refusing others with the list of known ones.
    pub fn from_name(name: &str) -> Result<Backend> {
        match name.trim() {
            "openssl" => Ok(Backend::Openssl),
            "aesni" => Ok(Backend::Aesni),
            "c" => Ok(Backend::C),
            other => bail!("unknown strongSwan crypto backend {other:?}; known: openssl, aesni, c"),
        }
    }

    /// Whether the variants (`OPENSSL_ia32cap`) reach this backend's ESP crypto.
    pub fn takes_variants(self) -> bool {
        self == Backend::Openssl
    }

    /// charon's plugin list: the crypto plugins of the backend plus what every
    /// charon here needs. With an explicit list nothing else loads, so `kdf` (IKEv2's
    /// prf+ and key derivation since 5.9.6) must be named, and `sha1` (charon's own
    /// SA managers hash with it) where `openssl` is absent. The backend's cipher
    /// plugins and the daemon's own are marked critical (`!`): a missing one stops
    /// charon with a message instead of failing IKE later for want of an
    /// algorithm. The helpers are not: `hmac` also offers HMAC-MD5, which needs an
    /// MD5 nobody here loads, and `kernel-netlink` also offers an xfrm IPsec
    /// backend that fails where the kernel has no xfrm ESP (kernel-libipsec stands
    /// in for it; kernel-netlink's addresses and routes are what is used).
    pub fn plugins(self) -> String {
        let crypto: &[&str] = match self {
            Backend::Openssl => &["openssl!"],
            Backend::Aesni => &["aesni!", "sha1", "sha2", "hmac", "chapoly", "curve25519"],
            Backend::C => &[
                "aes!",
                "gcm!",
                "sha1",
                "sha2",
                "hmac",
                "chapoly",
                "curve25519",
            ],
        };
        let mut all: Vec<&str> = vec!["random!", "nonce!", "kdf!"];
        all.extend(crypto.iter());
        all.extend([
            "kernel-libipsec!",
            "kernel-netlink",
            "socket-default!",
            "vici!",
        ]);
        all.join(" ")
    }
}

/// The IKE proposal: the same for every transform (IKE is not what is measured,
/// but every backend must be able to do it: AES-CBC, SHA-256, X25519).
pub const IKE_PROPOSAL: &str = "aes256-sha256-x25519";

/// A transform as a strongSwan ESP proposal (no PFS group: the CHILD_SA of the
/// initial exchange takes IKE's keys), or None for `null`, which strongSwan
/// refuses (RFC 4303 §3.2: ESP needs confidentiality or integrity).
pub fn esp_proposal(transform: Transform) -> Option<&'static str> {
    match transform {
        Transform::Null => None,
        Transform::Aes256Sha256 => Some("aes256-sha256"),
        Transform::Aes128Gcm => Some("aes128gcm16"),
        Transform::Aes256Gcm => Some("aes256gcm16"),
        Transform::ChaCha20Poly1305 => Some("chacha20poly1305"),
    }
}

/// One side of the tunnel, as charon sees it.
#[derive(Debug, Clone)]
pub struct Side {
    /// Its underlay address (IKE and ESP-in-UDP).
    pub local: String,
    /// The peer's underlay address.
    pub remote: String,
    /// Its inner address (the local traffic selector).
    pub inner_local: String,
    /// The peer's inner address.
    pub inner_remote: String,
}

/// `strongswan.conf` for one charon whose files live in `dir`.
pub fn strongswan_conf(backend: Backend, dir: &Path) -> String {
    let dir = dir.display();
    format!(
        "# Generated by cipherbench for one measurement; removed with the run.\n\
charon {{\n\
  load_modular = no\n\
  load = {plugins}\n\
  # ESP-in-UDP from the first packet: the ports of RFC 3948 and UDP\n\
  # encapsulation forced by the connection (encap = yes).\n\
  port = 500\n\
  port_nat_t = 4500\n\
  install_virtual_ip = no\n\
  plugins {{\n\
    vici {{\n\
      socket = unix://{dir}/charon.vici\n\
    }}\n\
  }}\n\
  filelog {{\n\
    cipherbench {{\n\
      path = {dir}/charon.log\n\
      default = 1\n\
      time_format = %s\n\
      ike_name = yes\n\
    }}\n\
  }}\n\
}}\n\
swanctl {{\n\
  load = random nonce pem pkcs1 x509\n\
}}\n",
        plugins = backend.plugins()
    )
}

/// `swanctl.conf`: one IKEv2 connection with a pre-shared key, UDP encapsulation
/// forced, one tunnel-mode CHILD_SA between the inner addresses.
pub fn swanctl_conf(side: &Side, esp: &str, psk_hex: &str) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "# Generated by cipherbench for one measurement; removed with the run.\n\
connections {{\n\
  cipherbench {{\n\
    version = 2\n\
    local_addrs = {local}\n\
    remote_addrs = {remote}\n\
    encap = yes\n\
    proposals = {IKE_PROPOSAL}\n\
    dpd_delay = 0\n\
    rekey_time = 0\n\
    local {{\n\
      auth = psk\n\
      id = {local}\n\
    }}\n\
    remote {{\n\
      auth = psk\n\
      id = {remote}\n\
    }}\n\
    children {{\n\
      cipherbench {{\n\
        mode = tunnel\n\
        local_ts = {inner_local}/32\n\
        remote_ts = {inner_remote}/32\n\
        esp_proposals = {esp}\n\
        rekey_time = 0\n\
        life_time = 0\n\
        rekey_bytes = 0\n\
        rekey_packets = 0\n\
        start_action = none\n\
      }}\n\
    }}\n\
  }}\n\
}}\n\
secrets {{\n\
  ike-cipherbench {{\n\
    id-local = {local}\n\
    id-remote = {remote}\n\
    secret = 0x{psk_hex}\n\
  }}\n\
}}\n",
        local = side.local,
        remote = side.remote,
        inner_local = side.inner_local,
        inner_remote = side.inner_remote,
    );
    out
}

/// A CHILD_SA's counters and algorithms from `swanctl --list-sas`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChildSa {
    /// `ESP:AES_GCM_16-128` and the like.
    pub algorithms: String,
    /// Inbound (opened) bytes: inner IP packets, as libipsec counts them.
    pub in_bytes: u64,
    /// Inbound packets.
    pub in_packets: u64,
    /// Outbound (sealed) bytes.
    pub out_bytes: u64,
    /// Outbound packets.
    pub out_packets: u64,
}

/// Parses `swanctl --list-sas` for the installed CHILD_SA: the line
/// `cipherbench: #1, reqid 1, INSTALLED, TUNNEL-in-UDP, ESP:AES_CBC-256/HMAC_SHA2_256_128`
/// and its `in  SPI, N bytes, M packets` and `out ...` lines. None if no CHILD_SA
/// is installed.
pub fn parse_list_sas(text: &str) -> Option<ChildSa> {
    let mut sa: Option<ChildSa> = None;
    for line in text.lines() {
        let t = line.trim();
        if t.contains("INSTALLED") {
            if let Some(alg) = t.split(", ").find(|f| f.starts_with("ESP:")) {
                sa = Some(ChildSa {
                    algorithms: alg.to_string(),
                    ..ChildSa::default()
                });
            }
            continue;
        }
        let Some(current) = sa.as_mut() else {
            continue;
        };
        let (direction, rest) = match t.split_once(' ') {
            Some((d @ ("in" | "out"), rest)) => (d, rest),
            _ => continue,
        };
        let count = |unit: &str| -> u64 {
            rest.split(',')
                .map(str::trim)
                .find_map(|f| f.strip_suffix(unit).and_then(|n| n.trim().parse().ok()))
                .unwrap_or(0)
        };
        let (bytes, packets) = (count(" bytes"), count(" packets"));
        if direction == "in" {
            (current.in_bytes, current.in_packets) = (bytes, packets);
        } else {
            (current.out_bytes, current.out_packets) = (bytes, packets);
        }
    }
    sa
}

/// The algorithm names inside a negotiated string: `ESP:AES_CBC-256/HMAC_SHA2_256_128`
/// gives `AES_CBC` and `HMAC_SHA2_256_128` (key sizes dropped, as `--list-algs`
/// names them).
pub fn algorithm_names(negotiated: &str) -> Vec<String> {
    negotiated
        .trim_start_matches("ESP:")
        .split('/')
        .map(|a| {
            a.rsplit_once('-')
                .filter(|(_, size)| size.chars().all(|c| c.is_ascii_digit()))
                .map_or(a, |(name, _)| name)
                .to_string()
        })
        .filter(|a| !a.is_empty())
        .collect()
}

/// From `swanctl --list-algs`, the entries (`AES_GCM_16[aesni]`) registered for
/// each of `names`: which plugin serves the negotiated algorithms.
pub fn served_by(list_algs: &str, names: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for name in names {
        for entry in list_algs.split_whitespace() {
            if entry
                .strip_prefix(name.as_str())
                .is_some_and(|rest| rest.starts_with('['))
            {
                out.push(entry.to_string());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_plugin_list_names_kdf_and_the_ipsec_plugins_and_marks_them_critical() {
        for b in Backend::ALL {
            let list = b.plugins();
            for needed in [
                "kdf!",
                "kernel-libipsec!",
                "socket-default!",
                "vici!",
                "nonce!",
            ] {
                assert!(list.split(' ').any(|p| p == needed), "{b:?}: {list}");
            }
            assert!(list.split(' ').any(|p| p == "kernel-netlink"), "{list}");
        }
        assert!(Backend::Openssl.plugins().contains("openssl!"));
        assert!(Backend::Aesni.plugins().contains("aesni!"));
        assert!(Backend::C.plugins().contains("aes! gcm!"));
        for b in [Backend::Aesni, Backend::C] {
            assert!(b.plugins().split(' ').any(|p| p == "sha1"), "{b:?}");
        }
        assert!(!Backend::Aesni.plugins().contains("openssl"));
        assert!(!Backend::C.plugins().contains("openssl"));
        assert!(!Backend::C.plugins().contains("aesni"));
        // One provider per algorithm: the aesni backend's GCM is aesni's own.
        assert!(!Backend::Aesni.plugins().contains("gcm"));
        assert!(Backend::Openssl.takes_variants() && !Backend::C.takes_variants());
    }

    #[test]
    fn backends_round_trip_and_unknown_ones_are_refused() {
        for b in Backend::ALL {
            assert_eq!(Backend::from_name(b.name()).unwrap(), b);
        }
        let e = Backend::from_name("qat").unwrap_err().to_string();
        assert!(e.contains("openssl, aesni, c"), "{e}");
    }

    #[test]
    fn transforms_map_to_esp_proposals_and_null_is_refused() {
        assert_eq!(esp_proposal(Transform::Aes256Sha256), Some("aes256-sha256"));
        assert_eq!(esp_proposal(Transform::Aes128Gcm), Some("aes128gcm16"));
        assert_eq!(esp_proposal(Transform::Aes256Gcm), Some("aes256gcm16"));
        assert_eq!(
            esp_proposal(Transform::ChaCha20Poly1305),
            Some("chacha20poly1305")
        );
        assert_eq!(esp_proposal(Transform::Null), None);
    }

    #[test]
    fn the_configuration_forces_encapsulation_and_keeps_to_its_directory() {
        let dir = Path::new("/tmp/cbtun-1-2-3/strongswan/sender");
        let conf = strongswan_conf(Backend::Aesni, dir);
        assert!(conf.contains("socket = unix:///tmp/cbtun-1-2-3/strongswan/sender/charon.vici"));
        assert!(conf.contains("path = /tmp/cbtun-1-2-3/strongswan/sender/charon.log"));
        assert!(conf.contains("load_modular = no"));
        assert!(!conf.contains("include"), "nothing from /etc");
        let side = Side {
            local: "198.18.0.1".into(),
            remote: "198.18.0.2".into(),
            inner_local: "198.19.0.1".into(),
            inner_remote: "198.19.0.2".into(),
        };
        let swanctl = swanctl_conf(&side, "aes128gcm16", "00ff");
        assert!(swanctl.contains("encap = yes"));
        assert!(swanctl.contains("version = 2"));
        assert!(swanctl.contains("esp_proposals = aes128gcm16"));
        assert!(swanctl.contains("local_ts = 198.19.0.1/32"));
        assert!(swanctl.contains("secret = 0x00ff"));
        assert!(swanctl.contains("auth = psk"));
    }

    const LIST_SAS: &str =
        "cipherbench: #1, ESTABLISHED, IKEv2, 26c21a1403fd41ab_i* cb69a9bd7e98b1cf_r
  local  '198.18.0.1' @ 198.18.0.1[4500]
  remote '198.18.0.2' @ 198.18.0.2[4500]
  AES_CBC-256/HMAC_SHA2_256_128/PRF_HMAC_SHA2_256/CURVE_25519
  established 490s ago
  cipherbench: #1, reqid 1, INSTALLED, TUNNEL-in-UDP, ESP:AES_CBC-256/HMAC_SHA2_256_128
    installed 490s ago
    in  a5868407, 662612 bytes, 10691 packets,   488s ago
    out 2a8794df, 66975354 bytes, 47863 packets,   488s ago
    local  198.19.0.1/32
    remote 198.19.0.2/32
";

    #[test]
    fn reads_the_child_sa_counters_and_algorithms_from_list_sas() {
        let sa = parse_list_sas(LIST_SAS).unwrap();
        assert_eq!(sa.algorithms, "ESP:AES_CBC-256/HMAC_SHA2_256_128");
        assert_eq!((sa.in_bytes, sa.in_packets), (662_612, 10_691));
        assert_eq!((sa.out_bytes, sa.out_packets), (66_975_354, 47_863));
        // Before the CHILD_SA is installed there is nothing to read.
        assert_eq!(
            parse_list_sas(&LIST_SAS[..LIST_SAS.find("  cipherbench").unwrap()]),
            None
        );
        let idle = "  x: #1, reqid 1, INSTALLED, TUNNEL-in-UDP, ESP:AES_GCM_16-128\n    in  c1,      0 bytes,     0 packets\n";
        assert_eq!(parse_list_sas(idle).unwrap().in_packets, 0);
    }

    #[test]
    fn finds_the_plugins_serving_the_negotiated_algorithms() {
        let names = algorithm_names("ESP:AES_CBC-256/HMAC_SHA2_256_128");
        assert_eq!(names, ["AES_CBC", "HMAC_SHA2_256_128"]);
        assert_eq!(algorithm_names("ESP:AES_GCM_16-128"), ["AES_GCM_16"]);
        let algs = "encryption:\n  AES_CBC[aesni]\n  AES_CBC_X[x]\nintegrity:\n  HMAC_SHA2_256_128[hmac]\naead:\n  AES_GCM_16[aesni]\n";
        assert_eq!(
            served_by(algs, &names),
            ["AES_CBC[aesni]", "HMAC_SHA2_256_128[hmac]"]
        );
    }
}
