// Every metric of the chosen runs as a chart, grouped by name prefix. A chart loads when it
// scrolls into view, asking the server for at most one bucket per pixel; a drag re-queries
// the selected range; live updates fetch only the steps after the last one held.

import * as api from "../lib/api.js";
import { debug } from "../lib/debug.js";
import { h, perFrame } from "../lib/dom.js";
import { THEME_EVENT } from "../lib/theme.js";
import { roundZoom, xMetric } from "../lib/url.js";
import { Chart } from "./chart.js";
import { GroupHeld, groupsOf } from "./groups.js";
import { groupMetrics } from "./order.js";
import { Series, pointBucket, stepRange, xValues } from "./series.js";

/** Live changes wait at most this long for other runs' changes before being drawn. */
const FLUSH_MAX_MS = 1000;
/** Live changes are drawn in at most one frame this often. */
const LIVE_FRAME_MS = 250;
/** Charts whose new points one live request asks for (the server takes at most 64). */
const TAIL_METRICS = 32;

/**
 * A run on the board; a group drawn as one is a run with `aggregate` (see groupEntry), one of
 * its runs drawn beside it one with `member`.
 * @typedef {object} BoardRef
 * @property {string} project
 * @property {string} run
 * @property {string} key
 * @property {string} label
 * @property {string} color
 * @property {number} t0 when the run was created, in seconds (relative time counts from it)
 * @property {string | null} group its group's name, or null
 * @property {{key: string, runs: number, band: string, expanded: boolean}} [aggregate]
 * @property {boolean} [member]
 */

/** Runs of one project read together; the server takes at most this many per request. */
const RUNS_PER_READ = 64;

/** Runs grouped by project, in order, at most RUNS_PER_READ a group: [[project, refs]]. */
function byProject(refs) {
  const groups = new Map();
  for (const ref of refs) groups.set(ref.project, [...(groups.get(ref.project) ?? []), ref]);
  const parts = [];
  for (const [project, group] of groups) {
    for (let i = 0; i < group.length; i += RUNS_PER_READ) parts.push([project, group.slice(i, i + RUNS_PER_READ)]);
  }
  return parts;
}

/**
 * What the board tells its page: the zoomed x range ([lo, hi], or null when unzoomed), the
 * metrics it has and the ones shown, a live frame drawn, the groups shown with their runs.
 * @typedef {object} BoardHandlers
 * @property {(range: number[] | null) => void} [onZoom]
 * @property {(names: string[], shown: string[]) => void} [onMetrics]
 * @property {() => void} [onFrame]
 * @property {(expand: string[]) => void} [onExpand]
 */

export class Board {
  /**
   * @param {BoardRef[]} refs
   * @param {import("../lib/url.js").View} view
   * @param {BoardHandlers} [handlers]
   */
  constructor(refs, view, { onZoom = () => {}, onMetrics = () => {}, onFrame = () => {}, onExpand = () => {} } = {}) {
    this.refs = refs;
    this.view = view;
    // With view.groups, the runs of each group are drawn as one (see groupEntries).
    this.groups = groupsOf(refs, new Set(refs.map((ref) => ref.project)).size === 1);
    this.onExpand = onExpand;
    this.onZoom = onZoom;
    this.onMetrics = onMetrics;
    this.onFrame = onFrame;
    this.range = view.zoom ?? null; // [lo, hi] in x units while zoomed
    this.summaries = new Map(); // run key -> Map(metric -> summary)
    this.slots = new Map(); // metric -> slot
    this.refreshing = new Map(); // run key -> {running, again}
    this.dirty = new Set(); // slots changed by live updates, drawn together
    this.dirtySince = null;
    this.frame = null; // the live frame asked for (a timer, then an animation frame)
    this.lastFrame = -Infinity;
    this.wanted = false;
    this.el = h("div", { class: "board" });
    this.observer = new IntersectionObserver((seen) => this.onVisible(seen), {
      rootMargin: "200px 0px",
    });
    this.resizer = new ResizeObserver(() => {
      for (const slot of this.slots.values()) slot.chart?.resize();
    });
    this.resizer.observe(this.el);
    // A new theme: every chart drawn again in its colours.
    this.onTheme = () => {
      for (const slot of this.slots.values()) if (slot.loaded) this.drawSlot(slot);
    };
    window.addEventListener(THEME_EVENT, this.onTheme);
  }

