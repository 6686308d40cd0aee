/**
 * One tooltip for every token in the app, driven by event delegation: hovering or focusing a
 * token span shows who wrote it, the router score and, for cloud tokens, what it replaced.
 */
import type { ReplyLog } from "./log";
import { h } from "../shell/dom";
import { formatUsd, visibleWhitespace } from "./format";

const logs = new WeakMap<Element, ReplyLog>();

/** Tells the tooltip which log the token spans under `body` index into. */
export function attachLog(body: Element, log: ReplyLog): void {
  logs.set(body, log);
}

export function installTokenTooltip(doc: Document = document): void {
  const tip = h("div", { className: "token-tip", id: "token-tip", hidden: true, attrs: { role: "tooltip" } });
  doc.body.appendChild(tip);
  let current: HTMLElement | null = null;

  const show = (span: HTMLElement) => {
    const body = span.closest(".reply-body");
    const log = body ? logs.get(body) : undefined;
    const index = Number(span.dataset.token);
    const token = log?.tokens[index];
    if (!log || !token) return;
    current = span;
    tip.replaceChildren(...tooltipContent(log, index));
    tip.className = `token-tip ${token.source}`;
    tip.hidden = false;
    span.setAttribute("aria-describedby", "token-tip");
    place(tip, span);
  };
  const hide = () => {
    current?.removeAttribute("aria-describedby");
    current = null;
    tip.hidden = true;
  };

  const tokenOf = (target: EventTarget | null) =>
    target instanceof Element ? (target.closest(".tok") as HTMLElement | null) : null;
  doc.addEventListener("mouseover", (e) => {
    const span = tokenOf(e.target);
    if (span && span !== current) show(span);
    else if (!span && current) hide();
  });
  doc.addEventListener("focusin", (e) => {
    const span = tokenOf(e.target);
    if (span) show(span);
    else hide();
  });
  doc.addEventListener("focusout", (e) => {
    if (tokenOf(e.target) === current) hide();
  });
  doc.addEventListener("scroll", hide, true);
}

function row(label: string, value: string, cls = ""): HTMLElement {
  return h("div", { className: `tip-row ${cls}`.trim() }, h("span", { className: "tip-label" }, label), h("span", { className: "tip-value" }, value));
}

export function tooltipContent(log: ReplyLog, index: number): HTMLElement[] {
  const token = log.tokens[index]!;
  const rows = [
    h("div", { className: "tip-title" }, token.source === "cloud" ? "Cloud token" : "Edge token"),
    row("score", token.score.toFixed(3)),
  ];
  if (token.source === "cloud") {
    if (token.edge_candidate !== undefined) rows.push(row("replaced", visibleWhitespace(token.edge_candidate), "tip-replaced"));
    rows.push(row("latency", token.request_ms !== undefined ? `${token.request_ms} ms` : "—"));
    const cost = log.costOf(index);
    rows.push(row("cost", cost === null ? "—" : formatUsd(cost)));
  }
  return rows;
}

function place(tip: HTMLElement, anchor: HTMLElement): void {
  const r = anchor.getBoundingClientRect();
  const width = tip.offsetWidth;
  const height = tip.offsetHeight;
  const left = Math.max(8, Math.min(r.left, window.innerWidth - width - 8));
  const above = r.top - height - 6;
  tip.style.left = `${left}px`;
  tip.style.top = `${above >= 8 ? above : r.bottom + 6}px`;
}
