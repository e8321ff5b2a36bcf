#!/usr/bin/env bash
# Builds the system's nginx again from its Debian source package, against the OpenSSL
# in PREFIX, and installs it where `--openssl PREFIX` finds it:
#
#   PREFIX/libexec/cipherbench/nginx
#
# For an OpenSSL 4 build (libssl.so.4), which Debian's nginx (libssl.so.3) cannot load:
# the TLS layer then runs this nginx under that library wherever the nginx asked for
# cannot load it, and the record names the binary. The source is the installed nginx
# package's (`apt-get source`, through a deb-src list made from the system's own
# sources, in a scratch directory: the system's apt configuration is not touched), its
# Debian patches applied, configured with the arguments the installed nginx reports
# (`nginx -V`) less its dynamic modules and file paths, so the two differ in the
# library and nothing else cipherbench uses. Two changes let nginx 1.22 compile against
# OpenSSL 4, and are harmless on 3.x: the OCSP cache key reads the certificate's serial
# through ASN1_STRING_length/ASN1_STRING_get0_data (ASN1_STRING is opaque in 4.0), and
# OpenSSL 4's const return values are warnings, not errors.
#
# Usage: scripts/build-nginx.sh PREFIX
#   About 1 minute on 2 cores (the download is 1 MB). Needs dpkg-dev, libpcre2-dev and
#   zlib1g-dev (installed when missing, as root or with sudo). Prints progress on
#   stderr and the installed nginx alone on stdout. A second run with the same source
#   and library does nothing.
set -euo pipefail

say() { echo "build-nginx: $*" >&2; }
die() {
  say "$*"
  exit 1
}

[[ $# -eq 1 && "$1" != -* ]] || {
  [[ "${1:-}" == -h || "${1:-}" == --help ]] && {
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
    exit 0
  }
  die "usage: scripts/build-nginx.sh PREFIX: the prefix of an OpenSSL build"
}
[[ -d "$1" ]] || die "$1: no such directory; give the prefix of an OpenSSL build"
prefix=$(cd "$1" && pwd -P)
lib=""
for so in "$prefix"/lib/libssl.so.[0-9]* "$prefix"/lib64/libssl.so.[0-9]*; do
  [[ -e "$so" ]] && lib=$(dirname "$so") && break
done
[[ -n "$lib" ]] || die "$prefix: has no lib/libssl.so.N; give the prefix of an OpenSSL build (scripts/build-openssl.sh makes one)"
[[ -f "$prefix/include/openssl/ssl.h" ]] || die "$prefix: has no include/openssl/ssl.h: nginx is built against the headers too"
command -v dpkg-query >/dev/null 2>&1 || die "this rebuilds Debian's nginx package: Debian or Ubuntu only"
system_nginx=$(command -v nginx || echo /usr/sbin/nginx)
[[ -x "$system_nginx" ]] || die "no nginx installed: install Debian's nginx package (scripts/install-deps.sh does) first; its source and configure arguments are the ones rebuilt"
version=$(dpkg-query -W -f='${Version}' nginx 2>/dev/null) || die "the nginx package is not installed (nginx here: $system_nginx); install it with apt-get"

missing=()
for p in dpkg-dev libpcre2-dev zlib1g-dev make gcc; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -eq 0 ]]; then sudo=(); elif command -v sudo >/dev/null; then sudo=(sudo); else
    die "missing Debian packages (${missing[*]}) and not root, no sudo: install them, or run as root"
  fi
  say "installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

dest=$prefix/libexec/cipherbench
key="nginx $version; $(sha256sum "$lib"/libssl.so.[0-9]* | awk '{print $1}' | head -c 16); recipe 1"
if [[ -x "$dest/nginx" && -f "$dest/.nginx-key" && "$(cat "$dest/.nginx-key")" == "$key" ]]; then
  say "nginx $version against $prefix already built: $dest/nginx (cached; nothing to do)"
  echo "$dest/nginx"
  exit 0
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/cipherbench-nginx.XXXXXX")
trap 'rm -rf "$work"' EXIT
log=$work/build.log

# 1. The source package, through a private deb-src list made from the system's sources.
say "fetching the source of nginx $version with apt-get source"
mkdir -p "$work/apt/parts" "$work/apt/lists/partial" "$work/apt/cache/archives/partial" "$work/src"
for f in /etc/apt/sources.list.d/*.sources; do
  [[ -e "$f" ]] && sed 's/^Types:.*/Types: deb-src/' "$f" >"$work/apt/parts/$(basename "$f")"
