#!/usr/bin/env bash
# What a keeper costs per started child, beside the alternatives ARCHITECTURE.md
# weighs (issue 14): the wall time to start and reap a child that exits at once
# (/bin/true), and the memory of what sits beside a running child (`sleep`).
#
# Usage: scripts/keeper-cost.sh [N]     N children per row (default 500)
#   CIPHERBENCH=PATH   the binary whose keeper is measured
#                      (default target/release/cipherbench; `cargo build --release`)
#
# Rows (each N children, started one after another from this shell):
#   direct        /bin/true, nothing between (what `Spawn::direct` does)
#   keeper        `cipherbench __keep` (subreaper + parent-death signal) running it
#   exec          the keeper given a parent that is not its own: it exits before
#                 starting anything (what starting our own binary costs)
#   pidns         `unshare --pid --fork --kill-child` (root): a PID namespace
#                 whose init has a parent-death signal
#   cgroup        a fresh cgroup v2 per child, joined before exec, `cgroup.kill`
#                 written and the cgroup removed after (root, a writable cgroup2)
#   dirs          the cgroup row's steps on a plain directory (mkdir and rmdir are
#                 processes here too): cgroup minus dirs is the cgroup's own cost
# Per child: wall time, and CPU time of the processes involved (user + system,
# what `times` reports for reaped children; what the kernel does in this shell's
# fork is not in it). Compare rows, not absolutes, and quote the load printed
# first: on a shared machine the wall time mostly measures waiting for a CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-500}
bin=${CIPHERBENCH:-target/release/cipherbench}
[[ -x "$bin" ]] || { echo "keeper-cost.sh: no $bin (cargo build --release, or set CIPHERBENCH)" >&2; exit 2; }

echo "keeper-cost.sh: $(date -u +%FT%TZ), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), kernel $(uname -r), $n children per row, $bin"

# CPU time of this shell's reaped children (user + system), in microseconds:
# unlike wall time, it does not grow with the time spent waiting for a CPU.
# (`times` runs in this shell, not in a command substitution's subshell.)
times_file=$(mktemp)
trap 'rm -f "$times_file"' EXIT
children_cpu_us() { # sets cpu_us
  local t
  times >"$times_file"
  t=$(tail -1 "$times_file")
  cpu_us=$(awk -v t="$t" 'BEGIN {
    split(t, f, " "); s = 0
    for (i = 1; i <= 2; i++) { split(f[i], m, /m|s/); s += m[1] * 60 + m[2] }
    printf "%.0f", s * 1e6 }')
}

per_child() { # name, then the loop body as a function name
  local name=$1 body=$2 start end cpu0 cpu1
  children_cpu_us
  cpu0=$cpu_us
  start=$(date +%s%N)
  for ((i = 0; i < n; i++)); do "$body"; done
  end=$(date +%s%N)
  children_cpu_us
  cpu1=$cpu_us
  awk -v n="$n" -v ns=$((end - start)) -v cpu=$((cpu1 - cpu0)) -v name="$name" \
    'BEGIN {printf "%-8s %8.0f us wall, %6.0f us CPU per child\n", name, ns / n / 1000, cpu / n}'
}

# The keeper checks that its parent is the pid it is given, then reports the
# program's pid on fd 3.
direct() { /bin/true; }
keeper() { "$bin" __keep $$ -- /bin/true 3>/dev/null; }
exec_only() { "$bin" __keep 1 -- /bin/true 3>/dev/null 2>/dev/null || true; }
pidns() { unshare --pid --fork --kill-child /bin/true; }
cgroot=""
for c in /sys/fs/cgroup /sys/fs/cgroup/unified; do
  if [[ "$(stat -fc %T "$c" 2>/dev/null)" == cgroup2fs && -w "$c" ]]; then cgroot=$c; break; fi
done
dirs() {
  local d=${TMPDIR:-/tmp}/cb-keeper-cost-$$
  mkdir "$d"
  (echo "$BASHPID" >"$d/procs"; exec /bin/true)
  echo 1 >"$d/kill"
  rm -r "$d"
}
cgroup() {
  local cg=$cgroot/cb-keeper-cost-$$
  mkdir "$cg"
  (echo "$BASHPID" >"$cg/cgroup.procs"; exec /bin/true)
  echo 1 >"$cg/cgroup.kill"
  rmdir "$cg"
}

per_child direct direct
per_child keeper keeper
per_child exec exec_only
if [[ $EUID -eq 0 ]]; then per_child pidns pidns; else echo "pidns    skipped (needs root)"; fi
if [[ -n "$cgroot" && -e /proc/self/cgroup ]]; then
  # The row's own cgroup must not exist yet, and cgroup.kill must be there (5.14).
  mkdir "$cgroot/cb-keeper-cost-$$" && has_kill=$([[ -e "$cgroot/cb-keeper-cost-$$/cgroup.kill" ]] && echo 1 || echo 0)
  rmdir "$cgroot/cb-keeper-cost-$$"
  if ((has_kill)); then per_child cgroup cgroup; per_child dirs dirs; else echo "cgroup   skipped (no cgroup.kill: kernel < 5.14)"; fi
else
  echo "cgroup   skipped (no writable cgroup2 mount)"
fi

# Memory beside one running child: the keeper's (or unshare's) resident set and
# proportional share (PSS counts pages shared with other processes, such as the
# cipherbench binary's own text, by their share).
mem() { # name, pid
  local rss pss
  rss=$(awk '/^VmRSS/ {print $2}' "/proc/$2/status")
  pss=$(awk '/^Pss:/ {print $2}' "/proc/$2/smaps_rollup")
  printf '%-8s RSS %6s KiB, PSS %6s KiB\n' "$1" "$rss" "$pss"
}
"$bin" __keep $$ -- sleep 5 3>/dev/null &
k=$!
sleep 0.5
mem keeper "$k"
kill -USR1 "$k" 2>/dev/null || true  # its parent-death signal: it ends its program and exits
if [[ $EUID -eq 0 ]]; then
  unshare --pid --fork --kill-child sleep 5 &
  u=$!
  sleep 0.5
  mem unshare "$u"
  kill "$u" 2>/dev/null || true
fi
wait 2>/dev/null || true
