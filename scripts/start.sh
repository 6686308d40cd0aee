#!/usr/bin/env bash
# Quick start: installs what is missing, builds Tandem, pulls the default models and opens
# the desktop app (or, with no display, the terminal chat). With no cloud configured (no
# TANDEM_CLOUD_URL, nothing in config.toml), Tandem serves Qwen2.5-Coder-1.5B itself on
# 127.0.0.1 as the local stand-in cloud and stops it on exit.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

install_system_packages libwebkit2gtk-4.1-dev libgtk-3-dev librsvg2-dev libssl-dev libxdo-dev file
install_node_packages
# Built here, for this machine: llama.cpp then uses every SIMD extension the CPU has
# (llama-cpp-2 maps target-cpu=native to GGML_NATIVE; without it ggml gets baseline x86-64).
export RUSTFLAGS="${RUSTFLAGS:--C target-cpu=native}"
# Without default features: the CLI leaves out router training (candle, gemm, tokenizers:
# about a third of a cold build), which the app never needs.
if [ -z "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]; then
  BIN="$(build_packages release --no-default-features tandem-cli)"
else
  # The app embeds the built UI; CLI and app build in one go so llama.cpp compiles once.
  build_ui
  BIN="$(build_packages release --no-default-features tandem-cli tandem-app)"
fi
TANDEM="$BIN/tandem"
"$TANDEM" models pull qwen2.5-coder-0.5b
if [ -z "${TANDEM_CLOUD_URL:-}" ]; then
  "$TANDEM" models pull qwen2.5-coder-1.5b
fi

if [ -z "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]; then
  log "no display: opening the terminal chat instead of the window"
  exec "$TANDEM" chat ${TANDEM_CLOUD_URL:+--cloud "$TANDEM_CLOUD_URL"} "$@"
fi
# The app's cloud is set in its Settings (TANDEM_CLOUD_URL is for the terminal chat).
exec "$BIN/tandem-app" "$@"
