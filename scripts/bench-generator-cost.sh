#!/usr/bin/env bash
# What the load generator costs per Gbit/s of TLS response (issue 30): cipherbench
# reading by sample (the default), cipherbench reading every byte (--verify all), and
# wrk, in alternating rounds, one nginx worker on one CPU and the generator on another.
# Prints each round, then the medians, the sampled/all ratio and how many nginx cores
# one generator core keeps busy (nginx's CPU per Gbit/s over the generator's).
#
# cipherbench runs `tls sweep` with its own nginx (server CPU and content check as in a
# run), its generator on CPU 1 as wrk; wrk loads `cipherbench tls serve` (the same nginx build and configuration),
# its CPU from /usr/bin/time and nginx's from /proc/stat of nginx's CPU, both over
# wrk's whole run (its connections' set-up included).
#
# Usage: scripts/bench-generator-cost.sh [SUITE...]
#   (default: AES128-GCM-SHA256 TLS_AES_128_GCM_SHA256)
# Env: BIN (target/release/cipherbench), SIZE (16MiB), ROUNDS (3), SECS (5), CONC (4),
#      OPENSSL (an --openssl directory, for nginx, cipherbench and wrk; default the
#      system's)
set -euo pipefail

SIZE=${SIZE:-16MiB}
ROUNDS=${ROUNDS:-3}
SECS=${SECS:-5}
CONC=${CONC:-4}
suites=("$@")
((${#suites[@]})) || suites=(AES128-GCM-SHA256 TLS_AES_128_GCM_SHA256)
openssl=()
wrk_env=()
if [[ -n ${OPENSSL:-} ]]; then
  openssl=(--openssl "$OPENSSL")
  # wrk on the same libssl and libcrypto (3.x keeps the ABI of 3.0).
  lib=$(cd "$OPENSSL" && pwd)/lib
  [[ -e $lib/libssl.so.3 ]] || lib=${lib}64
  [[ -e $lib/libssl.so.3 ]] || { echo "bench: no libssl.so.3 under $OPENSSL" >&2; exit 1; }
  wrk_env=(env LD_LIBRARY_PATH="$lib")
fi
[[ -x /usr/bin/time ]] || { echo "bench: /usr/bin/time is missing (apt-get install time)" >&2; exit 1; }
(($(nproc) >= 2)) || { echo "bench: needs two CPUs (nginx on one, the generator on another)" >&2; exit 1; }
# shellcheck source=scripts/bench-wrk-lib.sh
source "$(dirname "$0")/bench-wrk-lib.sh"

bytes=$(numfmt --from=iec "${SIZE%iB}")
# Busy jiffies of one CPU (all but idle and iowait) from /proc/stat.
busy() { awk -v c="cpu$1" '$1 == c {print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat; }
hz=$(getconf CLK_TCK)

for suite in "${suites[@]}"; do
  : >"$work/url"
  "$BIN" tls serve "${openssl[@]}" --suite "$suite" --sizes "$SIZE" --cores 1 >"$work/url" 2>"$work/serve.err" &
  server=$!
  for _ in $(seq 400); do [[ -s $work/url ]] && break; sleep 0.05; done
  url=$(head -1 "$work/url")
  [[ -n $url ]] || { cat "$work/serve.err" >&2; exit 1; }
  : >"$work/rows"
  for r in $(seq "$ROUNDS"); do
    # wrk: nginx (tls serve) on CPU 0, wrk on CPU 1.
    b0=$(busy 0)
    /usr/bin/time -f '%e %U %S' -o "$work/time" taskset -c 1 "${wrk_env[@]}" \
      wrk -t1 -c"$CONC" -d"${SECS}s" -H 'Connection: close' "$url" >"$work/wrk"
    b1=$(busy 0)
    rps=$(awk '/Requests\/sec/ {print $2}' "$work/wrk")
    read -r t u s <"$work/time"
    awk -v r="$r" -v rps="$rps" -v b="$bytes" -v u="$u" -v s="$s" -v t="$t" \
        -v nb="$((b1 - b0))" -v hz="$hz" 'BEGIN {
      g = rps * b * 8 / 1e9; gen = (u + s) / t; ng = nb / hz / t;
      printf "wrk %d %.3f %.4f %.4f %.4f\n", r, g, gen, gen / g, ng / g }' >>"$work/rows"
    # cipherbench, both ways: its generator on CPU 1 as wrk, its own nginx on
    # another CPU (the placement's; CPU 0 on two).
    for verify in all sampled; do
      "$BIN" -q tls sweep "${openssl[@]}" --suites "$suite" --sizes "$SIZE" --variants accel \
        --cores 1 --generator-cpus 1 --concurrency "$CONC" --warmup 1s --window "${SECS}s" --verify "$verify" \
        --no-save --json |
        python3 -c '
import json, sys
p = json.load(sys.stdin)["sweep"]["points"][0]
if p["errors"]:
    sys.exit("bench: %d errors in a round" % p["errors"])
g = p["throughput_bytes_per_sec"] * 8 / 1e9
# Cores: generator_cpu is per thread, server_cpu per worker (one here).
gen, ng = p["generator_cpu"] * p["generator_threads"], p["server_cpu"]["total"]
print("%s %s %.3f %.4f %.4f %.4f" % (sys.argv[1], sys.argv[2], g, gen, gen / g, ng / g))
' "$verify" "$r" >>"$work/rows"
    done
    awk -v r="$r" -v s="$suite" -v z="$SIZE" '$2 == r {
      printf "%s %s round %d: %-7s %6.2f Gbit/s, generator %.2f of a core (%.4f per Gbit/s), nginx %.4f per Gbit/s\n",
        s, z, $2, $1, $3, $4, $5, $6 }' "$work/rows"
  done
  for tool in wrk all sampled; do
    g=$(awk -v t=$tool '$1 == t {print $5}' "$work/rows" | median)
    n=$(awk -v t=$tool '$1 == t {print $6}' "$work/rows" | median)
    lo=$(awk -v t=$tool '$1 == t {print $5}' "$work/rows" | sort -g | head -1)
    hi=$(awk -v t=$tool '$1 == t {print $5}' "$work/rows" | sort -g | tail -1)
    printf '%s %s median of %d, %-7s generator %.4f core per Gbit/s (%s-%s), nginx %.4f: one generator core keeps %.1f nginx cores busy\n' \
      "$suite" "$SIZE" "$ROUNDS" "$tool" "$g" "$lo" "$hi" "$n" "$(echo "$n / $g" | bc -l)"
    echo "$g" >"$work/median-$tool"
  done
  printf '%s %s sampled/all %.2f, sampled/wrk %.2f\n' "$suite" "$SIZE" \
    "$(echo "$(cat "$work/median-sampled") / $(cat "$work/median-all")" | bc -l)" \
    "$(echo "$(cat "$work/median-sampled") / $(cat "$work/median-wrk")" | bc -l)"
  kill -INT "$server"; wait "$server" || true; server=
done
