/**
 * Wires the views to the backend: which chat is open, whether a reply is streaming, the
 * engine's state and the budget. Views never call the backend themselves; they ask here.
 */
import * as ipc from "./ipc/commands";
import { toUiError } from "./ipc/errors";
import type { AppStatus, CloudBudget, Conversation, ConversationSummary, Event, ExportFormat } from "./ipc/types";
import { BudgetControls } from "./budget/controls";
import { ChatHeader } from "./chat/header";
import { ChatSettingsDialog } from "./chat/settings";
import { Composer } from "./chat/composer";
import { ConversationView } from "./chat/conversation";
import { CompareDialog } from "./compare/dialog";
import { ReplyView } from "./reply/view";
import { installTokenTooltip } from "./reply/tooltip";
import { SettingsDialog } from "./settings/dialog";
import { downloadOffer } from "./settings/first-start";
import { Sidebar } from "./sidebar/sidebar";
import { h, replace } from "./shell/dom";
import { attempt, installToasts, showError, showInfo } from "./shell/toast";
import { Topbar } from "./shell/topbar";

export function startApp(root: HTMLElement): void {
  new App(root);
}

class App {
  private status: AppStatus | null = null;
  private budget: CloudBudget | null = null;
  private current: Conversation | null = null;
  private streaming: ReplyView | null = null;
  /** The chat the streaming reply belongs to. */
  private streamingFor: string | null = null;
  private compareRunning = false;
  /** A message is being sent (its chat may still be being created): a second one waits. */
  private sending = false;
  private statusTimer = 0;
  private readonly shownNotices = new Set<string>();
  /** On a first start without models, the banner's offer to download them (kept while it runs). */
  private downloadOffer: HTMLElement | null = null;
  /** The edge model the offer is for. */
  private offerFor: string | null = null;

  private readonly sidebar: Sidebar;
  private readonly topbar: Topbar;
  private readonly engineBanner = h("div", { className: "engine-banner", id: "engine-banner", hidden: true });
  private readonly chatHeader: ChatHeader;
  private readonly conversation: ConversationView;
  private readonly budgetControls: BudgetControls;
  private readonly composer: Composer;
  private readonly settings: SettingsDialog;
  private readonly compare: CompareDialog;
  private readonly chatSettings = new ChatSettingsDialog();

  constructor(root: HTMLElement) {
    this.sidebar = new Sidebar({
      open: (id) => void this.open(id),
      create: () => void this.createChat(),
      rename: (id, title) => void this.rename(id, title),
      remove: (id) => void this.remove(id),
      search: () => void this.refreshList(),
    });
    this.topbar = new Topbar({ compare: () => this.compare.open(), settings: () => void this.settings.open() });
    this.chatHeader = new ChatHeader({
      setLocalOnly: (on) => void this.setLocalOnly(on),
      openSettings: () => void this.openChatSettings(),
      export: (f) => void this.export(f),
    });
    this.conversation = new ConversationView({ regenerate: () => void this.regenerate(), copy: (t) => void this.copy(t) });
    this.budgetControls = new BudgetControls((b) => void this.setBudget(b));
    this.composer = new Composer({ send: (t) => void this.send(t), stop: () => void this.stop() }, this.budgetControls.element);
    this.settings = new SettingsDialog({ status: () => this.status, saved: (b) => void this.afterSettings(b) });
    this.compare = new CompareDialog((running) => {
      this.compareRunning = running;
      this.renderComposer();
    });

    root.replaceChildren(
      h(
        "div",
        { className: "app" },
        this.sidebar.element,
        h(
          "main",
          { className: "main" },
          this.topbar.element,
          this.engineBanner,
          h("section", { className: "chat" }, this.chatHeader.element, this.conversation.element, this.composer.element),
        ),
      ),
    );
    installToasts(document.body);
    installTokenTooltip(document);
    document.addEventListener("keydown", (e) => {
      // Esc stops a streaming reply, unless it is closing a dialog.
      if (e.key === "Escape" && this.streaming && !document.querySelector("dialog[open]")) {
        e.preventDefault();
        void this.stop();
      }
    });
    document.addEventListener("click", (e) => {
      // Links in replies must not navigate the app's only window away.
      const link = e.target instanceof Element ? e.target.closest(".reply-body a") : null;
      if (!link) return;
      e.preventDefault();
      const href = link.getAttribute("href");
      if (href && /^https?:/i.test(href)) void this.copy(href, `Link copied: ${href}`);
    });

    this.conversation.show(null);
    this.renderComposer();
    void this.refreshStatus();
    void this.refreshList();
    this.composer.focus();
  }

  // ---- status and budget ----

