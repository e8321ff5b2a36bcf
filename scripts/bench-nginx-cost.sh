#!/usr/bin/env bash
# Does the client change what nginx spends per response? One `cipherbench tls serve`
# (1 worker on CPU 0); wrk and cipherbench's generator (both on CPU 1, keep-alive off)
# alternate; after each round it prints the client's req/s and the nginx worker's
# utime+stime per 16 MiB it wrote (from /proc/PID/stat and /proc/PID/io wchar, so
# requests the client did not count still count on both sides). Issue 12, item 1.
# Usage: scripts/bench-nginx-cost.sh   Env: BIN SECS (4) CONC (4) ROUNDS (3) SUITE VARIANTS ("wrk ours")
set -uo pipefail
command -v wrk >/dev/null || { echo "bench: wrk is missing (apt-get install wrk)" >&2; exit 1; }
[[ -x ${BIN:-target/release/cipherbench} ]] || { echo "bench: build first (cargo build --release)" >&2; exit 1; }
BIN=$(realpath "${BIN:-target/release/cipherbench}"); SECS=${SECS:-4}; CONC=${CONC:-4}; ROUNDS=${ROUNDS:-3}; SUITE=${SUITE:-AES128-GCM-SHA256}
work=$(mktemp -d); cd "$work" || exit 1
VARIANTS=${VARIANTS:-"wrk ours"}
: > url
$BIN tls serve --suite $SUITE --sizes 16MiB --cores 1 > url 2> serve.err & srv=$!
for _ in $(seq 200); do [[ -s url ]] && break; sleep 0.05; done
url=$(head -1 url); sleep 0.5
np=$(pgrep -f "nginx: master" -P $srv); w=$(pgrep -P $np | head -1)
st() { echo $(awk '{print $14+$15}' /proc/$w/stat) $(awk '/wchar/ {print $2}' /proc/$w/io); }
echo "load $(cat /proc/loadavg)"
for r in $(seq $ROUNDS); do for v in $VARIANTS; do
  set -- $(st)
  case $v in
   wrk) out=$(taskset -c 1 wrk -t1 -c$CONC -d${SECS}s -H 'Connection: close' "$url" | awk '/Requests\/sec/ {print $2}');;
   ours) out=$($BIN -q tls sweep --server "$url" --suites $SUITE --generator-cpus 1 --concurrency $CONC --window ${SECS}s --warmup 0s --no-save --json | python3 -c 'import json,sys; p=json.load(sys.stdin)["sweep"]["points"][0]; print(p["requests_per_sec"], "gencpu", round(p["generator_cpu"],2))');;
  esac
  set -- $1 $2 $(st)
  echo "r$r $v: $out | nginx $(python3 -c "print(round(($3-$1)*10/(($4-$2)/16777216),2))") ms/16MiB over $(( ($4-$2)/16777216 )) x16MiB"
done; done
echo "load $(cat /proc/loadavg)"
kill -INT $srv; wait $srv; rm -rf "$work"
