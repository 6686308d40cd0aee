import { describe, expect, it } from "vitest";
import type { CloudRequestEvent, Event, TokenEvent } from "../ipc/types";
import { ReplyLog } from "./log";

const edge = (text: string): TokenEvent => ({ type: "token", text, id: 1, source: "edge", score: 0.1 });
const cloud = (text: string): TokenEvent => ({ type: "token", text, id: 2, source: "cloud", score: 0.9, edge_candidate: "x", request_ms: 50 });
const request = (cost_usd: number, ok = true): CloudRequestEvent => ({
  type: "cloud_request", sent: "prompt", ok, ms: 50, prompt_tokens: 10, completion_tokens: 2, cost_usd,
});
const done: Event = {
  type: "finished", reason: "stop",
  usage: { edge_tokens: 0, cloud_tokens: 0, cloud_requests: 0, cloud_prompt_tokens: 0, cloud_cached_prompt_tokens: 0, cloud_completion_tokens: 0, est_cost_usd: 0 },
  timings: { prefill_ms: 0, prefill_tokens: 0, cloud_ms: 0, total_ms: 1 },
};

describe("ReplyLog", () => {
  it("divides a request's cost among the cloud tokens it produced", () => {
    const log = ReplyLog.of([edge("a"), request(0.0003), cloud("b"), cloud("c"), cloud("d"), edge("e"), request(0.001), cloud("f")]);
    expect(log.costOf(1)).toBeCloseTo(0.0001);
    expect(log.costOf(3)).toBeCloseTo(0.0001);
    expect(log.costOf(5)).toBeCloseTo(0.001);
    expect(log.costOf(0)).toBeNull(); // edge tokens have no cost
    expect(log.text).toBe("abcdef");
  });

  it("has no cost for cloud tokens in streams without request events (older recordings)", () => {
    const log = ReplyLog.of([cloud("a"), edge("b")]);
    expect(log.costOf(0)).toBeNull();
  });

  it("does not charge a failed request's cost to later cloud tokens", () => {
    const log = ReplyLog.of([request(0.5, false), edge("fallback"), cloud("x")]);
    expect(log.costOf(1)).toBeNull();
  });

  it("ignores anything after finished", () => {
    const log = ReplyLog.of([edge("a"), done, edge("late")]);
    expect(log.text).toBe("a");
    expect(log.finished).not.toBeNull();
  });
});