  /** Fetch every run's metric summaries and lay out the charts. */
  async load() {
    // The runs of one project in one request, not one each.
    await Promise.all(
      byProject(this.refs).map(async ([project, refs]) => {
        const lists =
          refs.length === 1
            ? [await api.metrics(project, refs[0].run)]
            : (await api.metricsOfRuns(project, refs.map((ref) => ref.run))).runs.map((r) => r.metrics);
        refs.forEach((ref, i) => this.summaries.set(ref.key, new Map(lists[i].map((m) => [m.metric, m]))));
      }),
    );
    this.render();
  }

  /** Every metric name of every run, in first-seen order. */
  metricNames() {
    const names = new Set();
    for (const summaries of this.summaries.values()) for (const name of summaries.keys()) names.add(name);
    return [...names];
  }

  shownNames() {
    const chosen = this.view.metrics.length ? new Set(this.view.metrics) : null;
    const filter = this.view.filter.toLowerCase();
    return this.metricNames().filter(
      (name) => (!chosen || chosen.has(name)) && (!filter || name.toLowerCase().includes(filter)),
    );
  }

  render() {
    const shown = this.shownNames();
    const groups = groupMetrics(shown);
    const sections = groups.map(({ prefix, metrics }) =>
      h(
        "details",
        { class: "group", open: true, dataset: { prefix } },
        h(
          "summary",
          {},
          h("span", { class: "group-name", text: prefix ? `${prefix}/` : "top level" }),
          h("span", { class: "group-count", text: `${metrics.length}` }),
        ),
        h("div", { class: "charts" }, metrics.map((name) => this.slot(name).el)),
      ),
    );
    const kept = new Set(shown);
    for (const slot of this.slots.values()) slot.runs = null;
    for (const [name, slot] of this.slots) {
      if (!kept.has(name)) {
        this.observer.unobserve(slot.el);
        slot.chart?.destroy();
        slot.chart = null;
        this.dirty.delete(slot);
        this.slots.delete(name);
      }
    }
    this.el.replaceChildren(...sections);
    this.onMetrics(this.metricNames(), shown);
    requestAnimationFrame(() => this.checkReady());
  }

  slot(metric) {
    let slot = this.slots.get(metric);
    if (!slot) {
      slot = {
        metric,
        el: h("div", { class: "chart-slot", dataset: { metric } }),
        chart: null,
        full: new Map(), // run key -> {series, invalid}
        zoomed: null,
        groups: null, // group key -> GroupHeld, while groups are drawn (see loadGroups)
        groupsZoomed: null,
        groupsLoading: null, // the load under way, and whether another is wanted after it
        groupsStale: false,
        runs: null, // how many runs have this metric (see buckets())
        loaded: false,
        drawn: false,
        visible: false,
        stale: false,
      };
      this.slots.set(metric, slot);
      this.observer.observe(slot.el);
    }
    return slot;
  }

  onVisible(seen) {
    for (const entry of seen) {
      const slot = this.slots.get(entry.target.dataset.metric);
      if (!slot) continue;
      slot.visible = entry.isIntersecting;
      if (!slot.visible) continue;
      if (slot.stale) {
        slot.stale = false;
        if (slot.groupsStale) this.refreshGroups(slot);
        else this.drawSlot(slot);
      }
      if (!slot.chart) {
        slot.chart = new Chart(slot.metric, {
          onSelect: (lo, hi) => this.zoom(lo, hi),
          onReset: () => this.resetZoom(),
          onExpand: (key) => this.expand(key),
        });
        slot.el.replaceChildren(slot.chart.el);
        this.loadSlot(slot).catch((error) => this.failed(slot, error));
      }
    }
  }

