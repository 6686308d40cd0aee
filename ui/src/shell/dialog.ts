/** A modal dialog with a title and a close button; Esc closes it (the browser's own `cancel`). */
import { h, type Child } from "./dom";

export function modal(id: string, title: string, ...body: Child[]): HTMLDialogElement {
  const close = h("button", { className: "icon dialog-close", type: "button", title: "Close", textContent: "×" });
  close.setAttribute("aria-label", "Close");
  const dialog = h(
    "dialog",
    { className: "modal", id },
    h("header", { className: "modal-head" }, h("h2", {}, title), close),
    h("div", { className: "modal-body" }, ...body),
  );
  dialog.setAttribute("aria-label", title);
  close.addEventListener("click", () => dialog.close());
  document.body.appendChild(dialog);
  return dialog;
}
