/**
 * A web page gets nothing from `tandem serve` without its key: a page on another site (the
 * `no-cors` POSTs any page can send, a CORS request, a read) and a DNS-rebinding page (its
 * own name resolving to 127.0.0.1, so the browser calls it same-origin) are refused before the
 * model sees them. The real server, with the test model, in Chromium with its Private Network
 * Access checks off: other browsers have none, so what is tested is the server's own door.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Browser, Page } from "playwright-core";
import { launch } from "./helpers";

const tandem = process.env.TANDEM_BIN;
const models = process.env.TANDEM_TEST_MODELS;
const BODY = JSON.stringify({ prompt: "The sea is", max_tokens: 2 });

let server: ChildProcess | undefined;
let browser: Browser | undefined;
let base = "";

/** Completions the model served so far, read from this machine as a local program would. */
async function served(): Promise<number> {
  const metrics = await (await fetch(base.replace(/\/v1$/, "/metrics"))).text();
  return Number(/^tandem:requests_total (\d+)$/m.exec(metrics)?.[1]);
}

/** A page at `url` whose document the test serves (the network never sees that name). */
async function pageAt(url: string): Promise<Page> {
  const page = await browser!.newPage();
  await page.route(url, (route) => route.fulfill({ contentType: "text/html", body: "<!doctype html><title>a page</title>" }));
  await page.goto(url);
  return page;
}

/** Starts `tandem serve` on the test model, with `key` as its key (none: no key), and returns its base URL. */
async function startServer(key?: string): Promise<{ child: ChildProcess; url: string }> {
  const env: NodeJS.ProcessEnv = { ...process.env, TANDEM_HOME: mkdtempSync(join(tmpdir(), "tandem-serve-origin-")) };
  delete env.TANDEM_SERVE_API_KEY;
  if (key) env.TANDEM_SERVE_API_KEY = key;
  const model = join(models!, "SmolLM2-135M-Instruct.Q4_1.gguf");
  const child = spawn(tandem!, ["serve", "--model", model, "--port", "0", "--threads", "1", "--context", "512"], {
    env,
    stdio: ["ignore", "pipe", "inherit"],
  });
  const url = await new Promise<string>((resolve, reject) => {
    child.on("exit", (code) => reject(new Error(`tandem serve exited (${code})`)));
    createInterface({ input: child.stdout! }).on("line", (line) => {
      const found = /listening on (http:\/\/\S+\/v1)/.exec(line)?.[1];
      if (found) resolve(found);
    });
  });
  return { child, url };
}

beforeAll(async () => {
  if (!tandem || !models) throw new Error("TANDEM_BIN and TANDEM_TEST_MODELS are not set (scripts/test.sh sets them)");
  const started = await startServer();
  server = started.child;
  base = started.url;
  browser = await launch([
    "--host-resolver-rules=MAP rebind.test 127.0.0.1",
    "--disable-features=BlockInsecurePrivateNetworkRequests,PrivateNetworkAccessSendPreflights,PrivateNetworkAccessRespectPreflightResults,LocalNetworkAccessChecks",
  ]);
  // A local program is served: the server works, and the count starts from here.
  const fine = await fetch(`${base}/completions`, { method: "POST", headers: { "Content-Type": "application/json" }, body: BODY });
  expect(fine.status).toBe(200);
  expect(await served()).toBe(1);
});

afterAll(async () => {
  await browser?.close();
  server?.kill();
});

describe("tandem serve with a key (as the app's stand-in always runs), from a web page", () => {
  it("refuses every request of a page on another site and serves none", async () => {
    const keyed = await startServer("sk-this-run-only");
    try {
      const page = await pageAt("http://attacker.test/");
      const answered: number[] = [];
      page.on("response", (r) => {
        if (r.url().startsWith(keyed.url)) answered.push(r.status());
      });
      await page.evaluate(
        async ({ url, body }) => {
          const json = { "Content-Type": "application/json" };
          for (const init of [{ method: "POST", mode: "no-cors", headers: json, body }, { method: "POST", mode: "no-cors", body }] as RequestInit[]) {
            await fetch(`${url}/completions`, init).catch(() => undefined);
          }
        },
        { url: keyed.url, body: BODY },
      );
      expect(answered.length, String(answered)).toBeGreaterThan(0);
      expect(answered.every((status) => status === 401 || status === 403 || status === 415), String(answered)).toBe(true);
      const metrics = await (await fetch(keyed.url.replace(/\/v1$/, "/metrics"), { headers: { Authorization: "Bearer sk-this-run-only" } })).text();
      expect(/^tandem:requests_total (\d+)$/m.exec(metrics)?.[1]).toBe("0");
      await page.close();
    } finally {
      keyed.child.kill();
    }
  });
});

describe("tandem serve without a key, from a web page", () => {
  it("answers a page on another site with nothing it can use, and serves none of its requests", async () => {
    const page = await pageAt("http://attacker.test/");
    const answered: number[] = [];
    page.on("response", (r) => {
      if (r.url().startsWith(base)) answered.push(r.status());
    });
    const outcomes = await page.evaluate(
      async ({ base, body }) => {
        const bytes = new TextEncoder().encode(body);
        const attempts: Array<[string, RequestInit, string]> = [
          // What any page can send without asking: no Content-Type, or text/plain.
          ["no-cors bytes", { method: "POST", mode: "no-cors", body: bytes }, "/completions"],
          ["no-cors text/plain", { method: "POST", mode: "no-cors", headers: { "Content-Type": "text/plain" }, body }, "/completions"],
          ["no-cors chat", { method: "POST", mode: "no-cors", body: bytes }, "/chat/completions"],
          // What needs the server's consent (a preflight), and a plain read.
          ["cors json", { method: "POST", headers: { "Content-Type": "application/json" }, body }, "/completions"],
          ["cors read", { method: "GET" }, "/models"],
        ];
        const seen: Record<string, string> = {};
        for (const [name, init, path] of attempts) {
          try {
            const response = await fetch(base + path, init);
            seen[name] = response.type === "opaque" ? "opaque" : `${response.status} ${await response.text()}`;
          } catch {
            seen[name] = "blocked";
          }
        }
        return seen;
      },
      { base, body: BODY },
    );
    for (const [name, outcome] of Object.entries(outcomes)) {
      expect(["opaque", "blocked"], `${name}: ${outcome}`).toContain(outcome);
    }
    // The server was reached, and said no: 415 for what was not JSON, 403 for another site.
    expect(answered.length, String(answered)).toBeGreaterThan(0);
    expect(answered.every((status) => status === 403 || status === 415), String(answered)).toBe(true);
    expect(await served()).toBe(1);
    await page.close();
  });

  it("refuses a DNS-rebinding page (same-origin to the browser) with 421 and serves none of its requests", async () => {
    const port = new URL(base).port;
    // After the rebinding, the page's own name leads to this machine: its document and its
    // requests come from and go to the server, same-origin.
    const page = await browser!.newPage();
    await page.goto(`http://rebind.test:${port}/health`);
    const outcomes = await page.evaluate(async (body) => {
      const json = { "Content-Type": "application/json" };
      const completion = await fetch("/v1/completions", { method: "POST", headers: json, body });
      const models = await fetch("/v1/models");
      return [completion.status, models.status, await completion.text()];
    }, BODY);
    expect(outcomes[0], String(outcomes[2])).toBe(421);
    expect(outcomes[1]).toBe(421);
    expect(await served()).toBe(1);
    await page.close();
  });
});
