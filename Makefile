# Two commands on a fresh machine:
#   make demo   installs what is missing, builds, runs the tone example
#   make test   installs what is missing, builds, runs every test
.PHONY: setup demo web test test-asan test-ubsan test-tsan bench release release-check fuzz fuzz-service hostile accyd-load random-quality gpu-sums

setup:
	bash tools/setup.sh

demo: setup
	bash tools/demo.sh

test: setup
	bash tools/run_tests.sh

# The example pages (tone, digits) for a person: builds them, lays out the runtimes beside them,
# serves it on 127.0.0.1 and prints the address (PORT=N to choose the port).
web: setup
	bash tools/web.sh

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

# Long fuzz runs (docs/FUZZING.md), with libFuzzer, ASan and UBSan (clang):
# make fuzz [RUNS=N] the wire decoder and compiler; make fuzz-service
# [RUNS=N] accyd's service in process (1,000,000 inputs by default).
# dieharder's battery (all of it by default, hours; TESTS="0 2 100" for some)
# on Accy's raw Threefry bits (tools/random_bits.cc); docs/RANDOM_QUALITY.md.
random-quality: setup
	bash tools/setup.sh --random-quality
	bash tools/random_quality.sh $(TESTS)

fuzz: setup
	bash tools/fuzz/run_fuzzer.sh $(or $(RUNS),1000000)

fuzz-service: setup
	FUZZ_TARGET=service_fuzz FUZZ_BUILD_DIR=$${TMPDIR:-/tmp}/accy-service-fuzz bash tools/fuzz/run_fuzzer.sh $(or $(RUNS),1000000)

# The hostile-client battery against a real accyd (tests/accyd_hostile_test.cc)
# in its long form: 20,000 mutated wire files instead of make test's 600
# (docs/ACCYD.md, "Hostile clients", has its figures).
hostile: setup
	bazel test //tests:accyd_hostile_test --test_env=ACCY_HOSTILE_LONG=1 --test_output=all --test_timeout=3600

# accyd's load test in its long form: 64 clients of 10,000 mixed calls each
# instead of make test's 2,000 (docs/ACCYD.md, "Load", has its figures).
accyd-load: setup
	bazel test -c opt //tests:accyd_e2e_test --test_filter='*SixtyFourClientsMixedCalls*' --test_env=ACCY_LOAD_LONG=1 \
	  --test_output=all

# The device suite's AccurateSums on WGSL (headless Chromium) and MSL (the
# shim): f32 sums of 2^24 values against PyTorch's error, 10 minutes; make
# test leaves them out (Vulkan, x86-64 and wasm run it there).
gpu-sums: setup
	bazel test //tests:wgsl_conformance_test //tests:msl_conformance_test --test_filter='*AccurateSums*' \
	  --test_env=ACCY_SLOW_SUMS=1 --test_output=all
