#!/usr/bin/env bash
# Runs every cargo-fuzz target for a bounded time (seconds per target, default 20): the
# RunAgentInput parser, the execute input parser, the provider stream normalisers (OpenAI,
# Anthropic, Bedrock). Needs a nightly toolchain (libFuzzer's coverage flags); installs
# cargo-fuzz from crates.io when missing. A crash fails the run and leaves its input under
# fuzz/artifacts/<target>/; turn it into a regression test before fixing it.
# `scripts/fuzz.sh build` only builds (CI builds while the tests run).
#
# The build is unoptimised with debug assertions (overflow checks find more, and it builds in
# half the time) and without a sanitizer (the code under fuzz has no unsafe blocks). FUZZ_RELEASE=1 builds
# optimised with AddressSanitizer, for long local runs.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-20}
build_only=0
if [ "$secs" = build ]; then build_only=1; fi

if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  echo "scripts/fuzz.sh: no nightly toolchain here; fuzzing skipped" >&2
  exit 0
fi
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked

cd fuzz
if [ "${FUZZ_RELEASE:-0}" = 1 ]; then
  build=(-O)
else
  build=(--dev -s none)
fi
targets=$(cargo +nightly fuzz list)
cargo +nightly fuzz build "${build[@]}"
if ((build_only)); then exit 0; fi
log=$(mktemp)
for t in $targets; do
  mkdir -p "corpus/$t"
  echo "fuzzing $t for ${secs}s"
  if ! cargo +nightly fuzz run "${build[@]}" "$t" "corpus/$t" seeds/"$t" -- \
    -max_total_time="$secs" -rss_limit_mb=2048 -print_final_stats=1 >"$log" 2>&1; then
    tail -n 60 "$log"
    echo "scripts/fuzz.sh: $t failed; the input is under fuzz/artifacts/$t/" >&2
    exit 1
  fi
  grep -E '^Done|stat::number_of_executed_units' "$log" | head -n 2
done
