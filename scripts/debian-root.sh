#!/usr/bin/env bash
# A Debian root of another release (default: 13, trixie, with OpenSSL 3.5) under
# target/roots/<suite>/, made with debootstrap from the Debian mirror this machine's
# apt already uses, and the project run inside it: the second platform `make test`
# tests on.
#
#   scripts/debian-root.sh [--suite S] build
#       Makes the root, once: debootstrap (minbase), then the project's own
#       scripts/install-deps.sh run inside it (so its package names are checked on
#       that release too) and what the tests there use. Cached: rebuilt only when
#       this recipe (the script, install-deps.sh) changes. Prints the root's path.
#   scripts/debian-root.sh [--suite S] --bare build
#       A bare root (target/roots/<suite>-bare/): debootstrap minbase and the mirror,
#       nothing of the project's, no compiler: a server a package is installed on.
#   scripts/debian-root.sh [--suite S] --bare fresh [--bind DIR]... COMMAND...
#       Runs COMMAND in a throwaway copy of the bare root (an overlay whose changes
#       are removed with it), the DIRs bound at their own paths: what a test that
#       installs the package starts from, bare each time.
#   scripts/debian-root.sh [--suite S] run COMMAND...
#       Runs COMMAND inside the root (building it first if needed), in the
#       workspace, as root, in a private mount namespace: the root is bound onto
#       itself (network namespaces need it to be a mount point), /proc, /sys, /dev
#       and a fresh /run and /tmp are mounted, and the workspace and the Rust
#       toolchain (CARGO_HOME, RUSTUP_HOME) are bound at the same paths as here. Every
#       mount ends with COMMAND; nothing is left on the host.
#
# Needs root (or sudo), debootstrap (installed if missing) and a Debian mirror in
# /etc/apt/sources.list(.d). SUITE may also be bookworm, or any suite the mirror serves.
set -euo pipefail

say() { echo "debian-root: $*" >&2; }
die() {
  say "$*"
  exit 1
}

