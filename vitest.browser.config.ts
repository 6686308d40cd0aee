// Browser end-to-end tests: real headless Chromium (system package, never downloaded)
// against the e2e build served on 127.0.0.1.
import { defineConfig } from "vitest/config";
import SuiteResult from "./vitest.reporter";

export default defineConfig({
  test: {
    include: ["tests/browser/**/*.test.ts"],
    environment: "node",
    globalSetup: ["tests/browser/global-setup.ts"],
    testTimeout: 30_000,
    // Hooks start Chromium (see launch() in tests/browser/helpers.ts).
    hookTimeout: 120_000,
    fileParallelism: false,
    reporters: ["default", new SuiteResult("UI in Chromium")],
  },
});
