#!/usr/bin/env bash
# Builds a current upstream OpenSSL 3.x or 4.x, once, from the source the `openssl-src`
# crate on crates.io carries, and installs it as a prefix under target/ that a program
# switches to with LD_LIBRARY_PATH. A 3.x build has the same sonames and symbol versions
# as a distribution's OpenSSL 3, so Debian's nginx and iperf3 and cipherbench itself load
# it unchanged; a 4.x build's are libcrypto.so.4 and libssl.so.4, which only a program
# built against it loads (scripts/build-against.sh builds cipherbench so):
#
#   target/openssl-upstream/<version>/
#     lib/libcrypto.so.N  lib/libssl.so.N   (N = 3 or 4; + .so links, static .a, pkgconfig)
#     bin/openssl                           (links lib/ above through RUNPATH $ORIGIN/../lib)
#     include/openssl/
#     ssl/openssl.cnf                       (OPENSSLDIR; see below)
#     BUILD-INFO                            (crate, configure line, build time)
#     build.log
#
# OPENSSLDIR is <prefix>/ssl, not the distribution's /usr/lib/ssl: its openssl.cnf holds
# only what `openssl req` needs, so the library runs on its built-in defaults (default
# provider, no system-wide cipher policy), and there is no certs/ trust store.
#
# Usage: scripts/build-openssl.sh [--force]
#   Prints progress on stderr and the prefix alone on stdout, so
#   `dir=$(scripts/build-openssl.sh)` works. A second run finds the prefix and does
#   nothing; --force rebuilds. OPENSSL_SRC_VERSION picks another crate version
#   (300.x.y+3.a.b, or 400.x.y+4.a.b: `OPENSSL_SRC_VERSION=400.0.2+4.0.3` builds
#   OpenSSL 4.0.3), JOBS the make parallelism
#   (default: the number of CPUs), CARGO_TARGET_DIR the target directory.
#
# Why the shared objects are linked here and not by OpenSSL's own build: the crate's tree
# lacks util/mkdef.pl and util/providers.num, which OpenSSL's shared-library and module
# rules need. So it is configured no-shared no-module no-legacy (the default provider,
# with 3DES, is built in), and libcrypto.so.3 and libssl.so.3 are linked from the static
# archives with a version script made from util/libcrypto.num and util/libssl.num, the
# same nodes (OPENSSL_3.0.0, OPENSSL_3.0.3, ... OPENSSL_3.6.0; OPENSSL_4.0.0) and link flags
# (-Bsymbolic, -z nodelete, -z defs) OpenSSL's linux-shared target uses.
set -euo pipefail

crate_version=${OPENSSL_SRC_VERSION:-300.6.1+3.6.3}
# Bump when the recipe below changes, so a cached prefix built the old way is rebuilt.
recipe=2
configure_opts=(no-shared no-module no-legacy no-tests no-docs)
# Debian and Ubuntu configure these two: without them EC_GFp_nistp{224,256,521}_method and
# SSL_test_functions, which their libraries export, would be missing here. The nistp
# code needs a 64-bit compiler with __int128.
if [[ "$(getconf LONG_BIT 2>/dev/null)" == 64 ]]; then
  configure_opts+=(enable-ec_nistp_64_gcc_128)
fi
configure_opts+=(enable-unit-test)

say() { echo "build-openssl: $*" >&2; }
die() {
  say "$*"
  exit 1
}

force=0
for arg in "$@"; do
  case "$arg" in
    --force) force=1 ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    *) die "unknown argument '$arg': usage: scripts/build-openssl.sh [--force]" ;;
  esac
done

if ! [[ "$crate_version" =~ ^([34])00\.[0-9]+\.[0-9]+\+(([34])\.[0-9]+\.[0-9]+)$ &&
  "${BASH_REMATCH[1]}" == "${BASH_REMATCH[3]}" ]]; then
  die "OPENSSL_SRC_VERSION='$crate_version' is not an openssl-src version with its OpenSSL version (300.x.y+3.a.b or 400.x.y+4.a.b, e.g. 300.6.1+3.6.3 or 400.0.2+4.0.3)"
fi
version=${BASH_REMATCH[2]}
# The soname's number: libcrypto.so.3 for every 3.x, libcrypto.so.4 for 4.x.
major=${BASH_REMATCH[3]}
[[ "$(uname -s)" == Linux ]] || die "this builds ELF shared objects with GNU ld version scripts: Linux only (here: $(uname -s))"
jobs=${JOBS:-$(nproc)}
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || die "JOBS='$jobs' is not a positive number"

