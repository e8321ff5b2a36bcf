#!/usr/bin/env bash
# The platform suite (crates/cipherbench/tests/platform.rs) on the stack it runs on:
# built here, against this system's OpenSSL, into target/platform/<name>/, and run
# with the record required to name this system's OpenSSL. `make test` runs it inside
# the Debian 13 root: scripts/debian-root.sh run scripts/platform-test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
name=${CIPHERBENCH_PLATFORM:?"set CIPHERBENCH_PLATFORM (scripts/debian-root.sh run sets it)"}
export CARGO_TARGET_DIR="$PWD/target/platform/$name"
CIPHERBENCH_EXPECT_OPENSSL=$(openssl version | awk '{print $2}')
export CIPHERBENCH_EXPECT_OPENSSL
echo "platform-test: $name, $(openssl version), $(uname -r)" >&2
exec cargo test --locked -p cipherbench --test platform -- --nocapture
