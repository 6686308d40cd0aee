/** The cloud budget, the local-only lock, engine state and error reporting, as a user meets them. */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Browser, Page } from "playwright-core";
import { calls, callsOf, launch, openApp, send, waitForReply } from "./helpers";

let browser: Browser;
beforeAll(async () => {
  browser = await launch();
});
afterAll(async () => {
  await browser?.close();
});

const budgetArgs = async (page: Page) =>
  (await callsOf(page, "budget_set")).map((c) => c.args.budget as { enabled: boolean; max_share: number });

describe("cloud budget", () => {
  it("turning the cloud off sends budget_set enabled:false, and the next reply is fully local", async () => {
    const { page } = await openApp(browser);
    await page.locator(".switch-label").click();
    await expect.poll(async () => (await budgetArgs(page)).at(-1)?.enabled).toBe(false);
    expect(await page.locator(".switch-text").textContent()).toContain("Cloud off");
    expect(await page.locator("#cloud-switch").isChecked()).toBe(false);
    expect(await page.locator("#cloud-share").isDisabled()).toBe(true);

    await send(page, "reverse a string");
    const reply = await waitForReply(page);
    const order = (await calls(page)).map((c) => c.cmd);
    expect(order.lastIndexOf("reply_send")).toBeGreaterThan(order.lastIndexOf("budget_set"));
    expect(await reply.locator(".cloud-token").count()).toBe(0);
    expect(await reply.locator(".privacy").textContent()).toBe("Nothing left this machine");
    expect(await reply.locator(".reply-footer .stat-share").textContent()).toBe("0 % cloud share (target cloud off)");
    await page.context().close();
  });

  it("the share slider shows its value and sends max_share, also while a reply streams", async () => {
    const { page } = await openApp(browser, { query: "delay=40" });
    expect(await page.locator(".share-value").textContent()).toBe("15 %");
    await send(page, "reverse a string");
    await expect.poll(() => page.locator(".reply .tok").count()).toBeGreaterThan(0);
    await page.locator("#cloud-share").fill("40");
    expect(await page.locator(".share-value").textContent()).toBe("40 %");
    await expect.poll(async () => (await budgetArgs(page)).at(-1)?.max_share).toBe(0.4);
    // The change went out before the reply finished.
    expect(await page.locator(".reply .reply-footer").count()).toBe(0);
    await page.locator(".switch-label").click();
    await expect.poll(async () => (await budgetArgs(page)).at(-1)?.enabled).toBe(false);
    expect(await page.locator(".reply .reply-footer").count()).toBe(0);
    await waitForReply(page);
    await page.context().close();
  });

  it("refreshes the header meter after each reply", async () => {
    const { page } = await openApp(browser);
    expect(await page.locator(".meter-share").textContent()).toContain("13 %"); // 120 / 950
    await send(page, "reverse a string");
    await waitForReply(page);
    await expect.poll(() => page.locator(".meter-share").textContent()).toContain("15 %"); // 157 / 1070
    expect(await callsOf(page, "meter")).toHaveLength(1);
    await page.context().close();
  });
});

describe("local-only chats", () => {
  it("locks the cloud off for the chat and says nothing left the machine", async () => {
    const { page } = await openApp(browser);
    const lock = page.locator("#local-only");
    expect(await lock.isDisabled()).toBe(true); // no chat yet
    await send(page, "reverse a string");
    await waitForReply(page);

    await lock.click();
    await expect.poll(() => lock.getAttribute("aria-pressed")).toBe("true");
    const set = await callsOf(page, "conversation_set_local_only");
    expect(set.at(-1)!.args).toEqual({ id: expect.any(String), localOnly: true });
    expect(await lock.textContent()).toContain("Local only");
    expect(await page.locator(".switch-text").textContent()).toContain("Cloud locked off");
    expect(await page.locator("#cloud-switch").isDisabled()).toBe(true);
    expect(await page.locator("#cloud-switch").isChecked()).toBe(false);

    await send(page, "and again");
    const reply = await waitForReply(page);
    expect(await reply.locator(".cloud-token").count()).toBe(0);
    expect(await reply.locator(".privacy").textContent()).toBe("Nothing left this machine");
    await page.context().close();
  });
});

