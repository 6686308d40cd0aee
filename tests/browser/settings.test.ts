/**
 * Settings: presets, the API key (only ever shown masked), test connection, download, save, and
 * the latest router evaluation's chart.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Browser, Page } from "playwright-core";
import { callsOf, cspViolations, launch, openApp } from "./helpers";
import { recorded } from "../../ui/src/ipc/mock/transcript";

let browser: Browser;
beforeAll(async () => {
  browser = await launch();
});
afterAll(async () => {
  await browser?.close();
});

async function openSettings(page: Page) {
  await page.locator("#open-settings").click();
  const dialog = page.locator("dialog#settings");
  await dialog.waitFor({ state: "visible" });
  return dialog;
}

describe("settings", () => {
  it("a preset fills URL and mode; the key is saved for that endpoint and shown only masked", async () => {
    const { page } = await openApp(browser);
    const dialog = await openSettings(page);
    await dialog.locator("#cloud-preset").selectOption({ label: "OpenRouter (needs key)" });
    expect(await dialog.locator("#cloud-url").inputValue()).toBe("https://openrouter.ai/api/v1");
    expect(await dialog.locator("#cloud-mode").inputValue()).toBe("chat");

    const secret = "sk-or-v1-0123456789secretabcd";
    await dialog.locator("#api-key").fill(secret);
    await dialog.locator("#save-key").click();
    await expect.poll(() => dialog.locator("#key-status").textContent()).toContain("…abcd");
    expect(await dialog.locator("#key-status").textContent()).toContain("for https://openrouter.ai");
    expect((await callsOf(page, "key_set"))[0]!.args).toEqual({ url: "https://openrouter.ai/api/v1", key: secret });
    expect(await dialog.locator("#api-key").inputValue()).toBe("");
    const everything = await page.evaluate(() => document.documentElement.outerHTML);
    expect(everything).not.toContain("0123456789secret");

    // Another endpoint typed in does not have it.
    await dialog.locator("#cloud-url").fill("https://api.example.com/v1");
    await dialog.locator("#cloud-url").blur();
    await expect.poll(() => dialog.locator("#key-status").textContent()).toContain("No key stored for https://api.example.com");
    await dialog.locator("#cloud-url").fill("https://openrouter.ai/api/v1");
    await dialog.locator("#cloud-url").blur();
    await expect.poll(() => dialog.locator("#key-status").textContent()).toContain("…abcd");

    await dialog.locator("#clear-key").click();
    await expect.poll(() => dialog.locator("#key-status").textContent()).toContain("No key stored");
    expect((await callsOf(page, "key_clear"))[0]!.args).toEqual({ url: "https://openrouter.ai/api/v1" });
    await page.context().close();
  });

  it("says the environment variable still works when the keyring cannot be used", async () => {
    const { page } = await openApp(browser, { query: "keyring=broken" });
    const dialog = await openSettings(page);
    await dialog.locator("#cloud-url").fill("https://openrouter.ai/api/v1");
    await dialog.locator("#cloud-url").blur();
    const warning = dialog.locator("#key-status .warning");
    await warning.waitFor();
    expect(await warning.textContent()).toContain("no secret service");
    expect(await warning.textContent()).toContain("TANDEM_CLOUD_API_KEY");
    await page.context().close();
  });

  it("test connection shows its result kind clearly", async () => {
    const { page } = await openApp(browser);
    const dialog = await openSettings(page);
    const result = dialog.locator("#test-result");

    await dialog.locator("#cloud-url").fill("https://wrong.example/v1");
    await dialog.locator("#test-connection").click();
    await expect.poll(() => result.textContent()).toContain("Wrong key");
    expect(await result.getAttribute("class")).toContain("result-cloud_wrong_key");

    await dialog.locator("#cloud-url").fill("http://down.example/v1");
    await dialog.locator("#test-connection").click();
    await expect.poll(() => result.textContent()).toContain("Unreachable");

    await dialog.locator("#cloud-url").fill("http://127.0.0.1:8080/v1");
    await dialog.locator("#cloud-model").fill("missing");
    await dialog.locator("#test-connection").click();
    await expect.poll(() => result.textContent()).toContain("Model not found");

    await dialog.locator("#cloud-model").fill("");
    await dialog.locator("#test-connection").click();
    await expect.poll(() => result.textContent()).toContain("Connected");
    expect(await result.textContent()).toContain("qwen2.5-1.5b-instruct");
    const tested = await callsOf(page, "cloud_test");
    expect(tested.at(-1)!.args).toEqual({ cloud: { url: "http://127.0.0.1:8080/v1", model: null, mode: "completions" }, key: null });
    // A key typed but not saved is what the test sends, for this URL only.
    await dialog.locator("#api-key").fill("sk-typed-1234");
    await dialog.locator("#test-connection").click();
    await expect.poll(async () => (await callsOf(page, "cloud_test")).length).toBe(tested.length + 1);
    expect((await callsOf(page, "cloud_test")).at(-1)!.args.key).toBe("sk-typed-1234");
    await page.context().close();
  });

  it("downloads an edge model with progress, then the sha256 check, then done", async () => {
    const { page } = await openApp(browser);
    const dialog = await openSettings(page);
    await dialog.locator("#edge-model").selectOption("smollm2-360m");
    await dialog.locator("#download-model").click();
    const label = dialog.locator(".pull-label");
    await expect.poll(() => label.textContent()).toMatch(/\d+ %/);
    await expect.poll(() => label.textContent()).toContain("verifying sha256");
    await expect.poll(() => label.textContent()).toContain("done");
    expect((await callsOf(page, "model_pull"))[0]!.args.name).toBe("smollm2-360m");
    await page.context().close();
  });

  it("offers a GGUF file opened from disk as the edge model", async () => {
    const { page } = await openApp(browser);
    const dialog = await openSettings(page);
    await dialog.locator("#open-gguf").click();
    await expect.poll(() => dialog.locator("#edge-model").inputValue()).toBe("/home/you/models/my-model.Q4_K_M.gguf");
    await dialog.locator("#save-settings").click();
    await dialog.waitFor({ state: "hidden" });
    const saved = (await callsOf(page, "settings_set")).at(-1)!.args.settings as { edge: string };
    expect(saved.edge).toBe("/home/you/models/my-model.Q4_K_M.gguf");
    await page.context().close();
  });

  it("saves settings and the spend limits", async () => {
    const { page } = await openApp(browser);
    const dialog = await openSettings(page);
    // Each router says in one line what it does; the default one first.
    expect(await dialog.locator("#router-kind").inputValue()).toBe("blend");
    expect(await dialog.locator("#router-hint").textContent()).toContain("The default");
    expect(await dialog.locator("#router-hint").textContent()).toContain("two best next tokens are nearly tied");
    await dialog.locator("#router-kind").selectOption("margin");
    expect(await dialog.locator("#router-hint").textContent()).not.toContain("The default");
    await dialog.locator("#router-kind").selectOption("entropy");
    expect(await dialog.locator("#router-hint").textContent()).toContain("most spread out");
    await dialog.locator("#threads").fill("4");
    // On by default; a user who pays per request can turn it off.
    expect(await dialog.locator("#ask-ahead").isChecked()).toBe(true);
    expect(await dialog.locator("label.check").textContent()).toContain("still billed");
    await dialog.locator("#ask-ahead").uncheck();
    await dialog.locator("#spend-cap").fill("2.5");
    expect(await dialog.locator("#max-wait").inputValue()).toBe("");
    await dialog.locator("#max-wait").fill("800");
    await dialog.locator("#price-in").fill("0.2");
    await dialog.locator("#price-out").fill("0.8");
    // Blank until set: cached prompt tokens cost the input price.
    expect(await dialog.locator("#price-cached").inputValue()).toBe("");
    await dialog.locator("#price-cached").fill("0.05");
    // What new chats start with.
    const newChats = dialog.locator("#new-chat-settings");
    expect(await newChats.locator("[name=max_tokens]").inputValue()).toBe("256");
    await newChats.locator("[name=system_prompt]").fill("Be brief.");
    await newChats.locator("[name=context_policy]").selectOption("stop");
    await dialog.locator("#save-settings").click();
    await dialog.waitFor({ state: "hidden" });
    const saved = (await callsOf(page, "settings_set")).at(-1)!.args.settings;
    expect(saved).toEqual({
      edge: "qwen2.5-coder-0.5b",
      threads: 4,
      cloud: { url: "", model: null, mode: "completions" },
      ask_ahead: false,
      router: { kind: "entropy" },
      chat: { system_prompt: "Be brief.", temperature: 0, top_p: 0.95, max_tokens: 256, context_policy: "stop" },
    });
    const budget = (await callsOf(page, "budget_set")).at(-1)!.args.budget as Record<string, unknown>;
    expect(budget.daily_spend_cap_usd).toBe(2.5);
    expect(budget.max_wait_ms).toBe(800);
    expect(budget.prices).toEqual({ input_per_mtok: 0.2, output_per_mtok: 0.8, cached_input_per_mtok: 0.05 });
    await expect.poll(() => page.locator(".router").textContent()).toBe("entropy");
    // Opened again, the dialog shows what was saved.
    const again = await openSettings(page);
    expect(await again.locator("#ask-ahead").isChecked()).toBe(false);
    await page.context().close();
  });

  it("a negative spend cap is refused in the backend's words and the dialog stays open", async () => {
    const { page } = await openApp(browser);
    const dialog = await openSettings(page);
    await dialog.locator("#spend-cap").fill("-1");
    await dialog.locator("#save-settings").click();
    const toast = dialog.locator(".toast-error");
    await toast.waitFor();
    const sent = (await callsOf(page, "budget_set")).at(-1)!.args;
    const answer = recorded("budget_set", sent);
    if (!answer || !("error" in answer)) throw new Error(`the backend was not recorded refusing ${JSON.stringify(sent)}`);
    expect(await toast.locator(".toast-kind").textContent()).toBe(answer.error.kind);
    expect(await toast.textContent()).toContain(answer.error.message);
    expect(await dialog.isVisible()).toBe(true);
    await page.context().close();
  });

  it("shows the latest evaluation's chart as an image as wide as the dialog", async () => {
    const { page, problems } = await openApp(browser);
    const dialog = await openSettings(page);
    const section = dialog.locator("section", { has: page.locator("h3", { hasText: "Router evaluation" }) });
    const chart = section.locator("img.evaluation-chart");
    await chart.waitFor();
    expect(await chart.getAttribute("alt")).toBe("Accuracy against cloud share of the latest evaluation");
    // It decoded: a broken image has no natural size.
    await expect.poll(() => chart.evaluate((img: HTMLImageElement) => img.complete && img.naturalWidth)).toBe(200);
    // Scaled up from its 200 px to the section's width, keeping its 2:1 shape.
    const size = await chart.evaluate((img: HTMLImageElement) => ({ width: img.clientWidth, height: img.clientHeight, section: img.parentElement!.clientWidth }));
    expect(size.width).toBeGreaterThan(400);
    expect(size.width).toBe(size.section);
    expect(Math.abs(size.height - size.width / 2)).toBeLessThanOrEqual(1);
    // Shown as a picture, never inserted as markup.
    expect(await section.locator("svg").count()).toBe(0);
    expect(await callsOf(page, "evaluation_latest")).toHaveLength(1);
    expect(await cspViolations(page)).toEqual([]);
    expect(problems).toEqual([]);
    await page.context().close();
  });

  it("says how to run an evaluation when there is none yet", async () => {
    const { page } = await openApp(browser, { query: "eval=none" });
    const dialog = await openSettings(page);
    const section = dialog.locator("section", { has: page.locator("h3", { hasText: "Router evaluation" }) });
    await expect
      .poll(() => section.locator(".evaluation").textContent())
      .toBe("No evaluation yet: run tandem eval to measure accuracy against cloud share.");
    expect(await section.locator("img").count()).toBe(0);
    await page.context().close();
  });

  it("a failing evaluation read shows a coded toast and the rest of the settings still open", async () => {
    const { page } = await openApp(browser);
    await page.evaluate(() => {
      const mock = (window as unknown as { __tandemMock: { failNext(c: string, e: unknown): void } }).__tandemMock;
      mock.failNext("evaluation_latest", { kind: "storage", message: "permission denied reading eval/latest.svg" });
    });
    const dialog = await openSettings(page);
    const toast = dialog.locator(".toast-error");
    await toast.waitFor();
    expect(await toast.locator(".toast-kind").textContent()).toBe("storage");
    expect(await toast.textContent()).toContain("router evaluation: permission denied reading eval/latest.svg");
    expect(await dialog.locator("#evaluation").textContent()).toBe("");
    expect(await dialog.locator("#router-kind").inputValue()).toBe("blend");
    await page.context().close();
  });

  it("Escape closes the dialog", async () => {
    const { page } = await openApp(browser);
    const dialog = await openSettings(page);
    await page.keyboard.press("Escape");
    await dialog.waitFor({ state: "hidden" });
    await page.context().close();
  });
});
