/** The sidebar, compare and export. */
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

describe("sidebar", () => {
  it("searches, renames and deletes (with a second click) chats", async () => {
    const { page } = await openApp(browser);
    const items = page.locator(".chat-item");
    await expect.poll(() => items.count()).toBe(1);

    await page.locator(".search").fill("nothing like this");
    await expect.poll(() => page.locator(".chat-list-empty").count()).toBe(1);
    expect((await callsOf(page, "conversations_list")).at(-1)!.args).toEqual({ query: "nothing like this" });
    await page.locator(".search").fill("");
    await expect.poll(() => items.count()).toBe(1);

    await items.first().locator("button[title=Rename]").click();
    const input = page.locator("input.rename");
    await input.fill("Strings, reversed");
    await input.press("Enter");
    await expect.poll(() => items.first().locator(".chat-name").textContent()).toBe("Strings, reversed");
    expect((await callsOf(page, "conversation_rename"))[0]!.args).toEqual({ id: "c-seeded", title: "Strings, reversed" });

    const remove = items.first().locator("button[title=Delete]");
    await remove.click();
    expect(await callsOf(page, "conversation_delete")).toHaveLength(0);
    expect(await remove.textContent()).toBe("Delete?");
    await remove.click();
    await expect.poll(() => page.locator(".chat-list-empty").count()).toBe(1);
    expect((await callsOf(page, "conversation_delete"))[0]!.args).toEqual({ id: "c-seeded" });
    await page.context().close();
  });
});

describe("compare", () => {
  it("answers one prompt edge-only, routed and cloud-only, one after another", async () => {
    const { page } = await openApp(browser);
    await page.locator("#open-compare").click();
    const dialog = page.locator("dialog#compare");
    await dialog.locator("#compare-prompt").fill("Reverse a string in Python");
    await dialog.locator("#compare-run").click();
    for (const mode of ["edge", "routed", "cloud"]) {
      await dialog.locator(`.compare-col[data-mode=${mode}] .reply-footer`).waitFor({ timeout: 15_000 });
    }
    const runs = await callsOf(page, "compare_run");
    expect(runs.map((r) => r.args.mode)).toEqual(["edge", "routed", "cloud"]);
    expect(runs.every((r) => r.args.text === "Reverse a string in Python")).toBe(true);
    const col = (mode: string) => dialog.locator(`.compare-col[data-mode=${mode}]`);
    expect(await col("edge").locator(".cloud-token").count()).toBe(0);
    expect(await col("routed").locator(".cloud-token").count()).toBeGreaterThan(0);
    expect(await col("cloud").locator(".edge-token").count()).toBe(0);
    expect(await col("edge").locator(".reply-footer").textContent()).toContain("0 cloud");
    expect(await dialog.locator("#compare-run").textContent()).toBe("Compare");
    await page.screenshot({ path: "/tmp/tandem-e2e-compare.png" });
    await page.context().close();
  });
});

describe("export", () => {
  it("saves the chat as Markdown and as JSON where the user says, and tells where", async () => {
    const { page } = await openApp(browser);
    await send(page, "reverse a string");
    await waitForReply(page);
    await page.locator("button", { hasText: "Export .md" }).click();
    await page.locator(".toast", { hasText: "Saved to /home/you/Documents/chat.md" }).waitFor();
    await page.locator("button", { hasText: "Export .json" }).click();
    await page.locator(".toast", { hasText: "Saved to /home/you/Documents/chat.json" }).waitFor();
    const asked = (await callsOf(page, "conversation_export_save")).map((c) => c.args);
    expect(asked).toEqual([
      { id: "c-1", format: "markdown" },
      { id: "c-1", format: "json" },
    ]);
    await page.context().close();
  });
});
