# The two commands: `make run` (install what is missing, build, run the main job)
# and `make test` (install what is missing, build the upstream OpenSSL the --openssl
# tests run against (cached), check formatting, the modules' one-way layering and
# lints, run every test, then the platform suite on two more stacks: the upstream
# build and a Debian 13 root). Both work on a fresh Debian machine, as root
# or with sudo.

CARGO ?= cargo
BIN := target/release/cipherbench

.PHONY: run test deps deps-test build lint bench clean openssl-upstream openssl4 openssl4-cipherbench openssl4-nginx test-openssl4 debian-root test-platforms test-root-build dist test-dist

run: deps build
	./$(BIN) run

# The upstream OpenSSL and the Debian 13 root are made side by side: one compiles,
# the other mostly downloads and unpacks (the root took 126 s beside the build on a
# clean clone, 104 s alone; BENCHMARKS.md section 8). No
# release build: the tests run the test profile's binary, and `make run` builds its own.
test: deps-test
	$(MAKE) --no-print-directory -j2 openssl-upstream debian-root
	$(CARGO) fmt --all --check
	scripts/check-layering.sh
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings
	$(CARGO) test --workspace --locked
	$(MAKE) --no-print-directory test-platforms

# The platform suite (crates/cipherbench/tests/platform.rs: probe,
# speed, TLS, the tunnel and the quick preset) on the stacks beyond the system's:
# every command pointed at the upstream OpenSSL 3.6.3 build, then inside a Debian 13
# root (debootstrap, cached in target/roots/, about 90 s to make) on its OpenSSL 3.5,
# nginx and strongSwan: this build, as the package built on Debian 12 runs there.
# --workspace, as `make test`'s own `cargo test`: the same features, so nothing is
# built again (with -p cipherbench alone the unified features differ: 2.5 min).
test-platforms: openssl-upstream
	CIPHERBENCH_TEST_OPENSSL=$$(scripts/build-openssl.sh) $(CARGO) test --workspace --locked --test platform
	bin=$$($(CARGO) test --workspace --locked --test platform --no-run 2>&1 | sed -n 's/.*Executable tests\/platform.rs (\(.*\))$$/\1/p' | tail -1); \
	[ -x "$$bin" ] || { echo "make: no platform suite binary from cargo test --no-run" >&2; exit 1; }; \
	scripts/debian-root.sh run scripts/platform-test.sh "$$bin"

# The platform suite built inside the Debian 13 root, against its OpenSSL 3.5 headers
# and its compiler (target/platform/debian-trixie/), and run there: 2.5 minutes of
# building that `make test` leaves to .ci/run.
test-root-build: deps-test debian-root
	scripts/debian-root.sh run scripts/platform-test.sh

# The Debian 13 root the platform suite runs in (target/roots/trixie/, made again only
# when its recipe changes).
debian-root:
	scripts/debian-root.sh build

deps:
	scripts/install-deps.sh run

deps-test:
	scripts/install-deps.sh test

build:
	$(CARGO) build --release --locked

# A current upstream OpenSSL 3.x (3.6.3, from the openssl-src crate), built once into
# target/openssl-upstream/<version>/ for putting another library under test
# (--openssl); about 3-5 minutes on 2 busy cores, nothing on a second run. `test` builds
# it first: the --openssl tests and the variant tests (tests/it/variants.rs, the gateway
# probe test) run against it, as it takes the AVX-512 VAES AES-GCM path that Debian's
# 3.0 does not.
openssl-upstream:
	scripts/build-openssl.sh >/dev/null

# OpenSSL 4.0.3 (openssl-src 400.0.2+4.0.3; about 2 minutes on 2 cores), and a
# cipherbench built against it in its prefix (libexec/cipherbench/cipherbench), which
# `--openssl target/openssl-upstream/4.0.3` starts for its own children: no program
# built for OpenSSL 3 loads libcrypto.so.4. `make test` builds that one unoptimised
# (45 s; its test checks libraries and refusals, not speed); for figures, the default
# (release) profile.
OPENSSL4_SRC := 400.0.2+4.0.3
AGAINST_PROFILE ?= release
openssl4:
	OPENSSL_SRC_VERSION=$(OPENSSL4_SRC) scripts/build-openssl.sh >/dev/null

openssl4-cipherbench: openssl4
	scripts/build-against.sh $$(OPENSSL_SRC_VERSION=$(OPENSSL4_SRC) scripts/build-openssl.sh) --profile $(AGAINST_PROFILE) >/dev/null

# Debian's nginx rebuilt from its source package against OpenSSL 4.0.3, for the TLS
# layer under it (Debian's own links libssl.so.3); about 1 minute.
openssl4-nginx: openssl4
	scripts/build-nginx.sh $$(OPENSSL_SRC_VERSION=$(OPENSSL4_SRC) scripts/build-openssl.sh) >/dev/null

# The OpenSSL 4.0.3 stack, beside `make test` (.ci/run runs both): the three builds
# above (the cipherbench unoptimised: its test checks libraries and refusals, not
# speed), then the test that runs speed and a TLS handshake through them and the
# refusals (`#[ignore]`d in `make test`, which stays under 30 minutes without the
# 3.5 minutes these builds take on 2 vCPUs).
test-openssl4: deps-test
	$(MAKE) --no-print-directory -j2 openssl4-nginx openssl4-cipherbench AGAINST_PROFILE=dev
	$(CARGO) test --workspace --locked --test it -- --ignored library::an_openssl_4

# The release a user installs: target/dist/cipherbench_VERSION_amd64.deb, a tarball
# with the same binary, man pages and completions, and SHA256SUMS (scripts/dist.sh).
dist: deps-test
	scripts/dist.sh

# The package installed with apt on bare Debian 13 and 12 roots (no compiler, no
# clone), its man pages and completion, and the platform suite run against it there
# (scripts/test-dist.sh). .ci/run calls it after `make test`.
test-dist: deps-test
	scripts/test-dist.sh

lint:
	$(CARGO) fmt --all --check
	scripts/check-layering.sh
	$(CARGO) clippy --workspace --all-targets -- -D warnings

clean:
	$(CARGO) clean
