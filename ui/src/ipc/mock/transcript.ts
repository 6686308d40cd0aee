/**
 * What the real backend answered: `fixtures/transcript.json`, recorded by
 * src-tauri/tests/ipc_fixtures.rs from the real commands (and, for titles, from the rule
 * `reply_send` applies). The mock backend answers from here wherever an answer carries a
 * backend rule — defaults, presets, titles, tidied input, refusals and their wording — so a
 * rule changed in Rust is what the browser tests see, with no copy of it in TypeScript.
 */
import transcriptJson from "../fixtures/transcript.json?raw";
import type { AppError } from "../types";

/** One call as the UI made it (conversation ids written `{id}`, channels left out) and its answer. */
export type Exchange = { cmd: string; args: Record<string, unknown> } & ({ ok: unknown } | { error: AppError });
/** A chat's title before and after a message was sent in it. */
type Retitle = { before: string; message: string; after: string };

const TRANSCRIPT = JSON.parse(transcriptJson) as { exchanges: Exchange[]; titles: Retitle[] };

/** Deep equality of JSON values, whatever the order of object keys. */
function same(a: unknown, b: unknown): boolean {
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return a === b;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  return ka.length === kb.length && ka.every((k) => same((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
}

/** `args` as the transcript writes them: ids as `{id}`, channels left out. */
function recordedForm(args: Record<string, unknown>): Record<string, unknown> {
  const json = JSON.parse(JSON.stringify(args)) as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(json)) {
    if (typeof value === "string" && value.startsWith("__CHANNEL__:")) continue;
    out[key] = key === "id" ? "{id}" : value;
  }
  return out;
}

/** The recorded exchange of `cmd` with these arguments, if the backend was asked exactly that. */
export function recorded(cmd: string, args: Record<string, unknown>): Exchange | undefined {
  const wanted = recordedForm(args);
  return TRANSCRIPT.exchanges.find((x) => x.cmd === cmd && same(x.args, wanted));
}

/** What the backend answered the first time `cmd` succeeded in the recording. */
export function firstAnswer<T>(cmd: string): T {
  const found = TRANSCRIPT.exchanges.find((x) => x.cmd === cmd && "ok" in x);
  if (!found || !("ok" in found)) throw new Error(`transcript.json has no successful ${cmd}`);
  return structuredClone(found.ok) as T;
}

/** The title the backend gives a chat called `before` once `message` is sent in it. */
export function titleAfter(before: string, message: string): string {
  const found = TRANSCRIPT.titles.find((t) => t.before === before && t.message === message);
  if (!found) {
    throw new Error(
      `no recorded title for "${message}" in a chat called "${before}": add the message to CHATS in ` +
        "src-tauri/tests/ipc_fixtures.rs and rerun it with TANDEM_UPDATE_FIXTURES=1",
    );
  }
  return found.after;
}
