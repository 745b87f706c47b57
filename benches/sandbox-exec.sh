#!/usr/bin/env bash
# Per-exec overhead of the sandbox: `/bin/true` bare, under bwrap alone, and through `loom sandbox run` unconfined
# (grant "*") and under each tier, measured side by side in one hyperfine run. Not a timed test: it prints a table
# (and writes benches/results/sandbox-exec.md) for benches/README.md.
#
#   benches/sandbox-exec.sh            # debug build of loom (what `cargo build` gives)
#   LOOM_PROFILE=release benches/sandbox-exec.sh
#   RUNS=200 benches/sandbox-exec.sh
#   BASELINE=/tmp/old/loom benches/sandbox-exec.sh   # an older loom's tiers in the same run, for before/after
#
# This is the whole-process view (each row pays loom's own start); the in-process view of the same spawn path, which
# is what the bash tool pays per call, is `cargo bench -p loom-benches --bench sandbox_spawn`.
set -euo pipefail
cd "$(dirname "$0")/.."

profile=${LOOM_PROFILE:-debug}
target=${CARGO_TARGET_DIR:-target}
# loom and its inner stage (tiers A and C run loom-sandbox-exec from next to loom)
bins=(-p loom-cli --bin loom -p loom-sandbox --bin loom-sandbox-exec)
if [ "$profile" = release ]; then
  cargo build -q --release "${bins[@]}"
else
  cargo build -q "${bins[@]}"
fi
loom="$(cd "$target/$profile" && pwd)/loom"
command -v hyperfine >/dev/null || { echo "sandbox-exec.sh: needs hyperfine (apt-get install hyperfine)" >&2; exit 2; }
command -v bwrap >/dev/null || { echo "sandbox-exec.sh: needs bubblewrap" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
grant="{ commands = \"*\", paths = [\"$work\"] }"
runs=${RUNS:-100}

cmds=(
  -n "bare /bin/true" "/bin/true"
  -n "bwrap alone (userns+pidns+netns, ro /)" "bwrap --unshare-user --unshare-pid --unshare-net --die-with-parent --new-session --ro-bind / / --dev /dev --proc /proc /bin/true"
  -n "loom, grant \"*\" (unconfined)" "$loom sandbox run --grant '\"*\"' -- /bin/true"
)
# BASELINE=/path/to/an/older/loom adds its tiers to the same run (e.g. a build of an earlier commit).
for bin in "$loom" ${BASELINE:+"$BASELINE"}; do
  label=loom
  [ "$bin" = "$loom" ] || label="baseline loom"
  for tier in a b c; do
    if "$bin" sandbox run --tier "$tier" --cwd "$work" --grant "$grant" -- /bin/true 2>/dev/null; then
      cmds+=(-n "$label tier ${tier^^}" "$bin sandbox run --tier $tier --cwd $work --grant '$grant' -- /bin/true")
    else
      echo "sandbox-exec.sh: $label tier ${tier^^} is not available here; skipped (see loom doctor)" >&2
    fi
  done
done

# what a user pays by default: the first tier whose trial passes (the trial runs once per process, before the command)
cmds+=(-n "loom, tier chosen by trial (no --tier)" "$loom sandbox run --cwd $work --grant '$grant' -- /bin/true")

mkdir -p benches/results
hyperfine -N --warmup 10 --runs "$runs" --export-markdown benches/results/sandbox-exec.md "${cmds[@]}"
echo
echo "host: $(nproc) cores, $(uname -r), $(bwrap --version), loom $profile build"
cat benches/results/sandbox-exec.md
