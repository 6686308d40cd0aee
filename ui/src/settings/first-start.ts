/**
 * The first start, with no model on disk yet (an installed package brings none): instead of
 * only an error, the engine banner offers to download what the settings need — the edge
 * model, and the local stand-in's model when no cloud is configured — with progress and a
 * sha256 check. The backend restarts the engine once the edge model is there.
 */
import type { AppStatus, ModelStatus } from "../ipc/types";
import { h } from "../shell/dom";
import { pullWithProgress } from "./pull";

const size = (bytes: number) => (bytes >= 1e9 ? `${(bytes / 1e9).toFixed(1)} GB` : `${(bytes / 1e6).toFixed(0)} MB`);

/**
 * The offer, or null when downloading cannot help (the edge model is a file path, not a
 * catalogue name). `done` runs once every model is on disk.
 */
export function downloadOffer(status: AppStatus, models: ModelStatus[], done: () => void): HTMLElement | null {
  // The stand-in first: the edge model's arrival is what restarts the engine.
  const wanted = [status.cloud.stand_in ? status.cloud.model : null, status.edge_model];
  const missing = models
    .filter((m) => wanted.includes(m.name) && !m.pulled)
    .sort((a, b) => wanted.indexOf(a.name) - wanted.indexOf(b.name));
  if (!missing.some((m) => m.name === status.edge_model)) return null;
  const total = missing.reduce((sum, m) => sum + m.bytes, 0);
  const names = missing.map((m) => `${m.name} (${m.role}, ${size(m.bytes)})`).join(" and ");
  const button = h("button", {
    type: "button",
    className: "primary small",
    id: "download-models",
    textContent: `Download ${missing.length === 1 ? "it" : missing.length === 2 ? "both" : `all ${missing.length}`} (${size(total)})`,
  });
  const progress = h("div", { className: "first-start-progress" });
  button.addEventListener("click", () => {
    button.disabled = true;
    progress.replaceChildren();
    void (async () => {
      // A retry skips what the last attempt already brought in.
      for (const model of missing.filter((m) => !m.pulled)) {
        const place = h("div");
        progress.appendChild(place);
        if (!(await pullWithProgress(model, place, model.name))) {
          button.disabled = false;
          return;
        }
      }
      done();
    })();
  });
  return h(
    "div",
    { className: "first-start" },
    h("b", {}, "Tandem needs its models on this machine. "),
    `${names}: downloaded once into Tandem's data folder and checked by sha256. `,
    button,
    progress,
  );
}
