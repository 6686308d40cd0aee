// The real app in a real window: the built tandem-app under Xvfb, driven through
// tauri-driver and WebKitWebDriver, with SmolLM2 as the edge model and the project's fake
// cloud on 127.0.0.1. A prompt is sent, the streamed reply must hold a highlighted cloud
// token, a screenshot of the screen is taken and checked (not blank; the cloud token's pixels
// carry the highlight), the chat is exported through the native save dialog to a path typed
// into it (xdotool), a saved conversation twice the context window goes on with a marker of
// what the model no longer sees (screenshots beside the first: -long, -settings), the
// conversations must be on disk, and the app must exit cleanly.
//
// Run by scripts/test.sh inside xvfb-run; needs TANDEM_APP, TANDEM_FAKE_CLOUD,
// TANDEM_TEST_MODELS and TANDEM_SCREENSHOT (where the PNG goes).

import { Builder, By, Key, until } from "selenium-webdriver";
import { spawn, execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, mkdirSync, writeFileSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { gunzipSync } from "node:zlib";

const need = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set (scripts/test.sh sets it)`);
  return value;
};
const app = need("TANDEM_APP");
const fakeCloudBin = need("TANDEM_FAKE_CLOUD");
const models = need("TANDEM_TEST_MODELS");
const screenshot = need("TANDEM_SCREENSHOT");

const children = [];
function start(command, args, env = {}) {
  const child = spawn(command, args, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "inherit"] });
  children.push(child);
  return child;
}
function firstLine(child) {
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stdout });
    lines.once("line", resolve);
    child.once("exit", (code) => reject(new Error(`exited with ${code} before printing`)));
  });
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
let failures = 0;
let passes = 0;
function check(ok, what) {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}`);
  if (ok) passes += 1;
  else failures += 1;
}

// A fake cloud whose tokens are easy to spot, and a home with settings pointing at it.
const fake = start(fakeCloudBin, ["--token", " ocean", "--token", " waves"]);
const cloudUrl = (await firstLine(fake)).replace("listening on ", "").trim();
const home = mkdtempSync(join(tmpdir(), "tandem-window-"));
mkdirSync(join(home, "config"), { recursive: true });
writeFileSync(
  join(home, "config", "config.toml"),
  [
    `edge = ${JSON.stringify(join(models, "SmolLM2-135M-Instruct.Q4_1.gguf"))}`,
    "threads = 1",
    "context = 1024",
    "max_tokens = 48",
    "[cloud]",
    `url = ${JSON.stringify(cloudUrl)}`,
    "[budget]",
    "max_share = 0.3",
    "[router]",
    'kind = "entropy"',
  ].join("\n") + "\n",
);

// A conversation about twice the 1024-token window, saved before the app starts: answering
// it, the engine must leave its oldest turns out of view and the window must say so.
const longChat = "19a0000000-1-0";
mkdirSync(join(home, "data", "conversations"), { recursive: true });
writeFileSync(
  join(home, "data", "conversations", `${longChat}.json`),
  JSON.stringify({
    id: longChat,
    title: "A long conversation",
    created_ms: 1_764_000_000_000,
    updated_ms: 1_764_000_000_000,
    messages: Array.from({ length: 24 }, (_, i) => ({
      role: i % 2 ? "assistant" : "user",
      content:
        i % 2
          ? `Answer ${(i + 1) / 2}: waves are wind energy moving through water; the water itself mostly goes round in circles as each wave passes, and a swell raised by a storm can cross a whole ocean before it breaks on a far shore.`
          : `Question ${i / 2 + 1}: what makes the waves of the sea, how far can a single wave travel across an ocean, and why do some days bring long slow swells while others bring short choppy ones?`,
    })),
  }),
);

const port = 4444 + Math.floor(Math.random() * 1000);
const driverProcess = start("tauri-driver", ["--port", String(port), "--native-driver", "/usr/bin/WebKitWebDriver"], {
  TANDEM_HOME: home,
  // GTK's file chooser keeps its settings in dconf, which needs a session bus; in memory here.
  GSETTINGS_BACKEND: "memory",
});
await sleep(1500);

