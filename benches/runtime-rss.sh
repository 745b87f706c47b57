#!/usr/bin/env bash
# Peak resident memory of a whole `loom prompt` turn with the scripted `test` harness (no model time), next to
# `loom version`. Peak RSS over the whole process is an upper bound on the idle RSS of a booted agent. Release build.
# Usage: benches/runtime-rss.sh [RUNS]   (prints the median and max of RUNS measurements, in MiB)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-20}
cargo build --release -q -p loom-cli
bin=$(realpath "${CARGO_TARGET_DIR:-target}/release/loom")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/echo.toml" <<'TOML'
[agent]
name = "rss-echo"
[harness]
provider = "test"
echo = true
[session]
provider = "in-memory"
TOML
cat >"$work/tools.toml" <<'TOML'
[agent]
name = "rss-tools"
[harness]
provider = "test"
script = [[ { call = { tool = "read_file", input = { path = "echo.toml" } } }, { say = "done" } ]]
[session]
provider = "in-memory"
[capabilities]
bash = { commands = ["ls"], paths = ["./"] }
read_file = { paths = ["./"] }
write_file = { paths = ["./"] }
edit_file = { paths = ["./"] }
TOML
measure() { # label, command...
  local label=$1; shift
  local samples=()
  for _ in $(seq "$runs"); do
    samples+=("$( (cd "$work" && LOOM_DATA_HOME="$work/data" /usr/bin/time -f '%x %M' "$@" >/dev/null 2>"$work/err" </dev/null) 2>&1; tail -n1 "$work/err")")
  done
  printf '%s\n' "${samples[@]}" | sort -k2 -n | awk -v label="$label" '
    $1 != 0 { print "FAILED (exit " $1 "): " label > "/dev/stderr"; failed = 1; exit 1 }
    { v[NR] = $2 } END { if (failed) exit 1; printf "| %s | %.1f | %.1f |\n", label, v[int((NR + 1) / 2)] / 1024, v[NR] / 1024 }'
}
echo "| command | median peak RSS [MiB] | max [MiB] |"
echo "|---|---:|---:|"
measure '`loom version`' "$bin" version
measure '`loom prompt` echo turn' "$bin" prompt echo.toml hello
measure '`loom prompt` four default tools, one read_file call' "$bin" prompt tools.toml hello
