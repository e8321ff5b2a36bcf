#!/usr/bin/env bash
# Is cipherbench's load generator the limit? Runs it and wrk, alternately, against
# the same nginx (started by `cipherbench tls serve`, 1 worker pinned to CPU 0),
# both pinned to CPU 1, same file, same concurrency, keep-alive off. Prints each
# round and the median requests/s of each with the ratio ours/wrk.
# Usage: scripts/bench-tls-vs-wrk.sh [SUITE...]   (default: AES128-GCM-SHA256 AES128-SHA)
# Env: BIN (target/release/cipherbench), SIZE (16MiB), ROUNDS (5), SECS (5), CONC (4)
set -euo pipefail

SIZE=${SIZE:-16MiB}
ROUNDS=${ROUNDS:-5}
SECS=${SECS:-5}
CONC=${CONC:-4}
suites=("$@")
((${#suites[@]})) || suites=(AES128-GCM-SHA256 AES128-SHA)
# shellcheck source=scripts/bench-wrk-lib.sh
source "$(dirname "$0")/bench-wrk-lib.sh"

for suite in "${suites[@]}"; do
  : >"$work/url"
  "$BIN" tls serve --suite "$suite" --sizes "$SIZE" --cores 1 >"$work/url" 2>"$work/serve.err" &
  server=$!
  for _ in $(seq 200); do [[ -s $work/url ]] && break; sleep 0.05; done
  url=$(head -1 "$work/url")
  [[ -n $url ]] || { cat "$work/serve.err" >&2; exit 1; }
  : >"$work/wrk"; : >"$work/ours"
  for r in $(seq "$ROUNDS"); do
    w=$(taskset -c 1 wrk -t1 -c"$CONC" -d"${SECS}s" -H 'Connection: close' "$url" | awk '/Requests\/sec/ {print $2}')
    o=$("$BIN" -q tls sweep --server "$url" --suites "$suite" --generator-cpus 1 \
          --concurrency "$CONC" --window "${SECS}s" --warmup 0s --no-save --json |
        python3 -c 'import json,sys; p=json.load(sys.stdin)["sweep"]["points"][0]; print(p["requests_per_sec"], p["generator_cpu"], p["errors"])')
    echo "$w" >>"$work/wrk"; echo "${o%% *}" >>"$work/ours"
    printf '%s %s round %d: wrk %s req/s, cipherbench %s req/s (generator CPU %s, errors %s)\n' \
      "$suite" "$SIZE" "$r" "$w" ${o}
  done
  mw=$(median <"$work/wrk"); mo=$(median <"$work/ours")
  printf '%s %s median of %d: wrk %s req/s, cipherbench %s req/s, ratio cipherbench/wrk %.3f (min %s max %s / min %s max %s)\n' \
    "$suite" "$SIZE" "$ROUNDS" "$mw" "$mo" "$(echo "$mo / $mw" | bc -l)" \
    "$(sort -g "$work/wrk" | head -1)" "$(sort -g "$work/wrk" | tail -1)" \
    "$(sort -g "$work/ours" | head -1)" "$(sort -g "$work/ours" | tail -1)"
  kill -INT "$server"; wait "$server" || true; server=
done
