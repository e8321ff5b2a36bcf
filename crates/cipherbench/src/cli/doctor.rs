//! `cipherbench doctor`: every program and kernel feature each layer drives, whether
//! this machine has it, and the command that installs what is missing on this
//! distribution. The Debian and Ubuntu package names are the ones
//! `scripts/install-deps.sh` and the package's `Recommends` install, tested in
//! Debian 12 and 13 roots (`make test-dist`); the Fedora and RHEL names are written
//! from those distributions' package lists and not tested here, and the output says
//! so. It changes nothing.

use crate::progress::out;
use anyhow::Result;
use std::path::Path;
use std::process::ExitCode;

/// Exit status when something a layer needs is missing (as `probe --check` when the
/// machine is not fit).
const EXIT_MISSING: u8 = 3;

/// How a distribution installs packages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Debian, Ubuntu and their derivatives: apt-get, tested.
    Apt,
    /// Fedora, RHEL and its rebuilds: dnf, written down, not tested.
    Dnf,
    /// Anything else: the programs are named, no command.
    Other,
}

/// The family and the name of the distribution an `/etc/os-release` describes. Pure.
pub fn family(os_release: &str) -> (Family, String) {
    let field = |key: &str| {
        os_release
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
            .map(|v| v.trim().trim_matches('"').to_string())
    };
    let ids = format!(
        "{} {}",
        field("ID").unwrap_or_default(),
        field("ID_LIKE").unwrap_or_default()
    );
    let has = |id: &str| ids.split_whitespace().any(|w| w == id);
    let name = field("PRETTY_NAME").unwrap_or_else(|| "an unknown distribution".into());
    let family = if has("debian") || has("ubuntu") {
        Family::Apt
    } else if has("fedora") || has("rhel") || has("centos") {
        Family::Dnf
    } else {
        Family::Other
    };
    (family, name)
}

