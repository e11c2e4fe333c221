#!/bin/sh
# Run every libFuzzer harness in DIR for RUNS inputs, seeded from
# fuzz/corpus/NAME/ (copied to a scratch dir so the repo stays clean).
# Any crash, leak or sanitizer report fails the run. RUNS defaults to
# FUZZ_RUNS of the Makefile (10 million).
set -eu
dir=$1; runs=$2
src=$(cd "$(dirname "$0")/.." && pwd)
for f in "$dir"/fuzz_*; do
  [ -x "$f" ] || continue
  name=$(basename "$f")
  work=$(mktemp -d)
  if [ -d "$src/fuzz/corpus/$name" ]; then cp "$src/fuzz/corpus/$name"/* "$work"/ 2>/dev/null || true; fi
  echo "== $name: $runs runs"
  # A crash input is kept (outside the repo) for the report and a rerun:
  #   $f /tmp/stagger-fuzz-NAME-crash-...
  if ! "$f" -runs="$runs" -max_len=512 -print_final_stats=1 \
      -artifact_prefix="${TMPDIR:-/tmp}/stagger-fuzz-$name-" "$work" >"$work.log" 2>&1; then
    tail -n 60 "$work.log"; echo "== $name: FAILED" >&2; exit 1
  fi
  tail -n 8 "$work.log"
  rm -rf "$work" "$work.log"
done
