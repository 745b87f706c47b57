#!/usr/bin/env bash
# The `local` harness against raw llama.cpp (issue 8): prompt processing and generation speed of the engine loom
# runs (with the tool grammar, and without any), side by side with llama.cpp's own llama-bench built from the very
# llama.cpp sources llama-cpp-sys-2 vendors, same file, same threads, same SIMD options (.cargo/config.toml).
# Usage: [ROUNDS=5] benches/local.sh [threads]   (models must be installed: loom model install smollm2-135m, qwen2.5-coder-1.5b)
set -euo pipefail
cd "$(dirname "$0")/.."
T=${1:-2}
ROUNDS=${ROUNDS:-5}
cargo build -q --release -p loom-local --features llama --example local_probe
SRC=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/llama-cpp-sys-2-"$(cargo metadata --format-version 1 --locked | python3 -c 'import json,sys; print([p["version"] for p in json.load(sys.stdin)["packages"] if p["name"]=="llama-cpp-sys-2"][0])')"/llama.cpp | head -1)
TARGET=${CARGO_TARGET_DIR:-target}
BENCH=$TARGET/llama-bench/bin/llama-bench
if [ ! -x "$BENCH" ]; then
  cmake -S "$SRC" -B "$TARGET/llama-bench" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON \
    -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_OPENMP=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TOOLS=ON >/dev/null
  cmake --build "$TARGET/llama-bench" --target llama-bench -j2 >/dev/null
fi
DATA=${LOOM_DATA_HOME:-${XDG_DATA_HOME:-$HOME/.local/share}/loom}/models
for m in smollm2-135m/SmolLM2-135M-Instruct.Q4_1.gguf qwen2.5-coder-1.5b/qwen2.5-coder-1.5b.gguf; do
  f=$DATA/$m
  [ -f "$f" ] || { echo "skip $m: not installed"; continue; }
  echo "== $m, $T threads"
  # loom's engine first, to learn the prompt's length in tokens; then llama-bench on a prompt of that length
  P=64
  for mode in raw call; do
    line=$("$TARGET/release/examples/local_probe" "$f" "$T" "$mode" "$ROUNDS" 2>/dev/null)
    echo "loom engine: $line"
    P=$(sed -n 's/.*prompt_tokens=\([0-9]*\).*/\1/p' <<<"$line")
  done
  "$BENCH" -m "$f" -t "$T" -p "$P" -n 128 -r "$ROUNDS" -o md 2>/dev/null | grep -E "pp$P|tg128|model"
done
