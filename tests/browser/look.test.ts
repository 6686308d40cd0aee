/** Screenshots for a person to look at (/tmp/tandem-e2e*.png): light and dark, chat and settings. */
import { afterAll, beforeAll, expect, it } from "vitest";
import type { Browser } from "playwright-core";
import { launch, openApp, send, waitForReply } from "./helpers";

let browser: Browser;
beforeAll(async () => {
  browser = await launch();
});
afterAll(async () => {
  await browser?.close();
});

for (const scheme of ["light", "dark"] as const) {
  it(`renders a readable chat in ${scheme} mode`, async () => {
    // Light at a roomy size, dark at the Tauri window's default 960×720.
    const { page, problems } = await openApp(browser, { colorScheme: scheme, viewport: scheme === "light" ? { width: 1280, height: 860 } : { width: 960, height: 720 } });
    await send(page, "Write a Python function that reverses a string.");
    const reply = await waitForReply(page);
    await reply.locator(".cloud-token").first().hover();
    await page.screenshot({ path: scheme === "light" ? "/tmp/tandem-e2e.png" : "/tmp/tandem-e2e-dark.png" });
    // Text and background differ in the chosen scheme (a real contrast check, not a pixel diff).
    const [fg, bg] = await page.evaluate(() => {
      const s = getComputedStyle(document.body);
      return [s.color, s.backgroundColor];
    });
    expect(fg).not.toBe(bg);
    expect(bg).toBe(scheme === "light" ? "rgb(255, 255, 255)" : "rgb(17, 19, 24)");
    expect(problems).toEqual([]);
    await page.context().close();
  });
}

it("greets with an empty chat, dark", async () => {
  const { page, problems } = await openApp(browser, { colorScheme: "dark", viewport: { width: 960, height: 720 } });
  await page.screenshot({ path: "/tmp/tandem-e2e-empty.png" });
  expect(await page.locator(".empty-state").isVisible()).toBe(true);
  expect(problems).toEqual([]);
  await page.context().close();
});

it("renders a readable settings dialog", async () => {
  const { page, problems } = await openApp(browser, { query: "keyring=broken" });
  await page.locator("#open-settings").click();
  const dialog = page.locator("dialog#settings");
  await dialog.waitFor({ state: "visible" });
  await dialog.locator("#test-connection").click();
  await dialog.locator("#test-result.result-ok").waitFor();
  await page.screenshot({ path: "/tmp/tandem-e2e-settings.png" });
  expect(problems).toEqual([]);
  await page.context().close();
});
