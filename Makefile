# The two commands: `make run` (install what is missing, build, run the main job)
# and `make test` (install what is missing, check formatting, the modules' one-way
# layering and lints, run every test). Both work on a fresh Debian machine, as root
# or with sudo.

CARGO ?= cargo
BIN := target/release/cipherbench

.PHONY: run test deps deps-test build lint bench clean openssl-upstream

run: deps build
	./$(BIN) run

test: deps-test openssl-upstream
	$(CARGO) fmt --all --check
	scripts/check-layering.sh
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings
	$(CARGO) build --release --locked
	$(CARGO) test --workspace --locked

deps:
	scripts/install-deps.sh run

deps-test:
	scripts/install-deps.sh test

build:
	$(CARGO) build --release --locked

# A current upstream OpenSSL 3.x (3.6.3, from the openssl-src crate), built once into
# target/openssl-upstream/<version>/ for putting another library under test; about 3-5
# minutes on 2 busy cores, nothing on a second run. `test` builds it first: the variant
# tests (tests/variants.rs, the gateway probe test) run against it, as it takes the
# AVX-512 VAES AES-GCM path that Debian's 3.0 does not.
openssl-upstream:
	scripts/build-openssl.sh >/dev/null

lint:
	$(CARGO) fmt --all --check
	scripts/check-layering.sh
	$(CARGO) clippy --workspace --all-targets -- -D warnings

clean:
	$(CARGO) clean