  failed(slot, error) {
    slot.chart?.showNote(`Could not load: ${error.message}`);
  }

  /**
   * Buckets to ask for per run: one per pixel for one or two runs. With more runs overlaid
   * fewer per run (never under 120): overlapping lines cannot show more, and every segment
   * costs drawing time on each live update. The min–max bands keep the extremes.
   */
  buckets(slot) {
    const width = slot.chart.maxPoints;
    // Kept until a run gains a metric (render() forgets it): live updates ask on every point.
    slot.runs ??= Math.max(1, this.refsWith(slot.metric).length);
    const runs = slot.runs;
    return Math.max(Math.min(width, 120), Math.min(width, Math.round((2 * width) / runs)));
  }

  refsWith(metric) {
    return this.refs.filter((ref) => this.summaries.get(ref.key)?.has(metric));
  }

  async loadSlot(slot) {
    const refs = this.refsWith(slot.metric);
    // With several runs, draw each as it arrives (at most once a frame) rather than wait
    // for the slowest.
    const early = refs.length > 1 && !this.range ? perFrame(() => slot.loaded || this.drawSlot(slot, false)) : null;
    // The runs of one project come in one request, not one each.
    await Promise.all(
      byProject(refs).map(async ([project, group]) => {
        await (group.length === 1 ? this.loadRun(slot, group[0]) : this.loadRuns(slot, project, group));
        early?.();
      }),
    );
    if (this.grouping) await this.loadGroups(slot);
    slot.loaded = true;
    if (this.range) await this.loadZoomed(slot, this.range);
    this.drawSlot(slot);
  }

  /** Whether groups are drawn as one: asked for, and some run has a group. */
  get grouping() {
    return this.view.groups && this.groups.size > 0;
  }

  /**
   * Each group's aggregate of the slot's metric, one request a group; within `range` (x
   * units) into slot.groupsZoomed, else the whole series into slot.groups.
   */
  async loadGroups(slot, range = null) {
    const held = new Map();
    const full = slot.groups;
    await Promise.all(
      [...this.groups.values()].map(async (group) => {
        const names = group.refs.filter((ref) => this.summaries.get(ref.key)?.has(slot.metric)).map((ref) => ref.run);
        if (!names.length) return;
        let steps = null;
        if (range) {
          const whole = full?.get(group.key)?.series(this.view.band, false);
          steps = whole ? stepRange(whole, xValues(whole, this.view.x, 0), this.view.x, range[0], range[1]) : null;
          if (!steps) return;
        }
        const body = await api.groupPoints(group.project, names, slot.metric, {
          maxPoints: slot.chart.maxPoints,
          start: steps?.[0] ?? null,
          end: steps?.[1] ?? null,
          x: this.xMetric,
        });
        const answer = body.groups.find((g) => g.group === group.name);
        if (answer) held.set(group.key, new GroupHeld(answer));
      }),
    );
    if (range) {
      if (this.range === range) slot.groupsZoomed = held;
    } else {
      slot.groups = held;
    }
  }

  /**
   * Load a slot's groups again after live points (one load at a time; changes meanwhile
   * ask for one more), and draw it.
   */
  refreshGroups(slot) {
    if (slot.groupsLoading) {
      slot.groupsStale = true;
      return;
    }
    slot.groupsStale = false;
    slot.groupsLoading = this.loadGroups(slot)
      .then(() => this.drawSlot(slot, true, { live: true }))
      .catch(() => {}) // the next live change tries again
      .finally(() => {
        slot.groupsLoading = null;
        if (slot.groupsStale) this.refreshGroups(slot);
      });
  }

