/**
 * Cloud tokens are found again inside the rendered markdown. Each case renders real marked
 * output and checks which characters end up in which token's spans.
 */
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";
import type { TokenEvent } from "../ipc/types";
import { parseEventLines } from "../ipc/events";
import { alignSegments } from "./align";
import { renderMarkdown } from "./markdown";
import { overlayTokens } from "./provenance";

/** Tokens as [text, source]; "c" marks cloud tokens. */
function tokens(...parts: [string, "e" | "c"][] | string[]): TokenEvent[] {
  return parts.map((p, i) => {
    const [text, src] = typeof p === "string" ? [p, "e" as const] : p;
    return src === "c"
      ? { type: "token", text, id: i, source: "cloud", score: 0.9, edge_candidate: "x", request_ms: 10 }
      : { type: "token", text, id: i, source: "edge", score: 0.1 };
  });
}

function overlay(ts: TokenEvent[]): HTMLElement {
  const root = document.createElement("div");
  root.appendChild(renderMarkdown(ts.map((t) => t.text).join("")));
  const before = root.textContent;
  overlayTokens(root, ts);
  // Wrapping never changes what the reader sees.
  expect(root.textContent).toBe(before);
  return root;
}

/** The visible text of each token that got a span, by token index. */
function visible(root: HTMLElement, selector = ".tok"): Record<number, string> {
  const out: Record<number, string> = {};
  for (const span of root.querySelectorAll<HTMLElement>(selector)) {
    const i = Number(span.dataset.token);
    out[i] = (out[i] ?? "") + span.textContent;
  }
  return out;
}

const C = "c" as const;
const E = "e" as const;

