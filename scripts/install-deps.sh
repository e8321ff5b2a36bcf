#!/usr/bin/env bash
# Installs what cipherbench needs on a Debian machine, and nothing that is already
# there. Usage: scripts/install-deps.sh run|test
#   run:  build tools, OpenSSL, and the programs the layers drive
#   test: the same, plus what the tests use (tshark, chromium for the report test)
# Runs apt-get as root, or through sudo. Prints one line per action.
set -euo pipefail

mode=${1:-run}
packages=(
  build-essential pkg-config libssl-dev openssl ca-certificates
  # Debian 12: `nginx` is the server itself (nginx-light/-full are metapackages
  # pulling it in with extra modules); it has the SSL and stub_status modules.
  nginx iperf3 iproute2 nftables
  # ssh: the launcher of `--agents` (cipherbench agent on other hosts).
  openssh-client
  age gnupg wrk
  # `tunnel --stack strongswan`: charon with kernel-libipsec (userspace ESP over
  # TUN), swanctl to load its configuration, and the openssl/aesni/kdf plugins.
  # Debian's strongswan-starter comes with charon; cipherbench never starts it
  # and never reads or writes /etc/ipsec* or /etc/swanctl (see ARCHITECTURE.md).
  strongswan-charon strongswan-swanctl libcharon-extra-plugins
  libstrongswan-standard-plugins libstrongswan-extra-plugins
  # `tls --key-store pkcs11`: OpenSSL's pkcs11 engine (libp11) and SoftHSM2, the
  # PKCS#11 module cipherbench sets a throwaway token up in (in the run's directory).
  libengine-pkcs11-openssl softhsm2
  # scripts/bench-many-cores.sh, part C: `wg` configures wireguard-go, the peer the
  # tunnel is compared with (wireguard-go itself is built from its Go module).
  wireguard-tools
  # scripts/bench-generator-cost.sh: wrk's CPU time (/usr/bin/time).
  time
)
# `tls --key-store pkcs11` without engines: pkcs11-provider, packaged from Debian 13
# (Debian 12 has only the engine, which cipherbench uses there).
if [[ -r /etc/os-release ]] && . /etc/os-release && [[ "${ID:-}" == debian && "${VERSION_ID:-0}" -ge 13 ]]; then
  packages+=(pkcs11-provider)
fi
if [[ "$mode" == test ]]; then
  # tshark: the tunnel's independent wire check; chromium: the report's browser test.
  # openssh-server: the tests' own SSH hosts (sshd in network namespaces, started
  # from a scratch config). Debian enables its ssh.service where systemd runs; the
  # tests never use it.
  packages+=(tshark chromium openssh-server)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  if [[ $(id -u) -eq 0 ]]; then
    sudo=()
  elif command -v sudo >/dev/null 2>&1; then
    sudo=(sudo)
  else
    echo "install-deps: missing Debian packages (${missing[*]}) and not root, no sudo: install them, or run as root" >&2
    exit 1
  fi
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq
  # tshark asks whether non-root users may capture; the default (no) is fine.
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1; then
  echo "install-deps: Rust is missing: install a stable toolchain (1.80 or newer) with rustup, https://rustup.rs" >&2
  exit 1
fi
