/**
 * Checks what arrives on a reply channel before the UI trusts it: the backend and the UI are
 * built separately, so an unknown or malformed event is dropped rather than crashing a render.
 */
import { EVENT_TYPES, type Event } from "./types";

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null;
}
const isNum = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v);
const isStr = (v: unknown): v is string => typeof v === "string";

/** Returns the event when it has the shape docs/ipc.md promises, else null. */
export function parseEvent(raw: unknown): Event | null {
  if (!isRecord(raw) || !isStr(raw.type)) return null;
  if (!(EVENT_TYPES as readonly string[]).includes(raw.type)) return null;
  switch (raw.type) {
    case "left_out":
      return isNum(raw.from) && isNum(raw.to) && raw.from <= raw.to ? (raw as Event) : null;
    case "started":
      return isStr(raw.edge_model) && isStr(raw.router) ? (raw as Event) : null;
    case "token":
      return isStr(raw.text) && (raw.source === "edge" || raw.source === "cloud") && isNum(raw.score)
        ? (raw as Event)
        : null;
    case "cloud_request":
      return isStr(raw.sent) && typeof raw.ok === "boolean" && isNum(raw.ms) ? (raw as Event) : null;
    case "notice":
      return isStr(raw.kind) && isStr(raw.message) ? (raw as Event) : null;
    case "finished":
      return isStr(raw.reason) && isRecord(raw.usage) && isRecord(raw.timings) ? (raw as Event) : null;
  }
  return null;
}

/** Parses a recorded stream: one JSON event per line, blank lines ignored. */
export function parseEventLines(jsonl: string): Event[] {
  const events: Event[] = [];
  for (const line of jsonl.split("\n")) {
    if (!line.trim()) continue;
    const event = parseEvent(JSON.parse(line));
    if (event) events.push(event);
  }
  return events;
}
