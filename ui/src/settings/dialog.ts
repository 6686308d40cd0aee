/**
 * Settings: the cloud endpoint and its key, the edge model (with download), the router, the
 * spend limits, what new chats start with, and the chart of the latest router evaluation. The key is only ever sent, never
 * shown back: after saving, the UI knows just its masked tail.
 */
import * as ipc from "../ipc/commands";
import { toUiError } from "../ipc/errors";
import type {
  AppStatus,
  CloudBudget,
  CloudMode,
  CloudPreset,
  ErrorKind,
  KeyStatus,
  ModelStatus,
  RouterKind,
  Settings,
  TestResult,
} from "../ipc/types";
import { ROUTER_KINDS } from "../ipc/types";
import { h, replace } from "../shell/dom";
import { modal } from "../shell/dialog";
import { ChatSettingsForm } from "../chat/settings";
import { pullWithProgress } from "./pull";
import { attempt, showError } from "../shell/toast";

export type SettingsDeps = { status(): AppStatus | null; saved(budget: CloudBudget | null): void };

const TEST_LABELS: Partial<Record<ErrorKind, string>> = {
  cloud_wrong_key: "Wrong key",
  cloud_unreachable: "Unreachable",
  cloud_model_not_found: "Model not found",
  cloud_no_continuation: "Does not continue replies",
  cloud_error: "Error",
};

/** Each router in one line: what it looks at to pick the tokens the cloud writes. */
export const ROUTER_HINTS: Record<RouterKind, string> = {
  entropy: "Asks the cloud where the local model's next-token distribution is most spread out.",
  margin: "Asks the cloud where the local model's two best next tokens are nearly tied (a choice between answers).",
  mlp: "A small network that reads the local model's hidden state, trained for the default models on chat, multiple choice, math and writing prompts.",
  "edge-only": "Never asks the cloud: every token is written on this machine.",
  "cloud-only": "Asks the cloud for every token, within the budget: the most accurate and the most expensive.",
  blend: "The default: asks the cloud where the local model's two best next tokens are nearly tied, or where no next token is a clear favourite (margin, with entropy where the favourite is weak).",
  "lead-entropy": "The cloud writes each reply's first token (where an answer often starts), then entropy picks the rest.",
  "first-token": "A baseline: the cloud writes only each reply's first token.",
  random: "A baseline: random tokens, at the share you set.",
};

/** What a connection test's result is called: "Connected", or its kind's label. */
function testLabel(r: TestResult): string {
  if (r.kind === null) return "Connected";
  return TEST_LABELS[r.kind] ?? r.kind;
}

function field(label: string, control: HTMLElement, hint?: string): HTMLElement {
  return h("label", { className: "field" }, h("span", { className: "field-label" }, label), control, hint ? h("small", { className: "field-hint" }, hint) : null);
}

/**
 * The evaluation chart is a file from disk, so it is only ever shown through an <img>: an image
 * runs no script and loads nothing else, and a data: URL is what the CSP's img-src allows.
 */
function svgImageUrl(svg: string): string {
  return `data:image/svg+xml;charset=utf-8,${encodeURIComponent(svg)}`;
}

function optionalNumber(input: HTMLInputElement): number | null {
  const v = input.value.trim();
  return v === "" ? null : Number(v);
}

export class SettingsDialog {
  private readonly dialog: HTMLDialogElement;
  private readonly preset = h("select", { id: "cloud-preset" });
  private readonly url = h("input", { id: "cloud-url", type: "text", placeholder: "empty = local stand-in, none = no cloud" });
  private readonly model = h("input", { id: "cloud-model", type: "text", placeholder: "server default" });
  private readonly mode = h("select", { id: "cloud-mode" }, h("option", { value: "completions" }, "completions"), h("option", { value: "chat" }, "chat"));
  private readonly keyInput = h("input", { id: "api-key", type: "password", placeholder: "paste a new key", autocomplete: "off" });
  private readonly keyStatus = h("div", { className: "key-status", id: "key-status" });
  private readonly testResult = h("div", { className: "test-result", id: "test-result", attrs: { "aria-live": "polite" } });
  private readonly edge = h("select", { id: "edge-model" });
  private readonly pull = h("div", { className: "pull" });
  private readonly router = h("select", { id: "router-kind" }, ...ROUTER_KINDS.map((k) => h("option", { value: k }, k)));
  private readonly routerHint = h("small", { className: "field-hint", id: "router-hint" });
  private readonly threads = h("input", { id: "threads", type: "number", min: "1", step: "1", placeholder: "automatic" });
  private readonly cap = h("input", { id: "spend-cap", type: "number", min: "0", step: "0.01", placeholder: "no cap" });
  private readonly askAhead = h("input", { id: "ask-ahead", type: "checkbox" });
  /** Blank: no limit. */
  private readonly maxWait = h("input", { id: "max-wait", type: "number", min: "1", step: "1", placeholder: "no limit" });
  private readonly priceIn = h("input", { id: "price-in", type: "number", min: "0", step: "any" });
  private readonly priceOut = h("input", { id: "price-out", type: "number", min: "0", step: "any" });
  /** Blank: cached prompt tokens cost the input price. */
  private readonly priceCached = h("input", { id: "price-cached", type: "number", min: "0", step: "any", placeholder: "= input" });
  private readonly evaluation = h("div", { className: "evaluation", id: "evaluation" });
  private readonly newChats = new ChatSettingsForm();
  private presets: CloudPreset[] = [];
  private models: ModelStatus[] = [];
  private settings: Settings | null = null;

