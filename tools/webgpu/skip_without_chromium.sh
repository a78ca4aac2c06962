# Sourced by the browser tests (web/runtime_test.sh,
# examples/web/web_example_test.sh): without Chromium the test is skipped,
# saying why (the tally counts a test that prints "SKIPPED: why" and exits 0
# as skipped).
if [ -z "${ACCY_CHROMIUM:-}" ] && [ ! -x /usr/bin/chromium ]; then
  echo "SKIPPED: Chromium not found (/usr/bin/chromium or ACCY_CHROMIUM)"
  exit 0
fi
