/**
 * A scripted backend for the browser tests, installed only in the `e2e` build (`main.ts`
 * imports it behind `import.meta.env.MODE`, so the production bundle never contains it).
 *
 * It answers every command of docs/ipc.md: where an answer carries a backend rule (defaults,
 * presets, titles, tidied input, refusals) it replays what the real commands answered
 * (`transcript.ts`); otherwise it only keeps state (chats, settings, the budget) as given.
 * Replies need a model, so they are not recorded from the app: it stands in for the engine by
 * replaying event streams recorded from the CLI through the reply's Channel the way Tauri does
 * (indexed messages, then an end marker, all after the command has resolved). It records every
 * invocation on `window.__tandemCalls`.
 */
import { mockIPC } from "@tauri-apps/api/mocks";
import type {
  AppError,
  AppStatus,
  CloudBudget,
  CloudPreset,
  Conversation,
  ConversationSummary,
  Event,
  KeyStatus,
  ModelStatus,
  PullEvent,
  ReplyMode,
  Settings,
  TestResult,
  TokenEvent,
} from "../types";
import { parseEventLines } from "../events";
import { firstAnswer, recorded, titleAfter } from "./transcript";
import routedJsonl from "../../../../tests/fixtures/routed-reply.jsonl?raw";
import xssJsonl from "../../../../tests/fixtures/xss-reply.jsonl?raw";

type Call = { cmd: string; args: unknown };
type Hooks = {
  /** Rejects the next call of `cmd` with `error` (coded, or anything else Tauri might reject with). */
  failNext(cmd: string, error: unknown): void;
  /** Milliseconds between streamed events. */
  delayMs: number;
};

declare global {
  interface Window {
    __tandemCalls: Call[];
    __tandemMock: Hooks;
  }
}

/** The part of a JS Channel the mock needs: Tauri hands the Channel object itself to the handler. */
type ChannelLike = { id: number };

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function send(channel: ChannelLike, index: number, message: unknown): void {
  window.__TAURI_INTERNALS__.runCallback(channel.id, { index, message });
}
function end(channel: ChannelLike, index: number): void {
  window.__TAURI_INTERNALS__.runCallback(channel.id, { index, end: true });
}

declare global {
  interface Window {
    __TAURI_INTERNALS__: { runCallback(id: number, data: unknown): void };
  }
}

const ROUTED = parseEventLines(routedJsonl);
const XSS = parseEventLines(xssJsonl);
/** About 1000 tokens: the routed reply's tokens eight times over, for speed checks. */
const LONG: Event[] = [
  ROUTED[0]!,
  ...Array.from({ length: 8 }, () => ROUTED.filter((e) => e.type === "token" || e.type === "cloud_request")).flat(),
  ROUTED.at(-1)!,
];

/** A stand-in for the chart `tandem eval` writes: small, but a real SVG an <img> must decode. */
const EVALUATION_SVG = `<svg xmlns="http://www.w3.org/2000/svg" width="200" height="100" viewBox="0 0 200 100">
<rect x="10" y="40" width="40" height="50" fill="#4f7cff"/><text x="60" y="60" font-size="16">accuracy</text></svg>`;

/**
 * What the engine says when a chat of `messages` (the one being answered last) outgrows the
 * window in the mock: only the last three questions and the answers between them stay in view.
 */
function leftOut(messages: number): Event {
  return { type: "left_out", from: 0, to: Math.max(0, messages - 5) };
}

/** The same stream as if the router had picked only edge (or only cloud) tokens. */
function inMode(events: readonly Event[], mode: ReplyMode): Event[] {
  if (mode === "routed") return [...events];
  const out: Event[] = [];
  let count = 0;
  for (const e of events) {
    if (e.type === "cloud_request") continue;
    if (e.type === "token") {
      count++;
      out.push(
        mode === "edge"
          ? { type: "token", text: e.text, id: e.id, source: "edge", score: e.score }
          : { ...e, source: "cloud", edge_candidate: e.edge_candidate ?? e.text, request_ms: e.request_ms ?? 200 },
      );
    } else if (e.type === "finished") {
      out.push({
        ...e,
        usage: {
          ...e.usage,
          edge_tokens: mode === "edge" ? count : 0,
          cloud_tokens: mode === "cloud" ? count : 0,
          cloud_requests: mode === "cloud" ? count : 0,
          // What the engine reports in these modes: the cloud off, or all of it.
          target_share: mode === "cloud" ? 1 : 0,
        },
      });
    } else out.push(e);
  }
  return out;
}

function fail(kind: AppError["kind"], message: string): never {
  throw { kind, message } satisfies AppError;
}