  constructor(private readonly deps: SettingsDeps) {
    const saveKey = h("button", { type: "button", id: "save-key", textContent: "Save key" });
    saveKey.addEventListener("click", () => void this.saveKey());
    const clearKey = h("button", { type: "button", className: "ghost", id: "clear-key", textContent: "Clear" });
    clearKey.addEventListener("click", () => void this.clearKey());
    const test = h("button", { type: "button", id: "test-connection", textContent: "Test connection" });
    test.addEventListener("click", () => void this.test(test));
    const save = h("button", { type: "button", className: "primary", id: "save-settings", textContent: "Save" });
    save.addEventListener("click", () => void this.save());
    const cancel = h("button", { type: "button", className: "ghost", textContent: "Cancel" });
    cancel.addEventListener("click", () => this.dialog.close());
    this.router.addEventListener("change", () => this.explainRouter());

    this.preset.addEventListener("change", () => {
      const p = this.presets[Number(this.preset.value)];
      if (!p) return;
      this.url.value = p.url;
      this.mode.value = p.mode;
      void this.refreshKey();
      if (p.needs_key) this.keyInput.focus();
    });
    this.edge.addEventListener("change", () => this.renderPull());
    const openFile = h("button", { type: "button", className: "ghost", id: "open-gguf", textContent: "Open a GGUF file…" });
    openFile.addEventListener("click", () => void this.pickModelFile());
    // A key belongs to one endpoint: show the one saved for the URL as typed.
    this.url.addEventListener("change", () => void this.refreshKey());

    this.dialog = modal(
      "settings",
      "Settings",
      h(
        "section",
        { className: "settings-section" },
        h("h3", {}, "Cloud model"),
        field("Preset", this.preset),
        field("URL", this.url),
        h("div", { className: "row" }, field("Model", this.model), field("Mode", this.mode)),
        field("API key", h("div", { className: "row key-row" }, this.keyInput, saveKey, clearKey)),
        this.keyStatus,
        h("div", { className: "row" }, test, this.testResult),
        h(
          "label",
          { className: "field check" },
          h("span", { className: "row" }, this.askAhead, h("span", { className: "field-label" }, "Ask ahead while waiting")),
          h("small", { className: "field-hint" }, "Replies come sooner over a network; a request asked ahead whose answer the reply does not use is still billed (9–44% more requests in our runs)."),
        ),
        field("Slow after (ms)", this.maxWait, "Past this round trip, replies ask the cloud only for their most uncertain tokens."),
      ),
      h(
        "section",
        { className: "settings-section" },
        h("h3", {}, "Edge model"),
        field("Model", h("div", { className: "row" }, this.edge, openFile)),
        this.pull,
      ),
      h(
        "section",
        { className: "settings-section" },
        h("h3", {}, "Router and engine"),
        h("div", { className: "row" }, field("Router", this.router), field("Threads", this.threads)),
        this.routerHint,
      ),
      h(
        "section",
        { className: "settings-section" },
        h("h3", {}, "Spend"),
        h("div", { className: "row" }, field("Daily cap ($)", this.cap), field("Input $ / 1M tok", this.priceIn), field("Output $ / 1M tok", this.priceOut), field("Cached input $ / 1M tok", this.priceCached)),
      ),
      h(
        "section",
        { className: "settings-section", id: "new-chat-settings" },
        h("h3", {}, "New chats"),
        h("small", { className: "field-hint" }, "What chats are answered with unless they have settings of their own (Chat settings, above the messages)."),
        this.newChats.element,
      ),
      h("section", { className: "settings-section" }, h("h3", {}, "Router evaluation"), this.evaluation),
      h("footer", { className: "modal-foot" }, cancel, save),
    );
  }

