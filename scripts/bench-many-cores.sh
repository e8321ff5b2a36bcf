#!/usr/bin/env bash
# Issue 12's comparison in one command, sized to the machine it runs on:
#  A. cipherbench's load generator against wrk on the same nginx (`cipherbench tls
#     serve`), alternating rounds, at 1, 4, 8, 16... generator CPUs (as many as fit
#     beside nginx): requests/s of each, nginx's CPU per response under each (its
#     workers' schedstat over the bytes they wrote), each generator thread's CPU and
#     wrk's, and requests per generator-CPU-second;
#  B. the core-count sweep (`tls sweep --cores 1,2,4,...`): Gbit/s, per core, the
#     clients the search chose, what limited each point, nginx and generator CPU;
#  C. the tunnel against wireguard-go at both lengths: a hook (see tunnel_part).
# Writes one Markdown table to stdout and to $OUT/many-cores.md (with the raw JSON).
# Usage: scripts/bench-many-cores.sh
# Env: BIN (target/release/cipherbench) OUT (a new temp dir, kept) SUITE (AES128-GCM-SHA256)
#      SIZE (16MiB) ROUNDS (3) SECS (4) PER_CONN (4 clients per generator CPU)
#      SWEEP_WINDOW (5s) SWEEP_PROBE (2s) PARTS ("gen sweep tunnel")
#      PRIO (empty; on a machine other programs keep busy, PRIO="chrt -f 10" runs nginx,
#      wrk and cipherbench ahead of them, so each round measures the parts, not the crowd)
set -uo pipefail
BIN=$(realpath "${BIN:-target/release/cipherbench}" 2>/dev/null) || true
[[ -x ${BIN:-} ]] || { echo "bench-many-cores: build first (cargo build --release) or set BIN" >&2; exit 1; }
command -v wrk >/dev/null || { echo "bench-many-cores: wrk is missing (scripts/install-deps.sh, or apt-get install wrk)" >&2; exit 1; }
SUITE=${SUITE:-AES128-GCM-SHA256}; SIZE=${SIZE:-16MiB}; ROUNDS=${ROUNDS:-3}; SECS=${SECS:-4}
PER_CONN=${PER_CONN:-4}; SWEEP_WINDOW=${SWEEP_WINDOW:-5s}; SWEEP_PROBE=${SWEEP_PROBE:-2s}
PARTS=${PARTS:-"gen sweep tunnel"}; PRIO=${PRIO:-}
OUT=${OUT:-$(mktemp -d /tmp/bench-many-cores.XXXXXX)}; mkdir -p "$OUT" || exit 1
started=$(date +%s)
# The CPUs this process may use, in order (taskset's list, expanded).
mapfile -t CPUS < <(python3 -c 'import os; print("\n".join(map(str, sorted(os.sched_getaffinity(0)))))')
N=${#CPUS[@]}
size_bytes=$(python3 -c "import sys; s='$SIZE'; u={'KiB':1<<10,'MiB':1<<20,'GiB':1<<30}; n=[k for k in u if s.endswith(k)]; print(int(s[:-3])*u[n[0]] if n else int(s))")
srv=
cleanup() { [[ -n $srv ]] && { kill -INT "$srv" 2>/dev/null; wait "$srv" 2>/dev/null; }; srv=; }
trap cleanup EXIT
trap 'cleanup; exit 130' INT TERM
md() { echo "$*" | tee -a "$OUT/many-cores.md"; }
join() { local IFS=,; echo "$*"; }

: > "$OUT/many-cores.md"
md "# Many cores: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $N CPU(s), $(uname -r), $(date -u +%FT%TZ)"
md ""
md "load at start: $(cut -d' ' -f1-3 /proc/loadavg)${PRIO:+ (run under $PRIO)}; $SUITE, $SIZE, keep-alive off; $ROUNDS alternating rounds of ${SECS} s (medians, min-max)"

# Descendant PIDs of $1 (nginx runs under cipherbench's keeper).
desc() { local p=$1 c; echo "$p"; for c in $(cat /proc/"$p"/task/*/children 2>/dev/null); do desc "$c"; done; }
workers() { for p in $(desc "$1"); do grep -qa "nginx: worker" /proc/"$p"/cmdline 2>/dev/null && echo "$p"; done; }
# Sum over nginx workers: CPU ns (schedstat) and bytes written (wchar).
nginx_stat() { local c=0 b=0 w; for w in $WORKERS; do
  c=$((c + $(cut -d' ' -f1 /proc/"$w"/schedstat))); b=$((b + $(awk '/^wchar/ {print $2}' /proc/"$w"/io))); done; echo "$c $b"; }

gen_part() {
  md ""
  md "## A. Load generator vs wrk (same nginx, alternating rounds)"
  md ""
  md "| nginx CPUs | generator CPUs | clients | wrk req/s | cipherbench req/s | ratio | nginx ms CPU per response, wrk / cipherbench | wrk CPU (of its CPUs) | cipherbench CPU per thread | cipherbench req per generator-CPU-s |"
  md "|---|---|---|---|---|---|---|---|---|---|"
  local rows=() g s
  # (nginx cores, generator CPUs): 1+1, 1+4, then nginx g/2 beside g, as many as fit.
  for g in 1 4 8 16 32 64 128; do
    if ((g <= 4)); then s=1; else s=$((g / 2)); fi
    ((s + g <= N)) && rows+=("$s $g")
  done
  ((${#rows[@]})) || { md "| - | - | - | needs 2 CPUs | | | | | | |"; return; }
  for row in "${rows[@]}"; do
    set -- $row; s=$1; g=$2; conc=$((g * PER_CONN))
    gcpus=$(join "${CPUS[@]:s:g}")
    : > "$OUT/url"
    $PRIO "$BIN" tls serve --suite "$SUITE" --sizes "$SIZE" --cores "$s" > "$OUT/url" 2> "$OUT/serve.err" & srv=$!
    for _ in $(seq 300); do [[ -s $OUT/url ]] && break; sleep 0.05; done
    url=$(head -1 "$OUT/url")
    [[ -n $url ]] || { cat "$OUT/serve.err" >&2; md "| $s | $g | $conc | tls serve failed: $(tail -1 "$OUT/serve.err") |"; cleanup; continue; }
    sleep 0.3; WORKERS=$(workers "$srv")
    : > "$OUT/rounds-$s-$g"
    for r in $(seq "$ROUNDS"); do
      for who in wrk ours; do
        set -- $(nginx_stat); c0=$1; b0=$2
        if [[ $who == wrk ]]; then
          out=$( { /usr/bin/time -f "TIME %U %S" $PRIO taskset -c "$gcpus" wrk -t"$g" -c"$conc" -d"${SECS}s" \
                     -H 'Connection: close' "$url"; } 2>&1 )
          rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
          gen=$(awk -v g="$g" -v s="$SECS" '/^TIME/ {printf "%.2f", ($2+$3)/(g*s)}' <<<"$out"); per=-
        else
          $PRIO "$BIN" -q tls sweep --server "$url" --suites "$SUITE" --generator-cpus "$gcpus" --concurrency "$conc" \
            --window "${SECS}s" --warmup 0s --no-save --json > "$OUT/ours-$s-$g-$r.json" 2>> "$OUT/ours.err"
          read -r rps gen per < <(python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))["sweep"]["points"][0]
t=p.get("generator_cpu_per_thread",[]); print(round(p["requests_per_sec"],2), round(p["generator_cpu"],2), "/".join("%.2f"%c for c in t) or "-")' "$OUT/ours-$s-$g-$r.json" 2>/dev/null || echo "0 0 -")
        fi
        set -- $(nginx_stat)
        ms=$(python3 -c "r=($2-$b0)/$size_bytes; print(round(($1-$c0)/1e6/r,2) if r>0 else 'nan')")
        echo "$who $rps $ms $gen $per" >> "$OUT/rounds-$s-$g"
        printf 'nginx %s, generator %s (%s clients) round %d %s: %s req/s, nginx %s ms/response, generator CPU %s %s\n' \
          "$s" "$g" "$conc" "$r" "$who" "$rps" "$ms" "$gen" "$per" >&2
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
w, o = col("wrk", 1), col("ours", 1)
ratios = [b / a for a, b in zip(w, o) if a > 0]
per = [r[4] for r in rows if r[0] == "ours"]
go = col("ours", 3)
rpc = [rp / (gc * int(g)) for rp, gc in zip(o, go) if gc > 0]
line = f"| {s} | {g} | {conc} | {rng(w)} | {rng(o)} | {med(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) | {med(col('wrk', 2)):.1f} / {med(col('ours', 2)):.1f} | {med(col('wrk', 3)):.2f} | {per[len(per)//2] if per else '-'} | {med(rpc):.0f} |"
print(line)
EOF
  done
}

sweep_part() {
  md ""
  md "## B. Core-count sweep (tls sweep --cores)"
  md ""
  local list=() c=1
  while ((c <= 128)); do list+=("$c"); ((c *= 2)); done
  # Up to the first count that does not fit, so the table says where it stops.
  local cores=() x
  for x in "${list[@]}"; do cores+=("$x"); ((x >= N)) && break; done
  $PRIO "$BIN" -q tls sweep --cores "$(join "${cores[@]}")" --suites "$SUITE" --sizes "$SIZE" --variants accel \
    --window "$SWEEP_WINDOW" --probe "$SWEEP_PROBE" --warmup 1s --results "$OUT/sweep" > /dev/null 2> "$OUT/sweep.err"
  local run=$OUT/sweep/run.json; [[ -s $run ]] || run=
  [[ -n $run ]] || { md "sweep failed: $(tail -1 "$OUT/sweep.err")"; return; }
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

# C. Hook: the tunnel against wireguard-go at -l 1220 and the default length, with
# each gateway thread's CPU. It belongs to issue 12 item 2 (branch `pipeline`): when
# `cipherbench tunnel` can run wireguard-go as its peer, call it here and append its
# table; until then the part says it was not run.
tunnel_part() {
  md ""
  md "## C. Tunnel vs wireguard-go"
  md ""
  if "$BIN" tunnel --help 2>/dev/null | grep -q -- "wireguard"; then
    md "HOOK: this cipherbench's tunnel knows wireguard-go; wire its command in here (scripts/bench-many-cores.sh, tunnel_part)."
  else
    md "not run: this cipherbench's \`tunnel\` cannot compare against wireguard-go yet (issue 12 item 2)."
  fi
}

for part in $PARTS; do
  case $part in
    gen) gen_part ;; sweep) sweep_part ;; tunnel) tunnel_part ;;
    *) echo "bench-many-cores: unknown part '$part' (gen, sweep, tunnel)" >&2; exit 2 ;;
  esac
done
md ""
md "load at end: $(cut -d' ' -f1-3 /proc/loadavg); $(( $(date +%s) - started )) s; raw results in $OUT"
