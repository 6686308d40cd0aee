/**
 * Where problems are told: every rejected command ends up here as "kind: message" in a
 * banner the user dismisses. Information (backend notices) fades by itself.
 */
import { toUiError, type UiError } from "../ipc/errors";
import { h } from "./dom";

let host: HTMLElement | null = null;

export function installToasts(parent: HTMLElement): void {
  host = h("div", { className: "toasts", attrs: { "aria-live": "assertive" } });
  parent.appendChild(host);
  // Last line of defence: nothing may fail silently.
  window.addEventListener("unhandledrejection", (e) => showError(toUiError(e.reason)));
}

export function showError(error: UiError, context?: string): void {
  const toast = h(
    "div",
    { className: "toast toast-error", attrs: { role: "alert" } },
    h("code", { className: "toast-kind" }, error.kind),
    h("span", { className: "toast-text" }, context ? `${context}: ${error.message}` : error.message),
    dismissButton(),
  );
  target().appendChild(toast);
}

export function showInfo(text: string, kind = "info"): void {
  const toast = h(
    "div",
    { className: "toast toast-info", attrs: { role: "status" } },
    h("code", { className: "toast-kind" }, kind),
    h("span", { className: "toast-text" }, text),
    dismissButton(),
  );
  target().appendChild(toast);
  setTimeout(() => toast.remove(), 8000);
}

/** Runs a command and reports its failure; returns undefined when it failed. */
export async function attempt<T>(work: () => Promise<T>, context?: string): Promise<T | undefined> {
  try {
    return await work();
  } catch (e) {
    showError(toUiError(e), context);
    return undefined;
  }
}

/** A modal dialog covers the page, so toasts raised while one is open go inside it. */
function target(): HTMLElement {
  const dialog = document.querySelector("dialog[open]");
  if (!dialog) return host ?? document.body;
  let inner = dialog.querySelector<HTMLElement>(":scope > .toasts");
  if (!inner) {
    inner = h("div", { className: "toasts", attrs: { "aria-live": "assertive" } });
    dialog.appendChild(inner);
  }
  return inner;
}

function dismissButton(): HTMLButtonElement {
  const button = h("button", { className: "toast-close", type: "button", title: "Dismiss", textContent: "×" });
  button.setAttribute("aria-label", "Dismiss");
  button.addEventListener("click", () => button.parentElement?.remove());
  return button;
}
