#!/usr/bin/env bash
# Round-trip cost of a brokered call vs the same command run directly under its own row, side by side in one
# hyperfine run. Not a timed test: it prints a table (and writes benches/results/broker.md) for benches/README.md.
#
# The brokered command is a copy of /bin/true named `gcalcli` on the host PATH, so what is measured is overhead,
# not work. Five commands, all through the real `loom sandbox run`:
#
#   shell, 0 calls       the general row's shell (with its broker) running a loop of 0 iterations
#   shell, N brokered    the same shell calling `gcalcli` N times (each call: shim exec, socket round trip, a fresh
#                        sandbox under the gcalcli row, streams and exit status relayed)
#   shell, N local execs the same shell exec'ing a copy of the binary it can see N times (no broker, no new sandbox)
#   direct under row     `loom sandbox run --grant <gcalcli row> -- gcalcli` (one fresh sandbox, plus loom startup)
#   shell, N round trips the same shell running the shim N times under a name no row names: shim exec, socket
#                        round trip, kernel decision, error frame; no sandbox is built
#   loom unconfined      `loom sandbox run --grant '"*"' -- gcalcli` (loom startup, no sandbox)
#
# Derived, per call:  brokered = (shell N brokered - shell 0) / N
#                     direct   = direct under row - loom unconfined      (the sandbox alone, loom startup removed)
#                     extra    = brokered - direct                        (what the broker adds; target < 3 ms)
#                     protocol = round trip - local exec                  (the same, measured without any sandbox)
#
#   benches/broker.sh                    # debug build (what `cargo build` gives)
#   LOOM_PROFILE=release benches/broker.sh
#   RUNS=30 CALLS=20 TIER=a benches/broker.sh
set -euo pipefail
cd "$(dirname "$0")/.."

profile=${LOOM_PROFILE:-debug}
target=${CARGO_TARGET_DIR:-target}
flags=(-q -p loom-cli --bin loom -p loom-broker --bin loom-shim)
[ "$profile" = release ] && flags+=(--release)
cargo build "${flags[@]}"
loom="$(cd "$target/$profile" && pwd)/loom"
command -v hyperfine >/dev/null || { echo "broker.sh: needs hyperfine (apt-get install hyperfine)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "broker.sh: needs python3 to derive the per-call numbers" >&2; exit 2; }

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
scratch=$(cd "$scratch" && pwd -P)
# The host PATH directory lies inside the gcalcli row's own root, so both the direct run and the brokered run can
# see the binary the same way.
mkdir -p "$scratch/work" "$scratch/gcal/bin"
cp /bin/true "$scratch/gcal/bin/gcalcli"
cp /bin/true "$scratch/work/local-true"
export PATH="$scratch/gcal/bin:$PATH"

runs=${RUNS:-30}
calls=${CALLS:-20}
tier=${TIER:-a}
row="{ commands = [\"gcalcli\"], network = \"*\", paths = [\"$scratch/gcal\"] }"
set_="[{ commands = \"*\", paths = [\"$scratch/work\"] }, $row]"
run="$loom sandbox run --tier $tier --cwd $scratch/work"
if ! $run --grant "$row" -- gcalcli 2>/dev/null; then
  echo "broker.sh: tier ${tier^^} is not available here (see loom doctor); try TIER=b" >&2
  exit 2
fi

mkdir -p benches/results
json="$scratch/broker.json"
hyperfine -N --warmup 3 --runs "$runs" --export-json "$json" --export-markdown benches/results/broker.md \
  -n "shell, 0 calls" "$run --grant '$set_' -- bash -c 'for ((i=0;i<0;i++)); do gcalcli; done'" \
  -n "shell, $calls brokered calls" "$run --grant '$set_' -- bash -c 'for ((i=0;i<$calls;i++)); do gcalcli; done'" \
  -n "shell, $calls local execs" "$run --grant '$set_' -- bash -c 'for ((i=0;i<$calls;i++)); do ./local-true; done'" \
  -n "shell, $calls broker round trips" "$run --grant '$set_' -- bash -c 's=\$(command -v gcalcli); for ((i=0;i<$calls;i++)); do (exec -a not-brokered \"\$s\") 2>/dev/null; done; true'" \
  -n "direct under its row" "$run --grant '$row' -- gcalcli" \
  -n "loom unconfined" "$loom sandbox run --grant '\"*\"' -- gcalcli"

python3 - "$json" "$calls" <<'EOF' | tee -a benches/results/broker.md
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
n = int(sys.argv[2])
def m(name): return r[name]["mean"] * 1000
def s(name): return r[name]["stddev"] * 1000
names = list(r)
shell0, brokered, local, trip, direct, bare = names
per_call = (m(brokered) - m(shell0)) / n
per_local = (m(local) - m(shell0)) / n
per_trip = (m(trip) - m(shell0)) / n
sandbox = m(direct) - m(bare)
extra = per_call - sandbox
print()
print(f"| per call (derived) | ms |")
print(f"|:---|---:|")
print(f"| brokered call, round trip | {per_call:.2f} |")
print(f"| local exec inside the shell (no broker) | {per_local:.2f} |")
print(f"| broker round trip without a sandbox (shim exec + socket + kernel decision + refusal) | {per_trip:.2f} |")
print(f"| protocol cost (round trip - local exec) | {per_trip - per_local:.2f} |")
print(f"| direct under its row (sandbox only, loom startup removed) | {sandbox:.2f} |")
print(f"| **extra per brokered call** (brokered - direct) | **{extra:.2f}** |")
print()
print(f"target: < 3 ms extra per call: {'met' if extra < 3 else 'NOT met'}")
EOF
echo
echo "host: $(nproc) cores, $(uname -r), loom $profile build, tier ${tier^^}, $calls calls per shell, $runs runs"