  async open(): Promise<void> {
    const [settings, presets, models] = await Promise.all([
      attempt(ipc.settingsGet, "settings"),
      attempt(ipc.cloudPresets, "cloud presets"),
      attempt(ipc.modelsList, "models"),
    ]);
    if (!settings) return;
    this.settings = settings;
    this.presets = presets ?? [];
    this.models = models ?? [];
    this.preset.replaceChildren(
      h("option", { value: "" }, "Choose a preset…"),
      ...this.presets.map((p, i) => h("option", { value: String(i) }, `${p.name}${p.needs_key ? " (needs key)" : ""}`)),
    );
    // Show which preset the current endpoint is, when it is one.
    const current = this.presets.findIndex((p) => p.url === settings.cloud.url && p.mode === settings.cloud.mode);
    this.preset.value = current === -1 ? "" : String(current);
    this.url.value = settings.cloud.url;
    this.model.value = settings.cloud.model ?? "";
    this.mode.value = settings.cloud.mode;
    this.askAhead.checked = settings.ask_ahead;
    this.router.value = settings.router.kind;
    this.explainRouter();
    this.threads.value = settings.threads?.toString() ?? "";
    this.newChats.set(settings.chat);
    const names = new Set(this.models.map((m) => m.name));
    this.edge.replaceChildren(
      ...(names.has(settings.edge) ? [] : [h("option", { value: settings.edge }, settings.edge)]),
      ...this.models.map((m) =>
        h("option", { value: m.name }, `${m.name} · ${m.role} · ${(m.bytes / 1e6).toFixed(0)} MB${m.pulled ? " ✓" : ""}`),
      ),
    );
    this.edge.value = settings.edge;
    this.renderPull();
    const status = this.deps.status();
    if (status) {
      this.renderKey(status.key);
      const b = status.budget;
      this.cap.value = b.daily_spend_cap_usd?.toString() ?? "";
      this.maxWait.value = b.max_wait_ms?.toString() ?? "";
      this.priceIn.value = String(b.prices.input_per_mtok);
      this.priceOut.value = String(b.prices.output_per_mtok);
      this.priceCached.value = b.prices.cached_input_per_mtok?.toString() ?? "";
    }
    this.testResult.replaceChildren();
    this.testResult.className = "test-result";
    this.dialog.showModal();
    // Only once the dialog is open, so a failure's toast lands inside it, not under its backdrop.
    void this.loadEvaluation();
  }

  /** A model file from disk (checked by the backend), offered in the picker until saved. */
  private async pickModelFile(): Promise<void> {
    const path = await attempt(ipc.modelPickFile, "open model");
    if (!path) return;
    if (![...this.edge.options].some((o) => o.value === path)) this.edge.appendChild(h("option", { value: path }, path));
    this.edge.value = path;
    this.renderPull();
  }

  private cloud(): Settings["cloud"] {
    return { url: this.url.value.trim(), model: this.model.value.trim() || null, mode: this.mode.value as CloudMode };
  }

  private renderKey(key: KeyStatus): void {
    const where =
      key.source === "keyring" ? `saved in the system keyring for ${key.origin ?? "this endpoint"}` : key.source === "environment" ? "from TANDEM_CLOUD_API_KEY" : "";
    const none = key.origin ? `No key stored for ${key.origin}.` : "No cloud URL: the local stand-in needs no key.";
    replace(
      this.keyStatus,
      key.masked ? h("span", {}, "Key ", h("code", { className: "masked-key" }, key.masked), ` ${where}`) : h("span", {}, none),
      key.keyring_problem ? h("div", { className: "warning" }, key.keyring_problem) : null,
    );
  }

  private async refreshKey(): Promise<void> {
    const status = await attempt(() => ipc.keyStatus(this.url.value.trim()), "API key");
    if (status) this.renderKey(status);
  }

  private async saveKey(): Promise<void> {
    const key = this.keyInput.value.trim();
    if (!key) return;
    const status = await attempt(() => ipc.keySet(this.url.value.trim(), key), "API key");
    if (!status) return; // the toast says why; the typed key stays for another try
    this.keyInput.value = ""; // never keep the secret on screen
    this.renderKey(status);
  }

