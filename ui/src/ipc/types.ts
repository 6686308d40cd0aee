/**
 * The payload types of the IPC contract, mirrored from docs/ipc.md.
 * The Rust types are the source of truth; `contract.test.ts` checks these against the doc
 * and against the fixtures a Rust test writes from the real types.
 */

export type ErrorKind =
  | "model_missing"
  | "model_corrupt"
  | "model_unknown"
  | "engine_unavailable"
  | "busy"
  | "not_found"
  | "invalid_input"
  | "keyring_unavailable"
  | "cloud_unreachable"
  | "cloud_wrong_key"
  | "cloud_model_not_found"
  | "cloud_no_continuation"
  | "cloud_error"
  | "storage";

export type AppError = { kind: ErrorKind; message: string };

export const ERROR_KINDS = [
  "model_missing",
  "model_corrupt",
  "model_unknown",
  "engine_unavailable",
  "busy",
  "not_found",
  "invalid_input",
  "keyring_unavailable",
  "cloud_unreachable",
  "cloud_wrong_key",
  "cloud_model_not_found",
  "cloud_no_continuation",
  "cloud_error",
  "storage",
] as const satisfies readonly ErrorKind[];

// ---- Generation events -------------------------------------------------------------------

export type TokenSource = "edge" | "cloud";
export type NoticeKind =
  | "cloud_error"
  | "cloud_unavailable"
  | "text_prompts"
  | "context_full"
  | "spend_not_saved"
  | "spend_unknown"
  /** The cloud is past the user's wait limit: replies ask it only for their most uncertain tokens. */
  | "cloud_slow"
  /** Today's spend cap keeps the cloud out: the edge writes on. */
  | "spend_cap_reached"
  | "engine_error"
  /** The conversation could not be written. */
  | "not_saved";
export type FinishReason = "stop" | "length" | "cancelled" | "context_full" | "error";
export const NOTICE_KINDS = [
  "cloud_error",
  "cloud_unavailable",
  "text_prompts",
  "context_full",
  "spend_not_saved",
  "spend_unknown",
  "cloud_slow",
  "spend_cap_reached",
  "engine_error",
  "not_saved",
] as const satisfies readonly NoticeKind[];
export const FINISH_REASONS = ["stop", "length", "cancelled", "context_full", "error"] as const satisfies readonly FinishReason[];

export type Usage = {
  edge_tokens: number;
  cloud_tokens: number;
  cloud_requests: number;
  /** Of the requests, those asked ahead from the edge's draft whose answers the reply did not use (paid for); absent in replies saved before it was recorded. */
  cloud_requests_unused?: number;
  cloud_prompt_tokens: number;
  /** Of the prompt tokens, those the cloud read from its prompt cache (billed at the cached price). */
  cloud_cached_prompt_tokens: number;
  cloud_completion_tokens: number;
  est_cost_usd: number;
  /** The cloud share the budget allowed when the reply ended (0: cloud off); absent in replies saved before it was recorded. */
  target_share?: number | null;
  /** The cloud share of every reply since the share was last set, this one included (what the target promises); absent with the cloud off and in replies saved before it was recorded. */
  session_share?: number | null;
};
export type Timings = { prefill_ms: number; prefill_tokens: number; cloud_ms: number; total_ms: number };

export type StartedEvent = {
  type: "started";
  edge_model: string;
  cloud: string | null;
  router: string;
  prompt_tokens: number;
};
export type TokenEvent = {
  type: "token";
  text: string;
  id: number;
  source: TokenSource;
  score: number;
  /** Only on cloud tokens: what the edge model would have said here. */
  edge_candidate?: string;
  /** Only on cloud tokens: latency of the request that produced it. */
  request_ms?: number;
};
export type CloudRequestEvent = {
  type: "cloud_request";
  sent: string;
  ok: boolean;
  ms: number;
  prompt_tokens: number;
  completion_tokens: number;
  cost_usd: number;
  /** Asked ahead from the edge's draft and not used (billed all the same); `ok` then only says whether its answer came back before the reply ended. Absent: used (or not asked ahead). */
  unused?: boolean;
};
/** Messages `from`..`to` (exclusive) of the history are out of both models' view for this reply. */
export type LeftOutEvent = { type: "left_out"; from: number; to: number };
export type NoticeEvent = { type: "notice"; kind: NoticeKind; message: string };
export type FinishedEvent = { type: "finished"; reason: FinishReason; usage: Usage; timings: Timings };

export type Event = LeftOutEvent | StartedEvent | TokenEvent | CloudRequestEvent | NoticeEvent | FinishedEvent;

/** Every `type` of the event union; the contract test compares it with docs/ipc.md. */
export const EVENT_TYPES = ["left_out", "started", "token", "cloud_request", "notice", "finished"] as const;
// These fail to compile if a list above and its union type ever disagree.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : never) : never;
const listsMatchTypes: [
  Same<(typeof EVENT_TYPES)[number], Event["type"]>,
  Same<(typeof ERROR_KINDS)[number], ErrorKind>,
  Same<(typeof NOTICE_KINDS)[number], NoticeKind>,
  Same<(typeof FINISH_REASONS)[number], FinishReason>,
] = [true, true, true, true];
void listsMatchTypes;

