/** The production bundle (ui/dist, embedded by Tauri) carries no mock and nothing the CSP forbids. */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const MOCK_MARKERS = ["__tandemCalls", "__tandemMock", "window.__xss", "Reverse a string in Python"];

function bundle(dir: string): { html: string; code: string } {
  const root = resolve(dir);
  const assets = readdirSync(join(root, "assets")).filter((f) => /\.(js|css)$/.test(f));
  return {
    html: readFileSync(join(root, "index.html"), "utf8"),
    code: assets.map((f) => readFileSync(join(root, "assets", f), "utf8")).join("\n"),
  };
}

describe("bundles", () => {
  it("the e2e bundle has the mock backend (so the check below can fail)", () => {
    const { code } = bundle("ui/dist-e2e");
    for (const marker of MOCK_MARKERS) expect(code).toContain(marker);
  });

  it.skipIf(!existsSync("ui/dist/index.html"))("the production bundle has no mock, no inline script or style, no eval", () => {
    const { html, code } = bundle("ui/dist");
    for (const marker of MOCK_MARKERS) expect(code).not.toContain(marker);
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
    expect(html).not.toMatch(/\sstyle=/);
    expect(html).not.toMatch(/https?:\/\//);
    expect(code).not.toMatch(/\beval\(|new Function\(/);
  });
});
