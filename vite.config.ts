// The UI is built from ui/ into ui/dist, which the Tauri shell loads. `--mode e2e` builds
// the same app with a mock backend into ui/dist-e2e, for the browser tests only.
import { defineConfig } from "vite";

export default defineConfig(({ mode }) => ({
  root: "ui",
  base: "./",
  clearScreen: false,
  server: { port: 1420, strictPort: true, host: "127.0.0.1" },
  build: {
    outDir: mode === "e2e" ? "dist-e2e" : "dist",
    emptyOutDir: true,
    target: "es2022",
    sourcemap: mode === "e2e",
  },
}));
