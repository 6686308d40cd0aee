/** Model output is data, never code: a reply spelling out XSS payloads runs none of them. */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Browser } from "playwright-core";
import { cspViolations, launch, openApp, send, waitForReply } from "./helpers";

let browser: Browser;
beforeAll(async () => {
  browser = await launch();
});
afterAll(async () => {
  await browser?.close();
});

describe("hostile model output", () => {
  it("shows the payloads as text and runs none of them, even when the link is clicked", async () => {
    const { page, problems } = await openApp(browser);
    const xss = () => page.evaluate(() => (window as unknown as { __xss?: number }).__xss);
    await send(page, "show me xss");
    const reply = await waitForReply(page);
    const body = reply.locator(".reply-body");
    expect(await body.textContent()).toContain(`<img src=x onerror="window.__xss=1">`);
    expect(await body.textContent()).toContain("<script>window.__xss=2</script>");
    expect(await body.locator("img, script, iframe, svg").count()).toBe(0);
    expect(await xss()).toBeUndefined();

    const link = body.locator("a", { hasText: "link" });
    expect(await link.count()).toBe(1);
    expect((await link.getAttribute("href")) ?? "").not.toMatch(/javascript/i);
    const before = page.url();
    await link.click();
    await page.waitForTimeout(200);
    expect(await xss()).toBeUndefined();
    expect(page.url()).toBe(before);
    expect(await cspViolations(page)).toEqual([]);
    expect(problems).toEqual([]);
    await page.context().close();
  });

  it("lists exactly what each cloud request sent, shows the failed one's notice, and prices each cloud token", async () => {
    const { page } = await openApp(browser);
    await send(page, "xss again");
    const reply = await waitForReply(page);
    const privacy = reply.locator(".privacy");
    expect(await privacy.locator("summary").textContent()).toBe("Sent to cloud (12 requests)");
    await privacy.locator("summary").click();
    const sent = await privacy.locator(".request-sent").allTextContents();
    expect(sent).toHaveLength(12);
    expect(sent[0]).toContain("<|im_start|>user\nShow me XSS<|im_end|>");
    expect(await privacy.locator(".request-meta").first().textContent()).toContain("ok");
    expect(await privacy.locator(".request.failed").count()).toBe(1);
    expect(await privacy.locator(".request.failed .request-meta").textContent()).toContain("failed · 3000 ms");
    const notice = reply.locator(".notice-cloud_error");
    expect(await notice.textContent()).toBe("cloud_error the cloud did not answer within 3000 ms; used the local token instead");
    expect(await reply.locator(".reply-footer").textContent()).toContain("$0.0002");

    await reply.locator(".cloud-token").first().hover();
    const tip = await page.locator("#token-tip").textContent();
    expect(tip).toContain("cost<$0.0001"); // $0.00002 for one token
    await page.context().close();
  });
});
