// Unit tests: TypeScript modules of ui/src in jsdom. Browser tests have their own config.
import { defineConfig } from "vitest/config";
import SuiteResult from "./vitest.reporter";

export default defineConfig({
  test: {
    include: ["ui/src/**/*.test.ts"],
    environment: "jsdom",
    reporters: ["default", new SuiteResult("UI unit tests")],
  },
});