started=$(date +%s)
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
[[ "$target" == /* ]] || target=$root/$target
base=$target/openssl-upstream
prefix=$base/$version
key="openssl-src $crate_version; recipe $recipe; configure ${configure_opts[*]}"

cached() {
  [[ -f "$prefix/.build-key" && "$(cat "$prefix/.build-key")" == "$key" &&
    -e "$prefix/lib/libcrypto.so.$major" && -e "$prefix/lib/libssl.so.$major" && -x "$prefix/bin/openssl" ]]
}
if ((!force)) && cached; then
  say "OpenSSL $version already built in $prefix (cached; nothing to do, --force rebuilds)"
  echo "$prefix"
  exit 0
fi

# Build tools, installed only when missing, as scripts/install-deps.sh does.
if command -v dpkg-query >/dev/null 2>&1; then
  missing=()
  for p in perl make gcc libc6-dev; do
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
      die "missing Debian packages (${missing[*]}) and not root, no sudo: install them, or run as root"
    fi
    say "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get update -qq
    "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
fi
for tool in perl make gcc nm objdump readelf flock; do
  command -v "$tool" >/dev/null 2>&1 || die "'$tool' is missing: install perl, make, gcc and binutils"
done
cargo=${CARGO:-cargo}
command -v "$cargo" >/dev/null 2>&1 || die "cargo is missing (it fetches the openssl-src crate): install Rust with rustup, https://rustup.rs"

mkdir -p "$base"
# One lock per version: 3.6.3 and 4.0.3 build side by side (make test does).
exec 9>"$base/.lock-$version"
if ! flock -n 9; then
  say "another build of OpenSSL $version is running in $base; waiting for it"
  flock 9
fi
if ((!force)) && cached; then
  say "OpenSSL $version was built by the run we waited for: $prefix (cached; nothing to do)"
  echo "$prefix"
  exit 0
fi

build=$base/build-$version
stage=$base/stage-$version
log=$base/build-$version.log
rm -rf "$build" "$stage"
: >"$log"
step=""
keep_log=0
finish() {
  local rc=$?
  rm -rf "$build" "$stage"
  if ((rc != 0 && keep_log)); then
    say "failed while $step (exit $rc); last lines of $log:"
    tail -n 15 "$log" >&2 || true
  else
    rm -f "$log"
  fi
}
trap finish EXIT


# 1. The source: a throwaway package depending on exactly this crate version; cargo fetches
#    it into its registry cache and says where it unpacked it.
step="fetching openssl-src $crate_version with cargo"
say "$step"
fetch=$base/fetch-$version
mkdir -p "$fetch/src"
: >"$fetch/src/lib.rs"
cat >"$fetch/Cargo.toml" <<EOF
# Written by scripts/build-openssl.sh: only here to make cargo fetch the OpenSSL source.
[package]
name = "openssl-src-fetch"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
openssl-src = "=$crate_version"

# Not a member of the cipherbench workspace this directory sits under.
[workspace]
EOF
if ! "$cargo" metadata --quiet --format-version 1 --manifest-path "$fetch/Cargo.toml" \
  >"$fetch/metadata.json" 2>"$fetch/cargo.err"; then
  die "cargo could not fetch openssl-src $crate_version ($(grep -m1 '^error' "$fetch/cargo.err" || tail -n1 "$fetch/cargo.err")): is it a published version, is crates.io reachable?"
fi
manifest=$(perl -MJSON::PP -e '
  my $m = decode_json(join "", <STDIN>);
  print $_->{manifest_path}, "\n" for grep { $_->{name} eq "openssl-src" } @{$m->{packages}};' \
  <"$fetch/metadata.json")
src=$(dirname "$manifest")/openssl
[[ -n "$manifest" && -f "$src/Configure" ]] || die "cargo gave no openssl-src $crate_version source tree (looked for $src/Configure)"
keep_log=1
dat_version=$(perl -ne '$v{$1}=$2 if /^(MAJOR|MINOR|PATCH|SHLIB_VERSION)=(\S+)/; END { print "$v{MAJOR}.$v{MINOR}.$v{PATCH} $v{SHLIB_VERSION}" }' "$src/VERSION.dat")
[[ "$dat_version" == "$version $major" ]] || die "openssl-src $crate_version carries OpenSSL '$dat_version' (version, soname major), not '$version $major'"

# 2. Configure and build the static libraries.
step="configuring OpenSSL $version (${configure_opts[*]})"
say "$step"
mkdir -p "$build"
cp -a "$src/." "$build/"
cd "$build"
perl ./Configure --prefix="$prefix" --openssldir="$prefix/ssl" --libdir=lib \
  "${configure_opts[@]}" >>"$log" 2>&1
step="building libcrypto.a and libssl.a (make -j$jobs)"
say "$step"
make -j"$jobs" build_libs >>"$log" 2>&1

# 3. The shared objects, with OpenSSL's symbol versions.
# version_script NUM ARCHIVE: a GNU ld version script exporting the symbols NUM lists
# that ARCHIVE defines, each under its OPENSSL_x.y.z node; the nodes chained in order,
# every node of NUM present (an executable fails to load if a node it needs is absent,
# even an empty one), everything else local.
version_script() {
  nm -g --defined-only "$2" 2>/dev/null | awk 'NF == 3 { print $3 }' | sort -u >"$2.defined"
  perl -e '
    my ($num, $defined) = @ARGV;
    open my $d, "<", $defined or die "$defined: $!";
    my %def = map { chomp; ($_ => 1) } <$d>;
    open my $n, "<", $num or die "$num: $!";
    my (%nodes, $absent);
    while (<$n>) {
      next if /^\s*(#|$)/;
      my ($name, undef, $ver, $kind) = split;
      next unless $kind =~ /^EXIST:/;
      push @{$nodes{$ver}}, ();
      if ($def{$name}) { push @{$nodes{$ver}}, $name } else { $absent++ }
    }
    my $prev;
    for my $ver (sort { my @a = split /_/, $a; my @b = split /_/, $b;
                        $a[0] <=> $b[0] || $a[1] <=> $b[1] || $a[2] <=> $b[2] } keys %nodes) {
      (my $node = "OPENSSL_$ver") =~ s/_(\d+)_(\d+)$/.$1.$2/;
      print "$node {\n";
      print "    global:\n", map { "        $_;\n" } @{$nodes{$ver}} if @{$nodes{$ver}};
      print "    local: *;\n" unless defined $prev;
      print "}", (defined $prev ? " $prev" : ""), ";\n";
      $prev = $node;
    }
    printf STDERR "%s: %d symbols listed but not in this build (features configured out)\n",
      $num, $absent // 0;
  ' "$1" "$2.defined"
}
cnf() { sed -n "s/^$1=//p" Makefile; }
cc=$(cnf CC | sed 's/\$(CROSS_COMPILE)//')
ex_libs=$(cnf CNF_EX_LIBS)
shared_flags=(-shared -Wl,-Bsymbolic -Wl,-znodelete -Wl,-z,defs)

step="linking libcrypto.so.$major"
say "$step"
version_script util/libcrypto.num libcrypto.a >libcrypto.ld 2>>"$log"
# shellcheck disable=SC2086 # ex_libs is a list of flags
"$cc" "${shared_flags[@]}" -Wl,-soname=libcrypto.so.$major -Wl,--version-script=libcrypto.ld \
  -o libcrypto.so.$major -Wl,--whole-archive libcrypto.a -Wl,--no-whole-archive $ex_libs >>"$log" 2>&1
ln -sf libcrypto.so.$major libcrypto.so

step="linking libssl.so.$major"
say "$step"
version_script util/libssl.num libssl.a >libssl.ld 2>>"$log"
# libssl uses a few libcrypto internals (packet.c, time.c, quic_vlint.c, ...) that
# libcrypto.so does not export; OpenSSL's shared build compiles them into libssl too
# (SHARED_SOURCE in ssl/build.info). Here the linker takes them from libcrypto.a, after
# libcrypto.so has given every symbol it exports. A member beyond those would be a second
# copy of libcrypto code, perhaps with its own state, inside libssl: refused.
# shellcheck disable=SC2086
"$cc" "${shared_flags[@]}" -Wl,-soname=libssl.so.$major -Wl,--version-script=libssl.ld \
  -o libssl.so.$major -Wl,--whole-archive libssl.a -Wl,--no-whole-archive \
  libcrypto.so.$major -Wl,-Map=libssl.map libcrypto.a $ex_libs >>"$log" 2>&1
ln -sf libssl.so.$major libssl.so
taken=$(sed -n 's/^[^ ]*libcrypto\.a(\(.*\))$/\1/p' libssl.map | sort -u | tr '\n' ' ')
echo "libssl.so.$major took from libcrypto.a: $taken" >>"$log"
shared_source='(packet|quic_vlint|time|rbtree|hashfunc|siphash|arch|thread_posix|getenv|ctype|ssl3_cbc|tls_pad)'
for member in $taken; do
  [[ "$member" =~ ^lib[a-z]+-lib-${shared_source}\.o$ ]] ||
    die "libssl.so.$major would take $member from libcrypto.a, which OpenSSL's own shared build does not compile into libssl (ssl/build.info SHARED_SOURCE); the recipe needs updating for OpenSSL $version"
done

# 4. The openssl CLI. Its link line is `-L. -lssl -lcrypto`, so with the .so links above
#    in the build directory it links the shared objects, and finds them at run time in
#    the prefix's lib/ (RUNPATH: LD_LIBRARY_PATH still comes first).
step="building the openssl CLI (make -j$jobs)"
say "$step"
make -j"$jobs" build_programs LDFLAGS='-Wl,--enable-new-dtags -Wl,-rpath,\$$ORIGIN/../lib' >>"$log" 2>&1
readelf -d apps/openssl | grep -q "NEEDED.*libcrypto\\.so\\.$major" ||
  die "apps/openssl did not link libcrypto.so.$major dynamically; see $log"

# 5. Install into a staging directory, check it by effect, then move it into place.
step="installing"
say "$step into $prefix"
make install_sw DESTDIR="$stage" >>"$log" 2>&1
staged=$stage$prefix
cp -P libcrypto.so.$major libcrypto.so libssl.so.$major libssl.so "$staged/lib/"
mkdir -p "$staged/ssl"
cat >"$staged/ssl/openssl.cnf" <<'EOF'
# Written by scripts/build-openssl.sh: the openssl-src crate's tree has no apps/openssl.cnf.
# Only what `openssl req` needs to run; the library keeps its built-in defaults (no
# system-wide cipher policy, default provider), unlike a distribution's openssl.cnf.
[req]
distinguished_name = req_distinguished_name
[req_distinguished_name]
EOF
reported=$(env -u LD_LIBRARY_PATH "$staged/bin/openssl" version 2>>"$log" || true)
[[ "$reported" == "OpenSSL $version "* && "$reported" == *"(Library: OpenSSL $version "* ]] ||
  die "the built openssl reports '$reported', not OpenSSL $version with its own library"
# exports LIB: "version/symbol" for each symbol LIB defines under an OPENSSL_<major> node.
exports() {
  objdump -T "$1" | awk -v n="^OPENSSL_$major" 'NF >= 6 && $0 !~ /[*]UND[*]/ && $(NF-1) ~ n && $NF !~ n {
    print $(NF-1) "/" $NF }' | sort
}
for lib in libcrypto libssl; do
  exports "$staged/lib/$lib.so.$major" >"$build/$lib.exports"
  say "$lib.so.$major: $(wc -l <"$build/$lib.exports") symbols exported under OPENSSL_$major.x.y versions"
  [[ -s "$build/$lib.exports" ]] || die "$lib.so.$major exports no symbol under an OPENSSL_$major node; see $log"
  # A program built against the system's OpenSSL 3 may use any symbol that one exports
  # (a 4.x build has another soname: nothing built for the system's loads it).
  system=$(ldconfig -p 2>/dev/null | awk -v l="$lib.so.$major" '$1 == l && !found { print $NF; found = 1 }')
  if [[ "$major" == 3 && -n "$system" ]]; then
    absent=$(exports "$system" | comm -23 - "$build/$lib.exports" | tr '\n' ' ')
    if [[ -n "$absent" ]]; then
      say "warning: $system exports what this $lib.so.$major does not: $absent"
    else
      say "$lib.so.$major: exports every symbol (and version) $system does"
    fi
  fi
done

elapsed=$(($(date +%s) - started))
cat >"$staged/BUILD-INFO" <<EOF
OpenSSL $version, built by scripts/build-openssl.sh (recipe $recipe) on $(date -u +%Y-%m-%dT%H:%M:%SZ)
source: crates.io openssl-src $crate_version ($src)
configure: ./Configure --prefix=$prefix --openssldir=$prefix/ssl --libdir=lib ${configure_opts[*]}
shared objects: linked by the script from libcrypto.a and libssl.a, versions from util/lib{crypto,ssl}.num
build: make -j$jobs on $(nproc) CPUs, $elapsed s
EOF
echo "$key" >"$staged/.build-key"
cp "$log" "$staged/build.log"
rm -rf "$prefix"
mv "$staged" "$prefix"
rm -f "$log"
step="cleaning up"
say "OpenSSL $version built in ${elapsed}s: $prefix"
echo "$prefix"
