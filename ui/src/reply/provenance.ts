/**
 * Marks which model wrote each character of a rendered reply: every token's characters are
 * wrapped in a span (a focusable `<mark class="cloud-token">` for cloud ones), found through
 * `alignSegments`.
 */
import type { TokenEvent } from "../ipc/types";
import { alignSegments, type Segment } from "./align";

/** Wraps the characters of `tokens` inside `root` (already rendered from their concatenation). */
export function overlayTokens(root: Element, tokens: readonly TokenEvent[]): void {
  const raw = tokens.map((t) => t.text).join("");
  const owner = new Int32Array(raw.length);
  let at = 0;
  tokens.forEach((t, i) => {
    owner.fill(i, at, at + t.text.length);
    at += t.text.length;
  });

  const nodes: Text[] = [];
  const segments: Segment[] = [];
  const doc = root.ownerDocument;
  const walker = doc.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  let lastPre: Element | null = null;
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const node = n as Text;
    const pre = node.parentElement?.closest("pre") ?? null;
    // Newlines between blocks are layout, not content (outside code blocks).
    if (!pre && !/\S/.test(node.data)) continue;
    nodes.push(node);
    segments.push({ text: node.data, codeStart: pre !== null && pre !== lastPre });
    if (pre) lastPre = pre;
  }

  const maps = alignSegments(segments, raw);
  nodes.forEach((node, k) => wrapRuns(node, maps[k]!, owner, tokens));
}

function wrapRuns(node: Text, map: Int32Array, owner: Int32Array, tokens: readonly TokenEvent[]): void {
  const text = node.data;
  const doc = node.ownerDocument;
  const fragment = doc.createDocumentFragment();
  let start = 0;
  while (start < text.length) {
    const token = map[start] === -1 ? -1 : owner[map[start]!]!;
    let end = start + 1;
    while (end < text.length && (map[end] === -1 ? -1 : owner[map[end]!]!) === token) end++;
    const piece = text.slice(start, end);
    if (token === -1) {
      fragment.appendChild(doc.createTextNode(piece));
    } else {
      const t = tokens[token]!;
      // A cloud token is a <mark> a screen reader announces as "cloud token", not only a colour.
      const cloud = t.source === "cloud";
      const span = doc.createElement(cloud ? "mark" : "span");
      span.className = cloud ? "tok cloud-token" : "tok edge-token";
      span.dataset.token = String(token);
      span.dataset.source = t.source;
      span.dataset.score = t.score.toFixed(3);
      if (cloud) {
        span.tabIndex = 0;
        span.setAttribute("aria-roledescription", "cloud token");
      }
      span.textContent = piece;
      fragment.appendChild(span);
    }
    start = end;
  }
  node.replaceWith(fragment);
}