/// What a layer needs.
#[derive(Debug, Clone, Copy)]
pub enum Thing {
    /// A program on PATH.
    Program(&'static str),
    /// One of these files.
    AnyFile(&'static [&'static str]),
    /// A character device or directory the kernel provides.
    Kernel(&'static str),
    /// Running as root.
    Root,
}

/// One requirement: the layer, what it is for, how to tell, and its packages.
#[derive(Debug, Clone, Copy)]
pub struct Need {
    /// The layer or command that uses it.
    pub layer: &'static str,
    /// What it is, for the table.
    pub what: &'static str,
    /// How to tell whether it is here.
    pub thing: Thing,
    /// The Debian/Ubuntu package ("" where no package gives it).
    pub apt: &'static str,
    /// The Debian/Ubuntu package to install instead where apt has no `apt` (Debian 12
    /// has no pkcs11-provider: its engine); "" where none.
    pub apt_else: &'static str,
    /// The Fedora/RHEL package, from their package lists (not tested here); "" where
    /// none.
    pub dnf: &'static str,
    /// A note on the dnf package (a repository to enable).
    pub dnf_note: &'static str,
    /// Needed by the main job (`cipherbench run`), or only by an option.
    pub main_job: bool,
}

use crate::tls::keystore::{PKCS11_ENGINES, PKCS11_PROVIDERS, SOFTHSM2_MODULES};
use crate::tunnel::strongswan::CHARON_PATHS;

/// A need whose Debian and Fedora packages are named alike in kind.
const fn need(
    layer: &'static str,
    what: &'static str,
    thing: Thing,
    apt: &'static str,
    dnf: &'static str,
    main_job: bool,
) -> Need {
    Need {
        layer,
        what,
        thing,
        apt,
        apt_else: "",
        dnf,
        dnf_note: "",
        main_job,
    }
}

/// The same, its dnf package in EPEL on RHEL.
const fn epel(n: Need) -> Need {
    Need {
        dnf_note: "EPEL on RHEL",
        ..n
    }
}

const CHARON: &[&str] = &CHARON_PATHS;
const PKCS11_GLUE: &[&str] = &[
    PKCS11_PROVIDERS[0],
    PKCS11_PROVIDERS[1],
    PKCS11_PROVIDERS[2],
    PKCS11_ENGINES[0],
    PKCS11_ENGINES[1],
    PKCS11_ENGINES[2],
    PKCS11_ENGINES[3],
];

/// Everything, in the ladder's order.
#[rustfmt::skip]
pub const NEEDS: &[Need] = &[
    need("speed", "openssl CLI (--check-openssl, the file layer)", Thing::Program("openssl"), "openssl", "openssl", true),
    need("file", "age", Thing::Program("age"), "age", "age", false),
    need("file", "gpg", Thing::Program("gpg"), "gnupg", "gnupg2", false),
    need("tls", "nginx", Thing::Program("nginx"), "nginx", "nginx", true),
    epel(need("tls", "wrk (another generator for `tls serve`)", Thing::Program("wrk"), "wrk", "wrk", false)),
    need("tls", "SoftHSM2 (--key-store pkcs11)", Thing::AnyFile(SOFTHSM2_MODULES), "softhsm2", "softhsm", false),
    need("tls", "softhsm2-util (--key-store pkcs11)", Thing::Program("softhsm2-util"), "softhsm2", "softhsm", false),
    Need {
        apt_else: "libengine-pkcs11-openssl",
        ..need("tls", "pkcs11-provider or the pkcs11 engine (--key-store pkcs11)", Thing::AnyFile(PKCS11_GLUE), "pkcs11-provider", "pkcs11-provider", false)
    },
    need("tunnel", "root (namespaces, TUN, nftables)", Thing::Root, "", "", true),
    need("tunnel", "network namespaces", Thing::Kernel("/proc/self/ns/net"), "", "", true),
    need("tunnel", "TUN device", Thing::Kernel("/dev/net/tun"), "", "", true),
    need("tunnel", "ip", Thing::Program("ip"), "iproute2", "iproute", true),
    need("tunnel", "tc", Thing::Program("tc"), "iproute2", "iproute-tc", true),
    need("tunnel", "iperf3", Thing::Program("iperf3"), "iperf3", "iperf3", true),
    need("tunnel", "nft", Thing::Program("nft"), "nftables", "nftables", true),
    epel(need("tunnel", "strongSwan's charon (--stack strongswan)", Thing::AnyFile(CHARON), "strongswan-charon", "strongswan", false)),
    epel(need("tunnel", "swanctl (--stack strongswan)", Thing::Program("swanctl"), "strongswan-swanctl", "strongswan", false)),
    need("agents", "ssh (--agents, --peer)", Thing::Program("ssh"), "openssh-client", "openssh-clients", false),
    need("tunnel", "tshark (to read a capture with --esp-keylog's keys)", Thing::Program("tshark"), "tshark", "wireshark-cli", false),
];

/// Whether a need is met here.
fn present(thing: Thing) -> bool {
    match thing {
        Thing::Program(p) => crate::file::tools::which(p).is_some(),
        Thing::AnyFile(paths) => paths.iter().any(|p| Path::new(p).exists()),
        Thing::Kernel(path) => Path::new(path).exists(),
        Thing::Root => crate::host::is_root(),
    }
}

/// Whether apt knows `package` here (`apt-cache show`).
fn apt_has(package: &str) -> bool {
    crate::supervisor::Spawn::new("apt-cache")
        .args(["show", "--no-all-versions", package])
        .output(std::time::Duration::from_secs(20))
        .is_ok_and(|o| o.status.success())
}

/// The command that installs `packages` on `family` (None for Other or nothing to
/// install). Pure.
pub fn install_command(family: Family, packages: &[&str], root: bool) -> Option<String> {
    let mut list: Vec<&str> = Vec::new();
    for p in packages {
        if !p.is_empty() && !list.contains(p) {
            list.push(p);
        }
    }
    if list.is_empty() {
        return None;
    }
    let sudo = if root { "" } else { "sudo " };
    match family {
        Family::Apt => Some(format!("{sudo}apt-get install {}", list.join(" "))),
        Family::Dnf => Some(format!("{sudo}dnf install {}", list.join(" "))),
        Family::Other => None,
    }
}

/// `cipherbench doctor`.
pub fn command() -> Result<ExitCode> {
    let (family, name) = family(&std::fs::read_to_string("/etc/os-release").unwrap_or_default());
    let root = present(Thing::Root);
    let all = NEEDS;
    let mut missing: Vec<&Need> = Vec::new();
    let mut text = String::new();
    let how = match family {
        Family::Apt => "Debian/Ubuntu packages, as tested",
        Family::Dnf => "Fedora/RHEL packages, from their package lists, not tested by cipherbench",
        Family::Other => "no package manager known: install the programs named",
    };
    text.push_str(&format!("{name}: {how}\n\n"));
    text.push_str(&format!(
        "{:<8} {:<58} {:<8} {}\n",
        "layer", "needs", "here", "package"
    ));
    for n in all {
        let here = present(n.thing);
        if !here {
            missing.push(n);
        }
        let package = match family {
            Family::Apt if n.apt_else.is_empty() => n.apt.to_string(),
            Family::Apt => format!("{} | {}", n.apt, n.apt_else),
            Family::Dnf if n.dnf_note.is_empty() => n.dnf.to_string(),
            Family::Dnf => format!("{} ({})", n.dnf, n.dnf_note),
            Family::Other => String::new(),
        };
        let here = match (here, n.main_job) {
            (true, _) => "yes",
            (false, true) => "MISSING",
            (false, false) => "no",
        };
        text.push_str(
            format!("{:<8} {:<58} {:<8} {}\n", n.layer, n.what, here, package).trim_end(),
        );
        text.push('\n');
    }
    text.push('\n');
    if missing.is_empty() {
        text.push_str("everything every layer uses is here\n");
        out!("{text}");
        return Ok(ExitCode::SUCCESS);
    }
    let main: Vec<&str> = missing
        .iter()
        .filter(|n| n.main_job)
        .map(|n| n.what)
        .collect();
    let options: Vec<&str> = missing
        .iter()
        .filter(|n| !n.main_job)
        .map(|n| n.what)
        .collect();
    if !main.is_empty() {
        text.push_str(&format!(
            "missing for `cipherbench run`: {}\n",
            main.join(", ")
        ));
    }
    if !options.is_empty() {
        text.push_str(&format!(
            "missing for options only: {}\n",
            options.join(", ")
        ));
    }
    let packages: Vec<&str> = missing
        .iter()
        .map(|n| match family {
            Family::Dnf => n.dnf,
            _ if n.apt_else.is_empty() || apt_has(n.apt) => n.apt,
            _ => n.apt_else,
        })
        .collect();
    match install_command(family, &packages, root) {
        Some(cmd) => text.push_str(&format!("install them: {cmd}\n")),
        None if family == Family::Other => {
            text.push_str("install them with this system's package manager\n");
        }
        None => {}
    }
    if missing.iter().any(|n| matches!(n.thing, Thing::Root)) {
        text.push_str("the tunnel layer runs as root: sudo cipherbench ...\n");
    }
    out!("{text}");
    Ok(if main.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_MISSING)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_family_comes_from_id_and_id_like() {
        let debian = "PRETTY_NAME=\"Debian GNU/Linux 13 (trixie)\"\nID=debian\n";
        assert_eq!(
            family(debian),
            (Family::Apt, "Debian GNU/Linux 13 (trixie)".into())
        );
        let ubuntu = "ID=ubuntu\nID_LIKE=debian\nPRETTY_NAME=\"Ubuntu 24.04 LTS\"\n";
        assert_eq!(family(ubuntu).0, Family::Apt);
        let rocky = "ID=\"rocky\"\nID_LIKE=\"rhel centos fedora\"\n";
        assert_eq!(family(rocky).0, Family::Dnf);
        assert_eq!(family("ID=fedora\n").0, Family::Dnf);
        assert_eq!(family("ID=arch\n").0, Family::Other);
        assert_eq!(family("").0, Family::Other);
        // ID_LIKE is not mistaken for ID (a prefix match would).
        assert_eq!(family("ID_LIKE=debian\nID=pop\n").0, Family::Apt);
    }

    #[test]
    fn the_install_command_names_each_package_once_with_sudo_unless_root() {
        assert_eq!(
            install_command(Family::Apt, &["iperf3", "", "iproute2", "iperf3"], false).as_deref(),
            Some("sudo apt-get install iperf3 iproute2")
        );
        assert_eq!(
            install_command(Family::Dnf, &["strongswan"], true).as_deref(),
            Some("dnf install strongswan")
        );
        assert_eq!(install_command(Family::Other, &["nginx"], true), None);
        assert_eq!(install_command(Family::Apt, &[""], true), None);
    }

    #[test]
    fn every_program_the_layers_drive_has_a_debian_package() {
        for n in NEEDS {
            if matches!(n.thing, Thing::Program(_) | Thing::AnyFile(_)) {
                assert!(!n.apt.is_empty() && !n.dnf.is_empty(), "{n:?}");
            }
        }
    }
}
