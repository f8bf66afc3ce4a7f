// One metric drawn with uPlot, for one run or several overlaid: one colour per run, the raw
// line faint under its EMA when smoothing, each downsampled bucket's min–max as a band, and
// NaN/±inf steps as marks. Dragging selects an x range (the board re-queries it).

import uPlot from "../vendor/uPlot.esm.js";
import { fade } from "../lib/colors.js";
import { chartDrawn } from "../lib/debug.js";
import { h } from "../lib/dom.js";
import { fileName, saveBlob } from "../lib/download.js";
import { fmtDuration, fmtInt, fmtNum, fmtStep } from "../lib/format.js";
import { Legend } from "./legend.js";
import { invalidMarkers } from "./markers.js";
import { ema, invalidX, positive, xValues } from "./series.js";

const HEIGHT = 220;

const AXIS = { stroke: "#555", grid: { stroke: "#eee", width: 1 }, ticks: { stroke: "#ddd" } };

export class Chart {
  /** runs: [{key, label, color}]; onSelect(lo, hi) in x units; onReset(). */
  constructor(metric, { onSelect, onReset }) {
    this.metric = metric;
    this.onSelect = onSelect;
    this.onReset = onReset;
    this.uplot = null;
    this.signature = null;
    this.entries = [];
    this.marks = [];
    this.legend = new Legend();
    this.badges = h("span", { class: "badges" });
    this.plot = h("div", { class: "plot" });
    this.note = h("p", { class: "chart-note", hidden: true });
    this.el = h(
      "section",
      { class: "chart", dataset: { metric } },
      h(
        "header",
        {},
        h("h3", { class: "metric", title: metric, text: metric }),
        this.badges,
        h("button", {
          type: "button",
          class: "png",
          title: "Download this chart as PNG",
          text: "PNG",
          onclick: () => this.downloadPng(),
        }),
      ),
      this.plot,
      this.note,
      this.legend.el,
    );
  }

  /**
   * entries: [{run: {key, label, color}, series: Series, invalid: [{step, kind}], t0}];
   * view: {x, smooth, log}; range: [lo, hi] in x units while zoomed, else null.
   */
  draw(entries, view, range = null) {
    const smooth = view.smooth > 0;
    const tables = [];
    const options = [{}];
    const bands = [];
    this.entries = [];
    this.marks = [];
    for (const entry of entries) {
      const { run, series } = entry;
      const xs = xValues(series, view.x, entry.t0);
      const smoothed = smooth ? ema(series.mean, series.count, view.smooth) : null;
      const table = [xs];
      if (series.downsampled) {
        const base = options.length;
        table.push(positive(series.min, view.log), positive(series.max, view.log));
        options.push(edge(`${run.label} min`), edge(`${run.label} max`));
        bands.push({ series: [base + 1, base], fill: fade(run.color, 0.16) });
      }
      table.push(positive(series.mean, view.log));
      options.push({
        label: run.label,
        stroke: smooth ? fade(run.color, 0.3) : run.color,
        width: smooth ? 1 : 1.5,
        spanGaps: false,
      });
      if (smooth) {
        table.push(positive(smoothed, view.log));
        options.push({ label: `${run.label} (EMA)`, stroke: run.color, width: 1.75 });
      }
      tables.push(table);
      this.entries.push({ run, series, xs, raw: series.mean, smooth: smoothed });
      if (entry.invalid?.length) {
        this.marks.push({
          color: run.color,
          xs: invalidX(series, xs, view.x, entry.invalid),
          kinds: entry.invalid.map((s) => s.kind),
        });
      }
    }
    // Steps that were only NaN/inf still widen the x axis, so their marks are on the chart.
    const marked = this.marks.flatMap((m) => m.xs).filter((x) => x != null);
    if (marked.length) tables.push([[...new Set(marked)].sort((a, b) => a - b)]);
    const data = tables.length === 1 ? tables[0] : uPlot.join(tables);
    const signature = JSON.stringify([view.x, view.log, smooth, options.map((o) => o.label)]);
    if (signature !== this.signature || !this.uplot) {
      this.uplot?.destroy();
      this.uplot = new uPlot(this.options(view, options, bands), data, this.plot);
      this.signature = signature;
    } else {
      this.uplot.setData(data);
    }
    if (range) this.uplot.setScale("x", { min: range[0], max: range[1] });
    this.legend.setEntries(this.entries, view.x);
    this.describe(entries);
    const counts = {};
    const lastStep = {};
    for (const e of entries) {
      counts[e.run.key] = e.series.length;
      lastStep[e.run.key] = e.series.lastStep;
    }
    chartDrawn(this.metric, counts, entries.some((e) => e.series.downsampled), {
      lastStep,
      bands: bands.length,
      y: extent(tables),
    });
  }

