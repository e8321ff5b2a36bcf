#!/usr/bin/env bash
# Builds cipherbench against an OpenSSL build whose libraries a distribution-built
# program cannot load (OpenSSL 4.x: libcrypto.so.4 and libssl.so.4), and installs it in
# that build's prefix, where `--openssl PREFIX` finds it:
#
#   PREFIX/libexec/cipherbench/cipherbench
#
# cipherbench starts it in place of itself for every child of its own that runs under
# that library (speed and public-key workers, file seal/open, tunnel gateways, the
# variant probes, the TLS load generator when the library is the only one), and holds
# it to the same version and commit as itself before anything starts. Programs not
# built by this project (Debian's nginx, strongSwan's charon) are not rebuilt here: a
# part that needs one is refused in one line, or left out of `run`'s ladder for that
# library, naming the part.
#
# Usage: scripts/build-against.sh PREFIX [--profile PROFILE]
#   PREFIX holds lib/libcrypto.so.N and include/openssl/ (scripts/build-openssl.sh's
#   prefixes do: `OPENSSL_SRC_VERSION=400.0.2+4.0.3 scripts/build-openssl.sh` makes
#   target/openssl-upstream/4.0.3). PROFILE is cargo's (default release; make test uses
#   test, whose dependencies it shares with nothing else either way). The build goes to
#   target/against/<prefix's last part>/ and takes as long as a first cargo build
#   (about 3 minutes on 2 cores); a second run with nothing changed takes seconds.
#   Prints progress on stderr and the installed executable alone on stdout.
set -euo pipefail

say() { echo "build-against: $*" >&2; }
die() {
  say "$*"
  exit 1
}

prefix=""
profile=release
while (($#)); do
  case "$1" in
    --profile)
      [[ $# -ge 2 ]] || die "--profile needs a value (release, test, dev)"
      profile=$2
      shift 2
      ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    -*) die "unknown argument '$1': usage: scripts/build-against.sh PREFIX [--profile PROFILE]" ;;
    *)
      [[ -z "$prefix" ]] || die "one PREFIX only (got '$prefix' and '$1')"
      prefix=$1
      shift
      ;;
  esac
done
[[ -n "$prefix" ]] || die "usage: scripts/build-against.sh PREFIX [--profile PROFILE]: the prefix of an OpenSSL build"
[[ -d "$prefix" ]] || die "$prefix: no such directory; give the prefix of an OpenSSL build"
prefix=$(cd "$prefix" && pwd -P)
lib=""
for so in "$prefix"/lib/libcrypto.so.[0-9]* "$prefix"/lib64/libcrypto.so.[0-9]*; do
  [[ -e "$so" ]] && lib=$(dirname "$so") && break
done
[[ -n "$lib" ]] || die "$prefix: has no lib/libcrypto.so.N; give the prefix of an OpenSSL build (scripts/build-openssl.sh makes one)"
[[ -f "$prefix/include/openssl/opensslv.h" ]] || die "$prefix: has no include/openssl/opensslv.h: cipherbench is built against the headers too"

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
[[ "$target" == /* ]] || target=$root/$target
out=$target/against/$(basename "$prefix")
cargo=${CARGO:-cargo}
command -v "$cargo" >/dev/null 2>&1 || die "cargo is missing: install Rust with rustup, https://rustup.rs"

say "building cipherbench ($profile) against $prefix into $out"
# openssl-sys reads OPENSSL_DIR (headers and libraries) and links dynamically. The
# RUNPATH lets the executable start on its own; under cipherbench, LD_LIBRARY_PATH
# names the same directory first anyway.
OPENSSL_DIR=$prefix OPENSSL_LIB_DIR=$lib OPENSSL_INCLUDE_DIR=$prefix/include \
  RUSTFLAGS="${RUSTFLAGS:-} -C link-arg=-Wl,--enable-new-dtags,-rpath,$lib" \
  CARGO_TARGET_DIR=$out "$cargo" build --locked --profile "$profile" -p cipherbench --bin cipherbench \
  --manifest-path "$root/Cargo.toml" >&2
case "$profile" in
  dev | test) built=$out/debug/cipherbench ;;
  *) built=$out/$profile/cipherbench ;;
esac
[[ -x "$built" ]] || die "cargo finished but $built is not there"
needed=$(readelf -d "$built" | sed -n 's/.*NEEDED.*\[\(libcrypto\.so\.[0-9]*\)\].*/\1/p')
[[ -n "$needed" && -e "$lib/$needed" ]] ||
  die "$built links '${needed:-no libcrypto}', which $lib does not hold: openssl-sys did not build against $prefix"

dest=$prefix/libexec/cipherbench
mkdir -p "$dest"
# In place by rename: a run that started the old one keeps its file.
cp "$built" "$dest/.cipherbench.new"
mv -f "$dest/.cipherbench.new" "$dest/cipherbench"
reported=$(LD_LIBRARY_PATH=$lib "$dest/cipherbench" __library)
say "installed $dest/cipherbench ($needed; it reports $reported)"
echo "$dest/cipherbench"
