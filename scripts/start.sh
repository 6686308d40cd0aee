#!/usr/bin/env bash
# Quick start: installs what is missing, builds Tandem, pulls the default models and opens
# a chat. With no cloud configured (no TANDEM_CLOUD_URL, nothing in config.toml), the chat
# runs the local stand-in cloud (Qwen2.5-Coder-1.5B served on 127.0.0.1) and stops it on exit.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

install_system_packages
# Built here, for this machine: llama.cpp then uses every SIMD extension the CPU has
# (llama-cpp-2 maps target-cpu=native to GGML_NATIVE; without it ggml gets baseline x86-64).
export RUSTFLAGS="${RUSTFLAGS:--C target-cpu=native}"
TANDEM="$(build_tandem release)"
"$TANDEM" models pull qwen2.5-coder-0.5b

if [ -n "${TANDEM_CLOUD_URL:-}" ]; then
  exec "$TANDEM" chat --cloud "$TANDEM_CLOUD_URL" "$@"
fi
# No cloud given: `tandem chat` serves the 1.5B model itself on 127.0.0.1 (the local
# stand-in) unless config.toml names a cloud.
"$TANDEM" models pull qwen2.5-coder-1.5b
exec "$TANDEM" chat "$@"
