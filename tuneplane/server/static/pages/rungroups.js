// The runs page's group charts: when the listed runs hold groups, a chosen metric of each
// group drawn as one mean line with its runs' min–max or ±std band (the compare view's board,
// its groups drawn as one: …/groups/points), where a run's NaN/±inf is marked on the mean
// and each group's runs are one click away ("show its N runs" in the legend, or the group's
// link in the table). The metric and the band are in the address: gmetric= (repeated for
// several charts) and gband=std. Each refresh of the table brings the runs that changed (a
// new point count or update time) into the charts, as a comparison's stream does.

import { Board } from "../charts/board.js";
import { groupMetrics } from "../charts/order.js";
import * as api from "../lib/api.js";
import { runColor } from "../lib/colors.js";
import { h } from "../lib/dom.js";
import { BANDS, replaceParams } from "../lib/url.js";

/** A group's runs charted, at most (as a comparison and …/groups/points take). */
const PER_GROUP = 64;

/** The listed runs that have a group, at most PER_GROUP of each, in the table's order. */
function groupedRuns(runs) {
  const counts = new Map();
  return runs.filter((run) => {
    if (!run.group) return false;
    const seen = counts.get(run.group) ?? 0;
    counts.set(run.group, seen + 1);
    return seen < PER_GROUP;
  });
}

export class GroupCharts {
  /** @param {string} project */
  constructor(project) {
    this.project = project;
    const q = new URLSearchParams(location.search);
    this.metrics = q.getAll("gmetric");
    this.band = BANDS.includes(q.get("gband") ?? "") ? q.get("gband") : "minmax";
    this.expand = [];
    this.signature = null;
    this.board = null;
    this.seen = new Map(); // run -> what the table said of it last: the charts hold that
    this.turn = 0; // the charts being made: a later making wins
    this.names = [];
    this.metricSelect = h("select", { name: "gmetric", "aria-label": "group chart metric", onchange: () => this.choose([this.metricSelect.value]) });
    this.bandSelect = h(
      "select",
      { name: "gband", "aria-label": "group chart band", onchange: () => this.setBand(this.bandSelect.value) },
      BANDS.map((value) => h("option", { value, text: value === "std" ? "mean ± std band" : "mean, min–max band", selected: value === this.band })),
    );
    this.count = h("span", { class: "muted grouped-count" });
    this.charts = h("div", { class: "group-board" });
    this.el = h(
      "section",
      { class: "panel group-charts", hidden: true },
      h("div", { class: "toolbar" }, h("h2", { text: "Groups" }), this.count, h("span", { class: "spacer" }), this.metricSelect, this.bandSelect),
      this.charts,
    );
  }

  /** The runs the table lists: the charts are made again when their groups change. */
  async show(runs) {
    const grouped = groupedRuns(runs);
    const signature = JSON.stringify(grouped.map((run) => [run.run, run.group]));
    const before = this.seen;
    this.seen = new Map(grouped.map((run) => [run.run, `${run.point_count} ${run.updated_at}`]));
    if (signature === this.signature) {
      for (const ref of this.board?.refs ?? []) {
        if (before.get(ref.run) !== this.seen.get(ref.run)) this.board?.update(ref);
      }
      return;
    }
    this.signature = signature;
    try {
      await this.draw(grouped);
    } catch (error) {
      this.signature = null; // the next refresh of the table tries again
      this.charts.replaceChildren(h("p", { class: "notice error", text: `Could not chart the groups: ${error.message}` }));
      throw error;
    }
  }

  /** The charts of these grouped runs, made anew (a later call wins over one under way). */
  async draw(grouped) {
    const turn = ++this.turn;
    this.board?.destroy();
    this.board = null;
    this.el.hidden = grouped.length === 0;
    if (!grouped.length) return;
    const groups = new Set(grouped.map((run) => run.group)).size;
    this.count.textContent = `${groups} group${groups === 1 ? "" : "s"} of ${grouped.length} listed runs`;
    const names = await this.metricNames(grouped);
    if (turn !== this.turn) return;
    this.names = names;
    const chosen = this.metrics.filter((name) => this.names.includes(name));
    this.metrics = chosen.length ? chosen : this.names.slice(0, 1);
    this.metricSelect.replaceChildren(
      ...this.names.map((name) => h("option", { value: name, text: name, selected: name === this.metrics[0] })),
    );
    const refs = grouped.map((run, i) => ({
      project: this.project,
      run: run.run,
      key: `${this.project}/${run.run}`,
      label: run.run,
      color: runColor(i),
      t0: run.created_at,
      group: run.group,
    }));
    this.board = new Board(refs, this.view(), { onExpand: (expand) => (this.expand = expand) });
    this.charts.replaceChildren(this.board.el);
    await this.board.load();
  }

  /** Every metric of the grouped runs, the ones people come for first (as charts are). */
  async metricNames(runs) {
    const names = new Set();
    for (let i = 0; i < runs.length; i += PER_GROUP) {
      const part = runs.slice(i, i + PER_GROUP).map((run) => run.run);
      const found = await api.metricsOfRuns(this.project, part);
      for (const run of found.runs) for (const m of run.metrics) names.add(m.metric);
    }
    return groupMetrics([...names]).flatMap((group) => group.metrics);
  }

  view() {
    return {
      x: "step",
      smooth: 0,
      log: false,
      metrics: this.metrics,
      filter: "",
      zoom: null,
      tab: "charts",
      groups: true,
      band: this.band,
      expand: this.expand,
    };
  }

  choose(metrics) {
    this.metrics = metrics;
    replaceParams({ gmetric: metrics[0] ?? null });
    this.board?.setView(this.view());
  }

  setBand(band) {
    this.band = band;
    replaceParams({ gband: band === "minmax" ? null : band });
    this.board?.setView(this.view());
  }
}