  /** Show or hide a group's runs beside its mean, on every chart. */
  expand(key) {
    const name = this.groups.get(key)?.name;
    if (name == null) return;
    const expanded = new Set(this.view.expand);
    if (expanded.has(name)) expanded.delete(name);
    else expanded.add(name);
    this.view = { ...this.view, expand: [...expanded] };
    this.onExpand(this.view.expand);
    for (const slot of this.slots.values()) if (slot.loaded) this.drawSlot(slot);
  }

  /** The whole series of one run, downsampled to the chart's width. */
  async loadRun(slot, ref) {
    // Into the map held when asked: a new x axis (see reload) replaces it meanwhile.
    const full = slot.full;
    const summary = this.summaries.get(ref.key).get(slot.metric);
    const [body, invalid] = await Promise.all([
      api.points(ref.project, ref.run, slot.metric, { maxPoints: this.buckets(slot), x: this.xMetric }),
      summary.invalid_count ? api.invalid(ref.project, ref.run, slot.metric) : [],
    ]);
    full.set(ref.key, { series: Series.from(body), invalid, corrected: summary.corrected });
  }

  /** The whole series of several runs of one project, in one request. */
  async loadRuns(slot, project, refs) {
    const full = slot.full;
    const [body, invalids] = await Promise.all([
      api.pointsOfRuns(
        project,
        refs.map((ref) => ref.run),
        slot.metric,
        { maxPoints: this.buckets(slot), x: this.xMetric },
      ),
      Promise.all(
        refs.map((ref) =>
          this.summaries.get(ref.key).get(slot.metric).invalid_count
            ? api.invalid(ref.project, ref.run, slot.metric)
            : [],
        ),
      ),
    ]);
    const byRun = new Map(body.runs.map((entry) => [entry.run, entry]));
    refs.forEach((ref, index) => {
      const entry = byRun.get(ref.run);
      if (!entry) return;
      const { corrected } = this.summaries.get(ref.key).get(slot.metric);
      full.set(ref.key, { series: Series.from(entry), invalid: invalids[index], corrected });
    });
  }

  entries(slot) {
    const held = slot.zoomed ?? slot.full;
    const entry = (ref, run = ref) => ({ run, t0: ref.t0, ...held.get(ref.key), last: this.lastReport(slot, ref) });
    if (!this.grouping || !slot.groups) return this.refs.filter((ref) => held.has(ref.key)).map((ref) => entry(ref));
    // A group in the place of its first run; its runs after it when it is expanded.
    const entries = [];
    const shown = new Set();
    for (const ref of this.refs) {
      const group = ref.group ? this.groups.get(`${ref.project}/${ref.group}`) : null;
      if (!group) {
        if (held.has(ref.key)) entries.push(entry(ref));
        continue;
      }
      if (shown.has(group.key)) continue;
      shown.add(group.key);
      const aggregate = (slot.groupsZoomed ?? slot.groups).get(group.key);
      const expanded = this.view.expand.includes(group.name);
      if (aggregate) entries.push(this.groupEntry(group, aggregate, expanded));
      if (!expanded) continue;
      for (const member of group.refs) if (held.has(member.key)) entries.push(entry(member, { ...member, member: true }));
    }
    return entries;
  }

  /** A group as the chart draws it: a run whose line is the mean and whose band is the band. */
  groupEntry(group, aggregate, expanded) {
    const series = aggregate.series(this.view.band, this.view.x === "relative");
    const n = series.length;
    const run = {
      key: `group:${group.key}`,
      label: group.label,
      color: group.color,
      aggregate: { key: group.key, runs: aggregate.body.runs.length, band: this.view.band, expanded },
    };
    const last = n ? { step: series.stepMax[n - 1], value: series.mean[n - 1] } : null;
    // Steps where some of its runs reported NaN/±inf: marked on the mean as a run's are.
    return { run, t0: 0, series, invalid: aggregate.body.invalid ?? [], last };
  }

