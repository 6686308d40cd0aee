/** A reply on screen ends only on `finished`, renders notices, and shows what left the machine. */
import { describe, expect, it } from "vitest";
import type { Event } from "../ipc/types";
import { ReplyView } from "./view";

const finished = (reason: "stop" | "cancelled" = "stop", cloud_requests = 0): Event => ({
  type: "finished", reason,
  usage: { edge_tokens: 2, cloud_tokens: 1, cloud_requests, cloud_prompt_tokens: 0, cloud_cached_prompt_tokens: 0, cloud_completion_tokens: 0, est_cost_usd: 0.00003 },
  timings: { prefill_ms: 1, prefill_tokens: 1, cloud_ms: 1, total_ms: 1000 },
});
const token = (text: string, source: "edge" | "cloud" = "edge"): Event => ({ type: "token", text, id: 0, source, score: 0.5 });
const frame = () => new Promise((r) => requestAnimationFrame(() => r(null)));

describe("ReplyView", () => {
  it("renders tokens as they arrive and ends only on finished", async () => {
    const view = new ReplyView();
    view.push(token("Hello"));
    view.push(token(" **world**", "cloud"));
    await frame();
    expect(view.element.querySelector("strong .cloud-token")?.textContent).toBe("world");
    expect(view.streaming).toBe(true);
    expect(view.element.querySelector(".reply-footer")).toBeNull();

    view.push(finished());
    expect(await view.done).not.toBeNull();
    expect(view.streaming).toBe(false);
    expect(view.element.querySelector(".reply-footer")!.textContent).toContain("<$0.0001");
  });

  it("shows notices as coded banners", () => {
    const view = new ReplyView();
    view.push({ type: "notice", kind: "cloud_error", message: "timed out; used the local token instead" });
    const banner = view.element.querySelector(".notice-cloud_error")!;
    expect(banner.textContent).toBe("cloud_error timed out; used the local token instead");
  });

  it("lists exactly what each cloud request sent, in order", () => {
    const view = new ReplyView();
    view.push({ type: "cloud_request", sent: "first prompt", ok: true, ms: 120, prompt_tokens: 5, completion_tokens: 1, cost_usd: 0 });
    view.push(token("a", "cloud"));
    view.push({ type: "cloud_request", sent: "second <b>prompt</b>", ok: false, ms: 3000, prompt_tokens: 6, completion_tokens: 0, cost_usd: 0 });
    view.push(finished("stop", 2));
    const items = [...view.element.querySelectorAll(".privacy li")];
    expect(items.map((li) => li.querySelector(".request-sent")!.textContent)).toEqual(["first prompt", "second <b>prompt</b>"]);
    expect(items[1]!.textContent).toContain("failed");
    expect(items[1]!.textContent).toContain("3000 ms");
  });

  it("lists a request asked ahead and not used as such, not as failed", () => {
    const view = new ReplyView();
    view.push(token("a"));
    view.push({ type: "cloud_request", sent: "drafted prompt", ok: false, ms: 90, prompt_tokens: 0, completion_tokens: 0, cost_usd: 0.00003, unused: true });
    view.push(finished("stop", 1));
    const item = view.element.querySelector(".privacy li")!;
    expect(item.className).toBe("request unused");
    expect(item.textContent).toContain("asked ahead, unused");
    expect(item.textContent).not.toContain("failed");
  });

  it("says nothing left the machine only when no request was made", () => {
    const local = new ReplyView();
    local.push(token("a"));
    local.push(finished("stop", 0));
    expect(local.element.querySelector(".privacy")!.textContent).toBe("Nothing left this machine");

    const unrecorded = new ReplyView();
    unrecorded.push(finished("stop", 3));
    expect(unrecorded.element.querySelector(".privacy")!.textContent).toContain("3 cloud requests made");
  });

  it("rebuilds a saved reply from its events exactly as streamed", async () => {
    const events = [token("Hi "), token("**there**", "cloud"), finished()];
    const live = new ReplyView();
    events.forEach((e) => live.push(e));
    const saved = ReplyView.fromSaved(events, "Hi **there**");
    expect(saved.element.innerHTML).toBe(live.element.innerHTML);
    expect(ReplyView.fromSaved(undefined, "plain *text*").element.querySelector("em")?.textContent).toBe("text");
  });

  it("ends with an error banner when the command is rejected", async () => {
    const view = new ReplyView();
    view.fail({ kind: "busy", message: "a reply is already being generated" });
    expect(await view.done).toBeNull();
    expect(view.element.textContent).toContain("busy a reply is already being generated");
  });
});
