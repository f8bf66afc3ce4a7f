// One colour per run, stable for its position in the comparison (and so in a shared link).

const PALETTE = [
  "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
  "#7f7f7f", "#bcbd22", "#393b79", "#ad494a", "#637939", "#e7969c", "#6b6ecf", "#8c6d31",
  "#31a354", "#d6616b", "#3182bd", "#843c39",
];

export const runColor = (index) => PALETTE[index % PALETTE.length];

/** "#1f77b4" with alpha -> "rgba(31,119,180,0.25)". */
export function fade(hex, alpha) {
  const n = Number.parseInt(hex.slice(1), 16);
  return `rgba(${(n >> 16) & 255},${(n >> 8) & 255},${n & 255},${alpha})`;
}
