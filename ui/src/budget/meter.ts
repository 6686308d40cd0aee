/** The header's spend meter: today's estimated spend and today's cloud share of tokens. */
import type { Meter } from "../ipc/types";
import { h } from "../shell/dom";
import { formatPercent, formatUsd } from "../reply/format";

export function todayShare(meter: Meter): number {
  const total = meter.today_edge_tokens + meter.today_cloud_tokens;
  return total > 0 ? meter.today_cloud_tokens / total : 0;
}

export function renderMeter(meter: Meter): HTMLElement[] {
  const spent = formatUsd(meter.spent_today_usd);
  return [
    h("span", { className: "meter-spend", title: "Estimated cloud spend today" },
      h("b", {}, spent), meter.cap_usd !== null ? ` / $${meter.cap_usd.toFixed(2)}` : "", " today"),
    h("span", { className: "meter-share", title: "Share of today's tokens that came from the cloud" },
      h("b", {}, formatPercent(todayShare(meter))), " cloud"),
  ];
}
