/**
 * The composer's cloud switch and max-share slider. Each change is sent at once: the backend
 * applies a budget from the next token, even in the middle of a reply.
 */
import type { CloudBudget } from "../ipc/types";
import { h, replace } from "../shell/dom";
import { icon } from "../shell/icons";

/** What the slider promises, shown on hover and read by screen readers. */
export const SHARE_MEANING =
  "This share of your replies' tokens, counted across replies, is the most the cloud model writes; the router spends it where the local model is least sure. A reply may spend up to four tokens that earlier replies left unspent (two to start), but past its opening (the first token the router wants from the cloud) it leaves two for the next reply's opening; an opening the account cannot pay for borrows its token from the replies after it. So even a short answer's deciding word can come from the cloud.";

export class BudgetControls {
  readonly element: HTMLElement;
  private budget: CloudBudget | null = null;
  private locked = false;
  private readonly toggle: HTMLInputElement;
  private readonly toggleLabel: HTMLElement;
  private readonly slider: HTMLInputElement;
  private readonly sliderValue: HTMLElement;

  constructor(private readonly onChange: (budget: CloudBudget) => void) {
    this.toggle = h("input", { type: "checkbox", className: "switch", id: "cloud-switch" });
    this.toggleLabel = h("span", { className: "switch-text" }, "Cloud");
    this.slider = h("input", { type: "range", min: "0", max: "100", step: "1", id: "cloud-share" });
    this.slider.setAttribute("aria-label", "Max cloud share");
    this.slider.setAttribute("aria-describedby", "cloud-share-meaning");
    this.sliderValue = h("output", { className: "share-value", attrs: { for: "cloud-share" } });
    this.element = h(
      "div",
      { className: "budget-controls" },
      h("label", { className: "switch-label", title: "Off: nothing leaves this machine" }, this.toggle, this.toggleLabel),
      h("label", { className: "share-label", title: SHARE_MEANING }, h("span", {}, "max share"), this.slider, this.sliderValue),
      h("span", { className: "visually-hidden", id: "cloud-share-meaning" }, SHARE_MEANING),
    );
    this.toggle.addEventListener("change", () => this.emit({ enabled: this.toggle.checked }));
    this.slider.addEventListener("input", () => this.showShare(Number(this.slider.value) / 100));
    this.slider.addEventListener("change", () => this.emit({ max_share: Number(this.slider.value) / 100 }));
  }

  set(budget: CloudBudget): void {
    this.budget = budget;
    this.render();
  }

  /** A local-only chat: the cloud is off for it whatever the budget says. */
  setLocked(locked: boolean): void {
    this.locked = locked;
    this.render();
  }

  private emit(change: Partial<CloudBudget>): void {
    if (!this.budget) return;
    this.budget = { ...this.budget, ...change };
    this.render();
    this.onChange(this.budget);
  }

  private showShare(fraction: number): void {
    this.sliderValue.textContent = `${Math.round(fraction * 100)} %`;
  }

  private render(): void {
    const b = this.budget;
    const enabled = !!b?.enabled && !this.locked;
    this.toggle.checked = enabled;
    this.toggle.disabled = !b || this.locked;
    if (this.locked) replace(this.toggleLabel, icon("lock"), "Cloud locked off · local-only chat");
    else this.toggleLabel.textContent = enabled ? "Cloud on" : "Cloud off · fully local";
    this.element.classList.toggle("locked", this.locked);
    this.element.classList.toggle("cloud-off", !enabled);
    this.slider.disabled = !enabled;
    if (b) {
      this.slider.value = String(Math.round(b.max_share * 100));
      this.showShare(b.max_share);
    }
  }
}
