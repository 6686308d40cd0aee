/** Shared steps for the browser tests: launch the system Chromium, open the app, drive the chat. */
import { chromium, type Browser, type Page } from "playwright-core";
import { inject } from "vitest";

export const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

/** Starts Chromium; `extraArgs` add switches (a test's own resolver rules, say). */
export function launch(extraArgs: string[] = []): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    // Starting Chromium is set-up, not what is tested: its first start on a freshly set-up
    // machine once took over 30 s (a cold run), so it gets room of its own.
    timeout: 120_000,
    // Playwright rejects --user-data-dir; it manages the profile itself.
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
      ...extraArgs,
    ],
  });
}

export type Call = { cmd: string; args: Record<string, unknown> };

export type OpenOptions = { query?: string; colorScheme?: "light" | "dark"; viewport?: { width: number; height: number } };

/** Opens the app; fails the test on any page error or CSP violation. */
export async function openApp(browser: Browser, options: OpenOptions = {}): Promise<{ page: Page; problems: string[] }> {
  const context = await browser.newContext({
    viewport: options.viewport ?? { width: 1280, height: 860 },
    colorScheme: options.colorScheme ?? "light",
  });
  const page = await context.newPage();
  const problems: string[] = [];
  page.on("pageerror", (e) => problems.push(`pageerror: ${e.message}`));
  page.on("console", (m) => {
    if (m.type() === "error") problems.push(`console: ${m.text()}`);
  });
  await page.addInitScript(() => {
    document.addEventListener("securitypolicyviolation", (e) => {
      (window as unknown as { __csp: string[] }).__csp ??= [];
      (window as unknown as { __csp: string[] }).__csp.push(`${e.violatedDirective} ${e.blockedURI}`);
    });
  });
  await page.goto(`${inject("baseUrl")}${options.query ? `?${options.query}` : ""}`);
  await page.waitForSelector(".chip-edge");
  return { page, problems };
}

export function calls(page: Page): Promise<Call[]> {
  return page.evaluate(() => (window as unknown as { __tandemCalls: Call[] }).__tandemCalls);
}

export async function callsOf(page: Page, cmd: string): Promise<Call[]> {
  return (await calls(page)).filter((c) => c.cmd === cmd);
}

export function cspViolations(page: Page): Promise<string[]> {
  return page.evaluate(() => (window as unknown as { __csp?: string[] }).__csp ?? []);
}

export async function send(page: Page, text: string): Promise<void> {
  const input = page.locator(".composer-input");
  await input.fill(text);
  await input.press("Enter");
}

/** The newest reply, once its footer (shown on `finished`) is there. */
export async function waitForReply(page: Page) {
  const reply = page.locator(".reply").last();
  await reply.locator(".reply-footer").waitFor({ timeout: 15_000 });
  return reply;
}
