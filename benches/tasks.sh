#!/usr/bin/env bash
# Task success of the `local` harness (issue 21): the tasks in benches/tasks/ — read and answer, transform a file,
# count or search with a command, write and run a script, fix a one-line bug — run through the real `loom prompt`
# with benches/tasks/agent.toml on each model named, each checked by the task's own `check` script on the files the
# agent left and its answer. Prints one line per task and a markdown row per model: tasks passed, mean wall time.
# Usage: benches/tasks.sh [MODEL...]   (default: smollm2-135m qwen2.5-coder-1.5b; models must be installed:
#   loom model install NAME). KEEP=1 keeps the scratch directories; TASKS="01 03" runs only those tasks;
#   TOOL_CHOICE=auto runs the agent with tool_choice = "auto" instead of "required"; SCRATCH=DIR runs in DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
TARGET=${CARGO_TARGET_DIR:-target}
# loom, its model engine, and the sandbox's inner stage and broker shim it runs commands through
cargo build -q --release -p loom-cli -p loom-engine -p loom-sandbox -p loom-broker --bins
case $TARGET in /*) ;; *) TARGET=$(pwd)/$TARGET ;; esac
LOOM=$TARGET/release/loom
MODELS=("$@")
[ ${#MODELS[@]} -gt 0 ] || MODELS=(smollm2-135m qwen2.5-coder-1.5b)
# the scratch path is in the prompt, so with sampling it changes a run: SCRATCH=DIR (new or empty) repeats one
[ -n "${SCRATCH:-}" ] && KEEP=1   # a directory named by the caller is theirs to remove
SCRATCH=${SCRATCH:-$(mktemp -d)}
mkdir -p "$SCRATCH"
ROWS=()
RUN=bt$$   # short: a run id is at most 64 characters
DATA=${LOOM_DATA_HOME:-${XDG_DATA_HOME:-$HOME/.local/share}/loom}
trap 'rm -rf "$DATA"/agents/bench-local-tasks/runs/"$RUN"-*' EXIT
for model in "${MODELS[@]}"; do
  passed=0 total=0 millis=0
  for task in benches/tasks/[0-9]*/; do
    task=${task%/}
    name=$(basename "$task")
    if [ -n "${TASKS:-}" ] && ! grep -qw "${name%%-*}" <<<"$TASKS"; then continue; fi
    work=$SCRATCH/$model/$name
    rm -rf "$work"; mkdir -p "$work"
    if [ -d "$task/files" ]; then cp -R "$task/files/." "$work/"; fi
    sed -e "s/@MODEL@/$model/" -e "s/@TOOL_CHOICE@/${TOOL_CHOICE:-required}/" benches/tasks/agent.toml \
      > "$SCRATCH/$model/$name.toml"
    start=$(date +%s%N)
    # the answer is what `loom prompt` prints (the final agent message); its stderr goes to a log beside it. Each task
    # is a run of its own (`--run-id`): its agent storage is a fresh directory, removed below, so no task sees
    # another's state and the manifests written per task do not share one storage directory
    (cd "$work" && "$LOOM" prompt --run-id "$RUN-$model-$name" "$SCRATCH/$model/$name.toml" "$(cat "$OLDPWD/$task/prompt.txt")" \
      > "$SCRATCH/$model/$name.answer" 2> "$SCRATCH/$model/$name.log") || true
    end=$(date +%s%N)
    ms=$(( (end - start) / 1000000 ))
    if (cd "$work" && TASK=$OLDPWD/$task ANSWER=$SCRATCH/$model/$name.answer sh "$OLDPWD/$task/check") >/dev/null 2>&1; then
      ok=pass; passed=$((passed + 1))
    else
      ok=FAIL
    fi
    total=$((total + 1)); millis=$((millis + ms))
    printf '%-20s %-28s %-4s %6.1f s\n' "$model" "$name" "$ok" "$(awk "BEGIN { print $ms / 1000 }")"
  done
  [ "$total" -gt 0 ] && ROWS+=("| $model | $passed/$total | $(awk "BEGIN { printf \"%.1f\", $millis / $total / 1000 }") s |")
done
echo
echo "| model | tasks passed | mean wall time per task |"
echo "|:--|--:|--:|"
printf '%s\n' "${ROWS[@]}"
if [ -n "${KEEP:-}" ]; then echo "scratch: $SCRATCH"; else rm -rf "$SCRATCH"; fi
