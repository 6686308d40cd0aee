import { describe, expect, it } from "vitest";
import type { FinishedEvent } from "../ipc/types";
import { footerStats, renderFooter } from "./footer";
import { formatPercent, formatUsd, visibleWhitespace } from "./format";

function finished(over: Partial<FinishedEvent["usage"]> = {}, total_ms = 5309, reason: FinishedEvent["reason"] = "stop"): FinishedEvent {
  return {
    type: "finished",
    reason,
    usage: { edge_tokens: 83, cloud_tokens: 37, cloud_requests: 10, cloud_prompt_tokens: 769, cloud_cached_prompt_tokens: 0, cloud_completion_tokens: 40, est_cost_usd: 0, ...over },
    timings: { prefill_ms: 403, prefill_tokens: 24, cloud_ms: 2686, total_ms },
  };
}

describe("footerStats", () => {
  it("summarises the recorded reply: shares, requests, speed", () => {
    expect(footerStats(finished({}, 5309, "length"))).toEqual({
      edgeTokens: 83,
      cloudTokens: 37,
      cloudShare: "31 %",
      target: null,
      session: null,
      requests: 10,
      unused: 0,
      cost: "$0.0000",
      tokensPerSecond: "22.6", // 120 tokens / 5.309 s
      reason: "stopped at the length limit",
    });
  });

  it("says how many requests were asked ahead and went unused, which are paid for too", () => {
    expect(renderFooter(finished({ cloud_requests: 5, cloud_requests_unused: 2 })).textContent).toContain("5 requests (2 asked ahead, unused)");
    expect(renderFooter(finished({ cloud_requests: 1 })).textContent).toContain("1 request$");
  });

  it("says nothing about the reason when the reply ended normally", () => {
    expect(footerStats(finished()).reason).toBeNull();
    expect(footerStats(finished({}, 100, "cancelled")).reason).toBe("stopped by you");
  });

  it("prices with 4 decimals, and tiny amounts as <$0.0001", () => {
    expect(footerStats(finished({ est_cost_usd: 0.01234 })).cost).toBe("$0.0123");
    expect(footerStats(finished({ est_cost_usd: 0.00004 })).cost).toBe("<$0.0001");
    expect(formatUsd(0)).toBe("$0.0000");
    expect(formatUsd(1.5)).toBe("$1.5000");
  });

  it("reads the share against the target the budget allowed", () => {
    expect(footerStats(finished({ target_share: 0.15 })).target).toBe("15 %");
    expect(footerStats(finished({ target_share: 0, cloud_tokens: 0 })).target).toBe("cloud off");
    expect(footerStats(finished({ target_share: null })).target).toBeNull();
  });

  it("reads the target against the session's share, which it promises", () => {
    const footer = renderFooter(finished({ target_share: 0.05, session_share: 0.048 }));
    expect(footer.querySelector(".stat-share")?.textContent).toBe("31 % cloud share (target 5 %, 4.8 % over the session)");
    const old = renderFooter(finished({ target_share: 0.05 }));
    expect(old.querySelector(".stat-share")?.textContent).toBe("31 % cloud share (target 5 %)");
  });

  it("copes with an empty or instant reply", () => {
    const s = footerStats(finished({ edge_tokens: 0, cloud_tokens: 0 }, 0));
    expect(s.cloudShare).toBe("0 %");
    expect(s.tokensPerSecond).toBe("—");
  });

  it("shows small shares with a decimal", () => {
    expect(formatPercent(0.004)).toBe("0.4 %");
    expect(formatPercent(1)).toBe("100 %");
  });
});

describe("visibleWhitespace", () => {
  it("makes spaces, newlines and tabs visible", () => {
    expect(visibleWhitespace(" #")).toBe("·#");
    expect(visibleWhitespace(",\n")).toBe(",⏎");
    expect(visibleWhitespace("\t")).toBe("⇥");
    expect(visibleWhitespace("")).toBe("∅");
  });
});
