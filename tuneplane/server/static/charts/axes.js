// A chart's axes as uPlot draws them: labels with the digits that tell ticks apart (see
// fmtTicks), a y axis as wide as its widest label, and on a log scale labels at decades only
// whenever two or more are in view, thinned so that no two labels touch.

import uPlot from "../vendor/uPlot.esm.js";
import { fmtDuration, fmtLogTick, fmtStep, fmtTicks } from "../lib/format.js";

/** CSS pixels between two labels of a log axis, beyond the text's own height. */
const LABEL_GAP = 4;
/** CSS pixels left of the widest y label. */
const LEFT_PAD = 4;

/** colors: {axis, grid, ticks} (see theme.js). */
export function axes(view, colors) {
  const style = { stroke: colors.axis, grid: { stroke: colors.grid, width: 1 }, ticks: { stroke: colors.ticks } };
  const x =
    view.x === "step"
      ? (u, splits) => splits.map((v) => (v == null ? null : fmtStep(v)))
      : view.x === "relative"
        ? (u, splits) => splits.map((v) => (v == null ? null : fmtDuration(v)))
        : view.x === "time"
          ? undefined
          : (u, splits, axisIdx, space, incr) => fmtTicks(splits, incr);
  const y = view.log
    ? {
        values: (u, splits) => splits.map(fmtLogTick),
        filter: logLabels,
        grid: { ...style.grid, filter: logLines },
        ticks: { ...style.ticks, filter: logLines },
      }
    : { values: (u, splits, axisIdx, space, incr) => fmtTicks(splits, incr) };
  return [
    { ...style, values: x, space: 60 },
    { ...style, ...y, size: fitLabels },
  ];
}

let measurer = null;

/** The width of a text in device pixels in a canvas font (uPlot's, scaled to the screen). */
function textWidth(text, font) {
  measurer ??= document.createElement("canvas").getContext("2d");
  if (measurer.font !== font) measurer.font = font;
  return measurer.measureText(text).width;
}

/** uPlot's axis size: the widest label, the tick and the gap, in CSS pixels. */
function fitLabels(u, values, axisIdx) {
  const axis = u.axes[axisIdx];
  const tick = axis.ticks.show ? axis.ticks.size : 0;
  if (!values) return 40;
  let widest = 0;
  for (const value of values) if (value != null) widest = Math.max(widest, textWidth(String(value), axis.font[0]));
  return Math.ceil(widest / uPlot.pxRatio) + tick + axis.gap + LEFT_PAD;
}

const isDecade = (v) => Math.abs(Math.log10(v) - Math.round(Math.log10(v))) < 1e-9;

/** A log axis' grid lines and ticks: at decades only where decades are closer than this. */
const DENSE_DECADE = 40;

function logLines(u, splits, axisIdx) {
  const scale = u.axes[axisIdx].scale;
  const decade = Math.abs(u.valToPos(1, scale) - u.valToPos(10, scale));
  return decade >= DENSE_DECADE ? splits : splits.map((v) => (v > 0 && isDecade(v) ? v : null));
}

/**
 * Which ticks of a log axis get a label (the others get null): decades, and where a decade
 * is tall enough, its 2s and 5s too (every tick when no decade is in view); each at least a
 * label's height from every other.
 */
function logLabels(u, splits, axisIdx) {
  const axis = u.axes[axisIdx];
  const height = axis.font[2] + LABEL_GAP;
  const decade = Math.abs(u.valToPos(1, axis.scale) - u.valToPos(10, axis.scale));
  const leading = (v) => Math.round(v / 10 ** Math.floor(Math.log10(v) + 1e-9));
  const decades = splits.filter((v) => v > 0 && isDecade(v)).length;
  const rank = (v) => {
    if (!(v > 0)) return null;
    if (isDecade(v) || !decades) return 0;
    return decade >= 4 * height && (leading(v) === 2 || leading(v) === 5) ? 1 : null;
  };
  const shown = splits.map(() => null);
  const kept = [];
  for (const wanted of [0, 1]) {
    for (let i = splits.length - 1; i >= 0; i--) {
      if (rank(splits[i]) !== wanted) continue;
      const at = u.valToPos(splits[i], axis.scale);
      if (kept.some((other) => Math.abs(at - other) < height)) continue;
      shown[i] = splits[i];
      kept.push(at);
    }
  }
  return shown;
}

/**
 * What an axis shows, for the browser tests: its size, tick and gap (CSS pixels), its font,
 * text and grid colours, and each label with its position along the axis.
 */
export function axesShown(u) {
  const color = (stroke, i) => (typeof stroke === "function" ? stroke(u, i) : stroke);
  return u.axes.map((axis, i) => ({
    side: axis.side,
    stroke: color(axis.stroke, i),
    grid: color(axis.grid.stroke, i),
    size: axis._size,
    tick: axis.ticks.show ? axis.ticks.size : 0,
    gap: axis.gap,
    font: axis.font[0].replace(/[0-9.]+px/, `${axis.font[2]}px`),
    fontSize: axis.font[2],
    labels: (axis._values ?? []).flatMap((text, i) =>
      text == null
        ? []
        : [{ text: String(text), value: axis._splits[i], at: u.valToPos(axis._splits[i], axis.scale) }],
    ),
  }));
}
