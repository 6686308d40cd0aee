/**
 * An accessibility pass with axe-core over what a user sees: the chat with a routed reply,
 * in light and dark, both settings dialogs and a long chat's marker. Serious and critical
 * violations fail; cloud tokens must be announced as such, not shown only by colour.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { Browser, Page } from "playwright-core";
import { launch, openApp, send, waitForReply } from "./helpers";

const AXE = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

type Violation = { id: string; impact: string | null; help: string; nodes: { target: string[]; failureSummary?: string }[] };

/** Serious and critical violations on the page as it is now, one line each. */
async function violations(page: Page): Promise<string[]> {
  // Evaluated through the DevTools protocol, so the app's CSP (no inline scripts) stays on.
  await page.evaluate(AXE);
  const found = await page.evaluate(async () => {
    const axe = (window as unknown as { axe: { run(): Promise<{ violations: Violation[] }> } }).axe;
    return (await axe.run()).violations;
  });
  return found
    .filter((v) => v.impact === "serious" || v.impact === "critical")
    .map((v) => `${v.id} (${v.impact}): ${v.help} — ${v.nodes.map((n) => `${n.target.join(" ")} [${n.failureSummary ?? ""}]`).slice(0, 4).join(", ")}`);
}

let browser: Browser;
beforeAll(async () => {
  browser = await launch();
});
afterAll(async () => {
  await browser?.close();
});

for (const scheme of ["light", "dark"] as const) {
  it(`a routed reply in ${scheme} mode has no serious accessibility violations`, async () => {
    const { page, problems } = await openApp(browser, { colorScheme: scheme });
    await send(page, "Write a Python function that reverses a string.");
    const reply = await waitForReply(page);
    expect(await violations(page)).toEqual([]);

    // A cloud token says what it is to a screen reader, not only by its colour.
    const token = reply.locator(".cloud-token").first();
    expect(await token.evaluate((el) => el.tagName)).toBe("MARK");
    expect(await token.getAttribute("aria-roledescription")).toBe("cloud token");
    expect(problems).toEqual([]);
    await page.context().close();
  });
}

it("the settings dialog has no serious accessibility violations", async () => {
  const { page, problems } = await openApp(browser);
  await page.locator("#open-settings").click();
  await page.waitForSelector("dialog[open]");
  expect(await violations(page)).toEqual([]);
  expect(problems).toEqual([]);
  await page.context().close();
});

it("a long chat's marker and the chat settings dialog have no serious accessibility violations", async () => {
  const { page, problems } = await openApp(browser, { query: "long" });
  await page.locator(".chat-item", { hasText: "A long conversation" }).click();
  await page.locator(".left-out-marker").scrollIntoViewIfNeeded();
  expect(await violations(page)).toEqual([]);
  await page.locator("#chat-settings-open").click();
  await page.waitForSelector("dialog#chat-settings[open]");
  expect(await violations(page)).toEqual([]);
  expect(problems).toEqual([]);
  await page.context().close();
});
