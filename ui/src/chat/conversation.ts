/**
 * The messages of the open chat. Saved assistant messages are rebuilt from their events, so
 * they look exactly as they did while streaming. The last reply carries Regenerate and Copy.
 * Once a long conversation outgrows the context window, a line marks where the model's view
 * begins and the messages it no longer sees are greyed (from the latest reply's `left_out`).
 */
import type { Conversation, LeftOutEvent } from "../ipc/types";
import { h } from "../shell/dom";
import { ReplyView } from "../reply/view";

export type ConversationActions = { regenerate(): void; copy(text: string): void };

export class ConversationView {
  readonly element: HTMLElement;
  private readonly list: HTMLElement;
  private readonly empty: HTMLElement;
  private replies: ReplyView[] = [];
  private marker: HTMLElement | null = null;

  constructor(private readonly actions: ConversationActions) {
    this.list = h("div", { className: "messages-inner" });
    this.empty = h(
      "div",
      { className: "empty-state" },
      h("div", { className: "empty-mark" }, "⌁"),
      h("h2", {}, "Ask anything"),
      h("p", {}, "A small model on this machine writes most of the reply; the cloud supplies the few tokens that matter. ",
        "Those are ", h("span", { className: "cloud-token sample" }, "highlighted"), "."),
    );
    this.element = h("div", { className: "messages", attrs: { role: "log" } }, this.empty, this.list);
    this.list.addEventListener("reply-rendered", () => this.scrollToEnd());
  }

  show(conversation: Conversation | null): void {
    this.list.replaceChildren();
    this.replies = [];
    this.marker = null;
    let view: LeftOutEvent | null = null;
    for (const m of conversation?.messages ?? []) {
      if (m.role === "user") this.appendUser(m.content);
      else {
        this.appendReply(ReplyView.fromSaved(m.events, m.content));
        view = m.events?.find((e): e is LeftOutEvent => e.type === "left_out") ?? null;
      }
    }
    if (view) this.markLeftOut(view.from, view.to);
    this.refresh();
    this.scrollToEnd(true);
  }

  appendUser(text: string): void {
    this.list.appendChild(h("article", { className: "message user" }, h("div", { className: "bubble" }, text)));
    this.refresh();
  }

  appendReply(reply: ReplyView): void {
    this.replies.push(reply);
    this.list.appendChild(reply.element);
    this.refresh();
    void reply.done.then(() => this.refresh());
  }

  /** Messages `from`..`to` are out of the model's view: grey them and mark where it begins. */
  markLeftOut(from: number, to: number): void {
    this.marker?.remove();
    const items = this.items();
    for (const [i, item] of items.entries()) item.classList.toggle("out-of-view", i >= from && i < to);
    const count = to - from;
    if (count <= 0 || !items[to]) return;
    const text =
      from === 0
        ? `${count} earlier message${count === 1 ? " is" : "s are"} out of the model's view`
        : `${count} message${count === 1 ? " is" : "s are"} out of the model's view (the first exchange stays in it)`;
    this.marker = h("div", { className: "left-out-marker", attrs: { role: "note" } }, text);
    this.list.insertBefore(this.marker, items[to]!);
  }

  lastReply(): ReplyView | null {
    return this.replies.at(-1) ?? null;
  }

  removeLastReply(): void {
    this.replies.pop()?.element.remove();
    this.refresh();
  }

  /** One element per message of the conversation, in order (a streaming reply included). */
  private items(): HTMLElement[] {
    return [...this.list.querySelectorAll<HTMLElement>(":scope > .message")];
  }

  /** Keeps the newest text in view while the user has not scrolled up. */
  scrollToEnd(force = false): void {
    const el = this.element;
    if (force || el.scrollHeight - el.scrollTop - el.clientHeight < 120) el.scrollTop = el.scrollHeight;
  }

  private refresh(): void {
    this.empty.hidden = this.list.childElementCount > 0;
    for (const old of this.list.querySelectorAll(".reply-actions")) old.remove();
    const last = this.items().at(-1);
    const reply = this.lastReply();
    if (!reply || last !== reply.element || reply.streaming) return;
    const copy = h("button", { className: "ghost small", type: "button", textContent: "Copy" });
    copy.addEventListener("click", () => this.actions.copy(reply.text));
    const regenerate = h("button", { className: "ghost small", type: "button", textContent: "Regenerate" });
    regenerate.addEventListener("click", () => this.actions.regenerate());
    reply.element.appendChild(h("div", { className: "reply-actions" }, copy, regenerate));
  }
}