  private async refreshStatus(): Promise<void> {
    clearTimeout(this.statusTimer);
    const status = await attempt(ipc.appStatus, "status");
    if (!status) {
      // One failed call must not end the polling: until the engine is known to be ready or
      // failed, the composer waits on the next answer.
      if (!this.status || this.status.engine === "loading") this.askStatusAgainIn(2000);
      return;
    }
    this.status = status;
    this.budget = status.budget;
    this.topbar.showStatus(status);
    this.budgetControls.set(status.budget);
    const problem = status.settings_problem;
    if (problem && !this.shownNotices.has(problem)) {
      this.shownNotices.add(problem);
      showError({ kind: "invalid_input", message: problem }, "settings");
    }
    for (const notice of status.notices) {
      if (this.shownNotices.has(notice)) continue;
      this.shownNotices.add(notice);
      showInfo(notice, "notice");
    }
    // Offer the download while the edge model is missing, for the model the settings name.
    const missing = status.engine === "failed" && status.engine_error?.kind === "model_missing";
    if (!missing || this.offerFor !== status.edge_model) {
      this.downloadOffer = null;
      this.offerFor = null;
    }
    if (missing && !this.downloadOffer) {
      const models = await attempt(ipc.modelsList, "models");
      this.downloadOffer = models ? downloadOffer(status, models, () => this.afterDownload()) : null;
      this.offerFor = status.edge_model;
    }
    this.renderEngine();
    // While the engine loads, ask again until it is ready or has failed.
    if (status.engine === "loading") this.askStatusAgainIn(1000);
  }

  private askStatusAgainIn(ms: number): void {
    this.statusTimer = window.setTimeout(() => void this.refreshStatus(), ms);
  }

  private renderEngine(): void {
    const s = this.status;
    if (!s || s.engine === "ready") {
      this.engineBanner.hidden = true;
    } else if (s.engine === "loading") {
      this.engineBanner.hidden = false;
      this.engineBanner.className = "engine-banner loading";
      this.engineBanner.replaceChildren(h("span", { className: "spinner" }), `Loading the edge model ${s.edge_model}…`);
    } else if (this.downloadOffer) {
      this.engineBanner.hidden = false;
      this.engineBanner.className = "engine-banner first-run";
      this.engineBanner.replaceChildren(this.downloadOffer);
    } else {
      const err = s.engine_error;
      const open = h("button", { type: "button", className: "small", textContent: "Open settings" });
      open.addEventListener("click", () => void this.settings.open());
      this.engineBanner.hidden = false;
      this.engineBanner.className = "engine-banner failed";
      replace(
        this.engineBanner,
        h("b", {}, "The engine failed to start. "),
        err ? h("code", {}, err.kind) : null,
        err ? ` ${err.message} ` : " ",
        open,
      );
    }
    this.renderComposer();
  }

  private renderComposer(): void {
    const engine = this.status?.engine;
    const reason =
      engine === "ready"
        ? ""
        : engine === "failed"
          ? "The engine failed to start; fix it in Settings."
          : "Waiting for the edge model to load…";
    this.composer.setEnabled(engine === "ready" && !this.compareRunning, this.compareRunning ? "A comparison is running." : reason);
    this.composer.setStreaming(this.streaming !== null);
    this.budgetControls.setLocked(this.current?.local_only ?? false);
  }

  /** The models are on disk: the backend is restarting the engine. */
  private afterDownload(): void {
    this.downloadOffer = null;
    void this.refreshStatus();
  }

  private async setBudget(budget: CloudBudget): Promise<void> {
    const saved = await attempt(() => ipc.budgetSet(budget), "budget");
    if (saved) this.budget = saved;
    if (this.budget) this.budgetControls.set(this.budget);
  }

  private async refreshMeter(): Promise<void> {
    const meter = await attempt(ipc.meter, "meter");
    if (meter) this.topbar.showMeter(meter);
  }

  private async afterSettings(budget: CloudBudget | null): Promise<void> {
    if (budget) this.budget = budget;
    showInfo("Settings saved; the engine restarts with them.", "settings");
    await this.refreshStatus();
  }

  // ---- chats ----

  private async refreshList(): Promise<void> {
    const list = await attempt(() => ipc.conversationsList(this.sidebar.query || undefined), "chats");
    if (list) this.sidebar.setItems(list, this.current?.id ?? null);
  }

  private show(conversation: Conversation | null): void {
    this.current = conversation;
    this.chatHeader.show(conversation);
    this.conversation.show(conversation);
    // Coming back to a chat whose reply is still streaming: it is not saved yet, show it live.
    if (this.streaming && conversation && conversation.id === this.streamingFor && conversation.messages.at(-1)?.role === "user") {
      this.conversation.appendReply(this.streaming);
    }
    this.renderComposer();
  }

  private async open(id: string): Promise<void> {
    if (id === this.current?.id && !this.streaming) return;
    const conversation = await attempt(() => ipc.conversationGet(id), "open chat");
    if (!conversation) return;
    this.show(conversation);
    await this.refreshList();
    this.composer.focus();
  }

  /** "New chat" shows an empty draft; the chat itself is created by its first message. */
  private async createChat(): Promise<void> {
    this.show(null);
    await this.refreshList();
    this.composer.focus();
  }

