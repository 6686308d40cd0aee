/**
 * One assistant reply on screen. Events go in as they arrive; the markdown is re-rendered at
 * most once per animation frame; the footer and the privacy disclosure appear on `finished`,
 * which is the only thing that ends a reply (events may outlive the command's promise).
 */
import type { Event, FinishedEvent, NoticeEvent } from "../ipc/types";
import type { UiError } from "../ipc/errors";
import { h } from "../shell/dom";
import { renderFooter } from "./footer";
import { ReplyLog } from "./log";
import { renderMarkdown } from "./markdown";
import { renderPrivacy } from "./privacy";
import { overlayTokens } from "./provenance";
import { attachLog } from "./tooltip";

export class ReplyView {
  readonly element: HTMLElement;
  readonly log = new ReplyLog();
  /** Resolves with the `finished` event, or null when the reply failed before it. */
  readonly done: Promise<FinishedEvent | null>;
  private readonly body: HTMLElement;
  private readonly notices: HTMLElement;
  private readonly tail: HTMLElement;
  private frame = 0;
  private savedContent = "";
  private resolveDone!: (f: FinishedEvent | null) => void;

  constructor(label?: string) {
    this.body = h("div", { className: "reply-body md" });
    this.notices = h("div", { className: "reply-notices" });
    this.tail = h("div", { className: "reply-tail" });
    this.element = h(
      "article",
      { className: "message assistant reply streaming" },
      label ? h("div", { className: "reply-label" }, label) : null,
      this.notices,
      this.body,
      this.tail,
    );
    attachLog(this.body, this.log);
    this.done = new Promise((resolve) => (this.resolveDone = resolve));
  }

  /** A saved reply, rendered from its events exactly as it was streamed. */
  static fromSaved(events: readonly Event[] | undefined, content: string): ReplyView {
    const view = new ReplyView();
    if (events && events.length > 0) {
      for (const e of events) view.push(e);
      if (!view.log.finished) view.renderNow(); // saved mid-stream: show what there is
      view.element.classList.remove("streaming");
    } else {
      view.savedContent = content;
      view.body.replaceChildren(renderMarkdown(content));
      view.element.classList.remove("streaming");
    }
    return view;
  }

  /** The reply's raw markdown, as the model wrote it. */
  get text(): string {
    return this.log.text || this.savedContent;
  }

  get streaming(): boolean {
    return this.element.classList.contains("streaming");
  }

  push(event: Event): void {
    if (this.log.finished) return;
    this.log.push(event);
    if (event.type === "notice") this.notices.appendChild(renderNotice(event));
    if (event.type === "finished") this.finish(event);
    else this.schedule();
  }

  /** The command was rejected: no `finished` will come. */
  fail(error: UiError): void {
    if (this.log.finished || !this.streaming) return;
    this.notices.appendChild(h("div", { className: "notice notice-error" }, h("code", {}, error.kind), ` ${error.message}`));
    this.renderNow();
    this.element.classList.remove("streaming");
    this.element.classList.add("failed");
    this.resolveDone(null);
  }

  private schedule(): void {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.renderNow();
    });
  }

  private renderNow(): void {
    if (this.frame) {
      cancelAnimationFrame(this.frame);
      this.frame = 0;
    }
    const fragment = renderMarkdown(this.log.text);
    const scratch = h("div");
    scratch.appendChild(fragment);
    overlayTokens(scratch, this.log.tokens);
    this.body.replaceChildren(...scratch.childNodes);
    this.element.dispatchEvent(new CustomEvent("reply-rendered", { bubbles: true }));
  }

  private finish(finished: FinishedEvent): void {
    this.renderNow();
    this.element.classList.remove("streaming");
    this.tail.replaceChildren(renderFooter(finished), renderPrivacy(this.log));
    this.resolveDone(finished);
  }
}

export function renderNotice(notice: NoticeEvent): HTMLElement {
  return h("div", { className: `notice notice-${notice.kind}` }, h("code", {}, notice.kind), ` ${notice.message}`);
}
