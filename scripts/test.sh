#!/usr/bin/env bash
# Runs every test: installs the npm packages of the conformance harness (the real
# @ag-ui/client 1.0.0 and 0.0.58) and of the web demo (esbuild, playwright-core) when they are
# missing or stale, then the whole cargo test suite. The web demo's browser test needs Debian's
# chromium at /usr/bin/chromium (or CHROMIUM_PATH); .ci/run installs it.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v node >/dev/null 2>&1; then
  echo "scripts/test.sh: node (>= 18) is required for the conformance test" >&2
  exit 1
fi
for dir in conformance web-demo; do
  stamp=$dir/node_modules/.package-lock.json
  if [ ! -f "$stamp" ] || [ $dir/package-lock.json -nt "$stamp" ]; then
    npm ci --prefix $dir --no-audit --no-fund
  fi
done

cargo test --locked --all-targets