done
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
  [[ -e "$f" ]] && sed -n 's/^deb \(.*\)/deb-src \1/p' "$f" >>"$work/apt/parts/system.list"
done
apt_opts=(-o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=$work/apt/parts"
  -o "Dir::State::Lists=$work/apt/lists" -o "Dir::Cache=$work/apt/cache" -o "Debug::NoLocking=1")
apt-get "${apt_opts[@]}" update >>"$log" 2>&1 || {
  tail -n 5 "$log" >&2
  die "apt-get update of the deb-src lists failed; see the lines above"
}
cd "$work/src"
if ! apt-get "${apt_opts[@]}" source --download-only "nginx=$version" >>"$log" 2>&1; then
  # The exact revision may be missing from the mirror (a security update it does not
  # carry): the newest source of the same upstream version that downloads, said.
  upstream=${version%%-*}
  upstream=${upstream#*:}
  found=""
  for v in $(apt-cache "${apt_opts[@]}" showsrc nginx 2>/dev/null | sed -n 's/^Version: //p' |
    grep "^$upstream-" | sort -Vru); do
    [[ "$v" == "$version" ]] && continue
    rm -f ./nginx_*
    if apt-get "${apt_opts[@]}" source --download-only "nginx=$v" >>"$log" 2>&1; then
      found=$v
      break
    fi
  done
  [[ -n "$found" ]] || die "no source of nginx $upstream downloads from the system's deb-src lists; see $log"
  say "nginx $version's source is not on the mirror; building $found (same upstream $upstream)"
  version=$found
fi
dsc=$(ls ./*.dsc)
dpkg-source --no-check -x "$dsc" nginx >>"$log" 2>&1 || die "dpkg-source could not unpack $dsc"
cd nginx

# 2. The two changes for OpenSSL 4 (see the header), each checked to have applied.
stapling=src/event/ngx_event_openssl_stapling.c
if grep -q 'serial->length' "$stapling"; then
  sed -i 's/serial->length/ASN1_STRING_length(serial)/g; s/serial->data/ASN1_STRING_get0_data(serial)/g' "$stapling"
  ! grep -q 'serial->' "$stapling" || die "could not rewrite the serial's fields in $stapling"
fi

# 3. Configure as Debian did, less dynamic modules and paths.
args=$("$system_nginx" -V 2>&1 | sed -n 's/^configure arguments: //p')
[[ -n "$args" ]] || die "$system_nginx -V reports no configure arguments"
eval "set -- $args"
keep=()
cc_opt="" ld_opt=""
for a in "$@"; do
  case "$a" in
    --with-cc-opt=*) cc_opt=${a#--with-cc-opt=} ;;
    --with-ld-opt=*) ld_opt=${a#--with-ld-opt=} ;;
    --*-path=* | --prefix=* | *=dynamic | --add-dynamic-module=* | --add-module=*) ;;
    *) keep+=("$a") ;;
  esac
done
cc_opt="$cc_opt -I$prefix/include -Wno-error=discarded-qualifiers -Wno-error=deprecated-declarations"
ld_opt="$ld_opt -L$lib -Wl,--enable-new-dtags,-rpath,$lib"
say "configuring nginx $version against $prefix (${#keep[@]} of Debian's options; dynamic modules and paths left out)"
./configure --prefix="$dest/nginx-root" --error-log-path=stderr "${keep[@]}" \
  --with-cc-opt="$cc_opt" --with-ld-opt="$ld_opt" >>"$log" 2>&1 || {
  tail -n 5 "$log" >&2
  die "nginx's configure failed; see the lines above"
}
say "building (make -j$(nproc))"
make -j"$(nproc)" >>"$log" 2>&1 || {
  grep -m5 'error' "$log" >&2 || tail -n 5 "$log" >&2
  die "nginx did not build against $prefix; see the lines above"
}
needed=$(readelf -d objs/nginx | sed -n 's/.*NEEDED.*\[\(libssl\.so\.[0-9]*\)\].*/\1/p')
[[ -n "$needed" && -e "$lib/$needed" ]] || die "the nginx built links '${needed:-no libssl}', not $lib's"
mkdir -p "$dest"
cp objs/nginx "$dest/.nginx.new"
mv -f "$dest/.nginx.new" "$dest/nginx"
echo "$key" >"$dest/.nginx-key"
say "installed $dest/nginx ($("$dest/nginx" -V 2>&1 | sed -n 's/^built with //p'))"
echo "$dest/nginx"
