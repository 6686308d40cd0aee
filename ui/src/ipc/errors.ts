/**
 * Normalises whatever a rejected command carries into an `AppError`, so the rest of the UI
 * can always show "kind: message" and never "[object Object]".
 */
import type { AppError, ErrorKind } from "./types";

/** Kinds the backend may send, plus `unexpected` for rejections that are not coded (Tauri's own). */
export type UiErrorKind = ErrorKind | "unexpected";
export type UiError = { kind: UiErrorKind; message: string };

/** Thrown by every function in `commands.ts` when its command is rejected. */
export class CommandError extends Error {
  readonly kind: UiErrorKind;
  readonly command: string;
  constructor(command: string, error: UiError) {
    super(error.message);
    this.name = "CommandError";
    this.kind = error.kind;
    this.command = command;
  }
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null;
}

/** Turns any rejection value (coded error, string, Error, anything) into a `UiError`. */
export function toUiError(raw: unknown): UiError {
  if (raw instanceof CommandError) return { kind: raw.kind, message: raw.message };
  if (isRecord(raw) && typeof raw.kind === "string") {
    const message = typeof raw.message === "string" ? raw.message : JSON.stringify(raw.message ?? "");
    return { kind: raw.kind as UiErrorKind, message };
  }
  if (raw instanceof Error) return { kind: "unexpected", message: raw.message || raw.name };
  if (typeof raw === "string") return { kind: "unexpected", message: raw };
  if (raw === undefined || raw === null) return { kind: "unexpected", message: "no details" };
  try {
    return { kind: "unexpected", message: JSON.stringify(raw) };
  } catch {
    return { kind: "unexpected", message: String(raw) };
  }
}

/** One line for a person: "cloud_wrong_key: the server refused the key". */
export function describeError(error: UiError | AppError): string {
  return `${error.kind}: ${error.message}`;
}
