import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { parseEvent, parseEventLines } from "./events";
import { toUiError, describeError, CommandError } from "./errors";

const fixture = (name: string) => readFileSync(resolve("tests/fixtures", name), "utf8");

describe("parseEvent", () => {
  it("accepts each documented event", () => {
    expect(parseEvent({ type: "started", edge_model: "e", cloud: null, router: "entropy", prompt_tokens: 3 })).not.toBeNull();
    expect(parseEvent({ type: "token", text: "", id: 1, source: "edge", score: 0.1 })).not.toBeNull();
    expect(parseEvent({ type: "token", text: "x", id: 1, source: "cloud", score: 0.9, edge_candidate: " ", request_ms: 5 })).not.toBeNull();
    expect(parseEvent({ type: "cloud_request", sent: "s", ok: false, ms: 3, prompt_tokens: 1, completion_tokens: 0, cost_usd: 0 })).not.toBeNull();
    expect(parseEvent({ type: "notice", kind: "cloud_error", message: "m" })).not.toBeNull();
    expect(parseEvent({ type: "finished", reason: "stop", usage: {}, timings: {} })).not.toBeNull();
  });

  it("drops unknown or malformed events instead of passing them on", () => {
    expect(parseEvent(null)).toBeNull();
    expect(parseEvent("token")).toBeNull();
    expect(parseEvent({ type: "telemetry" })).toBeNull();
    expect(parseEvent({ type: "token", text: 3, source: "edge", score: 1 })).toBeNull();
    expect(parseEvent({ type: "token", text: "a", source: "moon", score: 1 })).toBeNull();
    expect(parseEvent({ type: "finished", reason: "stop" })).toBeNull();
  });

  it("reads the recorded routed reply: 120 tokens, 37 from the cloud, ending with finished", () => {
    const events = parseEventLines(fixture("routed-reply.jsonl"));
    expect(events[0]!.type).toBe("started");
    expect(events.at(-1)!.type).toBe("finished");
    const tokens = events.filter((e) => e.type === "token");
    expect(tokens).toHaveLength(120);
    expect(tokens.filter((t) => t.type === "token" && t.source === "cloud")).toHaveLength(37);
  });
});

describe("toUiError", () => {
  it("keeps a coded backend error", () => {
    expect(toUiError({ kind: "busy", message: "a reply is already being generated" })).toEqual({
      kind: "busy",
      message: "a reply is already being generated",
    });
  });

  it("never yields [object Object] for uncoded rejections", () => {
    for (const raw of ["command foo not found", new Error("boom"), { weird: 1 }, undefined, 42]) {
      const e = toUiError(raw);
      expect(e.kind).toBe("unexpected");
      expect(e.message).not.toContain("[object Object]");
      expect(e.message.length).toBeGreaterThan(0);
    }
  });

  it("round-trips through CommandError and describes itself as kind: message", () => {
    const err = new CommandError("key_set", { kind: "keyring_unavailable", message: "no secret service" });
    expect(toUiError(err)).toEqual({ kind: "keyring_unavailable", message: "no secret service" });
    expect(describeError(toUiError(err))).toBe("keyring_unavailable: no secret service");
  });
});
