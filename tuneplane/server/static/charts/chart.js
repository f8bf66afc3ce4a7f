// One metric for one run or several overlaid: one colour per run, the raw line faint under
// its EMA when smoothing, each downsampled bucket's min–max as a band, and NaN/±inf steps as
// marks. A group of runs is drawn as a run is (its mean and its band, see groups.js), its
// runs, when shown, as thin lines without bands. uPlot draws the axes and grid and follows the cursor; the data is drawn on a layer
// above them (see layer.js and paint.js). Dragging selects an x range (the board re-queries
// it).

import uPlot from "../vendor/uPlot.esm.js";
import { fade } from "../lib/colors.js";
import { axesDrawn, chartDrawn } from "../lib/debug.js";
import { h, morph } from "../lib/dom.js";
import { fileName, saveBlob } from "../lib/download.js";
import { fmtInt, fmtStep } from "../lib/format.js";
import { chartColors, theme } from "../lib/theme.js";
import { xMetric } from "../lib/url.js";
import { axes, axesShown } from "./axes.js";
import { PlotLayer } from "./layer.js";
import { Legend } from "./legend.js";
import { ema, invalidX, nearest, positive, xValues } from "./series.js";

const HEIGHT = 220;
/** Canvas pixels a live point may move things by and the drawing still be kept. */
const TOLERANCE = 0.25;

let lastPartId = 0;

