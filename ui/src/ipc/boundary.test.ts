/** Only ui/src/ipc talks to the backend; everything else goes through commands.ts. */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const SRC = resolve("ui/src");

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? sources(path) : /\.(ts|js|mjs)$/.test(name) ? [path] : [];
  });
}

const files = sources(SRC).map((path) => ({ path: relative(SRC, path).split("\\").join("/"), text: readFileSync(path, "utf8") }));
const THIS_FILE = "ipc/boundary.test.ts";

describe("the IPC boundary", () => {
  it("finds the UI's sources (so the checks below can fail)", () => {
    expect(files.map((f) => f.path)).toContain("app.ts");
    expect(files.map((f) => f.path)).toContain("ipc/commands.ts");
  });

  it("no file outside ui/src/ipc imports @tauri-apps/api/core, calls invoke( or reaches for window.__TAURI__", () => {
    const offenders = files
      .filter((f) => !f.path.startsWith("ipc/"))
      .filter((f) => /@tauri-apps\/api\/core|\binvoke\s*\(|__TAURI__|__TAURI_INTERNALS__/.test(f.text))
      .map((f) => f.path);
    expect(offenders).toEqual([]);
  });

  it("inside ui/src/ipc only commands.ts imports invoke (the mock backend replaces it instead)", () => {
    const importers = files
      .filter((f) => f.path !== THIS_FILE)
      .filter((f) => /import\s*{[^}]*\binvoke\b[^}]*}\s*from\s*["']@tauri-apps\/api\/core["']/.test(f.text))
      .map((f) => f.path);
    expect(importers).toEqual(["ipc/commands.ts"]);
  });

  it("the mock backend is only reachable from main.ts behind the e2e mode check", () => {
    const users = files.filter((f) => /ipc\/mock\//.test(f.text) && f.path !== THIS_FILE).map((f) => f.path);
    expect(users).toEqual(["main.ts"]);
    expect(files.find((f) => f.path === "main.ts")!.text).toMatch(/import\.meta\.env\.MODE === "e2e"/);
  });
});
