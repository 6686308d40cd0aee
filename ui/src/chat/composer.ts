/**
 * The message box: Enter sends, Shift+Enter is a newline, and Send becomes Stop while a
 * reply streams. The budget controls live in its bar so the cloud can be turned off mid-reply.
 */
import { h } from "../shell/dom";

export type ComposerActions = { send(text: string): void; stop(): void };

export class Composer {
  readonly element: HTMLElement;
  private readonly input: HTMLTextAreaElement;
  private readonly button: HTMLButtonElement;
  private readonly hint: HTMLElement;
  private streaming = false;
  private enabled = true;

  constructor(private readonly actions: ComposerActions, budgetControls: HTMLElement) {
    this.input = h("textarea", {
      className: "composer-input",
      rows: 1,
      placeholder: "Message Tandem…  (Enter to send, Shift+Enter for a new line)",
    });
    this.input.setAttribute("aria-label", "Message");
    this.button = h("button", { className: "send", type: "button", textContent: "Send" });
    this.hint = h("div", { className: "composer-hint", hidden: true });
    this.element = h(
      "form",
      { className: "composer" },
      this.hint,
      h("div", { className: "composer-box" }, this.input, this.button),
      h("div", { className: "composer-bar" }, budgetControls),
    );
    this.element.addEventListener("submit", (e) => e.preventDefault());
    this.input.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        this.submit();
      }
    });
    this.input.addEventListener("input", () => this.autosize());
    this.button.addEventListener("click", () => (this.streaming ? this.actions.stop() : this.submit()));
  }

  setStreaming(streaming: boolean): void {
    this.streaming = streaming;
    this.button.textContent = streaming ? "Stop" : "Send";
    this.button.classList.toggle("stop", streaming);
    this.button.title = streaming ? "Stop the reply (Esc)" : "Send (Enter)";
    this.render();
  }

  /** Disabled while the engine is not ready, with the reason shown above the box. */
  setEnabled(enabled: boolean, reason = ""): void {
    this.enabled = enabled;
    this.hint.textContent = reason;
    this.hint.hidden = enabled || !reason;
    this.render();
  }

  focus(): void {
    this.input.focus();
  }

  private render(): void {
    this.input.disabled = !this.enabled;
    this.button.disabled = !this.enabled && !this.streaming;
  }

  private submit(): void {
    const text = this.input.value.trim();
    if (!text || this.streaming || !this.enabled) return;
    this.input.value = "";
    this.autosize();
    this.actions.send(text);
  }

  private autosize(): void {
    this.input.style.height = "auto";
    this.input.style.height = `${Math.min(this.input.scrollHeight, 240)}px`;
  }
}
