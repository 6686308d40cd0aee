/**
 * The only module that talks to the backend. Each function is one command of docs/ipc.md;
 * every rejection is re-thrown as a `CommandError` with a coded kind, and channel messages
 * are checked by `parseEvent` before anyone sees them.
 */
import { Channel, invoke } from "@tauri-apps/api/core";
import { CommandError, toUiError } from "./errors";
import { parseEvent } from "./events";
import type {
  AppStatus,
  ChatSettings,
  CloudBudget,
  CloudPreset,
  CloudSettings,
  Conversation,
  ConversationSummary,
  Event,
  ExportFormat,
  KeyStatus,
  Meter,
  ModelStatus,
  PullEvent,
  ReplyMode,
  Settings,
  TestResult,
} from "./types";

/** Every command name the UI uses; the contract test compares it with docs/ipc.md. */
export const COMMANDS = [
  "conversations_list",
  "conversation_create",
  "conversation_get",
  "conversation_rename",
  "conversation_delete",
  "conversation_set_local_only",
  "conversation_set_settings",
  "conversation_export_save",
  "reply_send",
  "reply_regenerate",
  "reply_stop",
  "compare_run",
  "app_status",
  "budget_set",
  "meter",
  "settings_get",
  "settings_set",
  "cloud_presets",
  "cloud_test",
  "key_status",
  "key_set",
  "key_clear",
  "models_list",
  "model_pull",
  "model_pick_file",
  "evaluation_latest",
] as const;
export type Command = (typeof COMMANDS)[number];

async function call<T>(command: Command, args?: Record<string, unknown>): Promise<T> {
  try {
    return await invoke<T>(command, args);
  } catch (raw) {
    throw new CommandError(command, toUiError(raw));
  }
}

/** A channel that hands on only well-formed events. */
function eventChannel(onEvent: (event: Event) => void): Channel<unknown> {
  return new Channel<unknown>((raw) => {
    const event = parseEvent(raw);
    if (event) onEvent(event);
  });
}

// ---- Conversations ----
export const conversationsList = (query?: string) =>
  call<ConversationSummary[]>("conversations_list", query ? { query } : {});
export const conversationCreate = () => call<Conversation>("conversation_create");
export const conversationGet = (id: string) => call<Conversation>("conversation_get", { id });
export const conversationRename = (id: string, title: string) =>
  call<Conversation>("conversation_rename", { id, title });
export const conversationDelete = (id: string) => call<null>("conversation_delete", { id });
export const conversationSetSettings = (id: string, settings: ChatSettings) =>
  call<Conversation>("conversation_set_settings", { id, settings });
export const conversationSetLocalOnly = (id: string, localOnly: boolean) =>
  call<Conversation>("conversation_set_local_only", { id, localOnly });
/** Asks where to save (the native dialog, opened by the backend) and writes the file there: its path, or null if cancelled. */
export const conversationExportSave = (id: string, format: ExportFormat) =>
  call<string | null>("conversation_export_save", { id, format });

// ---- Replies: the promise settles when the reply is queued, with the chat as saved with the
// message (the first one titles it); events follow and end with `finished` ----
export const replySend = (id: string, text: string, onEvent: (e: Event) => void) =>
  call<ConversationSummary>("reply_send", { id, text, onEvent: eventChannel(onEvent) });
export const replyRegenerate = (id: string, onEvent: (e: Event) => void) =>
  call<ConversationSummary>("reply_regenerate", { id, onEvent: eventChannel(onEvent) });
export const replyStop = () => call<null>("reply_stop");
export const compareRun = (text: string, mode: ReplyMode, onEvent: (e: Event) => void) =>
  call<null>("compare_run", { text, mode, onEvent: eventChannel(onEvent) });

// ---- Budget, spend, status ----
export const appStatus = () => call<AppStatus>("app_status");
export const budgetSet = (budget: CloudBudget) => call<CloudBudget>("budget_set", { budget });
export const meter = () => call<Meter>("meter");

// ---- Settings ----
export const settingsGet = () => call<Settings>("settings_get");
export const settingsSet = (settings: Settings) => call<Settings>("settings_set", { settings });
export const cloudPresets = () => call<CloudPreset[]>("cloud_presets");
/** Tests an endpoint with `key` when one is typed, else with the key saved for its origin. */
export const cloudTest = (cloud: CloudSettings, key: string | null) => call<TestResult>("cloud_test", { cloud, key });
/** Keys are saved for, and only sent to, the origin of the cloud URL they are set with. */
export const keyStatus = (url: string) => call<KeyStatus>("key_status", { url });
export const keySet = (url: string, key: string) => call<KeyStatus>("key_set", { url, key });
export const keyClear = (url: string) => call<KeyStatus>("key_clear", { url });
export const modelsList = () => call<ModelStatus[]>("models_list");
/** A GGUF picked in the native open dialog and checked by the backend: its path, or null if cancelled. */
export const modelPickFile = () => call<string | null>("model_pick_file");
export const modelPull = (name: string, onProgress: (e: PullEvent) => void) =>
  call<null>("model_pull", { name, onProgress: new Channel<PullEvent>(onProgress) });
/** The SVG text of the latest `tandem eval` chart (a file from disk: show it only as an image), or null. */
export const evaluationLatest = () => call<string | null>("evaluation_latest");