describe("engine state", () => {
  it("disables the composer while the edge model loads, then enables it", async () => {
    const { page } = await openApp(browser, { query: "engine=loading" });
    expect(await page.locator("#engine-banner").textContent()).toContain("Loading the edge model");
    expect(await page.locator(".composer-input").isDisabled()).toBe(true);
    await expect.poll(() => page.locator(".composer-input").isDisabled(), { timeout: 6000 }).toBe(false);
    expect(await page.locator("#engine-banner").isHidden()).toBe(true);
    await page.context().close();
  });

  it("keeps asking while the edge model loads when one status call fails, then enables the composer", async () => {
    const { page } = await openApp(browser, { query: "engine=loading" });
    expect(await page.locator(".composer-input").isDisabled()).toBe(true);
    await page.evaluate(() =>
      (window as unknown as { __tandemMock: { failNext(c: string, e: unknown): void } }).__tandemMock.failNext("app_status", {
        kind: "storage",
        message: "the status could not be read",
      }),
    );
    await page.locator(".toast-error", { hasText: "the status could not be read" }).waitFor();
    await expect.poll(() => page.locator(".composer-input").isDisabled(), { timeout: 10_000 }).toBe(false);
    expect(await page.locator("#engine-banner").isHidden()).toBe(true);
    await page.context().close();
  });

  it("shows why the engine failed, coded, and keeps the composer disabled", async () => {
    const { page } = await openApp(browser, { query: "engine=failed" });
    const banner = page.locator("#engine-banner");
    expect(await banner.textContent()).toContain("model_corrupt");
    expect(await banner.textContent()).toContain("sha256 mismatch");
    expect(await page.locator(".composer-input").isDisabled()).toBe(true);
    await page.context().close();
  });

  it("on a first start without models offers their download, then starts", async () => {
    const { page, problems } = await openApp(browser, { query: "engine=missing" });
    const banner = page.locator("#engine-banner");
    await banner.locator("#download-models").waitFor();
    expect(await banner.textContent()).toContain("qwen2.5-coder-1.5b (cloud stand-in, 1.1 GB) and qwen2.5-coder-0.5b (edge, 491 MB)");
    expect(await banner.locator("#download-models").textContent()).toBe("Download both (1.6 GB)");
    expect(await page.locator(".composer-input").isDisabled()).toBe(true);
    await banner.locator("#download-models").click();
    await expect.poll(() => page.locator(".composer-input").isDisabled(), { timeout: 10_000 }).toBe(false);
    expect(await banner.isHidden()).toBe(true);
    // The stand-in first: the edge model's arrival is what restarts the engine.
    expect((await callsOf(page, "model_pull")).map((c) => c.args.name)).toEqual(["qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b"]);
    expect(problems).toEqual([]);
    await page.context().close();
  });

  it("a settings file that could not be used stays on screen as a banner naming it", async () => {
    const { page } = await openApp(browser, { query: "bad-settings=1" });
    const banner = page.locator(".toast-error", { hasText: "max_shares" });
    await banner.waitFor();
    expect(await banner.textContent()).toContain("config.toml.bad-");
    expect(await banner.getAttribute("role")).toBe("alert");
    expect(await page.locator(".toast-error", { hasText: "max_shares" }).count()).toBe(1);
    await page.context().close();
  });

  it("shows the backend's startup notices once", async () => {
    const { page } = await openApp(browser, { query: "engine=loading&notice=1" });
    await expect.poll(() => page.locator(".composer-input").isDisabled(), { timeout: 6000 }).toBe(false);
    expect(await page.locator(".toast", { hasText: "spend file was unreadable" }).count()).toBe(1);
    await page.context().close();
  });
});

describe("errors", () => {
  it("a rejected reply shows its code and message, can be dismissed, and the composer recovers", async () => {
    const { page } = await openApp(browser);
    await page.evaluate(() =>
      (window as unknown as { __tandemMock: { failNext(c: string, e: unknown): void } }).__tandemMock.failNext("reply_send", {
        kind: "engine_unavailable",
        message: "the engine is still loading",
      }),
    );
    await send(page, "hello");
    const toast = page.locator(".toast-error");
    await toast.waitFor();
    expect(await toast.locator(".toast-kind").textContent()).toBe("engine_unavailable");
    expect(await toast.textContent()).toContain("the engine is still loading");
    expect(await page.locator(".reply .notice-error").textContent()).toContain("engine_unavailable");
    expect(await page.locator("button.send").textContent()).toBe("Send");
    await toast.locator(".toast-close").click();
    expect(await page.locator(".toast-error").count()).toBe(0);
    await page.context().close();
  });

  it("an uncoded rejection is still shown in words, never [object Object]", async () => {
    const { page } = await openApp(browser);
    await page.evaluate(() => {
      const mock = (window as unknown as { __tandemMock: { failNext(c: string, e: unknown): void } }).__tandemMock;
      mock.failNext("conversations_list", "command conversations_list not allowed");
    });
    await page.locator(".search").fill("x");
    const toast = page.locator(".toast-error");
    await toast.waitFor();
    expect(await toast.textContent()).toContain("unexpected");
    expect(await toast.textContent()).toContain("command conversations_list not allowed");
    expect(await page.locator("body").textContent()).not.toContain("[object Object]");
    await page.context().close();
  });
});
