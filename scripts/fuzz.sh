#!/usr/bin/env bash
# Runs every cargo-fuzz target for a bounded time (seconds per target, default 20): the
# RunAgentInput parser, the execute input parser and the provider stream normalisers. Needs a
# nightly toolchain (libFuzzer's sanitizer flags); installs cargo-fuzz from crates.io when
# missing. A crash fails the run and leaves its input under fuzz/artifacts/<target>/; turn
# it into a regression test before fixing it.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-20}

if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  echo "scripts/fuzz.sh: no nightly toolchain here; fuzzing skipped" >&2
  exit 0
fi
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked

cd fuzz
targets=$(cargo +nightly fuzz list)
cargo +nightly fuzz build -O $targets
for t in $targets; do
  mkdir -p "corpus/$t"
  echo "fuzzing $t for ${secs}s"
  cargo +nightly fuzz run -O "$t" "corpus/$t" seeds/"$t" -- \
    -max_total_time="$secs" -rss_limit_mb=2048 -print_final_stats=1 2>&1 | tail -n 4
done