// ---- Conversations -----------------------------------------------------------------------

export type Role = "user" | "assistant";
/** edge: nothing leaves the machine; cloud: every token from the cloud. */
export type ReplyMode = "routed" | "edge" | "cloud";
export type Message = { role: Role; content: string; mode?: ReplyMode; events?: Event[] };
/** What happens once a conversation outgrows the context window. */
export type ContextPolicy = "rolling" | "drop_middle" | "stop";
/** Every policy, in the order the backend offers them (`ContextPolicy::ALL`). */
export const CONTEXT_POLICIES: readonly ContextPolicy[] = ["rolling", "drop_middle", "stop"];
/** How a conversation's replies are written: its own, or else Settings' `chat`. */
export type ChatSettings = {
  system_prompt: string;
  temperature: number;
  top_p: number;
  max_tokens: number;
  context_policy: ContextPolicy;
};
export type Conversation = {
  id: string;
  title: string;
  created_ms: number;
  updated_ms: number;
  local_only: boolean;
  /** Its own settings, once the user set them; null: it follows Settings' `chat`. */
  settings: ChatSettings | null;
  messages: Message[];
};
export type ConversationSummary = {
  id: string;
  title: string;
  updated_ms: number;
  local_only: boolean;
  preview: string;
};
export type ExportFormat = "markdown" | "json";

// ---- Budget, spend, status ---------------------------------------------------------------

export type Prices = {
  input_per_mtok: number;
  output_per_mtok: number;
  /** Prompt tokens the cloud read from its prompt cache; absent: the input price. */
  cached_input_per_mtok?: number | null;
};
export type CloudBudget = {
  enabled: boolean;
  /** Fraction of a reply's tokens the cloud may supply, in [0, 1]. */
  max_share: number;
  max_cloud_tokens: number | null;
  daily_spend_cap_usd: number | null;
  /** Round trip (ms) past which replies ask the cloud only for their most uncertain tokens; absent: no limit. */
  max_wait_ms?: number | null;
  prices: Prices;
};
export type Meter = {
  spent_today_usd: number;
  cap_usd: number | null;
  today_edge_tokens: number;
  today_cloud_tokens: number;
};
export type CloudMode = "completions" | "chat";
export type CloudInfo = {
  url: string | null;
  label: string;
  model: string | null;
  mode: CloudMode;
  stand_in: boolean;
};
export type KeyStatus = {
  source: "keyring" | "environment" | "none";
  masked: string | null;
  /** The origin a keyring key is saved for: the only one it is ever sent to. */
  origin: string | null;
  /** Why the keyring could not be read, or why the key is not sent (plain http). */
  keyring_problem: string | null;
};
export type EngineState = "loading" | "ready" | "failed";
export type AppStatus = {
  edge_model: string;
  router: string;
  cloud: CloudInfo;
  budget: CloudBudget;
  meter: Meter;
  key: KeyStatus;
  notices: string[];
  engine: EngineState;
  engine_error: AppError | null;
  /** Why the settings file was not used and where it was kept; the defaults are in force. */
  settings_problem: string | null;
};

// ---- Settings ----------------------------------------------------------------------------

export type RouterKind =
  | "edge-only"
  | "cloud-only"
  | "entropy"
  | "margin"
  | "blend"
  | "lead-entropy"
  | "mlp"
  | "first-token"
  | "random";
/** Every router the backend accepts, in its order (`RouterKind::ALL`). */
export const ROUTER_KINDS: readonly RouterKind[] = [
  "edge-only",
  "cloud-only",
  "entropy",
  "margin",
  "blend",
  "lead-entropy",
  "mlp",
  "first-token",
  "random",
];
/** `url` "" means the local stand-in, "none" means no cloud at all. */
export type CloudSettings = { url: string; model: string | null; mode: CloudMode };
export type Settings = {
  edge: string;
  threads: number | null;
  cloud: CloudSettings;
  /** While a request is away, send the one the edge's draft would make next (faster over a network; an unused answer is still billed). */
  ask_ahead: boolean;
  router: { kind: RouterKind };
  /** What chats without settings of their own are answered with. */
  chat: ChatSettings;
};
export type CloudPreset = { name: string; url: string; mode: CloudMode; needs_key: boolean };
export type TestResult = {
  ok: boolean;
  /** Why it failed, in the same words as every other error; null when it worked. */
  kind: ErrorKind | null;
  message: string;
  models: string[];
};
export type ModelStatus = { name: string; role: string; bytes: number; pulled: boolean };
/** `progress` with done == total means the download is complete and its sha256 is being checked. */
export type PullEvent =
  | { type: "progress"; done: number; total: number }
  | { type: "done" }
  | { type: "failed"; error: AppError };
