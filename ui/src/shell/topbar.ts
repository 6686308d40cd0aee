/**
 * The app's header: which models are working, today's spend and cloud share, and the
 * switches that apply to every chat (cloud highlighting, compare, settings).
 */
import type { AppStatus, Meter } from "../ipc/types";
import { renderMeter } from "../budget/meter";
import { h } from "./dom";
import { icon } from "./icons";

const HIGHLIGHT_KEY = "tandem.highlightCloud";

export type TopbarActions = { compare(): void; settings(): void };

/** A model as the header names it: a catalogue name as it is, a GGUF path by its file name. */
export function modelLabel(edge: string): string {
  const file = edge.split(/[\\/]/).pop() || edge;
  return file.replace(/\.gguf$/i, "");
}

export class Topbar {
  readonly element: HTMLElement;
  private readonly models = h("div", { className: "models-info" });
  private readonly meter = h("div", { className: "meter", id: "meter" });
  private readonly highlight: HTMLButtonElement;

  constructor(actions: TopbarActions) {
    this.highlight = h("button", { className: "ghost toggle", type: "button", id: "highlight-toggle" });
    this.highlight.addEventListener("click", () => this.setHighlight(!this.highlighting()));
    const compare = h("button", { className: "ghost", type: "button", id: "open-compare", textContent: "Compare" });
    compare.addEventListener("click", () => actions.compare());
    const settings = h("button", { className: "ghost", type: "button", id: "open-settings", textContent: "Settings" });
    settings.addEventListener("click", () => actions.settings());
    this.element = h(
      "header",
      { className: "topbar" },
      this.models,
      h("div", { className: "topbar-right" }, this.meter, this.highlight, compare, settings),
    );
    this.setHighlight(this.highlighting());
  }

  showStatus(status: AppStatus): void {
    const cloud = status.cloud;
    this.models.replaceChildren(
      h(
        "span",
        { className: "chip chip-edge", title: `Edge model, on this machine: ${status.edge_model}` },
        h("i", { className: "dot" }),
        h("span", { className: "chip-text" }, modelLabel(status.edge_model)),
      ),
      h("span", { className: "plus" }, "+"),
      h(
        "span",
        { className: `chip chip-cloud${cloud.stand_in ? " stand-in" : ""}`, title: cloud.url ?? "no cloud" },
        h("i", { className: "dot" }),
        h("span", { className: "chip-text" }, cloud.model ? `${cloud.label} · ${cloud.model}` : cloud.label),
      ),
      h("span", { className: "router", title: "Router" }, status.router),
    );
    this.showMeter(status.meter);
  }

  showMeter(meter: Meter): void {
    this.meter.replaceChildren(...renderMeter(meter));
  }

  private highlighting(): boolean {
    return localStorage.getItem(HIGHLIGHT_KEY) !== "off";
  }

  private setHighlight(on: boolean): void {
    localStorage.setItem(HIGHLIGHT_KEY, on ? "on" : "off");
    document.body.classList.toggle("hide-provenance", !on);
    this.highlight.setAttribute("aria-pressed", String(on));
    this.highlight.replaceChildren(icon("cloud"), on ? "Highlight" : "No highlight");
    this.highlight.title = on ? "Hide the cloud-token highlighting" : "Show which tokens came from the cloud";
  }
}
