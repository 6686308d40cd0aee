/** A chat's own settings, and a conversation longer than the context window. */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Browser } from "playwright-core";
import { callsOf, launch, openApp, send, waitForReply } from "./helpers";

let browser: Browser;
beforeAll(async () => {
  browser = await launch();
});
afterAll(async () => {
  await browser?.close();
});

describe("chat settings", () => {
  it("are saved with the chat they were set for, and refusals are shown in the backend's words", async () => {
    const { page, problems } = await openApp(browser);
    await page.locator(".chat-item").first().click();
    await page.locator("#chat-settings-open").click();
    const dialog = page.locator("dialog#chat-settings");
    await dialog.waitFor();
    // A chat without settings of its own shows the ones Settings give every such chat.
    expect(await dialog.locator("[name=temperature]").inputValue()).toBe("0");
    expect(await dialog.locator("[name=context_policy]").inputValue()).toBe("rolling");
    await dialog.locator("[name=system_prompt]").fill("Answer in one sentence.");
    await dialog.locator("button", { hasText: "Creative" }).click();
    expect(await dialog.locator("[name=temperature]").inputValue()).toBe("0.8");
    await dialog.locator("[name=top_p]").fill("0.9");
    await dialog.locator("[name=max_tokens]").fill("128");
    await dialog.locator("[name=context_policy]").selectOption("drop_middle");
    expect(await dialog.textContent()).toContain("The first question and answer stay in view");
    await dialog.locator("button[type=submit]").click();
    await expect.poll(() => dialog.isVisible()).toBe(false);
    expect((await callsOf(page, "conversation_set_settings"))[0]!.args).toEqual({
      id: "c-seeded",
      settings: { system_prompt: "Answer in one sentence.", temperature: 0.8, top_p: 0.9, max_tokens: 128, context_policy: "drop_middle" },
    });

    // Reopened, the dialog shows what was saved; a temperature of 3 is refused and it stays open.
    await page.locator("#chat-settings-open").click();
    await dialog.waitFor();
    expect(await dialog.locator("[name=system_prompt]").inputValue()).toBe("Answer in one sentence.");
    await dialog.locator("[name=temperature]").fill("3");
    await dialog.locator("button[type=submit]").click();
    await page.locator(".toast").filter({ hasText: "temperature must be between 0 and 2" }).waitFor();
    expect(await dialog.isVisible()).toBe(true);
    await dialog.locator("button", { hasText: "Cancel" }).click();
    expect(problems).toEqual([]);
    await page.context().close();
  });

  it("saved on a new chat before its first message create the chat, and the message goes there", async () => {
    const { page } = await openApp(browser);
    await page.locator("#chat-settings-open").click();
    const dialog = page.locator("dialog#chat-settings");
    await dialog.waitFor();
    await dialog.locator("[name=system_prompt]").fill("You are terse.");
    await dialog.locator("button[type=submit]").click();
    await expect.poll(() => dialog.isVisible()).toBe(false);
    const [set] = await callsOf(page, "conversation_set_settings");
    expect(set!.args).toMatchObject({ id: "c-1", settings: { system_prompt: "You are terse." } });
    await send(page, "hello");
    await waitForReply(page);
    expect((await callsOf(page, "conversation_create")).length).toBe(1);
    expect((await callsOf(page, "reply_send")).map((c) => c.args.id)).toEqual(["c-1"]);
    await page.context().close();
  });
});

describe("a long conversation", () => {
  it("marks where the model's view begins, and moves the mark when a reply says so", async () => {
    const { page } = await openApp(browser, { query: "long" });
    await page.locator(".chat-item", { hasText: "A long conversation" }).click();
    const marker = page.locator(".left-out-marker");
    await expect.poll(() => marker.textContent()).toBe("6 earlier messages are out of the model's view");
    const messages = page.locator(".messages-inner > .message");
    expect(await messages.count()).toBe(12);
    // The marker sits right before the seventh message, and the six above it are greyed.
    expect(await page.locator(".left-out-marker + .message .bubble").textContent()).toContain("Question 4");
    expect(await page.locator(".message.out-of-view").count()).toBe(6);

    await send(page, "And one more question?");
    await waitForReply(page);
    await expect.poll(() => marker.textContent()).toBe("8 earlier messages are out of the model's view");
    expect(await page.locator(".message.out-of-view").count()).toBe(8);
    // Opened again from disk, the saved reply says the same.
    await page.locator(".chat-item", { hasText: "Reverse a string" }).click();
    await page.locator(".chat-item", { hasText: "A long conversation" }).click();
    await expect.poll(() => marker.textContent()).toBe("8 earlier messages are out of the model's view");
    await page.screenshot({ path: "/tmp/tandem-e2e-long.png" });
    await page.context().close();
  });
});
