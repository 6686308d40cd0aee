#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit tests, real-model tests, real HTTP servers
# (the project's fake cloud, llama.cpp's llama-server, tandem serve), the UI's unit tests, the
# UI in a real browser (Debian's Chromium) and the real app window under Xvfb. Installs and
# caches everything it needs outside the checkout.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# WebKitGTK and GTK for the desktop shell (src-tauri); D-Bus and gnome-keyring for the keyring
# tests; Chromium for the browser tests; Xvfb, WebKitWebDriver, ImageMagick and xdotool (to type
# into the native save dialog) for the window test.
install_system_packages libwebkit2gtk-4.1-dev libgtk-3-dev librsvg2-dev libssl-dev libxdo-dev \
  file dbus-daemon dbus-bin gnome-keyring chromium xvfb xauth x11-utils imagemagick \
  fonts-dejavu-core webkit2gtk-driver xdotool
install_node_packages
cd "$ROOT"
# The desktop app embeds the built UI, so it is built before anything compiles the app.
build_ui

# One build for everything below: the whole workspace with its tests, so cargo test and the
# window test resolve the same features and llama.cpp compiles once. Clippy lints inside it:
# its driver compiles the workspace's own crates (the wrapper `cargo clippy` itself sets, and
# it builds code as rustc does) while dependencies are built by rustc alone, so no second
# pass checks every dependency again (4.5 to 7 minutes on a cold machine). Everything below
# that compiles the workspace keeps these two variables, so nothing is built twice.
export RUSTC_WORKSPACE_WRAPPER="$(rustc --print sysroot)/bin/clippy-driver"
export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
log "cargo build --workspace --all-targets (clippy -D warnings on the workspace's crates)"
cargo build --workspace --all-targets
BIN="$CARGO_TARGET_DIR/debug"

# Test models live in their own data folder so tests never touch a user's files.
export TANDEM_HOME="$TANDEM_CACHE/test-home"
log "pulling test models"
"$BIN/tandem" models pull tiny smollm2-135m
export TANDEM_TEST_MODELS="$TANDEM_HOME/data/models"

log "building llama-server (cached after the first run)"
TANDEM_LLAMA_SERVER="$(nice -n 5 bash scripts/build-llama-server.sh)"
export TANDEM_LLAMA_SERVER

# One thread per model: the tests run models side by side on two cores (see docs/models.md, threads).
export TANDEM_TEST_THREADS=1

log "cargo fmt --check"
cargo fmt --all -- --check
log "cargo test"
results="$(mktemp)"
trap 'rm -f "$results"' EXIT
# A private D-Bus session with an unlocked Secret Service, so keyring tests use a real
# keyring without touching the user's.
# Its login keyring lives in the cache, created with a throwaway password on first use. The
# daemon is restarted if it dies (it once did, with SIGTRAP, mid-run): one
# crash must not turn every later keyring test red.
export TANDEM_TEST_KEYRING_HOME="$TANDEM_CACHE/test-keyring"
dbus-run-session -- bash -c '
  supervise() {
    trap "kill \$daemon 2>/dev/null; exit 0" TERM
    while :; do
      printf "tandem-test" | XDG_DATA_HOME="$TANDEM_TEST_KEYRING_HOME" \
        gnome-keyring-daemon --foreground --unlock --components=secrets >/dev/null 2>&1 &
      daemon=$!
      wait $daemon
      sleep 0.5
    done
  }
  supervise &
  keyring=$!
  sleep 1
  TANDEM_TEST_KEYRING=1 cargo test --workspace -- --test-threads=2
  status=$?
  kill $keyring 2>/dev/null
  exit $status
' 2>&1 | tee "$results"

log "UI: typecheck, unit tests, browser tests (Chromium)"
# The browser tests also drive the real `tandem serve` from a web page.
TANDEM_BIN="$BIN/tandem" npm test 2>&1 | tee -a "$results"

# The window test runs the app as a user installs it: the .deb (a debug build, which reuses
# the build above), unpacked into a throwaway root as `dpkg -i` would install it.
log "the .deb package, unpacked into a throwaway root"
DEB="$(bash scripts/package.sh --debug | grep '\.deb$' | tail -1 || true)"
[ -n "$DEB" ] || { log "scripts/package.sh wrote no .deb"; exit 1; }
PACKAGE_ROOT="$(mktemp -d)"
trap 'rm -f "$results"; rm -rf "$PACKAGE_ROOT"' EXIT
dpkg-deb -x "$DEB" "$PACKAGE_ROOT"
bash tests/package/check.sh "$DEB" "$PACKAGE_ROOT" 2>&1 | tee -a "$results"

log "the installed app in a real window (Xvfb, tauri-driver, WebKitWebDriver)"
TOOLS="$TANDEM_CACHE/tools"
# Someone else's crate: built without our lints.
[ -x "$TOOLS/bin/tauri-driver" ] ||
  env -u RUSTC_WORKSPACE_WRAPPER -u CLIPPY_ARGS cargo install tauri-driver --version 2.1.0 --locked --root "$TOOLS"
export PATH="$TOOLS/bin:$PATH"
export TANDEM_APP="$PACKAGE_ROOT/usr/bin/tandem-app" TANDEM_FAKE_CLOUD="$BIN/tandem-fake-cloud"
export TANDEM_SCREENSHOT="$TANDEM_CACHE/window-test.png"
xvfb-run -a -s "-screen 0 1280x900x24" node tests/window/run.mjs 2>&1 | tee -a "$results"
log "window screenshot: $TANDEM_SCREENSHOT"

# One closing line for the whole suite (cargo prints one line per test binary; the UI suites
# and the window test print a `suite-result:` line each).
awk '
  /^test result:/ { p += $4; f += $6; s += $8 }
  /^suite-result:/ { p += $2; f += $4; s += $6 }
  END { printf "tests: %d passed, %d failed, %d skipped\n", p, f, s }' "$results"
