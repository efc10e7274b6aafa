#!/usr/bin/env bash
# Compares agui-gateway with two Python AG-UI servers on the same paced upstream (issue 20):
# installs ag-ui-strands and pydantic-ai's AG-UI adapter (pinned below) from PyPI, each in a
# throwaway venv of its own (strands-agents[openai] wants openai 2, pydantic-ai openai 3), builds the gateway's release binary if needed, runs `agui-gateway bench compare` against
# each server (the Python ones are scripts/compare/*_server.py: one uvicorn process, no access
# log) and prints one markdown table with the date, the machine and the versions. Figures only.
#   scripts/compare.sh                    100 and 1,000 concurrent runs (issue 20's figures)
#   scripts/compare.sh --levels 100,300   other concurrency levels, e.g. for a quick look
# COMPARE_VENV=DIR installs into (or reuses) DIR/strands and DIR/pydantic-ai and keeps them; by
# default the venvs are made under ${TMPDIR:-/tmp} and deleted on exit. CARGO_TARGET_DIR is
# honoured.
set -euo pipefail
cd "$(dirname "$0")/.."

AG_UI_STRANDS=1.0.2
STRANDS_AGENTS=1.62.0
PYDANTIC_AI=2.68.0
UVICORN=0.54.0

levels=100,1000
while [ $# -gt 0 ]; do
  case "$1" in
    --levels) levels=$2; shift 2 ;;
    --levels=*) levels=${1#*=}; shift ;;
    -h | --help) sed -n '2,10p' "$0" | cut -c3-; exit 0 ;;
    *) echo "scripts/compare.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

# Each server holds a socket per client and per upstream call, and so does the bench.
hard=$(ulimit -Hn)
[ "$hard" = unlimited ] && hard=65536
ulimit -n "$hard"

if [ -n "${COMPARE_VENV:-}" ]; then
  venvs=$COMPARE_VENV
else
  venvs=$(mktemp -d "${TMPDIR:-/tmp}/agui-compare.XXXXXX")
  trap 'rm -rf "$venvs"' EXIT
fi
# setup_venv NAME REQUIREMENT...: a venv of its own for one server.
setup_venv() {
  local venv=$venvs/$1
  shift
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  echo "installing into $venv: $*" >&2
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$@" "uvicorn[standard]==$UVICORN" >&2
}
setup_venv strands "ag-ui-strands==$AG_UI_STRANDS" "strands-agents[openai]==$STRANDS_AGENTS"
setup_venv pydantic-ai "pydantic-ai-slim[ag-ui,openai]==$PYDANTIC_AI"
strands=$venvs/strands/bin/python
pydantic=$venvs/pydantic-ai/bin/python
# version PYTHON PACKAGE
version() { "$1" -c "import importlib.metadata as m; print(m.version('$2'))"; }

cargo build --release --locked --bin agui-gateway --example floor_relay >&2
gateway=${CARGO_TARGET_DIR:-target}/release/agui-gateway
floor=${CARGO_TARGET_DIR:-target}/release/examples/floor_relay
gateway_version="$("$gateway" --version | cut -d' ' -f2) ($(git rev-parse --short HEAD 2>/dev/null || echo unknown))"

table=""
# measure NAME VERSION [-- COMMAND...]: one row (the header too, for the first server).
measure() {
  local name=$1 version=$2 out
  shift 2
  echo "== $name" >&2
  if out=$("$gateway" bench compare --name "$name" --server-version "$version" \
    --levels "$levels" "$@"); then
    if [ -z "$table" ]; then table=$out; else table+=$'\n'$(tail -n 1 <<<"$out"); fi
  else
    table+=$'\n'"| $name | $version | failed: see the log above |"
  fi
}
measure agui-gateway "$gateway_version"
# The least a relay on the gateway's own libraries (hyper, reqwest, serde_json) does per token:
# one frame in, one event out, nothing verified, logged or stored.
measure floor-relay "examples/floor_relay ($(git rev-parse --short HEAD 2>/dev/null || echo unknown))" -- "$floor"
measure ag-ui-strands "$(version "$strands" ag-ui-strands) (strands-agents $(version "$strands" strands-agents))" \
  -- "$strands" scripts/compare/strands_server.py
measure pydantic-ai "$(version "$pydantic" pydantic-ai-slim)" \
  -- "$pydantic" scripts/compare/pydantic_server.py

cpu=$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
echo
echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') on $(nproc) cores ($cpu), $(free -g | awk '/^Mem:/ {print $2}') GiB;" \
  "one upstream frame per token, 20 tokens/s, 100 tokens per run, a connection per client;" \
  "Python $("$strands" -c 'import platform; print(platform.python_version())'), one uvicorn $(version "$strands" uvicorn) process each" \
  "(uvloop $(version "$strands" uvloop), httptools $(version "$strands" httptools), no access log);" \
  "openai $(version "$strands" openai) under ag-ui-strands (fastapi $(version "$strands" fastapi)), $(version "$pydantic" openai) under pydantic-ai (starlette $(version "$pydantic" starlette))."
echo
echo "$table"
