#!/usr/bin/env bash
# Whole-process `loom audit` of examples/minimal-agent/agent.toml, side by side with `loom version` (the process
# start-up floor), in one hyperfine run. Release build. Usage: benches/audit.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-500}
cargo build --release -q -p loom-cli
bin=${CARGO_TARGET_DIR:-target}/release/loom
hyperfine -N --warmup 30 --runs "$runs" \
  "$bin audit examples/minimal-agent/agent.toml" \
  "$bin version"
