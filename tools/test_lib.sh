# Shared by the shell tests (sourced): counted checks with a message per
# failure. Each test ends with: echo "$checks checks, $failures failed";
# [ "$failures" -eq 0 ].
failures=0
checks=0

# fail MESSAGE: one failed check, printed.
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# expect CODE NEEDLE -- COMMAND...: runs COMMAND, expects exit status CODE
# and NEEDLE somewhere in its stdout+stderr (an empty NEEDLE matches all).
expect() {
  local code=$1 needle=$2
  shift 3
  checks=$((checks + 1))
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  if [ "$rc" -ne "$code" ]; then
    fail "'$*' exited $rc, expected $code; output:"
    printf '%s\n' "$out" | head -20
    return
  fi
  if [ -n "$needle" ] && ! grep -qF -- "$needle" <<<"$out"; then
    fail "'$*' output lacks '$needle'; output:"
    printf '%s\n' "$out" | head -20
  fi
}
