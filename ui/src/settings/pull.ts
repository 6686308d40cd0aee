/**
 * Downloading a model with its progress shown in place: a bar, the percentage, then "verifying
 * sha256…" once the whole file is there. Used by Settings and by the first start's offer.
 */
import * as ipc from "../ipc/commands";
import type { ModelStatus, PullEvent } from "../ipc/types";
import { h } from "../shell/dom";
import { attempt } from "../shell/toast";

/** Pulls `model`, showing its progress in `place`; resolves whether it is now on disk. */
export async function pullWithProgress(model: ModelStatus, place: HTMLElement, name = ""): Promise<boolean> {
  const bar = h("progress", { max: 1, value: 0 });
  const label = h("span", { className: "pull-label" }, "Starting…");
  place.replaceChildren(h("div", { className: "pull-progress" }, name ? h("span", {}, name) : null, bar, label));
  const onProgress = (e: PullEvent) => {
    if (e.type === "progress") {
      bar.max = e.total || 1;
      bar.value = e.done;
      // The whole file is there: what remains is checking its sha256.
      label.textContent = e.total > 0 && e.done >= e.total ? "verifying sha256…" : `${e.total ? Math.floor((e.done / e.total) * 100) : 0} %`;
    } else if (e.type === "done") {
      bar.value = bar.max;
      label.textContent = "done ✓";
      model.pulled = true;
    } else {
      label.textContent = `failed — ${e.error.kind}: ${e.error.message}`;
      label.classList.add("error");
    }
  };
  const ok = await attempt(() => ipc.modelPull(model.name, onProgress), `download ${model.name}`);
  if (ok === undefined) {
    label.textContent = "failed";
    label.classList.add("error");
  }
  return ok !== undefined;
}
