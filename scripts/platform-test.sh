#!/usr/bin/env bash
# The platform suite (crates/cipherbench/tests/platform.rs) on the stack it runs on,
# with the record required to name this system's OpenSSL.
#   scripts/platform-test.sh           build it here, against this system's OpenSSL,
#                                      into target/platform/<name>/, and run it
#   scripts/platform-test.sh TESTBIN   run a suite built elsewhere (the host's build,
#                                      as the package's binary is built on Debian 12)
# `make test` runs the second inside the Debian 13 root, `make test-root-build` the
# first: scripts/debian-root.sh run scripts/platform-test.sh [TESTBIN]
set -euo pipefail
cd "$(dirname "$0")/.."
name=${CIPHERBENCH_PLATFORM:?"set CIPHERBENCH_PLATFORM (scripts/debian-root.sh run sets it)"}
CIPHERBENCH_EXPECT_OPENSSL=$(openssl version | awk '{print $2}')
export CIPHERBENCH_EXPECT_OPENSSL
if [[ $# -ge 1 ]]; then
  echo "platform-test: $name, $(openssl version), $(uname -r), the suite built on the host: $1" >&2
  exec "$1" --nocapture
fi
export CARGO_TARGET_DIR="$PWD/target/platform/$name"
echo "platform-test: $name, $(openssl version), $(uname -r), built here" >&2
exec cargo test --locked -p cipherbench --test platform -- --nocapture
