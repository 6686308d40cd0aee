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
  /** The share of the replies since the share was set, which the target is about; null when not recorded. */
  session: string | null;
  requests: number;
  /** Of the requests, those asked ahead whose answers the reply did not use (0 for replies saved before it was recorded). */
  unused: number;
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
    // One decimal: the session's share is read against its target, often a few points.
    session: usage.session_share == null ? null : `${(usage.session_share * 100).toFixed(1)} %`,
    requests: usage.cloud_requests,
    unused: usage.cloud_requests_unused ?? 0,
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
    item(shareLabel(s), s.cloudShare, "stat-share"),
    item(requestsLabel(s), String(s.requests)),
    item("est.", s.cost),
    item("tok/s", s.tokensPerSecond),
    s.reason ? h("span", { className: "stat stat-reason" }, s.reason) : null,
  );
}

/** "requests (2 asked ahead, unused)": requests sent from the draft are paid for even where the reply took another way. */
function requestsLabel(s: FooterStats): string {
  const noun = s.requests === 1 ? "request" : "requests";
  return s.unused > 0 ? `${noun} (${s.unused} asked ahead, unused)` : noun;
}

/** "cloud share (target 5 %, 4.8 % over the session)": a reply may spend what earlier ones saved, so the target is about the session. */
function shareLabel(s: FooterStats): string {
  if (!s.target) return "cloud share";
  return s.session ? `cloud share (target ${s.target}, ${s.session} over the session)` : `cloud share (target ${s.target})`;
}
