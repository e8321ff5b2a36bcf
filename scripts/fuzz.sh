#!/usr/bin/env bash
# Runs the fuzz targets of crates/cipherbench-fuzz, reproducibly: each starts from the
# committed seeds (fuzz/seeds/TARGET/) with a fixed seed and runs a fixed number of
# inputs, one target at a time, at the lowest CPU priority (the machine is shared).
# FUZZING.md has the targets, their properties and the figures of the last deep run.
#
# Usage: scripts/fuzz.sh [--runs N] [--seed S] [--stable] [--merge] [--max-time SECONDS] [TARGET...]
#   --runs N        inputs per target (default 10000000)
#   --seed S        libFuzzer's -seed / the stable driver's seed (default 1)
#   --stable        use the stable-Rust driver (seeded mutations, no coverage feedback)
#                   even where nightly Rust is installed
#   --merge         libFuzzer only: afterwards, minimise seeds + what the run found
#                   (set cover of edges, short inputs) into fuzz/seeds/TARGET/
#                   (review and commit it)
#   --max-time S    bound on each target's run (default 7200); a run it cuts is
#                   reported as short of N
#   TARGET          esp_open esp_receive stream_open report sizes ia32cap mask (default: all)
#
# Engine: libFuzzer (cargo-fuzz, coverage-guided) where a nightly toolchain exists;
# cargo-fuzz is installed from crates.io if missing. Without nightly it says so and
# uses the stable driver. Built with -O -a -s none: release, debug assertions on (an
# integer overflow is a crash), no sanitizer (the code under test is safe Rust; its
# only unsafe code calls the system's OpenSSL, which is not instrumented).
# Work files: fuzz/corpus/TARGET (emptied first), fuzz/artifacts/TARGET (a failing
# input), fuzz/logs/TARGET.log; all ignored by git. Exit 1 if any target fails.
set -euo pipefail
cd "$(dirname "$0")/.."

all=(esp_open esp_receive stream_open report sizes ia32cap mask)
# -max_len per target; keep in step with TARGETS in crates/cipherbench-fuzz/src/lib.rs.
declare -A max_len=([esp_open]=2048 [esp_receive]=4096 [stream_open]=4096 [report]=4096 [sizes]=256 [ia32cap]=256 [mask]=256)
# --merge keeps only inputs up to this long (the committed corpus stays small): the
# report's renderers are reached by short structure-mode inputs.
declare -A seed_len=([esp_open]=1024 [esp_receive]=1024 [stream_open]=1024 [report]=256 [sizes]=256 [ia32cap]=256 [mask]=256)

runs=10000000 seed=1 stable=0 merge=0 max_time=7200 targets=()
whole() { [[ "$2" =~ ^[0-9]+$ ]] || { echo "fuzz.sh: $1 needs a whole number, got '$2'" >&2; exit 2; }; }
while (($#)); do
  case "$1" in
    --runs) whole "$1" "${2-}"; runs=$2; shift 2 ;;
    --seed) whole "$1" "${2-}"; seed=$2; shift 2 ;;
    --max-time) whole "$1" "${2-}"; max_time=$2; shift 2 ;;
    --stable) stable=1; shift ;;
    --merge) merge=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz.sh: unknown option '$1' (see scripts/fuzz.sh --help)" >&2; exit 2 ;;
    *)
      [[ -n "${max_len[$1]-}" ]] || { echo "fuzz.sh: unknown target '$1'; targets: ${all[*]}" >&2; exit 2; }
      targets+=("$1"); shift ;;
  esac
