/**
 * Model output → safe DOM. Raw HTML in the output is shown as text (the user sees what the
 * model wrote, and it can never become markup); DOMPurify still cleans marked's output in
 * case any other path lets a tag or a `javascript:` URL through; highlight.js colours code
 * blocks afterwards, on text it escapes itself.
 */
import { Marked, type Tokens } from "marked";
import DOMPurify from "dompurify";
import hljs from "highlight.js/lib/core";
import bash from "highlight.js/lib/languages/bash";
import javascript from "highlight.js/lib/languages/javascript";
import json from "highlight.js/lib/languages/json";
import python from "highlight.js/lib/languages/python";
import rust from "highlight.js/lib/languages/rust";
import typescript from "highlight.js/lib/languages/typescript";

hljs.registerLanguage("bash", bash);
hljs.registerLanguage("javascript", javascript);
hljs.registerLanguage("json", json);
hljs.registerLanguage("python", python);
hljs.registerLanguage("rust", rust);
hljs.registerLanguage("typescript", typescript);
hljs.registerAliases(["sh", "shell", "zsh"], { languageName: "bash" });
hljs.registerAliases(["js", "jsx", "mjs"], { languageName: "javascript" });
hljs.registerAliases(["ts", "tsx"], { languageName: "typescript" });
hljs.registerAliases(["py"], { languageName: "python" });
hljs.registerAliases(["rs"], { languageName: "rust" });

function escapeHtml(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

const marked = new Marked({
  gfm: true,
  breaks: false,
  async: false,
  renderer: {
    html({ text }: Tokens.HTML | Tokens.Tag) {
      return escapeHtml(text);
    },
    // Images would load remote content (and the CSP forbids it anyway): show the alt text.
    image({ text }: Tokens.Image) {
      return `<span class="md-image">${escapeHtml(text)}</span>`;
    },
  },
});

const PURIFY_CONFIG = {
  FORBID_TAGS: ["style", "img", "form", "input", "button", "textarea", "select", "svg", "math", "iframe"],
  FORBID_ATTR: ["style"],
};

/** Renders markdown into a detached, sanitised, highlighted fragment. */
export function renderMarkdown(raw: string): DocumentFragment {
  const html = marked.parse(raw) as string;
  const fragment = DOMPurify.sanitize(html, { ...PURIFY_CONFIG, RETURN_DOM_FRAGMENT: true });
  for (const code of fragment.querySelectorAll("pre > code")) highlight(code as HTMLElement);
  for (const a of fragment.querySelectorAll("a")) a.setAttribute("rel", "noopener noreferrer");
  return fragment;
}

function highlight(code: HTMLElement): void {
  const match = /(?:^|\s)language-([\w+-]+)/.exec(code.className);
  const language = match?.[1];
  code.classList.add("hljs");
  if (language) code.parentElement?.setAttribute("data-lang", language);
  if (!language || !hljs.getLanguage(language)) return;
  const text = code.textContent ?? "";
  // hljs escapes the text it is given; its output is plain spans with classes.
  code.innerHTML = hljs.highlight(text, { language, ignoreIllegals: true }).value;
}
