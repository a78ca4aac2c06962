# Two commands on a fresh machine:
#   make demo   installs what is missing, builds, runs the tone example
#   make test   installs what is missing, builds, runs every test
.PHONY: setup demo test test-asan test-ubsan test-tsan bench

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
