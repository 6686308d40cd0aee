#!/usr/bin/env bash
# Builds the desktop app's installable bundles for this machine with Tauri's bundler (the
# `tauri` CLI from npm): a .deb on Debian/Ubuntu, and an AppImage with --bundles deb,appimage
# (its tools, linuxdeploy and AppImageKit, are downloaded from GitHub at build time, so it needs
# the internet); .app/.dmg on macOS and .msi/NSIS on Windows, as configured in
# src-tauri/tauri.conf.json. Models are not bundled: the first start offers their download.
# The `tandem` program goes in beside the app (Tauri's externalBin): the app runs it to serve
# the local stand-in cloud.
#
#   bash scripts/package.sh                  # release build, the host's default bundle (.deb here)
#   bash scripts/package.sh --debug          # a debug build (what the test suite installs)
#   bash scripts/package.sh --bundles deb,appimage
#
# Prints the path of each bundle it wrote.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

profile=(); bundles=""
while [ $# -gt 0 ]; do
  case "$1" in
    --debug) profile=(--debug) ;;
    --bundles) bundles="$2"; shift ;;
    *) log "unknown option $1 (use --debug, --bundles LIST)"; exit 2 ;;
  esac
  shift
done
if [ -z "$bundles" ]; then
  case "$(uname -s)" in
    Linux) bundles=deb ;;
    Darwin) bundles=app,dmg ;;
    *) bundles=msi,nsis ;;
  esac
fi

if [ "$(uname -s)" = Linux ]; then
  install_system_packages libwebkit2gtk-4.1-dev libgtk-3-dev librsvg2-dev libssl-dev libxdo-dev file
fi
install_node_packages
cd "$ROOT"
build_ui
log "bundling $bundles (${profile[*]:-release})"
stamp="$(mktemp)"
trap 'rm -f "$stamp"' EXIT
# The debug bundle is the test suite's: built with the suite's own package selection
# (`--workspace --all-targets`, as its one workspace build), cargo resolves the same features,
# so only tauri and the app recompile (for custom-protocol) instead of some 65 crates with
# llama.cpp among them: about 6 minutes on a cold machine.
runner=()
[ "${#profile[@]}" -gt 0 ] && runner=(-- --workspace --all-targets)
dir=release
[ "${#profile[@]}" -gt 0 ] && dir=debug
# The `tandem` program, built with the same package selection as the app's build below (so
# nothing is resolved twice), placed where Tauri looks for a sidecar: binaries/NAME-TRIPLE.
if [ "${#profile[@]}" -gt 0 ]; then
  cargo build --workspace --all-targets >&2
else
  build_packages release tandem-cli tandem-app >/dev/null
fi
exe=""
case "$(uname -s)" in MINGW* | MSYS* | CYGWIN*) exe=.exe ;; esac
triple="$(rustc -vV | sed -n 's/^host: //p')"
mkdir -p src-tauri/binaries
cp "$CARGO_TARGET_DIR/$dir/tandem$exe" "src-tauri/binaries/tandem-$triple$exe"
npx tauri build "${profile[@]}" --bundles "$bundles" \
  --config '{"bundle":{"externalBin":["binaries/tandem"]}}' "${runner[@]}" >&2
find "$CARGO_TARGET_DIR/$dir/bundle" -maxdepth 2 -type f -newer "$stamp" \
  \( -name '*.deb' -o -name '*.AppImage' -o -name '*.dmg' -o -name '*.msi' -o -name '*.exe' \)
