/** Model output must never run script: every payload below renders as inert content. */
import { describe, expect, it } from "vitest";
import { renderMarkdown } from "./markdown";

function render(raw: string): HTMLElement {
  const div = document.createElement("div");
  div.appendChild(renderMarkdown(raw));
  return div;
}

/** Anything that could run: script elements, event-handler attributes, script URLs. */
function dangers(root: HTMLElement): string[] {
  const found: string[] = [];
  for (const el of root.querySelectorAll("*")) {
    const tag = el.tagName.toLowerCase();
    if (["script", "iframe", "object", "embed", "style", "img", "svg", "form", "input", "base", "meta", "link"].includes(tag)) found.push(`<${tag}>`);
    for (const attr of el.attributes) {
      if (/^on/i.test(attr.name)) found.push(`${tag}[${attr.name}]`);
      if (/^(href|src|action|formaction|xlink:href)$/i.test(attr.name) && /^\s*(javascript|vbscript|data):/i.test(attr.value)) {
        found.push(`${tag}[${attr.name}=${attr.value}]`);
      }
      if (attr.name === "style") found.push(`${tag}[style]`);
    }
  }
  return found;
}

const PAYLOADS = [
  `<img src=x onerror="window.__xss=1">`,
  `<script>window.__xss=2</script>`,
  `[link](javascript:window.__xss=3)`,
  `[link](JaVaScRiPt:alert(1))`,
  `[link]( javascript:alert(1) )`,
  `[link](&#106;avascript:alert(1))`,
  `<a href="javascript:alert(1)">x</a>`,
  `[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)`,
  `![pic](x" onerror="alert(1))`,
  `![pic](https://tracker.example/pixel.png)`,
  `<svg onload=alert(1)><circle r=1 /></svg>`,
  `<iframe src="javascript:alert(1)"></iframe>`,
  `<div style="background:url(javascript:alert(1))">styled</div>`,
  `<style>body{display:none}</style>`,
  `<form action="javascript:alert(1)"><button>go</button></form>`,
  "Inline <b onmouseover=alert(1)>bold</b> html",
  "```html\n<script>alert(1)</script>\n```",
  "<details open ontoggle=alert(1)><summary>x</summary></details>",
  `[ref][1]\n\n[1]: javascript:alert(1)`,
  `<javascript:alert(1)>`,
];

describe("markdown sanitisation", () => {
  it.each(PAYLOADS)("renders %s inertly", (payload) => {
    const root = render(`Before\n\n${payload}\n\nAfter`);
    expect(dangers(root)).toEqual([]);
    expect(root.textContent).toContain("Before");
    expect(root.textContent).toContain("After");
  });

  it("shows raw HTML from the model as the text it wrote", () => {
    const root = render(`Use <img src=x onerror="window.__xss=1"> carefully`);
    expect(root.querySelector("img")).toBeNull();
    expect(root.textContent).toContain(`<img src=x onerror="window.__xss=1">`);
  });

  it("keeps a javascript: link's text but not its target", () => {
    const root = render("a [link](javascript:window.__xss=3) here");
    const a = root.querySelector("a");
    expect(root.textContent).toContain("link");
    expect(a?.getAttribute("href") ?? "").not.toMatch(/javascript/i);
  });

  it("keeps ordinary https links, marked as noopener", () => {
    const a = render("[docs](https://example.com/x)").querySelector("a")!;
    expect(a.getAttribute("href")).toBe("https://example.com/x");
    expect(a.getAttribute("rel")).toBe("noopener noreferrer");
  });

  it("shows an image as its alt text and loads nothing", () => {
    const root = render("![a chart](https://example.com/c.png)");
    expect(root.querySelector("img")).toBeNull();
    expect(root.querySelector(".md-image")?.textContent).toBe("a chart");
  });
});

describe("markdown rendering", () => {
  it("highlights code blocks in a known language and keeps their text", () => {
    const root = render("```python\ndef f(s):\n    return s[::-1]\n```");
    const code = root.querySelector("pre > code")!;
    expect(code.querySelector(".hljs-keyword")?.textContent).toBe("def");
    expect(code.textContent).toBe("def f(s):\n    return s[::-1]\n");
    expect(root.querySelector("pre")!.getAttribute("data-lang")).toBe("python");
  });

  it.each(["rust", "ts", "js", "bash", "json"])("knows %s", (lang) => {
    const root = render("```" + lang + "\nlet x = 1; // \"s\"\n```");
    expect(root.querySelector("pre code span")).not.toBeNull();
  });

  it("leaves an unknown language as plain text", () => {
    const root = render("```cobol\nDISPLAY 'HI'.\n```");
    expect(root.querySelector("pre code")!.textContent).toBe("DISPLAY 'HI'.\n");
  });

  it("renders an unfinished stream (open fence, open bold) without throwing", () => {
    expect(render("Here:\n\n```python\ndef f(").querySelector("pre code")!.textContent).toContain("def f(");
    expect(render("some **bold").textContent).toContain("bold");
  });

  it("renders GFM lists, tables and emphasis", () => {
    const root = render("- **a**\n- _b_\n\n| x | y |\n|---|---|\n| 1 | 2 |");
    expect(root.querySelectorAll("li")).toHaveLength(2);
    expect(root.querySelector("strong")?.textContent).toBe("a");
    expect(root.querySelector("td")?.textContent).toBe("1");
  });
});
