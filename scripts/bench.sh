#!/usr/bin/env bash
# Benchmarks, side by side in one run (ratios, not absolute times): builds in release,
# pulls the default models, builds llama-server, runs tandem-bench and writes
# bench/RESULTS.md. Run on an otherwise idle machine.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

install_system_packages
# Built here, for this machine: llama.cpp then uses every SIMD extension the CPU has
# (llama-cpp-2 maps target-cpu=native to GGML_NATIVE; without it ggml gets baseline x86-64).
export RUSTFLAGS="${RUSTFLAGS:--C target-cpu=native}"
cd "$ROOT"
BIN="$(build_packages release tandem-cli tandem-bench)"
TANDEM="$BIN/tandem"
"$TANDEM" models pull qwen2.5-coder-0.5b qwen2.5-coder-1.5b
# The network comparison's long replies answer MT-bench prompts (open:dev).
"$TANDEM" data pull open
LLAMA_SERVER="$(bash scripts/build-llama-server.sh)"
mkdir -p bench
"$BIN/tandem-bench" \
  --edge "$("$TANDEM" models path qwen2.5-coder-0.5b)" \
  --cloud "$("$TANDEM" models path qwen2.5-coder-1.5b)" \
  --llama-server "$LLAMA_SERVER" \
  --mlp models/routers/qwen2.5-coder-0.5b--qwen2.5-coder-1.5b.safetensors \
  --out bench/RESULTS.md "$@"