suite=trixie
bare=
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bare)
      bare=1
      shift
      ;;
    --suite)
      [[ $# -ge 2 ]] || die "--suite needs a Debian suite name, e.g. trixie"
      suite=$2
      shift 2
      ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    *) break ;;
  esac
done
[[ $# -ge 1 ]] || die "usage: scripts/debian-root.sh [--suite S] [--bare] build|run|fresh COMMAND..."
action=$1
shift
[[ "$suite" =~ ^[a-z]+$ ]] || die "suite '$suite' is not a Debian suite name (lower-case letters, e.g. trixie)"

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
target=${CARGO_TARGET_DIR:-$here/target}
roots="$target/roots"
root="$roots/$suite${bare:+-bare}"

if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null 2>&1 || die "needs root (debootstrap, chroot, mounts): run it as root, or install sudo"
  exec sudo --preserve-env=CARGO_TARGET_DIR,CARGO_HOME,RUSTUP_HOME,CARGO_INCREMENTAL,CI "$0" --suite "$suite" ${bare:+--bare} "$action" "$@"
fi

# The recipe: this script and the package lists (a bare root: this script). A root
# made from another recipe is made again.
if [[ -n "$bare" ]]; then
  recipe=$(sha256sum <"${BASH_SOURCE[0]}" | cut -c1-16)
else
  recipe=$(cat "${BASH_SOURCE[0]}" "$here/scripts/install-deps.sh" | sha256sum | cut -c1-16)
fi

# Packages the tests in the root use besides install-deps.sh's `run` set: tshark (the
# tunnel's wire check), procps (ps, pgrep in the leftovers checks), the engine-free
# PKCS#11 path where the release has it.
extra=(tshark procps pkcs11-provider)

mirror() {
  # The first Debian archive (not security) URI this machine's apt uses.
  local uri
  uri=$(grep -hsE '^(URIs:|deb )' /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
    /etc/apt/sources.list.d/*.sources 2>/dev/null |
    grep -v -- '-security' | grep -oE 'https?://[^ ]+' | head -1)
  [[ -n "$uri" ]] || die "no Debian mirror in /etc/apt/sources.list(.d): add one, or set DEBIAN_MIRROR"
  echo "${DEBIAN_MIRROR:-$uri}"
}

# Runs a command chrooted into ROOT (the first argument), in a private mount namespace
# whose mounts end with it: the root bound onto itself (network namespaces need it to
# be a mount point), /proc, /sys, /dev, a fresh /run and /tmp, and each directory
# after ROOT up to `--` bound at the same path inside. With OVERLAY set (a scratch
# directory), ROOT is first covered by an overlay whose changes go there.
enter() {
  local into=$1
  shift
  local binds=()
  while [[ $1 != -- ]]; do
    binds+=("$1")
    shift
  done
  shift
  local path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
  unshare --mount --propagation private -- bash -euo pipefail -c '
    into=$1 n=$2
    shift 2
    binds=("${@:1:$n}")
    shift "$n"
    if [[ -n "${OVERLAY:-}" ]]; then
      mkdir -p "$OVERLAY/upper" "$OVERLAY/work"
      mount -t overlay overlay -o "lowerdir=$into,upperdir=$OVERLAY/upper,workdir=$OVERLAY/work" "$into"
    fi
    mount --bind "$into" "$into"
    mount -t proc proc "$into/proc"
    mount --rbind /sys "$into/sys"
    mount --rbind /dev "$into/dev"
    mount -t tmpfs -o mode=755 tmpfs "$into/run"
    mount -t tmpfs -o mode=1777 tmpfs "$into/tmp"
    for d in "${binds[@]}"; do
      [[ -d "$d" ]] || continue
      mkdir -p "$into$d"
      mount --bind "$d" "$into$d"
    done
    cd /
    exec chroot "$into" "$@"
  ' bash "$into" "${#binds[@]}" "${binds[@]}" /usr/bin/env -i HOME=/root LANG=C.UTF-8 \
    TERM="${TERM:-dumb}" DEBIAN_FRONTEND=noninteractive PATH="$path" "$@"
}

in_root() { enter "$root" -- "$@"; }

build() {
  if [[ -f "$root/.cipherbench-recipe" && "$(cat "$root/.cipherbench-recipe")" == "$recipe" ]]; then
    echo "$root"
    return
  fi
  if ! command -v debootstrap >/dev/null 2>&1; then
    say "installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
  fi
  local url started
  url=$(mirror)
  started=$(date +%s)
  mkdir -p "$roots"
  # Build beside the old root and swap at the end: an interrupted build leaves no
  # half root that a later run would take for a whole one.
  local fresh="$roots/.${root##*/}.new"
  rm -rf --one-file-system "$fresh"
  trap 'rm -rf --one-file-system "$fresh"' EXIT
  say "debootstrap $suite (minbase) into $fresh"
  debootstrap --variant=minbase --include=ca-certificates "$suite" "$fresh" "$url" \
    >"$roots/.${root##*/}.log" 2>&1 || die "debootstrap failed: see $roots/.${root##*/}.log"
  # The root's apt sees the same mirror, for install-deps.sh.
  echo "deb $url $suite main" >"$fresh/etc/apt/sources.list"
  cp /etc/resolv.conf "$fresh/etc/resolv.conf" 2>/dev/null || true
  # No service starts inside the root (nginx, ssh, strongSwan's packages try to).
  printf '#!/bin/sh\nexit 101\n' >"$fresh/usr/sbin/policy-rc.d"
  chmod 755 "$fresh/usr/sbin/policy-rc.d"
  if [[ -n "$bare" ]]; then
    echo "$recipe" >"$fresh/.cipherbench-recipe"
    rm -rf --one-file-system "$root"
    mv "$fresh" "$root"
    trap - EXIT
    say "bare $suite root ready in $(($(date +%s) - started)) s"
    echo "$root"
    return
  fi
  mkdir -p "$fresh/var/tmp/cipherbench-deps"
  cp "$here/scripts/install-deps.sh" "$fresh/var/tmp/cipherbench-deps/"
  local root_was=$root
  root=$fresh
  say "installing the project's packages in the root (install-deps.sh run)"
  # install-deps.sh ends by checking for cargo, which the root gets bound from the
  # host at run time: give it a stand-in that says so.
  printf '#!/bin/sh\necho "cargo: bound from the host at run time"\n' >"$fresh/usr/local/bin/cargo"
  chmod 755 "$fresh/usr/local/bin/cargo"
  in_root bash /var/tmp/cipherbench-deps/install-deps.sh run >>"$roots/.$suite.log" 2>&1 ||
    die "install-deps.sh run failed inside the $suite root: see $roots/.$suite.log"
  rm -f "$fresh/usr/local/bin/cargo"
  local available=()
  for p in "${extra[@]}"; do
    if in_root apt-cache show "$p" >/dev/null 2>&1; then available+=("$p"); fi
  done
  in_root apt-get install -y -qq --no-install-recommends "${available[@]}" >>"$roots/.$suite.log" 2>&1 ||
    die "installing ${available[*]} in the $suite root failed: see $roots/.$suite.log"
  in_root apt-get clean
  rm -rf "$fresh/var/tmp/cipherbench-deps"
  root=$root_was
  echo "$recipe" >"$fresh/.cipherbench-recipe"
  rm -rf --one-file-system "$root"
  mv "$fresh" "$root"
  trap - EXIT
  say "$suite root ready in $(($(date +%s) - started)) s: $(in_root openssl version)"
  echo "$root"
}

run() {
  [[ $# -ge 1 ]] || die "run needs a command"
  build >/dev/null
  local cargo_home=${CARGO_HOME:-$HOME/.cargo}
  local rustup_home=${RUSTUP_HOME:-$HOME/.rustup}
  enter "$root" "$here" "$cargo_home" "$rustup_home" -- \
    PATH="$cargo_home/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    CARGO_HOME="$cargo_home" RUSTUP_HOME="$rustup_home" ${CI:+CI="$CI"} \
    ${CARGO_INCREMENTAL:+CARGO_INCREMENTAL="$CARGO_INCREMENTAL"} \
    CIPHERBENCH_PLATFORM="debian-$suite" \
    bash -c 'cd "$0" && exec "$@"' "$here" "$@"
}

# COMMAND in a throwaway overlay of the bare root, with DIRs bound; the overlay's
# changes are removed when it ends (and by the next `fresh` where a kill left them).
fresh() {
  [[ -n "$bare" ]] || die "fresh runs in a bare root: add --bare"
  local binds=()
  while [[ $# -gt 0 && "$1" == --bind ]]; do
    [[ $# -ge 2 && -d "$2" ]] || die "--bind needs a directory"
    binds+=("$(cd "$2" && pwd)")
    shift 2
  done
  [[ $# -ge 1 ]] || die "fresh needs a command"
  build >/dev/null
  rm -rf --one-file-system "$roots/.$suite-fresh."*
  # Global: the EXIT trap runs after this function has returned.
  scratch=$(mktemp -d "$roots/.$suite-fresh.XXXXXX")
  trap 'rm -rf --one-file-system "$scratch"' EXIT
  local rc=0
  OVERLAY=$scratch enter "$root" "${binds[@]}" -- CIPHERBENCH_PLATFORM="debian-$suite-bare" "$@" || rc=$?
  return "$rc"
}

case "$action" in
  build) build ;;
  run)
    [[ -z "$bare" ]] || die "run is for the project's root: use fresh with --bare"
    run "$@"
    ;;
  fresh) fresh "$@" ;;
  *) die "unknown action '$action': build or run" ;;
esac
