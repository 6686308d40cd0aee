/** "Sent to cloud": exactly what each cloud request carried, so the user can audit a reply. */
import type { CloudRequestEvent } from "../ipc/types";
import type { ReplyLog } from "./log";
import { h } from "../shell/dom";
import { icon } from "../shell/icons";

export function renderPrivacy(log: ReplyLog): HTMLElement {
  const made = log.finished?.usage.cloud_requests ?? 0;
  if (log.requests.length === 0) {
    // Older recordings have no request events: never claim privacy that was not kept.
    return made > 0
      ? h("div", { className: "privacy privacy-unknown" }, icon("cloud"),
          `${made} cloud request${made === 1 ? "" : "s"} made; their contents were not recorded`)
      : h("div", { className: "privacy privacy-local" }, icon("lock"), "Nothing left this machine");
  }
  const items = log.requests.map((r, i) => {
    const said = outcome(r);
    return h(
      "li",
      { className: `request ${said}` },
      h(
        "div",
        { className: "request-meta" },
        h("b", {}, `#${i + 1} ${OUTCOME_LABEL[said]}`),
        ` · ${r.ms} ms · ${r.prompt_tokens} prompt + ${r.completion_tokens} completion tokens`,
      ),
      h("pre", { className: "request-sent" }, r.sent),
    );
  });
  return h(
    "details",
    { className: "privacy privacy-sent" },
    h("summary", {}, `Sent to cloud (${log.requests.length} request${log.requests.length === 1 ? "" : "s"})`),
    h("ol", {}, ...items),
  );
}

type Outcome = "ok" | "failed" | "unused";

/** A request asked ahead and not used did not fail, even where its answer had not come back when the reply ended. */
function outcome(r: CloudRequestEvent): Outcome {
  return r.unused ? "unused" : r.ok ? "ok" : "failed";
}

const OUTCOME_LABEL: Record<Outcome, string> = { ok: "ok", failed: "failed", unused: "asked ahead, unused" };