let driver;
try {
  driver = await new Builder()
    .usingServer(`http://127.0.0.1:${port}/`)
    .withCapabilities({ browserName: "wry", "tauri:options": { application: app } })
    .build();

  const input = await driver.wait(until.elementLocated(By.css('textarea[aria-label="Message"]')), 60_000);
  await driver.wait(until.elementIsEnabled(input), 120_000).catch(async (e) => {
    // What the window said (a banner, a notice, the header's engine state) is the diagnosis.
    const shown = await driver.executeScript("return document.body.innerText").catch((why) => `(unreadable: ${why})`);
    throw new Error(`the engine never became ready (${e.message}); the window showed:\n${String(shown).slice(0, 2000)}`);
  });
  await input.sendKeys("Tell me about the sea.", Key.ENTER);
  await driver.wait(until.elementLocated(By.css(".reply-footer")), 120_000, "the reply never finished");
  const reply = await driver.findElement(By.css(".message.assistant .reply-body")).getText();
  check(reply.includes("ocean") || reply.includes("waves"), `the reply shows the cloud's words: ${JSON.stringify(reply.slice(0, 120))}`);
  const cloudTokens = await driver.findElements(By.css(".cloud-token"));
  check(cloudTokens.length > 0, `${cloudTokens.length} cloud tokens are highlighted`);

  // The screen as the user sees it. The DOM holds the reply before WebKit has painted it: on
  // a busy machine (both cores loaded) the window was still its bare
  // background 300 ms later, so the screen is read again until the paint lands (up to 20 s).
  const screenColours = () => {
    execFileSync("import", ["-window", "root", screenshot]);
    return Number(execFileSync("identify", ["-format", "%k", screenshot]).toString());
  };
  // A painted window has text, a highlight and anti-aliasing; a bare one has a colour or two.
  const paintedColours = 50;
  let colours = screenColours();
  for (const since = Date.now(); colours <= paintedColours && Date.now() - since < 20_000; colours = screenColours()) {
    await sleep(500);
  }
  const stddev = Number(execFileSync("convert", [screenshot, "-colorspace", "gray", "-format", "%[fx:standard_deviation]", "info:"]).toString());
  check(stddev > 0.05, `the screenshot is not blank (grey standard deviation ${stddev.toFixed(3)})`);
  check(colours > paintedColours, `the screenshot has ${colours} colours`);

  // The highlight is visible: the cloud token's pixels differ from the reply's background.
  const token = cloudTokens[0];
  await driver.executeScript("arguments[0].scrollIntoView({block: 'center'})", token);
  await sleep(200);
  const view = join(home, "view.png");
  writeFileSync(view, Buffer.from(await driver.takeScreenshot(), "base64"));
  // WebKitWebDriver refuses getRect on inline elements; the page knows their boxes.
  const rectOf = (element) =>
    driver.executeScript("const r = arguments[0].getBoundingClientRect(); return {x: r.x, y: r.y, width: r.width, height: r.height};", element);
  const rect = await rectOf(token);
  const scale = Number(await driver.executeScript("return window.devicePixelRatio")) || 1;
  const box = (r) => `${Math.max(1, Math.round(r.width * scale))}x${Math.max(1, Math.round(r.height * scale))}+${Math.round(r.x * scale)}+${Math.round(r.y * scale)}`;
  const mean = (geometry) =>
    execFileSync("convert", [view, "-crop", geometry, "+repage", "-format", "%[fx:mean.r] %[fx:mean.g] %[fx:mean.b]", "info:"])
      .toString()
      .trim()
      .split(" ")
      .map(Number);
  const body = await rectOf(await driver.findElement(By.css(".message.assistant .reply-body")));
  const inToken = mean(box(rect));
  const beside = mean(box({ x: body.x + body.width - 12, y: body.y + 2, width: 8, height: 8 }));
  const distance = Math.hypot(...inToken.map((c, i) => c - beside[i]));
  check(distance > 0.03, `the cloud token's pixels stand out from the reply background (distance ${distance.toFixed(3)})`);

  // Export through the native save dialog (GTK's, opened by the backend): the user types
  // where the file goes, and it lands there holding the conversation.
  const exported = join(home, "exports", "the sea.md");
  mkdirSync(dirname(exported), { recursive: true });
  await driver.findElement(By.xpath("//button[normalize-space()='Export .md']")).click();
  // Only a mapped window can take the focus: a search that also matches the dialog before it
  // is shown hands windowfocus a window X refuses (BadMatch), as one warm run did.
  const dialogWindow = execFileSync("xdotool", ["search", "--sync", "--onlyvisible", "--name", "Export the conversation"], { timeout: 30_000 })
    .toString()
    .trim()
    .split("\n")[0];
  execFileSync("xdotool", ["windowfocus", "--sync", dialogWindow]);
  await sleep(500);
  execFileSync("xdotool", ["key", "--clearmodifiers", "ctrl+a"]);
  execFileSync("xdotool", ["type", "--delay", "15", exported]);
  execFileSync("xdotool", ["key", "Return"]);
  const toast = await driver.wait(until.elementLocated(By.xpath("//*[contains(@class, 'toast') and contains(., 'Saved to')]")), 30_000);
  check((await toast.getText()).includes(exported), `the window says where the export went: ${JSON.stringify(await toast.getText())}`);
  const markdown = existsSync(exported) ? readFileSync(exported, "utf8") : "";
  check(
    markdown.includes("## You\n\nTell me about the sea.") && /ocean|waves/.test(markdown),
    `the exported file holds the conversation (${markdown.length} bytes)`,
  );

  // The long conversation goes on: the real engine leaves its oldest turns out of view, and
  // the window marks where the model's view begins.
  await driver.findElement(By.xpath("//li[contains(@class, 'chat-item')]//*[normalize-space()='A long conversation']")).click();
  const longInput = await driver.findElement(By.css('textarea[aria-label="Message"]'));
  await longInput.sendKeys("And how tall can the biggest waves get?", Key.ENTER);
  const marker = await driver.wait(until.elementLocated(By.css(".left-out-marker")), 120_000, "no marker of what the model no longer sees");
  await driver.wait(until.elementLocated(By.css(".message.assistant:last-child .reply-footer")), 120_000, "the long chat's reply never finished");
  const said = await marker.getText();
  check(/^\d+ earlier messages are out of the model's view$/.test(said), `the window marks where the model's view begins: ${JSON.stringify(said)}`);
  await driver.executeScript("arguments[0].scrollIntoView({block: 'center'})", marker);
  await sleep(300);
  execFileSync("import", ["-window", "root", screenshot.replace(/\.png$/, "-long.png")]);

  // The chat's own settings, as the dialog shows them.
  await driver.findElement(By.id("chat-settings-open")).click();
  await driver.wait(until.elementLocated(By.css("dialog#chat-settings[open]")), 10_000);
  const policy = await driver.findElement(By.css("dialog#chat-settings [name=context_policy]")).getAttribute("value");
  check(policy === "rolling", `the chat settings show the chat's policy (${policy})`);
  await sleep(300);
  execFileSync("import", ["-window", "root", screenshot.replace(/\.png$/, "-settings.png")]);
} catch (e) {
  check(false, `the window test ran to its end: ${e.name} ${e.message}`);
} finally {
  if (driver) await driver.quit().catch(() => {});
}

// The app is gone and nothing of it lingers; the conversation is on disk with provenance.
await sleep(2000);
let lingering = "";
try {
  lingering = execFileSync("pgrep", ["-f", app]).toString().trim();
} catch {
  lingering = "";
}
check(lingering === "", `the app exited (${lingering || "no process left"})`);
let events = [];
try {
  const folder = join(home, "data", "conversations");
  // A conversation file as the app writes it: gzipped JSON (crates/tandem-core/src/history/
  // stored.rs), beside the sidebar's `.index.json`.
  const read = (file) => {
    const bytes = readFileSync(join(folder, file));
    return JSON.parse((bytes[0] === 0x1f && bytes[1] === 0x8b ? gunzipSync(bytes) : bytes).toString("utf8"));
  };
  const saved = readdirSync(folder)
    .filter((f) => f.endsWith(".json") && !f.startsWith("."))
    .map(read);
  const sea = saved.find((c) => c.messages[0]?.content === "Tell me about the sea.");
  events = sea?.messages[1]?.events ?? [];
  const long = saved.find((c) => c.id === longChat);
  check(
    long?.messages.length === 26 && long.messages[25].events.some((e) => e.type === "left_out"),
    "the long chat's reply is saved with what it left out",
  );
} catch (e) {
  console.log(`no saved conversation: ${e.message}`);
}
// Tokens are saved as columns: a `tokens` record's `source` has a letter per token (c: cloud).
const fromCloud = (e) => (e.type === "token" && e.source === "cloud") || (e.type === "tokens" && e.source.includes("c"));
check(events.some(fromCloud), "the saved conversation keeps its cloud tokens");

driverProcess.kill("SIGTERM");
fake.kill("SIGTERM");
await sleep(500);
for (const child of children) if (child.exitCode === null) child.kill("SIGKILL");
console.log(`suite-result: ${passes} passed, ${failures} failed, 0 skipped (real window)`);
process.exit(failures === 0 ? 0 : 1);
