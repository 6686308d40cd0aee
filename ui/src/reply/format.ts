/** Small formatting rules shared by the footer, the tooltip and the meter. */

/** Dollars with 4 decimals; tiny non-zero amounts read "<$0.0001" rather than "$0.0000". */
export function formatUsd(usd: number): string {
  if (usd > 0 && usd < 0.0001) return "<$0.0001";
  return `$${usd.toFixed(4)}`;
}

/** Whitespace made visible, so a replaced " " or "\n" can be seen in a tooltip. */
export function visibleWhitespace(text: string): string {
  if (text === "") return "∅";
  return text.replace(/ /g, "·").replace(/\n/g, "⏎").replace(/\t/g, "⇥");
}

export function formatPercent(fraction: number): string {
  if (!Number.isFinite(fraction)) return "0 %";
  const pct = fraction * 100;
  return `${pct > 0 && pct < 1 ? pct.toFixed(1) : Math.round(pct)} %`;
}
