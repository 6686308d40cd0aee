/**
 * The UI's view of the contract equals docs/ipc.md: every command name, every event type and
 * every coded kind. When the Rust side has written its fixtures from the real types, every
 * recorded event must also parse here.
 */
import { existsSync, readFileSync } from "node:fs";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { COMMANDS } from "./commands";
import { parseEvent } from "./events";
import { CONTEXT_POLICIES, ERROR_KINDS, EVENT_TYPES, FINISH_REASONS, NOTICE_KINDS, ROUTER_KINDS, type ContextPolicy } from "./types";

const doc = readFileSync(resolve("docs/ipc.md"), "utf8");

/** The lines of a `type Name = …;` declaration in the doc's TypeScript blocks. */
function declaration(name: string): string {
  const start = doc.indexOf(`type ${name} =`);
  if (start === -1) throw new Error(`docs/ipc.md has no type ${name}`);
  const rest = doc.slice(start);
  // A declaration runs until the next line that starts another `type`, or the end of the block.
  const end = rest.slice(1).search(/\n(?:type |```)/);
  return rest.slice(0, end === -1 ? undefined : end + 1);
}

function quoted(text: string, pattern = /"([a-z_]+)"/g): string[] {
  return [...text.matchAll(pattern)].map((m) => m[1]!);
}

const sorted = (xs: Iterable<string>) => [...new Set(xs)].sort();

describe("docs/ipc.md", () => {
  it("lists exactly the commands the UI calls", () => {
    const documented = [...doc.matchAll(/^\|\s*`([a-z_]+)`\s*\|/gm)].map((m) => m[1]!);
    expect(documented.length).toBeGreaterThan(10);
    expect(sorted(COMMANDS)).toEqual(sorted(documented));
  });

  it("has exactly the event types the UI understands", () => {
    const documented = quoted(declaration("Event"), /type: "([a-z_]+)"/g);
    expect(sorted(EVENT_TYPES)).toEqual(sorted(documented));
  });

  it("has exactly the error kinds, notice kinds and finish reasons the UI knows", () => {
    expect(sorted(ERROR_KINDS)).toEqual(sorted(quoted(declaration("ErrorKind").replace(/\/\/.*$/gm, ""))));
    expect(sorted(NOTICE_KINDS)).toEqual(sorted(quoted(declaration("NoticeKind"))));
    expect(sorted(FINISH_REASONS)).toEqual(sorted(quoted(declaration("FinishReason"))));
  });
});

const EVENTS_FIXTURE = resolve("ui/src/ipc/fixtures/events.json");
const PAYLOADS_FIXTURE = resolve("ui/src/ipc/fixtures/payloads.json");
const TRANSCRIPT_FIXTURE = resolve("ui/src/ipc/fixtures/transcript.json");

/** The keys of `value`, sorted, failing clearly when it is not an object. */
function keys(value: unknown, what: string): string[] {
  expect(value, what).toBeTypeOf("object");
  expect(value, what).not.toBeNull();
  return Object.keys(value as object).sort();
}

/** `value` has exactly the `required` keys, plus any of the `optional` ones. */
function expectFields(value: unknown, what: string, required: string[], optional: string[] = []): void {
  const actual = keys(value, what);
  expect(actual, `${what} lacks fields the UI reads`).toEqual(expect.arrayContaining(required));
  expect(actual.filter((k) => !required.includes(k) && !optional.includes(k)), `${what} has fields the UI does not know`).toEqual([]);
}

const EVENT_FIELDS: Record<string, [string[], string[]?]> = {
  left_out: [["type", "from", "to"]],
  started: [["type", "edge_model", "cloud", "router", "prompt_tokens"]],
  token: [["type", "text", "id", "source", "score"], ["edge_candidate", "request_ms"]],
  cloud_request: [["type", "sent", "ok", "ms", "prompt_tokens", "completion_tokens", "cost_usd"], ["unused"]],
  notice: [["type", "kind", "message"]],
  finished: [["type", "reason", "usage", "timings"]],
};

function expectEvent(e: unknown, what: string): void {
  expect(parseEvent(e), `${what} ${JSON.stringify(e)}`).not.toBeNull();
  const event = e as Record<string, unknown>;
  const [required, optional] = EVENT_FIELDS[event.type as string]!;
  expectFields(e, `${what} (${String(event.type)})`, required, optional);
  if (event.type === "notice") expect(NOTICE_KINDS as readonly string[]).toContain(event.kind);
  if (event.type === "finished") {
    expect(FINISH_REASONS as readonly string[]).toContain(event.reason);
    expectFields(event.usage, "usage", ["edge_tokens", "cloud_tokens", "cloud_requests", "cloud_prompt_tokens", "cloud_cached_prompt_tokens", "cloud_completion_tokens", "est_cost_usd"], ["cloud_requests_unused", "target_share", "session_share"]);
    expectFields(event.timings, "timings", ["prefill_ms", "prefill_tokens", "cloud_ms", "total_ms"]);
  }
}

function expectChatSettings(v: unknown): void {
  expectFields(v, "ChatSettings", ["system_prompt", "temperature", "top_p", "max_tokens", "context_policy"]);
  expect(CONTEXT_POLICIES).toContain((v as { context_policy: ContextPolicy }).context_policy);
}

describe("fixtures written from the Rust types", () => {
  it.skipIf(!existsSync(EVENTS_FIXTURE))("every recorded event has the shape the UI reads, and every type, notice kind and finish reason is covered", () => {
    const events = JSON.parse(readFileSync(EVENTS_FIXTURE, "utf8")) as Record<string, unknown>[];
    expect(Array.isArray(events)).toBe(true);
    events.forEach((e, i) => expectEvent(e, `events.json[${i}]`));
    expect(sorted(events.map((e) => e.type as string))).toEqual(sorted(EVENT_TYPES));
    expect(sorted(events.filter((e) => e.type === "notice").map((e) => e.kind as string))).toEqual(sorted(NOTICE_KINDS));
    expect(sorted(events.filter((e) => e.type === "finished").map((e) => e.reason as string))).toEqual(sorted(FINISH_REASONS));
  });

  // One check per payload in payloads.json; a payload the UI does not check yet fails the
  // test, so a new one cannot slip past the UI's types.
  const PAYLOAD_CHECKS: Record<string, (value: unknown) => void> = {
    app_error: (v) => {
      expectFields(v, "AppError", ["kind", "message"]);
      expect(ERROR_KINDS as readonly string[]).toContain((v as { kind: string }).kind);
    },
    budget: (v) => {
      expectFields(v, "CloudBudget", ["enabled", "max_share", "max_cloud_tokens", "daily_spend_cap_usd", "prices"]);
      expectFields((v as { prices: unknown }).prices, "Prices", ["input_per_mtok", "output_per_mtok"]);
      const share = (v as { max_share: number }).max_share;
      expect(share >= 0 && share <= 1, "max_share is a fraction").toBe(true);
    },
    cloud_info: (v) => expectFields(v, "CloudInfo", ["url", "label", "model", "mode", "stand_in"]),
    cloud_presets: (v) => {
      expect(Array.isArray(v)).toBe(true);
      for (const p of v as unknown[]) expectFields(p, "CloudPreset", ["name", "url", "mode", "needs_key"]);
    },
    conversation: (v) => {
      expectFields(v, "Conversation", ["id", "title", "created_ms", "updated_ms", "local_only", "settings", "messages"]);
      const own = (v as { settings: unknown }).settings;
      if (own !== null) expectChatSettings(own);
      for (const m of (v as { messages: unknown[] }).messages) {
        expectFields(m, "Message", ["role", "content"], ["mode", "events"]);
        const events = (m as { events?: unknown[] }).events ?? [];
        events.forEach((e, i) => expectEvent(e, `message event ${i}`));
      }
    },
    conversation_summary: (v) => expectFields(v, "ConversationSummary", ["id", "title", "updated_ms", "local_only", "preview"]),
    key_status: (v) => expectFields(v, "KeyStatus", ["source", "masked", "origin", "keyring_problem"]),
    meter: (v) => expectFields(v, "Meter", ["spent_today_usd", "cap_usd", "today_edge_tokens", "today_cloud_tokens"]),
    model_status: (v) => expectFields(v, "ModelStatus", ["name", "role", "bytes", "pulled"]),
    models: (v) => (v as unknown[]).forEach((m) => expectFields(m, "ModelStatus", ["name", "role", "bytes", "pulled"])),
    pull_events: (v) => {
      for (const e of v as Record<string, unknown>[]) {
        if (e.type === "progress") expectFields(e, "PullEvent progress", ["type", "done", "total"]);
        else if (e.type === "done") expectFields(e, "PullEvent done", ["type"]);
        else if (e.type === "failed") expectFields(e, "PullEvent failed", ["type", "error"]);
        else throw new Error(`unknown PullEvent type ${String(e.type)}`);
      }
    },
    reply_modes: (v) => expect(sorted(v as string[])).toEqual(sorted(["routed", "edge", "cloud"])),
    // The Settings menu offers exactly the backend's routers, in its order.
    router_kinds: (v) => expect(v).toEqual([...ROUTER_KINDS]),
    // The chat settings offer exactly the backend's policies, in its order.
    context_policies: (v) => expect(v).toEqual([...CONTEXT_POLICIES]),
    settings: (v) => {
      expectFields(v, "Settings", ["edge", "threads", "cloud", "ask_ahead", "router", "chat"]);
      expectChatSettings((v as { chat: unknown }).chat);
      expectFields((v as Record<string, unknown>).cloud, "Settings.cloud", ["url", "model", "mode"]);
      expectFields((v as Record<string, unknown>).router, "Settings.router", ["kind"]);
    },
    test_result: (v) => {
      expectFields(v, "TestResult", ["ok", "kind", "message", "models"]);
      const kind = (v as { kind: string | null }).kind;
      if (kind !== null) expect(ERROR_KINDS as readonly string[]).toContain(kind);
    },
    app_status: (v) => {
      expectFields(v, "AppStatus", ["edge_model", "router", "cloud", "budget", "meter", "key", "notices", "engine", "engine_error", "settings_problem"]);
      expect(["loading", "ready", "failed"]).toContain((v as { engine: string }).engine);
    },
  };

  it.skipIf(!existsSync(PAYLOADS_FIXTURE))("every payload has the fields the UI's types declare", () => {
    const payloads = JSON.parse(readFileSync(PAYLOADS_FIXTURE, "utf8")) as Record<string, unknown>;
    const unchecked = Object.keys(payloads).filter((name) => !(name in PAYLOAD_CHECKS));
    expect(unchecked, "payloads.json has payloads the UI's test does not check yet").toEqual([]);
    for (const [name, value] of Object.entries(payloads)) PAYLOAD_CHECKS[name]!(value);
  });
});

describe("the transcript recorded from the real commands", () => {
  it.skipIf(!existsSync(TRANSCRIPT_FIXTURE))("holds only commands of the contract, each answered or refused with a coded kind", () => {
    const transcript = JSON.parse(readFileSync(TRANSCRIPT_FIXTURE, "utf8")) as {
      exchanges: Record<string, unknown>[];
      titles: Record<string, unknown>[];
    };
    expect(transcript.exchanges.length).toBeGreaterThan(0);
    for (const x of transcript.exchanges) {
      expect(COMMANDS as readonly string[]).toContain(x.cmd);
      expectFields(x, `${String(x.cmd)} exchange`, ["cmd", "args"], ["ok", "error"]);
      expect("ok" in x !== "error" in x, `${String(x.cmd)} is answered or refused, not both`).toBe(true);
      if ("error" in x) {
        expectFields(x.error, "AppError", ["kind", "message"]);
        expect(ERROR_KINDS as readonly string[]).toContain((x.error as { kind: string }).kind);
      }
    }
    for (const t of transcript.titles) expectFields(t, "title", ["before", "message", "after"]);
  });
});
