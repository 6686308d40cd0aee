/** The chat as a user meets it: send, watch the routed reply stream in, inspect its cloud tokens. */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Browser } from "playwright-core";
import { callsOf, cspViolations, launch, openApp, send, waitForReply } from "./helpers";
import { titleAfter } from "../../ui/src/ipc/mock/transcript";

let browser: Browser;
beforeAll(async () => {
  browser = await launch();
});
afterAll(async () => {
  await browser?.close();
});

describe("chat", () => {
  it("streams a routed reply with highlighted cloud tokens and a footer", async () => {
    const { page, problems } = await openApp(browser);
    await send(page, "Write a Python function that reverses a string.");

    // The reply streams: text shows up before the footer does.
    const reply = page.locator(".reply").last();
    await expect.poll(() => reply.locator(".reply-body").textContent(), { timeout: 5000 }).toContain("Python");
    expect(await reply.locator(".reply-footer").count()).toBe(0);
    await expect.poll(() => page.locator("button.send").textContent()).toBe("Stop");

    await waitForReply(page);
    const body = reply.locator(".reply-body");
    expect(await body.textContent()).toContain("def reverse_string");
    expect(await body.locator("pre code").count()).toBe(2); // the recording stops inside a second block
    expect(await body.locator("pre code .hljs-keyword").count()).toBeGreaterThan(0);
    // Cloud tokens are marked, also inside the code block.
    expect(await body.locator(".cloud-token").count()).toBeGreaterThan(10);
    expect(await body.locator("pre .cloud-token").count()).toBeGreaterThan(0);
    expect(await page.locator("button.send").textContent()).toBe("Send");

    const footer = await reply.locator(".reply-footer").textContent();
    expect(footer).toContain("83 edge");
    expect(footer).toContain("37 cloud");
    expect(footer).toContain("31 % cloud share");
    expect(footer).toContain("10 requests");
    expect(footer).toContain("$0.0000");
    expect(footer).toContain("22.6 tok/s");
    expect(footer).toContain("stopped at the length limit");
    // The recording predates request events: say so rather than claim nothing left.
    expect(await reply.locator(".privacy").textContent()).toContain("10 cloud requests made");

    // The chat got its title from the first message and shows up in the sidebar.
    await expect.poll(() => page.locator(".chat-item.active .chat-name").textContent()).toContain("Write a Python function");
    expect(await cspViolations(page)).toEqual([]);
    expect(problems).toEqual([]);
    await page.context().close();
  });

  it("names a chat after its first message as soon as the backend has saved it", async () => {
    const { page } = await openApp(browser, { query: "delay=40" });
    const message = "Write a Python function that reverses a string, then explain how it works.";
    // What the real backend called this chat when it was recorded (cut, with an ellipsis).
    const title = titleAfter("New chat", message);
    expect(title.length).toBeLessThan(message.length);
    await send(page, message);
    // The reply is still streaming: the title came with the answer to reply_send.
    await expect.poll(() => page.locator(".chat-title").textContent()).toBe(title);
    expect(await page.locator(".reply .reply-footer").count()).toBe(0);
    await waitForReply(page);
    await expect.poll(() => page.locator(".chat-item.active .chat-name").textContent()).toBe(title);
    expect(await callsOf(page, "conversation_get")).toHaveLength(0);
    await page.context().close();
  });

  it("shows score and replaced edge token when hovering or focusing a cloud token", async () => {
    const { page } = await openApp(browser);
    await send(page, "reverse a string");
    const reply = await waitForReply(page);
    // The first token "Here" came from the cloud (score 0.812, edge candidate "Here").
    const first = reply.locator(".cloud-token").first();
    expect(await first.textContent()).toBe("Here");
    await first.hover();
    const tip = page.locator("#token-tip");
    await tip.waitFor({ state: "visible" });
    expect(await tip.textContent()).toContain("Cloud token");
    expect(await tip.textContent()).toContain("score0.812");
    expect(await tip.textContent()).toContain("replacedHere");
    expect(await tip.textContent()).toContain("latency373 ms");
    expect(await tip.textContent()).toContain("cost—");

    // " return" replaced the edge model's " #": whitespace is made visible.
    const ret = reply.locator("pre .cloud-token", { hasText: "return" });
    await ret.focus();
    expect(await tip.textContent()).toContain("replaced·#");

    // Edge tokens show their score too.
    await reply.locator(".edge-token", { hasText: "Python" }).first().hover();
    expect(await tip.textContent()).toContain("Edge token");
    expect(await tip.textContent()).toContain("score0.282");
    await page.context().close();
  });

  it("hides and restores the highlighting, and remembers the choice", async () => {
    const { page } = await openApp(browser);
    await send(page, "reverse a string");
    const reply = await waitForReply(page);
    const token = reply.locator(".cloud-token").first();
    const background = () => token.evaluate((el) => getComputedStyle(el).backgroundColor);
    expect(await background()).not.toBe("rgba(0, 0, 0, 0)");

    // Its cloud is drawn, not a font glyph (Debian's default fonts lack "☁").
    const toggle = page.locator("#highlight-toggle");
    expect(await toggle.locator("svg.icon-cloud").count()).toBe(1);
    expect((await toggle.textContent())?.trim()).toBe("Highlight");

    await page.locator("#highlight-toggle").click();
    expect(await background()).toBe("rgba(0, 0, 0, 0)");
    expect(await page.locator("#highlight-toggle").getAttribute("aria-pressed")).toBe("false");
    expect((await toggle.textContent())?.trim()).toBe("No highlight");

    await page.reload();
    await page.waitForSelector(".chip-edge");
    expect(await page.locator("#highlight-toggle").getAttribute("aria-pressed")).toBe("false");
    await page.locator("#highlight-toggle").click();
    expect(await page.locator("#highlight-toggle").getAttribute("aria-pressed")).toBe("true");
    await page.context().close();
  });

  it("re-renders a saved reply from its events exactly as it streamed", async () => {
    const { page } = await openApp(browser);
    await send(page, "reverse a string");
    const streamed = await waitForReply(page);
    const live = await streamed.locator(".reply-body").innerHTML();

    await page.locator(".chat-item", { hasText: "Reverse a string in Python" }).locator(".chat-open").click();
    await expect.poll(() => page.locator(".chat-title").textContent()).toBe("Reverse a string in Python");
    const saved = page.locator(".reply").last();
    expect(await saved.locator(".reply-body").innerHTML()).toBe(live);
    expect(await saved.locator(".reply-footer").textContent()).toContain("37 cloud");
    await page.context().close();
  });

  it("Escape while streaming stops the reply", async () => {
    const { page } = await openApp(browser, { query: "delay=60" });
    await send(page, "reverse a string");
    await expect.poll(() => page.locator(".reply .tok").count()).toBeGreaterThan(2);
    await page.keyboard.press("Escape");
    const reply = await waitForReply(page);
    expect(await callsOf(page, "reply_stop")).toHaveLength(1);
    expect(await reply.locator(".reply-footer").textContent()).toContain("stopped by you");
    expect(await page.locator("button.send").textContent()).toBe("Send");
    await page.context().close();
  });

  it("keeps streaming while another chat is open, and shows the live reply on coming back", async () => {
    const { page } = await openApp(browser, { query: "delay=30" });
    await send(page, "reverse a string");
    await expect.poll(() => page.locator(".reply .tok").count()).toBeGreaterThan(2);
    await page.locator(".chat-item", { hasText: "Reverse a string in Python" }).locator(".chat-open").click();
    await expect.poll(() => page.locator(".chat-title").textContent()).toBe("Reverse a string in Python");
    await page.locator(".chat-item", { hasText: "reverse a string" }).first().locator(".chat-open").click();
    await expect.poll(() => page.locator(".chat-title").textContent()).toBe("reverse a string");
    expect(await page.locator(".reply").count()).toBe(1);
    const reply = await waitForReply(page);
    expect(await reply.locator(".reply-body").textContent()).toContain("def reverse_string");
    expect(await page.locator("button.send").textContent()).toBe("Send");
    await page.context().close();
  });

  it("Shift+Enter makes a new line instead of sending", async () => {
    const { page } = await openApp(browser);
    const input = page.locator(".composer-input");
    await input.fill("first line");
    await input.press("Shift+Enter");
    await input.pressSequentially("second line");
    expect(await input.inputValue()).toBe("first line\nsecond line");
    expect(await callsOf(page, "reply_send")).toHaveLength(0);
    await page.context().close();
  });

  it("copies the last reply's markdown to the clipboard", async () => {
    const { page } = await openApp(browser);
    await page.context().grantPermissions(["clipboard-read", "clipboard-write"]);
    await send(page, "reverse a string");
    await waitForReply(page);
    await page.locator(".reply-actions button", { hasText: "Copy" }).click();
    await page.locator(".toast-info", { hasText: "Copied" }).waitFor();
    const copied = await page.evaluate(() => navigator.clipboard.readText());
    expect(copied).toContain("```python\ndef reverse_string(s):");
    await page.context().close();
  });

  it("regenerates the last reply", async () => {
    const { page } = await openApp(browser);
    await send(page, "reverse a string");
    await waitForReply(page);
    await page.locator(".reply-actions button", { hasText: "Regenerate" }).click();
    await expect.poll(async () => (await callsOf(page, "reply_regenerate")).length).toBe(1);
    await waitForReply(page);
    expect(await page.locator(".reply").count()).toBe(1);
    await page.context().close();
  });
});
