#!/usr/bin/env bash
# Quick start: installs what is missing, builds Tandem, pulls the default models and opens
# a chat. With no cloud configured (no TANDEM_CLOUD_URL), it starts the local stand-in cloud
# (`tandem serve` with Qwen2.5-Coder-1.5B on 127.0.0.1) and stops it when the chat ends.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

install_system_packages
# Built here, for this machine: llama.cpp then uses every SIMD extension the CPU has
# (llama-cpp-2 maps target-cpu=native to GGML_NATIVE; without it ggml gets baseline x86-64).
export RUSTFLAGS="${RUSTFLAGS:--C target-cpu=native}"
TANDEM="$(build_tandem release)"
"$TANDEM" models pull qwen2.5-coder-0.5b

cloud="${TANDEM_CLOUD_URL:-}"
if [ -z "$cloud" ]; then
  "$TANDEM" models pull qwen2.5-coder-1.5b
  port="${TANDEM_STANDIN_PORT:-8081}"
  log "starting the local stand-in cloud on 127.0.0.1:$port"
  "$TANDEM" serve --model qwen2.5-coder-1.5b --port "$port" >"$TANDEM_CACHE/stand-in.log" 2>&1 &
  server=$!
  trap 'kill $server 2>/dev/null; wait $server 2>/dev/null' EXIT
  for _ in $(seq 1 120); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
    kill -0 $server 2>/dev/null || { cat "$TANDEM_CACHE/stand-in.log" >&2; exit 1; }
    sleep 0.5
  done
  cloud="http://127.0.0.1:$port/v1"
fi
"$TANDEM" chat --edge qwen2.5-coder-0.5b --cloud "$cloud" "$@"