  /**
   * A run's last report of a slot's metric, from its summary (which the stream keeps
   * current): {step, value}, or {step, kind} when the last step was NaN/inf (a summary's
   * last value is its last finite one, its last step any). Null when it has none.
   */
  lastReport(slot, ref) {
    const summary = this.summaries.get(ref.key)?.get(slot.metric);
    if (!summary) return null;
    const invalid = slot.full.get(ref.key)?.invalid ?? [];
    const bad = invalid.length ? invalid[invalid.length - 1] : null;
    if (bad?.step === summary.last_step) return { step: bad.step, kind: bad.kind };
    return summary.last == null ? null : { step: summary.last_step, value: summary.last };
  }

  drawSlot(slot, complete = true, { live = false } = {}) {
    if (!slot.chart) return;
    slot.chart.draw(this.entries(slot), this.view, slot.zoomed ? this.range : null, { live });
    if (!complete || slot.drawn) return;
    // Drawn once its layer has drawn it too (a worker may, a little later).
    slot.chart.painted().then(() => {
      slot.drawn = true;
      this.checkReady();
    });
  }

  /** debug.ready: every chart on screen has drawn all its runs (set once it is painted). */
  checkReady() {
    if (debug.ready || this.readyPending) return;
    const height = window.innerHeight;
    for (const slot of this.slots.values()) {
      const box = slot.el.getBoundingClientRect();
      const onScreen = box.bottom > 0 && box.top < height && box.width > 0;
      if (onScreen && !slot.drawn) return;
    }
    this.readyPending = true;
    requestAnimationFrame(() => {
      debug.readyAt = performance.now();
      debug.ready = true;
    });
  }

  /** The metric the x axis is over, or null (see lib/url.js xMetric). */
  get xMetric() {
    return xMetric(this.view.x);
  }

  /**
   * New x-axis, smoothing or log scale: redraw from what is held (a new axis unzooms). An
   * axis over another metric (or another one) loads every chart again: the server pairs
   * its points with that metric's.
   */
  setView(view) {
    const relayout =
      view.filter !== this.view.filter || view.metrics.join("\n") !== this.view.metrics.join("\n");
    const unzoom = view.x !== this.view.x && this.range;
    const reload = xMetric(view.x) !== this.xMetric;
    this.view = view;
    if (unzoom) this.resetZoom();
    if (relayout) this.render();
    for (const slot of this.slots.values()) {
      if (reload) this.reload(slot);
      else if (slot.loaded && this.grouping && !slot.groups) this.loadGroupsAndDraw(slot);
      else if (slot.loaded) this.drawSlot(slot);
    }
  }

  /** Groups turned on: a chart already drawn gets its groups (and the zoomed ones), then draws. */
  async loadGroupsAndDraw(slot) {
    try {
      await this.loadGroups(slot);
      if (this.range) await this.loadGroups(slot, this.range);
      this.drawSlot(slot);
    } catch (error) {
      this.failed(slot, error);
    }
  }

  /** Forget what a chart holds; one on the page loads again at once, another when shown. */
  reload(slot) {
    slot.full = new Map();
    slot.zoomed = null;
    slot.groups = null;
    slot.groupsZoomed = null;
    slot.loaded = false;
    this.dirty.delete(slot);
    if (slot.chart) this.loadSlot(slot).catch((error) => this.failed(slot, error));
  }

  async zoom(lo, hi) {
    const range = roundZoom(lo, hi);
    this.range = range;
    this.onZoom(range);
    const loaded = [...this.slots.values()].filter((slot) => slot.loaded);
    await Promise.all(
      loaded.map(async (slot) => {
        await this.loadZoomed(slot, range);
        if (this.range === range) this.drawSlot(slot);
      }),
    );
  }

