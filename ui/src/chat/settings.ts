/**
 * A chat's own settings: its system prompt, how the local model samples, how long a reply may
 * be, and what happens once the conversation outgrows the context window. The same form edits
 * Settings' defaults, which every chat without settings of its own follows. What is saved is what the engine uses for the
 * chat's next reply; the backend checks the numbers and says what is out of range.
 */
import type { ChatSettings, ContextPolicy } from "../ipc/types";
import { CONTEXT_POLICIES } from "../ipc/types";
import { h } from "../shell/dom";
import { modal } from "../shell/dialog";

/** Each policy: its name and what the user will see. */
export const POLICY_TEXT: Record<ContextPolicy, { label: string; hint: string }> = {
  rolling: {
    label: "Keep the latest turns",
    hint: "The oldest turns leave the model's view (the system prompt stays); a line in the chat shows where its view begins.",
  },
  drop_middle: {
    label: "Keep the first exchange and the latest turns",
    hint: "The first question and answer stay in view; the turns after them leave it, oldest first.",
  },
  stop: {
    label: "Stop",
    hint: "Once the context window is full, replies end with “context full”: start a new chat to go on.",
  },
};

/** Ready-made sampling: greedy and repeatable, or varied. */
const PRESETS: { name: string; temperature: number; top_p: number }[] = [
  { name: "Precise", temperature: 0, top_p: 0.95 },
  { name: "Creative", temperature: 0.8, top_p: 0.95 },
];

function field(label: string, control: HTMLElement, hint?: HTMLElement | string): HTMLElement {
  return h(
    "label",
    { className: "field" },
    h("span", { className: "field-label" }, label),
    control,
    hint ? h("small", { className: "field-hint" }, hint) : null,
  );
}

function numberInput(name: string, min: number, max: number, step: number): HTMLInputElement {
  return h("input", { type: "number", name, attrs: { min: String(min), max: String(max), step: String(step) } });
}

/** The fields of a `ChatSettings`. */
export class ChatSettingsForm {
  readonly element: HTMLElement;
  private readonly system = h("textarea", { name: "system_prompt", rows: 3, placeholder: "e.g. Answer briefly, in plain English." });
  private readonly temperature = numberInput("temperature", 0, 2, 0.1);
  private readonly topP = numberInput("top_p", 0.05, 1, 0.05);
  private readonly maxTokens = numberInput("max_tokens", 1, 8192, 1);
  private readonly policy = h("select", { name: "context_policy" });
  private readonly policyHint = h("span");

  constructor() {
    for (const p of CONTEXT_POLICIES) this.policy.appendChild(h("option", { value: p, textContent: POLICY_TEXT[p].label }));
    this.policy.addEventListener("change", () => this.describePolicy());
    const presets = h("div", { className: "presets" }, h("small", { className: "field-hint" }, "Temperature 0 always takes the likeliest token."));
    for (const preset of PRESETS) {
      const button = h("button", { type: "button", className: "ghost small", textContent: preset.name });
      button.addEventListener("click", () => {
        this.temperature.value = String(preset.temperature);
        this.topP.value = String(preset.top_p);
      });
      presets.insertBefore(button, presets.lastChild);
    }
    this.element = h(
      "div",
      { className: "chat-settings-form" },
      field("System prompt", this.system, "Instructions the model reads before the conversation; blank for none."),
      h(
        "div",
        { className: "row" },
        field("Temperature", this.temperature),
        field("Top-p", this.topP),
        field("Max reply tokens", this.maxTokens),
      ),
      presets,
      field("Long conversations", this.policy, this.policyHint),
    );
  }

  set(settings: ChatSettings): void {
    this.system.value = settings.system_prompt;
    this.temperature.value = String(settings.temperature);
    this.topP.value = String(settings.top_p);
    this.maxTokens.value = String(settings.max_tokens);
    this.policy.value = settings.context_policy;
    this.describePolicy();
  }

  /** The settings as typed; numbers that are not numbers are left for the backend to refuse. */
  read(): ChatSettings {
    return {
      system_prompt: this.system.value,
      temperature: this.temperature.valueAsNumber,
      top_p: this.topP.valueAsNumber,
      max_tokens: this.maxTokens.valueAsNumber,
      context_policy: this.policy.value as ContextPolicy,
    };
  }

  /** Whether every number field holds a number. */
  complete(): boolean {
    return [this.temperature, this.topP, this.maxTokens].every((input) => Number.isFinite(input.valueAsNumber));
  }

  private describePolicy(): void {
    this.policyHint.textContent = POLICY_TEXT[this.policy.value as ContextPolicy]?.hint ?? "";
  }
}

/** The dialog behind the chat header's "Chat settings" button. */
export class ChatSettingsDialog {
  private readonly dialog: HTMLDialogElement;
  private readonly form = new ChatSettingsForm();
  private readonly error = h("p", { className: "warning", attrs: { role: "alert" }, hidden: true });
  private save: ((settings: ChatSettings) => Promise<boolean>) | null = null;

  constructor() {
    const saveButton = h("button", { type: "submit", className: "primary", textContent: "Save" });
    const cancel = h("button", { type: "button", className: "ghost", textContent: "Cancel" });
    // The backend checks the numbers and says what is wrong in its words (not the browser's).
    const form = h("form", { method: "dialog", noValidate: true }, this.form.element, this.error, h("div", { className: "modal-foot" }, cancel, saveButton));
    this.dialog = modal("chat-settings", "Chat settings", form);
    cancel.addEventListener("click", () => this.dialog.close());
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      void this.submit();
    });
  }

  /** Shows `current`; `save` answers whether the backend took them (it shows why not). */
  open(current: ChatSettings, save: (settings: ChatSettings) => Promise<boolean>): void {
    this.form.set(current);
    this.save = save;
    this.error.hidden = true;
    this.dialog.showModal();
  }

  private async submit(): Promise<void> {
    if (!this.form.complete()) {
      this.error.textContent = "Temperature, top-p and max reply tokens must be numbers.";
      this.error.hidden = false;
      return;
    }
    if (this.save && (await this.save(this.form.read()))) this.dialog.close();
  }
}
