#!/usr/bin/env bash
# Task success of the `local` harness (issue 21): the tasks in benches/tasks/ — read and answer, transform a file,
# count or search with a command, write and run a script, fix a one-line bug — run through the real `loom prompt`
# with benches/tasks/agent.toml on each model named, each checked by the task's own `check` script on the files the
# agent left and its answer, in each of several places. Prints one line per task and place, and markdown rows per
# model: tasks passed and mean wall time in each place, and over all places.
# Usage: benches/tasks.sh [MODEL...]   (default: smollm2-135m qwen2.5-coder-1.5b; models must be installed:
#   loom model install NAME). TASKS="01 03" runs only those tasks; TOOL_CHOICE=auto runs the agent with
#   tool_choice = "auto" instead of "required"; PLACES="DIR..." runs in those directories (each new or empty;
#   default: the three places of benches/README.md's results), SCRATCH=DIR in DIR alone; KEEP=1 keeps them.
set -euo pipefail
cd "$(dirname "$0")/.."
MODELS=("$@")
[ ${#MODELS[@]} -gt 0 ] || MODELS=(smollm2-135m qwen2.5-coder-1.5b)
# A place is the directory a run's tasks work in. Its path is in the prompt, so with sampling it changes which tasks
# pass (by one to three of twelve); a run repeated in the same place repeats exactly. One place has misled more
# than once, so a run measures in three fixed ones, the places of benches/README.md's results.
[ -n "${SCRATCH:-}${PLACES:-}" ] && KEEP=1   # directories named by the caller are theirs to remove
read -r -a PLACES <<<"${SCRATCH:-${PLACES:-/tmp/bench-e /tmp/bench-i /tmp/bench-g}}"
for place in "${PLACES[@]}"; do
  case $place in
    /*) ;;
    *) echo "tasks.sh: place $place: give an absolute path (it is part of the prompt)" >&2; exit 2 ;;
  esac
  if [ -e "$place" ] && [ -n "$(ls -A "$place")" ]; then
    echo "tasks.sh: place $place is not empty: a run there would not repeat the last one; move it aside" >&2
    exit 2
  fi
  mkdir -p "$place"
done
TARGET=${CARGO_TARGET_DIR:-target}
# loom, its model engine, and the sandbox's inner stage and broker shim it runs commands through — built from the
# working tree, after the places are checked (a bad place fails at once, before it builds what is being edited)
cargo build -q --release -p loom-cli -p loom-engine -p loom-sandbox -p loom-broker --bins
case $TARGET in /*) ;; *) TARGET=$(pwd)/$TARGET ;; esac
LOOM=$TARGET/release/loom
ROWS=()
mean() { awk "BEGIN { printf \"%.1f s\", $1 / $2 / 1000 }"; }
RUN=bt$$   # short: a run id is at most 64 characters
DATA=${LOOM_DATA_HOME:-${XDG_DATA_HOME:-$HOME/.local/share}/loom}
trap 'rm -rf "$DATA"/agents/bench-local-tasks/runs/"$RUN"-*' EXIT
for model in "${MODELS[@]}"; do
  all_passed=0 all_total=0 all_millis=0
  for place_no in "${!PLACES[@]}"; do
    place=${PLACES[$place_no]}
    passed=0 total=0 millis=0
    for task in benches/tasks/[0-9]*/; do
      task=${task%/}
      name=$(basename "$task")
      if [ -n "${TASKS:-}" ] && ! grep -qw "${name%%-*}" <<<"$TASKS"; then continue; fi
      work=$place/$model/$name
      rm -rf "$work"; mkdir -p "$work"
      if [ -d "$task/files" ]; then cp -R "$task/files/." "$work/"; fi
      sed -e "s/@MODEL@/$model/" -e "s/@TOOL_CHOICE@/${TOOL_CHOICE:-required}/" benches/tasks/agent.toml \
        > "$place/$model/$name.toml"
      start=$(date +%s%N)
      # the answer is what `loom prompt` prints (the final agent message); its stderr goes to a log beside it. Each
      # task is a run of its own (`--run-id`): its agent storage is a fresh directory, removed below, so no task sees
      # another's state and the manifests written per task do not share one storage directory
      (cd "$work" && "$LOOM" prompt --run-id "$RUN-$place_no-$model-$name" "$place/$model/$name.toml" "$(cat "$OLDPWD/$task/prompt.txt")" \
        > "$place/$model/$name.answer" 2> "$place/$model/$name.log") || true
      end=$(date +%s%N)
      ms=$(( (end - start) / 1000000 ))
      if (cd "$work" && TASK=$OLDPWD/$task ANSWER=$place/$model/$name.answer sh "$OLDPWD/$task/check") >/dev/null 2>&1; then
        ok=pass; passed=$((passed + 1))
      else
        ok=FAIL
      fi
      total=$((total + 1)); millis=$((millis + ms))
      printf '%-20s %-16s %-28s %-4s %8s\n' "$model" "$place" "$name" "$ok" "$(mean "$ms" 1)"
    done
    [ "$total" -gt 0 ] && ROWS+=("| $model | \`$place\` | $passed/$total | $(mean "$millis" "$total") |")
    all_passed=$((all_passed + passed)) all_total=$((all_total + total)) all_millis=$((all_millis + millis))
  done
  if [ "$all_total" -gt 0 ]; then
    share="**$all_passed/$all_total** ($((100 * all_passed / all_total)) %)"
    ROWS+=("| $model | all ${#PLACES[@]} | $share | $(mean "$all_millis" "$all_total") |")
  fi
done
echo
echo "| model | place | tasks passed | mean wall time per task |"
echo "|:--|:--|--:|--:|"
printf '%s\n' "${ROWS[@]}"
if [ -n "${KEEP:-}" ]; then echo "kept: ${PLACES[*]}"; else rm -rf "${PLACES[@]}"; fi
