#!/usr/bin/env bash
# Issue 12's comparison in one command, sized to the machine it runs on:
#  A. cipherbench's load generator against wrk on the same nginx (`cipherbench tls
#     serve`), alternating rounds, at 1, 4, 8, 16... generator CPUs (as many as fit
#     beside nginx): requests/s of each, nginx's CPU per response under each (its
#     workers' schedstat over the bytes they wrote) and under cipherbench open loop at
#     the rate wrk reached in the same round (`tls sweep --rate`: one load for both),
#     the busy time of the CPUs in use per response (whoever's context: on loopback
#     the kernel sends nginx's queued data in the context of whichever side opens the
#     window, so nginx's own share depends on the client's timing), each generator thread's CPU and
#     wrk's, and requests per generator-CPU-second;
#  B. the core-count sweep (`tls sweep --cores 1,2,4,...`): Gbit/s, per core, the
#     clients the search chose, what limited each point, nginx and generator CPU;
#  C. the tunnel against wireguard-go at -l 1220 and iperf3's default length, one TCP
#     flow, ChaCha20-Poly1305 on both (aes128-gcm beside), each gateway thread's CPU
#     (root; wireguard-go built from its Go module, or WG_GO=path).
# Writes one Markdown table to stdout and to $OUT/many-cores.md (with the raw JSON).
# It starts by printing its plan (the rows, the core counts, the runs) and how long it
# should take; PLAN=N prints the plan for a machine of N CPUs and exits, running nothing.
# Usage: scripts/bench-many-cores.sh
# Env: BIN (target/release/cipherbench) OUT (a new temp dir, kept) SUITE (AES128-GCM-SHA256)
#      SIZE (16MiB) ROUNDS (3) SECS (4) PER_CONN (4 clients per generator CPU)
#      SWEEP_WINDOW (5s) SWEEP_PROBE (2s) PARTS ("gen sweep tunnel") WG_GO WG_VERSION
#      WG_CACHE (where wireguard-go is built once per version: ~/.cache/cipherbench/...)
#      PRIO (empty; on a machine other programs keep busy, PRIO="chrt -f 10" runs nginx,
#      wrk and cipherbench ahead of them, so each round measures the parts, not the crowd)
#      PLAN (empty; a number of CPUs: print the plan for such a machine and exit)
#      SERVE_VARIANT (accel; the variant of part A's nginx: noaesni makes nginx the limit
#      under either client, so their costs to it are compared where the server, not
#      wrk's one CPU, is what runs out)
#      VERIFY (sampled; how cipherbench reads responses in parts A and B: `all`
#      decrypts every byte as wrk does, so the two readers are compared like for like)
set -uo pipefail
PARTS=${PARTS-"gen sweep tunnel"}
[[ -n ${PARTS// /} ]] || { echo "bench-many-cores: PARTS is empty (gen, sweep, tunnel; unset for all three)" >&2; exit 2; }
for part in $PARTS; do
  [[ $part == @(gen|sweep|tunnel) ]] ||
    { echo "bench-many-cores: unknown part '$part' in PARTS (gen, sweep, tunnel)" >&2; exit 2; }
done
SUITE=${SUITE:-AES128-GCM-SHA256}; SIZE=${SIZE:-16MiB}; ROUNDS=${ROUNDS:-3}; SECS=${SECS:-4}
PER_CONN=${PER_CONN:-4}; SWEEP_WINDOW=${SWEEP_WINDOW:-5s}; SWEEP_PROBE=${SWEEP_PROBE:-2s}
PRIO=${PRIO:-}; SERVE_VARIANT=${SERVE_VARIANT:-accel}; VERIFY=${VERIFY:-sampled}
[[ $VERIFY == @(sampled|all) ]] || { echo "bench-many-cores: VERIFY is sampled or all, not '$VERIFY'" >&2; exit 2; }
for v in ROUNDS SECS PER_CONN; do
  [[ ${!v} =~ ^[1-9][0-9]{0,3}$ ]] || { echo "bench-many-cores: $v must be a whole number from 1 to 9999, not '${!v}'" >&2; exit 2; }
done
# Whole seconds of a duration such as 5s, 1500ms or 2m (rounded up), for the plan.
secs_of() { python3 -c 'import math, re, sys; m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m)?", sys.argv[1])
print(math.ceil(float(m[1]) * {"ms": 0.001, "s": 1, "m": 60, None: 1}[m[2]]) if m else "")' "$1"; }
sweep_window_s=$(secs_of "$SWEEP_WINDOW"); sweep_probe_s=$(secs_of "$SWEEP_PROBE")
[[ -n $sweep_window_s && -n $sweep_probe_s ]] ||
  { echo "bench-many-cores: SWEEP_WINDOW and SWEEP_PROBE are durations such as 5s or 1500ms" >&2; exit 2; }
if [[ -n ${PLAN:-} ]]; then
  [[ $PLAN =~ ^[1-9][0-9]{0,4}$ ]] || { echo "bench-many-cores: PLAN is a number of CPUs, not '$PLAN'" >&2; exit 2; }
  mapfile -t CPUS < <(seq 0 $((PLAN - 1)))
else
  BIN=$(realpath "${BIN:-$(dirname "$0")/../target/release/cipherbench}" 2>/dev/null) || true
  [[ -f ${BIN:-} && -x $BIN ]] ||
    { echo "bench-many-cores: no cipherbench binary at ${BIN:-target/release/cipherbench}: build first (cargo build --release) or set BIN" >&2; exit 1; }
  [[ " $PARTS " != *" gen "* ]] || command -v wrk >/dev/null ||
    { echo "bench-many-cores: wrk is missing (scripts/install-deps.sh, or apt-get install wrk)" >&2; exit 1; }
  # The CPUs this process may use, in order (taskset's list, expanded).
  mapfile -t CPUS < <(python3 -c 'import os; print("\n".join(map(str, sorted(os.sched_getaffinity(0)))))')
fi
N=${#CPUS[@]}

# Part A's rows, "nginx-cores generator-CPUs": 1+1, 1+4, then nginx g/2 beside g, as
# many as fit the machine.
gen_rows() { local g s; for g in 1 4 8 16 32 64 128; do
  if ((g <= 4)); then s=1; else s=$((g / 2)); fi
  ((s + g <= N)) && echo "$s $g"; done; }
# Part B's core counts: powers of two up to the first that leaves no CPU for the
# generator (the sweep reports that one as not measured, so the table says where it stops).
sweep_cores() { local c=1; while ((c <= 128)); do echo "$c"; ((c >= N)) && break; ((c *= 2)); done; }
# The plan, and its length from the steps' own times (measured on a 2-vCPU guest,
# BENCHMARKS.md section 7: a round of A takes its SECS and about a second more, nginx
# starts in about 3 s, a sweep point takes about four probes and its window, part C's
# runs take their SECS and the set-up of namespaces and gateways about 10 s a length).
plan() {
  local rows=() cores=() fit=() a=0 b=0 c=0 x
  mapfile -t rows < <(gen_rows); mapfile -t cores < <(sweep_cores)
  for x in "${cores[@]}"; do ((x < N)) && fit+=("$x"); done
  [[ " $PARTS " == *" gen "* ]] && a=$(( ${#rows[@]} * (ROUNDS * 3 * (SECS + 1) + 3) ))
  [[ " $PARTS " == *" sweep "* ]] && b=$(( ${#fit[@]} * (4 * (sweep_probe_s + 2) + 1 + sweep_window_s) ))
  [[ " $PARTS " == *" tunnel "* ]] && c=$(( 2 * (ROUNDS * SECS * 3 + 10) + 5 ))
  local r what=(); r=$(printf '%s, ' "${rows[@]/ /+}"); r=${r%, }
  [[ " $PARTS " == *" gen "* ]] &&
    what+=("A. nginx+generator CPUs ${r:-none (needs 2 CPUs)}: $ROUNDS rounds of wrk, ours and ours at wrk's rate, ${SECS} s each;")
  [[ " $PARTS " == *" sweep "* ]] &&
    what+=("B. tls sweep --cores $(join "${cores[@]}") (measured where the generator keeps a CPU: $(join "${fit[@]}"));")
  [[ " $PARTS " == *" tunnel "* ]] &&
    what+=("C. wireguard-go and cipherbench's 2 transforms at 2 lengths, $ROUNDS runs of ${SECS} s (a first wireguard-go build adds its download);")
  echo "plan for $N CPU(s): ${what[*]} about $((a + b + c)) s (A $a, B $b, C $c)"
}
join() { local IFS=,; echo "$*"; }
if [[ -n ${PLAN:-} ]]; then plan; exit 0; fi

OUT=${OUT:-$(mktemp -d /tmp/bench-many-cores.XXXXXX)}; mkdir -p "$OUT" || exit 1
started=$(date +%s)
# Every program this script leaves running is told when the script dies, also of
# kill -9 (PR_SET_PDEATHSIG): cipherbench gets SIGINT, as Ctrl-C, and stops its nginx;
# wireguard-go and iperf3 get SIGTERM. (setpriv, util-linux 2.33 and later.)
ORPHAN_INT=() ORPHAN_TERM=()
if setpriv --pdeathsig INT true 2>/dev/null; then
  ORPHAN_INT=(setpriv --pdeathsig INT); ORPHAN_TERM=(setpriv --pdeathsig TERM)
fi
size_bytes=$(python3 -c "import sys; s='$SIZE'; u={'KiB':1<<10,'MiB':1<<20,'GiB':1<<30}; n=[k for k in u if s.endswith(k)]; print(int(s[:-3])*u[n[0]] if n else int(s))")
srv=
cleanup() { [[ -n $srv ]] && { kill -INT "$srv" 2>/dev/null; wait "$srv" 2>/dev/null; }; srv=; }
trap cleanup EXIT
trap 'cleanup; exit 130' INT
trap 'cleanup; exit 143' TERM
# cipherbench stops and cleans up by itself on Ctrl-C and exits 130; bash, not seeing
# a death by SIGINT, would run on: a child's 130 stops the script too.
stop_if_interrupted() { (($1 == 130)) && { echo "bench-many-cores: interrupted" >&2; exit 130; }; return 0; }
md() { echo "$*" | tee -a "$OUT/many-cores.md"; }

: > "$OUT/many-cores.md"
md "# Many cores: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $N CPU(s), $(uname -r), $(date -u +%FT%TZ)"
md ""
md "load at start: $(cut -d' ' -f1-3 /proc/loadavg)${PRIO:+ (run under $PRIO)}; parts: $PARTS"
md "$(plan)"
[[ " $PARTS " == *" gen "* || " $PARTS " == *" sweep "* ]] &&
  md "TLS: $SUITE, $SIZE, keep-alive off; nginx variant $SERVE_VARIANT; $ROUNDS alternating rounds of ${SECS} s (medians, min-max)"

# Descendant PIDs of $1 (nginx runs under cipherbench's keeper).
desc() { local p=$1 c; echo "$p"; for c in $(cat /proc/"$p"/task/*/children 2>/dev/null); do desc "$c"; done; }
workers() { for p in $(desc "$1"); do grep -qa "nginx: worker" /proc/"$p"/cmdline 2>/dev/null && echo "$p"; done; }
# Busy time (ms) of CPUs $1 (comma-separated), from /proc/stat: everything but idle and
# iowait, in whatever context (nginx, the client, softirq work of either's sockets).
cpus_busy_ms() { awk -v list="$1" -v hz="$(getconf CLK_TCK)" 'BEGIN { n = split(list, l, ","); for (i = 1; i <= n; i++) want["cpu" l[i]] = 1 }
  ($1 in want) { b += $2 + $3 + $4 + $7 + $8 + $9 } END { printf "%.0f", b * 1000 / hz }' /proc/stat; }
# Sum over nginx workers: CPU ns (schedstat) and bytes written (wchar).
nginx_stat() { local c=0 b=0 w; for w in $WORKERS; do
  c=$((c + $(cut -d' ' -f1 /proc/"$w"/schedstat))); b=$((b + $(awk '/^wchar/ {print $2}' /proc/"$w"/io))); done; echo "$c $b"; }

gen_part() {
  md ""
  md "## A. Load generator vs wrk (same nginx, alternating rounds; cipherbench --verify $VERIFY)"
  md ""
  md "| nginx CPUs | generator CPUs | clients | wrk req/s | cipherbench req/s | ratio (round by round) | nginx ms CPU per response, wrk / cipherbench | at wrk's rate (open loop): req/s, nginx ms per response | ms of the CPUs in use per response (nginx's and the client's, any context), wrk / cipherbench / at wrk's rate | wrk CPU (of its CPUs) | cipherbench CPU per thread | cipherbench req per generator-CPU-s |"
  md "|---|---|---|---|---|---|---|---|---|---|---|---|"
  local rows=() g s
  mapfile -t rows < <(gen_rows)
  ((${#rows[@]})) || { md "| - | - | - | needs 2 CPUs | | | | | | | | |"; return 1; }
  for row in "${rows[@]}"; do
    set -- $row; s=$1; g=$2; conc=$((g * PER_CONN))
    gcpus=$(join "${CPUS[@]:s:g}"); used=$(join "${CPUS[@]:0:s+g}")
    : > "$OUT/url"
    $PRIO "${ORPHAN_INT[@]}" "$BIN" tls serve --suite "$SUITE" --sizes "$SIZE" --cores "$s" --variant "$SERVE_VARIANT" > "$OUT/url" 2> "$OUT/serve.err" & srv=$!
    for _ in $(seq 300); do [[ -s $OUT/url ]] && break; sleep 0.05; done
    url=$(head -1 "$OUT/url")
    kill -0 "$srv" 2>/dev/null || { wait "$srv"; stop_if_interrupted $?; }
    [[ -n $url ]] || { cat "$OUT/serve.err" >&2; md "| $s | $g | $conc | tls serve failed: $(tail -1 "$OUT/serve.err") |"; cleanup; continue; }
    sleep 0.3; WORKERS=$(workers "$srv")
    : > "$OUT/rounds-$s-$g"
    for r in $(seq "$ROUNDS"); do
      for who in wrk ours paced; do
        kill -0 "$srv" 2>/dev/null || { wait "$srv"; stop_if_interrupted $?; md "| $s | $g | $conc | tls serve stopped: $(tail -1 "$OUT/serve.err") |"; break 2; }
        set -- $(nginx_stat); c0=$1; b0=$2; m0=$(cpus_busy_ms "$used")
        if [[ $who == wrk ]]; then
          out=$( { /usr/bin/time -f "TIME %U %S" $PRIO taskset -c "$gcpus" wrk -t"$g" -c"$conc" -d"${SECS}s" \
                     -H 'Connection: close' "$url"; } 2>&1 )
          rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
          [[ -n $rps ]] || { echo "bench-many-cores: wrk gave no figure: $(tail -1 <<<"$out")" >&2; rps=nan; }
          gen=$(awk -v g="$g" -v s="$SECS" '/^TIME/ {printf "%.2f", ($2+$3)/(g*s)}' <<<"$out"); per=-
          wrk_rps=$rps
        else
          # ours: closed loop at the same clients; paced: open loop at the rate wrk
          # just reached, so nginx's CPU per response is compared at one load.
          if [[ $who == ours ]]; then load=(--concurrency "$conc"); else load=(--rate "$wrk_rps"); fi
          if [[ $who == paced && $wrk_rps == nan ]]; then
            : > "$OUT/$who-$s-$g-$r.json"   # no rate to pace at: the round is left out
          else
            $PRIO "${ORPHAN_INT[@]}" "$BIN" -q tls sweep --server "$url" --suites "$SUITE" --generator-cpus "$gcpus" "${load[@]}" \
              --verify "$VERIFY" --window "${SECS}s" --warmup 0s --no-save --json > "$OUT/$who-$s-$g-$r.json" 2>> "$OUT/ours.err"
            stop_if_interrupted $?
          fi
          read -r rps gen per < <(python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))["sweep"]["points"][0]
t=p.get("generator_cpu_per_thread",[]); print(round(p["requests_per_sec"],2), round(p["generator_cpu"],2), "/".join("%.2f"%c for c in t) or "-")' "$OUT/$who-$s-$g-$r.json" 2>/dev/null || echo "nan nan -")
        fi
        set -- $(nginx_stat); m1=$(cpus_busy_ms "$used")
        ms=$(python3 -c "r=($2-$b0)/$size_bytes; print(round(($1-$c0)/1e6/r,2) if r>0 else 'nan')")
        mach=$(python3 -c "r=($2-$b0)/$size_bytes; print(round(($m1-$m0)/r,2) if r>0 else 'nan')")
        echo "$who $rps $ms $gen $per $mach" >> "$OUT/rounds-$s-$g"
        printf 'nginx %s, generator %s (%s clients) round %d %s: %s req/s, nginx %s ms/response, CPUs %s %s ms/response, generator CPU %s %s\n' \
          "$s" "$g" "$conc" "$r" "$who" "$rps" "$ms" "$used" "$mach" "$gen" "$per" >&2
      done
    done
    cleanup
    python3 - "$OUT/rounds-$s-$g" "$s" "$g" "$conc" "$SECS" <<'EOF' | tee -a "$OUT/many-cores.md"
import sys, statistics as st
f, s, g, conc, secs = sys.argv[1], *sys.argv[2:]
rows = [l.split() for l in open(f)]
def col(who, i):
    return [float(r[i]) for r in rows if r[0] == who and r[i] not in ("nan", "-")]
def med(v):
    return st.median(v) if v else float("nan")
def rng(v):
    return f"{med(v):.1f} ({min(v):.1f}-{max(v):.1f})" if v else "-"
def spread(v, unit=""):
    return f"{med(v):.2f}{unit} ({min(v):.2f}-{max(v):.2f})" if v else "-"
def paired(a, b, i):
    # b's figure over a's, round by round (each round wrote one row of each), leaving
    # out a round where either has none: pairing col()'s lists would shift the rounds.
    xs, ys = [r for r in rows if r[0] == a], [r for r in rows if r[0] == b]
    return [float(y[i]) / float(x[i]) for x, y in zip(xs, ys)
            if "-" not in (x[i], y[i]) and "nan" not in (x[i], y[i]) and float(x[i]) > 0]
w, o = col("wrk", 1), col("ours", 1)
ratios = paired("wrk", "ours", 1)
# Each generator thread's median over the rounds.
threads = [[float(c) for c in r[4].split("/")] for r in rows if r[0] == "ours" and r[4] != "-"]
per = "/".join(f"{med([t[i] for t in threads if i < len(t)]):.2f}" for i in range(max(map(len, threads)))) if threads else "-"
go = col("ours", 3)
rpc = [float(r[1]) / (float(r[3]) * int(g)) for r in rows
       if r[0] == "ours" and "nan" not in (r[1], r[3]) and float(r[3]) > 0]
# Paced: per round, nginx's cost at wrk's rate over its cost under wrk.
pm = col("paced", 2)
rel = paired("wrk", "paced", 2)
paced = f"{med(col('paced', 1)):.1f}, {med(pm):.1f} ({spread(rel, 'x')} wrk's)" if rel else "-"
line = f"| {s} | {g} | {conc} | {rng(w)} | {rng(o)} | {spread(ratios)} | {med(col('wrk', 2)):.1f} / {med(col('ours', 2)):.1f} | {paced} | {med(col('wrk', 5)):.1f} / {med(col('ours', 5)):.1f} / {med(col('paced', 5)):.1f} | {med(col('wrk', 3)):.2f} | {per} | {med(rpc):.0f} |"
print(line)
EOF
  done
}

sweep_part() {
  md ""
  md "## B. Core-count sweep (tls sweep --cores)"
  md ""
  local cores=()
  mapfile -t cores < <(sweep_cores)
  $PRIO "${ORPHAN_INT[@]}" "$BIN" -q tls sweep --cores "$(join "${cores[@]}")" --suites "$SUITE" --sizes "$SIZE" --variants accel \
    --verify "$VERIFY" --window "$SWEEP_WINDOW" --probe "$SWEEP_PROBE" --warmup 1s --results "$OUT/sweep" > /dev/null 2> "$OUT/sweep.err"
  stop_if_interrupted $?
  local run=$OUT/sweep/run.json; [[ -s $run ]] || run=
  [[ -n $run ]] || { md "sweep failed: $(tail -1 "$OUT/sweep.err")"; return 1; }
  python3 - "$run" <<'EOF' | tee -a "$OUT/many-cores.md"
import json, sys
r = json.load(open(sys.argv[1]))
s = r["tls"]["sweep"]
print(f"`cipherbench tls sweep --cores {','.join(map(str, s['config']['cores']))}`, {s['config']['window_ns']/1e9:.0f} s windows\n")
print("| nginx cores | Gbit/s | Gbit/s per core | per nginx-CPU-second | clients (probes from) | limit | nginx CPU | generator CPU per thread | why |")
print("|---|---|---|---|---|---|---|---|---|")
for p in sorted(s["points"], key=lambda p: p["cores"]):
    g = p["throughput_bytes_per_sec"] * 8 / 1e9
    cpu = (p.get("server_cpu") or {}).get("total")
    used = p["cores"] * cpu if cpu else None
    se = p.get("search") or {}
    per = "/".join(f"{c:.2f}" for c in p.get("generator_cpu_per_thread", []))
    print(f"| {p['cores']} | {g:.2f} | {g/p['cores']:.2f} | {g/used:.2f} | {p['concurrency']} ({se.get('started_at','-')}) | {se.get('limit','-')} | {cpu*100 if cpu else 0:.0f} % | {per} | {se.get('explanation','').replace('|','/')} |" if used else f"| {p['cores']} | {g:.2f} | {g/p['cores']:.2f} | - | {p['concurrency']} | {se.get('limit','-')} | - | {per} | {se.get('explanation','')} |")
for k in s.get("skipped_cores", []):
    print(f"| {k['cores']} | not measured | | | | | | | {k['reason']} |")
for w in r.get("warnings", []):
    if w.get("kind") in ("sweep_curve", "generator_saturated", "server_contended"):
        print(f"\nwarning ({w['kind']}): {w['message']}")
EOF
}

# C. The tunnel against wireguard-go, one iperf3 TCP flow at -l 1220 and at iperf3's
# default length: wireguard-go (built from its Go module, or $WG_GO) between two
# namespaces of this script over a veth, then `cipherbench tunnel` (ChaCha20-Poly1305,
# the same cipher, and aes128-gcm beside it) at its defaults (gateway threads sized to
# the machine, pinned); $ROUNDS runs of $SECS s each. wireguard-go runs unpinned, as
# users run it (the Go runtime spreads it over every CPU); its CPU is the process's
# utime+stime over the run. Root only (namespaces).
WG_VERSION=${WG_VERSION:-v0.0.0-20260522210424-ecfc5a8d5446}
wg_ns=(); wg_pids=()
wg_cleanup() {
  local p n
  for p in "${wg_pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  for n in "${wg_ns[@]}"; do ip netns del "$n" 2>/dev/null; done
  wg_pids=(); wg_ns=()
}
# The wireguard-go binary: $WG_GO, or built into $OUT/wg-bin with the Go toolchain.
# Built once per version into the user's cache (WG_CACHE), not per run.
WG_CACHE=${WG_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cipherbench/wireguard-go-$WG_VERSION}
wg_binary() {
  if [[ -n ${WG_GO:-} ]]; then [[ -f $WG_GO && -x $WG_GO ]] && { echo "$WG_GO"; return; }; return 1; fi
  [[ -x $WG_CACHE/bin/wireguard ]] && { echo "$WG_CACHE/bin/wireguard"; return; }
  command -v go >/dev/null || return 1
  mkdir -p "$WG_CACHE" || return 1
  GOBIN=$WG_CACHE/bin GOPATH=${GOPATH:-$WG_CACHE/gopath} GOFLAGS=-modcacherw \
    go install "golang.zx2c4.com/wireguard@$WG_VERSION" > "$OUT/wg-build.log" 2>&1 || return 1
  echo "$WG_CACHE/bin/wireguard"
}
# CPU seconds (utime+stime) of process $1.
cpu_s() { awk -v t="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); print ($12 + $13) / t }' /proc/"$1"/stat 2>/dev/null || echo 0; }
# One wireguard-go run of iperf3 TCP from namespace $2 (length $1, empty for
# iperf3's own): prints "bits/s sender-cores receiver-cores".
wg_run() {
  local len=$1 s=$2 c0s c0r json=$OUT/wg-iperf3.json
  c0s=$(cpu_s "${wg_pids[0]}"); c0r=$(cpu_s "${wg_pids[1]}")
  ip netns exec "$s" iperf3 -c 10.77.0.2 -t "$SECS" -J ${len:+-l "$len"} > "$json" 2>&1
  python3 - "$json" "$SECS" "$c0s" "$(cpu_s "${wg_pids[0]}")" "$c0r" "$(cpu_s "${wg_pids[1]}")" <<'PY'
import json, sys
secs, a0, a1, b0, b1 = map(float, sys.argv[2:])
try:
    bps = json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"]
except Exception:
    bps = 0
print(bps, (a1 - a0) / secs, (b1 - b0) / secs)
PY
}
tunnel_part() {
  md ""
  md "## C. Tunnel vs wireguard-go (one iperf3 TCP flow)"
  md ""
  if ((EUID != 0)); then md "not run: the tunnel needs root (namespaces)."; return 1; fi
  local m
  for m in iperf3 wg; do
    command -v "$m" >/dev/null || { md "not run: $m is missing (apt-get install ${m/wg/wireguard-tools})."; return 1; }
  done
  local wg; wg=$(wg_binary) || { md "not run: no wireguard-go (set WG_GO, or install Go >= 1.21, which fetches the 1.23 toolchain golang.zx2c4.com/wireguard@$WG_VERSION needs; log: $OUT/wg-build.log)."; return 1; }
  local s=cbwg-$$-s r=cbwg-$$-r is=cbwg$$s ir=cbwg$$r n p
  # Namespaces of an earlier run of this script that died (kill -9): what runs in
  # them is stopped and they go (their veth and wireguard devices with them).
  for n in $(ip netns list | awk '{print $1}'); do
    [[ $n =~ ^cbwg-([0-9]+)-[sr]$ ]] || continue
    kill -0 "${BASH_REMATCH[1]}" 2>/dev/null && continue
    p=$(ip netns pids "$n" 2>/dev/null); [[ -n $p ]] && kill $p 2>/dev/null
    ip netns del "$n" 2>/dev/null && echo "bench-many-cores: removed $n, left by an earlier run that was killed" >&2
  done
  trap 'wg_cleanup; cleanup' EXIT
  trap 'wg_cleanup; cleanup; exit 130' INT TERM
  wg_ns=("$s" "$r")
  ip netns add "$s" && ip netns add "$r" &&
    ip link add "cbwg$$a" netns "$s" type veth peer name "cbwg$$b" netns "$r" &&
    ip -n "$s" addr add 198.18.2.1/30 dev "cbwg$$a" && ip -n "$r" addr add 198.18.2.2/30 dev "cbwg$$b" &&
    ip -n "$s" link set lo up && ip -n "$r" link set lo up &&
    ip -n "$s" link set "cbwg$$a" up && ip -n "$r" link set "cbwg$$b" up ||
    { md "not run: the namespaces could not be set up."; wg_cleanup; return 1; }
  ( umask 077; wg genkey > "$OUT/wg-s.key"; wg genkey > "$OUT/wg-r.key" )
  LOG_LEVEL=error ip netns exec "$s" "${ORPHAN_TERM[@]}" "$wg" -f "$is" > "$OUT/wg-s.log" 2>&1 & wg_pids+=($!)
  LOG_LEVEL=error ip netns exec "$r" "${ORPHAN_TERM[@]}" "$wg" -f "$ir" > "$OUT/wg-r.log" 2>&1 & wg_pids+=($!)
  local i
  for i in $(seq 50); do [[ -S /var/run/wireguard/$is.sock && -S /var/run/wireguard/$ir.sock ]] && break; sleep 0.1; done
  ip netns exec "$s" wg set "$is" listen-port 51820 private-key "$OUT/wg-s.key" \
      peer "$(wg pubkey < "$OUT/wg-r.key")" allowed-ips 10.77.0.2/32 endpoint 198.18.2.2:51820 &&
    ip netns exec "$r" wg set "$ir" listen-port 51820 private-key "$OUT/wg-r.key" \
      peer "$(wg pubkey < "$OUT/wg-s.key")" allowed-ips 10.77.0.1/32 endpoint 198.18.2.1:51820 &&
    ip -n "$s" addr add 10.77.0.1/24 dev "$is" && ip -n "$r" addr add 10.77.0.2/24 dev "$ir" &&
    ip -n "$s" link set "$is" up && ip -n "$r" link set "$ir" up ||
    { md "not run: wireguard-go did not come up (logs: $OUT/wg-*.log)."; wg_cleanup; return 1; }
  ip netns exec "$r" "${ORPHAN_TERM[@]}" iperf3 -s > /dev/null 2>&1 & wg_pids+=($!)
  sleep 0.5
  md "wireguard-go $WG_VERSION, MTU $(ip -n "$s" -o link show "$is" | sed -n 's/.* mtu \([0-9]*\).*/\1/p'), unpinned; cipherbench tunnel at its defaults; $ROUNDS runs of $SECS s each (median, min-max)"
  md ""
  md "| iperf3 length | wireguard-go Gbit/s | wireguard-go cores, sender / receiver | cipherbench chacha20-poly1305 Gbit/s | vs wireguard-go | cipherbench aes128-gcm Gbit/s | vs wireguard-go | cipherbench gateway threads (CPU) |"
  md "|---|---|---|---|---|---|---|---|"
  local len
  for len in 1220 default; do
    local l=$len; [[ $len == default ]] && l=
    : > "$OUT/wg-$len.txt"
    for i in $(seq "$ROUNDS"); do wg_run "$l" "$s" >> "$OUT/wg-$len.txt"; done
    $PRIO "${ORPHAN_INT[@]}" "$BIN" -q tunnel --transforms chacha20-poly1305,aes128-gcm --variants accel --protocols tcp \
      --no-underlay --seconds "$SECS" --repeats "$ROUNDS" --tcp-length "$len" --results "$OUT/tunnel-$len" \
      > "$OUT/tunnel-$len.txt" 2> "$OUT/tunnel-$len.err"
    stop_if_interrupted $?
    python3 - "$OUT/wg-$len.txt" "$OUT/tunnel-$len/run.json" "$len" <<'PY' | tee -a "$OUT/many-cores.md"
import json, statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
wg = [r[0] / 1e9 for r in rows if r[0] > 0]
def span(v): return f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})" if v else "failed"
cores = "/".join(f"{statistics.median([r[i] for r in rows]):.2f}" for i in (1, 2)) if rows else "-"
points = {}
try:
    rec = json.load(open(sys.argv[2]))
    def walk(x):
        if isinstance(x, dict):
            if "transform" in x and "throughput_bits_per_sec" in x and x.get("protocol") in ("tcp", "Tcp", "TCP"):
                points[x["transform"]] = x
            for v in x.values(): walk(v)
        elif isinstance(x, list):
            for v in x: walk(v)
    walk(rec)
except Exception:
    pass
def cell(t):
    p = points.get(t)
    if not p: return "failed", "-"
    g = [r["iperf"]["received_bytes"] * 8 / r["iperf"]["seconds"] / 1e9 for r in p["runs"]] or [p["throughput_bits_per_sec"]["median"] / 1e9]
    ratio = f"{statistics.median(g) / statistics.median(wg):.2f}x" if wg else "-"
    return span(g), ratio
c, cr = cell("chacha20-poly1305")
a, ar = cell("aes128-gcm")
threads = "-"
p = points.get("chacha20-poly1305")
if p and p["runs"]:
    run = p["runs"][0]
    def th(gw):
        t = gw.get("threads") or []
        return ", ".join(f"{x.get('name','?')} {x.get('cpu_cores_used', 0):.2f}" for x in t) if t else "-"
    threads = f"sender: {th(run['sender'])}; receiver: {th(run['receiver'])}"
print(f"| {sys.argv[3]} | {span(wg)} | {cores} | {c} | {cr} | {a} | {ar} | {threads} |")
PY
  done
  [[ -s $OUT/tunnel-1220.err ]] && md "" && md "cipherbench tunnel said: $(tail -1 "$OUT/tunnel-1220.err")"
  wg_cleanup
}

ran=0
for part in $PARTS; do
  case $part in
    gen) gen_part ;; sweep) sweep_part ;; tunnel) tunnel_part ;;
  esac && ran=$((ran + 1))
done
md ""
md "load at end: $(cut -d' ' -f1-3 /proc/loadavg); $(( $(date +%s) - started )) s; raw results in $OUT"
# Every part asked could not run (the reasons are in the table): not a success.
((ran > 0)) || exit 1
