#!/usr/bin/env bash
# Builds the release a user installs, into target/dist/:
#   cipherbench_VERSION_ARCH.deb               for Debian and Ubuntu (apt-get install ./...)
#   cipherbench-VERSION-TRIPLE.tar.gz          the same binary, man pages and completions
#   SHA256SUMS                                 of both
# The binary is linked against the OpenSSL 3 ABI of the system it is built on, so
# it loads 3.0 to 3.6 (build on the oldest glibc to support: Debian 12's here). The
# .deb is made with Debian's own tools: dpkg-shlibdeps reads what the binary needs,
# dpkg-deb packs it; no packager to install. Usage: scripts/dist.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-target/dist}

die() { echo "dist: $*" >&2; exit 1; }
for tool in cargo dpkg-deb dpkg-shlibdeps dpkg-architecture strip gzip sha256sum tar; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool is missing: run scripts/install-deps.sh test (dpkg-dev, binutils)"
done

version=$(awk -F'"' '/^\[workspace.package\]/{p=1} p && /^version *=/{print $2; exit}' Cargo.toml)
[[ -n "$version" ]] || die "no version in Cargo.toml's [workspace.package]"
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
triple=$(dpkg-architecture -qDEB_HOST_GNU_TYPE)
name="cipherbench_${version}_${arch}"
tarname="cipherbench-${version}-${triple}"

# Everything is made in a scratch directory beside the output and moved in whole at
# the end: an interrupted build leaves no half package.
mkdir -p "$out"
work=$(mktemp -d "$out/.dist.XXXXXX")
trap 'rm -rf "$work"' EXIT

echo "dist: building cipherbench $version (release, --locked)" >&2
cargo build --release --locked -p cipherbench --quiet
binary=target/release/cipherbench

stage="$work/deb"
install -d "$stage/DEBIAN" "$stage/usr/bin" "$stage/usr/share/man/man1" \
  "$stage/usr/share/bash-completion/completions" "$stage/usr/share/zsh/vendor-completions" \
  "$stage/usr/share/fish/vendor_completions.d" "$stage/usr/share/doc/cipherbench"
# The debug sections stay in target/release's copy: the package is a fifth the size.
strip --strip-debug -o "$stage/usr/bin/cipherbench" "$binary"
chmod 755 "$stage/usr/bin/cipherbench"
"$stage/usr/bin/cipherbench" __manpages "$work/man" >/dev/null
for page in "$work"/man/*.1; do
  gzip -9n <"$page" >"$stage/usr/share/man/man1/$(basename "$page").gz"
done
"$binary" completions bash >"$stage/usr/share/bash-completion/completions/cipherbench"
"$binary" completions zsh >"$stage/usr/share/zsh/vendor-completions/_cipherbench"
"$binary" completions fish >"$stage/usr/share/fish/vendor_completions.d/cipherbench.fish"
install -m644 README.md "$stage/usr/share/doc/cipherbench/README.md"
install -m644 docs/run.schema.json "$stage/usr/share/doc/cipherbench/run.schema.json"
gzip -9n <CHANGELOG.md >"$stage/usr/share/doc/cipherbench/changelog.gz"
cat >"$stage/usr/share/doc/cipherbench/copyright" <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: cipherbench

Files: *
Copyright: the cipherbench developers
License: Apache-2.0
 On Debian systems, the full text of the Apache License 2.0 is in
 /usr/share/common-licenses/Apache-2.0.
EOF

# What the binary links (libc, libgcc, libssl) as dpkg-shlibdeps finds it on this
# system; libssl3 became libssl3t64 in Debian 13 and Ubuntu 24.04, so either will do.
install -d "$work/shlibs/debian"
printf 'Source: cipherbench\n\nPackage: cipherbench\nArchitecture: any\n' >"$work/shlibs/debian/control"
depends=$(cd "$work/shlibs" && dpkg-shlibdeps -O -e"$OLDPWD/$stage/usr/bin/cipherbench" 2>/dev/null |
  sed -n 's/^shlibs:Depends=//p')
[[ "$depends" == *libssl3* ]] || die "dpkg-shlibdeps found no libssl3 in what the binary needs: '$depends'"
depends=$(sed -E 's/libssl3( \([^)]*\))?/libssl3\1 | libssl3t64\1/' <<<"$depends")

# What the layers drive: installed with the package unless --no-install-recommends.
recommends=(
  openssl nginx iperf3 iproute2 nftables wrk openssh-client age gnupg
  strongswan-charon strongswan-swanctl libcharon-extra-plugins
  libstrongswan-standard-plugins libstrongswan-extra-plugins
  softhsm2 "pkcs11-provider | libengine-pkcs11-openssl"
)
suggests=(tshark wireguard-tools)
size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
{
  echo "Package: cipherbench"
  echo "Version: $version"
  echo "Architecture: $arch"
  echo "Maintainer: cipherbench developers <cipherbench@localhost>"
  echo "Installed-Size: $size"
  echo "Depends: $depends"
  echo "Recommends: $(IFS=,; echo "${recommends[*]}" | sed 's/,/, /g')"
  echo "Suggests: $(IFS=,; echo "${suggests[*]}" | sed 's/,/, /g')"
  echo "Section: net"
  echo "Priority: optional"
  echo "Description: what hardware crypto acceleration buys, end to end"
  echo " cipherbench follows one cipher up four layers, with acceleration on and off:"
  echo " OpenSSL primitives, a file through the disk, TLS web serving with a real"
  echo " nginx, and an IPsec (ESP-in-UDP) tunnel carrying iperf3 between network"
  echo " namespaces. It reports how much of the primitive's gain survives each layer."
} >"$stage/DEBIAN/control"
dpkg-deb --root-owner-group -Zxz --build "$stage" "$work/$name.deb" >/dev/null

# The tarball: the same files for other distributions.
tardir="$work/$tarname"
install -d "$tardir/man" "$tardir/completions"
cp "$stage/usr/bin/cipherbench" "$tardir/"
cp "$work"/man/*.1 "$tardir/man/"
cp "$stage/usr/share/bash-completion/completions/cipherbench" "$tardir/completions/cipherbench.bash"
cp "$stage/usr/share/zsh/vendor-completions/_cipherbench" "$tardir/completions/"
cp "$stage/usr/share/fish/vendor_completions.d/cipherbench.fish" "$tardir/completions/"
cp README.md CHANGELOG.md LICENSE "$tardir/"
epoch=$(git log -1 --format=%ct 2>/dev/null || date +%s)
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" \
  -C "$work" -czf "$work/$tarname.tar.gz" "$tarname"

(cd "$work" && sha256sum "$name.deb" "$tarname.tar.gz" >SHA256SUMS)
rm -f "$out"/cipherbench_*.deb "$out"/cipherbench-*.tar.gz "$out/SHA256SUMS"
mv "$work/$name.deb" "$work/$tarname.tar.gz" "$work/SHA256SUMS" "$out/"
echo "dist: $out/$name.deb ($(du -h "$out/$name.deb" | cut -f1)), $out/$tarname.tar.gz, $out/SHA256SUMS" >&2
echo "dist: Depends: $depends" >&2
