// Histogram buckets as the SDK counted them: bounds b0 < … < bn-1 give the buckets
// (-inf, b0], (b0, b1], …, (bn-1, +inf). Bars are drawn one per bucket, equal widths (the
// outer buckets are unbounded), never smoothed into a curve or estimated from a mean.
// Canvas text is drawn with fillText, which never interprets markup.

import { fmtNum, fmtStep } from "../lib/format.js";
import { resolve, theme } from "../lib/theme.js";

/** The page's colours in the theme shown (app.css), read when a canvas is drawn. */
const colors = () => ({
  ink: resolve("--fg"),
  muted: resolve("--muted"),
  bar: resolve("--accent"),
  grid: resolve("--line"),
});
const FONT = "11px system-ui, sans-serif";

export function bucketLabels(bounds) {
  const labels = [`(-inf, ${fmtNum(bounds[0])}]`];
  for (let i = 1; i < bounds.length; i += 1) labels.push(`(${fmtNum(bounds[i - 1])}, ${fmtNum(bounds[i])}]`);
  labels.push(`(${fmtNum(bounds[bounds.length - 1])}, +inf)`);
  return labels;
}

/** A canvas of `width` × `height` CSS pixels, sharp on high-density screens. */
export function makeCanvas(width, height, label) {
  const canvas = document.createElement("canvas");
  const ratio = window.devicePixelRatio || 1;
  canvas.width = Math.round(width * ratio);
  canvas.height = Math.round(height * ratio);
  canvas.style.width = `${width}px`;
  canvas.setAttribute("role", "img");
  canvas.setAttribute("aria-label", label);
  const ctx = canvas.getContext("2d");
  ctx.scale(ratio, ratio);
  return { canvas, ctx, width, height };
}

/** The plot area inside the margins (labels go in the margins). */
const frame = (width, height, { left, top, bottom, right = 8 }) => ({
  left,
  top,
  plotW: width - left - right,
  plotH: height - top - bottom,
});

/** Every k-th label so that labels of `each` pixels do not overlap in `room` pixels. */
const labelStep = (count, room, each) => Math.max(1, Math.ceil((count * each) / Math.max(room, 1)));

export function drawHistogram({ ctx, width, height }, bounds, counts) {
  const labels = bucketLabels(bounds);
  const { left, top, plotW, plotH } = frame(width, height, { left: 44, top: 16, bottom: 40 });
  const max = Math.max(1, ...counts);
  const slot = plotW / counts.length;
  const { ink, muted, bar, grid } = colors();
  ctx.clearRect(0, 0, width, height);
  ctx.font = FONT;
  ctx.strokeStyle = grid;
  ctx.fillStyle = muted;
  ctx.textAlign = "right";
  ctx.textBaseline = "middle";
  for (const tick of [0, 0.5, 1]) {
    const y = top + plotH * (1 - tick);
    ctx.beginPath();
    ctx.moveTo(left, y + 0.5);
    ctx.lineTo(left + plotW, y + 0.5);
    ctx.stroke();
    ctx.fillText(fmtNum(Math.round(max * tick)), left - 6, y);
  }
  const every = labelStep(counts.length, plotW, 70);
  counts.forEach((count, i) => {
    const x = left + i * slot;
    const barH = (count / max) * plotH;
    ctx.fillStyle = bar;
    ctx.fillRect(x + Math.min(2, slot * 0.1), top + plotH - barH, Math.max(1, slot - 2 * Math.min(2, slot * 0.1)), barH);
    ctx.textAlign = "center";
    if (slot >= 18) {
      ctx.fillStyle = ink;
      ctx.textBaseline = "bottom";
      ctx.fillText(String(count), x + slot / 2, top + plotH - barH - 2);
    }
    if (i % every === 0) {
      ctx.fillStyle = muted;
      ctx.textBaseline = "top";
      ctx.fillText(labels[i], x + slot / 2, top + plotH + 6);
    }
  });
}

/** The panel's colour → blue by the share of a step's counts in each bucket. */
function shade(share, dark) {
  const t = Math.sqrt(share);
  const mix = (a, b) => Math.round(a + (b - a) * t);
  return dark
    ? `rgb(${mix(24, 110)}, ${mix(30, 162)}, ${mix(40, 240)})`
    : `rgb(${mix(246, 20)}, ${mix(248, 70)}, ${mix(251, 160)})`;
}

/**
 * One column per snapshot (in step order), one row per bucket (the lowest at the bottom),
 * shaded by the bucket's share of that snapshot's count. Returns a function that names the
 * cell under a point, for the hover line.
 */
export function drawHeatmap({ ctx, width, height }, bounds, snapshots) {
  const labels = bucketLabels(bounds);
  const { left, top, plotW, plotH } = frame(width, height, { left: 92, top: 6, bottom: 24 });
  const rows = labels.length;
  const cellW = plotW / snapshots.length;
  const cellH = plotH / rows;
  const dark = theme() === "dark";
  ctx.clearRect(0, 0, width, height);
  snapshots.forEach((snap, col) => {
    const total = snap.counts.reduce((a, b) => a + b, 0);
    snap.counts.forEach((count, row) => {
      ctx.fillStyle = shade(total ? count / total : 0, dark);
      ctx.fillRect(left + col * cellW, top + (rows - 1 - row) * cellH, Math.ceil(cellW), Math.ceil(cellH));
    });
  });
  ctx.font = FONT;
  ctx.fillStyle = colors().muted;
  ctx.textAlign = "right";
  ctx.textBaseline = "middle";
  const everyRow = labelStep(rows, plotH, 14);
  for (let row = 0; row < rows; row += everyRow) {
    ctx.fillText(labels[row], left - 6, top + (rows - 0.5 - row) * cellH);
  }
  ctx.textAlign = "center";
  ctx.textBaseline = "top";
  const everyCol = labelStep(snapshots.length, plotW, 56);
  snapshots.forEach((snap, col) => {
    if (col % everyCol === 0) {
      ctx.fillText(snap.step == null ? "—" : fmtStep(snap.step), left + (col + 0.5) * cellW, top + plotH + 6);
    }
  });
  return (x, y) => {
    const col = Math.floor((x - left) / cellW);
    const row = rows - 1 - Math.floor((y - top) / cellH);
    if (col < 0 || col >= snapshots.length || row < 0 || row >= rows) return null;
    const snap = snapshots[col];
    return { step: snap.step, bucket: labels[row], count: snap.counts[row] };
  };
}
