/** Above the messages: the chat's title, its local-only lock, its settings and its export buttons. */
import type { Conversation, ExportFormat } from "../ipc/types";
import { h, replace } from "../shell/dom";
import { icon } from "../shell/icons";

export type ChatHeaderActions = {
  setLocalOnly(on: boolean): void;
  openSettings(): void;
  export(format: ExportFormat): void;
};

export class ChatHeader {
  readonly element: HTMLElement;
  private readonly title: HTMLElement;
  private readonly lock: HTMLButtonElement;
  private readonly exports: HTMLElement;
  private localOnly = false;

  constructor(actions: ChatHeaderActions) {
    this.title = h("h1", { className: "chat-title" }, "New chat");
    this.lock = h("button", { className: "lock-toggle", type: "button", id: "local-only" });
    this.lock.addEventListener("click", () => actions.setLocalOnly(!this.localOnly));
    const settings = h("button", { className: "ghost small", type: "button", id: "chat-settings-open", textContent: "Chat settings" });
    settings.title = "System prompt, sampling, reply length and long conversations, for this chat";
    settings.addEventListener("click", () => actions.openSettings());
    const md = h("button", { className: "ghost small", type: "button", textContent: "Export .md" });
    md.addEventListener("click", () => actions.export("markdown"));
    const json = h("button", { className: "ghost small", type: "button", textContent: "Export .json" });
    json.addEventListener("click", () => actions.export("json"));
    this.exports = h("div", { className: "exports" }, md, json);
    this.element = h("div", { className: "chat-head" }, this.title, h("div", { className: "chat-head-actions" }, this.lock, settings, this.exports));
    this.show(null);
  }

  show(conversation: Conversation | null): void {
    this.title.textContent = conversation?.title ?? "New chat";
    this.localOnly = conversation?.local_only ?? false;
    this.lock.hidden = false;
    this.lock.disabled = !conversation;
    this.lock.setAttribute("aria-pressed", String(this.localOnly));
    this.lock.classList.toggle("on", this.localOnly);
    replace(this.lock, icon(this.localOnly ? "lock" : "unlock"), this.localOnly ? "Local only" : "Cloud allowed");
    this.lock.title = conversation
      ? this.localOnly
        ? "This chat never uses the cloud. Click to allow it."
        : "Click to keep this chat entirely on this machine."
      : "Send a first message to create the chat";
    this.exports.hidden = !conversation || conversation.messages.length === 0;
  }
}
