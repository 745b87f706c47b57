#!/usr/bin/env bash
# The `local` harness against raw llama.cpp (issue 8): first-token latency, prompt processing and generation speed
# of the engine loom runs (the `loom-engine` process, driven over its pipes exactly as the harness drives it) — with
# no grammar (`raw`), with the tool grammar in loom's form (`call`) and with the model's own tool format on (`lazy`: the
# tagged format's lazy grammar and trigger, as Qwen and other ChatML models run) — side by side with
# benches/llama_raw.c, the same work through llama.cpp's C API with no loom and no Rust, linked against the very
# static libraries llama-cpp-sys-2 built for loom (same sources, same SIMD options from .cargo/config.toml). The
# crate vendors llama.cpp without its tools/ directory, so llama-bench cannot be built from the same sources.
# Configurations alternate round by round (ROUNDS rounds each), so load hits them alike; run it on an idle machine:
# ggml's worker threads spin at barriers, so a busy machine collapses multi-threaded speed.
# Usage: [ROUNDS=5] benches/local.sh [threads]
#   (models must be installed: loom model install smollm2-135m; loom model install qwen2.5-coder-1.5b)
set -euo pipefail
cd "$(dirname "$0")/.."
T=${1:-2}
ROUNDS=${ROUNDS:-5}
TARGET=${CARGO_TARGET_DIR:-target}
# the engine program, then the probe that drives it (with `--example` alone, cargo builds no binary: the probe would
# run whatever loom-engine an earlier build left, which loom refuses when it does not confine itself)
cargo build -q --release -p loom-engine --bins
cargo build -q --release -p loom-local --example local_probe
OUT=$(ls -td "$TARGET"/release/build/llama-cpp-sys-2-*/out | head -1)
RAW=$TARGET/release/llama_raw
cc -O2 -o "$RAW" benches/llama_raw.c -I"$OUT/include" -L"$OUT/lib" -lllama -lggml -lggml-cpu -lggml-base -lstdc++ -lm \
  -lpthread
# one line per run (`mode=... prompt_tokens=... first_token_ms=... pp_tok_s=... tg_tok_s=...`) -> a markdown table
# of the means per engine
SUMMARY=$(cat <<'PY'
import sys, collections
rows = collections.defaultdict(list)
for line in sys.stdin:
    kv = dict(p.split("=", 1) for p in line.split())
    rows[kv.pop("mode")].append({k: float(v) for k, v in kv.items()})
names = {"llama.cpp": "raw llama.cpp (llama_raw.c)", "raw": "loom engine, no grammar",
         "call": "loom engine, tool grammar", "lazy": "loom engine, own tool format (lazy grammar)"}
print("| engine | prompt tokens | first token [ms] | prompt [tok/s] | generation [tok/s] |")
print("|:--|--:|--:|--:|--:|")
for mode in ("llama.cpp", "raw", "call", "lazy"):
    r = rows.get(mode, [])
    if r:
        m = {k: sum(x[k] for x in r) / len(r) for k in r[0]}
        print("| %s | %.0f | %.1f | %.1f | %.1f |" % (names[mode], m["prompt_tokens"], m["first_token_ms"],
                                                   m["pp_tok_s"], m["tg_tok_s"]))
PY
)
DATA=${LOOM_DATA_HOME:-${XDG_DATA_HOME:-$HOME/.local/share}/loom}/models
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for m in smollm2-135m/SmolLM2-135M-Instruct.Q4_1.gguf qwen2.5-coder-1.5b/qwen2.5-coder-1.5b.gguf; do
  f=$DATA/$m
  [ -f "$f" ] || { echo "skip $m: not installed"; continue; }
  echo "== $m, $T threads, $ROUNDS rounds of each"
  for _ in $(seq "$ROUNDS"); do
    "$RAW" "$f" "$T" 1 2>/dev/null
    "$TARGET/release/examples/local_probe" "$f" "$T" raw 1 2>/dev/null
    "$TARGET/release/examples/local_probe" "$f" "$T" call 1 2>/dev/null
    "$TARGET/release/examples/local_probe" "$f" "$T" lazy 1 2>/dev/null
  done | python3 -c "$SUMMARY"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