  describe(entries) {
    const points = entries.reduce((sum, e) => sum + e.series.points, 0);
    const drawn = entries.reduce((sum, e) => sum + e.series.length, 0);
    const invalid = entries.reduce((sum, e) => sum + (e.invalid?.length ?? 0), 0);
    const badges = [];
    if (drawn < points) {
      badges.push(
        h("span", {
          class: "badge",
          title: "Downsampled by the server: each bucket's min–max is the shaded band",
          text: `${fmtInt(points)} pts → ${fmtInt(drawn)}`,
        }),
      );
    }
    if (invalid) {
      const steps = entries.flatMap((e) => (e.invalid ?? []).map((s) => `${s.step}: ${s.kind}`));
      badges.push(
        h("span", {
          class: "badge warn",
          title: `NaN/±inf at step ${steps.slice(0, 20).join(", ")}${steps.length > 20 ? ", …" : ""}`,
          text: `${fmtInt(invalid)} NaN/inf`,
        }),
      );
    }
    const signature = badges.map((b) => b.textContent + b.title).join("\n");
    if (signature !== this.badgeSignature) {
      this.badgeSignature = signature;
      this.badges.replaceChildren(...badges);
    }
    const empty = drawn === 0;
    this.note.hidden = !empty;
    this.note.textContent = empty
      ? invalid
        ? "No finite values: every reported value was NaN or ±inf (marked)."
        : "No points in this range."
      : "";
  }

  showNote(text) {
    this.note.hidden = false;
    this.note.textContent = text;
  }

  options(view, series, bands) {
    const xValuesFmt =
      view.x === "step"
        ? (u, splits) => splits.map(fmtStep)
        : view.x === "relative"
          ? (u, splits) => splits.map(fmtDuration)
          : undefined;
    const lines = new Set(series.map((s, i) => (s.width > 0 ? i : -1)));
    return {
      width: Math.max(200, this.plot.clientWidth),
      height: HEIGHT,
      series,
      bands,
      legend: { show: false },
      scales: {
        x: { time: view.x === "time" },
        y: view.log ? { distr: 3, log: 10 } : {},
      },
      axes: [
        { ...AXIS, values: xValuesFmt, space: 60 },
        { ...AXIS, size: 58, values: (u, splits) => splits.map(fmtNum) },
      ],
      cursor: {
        sync: { key: "tuneplane", setSeries: false },
        drag: { x: true, y: false, setScale: false },
        points: { show: (u, si) => (lines.has(si) ? cursorDot() : null) },
        bind: {
          // Unzoom to the full series the board holds, instead of uPlot's autoscale.
          dblclick: () => () => this.onReset(),
        },
      },
      plugins: [invalidMarkers(() => this.marks)],
      hooks: {
        setSelect: [
          (u) => {
            if (u.select.width < 4) return;
            const lo = u.posToVal(u.select.left, "x");
            const hi = u.posToVal(u.select.left + u.select.width, "x");
            u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
            this.onSelect(lo, hi);
          },
        ],
        setCursor: [
          (u) => this.legend.show(u.cursor.left >= 0 ? u.posToVal(u.cursor.left, "x") : null),
        ],
      },
    };
  }

  /** Ask for a size; a new width is used by the next query's max_points. */
  resize() {
    const width = this.plot.clientWidth;
    if (this.uplot && width > 0 && width !== this.uplot.width) {
      this.uplot.setSize({ width, height: HEIGHT });
    }
  }

  /** How many buckets are worth loading: one per device pixel of the plot. */
  get maxPoints() {
    const width = this.plot.clientWidth || 600;
    return Math.max(50, Math.min(10000, Math.round(width * (window.devicePixelRatio || 1))));
  }

  downloadPng() {
    if (!this.uplot) return;
    const source = this.uplot.ctx.canvas;
    const ratio = source.width / this.uplot.width;
    const line = 18 * ratio;
    const canvas = document.createElement("canvas");
    canvas.width = source.width;
    canvas.height = source.height + line * (1.5 + this.entries.length);
    const ctx = canvas.getContext("2d");
    ctx.fillStyle = "#fff";
    ctx.fillRect(0, 0, canvas.width, canvas.height);
    ctx.fillStyle = "#222";
    ctx.font = `bold ${13 * ratio}px system-ui, sans-serif`;
    ctx.fillText(this.metric, 8 * ratio, line);
    ctx.drawImage(source, 0, line * 1.5);
    ctx.font = `${12 * ratio}px system-ui, sans-serif`;
    this.entries.forEach((entry, i) => {
      const y = source.height + line * (1.5 + i + 0.8);
      ctx.fillStyle = entry.run.color;
      ctx.fillRect(8 * ratio, y - 9 * ratio, 10 * ratio, 10 * ratio);
      ctx.fillStyle = "#222";
      ctx.fillText(entry.run.label, 24 * ratio, y);
    });
    const run = this.entries.length === 1 ? this.entries[0].run.label : "compare";
    canvas.toBlob((blob) => saveBlob(blob, `${fileName(run, this.metric)}.png`), "image/png");
  }

  destroy() {
    this.uplot?.destroy();
    this.uplot = null;
  }
}

/** The lowest and highest value given to the chart (band edges included). */
function extent(tables) {
  let lo = Infinity;
  let hi = -Infinity;
  for (const table of tables) {
    for (let i = 1; i < table.length; i++) {
      for (const v of table[i]) {
        if (v == null) continue;
        if (v < lo) lo = v;
        if (v > hi) hi = v;
      }
    }
  }
  return [lo, hi];
}

function edge(label) {
  return { label, width: 0, points: { show: false }, spanGaps: false };
}

function cursorDot() {
  const dot = document.createElement("div");
  for (const key of ["width", "height"]) dot.style[key] = "7px";
  for (const key of ["marginLeft", "marginTop"]) dot.style[key] = "-3.5px";
  return dot;
}