  private async rename(id: string, title: string): Promise<void> {
    const renamed = await attempt(() => ipc.conversationRename(id, title), "rename");
    if (renamed && renamed.id === this.current?.id) {
      this.current = renamed;
      this.chatHeader.show(renamed);
    }
    await this.refreshList();
  }

  private async remove(id: string): Promise<void> {
    const ok = await attempt(() => ipc.conversationDelete(id), "delete");
    if (ok === undefined) return;
    if (id === this.current?.id) this.show(null);
    await this.refreshList();
  }

  private async setLocalOnly(on: boolean): Promise<void> {
    if (!this.current) return;
    const id = this.current.id;
    const updated = await attempt(() => ipc.conversationSetLocalOnly(id, on), "local only");
    if (!updated || this.current?.id !== id) return;
    this.current = { ...this.current, local_only: updated.local_only, title: updated.title };
    this.chatHeader.show(this.current);
    this.renderComposer();
    await this.refreshList();
  }

  /**
   * The open chat's settings (Settings' own where it has none). On a new chat not yet sent,
   * saving creates it, so what the backend refuses is refused before any message.
   */
  private async openChatSettings(): Promise<void> {
    const opened = this.current;
    const current = opened?.settings ?? (await attempt(ipc.settingsGet, "settings"))?.chat;
    if (!current || this.current !== opened) return;
    this.chatSettings.open(current, async (settings) => {
      let c = this.current;
      const created = !c;
      if (!c) {
        c = (await attempt(ipc.conversationCreate, "new chat")) ?? null;
        if (!c) return false;
      }
      const id = c.id;
      const saved = await attempt(() => ipc.conversationSetSettings(id, settings), "chat settings");
      if (!saved) {
        if (created) await attempt(() => ipc.conversationDelete(id), "new chat");
        return false;
      }
      if (created && !this.current) this.show(saved);
      else if (this.current?.id === saved.id) this.current = { ...this.current, settings: saved.settings };
      await this.refreshList();
      showInfo("Chat settings saved; the next reply uses them.", "chat settings");
      return true;
    });
  }

  private async export(format: ExportFormat): Promise<void> {
    const c = this.current;
    if (!c) return;
    const path = await attempt(() => ipc.conversationExportSave(c.id, format), "export");
    if (path) showInfo(`Saved to ${path}`, "export");
  }

  // ---- replies ----

  private async send(text: string): Promise<void> {
    if (this.streaming || this.sending) return;
    this.sending = true;
    try {
      if (!this.current) {
        const created = await attempt(ipc.conversationCreate, "new chat");
        // The user may have opened another chat meanwhile: this message belongs to none.
        if (!created || this.current) return;
        this.current = created;
        this.chatHeader.show(created);
      }
      const id = this.current.id;
      this.current.messages.push({ role: "user", content: text });
      this.conversation.appendUser(text);
      await this.stream(id, (onEvent) => ipc.replySend(id, text, onEvent));
    } finally {
      this.sending = false;
    }
  }

  private async regenerate(): Promise<void> {
    if (!this.current || this.streaming) return;
    const id = this.current.id;
    if (this.current.messages.at(-1)?.role === "assistant") this.current.messages.pop();
    this.conversation.removeLastReply();
    await this.stream(id, (onEvent) => ipc.replyRegenerate(id, onEvent));
  }

  private async stream(id: string, start: (onEvent: (e: Event) => void) => Promise<ConversationSummary>): Promise<void> {
    const reply = new ReplyView();
    // The view this reply has is told by its own `left_out` (none: the whole chat).
    this.conversation.markLeftOut(0, 0);
    this.streaming = reply;
    this.streamingFor = id;
    this.conversation.appendReply(reply);
    this.conversation.scrollToEnd(true);
    this.renderComposer();
    try {
      const asked = await start((e) => {
        // The model's view of a long chat moved: show where it begins now.
        if (e.type === "left_out" && this.current?.id === id) this.conversation.markLeftOut(e.from, e.to);
        reply.push(e);
      });
      // The backend says what the chat is called now (the first message names it).
      if (this.current?.id === id) {
        this.current = { ...this.current, title: asked.title };
        this.chatHeader.show(this.current);
      }
    } catch (e) {
      const error = toUiError(e);
      reply.fail(error);
      showError(error, "reply");
    }
    // Only `finished` ends a reply; events keep coming after the command resolved.
    const finished = await reply.done;
    this.streaming = null;
    this.streamingFor = null;
    this.renderComposer();
    if (finished && this.current?.id === id) {
      this.current.messages.push({ role: "assistant", content: reply.text });
      this.chatHeader.show(this.current);
    }
    await Promise.all([this.refreshList(), this.refreshMeter()]);
  }

  private async stop(): Promise<void> {
    await attempt(ipc.replyStop, "stop");
  }

  private async copy(text: string, done = "Copied to the clipboard"): Promise<void> {
    try {
      await navigator.clipboard.writeText(text);
      showInfo(done, "copy");
    } catch (e) {
      showError({ kind: "unexpected", message: `the clipboard refused: ${toUiError(e).message}` }, "copy");
    }
  }
}
