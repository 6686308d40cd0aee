# Shared by start.sh, test.sh and bench.sh: system packages, caches outside the checkout,
# and model pulls. Sourced, not run.

set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export TANDEM_CACHE="${TANDEM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tandem}"
# Builds live outside the checkout so a fresh clone reuses them and `git clean` keeps them.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$TANDEM_CACHE/target}"
# llama.cpp's C/C++ (built by llama-cpp-sys-2 through CMake, and llama-server) goes through
# ccache: a rebuild of the same sources with the same flags (another feature set of a build
# dependency, a fresh clone, a wiped target folder) costs seconds instead of minutes.
export CMAKE_C_COMPILER_LAUNCHER="${CMAKE_C_COMPILER_LAUNCHER:-ccache}"
export CMAKE_CXX_COMPILER_LAUNCHER="${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}"
export CCACHE_DIR="${CCACHE_DIR:-$TANDEM_CACHE/ccache}"
# Build folders differ per cargo hash; the object files do not.
export CCACHE_NOHASHDIR=1

log() { printf '\033[1m[tandem]\033[0m %s\n' "$*" >&2; }

# Debian/Ubuntu packages the build needs; installs only what is missing.
install_system_packages() {
  local wanted=(build-essential cmake clang libclang-dev pkg-config libdbus-1-dev ccache curl ca-certificates python3 python3-pip "$@")
  local missing=()
  for p in "${wanted[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
  done
  # python3-pip is optional where a pip already works (pyenv, venv).
  if python3 -m pip --version >/dev/null 2>&1; then
    missing=("${missing[@]/python3-pip}")
  fi
  local todo=()
  for p in "${missing[@]}"; do [ -n "$p" ] && todo+=("$p"); done
  if [ "${#todo[@]}" -gt 0 ]; then
    log "installing system packages: ${todo[*]}"
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${todo[@]}" >&2
  fi
  if ! command -v cargo >/dev/null 2>&1; then
    [ -x "$HOME/.cargo/bin/cargo" ] || {
      log "installing the Rust toolchain (rustup)"
      curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal -c clippy,rustfmt >&2
    }
    export PATH="$HOME/.cargo/bin:$PATH"
  fi
}

# Builds the given packages in one cargo invocation (one feature resolution, so shared
# build dependencies such as bindgen and llama-cpp-sys-2 compile once) and prints the
# folder the binaries land in. PROFILE is "release" or "dev"; arguments starting with `--`
# go to cargo as they are (`--no-default-features`).
build_packages() {
  local profile="$1"
  shift
  local args=()
  for p in "$@"; do
    case "$p" in
      --*) args+=("$p") ;;
      *) args+=(-p "$p") ;;
    esac
  done
  log "building $* ($profile)"
  (cd "$ROOT" && cargo build --profile "$profile" "${args[@]}" >&2)
  local dir="$profile"
  [ "$profile" = dev ] && dir=debug
  echo "$CARGO_TARGET_DIR/$dir"
}

# Whether the Node.js on PATH is one Vite 7 runs on (20.19 or newer).
node_is_recent() {
  node -e 'const [a, b] = process.versions.node.split(".").map(Number);
process.exit(a > 20 || (a === 20 && b >= 19) ? 0 : 1)' 2>/dev/null
}

# Node.js and the UI's npm packages (node_modules in the checkout, npm's cache outside it).
# Debian 12 ships Node 18: where the Node on PATH is older than Vite needs, the official
# Node 22 build is fetched from the npm registry (package node-linux-<arch>) into the cache
# and put first on PATH; the system's npm then runs on it.
install_node_packages() {
  if ! command -v npm >/dev/null 2>&1; then
    install_system_packages nodejs npm
  fi
  if ! node_is_recent; then
    local arch
    case "$(uname -m)" in
      x86_64) arch=x64 ;;
      aarch64) arch=arm64 ;;
      *) log "Node.js 20.19 or newer is needed; install it and rerun"; exit 1 ;;
    esac
    local node_dir="$TANDEM_CACHE/node22"
    if [ ! -x "$node_dir/node_modules/node-linux-$arch/bin/node" ]; then
      log "installing Node.js 22 into $node_dir (the system's $(node --version 2>/dev/null || echo Node) is too old for Vite)"
      npm install --prefix "$node_dir" --no-save --no-audit --no-fund --loglevel=error "node-linux-$arch@22" >&2
    fi
    export PATH="$node_dir/node_modules/node-linux-$arch/bin:$PATH"
  fi
  if [ ! -d "$ROOT/node_modules" ] || [ "$ROOT/package-lock.json" -nt "$ROOT/node_modules/.package-lock.json" ]; then
    log "installing npm packages"
    (cd "$ROOT" && npm ci --no-audit --no-fund --loglevel=error >&2)
  fi
}

# Builds the web UI into ui/dist, which the desktop app embeds.
build_ui() {
  log "building the UI"
  (cd "$ROOT" && npm run --silent build >&2)
}
