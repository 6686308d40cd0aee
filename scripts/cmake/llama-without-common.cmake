# Included by CMake after each project() of the llama.cpp build (see .cargo/config.toml):
# Tandem links only libllama and ggml, so llama.cpp's `common` library is not built.
set(LLAMA_BUILD_COMMON OFF CACHE BOOL "llama: build common utils library" FORCE)