done
((${#targets[@]})) || targets=("${all[@]}")

if ((!stable)) && ! cargo +nightly --version >/dev/null 2>&1; then
  echo "fuzz.sh: no nightly Rust toolchain (libFuzzer needs one): running the stable driver, seeded mutations without coverage feedback"
  stable=1
fi
if ((stable && merge)); then
  echo "fuzz.sh: --merge needs libFuzzer (nightly); nothing merged" >&2
  merge=0
fi
if ((!stable)) && ! cargo fuzz --version >/dev/null 2>&1; then
  echo "fuzz.sh: installing cargo-fuzz from crates.io"
  cargo install --locked cargo-fuzz >/dev/null
fi

mkdir -p fuzz/logs
echo "fuzz.sh: $(date -u +%FT%TZ), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), seed $seed, $runs inputs per target"
if ((stable)); then
  cargo build --release --locked -p cipherbench-fuzz --bin cipherbench-fuzz
else
  (cd fuzz && nice -n 19 cargo +nightly fuzz build -O -a -s none)
fi

failed=()
for t in "${targets[@]}"; do
  log=fuzz/logs/$t.log
  dict=()
  [[ -f fuzz/dicts/$t.dict ]] && dict=(-dict="dicts/$t.dict")
  start=$(date +%s.%N)
  if ((stable)); then
    set +e
    timeout "$max_time" nice -n 19 target/release/cipherbench-fuzz "$t" --seeds "fuzz/seeds/$t" \
      --runs "$runs" --seed "$seed" --artifacts fuzz/artifacts >"$log" 2>&1
    rc=$?
    set -e
    end=$(date +%s.%N)
    done_runs=$(grep -o '^[a-z_0-9]*: [0-9]* inputs' "$log" | awk '{print $2}')
    extra="no coverage feedback"
  else
    rm -rf "fuzz/corpus/$t"
    mkdir -p "fuzz/corpus/$t" "fuzz/artifacts/$t"
    set +e
    # The first folder gets what the run finds; the committed seeds are only read.
    (cd fuzz && nice -n 19 cargo +nightly fuzz run -O -a -s none "$t" "corpus/$t" "seeds/$t" -- \
      -runs="$runs" -seed="$seed" -max_len="${max_len[$t]}" -max_total_time="$max_time" \
      -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 "${dict[@]}" \
      -artifact_prefix="artifacts/$t/") >"$log" 2>&1
    rc=$?
    set -e
    end=$(date +%s.%N)
    done_runs=$(awk '/stat::number_of_executed_units/ {print $2}' "$log")
    cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$log" | tail -1)
    units=$(find "fuzz/corpus/$t" -type f | wc -l)
    extra="${cov:-cov: ?}, $units new corpus units"
  fi
  secs=$(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.1f", b - a}')
  rate=$(awk -v n="${done_runs:-0}" -v s="$secs" 'BEGIN {printf "%.0f", n / (s > 0 ? s : 1)}')
  seeds=$(find "fuzz/seeds/$t" -type f | wc -l)
  seed_bytes=$(find "fuzz/seeds/$t" -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}')
  if ((rc != 0)); then
    echo "$t: FAILED after ${done_runs:-?} inputs in $secs s (see $log; the input is in fuzz/artifacts/$t/)"
    failed+=("$t")
    continue
  fi
  short=""
  ((${done_runs:-0} < runs)) && short=" (SHORT of $runs: --max-time $max_time cut it)"
  echo "$t: ${done_runs:-?} inputs in $secs s ($rate exec/s), $extra, $seeds seeds ($seed_bytes bytes), no property broken$short"
  if ((merge)); then
    # Set cover over edges (-use_counters=0: hit counts do not make an input worth
    # keeping), inputs cut to seed_len. Hand-named seeds (not a libFuzzer hash) stay.
    fresh=$(mktemp -d)
    (cd fuzz && nice -n 19 cargo +nightly fuzz run -O -a -s none "$t" -- -set_cover_merge=1 \
      -use_counters=0 -max_len="${seed_len[$t]}" "$fresh" "seeds/$t" "corpus/$t") >>"$log" 2>&1
    find "fuzz/seeds/$t" -type f -regextype posix-extended ! -regex '.*/[0-9a-f]{40}' -exec cp {} "$fresh/" \;
    rm -rf "fuzz/seeds/$t"
    mv "$fresh" "fuzz/seeds/$t"
    chmod 755 "fuzz/seeds/$t"
    echo "$t: seeds minimised to $(find "fuzz/seeds/$t" -type f | wc -l) files, $(du -sb "fuzz/seeds/$t" | cut -f1) bytes"
  fi
done

if ((${#failed[@]})); then
  echo "fuzz.sh: properties broken in: ${failed[*]}" >&2
  exit 1
fi