describe("overlayTokens", () => {
  it("marks a cloud token in plain prose", () => {
    const root = overlay(tokens(["Hello", E], [" world", C], ["!", E]));
    expect(visible(root, ".cloud-token")).toEqual({ 1: " world" });
    expect(visible(root, ".edge-token")).toEqual({ 0: "Hello", 2: "!" });
    expect(root.querySelector(".cloud-token")!.getAttribute("tabindex")).toBe("0");
  });

  it("skips the syntax of bold and finds the bold word", () => {
    const root = overlay(tokens(["Very ", E], ["**", C], ["bold", C], ["**", E], [" text", E]));
    expect(visible(root, ".cloud-token")).toEqual({ 2: "bold" });
    expect(root.querySelector("strong .cloud-token")?.textContent).toBe("bold");
  });

  it("marks tokens inside a fenced code block, but not the fence or its language", () => {
    const root = overlay(
      tokens(["Code:\n\n", E], ["```", C], ["python", C], ["\n", E], ["def", E], [" f", C], ["():\n", E], ["   ", C], [" return", C], [" 1", E], ["\n```", E]),
    );
    expect(visible(root, ".cloud-token")).toEqual({ 5: " f", 7: "   ", 8: " return" });
    // A token may cover several highlighted pieces; all of them sit inside the code block.
    expect(root.querySelectorAll("pre .cloud-token").length).toBe(root.querySelectorAll(".cloud-token").length);
    // The highlighted keyword is still there, with the cloud span inside or around it.
    expect(root.querySelector("pre code")!.textContent).toBe("def f():\n    return 1\n");
  });

  it("finds code after a fence whose language contains the code's first letter", () => {
    const root = overlay(tokens(["```", E], ["javascript", E], ["\n", E], ["const", C], [" x = 1", E], ["\n```", E]));
    expect(visible(root, ".cloud-token")).toEqual({ 3: "const" });
  });

  it("marks list items without newlines between blocks stealing later characters", () => {
    const root = overlay(tokens(["- ", E], ["a", E], ["\n- ", E], ["b", C], ["\n- ", E], ["c", E]));
    expect(visible(root, ".cloud-token")).toEqual({ 3: "b" });
    expect(visible(root, ".edge-token")).toEqual({ 1: "a", 5: "c" });
  });

  it("maps entities like &lt; to the character they decode to", () => {
    const root = overlay(tokens(["a ", E], ["&lt;", C], ["b", E], ["&gt;", C], [" &amp; c", E]));
    expect(root.textContent!.trim()).toBe("a <b> & c");
    expect(visible(root, ".cloud-token")).toEqual({ 1: "<", 3: ">" });
  });

  it("maps an entity split across tokens to the token that began it", () => {
    const root = overlay(tokens(["x ", E], ["&l", C], ["t; y", E]));
    expect(root.textContent!.trim()).toBe("x < y");
    expect(visible(root, ".cloud-token")).toEqual({ 1: "<" });
  });

  it("keeps &lt; literal inside code, token by token", () => {
    const root = overlay(tokens(["`", E], ["&lt;", C], ["`", E]));
    expect(visible(root, ".cloud-token")).toEqual({ 1: "&lt;" });
  });

  it("handles tokens split mid-character: an empty token gets no span, the completing one gets the character", () => {
    const root = overlay(tokens(["I ", E], ["", C], ["😀", C], [" ok", E]));
    expect(visible(root, ".cloud-token")).toEqual({ 2: "😀" });
    const empty = overlay(tokens(["caf", E], ["", C], ["é", E]));
    expect(visible(empty, ".cloud-token")).toEqual({});
    expect(empty.textContent!.trim()).toBe("café");
  });

  it("marks inline code, headings and link text", () => {
    const root = overlay(
      tokens(["# ", E], ["Title", C], ["\n\nUse ", E], ["`", E], ["x", C], ["`", E], [" or see ", E], ["[docs", C], ["](https://a.example/docs)", E], [" now", C]),
    );
    expect(visible(root, ".cloud-token")).toEqual({ 1: "Title", 4: "x", 7: "docs", 9: " now" });
    expect(root.querySelector("h1 .cloud-token")?.textContent).toBe("Title");
    expect(root.querySelector("code .cloud-token")?.textContent).toBe("x");
    expect(root.querySelector("a .cloud-token")?.textContent).toBe("docs");
  });

  it("finds backslash-escaped characters", () => {
    const root = overlay(tokens(["2 ", E], ["\\*", C], [" 3", E]));
    expect(root.textContent!.trim()).toBe("2 * 3");
    expect(visible(root, ".cloud-token")).toEqual({ 1: "*" });
  });

  it("marks raw HTML from the model, which is shown as text", () => {
    const root = overlay(tokens(["<img src=x ", E], ["onerror", C], ["=alert(1)>", E]));
    expect(visible(root, ".cloud-token")).toEqual({ 1: "onerror" });
  });

  it("places every cloud token of the recorded routed reply where its text is", () => {
    const events = parseEventLines(readFileSync(resolve("tests/fixtures/routed-reply.jsonl"), "utf8"));
    const ts = events.filter((e): e is TokenEvent => e.type === "token");
    const root = overlay(ts);
    const shown = visible(root);
    // Whatever a token shows is its own text, minus markdown syntax.
    for (const [i, text] of Object.entries(shown)) {
      const own = ts[Number(i)]!.text;
      let at = 0;
      for (const ch of text) {
        at = own.indexOf(ch, at);
        expect(at, `token ${i} ${JSON.stringify(own)} shows ${JSON.stringify(text)}`).not.toBe(-1);
        at++;
      }
    }
    const cloud = visible(root, ".cloud-token");
    expect(cloud[0]).toBe("Here");
    expect(Object.values(cloud)).toContain(" string");
    expect(Object.values(cloud)).toContain(" return");
    // Only pure syntax has nothing to show
    const hidden = ts
      .map((t, i) => ({ t, i }))
      .filter(({ t, i }) => t.source === "cloud" && !(i in cloud))
      .map(({ t }) => t.text);
    // (backticks, a fence's language name, the newline ending a fence line).
    expect(hidden.length).toBeLessThan(6);
    for (const text of hidden) expect(text).toMatch(/^(`+|python|\n)$/);
  });

  it("stays fast on a 1000-token reply", () => {
    const parts: [string, "e" | "c"][] = [];
    for (let i = 0; i < 1000; i++) parts.push([i % 50 === 0 ? "\n\n```python\nx = 1\n```\n\n" : i % 7 === 0 ? " **word**" : " word", i % 5 === 0 ? C : E]);
    const ts = tokens(...parts);
    const start = performance.now();
    overlay(ts);
    expect(performance.now() - start).toBeLessThan(1500); // jsdom is far slower than a webview
  });
});

describe("alignSegments", () => {
  it("leaves characters that are not in the raw text unmapped, without moving on", () => {
    const [map] = alignSegments([{ text: "a→b" }], "ab");
    expect([...map!]).toEqual([0, -1, 1]);
  });

  it("lets a space skip a link target, but not whole words", () => {
    const [link] = alignSegments([{ text: "a b" }], "a](http://x.y/long) b");
    expect([...link!]).toEqual([0, 19, 20]);
    // Rendered "x y" where the raw text has no space until two words later: the space stays unmapped.
    const [words] = alignSegments([{ text: "x y" }], "x\nlong words y");
    expect(words![1]).toBe(-1);
    expect(words![2]).toBe(13);
  });
});
