# Sourced by the scripts that load `cipherbench tls serve`'s nginx with wrk beside
# cipherbench (bench-tls-vs-wrk.sh, bench-generator-cost.sh): the checks, a work
# directory removed at exit with the server (its pid in $server) stopped, and median.

BIN=${BIN:-target/release/cipherbench}
command -v wrk >/dev/null || { echo "bench: wrk is missing (apt-get install wrk)" >&2; exit 1; }
[[ -x $BIN ]] || { echo "bench: build first (cargo build --release)" >&2; exit 1; }

work=$(mktemp -d)
server=
cleanup() {
  if [[ -n $server ]]; then kill -INT "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# The median of the numbers on stdin, one per line.
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
