#!/usr/bin/env bash
# `make test-dist`: the package, installed the way a user installs it, on bare servers.
# For each suite (DIST_SUITES, default "trixie bookworm": Debian 13 and 12), in a
# throwaway copy of a bare root (debootstrap minbase: no compiler, no Rust, no
# clone; scripts/debian-root.sh --bare):
#   1. `apt-get install ./cipherbench_*.deb` pulls its dependencies and recommends;
#   2. `man cipherbench`, `man cipherbench-speed` and bash completion work;
#   3. the platform suite (crates/cipherbench/tests/platform.rs, built here) runs
#      against the installed /usr/bin/cipherbench, from /, with everything required:
#      probe, the handshakes, the public-key operations, and the quick preset with
#      every rung and nothing left behind;
#   4. `cipherbench doctor` finds everything the main job needs, then, with iperf3
#      removed, names it with the apt-get command that installs it and exits 3.
# The package is target/dist's, made first by scripts/dist.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
here=$PWD

say() { echo "test-dist: $*" >&2; }
die() {
  say "$*"
  exit 1
}

if [[ "${1:-}" != --inside ]]; then
  scripts/dist.sh
  deb=$(ls target/dist/cipherbench_*.deb)
  (cd target/dist && sha256sum --quiet -c SHA256SUMS) || die "target/dist/SHA256SUMS does not match the files"
  # The platform suite, built as `make test` builds it (nothing again after it).
  test_bin=$(cargo test --workspace --locked --test platform --no-run 2>&1 |
    sed -n 's/.*Executable tests\/platform.rs (\(.*\))$/\1/p' | tail -1)
  [[ -x "$test_bin" ]] || die "could not build the platform suite"
  for suite in ${DIST_SUITES:-trixie bookworm}; do
    started=$(date +%s)
    say "$suite: installing $deb in a bare root"
    scripts/debian-root.sh --suite "$suite" --bare fresh --bind "$here" \
      DIST_TESTS="${DIST_TESTS:-}" bash "$here/scripts/test-dist.sh" --inside "$here/$deb" "$here/$test_bin" ||
      die "$suite: failed (above)"
    say "$suite: passed in $(($(date +%s) - started)) s"
  done
  exit 0
fi

# Inside the bare root.
deb=$2
test_bin=$3
. /etc/os-release
say "$PRETTY_NAME: $(dpkg-query -W -f='${Version}' libc6) glibc"
for tool in cc gcc cargo rustc; do
  ! command -v "$tool" >/dev/null 2>&1 || die "the bare root has $tool: it is not bare"
done
apt-get update -qq
# As a user would: dependencies and recommends (apt's default).
apt-get install -y -qq "$deb" >/tmp/apt.log 2>&1 || {
  tail -20 /tmp/apt.log >&2
  die "apt-get install $deb failed"
}
command -v cipherbench >/dev/null || die "no cipherbench on PATH after the install"
say "installed: $(cipherbench --version); $(openssl version)"
for p in nginx iperf3 ip nft wrk swanctl softhsm2-util; do
  command -v "$p" >/dev/null 2>&1 || die "the package's recommends did not bring $p"
done

# The manual and the completion, with what a user has for them.
apt-get install -y -qq man-db bash-completion >>/tmp/apt.log 2>&1 || die "installing man-db failed"
man -w cipherbench >/dev/null || die "man cipherbench: no page"
man -P cat cipherbench-speed 2>/dev/null | grep -q -- '--check-openssl' ||
  die "man cipherbench-speed does not describe --check-openssl"
words=$(bash -c '
  . /usr/share/bash-completion/bash_completion
  _comp_load cipherbench 2>/dev/null || __load_completion cipherbench
  COMP_WORDS=(cipherbench sp); COMP_CWORD=1; COMP_LINE="cipherbench sp"; COMP_POINT=14
  "$(complete -p cipherbench | sed -E "s/.*-F ([^ ]+).*/\1/")" cipherbench sp cipherbench
  echo "${COMPREPLY[*]}"')
[[ " $words " == *" speed "* ]] || die "bash completion of 'cipherbench sp' gave '$words', not speed"
say "man pages and bash completion work"

# The platform suite against the installed binary, from outside any source tree.
cd /
export CIPHERBENCH_TEST_BIN=/usr/bin/cipherbench
CIPHERBENCH_EXPECT_OPENSSL=$(openssl version | awk '{print $2}')
export CIPHERBENCH_EXPECT_OPENSSL
# DIST_TESTS: names (or parts) of the tests to run, as cargo test takes them; all by
# default.
# shellcheck disable=SC2086
"$test_bin" --nocapture --test-threads 1 ${DIST_TESTS:-}

# doctor: complete after the install; a recommended package removed is named, with
# the command that brings it back.
cipherbench doctor >/tmp/doctor.txt || die "doctor failed after the install: $(cat /tmp/doctor.txt)"
grep -q "^tunnel *iperf3 *yes" /tmp/doctor.txt || die "doctor does not list iperf3 as here: $(cat /tmp/doctor.txt)"
apt-get remove -y -qq iperf3 >>/tmp/apt.log 2>&1 || die "apt-get remove iperf3 failed"
rc=0
cipherbench doctor >/tmp/doctor.txt || rc=$?
[[ $rc -eq 3 ]] || die "doctor exited $rc without iperf3, not 3: $(cat /tmp/doctor.txt)"
grep -q "^missing for \`cipherbench run\`: iperf3$" /tmp/doctor.txt &&
  grep -qE "^install them: apt-get install (.* )?iperf3( |$)" /tmp/doctor.txt ||
  die "doctor without iperf3 said: $(cat /tmp/doctor.txt)"
say "doctor names a removed package and the command that installs it"
