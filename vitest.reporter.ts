// Prints one `suite-result: P passed, F failed, S skipped (label)` line at the end of a vitest
// run, which scripts/test.sh adds up with cargo's results into the suite's closing line.
// A file that fails to load, or an error outside any test, counts as a failure.
import type { Reporter, TestModule } from "vitest/node";

export default class SuiteResult implements Reporter {
  constructor(private readonly label: string) {}

  onTestRunEnd(modules: ReadonlyArray<TestModule>, errors: ReadonlyArray<unknown>): void {
    let passed = 0;
    let failed = errors.length;
    let skipped = 0;
    for (const module of modules) {
      if (module.state() === "failed" && [...module.children.allTests()].length === 0) failed++;
      for (const test of module.children.allTests()) {
        const state = test.result().state;
        if (state === "passed") passed++;
        else if (state === "failed") failed++;
        else skipped++;
      }
    }
    console.log(`suite-result: ${passed} passed, ${failed} failed, ${skipped} skipped (${this.label})`);
  }
}