export class Chart {
  /**
   * onSelect(lo, hi) in x units; onReset(); onExpand(group key): show or hide its runs.
   * @param {string} metric
   * @param {{onSelect: (lo: number, hi: number) => void, onReset: () => void, onExpand?: (key: string) => void}} handlers
   */
  constructor(metric, { onSelect, onReset, onExpand = () => {} }) {
    this.metric = metric;
    this.onSelect = onSelect;
    this.onReset = onReset;
    this.uplot = null;
    this.layer = null; // where the data is drawn, over uPlot's plot area
    this.dots = []; // the cursor's dot on each run's line
    this.signature = null;
    // As last drawn: {parts, ends (each part's length then and its last row: see samePlace),
    // x and y: [lowest, highest] (band edges included), marks, bands: [{table, fill}], lines:
    // [{table, column, stroke, width}]}; the layer's frames and the y range read it.
    this.drawn = null;
    this.parts = new WeakMap(); // Series -> its part (see part())
    this.sent = new Map(); // part -> {version, length} as the layer has it
    this.skipped = 0;
    this.entries = [];
    this.width = null; // the plot's width in CSS pixels, once laid out
    this.marks = [];
    this.legend = new Legend(onExpand);
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
   * entries: [{run: {key, label, color}, series: Series, invalid: [{step, kind}], t0, last}]
   * (last: the run's last report, for the legend; see Legend.setEntries); view: {x, smooth, log}; range: [lo, hi] in x units while zoomed, else null. A live
   * draw may keep the drawing when nothing on it would move (see samePlace).
   */
  draw(entries, view, range = null, { live = false } = {}) {
    const smooth = view.smooth > 0;
    const parts = entries.map((entry) => this.part(entry, view));
    // Every table drawn (the marks' steps are added below): the x scale spans them.
    const tables = parts.map((part) => part.table);
    this.entries = entries.map(({ run, series, last, invalid }, i) => ({
      run,
      series,
      last,
      invalid,
      xs: parts[i].xs,
      raw: series.mean,
      smooth: parts[i].smoothed,
    }));
    this.marks = marksOf(entries, parts, view.x);
    // Steps that were only NaN/inf still widen the x axis, so their marks are on the chart.
    const marked = this.marks.flatMap((m) => m.xs).filter((x) => x != null);
    if (marked.length) tables.push([[...new Set(marked)].sort((a, b) => a - b)]);
    // What uPlot's options depend on (its scales and axes): anything else it is only told.
    const signature = `${view.x} ${view.log} ${theme()}`;
    /** @type {[number, number]} */
    const y = [Math.min(...parts.map((p) => p.y[0])), Math.max(...parts.map((p) => p.y[1]))];
    const x = xExtent(tables, xMetric(view.x) != null);
    const marks = JSON.stringify(this.marks);
    // A live point that moves nothing on screen by a quarter pixel or more (a point folded
    // into a bucket hundreds of steps wide) is kept, not drawn: redrawing and compositing
    // every canvas is most of a live update's cost. The next visible change draws it all.
    const unchanged =
      live &&
      this.uplot &&
      signature === this.signature &&
      marks === this.drawn?.marks &&
      samePlace(this.drawn, parts, x, y, this.uplot.bbox, view.log);
    if (unchanged) {
      this.skipped += 1;
    } else {
      // Live points change a part's arrays in place, from its last row on (see extend()).
      const ends = parts.map(({ table, version }) => {
        const length = table[0].length;
        return { version, length, row: table.map((column) => column[length - 1]) };
      });
      const bands = entries.flatMap(({ run }, i) =>
        parts[i].band && !run.member ? [{ table: parts[i].id, fill: fade(run.color, run.aggregate ? 0.24 : 0.16) }] : [],
      );
      const drawnLines = entries.flatMap(({ run }, i) => {
        const first = parts[i].band ? 3 : 1; // the columns after xs, and the band's min and max
        return lineStyles(run, smooth).map((style, j) => ({ table: parts[i].id, column: first + j, ...style }));
      });
      this.drawn = { parts, ends, x, y, marks, bands, lines: drawnLines };
      const data = extentData(x, y);
      if (signature !== this.signature || !this.uplot) {
        this.destroy();
        this.uplot = new uPlot(this.options(view), data, this.plot);
        this.signature = signature;
      } else {
        this.uplot.setData(data);
      }
    }
    if (range) this.uplot.setScale("x", { min: range[0], max: range[1] });
    this.legend.setEntries(this.entries, view.x, range != null);
    this.describe(entries);
    const counts = {};
    const lastStep = {};
    for (const e of entries) {
      counts[e.run.key] = e.series.length;
      lastStep[e.run.key] = e.series.lastStep;
    }
    chartDrawn(this.metric, counts, entries.some((e) => e.series.downsampled), {
      lastStep,
      bands: this.drawn.bands.length,
      y,
      skipped: this.skipped,
      // Per run key, the NaN/±inf marks placed on the x axis.
      marks: Object.fromEntries(entries.filter((e) => e.invalid?.length).map((e) => [e.run.key, e.invalid.length])),
    });
  }

  /**
   * One run's arrays as the chart draws them: {id, xs, smoothed, lines: [xs, mean, ema?],
   * band: {min, max} or null, table: [xs, ...every y drawn] (the layer's copy is known by the
   * id), y: their extent, version: the series' version they show}. Made again when the view changes; when only
   * the series grew (a live point), brought up to date in place from its last bucket on,
   * the buckets before it being as they were (see Series.append).
   */
  part({ series, t0 }, view) {
    const key = `${view.x} ${view.smooth} ${view.log} ${t0}`;
    const held = this.parts.get(series);
    if (held?.key === key && (held.version === series.version || this.extend(held, series, view, t0))) return held;
    const xs = xValues(series, view.x, t0);
    const emaState = { acc: 0, seen: 0 };
    const smoothed = view.smooth > 0 ? ema(series.mean, series.count, view.smooth, undefined, 0, emaState) : null;
    // Over another metric, a bucket before that metric's first point has no place: a gap.
    const placed = xs.includes(null) ? (ys) => ys.map((y, i) => (xs[i] == null ? null : y)) : (ys) => ys;
    const lines = [xs, placed(positive(series.mean, view.log))];
    if (smoothed) lines.push(placed(positive(smoothed, view.log)));
    const band = series.downsampled
      ? { min: placed(positive(series.min, view.log)), max: placed(positive(series.max, view.log)) }
      : null;
    const table = band ? [xs, band.min, band.max, ...lines.slice(1)] : lines;
    // The extent of all but the last row: a live point changes the last row or adds rows.
    const head = extent(table, 0, xs.length - 1);
    const part = { key, xs, smoothed, emaState, lines, band, table, head, y: extent(table, xs.length - 1, xs.length, head) };
    part.id = ++lastPartId;
    part.version = series.version;
    this.parts.set(series, part);
    return part;
  }

  /**
   * Bring a part up to date with its series, which only grew or changed its last bucket;
   * false when it must be made again instead.
   */
  extend(part, series, view, t0) {
    // Buckets of several points from now on (a short run grown long): it gains a band.
    if (!part.band && series.downsampled) return false;
    const from = Math.max(0, part.xs.length - 1);
    const n = series.length;
    xValues(series, view.x, t0, part.xs, from);
    const [, mean, smooth] = part.lines;
    positive(series.mean, view.log, mean, from);
    if (part.smoothed) {
      ema(series.mean, series.count, view.smooth, part.smoothed, from, part.emaState);
      positive(part.smoothed, view.log, smooth, from);
    }
    if (part.band) {
      positive(series.min, view.log, part.band.min, from);
      positive(series.max, view.log, part.band.max, from);
    }
    part.head = extent(part.table, from, n - 1, part.head);
    part.y = extent(part.table, n - 1, n, part.head);
    part.version = series.version;
    return true;
  }

  /**
   * The runs' last reports changed while the drawing stays (a zoomed chart shows a fixed
   * range): the legend's last values follow them. entries: [{run: {key}, last}].
   */
  follow(entries) {
    const last = new Map(entries.map((e) => [e.run.key, e.last]));
    for (const entry of this.entries) if (last.has(entry.run.key)) entry.last = last.get(entry.run.key);
    this.legend.show(this.legend.x);
  }

  describe(entries) {
    // A group's runs shown beside it are counted in its points already.
    const counted = entries.filter((e) => !e.run.member);
    const points = counted.reduce((sum, e) => sum + e.series.points, 0);
    const drawn = counted.reduce((sum, e) => sum + e.series.length, 0);
    const invalid = entries.reduce((sum, e) => sum + (e.invalid?.length ?? 0), 0);
    const badges = [];
    if (drawn < points) {
      badges.push(
        h("span", {
          class: "badge",
          title: "Downsampled by the server: each bucket's min–max is the shaded band",
          // Large counts to three digits: an exact one changes with every live point, and
          // each change repaints the chart (the run's header has the exact count).
          text: `${points >= 1e5 ? fmtStep(points) : fmtInt(points)} pts → ${fmtInt(drawn)}`,
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
      // In place: a live point changes only the count's text. A new set of badges replaces
      // the element, which is then the one to change.
      this.badges = morph(this.badges, h("span", { class: "badges" }, badges));
    }
    const empty = drawn === 0;
    const note = empty
      ? invalid
        ? "No finite values: every reported value was NaN or ±inf (marked)."
        : "No points in this range."
      : "";
    if (this.note.hidden !== !empty) this.note.hidden = !empty;
    if (this.note.textContent !== note) this.note.textContent = note;
  }

  showNote(text) {
    this.note.hidden = false;
    this.note.textContent = text;
  }

  /** @returns {uPlot.Options} */
  options(view) {
    this.colors = chartColors();
    // The bands are not uPlot's data: the y range is taken from every value drawn.
    /** @returns {uPlot.Range.MinMax} */
    const yRange = () => {
      const [lo, hi] = this.drawn?.y ?? [];
      if (!(hi >= lo)) return [null, null];
      return view.log ? uPlot.rangeLog(lo, hi, 10, false) : uPlot.rangeNum(lo, hi, 0.1, true);
    };
    return {
      width: Math.max(200, this.plot.clientWidth),
      height: HEIGHT,
      // uPlot holds only the extent of the data (see extentData), which sets its scales.
      series: [{}, { label: "extent", paths: () => null, points: { show: false } }],
      legend: { show: false },
      scales: {
        x: { time: view.x === "time" },
        y: view.log ? { distr: 3, log: 10, range: yRange } : { range: yRange },
      },
      axes: axes(view, this.colors),
      cursor: {
        sync: { key: "tuneplane", setSeries: false },
        drag: { x: true, y: false, setScale: false },
        points: { show: false },
        bind: {
          // Unzoom to the full series the board holds, instead of uPlot's autoscale (a
          // listener answers null, as uPlot's own do).
          dblclick: () => () => {
            this.onReset();
            return null;
          },
        },
      },
      hooks: {
        // After every redraw of the axes (new data, zoom, size): the data over them.
        draw: [
          (u) => {
            this.paintData(u, view.log);
            axesDrawn(this.metric, axesShown(u));
          },
        ],
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
          (u) => {
            const x = u.cursor.left >= 0 ? u.posToVal(u.cursor.left, "x") : null;
            this.legend.show(x);
            this.placeDots(u, x, view.log);
          },
        ],
      },
    };
  }

  /** A dot on each run's line (its EMA when smoothing) at its bucket nearest to x. */
  placeDots(u, x, log) {
    const shown = x == null ? 0 : this.entries.length;
    while (this.dots.length < shown) {
      const dot = h("div", { class: "cursor-dot" });
      u.over.append(dot);
      this.dots.push(dot);
    }
    this.dots.forEach((dot, i) => {
      const entry = i < shown ? this.entries[i] : null;
      const index = entry ? nearest(entry.xs, x) : -1;
      const value = index < 0 ? null : (entry.smooth ?? entry.raw)[index];
      const hidden = value == null || (log && !(value > 0));
      if (dot.hidden !== hidden) dot.hidden = hidden;
      if (hidden) return;
      dot.style.background = entry.run.color;
      dot.style.transform = `translate(${u.valToPos(entry.xs[index], "x")}px, ${u.valToPos(value, "y")}px)`;
    });
  }

  /**
   * Send the layer what uPlot's scales now show: the runs' bands, lines and marks, with the
   * rows of their tables it does not have yet.
   */
  paintData(u, log) {
    if (!this.drawn) return;
    if (this.layer?.canvas.parentNode !== u.ctx.canvas.parentNode) {
      this.layer?.destroy();
      this.layer = new PlotLayer(u.ctx.canvas);
      this.sent.clear();
    }
    const shown = new Set(this.drawn.parts);
    for (const part of this.sent.keys()) if (!shown.has(part)) this.sent.delete(part);
    const changed = [];
    for (const part of shown) {
      const sent = this.sent.get(part);
      if (sent?.version === part.version) continue;
      changed.push([part, sent ? Math.max(0, sent.length - 1) : 0]);
      this.sent.set(part, { version: part.version, length: part.xs.length });
    }
    // The rows of every changed column in one buffer, handed over with the frame.
    let size = 0;
    for (const [part, from] of changed) size += (part.xs.length - from) * part.table.length;
    const values = new Float64Array(size);
    let offset = 0;
    const rows = (column, from) => {
      const view = values.subarray(offset, offset + column.length - from);
      for (let i = from; i < column.length; i++) view[i - from] = column[i] ?? NaN;
      offset += view.length;
      return view;
    };
    const updates = changed.map(([part, from]) => ({
      table: part.id,
      length: part.xs.length,
      from,
      columns: part.table.map((column) => rows(column, from)),
    }));
    const ratio = uPlot.pxRatio;
    const { left, top, width, height } = u.bbox;
    const { x, y } = u.scales;
    const frame = {
      width,
      height,
      ratio,
      x: { min: x.min, max: x.max },
      y: { min: y.min, max: y.max, log },
      updates,
      background: this.colors.background,
      bands: this.drawn.bands,
      lines: this.drawn.lines,
      marks: this.marks.map((mark) => ({ ...mark, xs: Float64Array.from(mark.xs, (v) => v ?? NaN) })),
    };
    this.layer.draw(frame, { left: left / ratio, top: top / ratio, width: width / ratio, height: height / ratio });
  }

  /** Resolves once what was last given to the chart is drawn (the layer may draw later). */
  async painted() {
    // uPlot redraws in a microtask of its own, which sends the layer its frame: after it.
    await null;
    await this.layer?.drawn();
  }

  /** Ask for a size; a new width is used by the next query's max_points. */
  resize() {
    const width = this.plot.clientWidth;
    if (width > 0) this.width = width;
    if (this.uplot && width > 0 && width !== this.uplot.width) {
      this.uplot.setSize({ width, height: HEIGHT });
    }
  }

  /** How many buckets are worth loading: one per device pixel of the plot. */
  get maxPoints() {
    // The width is kept (resize() follows it): reading it would lay out the page on every
    // live update.
    this.width ??= this.plot.clientWidth || null;
    const width = this.width ?? 600;
    return Math.max(50, Math.min(10000, Math.round(width * (window.devicePixelRatio || 1))));
  }

  async downloadPng() {
    if (!this.uplot) return;
    const { bbox } = this.uplot;
    const source = this.uplot.ctx.canvas;
    const data = await this.layer?.bitmap();
    const ratio = source.width / this.uplot.width;
    const line = 18 * ratio;
    const canvas = document.createElement("canvas");
    canvas.width = source.width;
    canvas.height = source.height + line * (1.5 + this.entries.length);
    const ctx = canvas.getContext("2d");
    const colors = chartColors();
    ctx.fillStyle = colors.background;
    ctx.fillRect(0, 0, canvas.width, canvas.height);
    ctx.fillStyle = colors.text;
    ctx.font = `bold ${13 * ratio}px system-ui, sans-serif`;
    ctx.fillText(this.metric, 8 * ratio, line);
    ctx.drawImage(source, 0, line * 1.5);
    if (data) ctx.drawImage(data, bbox.left, line * 1.5 + bbox.top);
    ctx.font = `${12 * ratio}px system-ui, sans-serif`;
    this.entries.forEach((entry, i) => {
      const y = source.height + line * (1.5 + i + 0.8);
      ctx.fillStyle = entry.run.color;
      ctx.fillRect(8 * ratio, y - 9 * ratio, 10 * ratio, 10 * ratio);
      ctx.fillStyle = colors.text;
      ctx.fillText(entry.run.label, 24 * ratio, y);
    });
    const run = this.entries.length === 1 ? this.entries[0].run.label : "compare";
    canvas.toBlob((blob) => saveBlob(blob, `${fileName(run, this.metric)}.png`), "image/png");
  }

  destroy() {
    this.layer?.destroy();
    this.layer = null;
    this.sent.clear();
    this.dots = []; // in uPlot's cursor overlay, which goes with it
    this.uplot?.destroy();
    this.uplot = null;
  }
}

/** Each run's NaN/±inf steps placed on the x axis, in its colour: [{color, xs, kinds}]. */
function marksOf(entries, parts, axis) {
  return entries.flatMap((entry, i) =>
    entry.invalid?.length
      ? [
          {
            color: entry.run.color,
            xs: invalidX(entry.series, parts[i].xs, axis, entry.invalid),
            kinds: entry.invalid.map((s) => s.kind),
          },
        ]
      : [],
  );
}

/**
 * A run's lines as part() makes them: the raw values, faint when their EMA is drawn over. A
 * group's mean is wider, a run shown with its group thinner and fainter.
 */
function lineStyles(run, smooth) {
  const width = run.aggregate ? 2.25 : run.member ? 1 : 1.5;
  const stroke = run.member ? fade(run.color, 0.6) : run.color;
  if (!smooth) return [{ stroke, width }];
  return [
    { stroke: fade(run.color, run.member ? 0.2 : 0.3), width: 1 },
    { stroke, width: width + 0.25 },
  ];
}

/**
 * uPlot's data: the x extent of every table (runs and marks, see xExtent) and the y extent of
 * every value drawn, from which it sets its scales. It draws no series (the layer does).
 * @param {number[]} x
 * @param {number[]} y
 * @returns {uPlot.AlignedData}
 */
function extentData([xa, xb], [ya, yb]) {
  if (!(xb >= xa)) return [[], []];
  const ys = yb >= ya ? [ya, yb] : [null, null];
  return xa === xb ? [[xa], [ys[0]]] : [[xa, xb], ys];
}

/**
 * The lowest and highest value of a table's ys in rows [from, to), widening `start`.
 * @param {Array<Array<number | null>>} table
 * @param {number} from
 * @param {number} to
 * @param {number[]} [start]
 * @returns {[number, number]}
 */
function extent(table, from, to, [lo, hi] = [Infinity, -Infinity]) {
  for (let c = 1; c < table.length; c++) {
    const column = table[c];
    for (let i = from; i < to; i++) {
      const v = column[i];
      if (v == null) continue;
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    }
  }
  return [lo, hi];
}

/**
 * Whether `parts` would be drawn where the last drawing put them, within a quarter of a
 * canvas pixel: the same parts (made again, they are drawn again), the same y extent (so the
 * same y scale), the same rows, and every x and y position moved less than that. The x scale
 * spans [na, nb], the x extent of the parts and the marks (see xExtent). A part changes
 * only from the last row it had when drawn (see extend()): the rows before it moved only
 * with the x scale, and positions are linear in x, so none of them moved more than its first
 * or that last row's old x would; those and the last row are checked.
 */
function samePlace(drawn, parts, [na, nb], y, bbox, log) {
  if (!drawn || drawn.parts.length !== parts.length) return false;
  if (y[0] !== drawn.y[0] || y[1] !== drawn.y[1]) return false;
  const [oa, ob] = drawn.x;
  if (!(ob > oa && nb > na)) return false;
  const xMoved = (u, v) => !(Math.abs(((v - na) / (nb - na) - (u - oa) / (ob - oa)) * bbox.width) < TOLERANCE);
  const scaled = (v) => (log ? Math.log10(v) : v);
  const [ya, yb] = [scaled(y[0]), scaled(y[1])];
  // The y extent stands for the scale: the scale is wider, so positions move less than this.
  const yPx = yb > ya ? bbox.height / (yb - ya) : Infinity;
  for (let t = 0; t < parts.length; t++) {
    const { table, version } = parts[t];
    const { length, row } = drawn.ends[t];
    if (parts[t] !== drawn.parts[t] || table[0].length !== length) return false;
    if (!length) continue;
    const [first, last] = [length > 1 ? table[0][0] : row[0], row[0]];
    if (xMoved(first, first) || xMoved(last, last)) return false;
    if (version === drawn.ends[t].version) continue;
    const i = length - 1;
    if (table[0][i] !== last && xMoved(last, table[0][i])) return false;
    for (let c = 1; c < table.length; c++) {
      const [u, v] = [row[c], table[c][i]];
      if (u === v) continue;
      if (u == null || v == null || !(Math.abs(scaled(v) - scaled(u)) * yPx < TOLERANCE)) return false;
    }
  }
  return true;
}

/**
 * The lowest and highest x of tables. Steps and times ascend: their ends are read. Another
 * metric's values (see xValues) need not, and may be null: with `scan`, every one is.
 * @returns {[number, number]}
 */
function xExtent(tables, scan = false) {
  let lo = Infinity;
  let hi = -Infinity;
  for (const [xs] of tables) {
    if (!xs.length) continue;
    const [first, last] = [xs[0], xs[xs.length - 1]];
    if (!scan && first != null && last != null) {
      lo = Math.min(lo, first);
      hi = Math.max(hi, last);
      continue;
    }
    for (const x of xs) {
      if (x == null) continue;
      if (x < lo) lo = x;
      if (x > hi) hi = x;
    }
  }
  return [lo, hi];
}
