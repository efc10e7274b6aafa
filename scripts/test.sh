#!/usr/bin/env bash
# Runs every test: installs the conformance harness's npm packages (the real @ag-ui/client
# 1.0.0 and 0.0.58) when they are missing or stale, then the whole cargo test suite.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v node >/dev/null 2>&1; then
  echo "scripts/test.sh: node (>= 18) is required for the conformance test" >&2
  exit 1
fi
stamp=conformance/node_modules/.package-lock.json
if [ ! -f "$stamp" ] || [ conformance/package-lock.json -nt "$stamp" ]; then
  npm ci --prefix conformance --no-audit --no-fund
fi

cargo test --locked --all-targets