  private async clearKey(): Promise<void> {
    const status = await attempt(() => ipc.keyClear(this.url.value.trim()), "API key");
    if (status) this.renderKey(status);
  }

  private explainRouter(): void {
    this.routerHint.textContent = ROUTER_HINTS[this.router.value as RouterKind] ?? "";
  }

  private async test(button: HTMLButtonElement): Promise<void> {
    button.disabled = true;
    this.testResult.className = "test-result pending";
    this.testResult.textContent = "Testing…";
    try {
      const r = await ipc.cloudTest(this.cloud(), this.keyInput.value.trim() || null);
      this.testResult.className = `test-result result-${r.kind ?? "ok"}`;
      replace(
        this.testResult,
        h("b", {}, `${r.ok ? "✓" : "✗"} ${testLabel(r)}`),
        r.message ? ` — ${r.message}` : "",
        r.models.length ? h("small", { className: "models" }, `Models: ${r.models.join(", ")}`) : null,
      );
    } catch (e) {
      const err = toUiError(e);
      this.testResult.className = "test-result result-error";
      this.testResult.replaceChildren(h("b", {}, `✗ ${err.kind}`), ` — ${err.message}`);
    } finally {
      button.disabled = false;
    }
  }

  private async loadEvaluation(): Promise<void> {
    this.evaluation.replaceChildren();
    const svg = await attempt(ipc.evaluationLatest, "router evaluation");
    if (svg === undefined) return; // the toast says why; the section stays empty
    if (svg === null) {
      replace(
        this.evaluation,
        h("small", { className: "field-hint" }, "No evaluation yet: run ", h("code", {}, "tandem eval"), " to measure accuracy against cloud share."),
      );
    } else {
      replace(this.evaluation, h("img", { className: "evaluation-chart", src: svgImageUrl(svg), alt: "Accuracy against cloud share of the latest evaluation" }));
    }
  }

  private renderPull(): void {
    const model = this.models.find((m) => m.name === this.edge.value);
    if (!model || model.pulled) {
      this.pull.replaceChildren(model ? h("small", { className: "field-hint" }, "Downloaded and checked.") : "");
      return;
    }
    const download = h("button", { type: "button", id: "download-model", textContent: `Download ${(model.bytes / 1e6).toFixed(0)} MB` });
    download.addEventListener("click", () => void this.download(model, download));
    this.pull.replaceChildren(download);
  }

  private async download(model: ModelStatus, button: HTMLButtonElement): Promise<void> {
    button.disabled = true;
    await pullWithProgress(model, this.pull);
  }

  private async save(): Promise<void> {
    if (!this.settings) return;
    const settings: Settings = {
      edge: this.edge.value,
      threads: optionalNumber(this.threads),
      cloud: this.cloud(),
      ask_ahead: this.askAhead.checked,
      router: { kind: this.router.value as RouterKind },
      chat: this.newChats.read(),
    };
    const numbers = [settings.chat.temperature, settings.chat.top_p, settings.chat.max_tokens, settings.threads, optionalNumber(this.cap), optionalNumber(this.maxWait), optionalNumber(this.priceIn), optionalNumber(this.priceOut), optionalNumber(this.priceCached)];
    if (numbers.some((n) => n !== null && !Number.isFinite(n))) {
      showError({ kind: "invalid_input", message: "a number field holds something that is not a number" }, "settings");
      return;
    }
    const saved = await attempt(() => ipc.settingsSet(settings), "settings");
    if (!saved) return;
    this.settings = saved;
    let budget: CloudBudget | null = null;
    const current = this.deps.status()?.budget;
    if (current) {
      const cached = optionalNumber(this.priceCached);
      const { max_wait_ms: _, ...rest } = current;
      const maxWait = optionalNumber(this.maxWait);
      const next: CloudBudget = {
        ...rest,
        daily_spend_cap_usd: optionalNumber(this.cap),
        // Blank leaves it unset (no limit), as the backend writes it.
        ...(maxWait === null ? {} : { max_wait_ms: maxWait }),
        prices: {
          input_per_mtok: optionalNumber(this.priceIn) ?? 0,
          output_per_mtok: optionalNumber(this.priceOut) ?? 0,
          // Blank leaves it unset (the input price), as the backend writes it.
          ...(cached === null ? {} : { cached_input_per_mtok: cached }),
        },
      };
      budget = (await attempt(() => ipc.budgetSet(next), "budget")) ?? null;
      if (!budget) return;
    }
    this.dialog.close();
    this.deps.saved(budget);
  }
}
