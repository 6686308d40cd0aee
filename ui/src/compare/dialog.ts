/**
 * Compare: one prompt answered edge-only, routed and cloud-only, side by side. The three
 * runs go one after another (the engine answers one reply at a time); none is saved.
 */
import * as ipc from "../ipc/commands";
import { toUiError } from "../ipc/errors";
import type { ReplyMode } from "../ipc/types";
import { h } from "../shell/dom";
import { modal } from "../shell/dialog";
import { attempt } from "../shell/toast";
import { ReplyView } from "../reply/view";

const COLUMNS: { mode: ReplyMode; label: string }[] = [
  { mode: "edge", label: "Edge only" },
  { mode: "routed", label: "Routed" },
  { mode: "cloud", label: "Cloud only" },
];

export class CompareDialog {
  private readonly dialog: HTMLDialogElement;
  private readonly prompt = h("textarea", { id: "compare-prompt", rows: 2, placeholder: "One prompt, three ways" });
  private readonly run = h("button", { type: "button", className: "primary", id: "compare-run", textContent: "Compare" });
  private readonly columns: HTMLElement[];
  private running = false;

  constructor(private readonly busy: (running: boolean) => void) {
    this.columns = COLUMNS.map((c) => h("div", { className: "compare-col", dataset: { mode: c.mode } }, h("h3", {}, c.label)));
    this.run.addEventListener("click", () => void (this.running ? attempt(ipc.replyStop, "stop") : this.start()));
    this.prompt.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey) {
        e.preventDefault();
        if (!this.running) void this.start();
      }
    });
    this.dialog = modal(
      "compare",
      "Compare edge, routed and cloud",
      h("div", { className: "compare-input" }, this.prompt, this.run),
      h("div", { className: "compare-grid" }, ...this.columns),
    );
    this.dialog.classList.add("wide");
  }

  open(prefill = ""): void {
    if (prefill && !this.prompt.value) this.prompt.value = prefill;
    this.dialog.showModal();
    this.prompt.focus();
  }

  private async start(): Promise<void> {
    const text = this.prompt.value.trim();
    if (!text) return;
    this.setRunning(true);
    try {
      for (const [i, c] of COLUMNS.entries()) {
        const view = new ReplyView();
        this.columns[i]!.replaceChildren(h("h3", {}, c.label), view.element);
        try {
          await ipc.compareRun(text, c.mode, (e) => view.push(e));
        } catch (e) {
          view.fail(toUiError(e));
        }
        const finished = await view.done;
        if (!finished || finished.reason === "cancelled") break;
      }
    } finally {
      this.setRunning(false);
    }
  }

  private setRunning(running: boolean): void {
    this.running = running;
    this.run.textContent = running ? "Stop" : "Compare";
    this.run.classList.toggle("stop", running);
    this.busy(running);
  }
}