  /** Each run's steps inside the selected x range, re-queried at the chart's resolution. */
  async loadZoomed(slot, range) {
    const zoomed = new Map();
    const groups = this.grouping && slot.groups ? this.loadGroups(slot, range) : null;
    await Promise.all(
      this.refs
        .filter((ref) => slot.full.has(ref.key))
        .map(async (ref) => {
          const { series, invalid } = slot.full.get(ref.key);
          const xs = xValues(series, this.view.x, ref.t0);
          const steps = stepRange(series, xs, this.view.x, range[0], range[1]);
          const body = steps
            ? await api.points(ref.project, ref.run, slot.metric, {
                maxPoints: this.buckets(slot),
                start: steps[0],
                end: steps[1],
                x: this.xMetric,
              })
            : { buckets: [] };
          zoomed.set(ref.key, { series: Series.from(body), invalid });
        }),
    );
    await groups;
    if (this.range === range) slot.zoomed = zoomed;
  }

  resetZoom() {
    if (!this.range) return;
    this.range = null;
    this.onZoom(null);
    for (const slot of this.slots.values()) {
      slot.zoomed = null;
      slot.groupsZoomed = null;
      if (slot.loaded) this.drawSlot(slot);
    }
  }

  /** A run changed (from its stream): fetch what is new, one refresh at a time per run. */
  update(ref) {
    const state = this.refreshing.get(ref.key) ?? { running: false, again: false };
    this.refreshing.set(ref.key, state);
    if (state.running) {
      state.again = true;
      return;
    }
    state.running = true;
    this.refresh(ref)
      .catch(() => {}) // the next change retries; the stream shows the connection state
      .finally(() => {
        state.running = false;
        if (state.again) {
          state.again = false;
          this.update(ref);
        }
        this.flushSoon();
      });
  }

  /**
   * A run's changed metrics as its stream pushed them: summaries and the points after the
   * last step it sent. A chart that holds the series up to there takes the points; anything
   * else (a gap, a correction, new NaN/inf steps, more points than pushed) is fetched.
   */
  push(ref, changes) {
    const summaries = this.summaries.get(ref.key) ?? new Map();
    this.summaries.set(ref.key, summaries);
    let added = false;
    for (const { points, more, ...summary } of changes) {
      added ||= !summaries.has(summary.metric);
      summaries.set(summary.metric, summary);
    }
    if (added) this.render();
    // Pushed points come without the x axis' metric: the server pairs them when fetched.
    let fetch = this.xMetric != null;
    const reload = [];
    for (const change of fetch ? [] : changes) {
      const slot = this.slots.get(change.metric);
      if (!slot?.loaded) continue; // loads everything when it is first shown
      const held = slot.full.get(ref.key);
      const last = held?.series.lastStep ?? -1;
      const follows =
        held &&
        !change.more &&
        held.corrected === change.corrected &&
        held.invalid.length === change.invalid_count &&
        held.series.points + change.points.length === change.count &&
        (change.points.length === 0 || change.points[0][0] > last);
      if (!follows) {
        fetch = true;
        continue;
      }
      held.series.append({ buckets: change.points.map(pointBucket) }, { merge: true });
      // Two points at one step, or a tail grown past the chart's width: load it again.
      if (held.series.points !== change.count || held.series.length > 2 * this.buckets(slot)) {
        reload.push(slot);
        continue;
      }
      this.markDirty(slot);
    }
    if (fetch) this.update(ref);
    for (const slot of reload) {
      this.loadRun(slot, ref)
        .then(() => this.markDirty(slot))
        .catch(() => {}) // the next change retries
        .finally(() => this.flushSoon());
    }
    this.flushSoon();
  }

  markDirty(slot) {
    // The groups' aggregates are the server's: asked for again when drawn (see flush).
    if (this.grouping && slot.groups) slot.groupsStale = true;
    this.dirty.add(slot);
    this.dirtySince ??= performance.now();
  }