export function installMockBackend(): void {
  const params = new URLSearchParams(location.search);
  const calls: Call[] = [];
  const failures = new Map<string, unknown>();
  const hooks: Hooks = {
    failNext: (cmd, error) => failures.set(cmd, error),
    delayMs: Number(params.get("delay") ?? 12),
  };
  window.__tandemCalls = calls;
  window.__tandemMock = hooks;

  let engineCalls = 0;
  // "loading" (ready after 2 polls), "failed" (a corrupt model) or "missing" (a first start:
  // no model pulled; ready once the edge model is)
  const engineScript = params.get("engine");
  const evaluation = params.get("eval") === "none" ? null : EVALUATION_SVG; // "none": `tandem eval` never ran
  // The user of the browser tests priced the cloud and set a daily cap; see ipc_fixtures.rs.
  let budget = firstAnswer<CloudBudget>("budget_set");
  // Keys by the origin they were saved for, as the keyring holds them.
  const keys = new Map<string, string>();
  const keyringProblem = params.has("keyring")
    ? "the OS keyring is unavailable (no secret service on the session bus); set TANDEM_CLOUD_API_KEY instead"
    : null;
  const originOf = (url: string): string | null => {
    try {
      return /^https?:$/.test(new URL(url).protocol) ? new URL(url).origin : null;
    } catch {
      return null;
    }
  };
  const keyStatus = (url: string): KeyStatus => {
    const origin = originOf(url);
    const masked = origin ? (keys.get(origin) ?? null) : null;
    return { source: masked ? "keyring" : "none", masked, origin, keyring_problem: origin ? keyringProblem : null };
  };
  const endpoint = (url: unknown): string => {
    const u = String(url).trim();
    if (!originOf(u)) throw { kind: "invalid_input", message: "enter the cloud's URL first: a key is saved for the endpoint it is sent to" };
    return u;
  };
  let settings = firstAnswer<Settings>("settings_get");
  const meter = { spent_today_usd: 0.0123, cap_usd: budget.daily_spend_cap_usd, today_edge_tokens: 830, today_cloud_tokens: 120 };
  const models: ModelStatus[] = [
    { name: "qwen2.5-coder-0.5b", role: "edge", bytes: 491_000_000, pulled: true },
    { name: "qwen2.5-coder-1.5b", role: "cloud stand-in", bytes: 1_120_000_000, pulled: true },
    { name: "smollm2-360m", role: "edge", bytes: 271_000_000, pulled: false },
  ];
  if (engineScript === "missing") for (const m of models.slice(0, 2)) m.pulled = false;
  const presets = firstAnswer<CloudPreset[]>("cloud_presets");

  const now = Date.now();
  const chats = new Map<string, Conversation>();
  const routedText = ROUTED.map((e) => (e.type === "token" ? e.text : "")).join("");
  const seeded: Conversation = {
    id: "c-seeded",
    title: "Reverse a string in Python",
    created_ms: now - 3_600_000,
    updated_ms: now - 3_600_000,
    local_only: false,
    settings: null,
    messages: [
      { role: "user", content: "Write a Python function that reverses a string." },
      { role: "assistant", mode: "routed", content: routedText, events: ROUTED },
    ],
  };
  chats.set(seeded.id, seeded);
  // With ?long, a chat longer than its context window: its last reply saw only its last three questions.
  const longChat: Conversation = {
    ...structuredClone(seeded),
    id: "c-long",
    title: "A long conversation about strings",
    created_ms: now - 7_200_000,
    updated_ms: now - 7_200_000,
    messages: Array.from({ length: 12 }, (_, i) =>
      i % 2 === 0
        ? { role: "user" as const, content: `Question ${i / 2 + 1}: and how would you reverse it in place?` }
        : { role: "assistant" as const, mode: "routed" as const, content: routedText, events: i === 11 ? [leftOut(11), ...ROUTED] : ROUTED },
    ),
  };
  if (params.has("long")) chats.set(longChat.id, longChat);
  let nextId = 1;
  let running: { stop: boolean } | null = null;

  const status = (): AppStatus => {
    engineCalls++;
    const edgeMissing = engineScript === "missing" && !models.find((m) => m.name === settings.edge)?.pulled;
    const engine = engineScript === "failed" || edgeMissing ? "failed" : engineScript === "loading" && engineCalls <= 2 ? "loading" : "ready";
    return {
      edge_model: settings.edge,
      router: settings.router.kind,
      cloud: { url: null, label: "local stand-in", model: "qwen2.5-coder-1.5b", mode: settings.cloud.mode, stand_in: true },
      budget,
      meter,
      key: keyStatus(settings.cloud.url),
      notices: params.has("notice") ? ["spend file was unreadable; today's spend starts at $0"] : [],
      engine,
      engine_error: edgeMissing
        ? { kind: "model_missing", message: "qwen2.5-coder-0.5b is not downloaded: run `tandem models pull qwen2.5-coder-0.5b`" }
        : engine === "failed"
          ? { kind: "model_corrupt", message: "sha256 mismatch for qwen2.5-coder-0.5b.gguf" }
          : null,
      settings_problem: params.has("bad-settings")
        ? "config.toml is not valid: unknown field `max_shares`; it was kept as config.toml.bad-1764000000; the default settings are in use"
        : null,
    };
  };

  const get = (id: unknown): Conversation => chats.get(String(id)) ?? fail("not_found", `no conversation ${String(id)}`);
  const summary = (c: Conversation): ConversationSummary => ({
    id: c.id,
    title: c.title,
    updated_ms: c.updated_ms,
    local_only: c.local_only,
    preview: (c.messages.at(-1)?.content ?? "").slice(0, 80),
  });

  /** Replays `events` through the channel after the command has returned, like the real one. */
  const replay = (channel: ChannelLike, events: Event[], save?: (events: Event[]) => void) => {
    if (running) fail("busy", "a reply is already being generated");
    const run = { stop: false };
    running = run;
    void (async () => {
      await sleep(hooks.delayMs);
      const sent: Event[] = [];
      let index = 0;
      for (const e of events) {
        if (e.type === "finished") break;
        if (run.stop) break;
        send(channel, index++, e);
        sent.push(e);
        await sleep(hooks.delayMs);
      }
      const original = events.at(-1);
      let finished = original?.type === "finished" ? original : null;
      if (run.stop || !finished) {
        const tokens = sent.filter((e): e is TokenEvent => e.type === "token");
        finished = {
          type: "finished",
          reason: "cancelled",
          usage: {
            edge_tokens: tokens.filter((t) => t.source === "edge").length,
            cloud_tokens: tokens.filter((t) => t.source === "cloud").length,
            cloud_requests: sent.filter((e) => e.type === "cloud_request").length,
            cloud_prompt_tokens: 0,
            cloud_cached_prompt_tokens: 0,
            cloud_completion_tokens: 0,
            est_cost_usd: 0,
          },
          timings: { prefill_ms: 40, prefill_tokens: 20, cloud_ms: 0, total_ms: 40 + index * Math.max(hooks.delayMs, 1) },
        };
      }
      send(channel, index++, finished);
      sent.push(finished);
      meter.today_edge_tokens += finished.usage.edge_tokens;
      meter.today_cloud_tokens += finished.usage.cloud_tokens;
      meter.spent_today_usd += finished.usage.est_cost_usd;
      save?.(sent);
      running = null;
      end(channel, index);
    })();
    return null;
  };

  /** Starts the reply to `text` and answers like `reply_send`: the chat as saved with the message. */
  const answer = (conversation: Conversation, text: string, channel: ChannelLike): ConversationSummary => {
    // As the engine does: a local-only chat replies in edge mode; with the cloud switched off a
    // routed reply still runs, but every token is the edge model's.
    const mode: ReplyMode = conversation.local_only ? "edge" : "routed";
    const script = /xss/i.test(text) ? XSS : /long/i.test(text) ? LONG : ROUTED;
    const stream = inMode(script, budget.enabled ? mode : "edge");
    // The mock's window holds ten messages.
    if (conversation.messages.length > 10) stream.unshift(leftOut(conversation.messages.length));
    replay(channel, stream, (events) => {
      const content = events.map((e) => (e.type === "token" ? e.text : "")).join("");
      conversation.messages.push({ role: "assistant", mode, content, events });
      conversation.updated_ms = Date.now();
    });
    return summary(conversation);
  };

  mockIPC(async (cmd, raw) => {
    const args = (raw ?? {}) as Record<string, unknown>;
    calls.push({ cmd, args: JSON.parse(JSON.stringify(args)) as unknown });
    await sleep(5);
    if (failures.has(cmd)) {
      const planned = failures.get(cmd);
      failures.delete(cmd);
      throw planned;
    }
    // The backend was asked exactly this: answer as it did.
    const replayed = recorded(cmd, args);
    if (replayed && "error" in replayed) throw replayed.error;
    const answered = replayed && "ok" in replayed ? structuredClone(replayed.ok) : undefined;
    switch (cmd) {
      case "app_status":
        return status();
      case "meter":
        return { ...meter };
      case "budget_set": {
        budget = structuredClone((answered ?? args.budget) as CloudBudget);
        meter.cap_usd = budget.daily_spend_cap_usd;
        return budget;
      }
      case "conversations_list": {
        const q = typeof args.query === "string" ? args.query.toLowerCase() : "";
        return [...chats.values()]
          .filter((c) => !q || c.title.toLowerCase().includes(q) || c.messages.some((m) => m.content.toLowerCase().includes(q)))
          .sort((a, b) => b.updated_ms - a.updated_ms)
          .map(summary);
      }
      case "conversation_create": {
        const c: Conversation = { ...firstAnswer<Conversation>("conversation_create"), id: `c-${nextId++}`, created_ms: Date.now(), updated_ms: Date.now() };
        chats.set(c.id, c);
        return structuredClone(c);
      }
      case "conversation_get":
        return structuredClone(get(args.id));
      case "conversation_rename": {
        const c = get(args.id);
        c.title = answered ? (answered as Conversation).title : String(args.title);
        return structuredClone(c);
      }
      case "conversation_delete":
        get(args.id);
        chats.delete(String(args.id));
        return null;
      case "conversation_set_settings": {
        const c = get(args.id);
        c.settings = structuredClone(((answered as Conversation | undefined)?.settings ?? args.settings) as Conversation["settings"]);
        return structuredClone(c);
      }
      case "conversation_set_local_only": {
        const c = get(args.id);
        c.local_only = Boolean(args.localOnly);
        return structuredClone(c);
      }
      case "conversation_export_save": {
        get(args.id);
        // The user picked this place in the (native, here imagined) save dialog.
        return `/home/you/Documents/chat.${args.format === "json" ? "json" : "md"}`;
      }
      case "reply_send": {
        const c = get(args.id);
        if (running) fail("busy", "a reply is already being generated");
        const text = String(args.text);
        c.title = titleAfter(c.title, text);
        c.messages.push({ role: "user", content: text });
        c.updated_ms = Date.now();
        return answer(c, text, args.onEvent as ChannelLike);
      }
      case "reply_regenerate": {
        const c = get(args.id);
        if (c.messages.at(-1)?.role === "assistant") c.messages.pop();
        const last = c.messages.at(-1);
        if (!last) fail("invalid_input", "nothing to regenerate");
        return answer(c, last.content, args.onEvent as ChannelLike);
      }
      case "reply_stop":
        if (running) running.stop = true;
        return null;
      case "compare_run":
        return replay(args.onEvent as ChannelLike, inMode(/xss/i.test(String(args.text)) ? XSS : ROUTED, args.mode as ReplyMode));
      case "settings_get":
        return structuredClone(settings);
      case "settings_set":
        settings = structuredClone((answered ?? args.settings) as Settings);
        return structuredClone(settings);
      case "cloud_presets":
        return presets;
      case "cloud_test": {
        const cloud = args.cloud as Settings["cloud"];
        await sleep(150);
        const result = (kind: TestResult["kind"], message: string, found: string[] = []): TestResult => ({ ok: kind === null, kind, message, models: found });
        if (/wrong/.test(cloud.url)) return result("cloud_wrong_key", "401 Unauthorized: the server refused the key");
        if (/down|unreachable/.test(cloud.url)) return result("cloud_unreachable", "connection refused");
        if (cloud.model === "missing") return result("cloud_model_not_found", "no model named missing");
        return result(null, "answered in 84 ms", ["qwen2.5-1.5b-instruct", "qwen2.5-7b-instruct"]);
      }
      case "key_status":
        return keyStatus(String(args.url));
      case "key_set": {
        const url = endpoint(args.url);
        const k = String(args.key).trim();
        if (!k) throw { kind: "invalid_input", message: "the key is empty" };
        keys.set(originOf(url)!, `…${k.slice(-4)}`);
        return keyStatus(url);
      }
      case "key_clear": {
        const url = endpoint(args.url);
        keys.delete(originOf(url)!);
        return keyStatus(url);
      }
      case "models_list":
        return structuredClone(models);
      case "model_pull": {
        const channel = args.onProgress as ChannelLike;
        const total = 1_120_000_000;
        let index = 0;
        for (let done = 0; done <= total; done += total / 5) {
          send(channel, index++, { type: "progress", done, total } satisfies PullEvent);
          await sleep(60);
        }
        await sleep(300); // done == total: the backend is checking the sha256
        const m = models.find((x) => x.name === args.name);
        if (m) m.pulled = true;
        send(channel, index++, { type: "done" } satisfies PullEvent);
        end(channel, index);
        return null;
      }
      case "model_pick_file":
        return "/home/you/models/my-model.Q4_K_M.gguf";
      case "evaluation_latest":
        return evaluation;
    }
    // Tauri's own rejection for an unknown command is a plain string.
    throw `command ${cmd} not found`;
  });
}
