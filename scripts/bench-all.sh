#!/usr/bin/env bash
# The benchmark sequence behind BENCHMARKS.md, one command after another (about 12
# minutes; root for the tunnel). Run it on a machine doing nothing else; the output
# goes to stdout and each command's results directory under $OUT.
# Usage: scripts/bench-all.sh   Env: BIN (target/release/cipherbench), OUT (/tmp/cb-bench)
set -u
cd "$(dirname "$0")/.."
B=${BIN:-target/release/cipherbench}
OUT=${OUT:-/tmp/cb-bench}
[[ -x $B ]] || { echo "bench: build first (cargo build --release)" >&2; exit 1; }
[[ -e $OUT ]] && { echo "bench: $OUT exists; remove it or set OUT" >&2; exit 1; }
mkdir -p "$OUT"
stamp() { echo "=== $1 $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg)"; }
for n in 1 2; do
  stamp "speed $n"
  "$B" speed --cipher aes-128-gcm,aes-256-cbc,chacha20-poly1305 --sizes 1KiB,16KiB --threads 1 \
    --direction encrypt --check-openssl --results "$OUT/speed-$n"
done
stamp tls-vs-wrk
BIN=$B scripts/bench-tls-vs-wrk.sh
stamp tls-sweep
"$B" tls sweep --suites AES128-GCM-SHA256,AES128-SHA --sizes 16MiB --cores 1 --variants accel,noaesni \
  --results "$OUT/tls"
stamp file
"$B" file --size 1GiB --tools cp,openssl-aes-256-cbc,openssl-aes-256-ctr,age,gpg,cipherbench \
  --variants accel --cache warm --sync fsync,none --direction encrypt,decrypt --repetitions 3 \
  --results "$OUT/file"
stamp tunnel
"$B" tunnel --transforms aes128-gcm,chacha20-poly1305,aes256-sha256 --variants accel,noaesni \
  --seconds 5 --repeats 3 --results "$OUT/tunnel"
stamp tunnel-tcp-length-1220
"$B" tunnel --transforms aes128-gcm,chacha20-poly1305 --variants accel --protocols tcp \
  --tcp-length 1220 --seconds 5 --repeats 3 --results "$OUT/tunnel-1220"
stamp done