  async refresh(ref) {
    const list = await api.metrics(ref.project, ref.run);
    const before = this.summaries.get(ref.key) ?? new Map();
    const now = new Map(list.map((m) => [m.metric, m]));
    this.summaries.set(ref.key, now);
    if (list.some((m) => !before.has(m.metric))) this.render();
    const changed = [];
    const growing = []; // charts whose run only has new points after those held
    await Promise.all(
      [...this.slots.values()].map(async (slot) => {
        const summary = now.get(slot.metric);
        if (!slot.loaded || !summary) return;
        const held = slot.full.get(ref.key);
        // Not held yet, or points replaced or removed (SDK corrections): load it again.
        if (!held || held.corrected !== summary.corrected) {
          await this.loadRun(slot, ref);
          changed.push(slot);
          return;
        }
        if (held.invalid.length !== summary.invalid_count) {
          held.invalid = await api.invalid(ref.project, ref.run, slot.metric);
          changed.push(slot);
        }
        if (held.series.points < summary.count) growing.push({ slot, held, summary });
      }),
    );
    // The new points of every growing chart, a request per TAIL_METRICS charts.
    for (let i = 0; i < growing.length; i += TAIL_METRICS) {
      const part = growing.slice(i, i + TAIL_METRICS);
      const body = await api.pointsOfMetrics(
        ref.project,
        ref.run,
        part.map(({ slot }) => slot.metric),
        {
          maxPoints: Math.min(...part.map(({ slot }) => this.buckets(slot))),
          start: Math.min(...part.map(({ held }) => (held.series.lastStep ?? -1) + 1)),
          x: this.xMetric,
        },
      );
      const answers = new Map(body.metrics.map((entry) => [entry.metric, entry]));
      await Promise.all(
        part.map(async ({ slot, held, summary }) => {
          const answer = answers.get(slot.metric);
          if (answer) held.series.append(answer, { merge: true });
          // Points at steps already held (a late event, a second event at one step) or a
          // tail grown past the chart's width: load the series again rather than show it
          // wrong.
          if (held.series.points < summary.count || held.series.length > 2 * this.buckets(slot)) {
            await this.loadRun(slot, ref);
          }
          changed.push(slot);
        }),
      );
    }
    for (const slot of changed) this.markDirty(slot);
  }

  /** Something outside the charts (the page's header) changed: draw it in the next live frame. */
  wantFrame() {
    this.wanted = true;
    this.flushSoon();
  }

  /**
   * Draw the changed charts, and call onFrame, in one frame once no run is still catching up
   * (several runs polled together change together), or after FLUSH_MAX_MS at the latest.
   * Live frames come at most every LIVE_FRAME_MS: the points of runs reporting one after
   * another are drawn together, so the page lays out, paints and composites once for them.
   */
  flushSoon() {
    if (this.frame || !(this.dirty.size || this.wanted)) return;
    const busy = [...this.refreshing.values()].some((state) => state.running);
    if (this.dirty.size && busy && performance.now() - this.dirtySince < FLUSH_MAX_MS) return;
    const wait = Math.max(0, this.lastFrame + LIVE_FRAME_MS - performance.now());
    this.frame = setTimeout(() => {
      this.frame = requestAnimationFrame(() => this.flush());
    }, wait);
  }

  flush() {
    this.frame = null;
    this.lastFrame = performance.now();
    this.wanted = false;
    this.onFrame();
    if (!this.dirty.size) return;
    this.dirtySince = null;
    const start = performance.now();
    for (const dirty of this.dirty) {
      // A zoomed chart keeps its range; only its legend's last values follow.
      if (dirty.zoomed) {
        if (dirty.visible) dirty.chart?.follow(this.entries(dirty));
        continue;
      }
      // A chart off screen is drawn when it scrolls back into view.
      if (dirty.visible && dirty.groupsStale) this.refreshGroups(dirty);
      else if (dirty.visible) this.drawSlot(dirty, true, { live: true });
      else dirty.stale = true;
    }
    this.dirty.clear();
    debug.updates += 1;
    // uPlot draws in a microtask of its own: this one runs after those.
    queueMicrotask(() => {
      debug.lastUpdateMs = performance.now() - start;
    });
  }

  destroy() {
    window.removeEventListener(THEME_EVENT, this.onTheme);
    this.observer.disconnect();
    this.resizer.disconnect();
    for (const slot of this.slots.values()) slot.chart?.destroy();
  }
}
