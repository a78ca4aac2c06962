# Two commands on a fresh machine:
#   make demo   installs what is missing, builds, runs the tone example
#   make test   installs what is missing, builds, runs every test
.PHONY: setup demo test test-asan test-ubsan test-tsan bench release release-check

setup:
	bash tools/setup.sh

demo: setup
	bash tools/demo.sh

test: setup
	bash tools/run_tests.sh

test-asan: setup
	bash tools/run_tests.sh --config=asan

test-ubsan: setup
	bash tools/run_tests.sh --config=ubsan

test-tsan: setup
	bash tools/run_tests.sh --config=tsan

bench: setup
	bash tools/setup.sh --bench
	bash tools/bench.sh

# make release VERSION=vYY.MM.N [DIST=dist]: the source and binary archives
# and their SHA-256 sums (release/make_release.sh, docs/RELEASE.md).
release: setup
	bash release/make_release.sh "$(VERSION)" "$(or $(DIST),dist)"

# Builds both archives, extracts them outside the workspace and builds and
# runs examples/consumer against each (Bazel, CMake); also part of make test.
release-check: setup
	bash release/check_release.sh
