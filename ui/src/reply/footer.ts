/** The line under a finished reply: who wrote it, what it cost, how fast it was. */
import type { FinishedEvent } from "../ipc/types";
import { h } from "../shell/dom";
import { formatPercent, formatUsd } from "./format";

export type FooterStats = {
  edgeTokens: number;
  cloudTokens: number;
  cloudShare: string;
  /** What the budget allowed: "15 %", "cloud off", or null for replies saved before it was recorded. */
  target: string | null;
  requests: number;
  cost: string;
  tokensPerSecond: string;
  /** Why it stopped, only when that is not the normal end. */
  reason: string | null;
};

const REASONS: Record<string, string> = {
  length: "stopped at the length limit",
  cancelled: "stopped by you",
  context_full: "context full",
  error: "ended by an error",
};

export function footerStats(finished: FinishedEvent): FooterStats {
  const { usage, timings, reason } = finished;
  const total = usage.edge_tokens + usage.cloud_tokens;
  const seconds = timings.total_ms / 1000;
  return {
    edgeTokens: usage.edge_tokens,
    cloudTokens: usage.cloud_tokens,
    cloudShare: formatPercent(total > 0 ? usage.cloud_tokens / total : 0),
    target: usage.target_share == null ? null : usage.target_share > 0 ? formatPercent(usage.target_share) : "cloud off",
    requests: usage.cloud_requests,
    cost: formatUsd(usage.est_cost_usd),
    tokensPerSecond: seconds > 0 ? (total / seconds).toFixed(1) : "—",
    reason: reason === "stop" ? null : (REASONS[reason] ?? reason),
  };
}

export function renderFooter(finished: FinishedEvent): HTMLElement {
  const s = footerStats(finished);
  const item = (label: string, value: string, cls = "") =>
    h("span", { className: `stat ${cls}`.trim() }, h("b", {}, value), ` ${label}`);
  return h(
    "div",
    { className: "reply-footer" },
    item("edge", String(s.edgeTokens), "stat-edge"),
    item("cloud", String(s.cloudTokens), "stat-cloud"),
    item(s.target ? `cloud share (target ${s.target})` : "cloud share", s.cloudShare, "stat-share"),
    item(s.requests === 1 ? "request" : "requests", String(s.requests)),
    item("est.", s.cost),
    item("tok/s", s.tokensPerSecond),
    s.reason ? h("span", { className: "stat stat-reason" }, s.reason) : null,
  );
}
