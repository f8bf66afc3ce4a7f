// The Events tab: the latest 100 observation events (…/observations, newest first), the
// newest health snapshot however many events followed it (?type=health), and one
// distribution's buckets drawn on their own with a heatmap of its snapshots over steps.
// Names, fields and error types are user text: Text nodes only.

import * as api from "../lib/api.js";
import { debug } from "../lib/debug.js";
import { empty, h, serial } from "../lib/dom.js";
import { fmtInt, fmtTime } from "../lib/format.js";
import { configChips } from "../lib/runinfo.js";
import { THEME_EVENT } from "../lib/theme.js";
import { replaceParams } from "../lib/url.js";
import { statusBadge } from "../evaluation/figures.js";
import { bucketLabels, drawHeatmap, drawHistogram, makeCanvas } from "./histogram.js";

const TYPES = ["event", "distribution", "health", "population", "trial"];
/** What the server lists at most (contract RECENT_OBSERVATIONS). */
const RECENT = 100;

debug.events = { loads: 0, listed: 0, histogram: null, heatmap: null };

const fields = (values) =>
  values && Object.keys(values).length ? configChips(values) : h("span", { class: "muted", text: "no fields" });

const total = (counts) => counts.reduce((a, b) => a + b, 0);

export class EventsView {
  constructor(ref) {
    this.ref = ref;
    const params = new URLSearchParams(location.search);
    this.type = TYPES.includes(params.get("etype")) ? params.get("etype") : null;
    this.distribution = params.get("dist");
    this.typeSelect = h(
      "select",
      { name: "event-type", "aria-label": "event type", onchange: () => this.pickType(this.typeSelect.value) },
      h("option", { value: "", text: "all types" }),
      TYPES.map((type) => h("option", { value: type, text: type, selected: type === this.type })),
    );
    this.count = h("span", { class: "muted events-count" });
    this.health = h("div", { class: "health-line" });
    this.distributions = h("section", { class: "distributions" });
    this.list = h("div", { class: "events-list" });
    this.el = h(
      "div",
      { class: "events" },
      this.health,
      this.distributions,
      h("h2", { class: "section-title", text: "Latest events" }),
      h("div", { class: "toolbar" }, h("label", { class: "control" }, h("span", { class: "control-label", text: "type" }), this.typeSelect), this.count),
      this.list,
    );
    this.refresh = serial(() => this.load());
  }

  start() {
    this.refresh();
    // The histograms are canvases drawn in the theme's colours: drawn again in the new ones.
    window.addEventListener(THEME_EVENT, () => this.refresh());
  }

  pickType(type) {
    this.type = type || null;
    replaceParams({ etype: this.type });
    this.refresh();
  }

  async load() {
    const { project, run } = this.ref;
    let recent, health, distributions;
    try {
      [recent, health, distributions] = await Promise.all([
        api.observations(project, run, this.type),
        api.observations(project, run, "health", 1),
        api.observations(project, run, "distribution"),
      ]);
    } catch (error) {
      this.list.replaceChildren(h("p", { class: "notice", text: `Could not load the events: ${error.message}` }));
      return;
    }
    debug.events.loads += 1;
    debug.events.listed = recent.length;
    this.renderHealth(health[0]);
    this.renderDistributions(distributions);
    this.renderList(recent);
  }

  renderHealth(snapshot) {
    this.health.replaceChildren(
      h("span", { class: "control-label", text: "latest health snapshot" }),
      ...(snapshot
        ? [
            h("span", { class: "muted", text: `${snapshot.step == null ? "" : `step ${fmtInt(snapshot.step)} · `}${fmtTime(snapshot.received_at)}` }),
            fields(snapshot.fields),
          ]
        : [h("span", { class: "muted", text: "none received: this run has sent no health snapshot event." })]),
    );
  }

  renderList(events) {
    const what = this.type ? `${this.type} events` : "events";
    this.count.textContent = events.length >= RECENT ? `the latest ${RECENT} ${what}, newest first` : `${events.length} ${what}, newest first`;
    if (!events.length) {
      this.list.replaceChildren(
        empty(
          this.type ? `No ${this.type} events.` : "No events yet.",
          "Events, distributions, health snapshots and evaluation outcomes sent through POST /api/v1/ingest/observations appear here.",
        ),
      );
      return;
    }
    this.list.replaceChildren(
      h(
        "table",
        { class: "table events-table" },
        h("thead", {}, h("tr", {}, ["received", "step", "type", "name", "details", "attempt"].map((label) => h("th", { text: label })))),
        h(
          "tbody",
          {},
          events.map((event) =>
            h(
              "tr",
              { dataset: { event: event.event_id, type: event.type } },
              h("td", { class: "muted", title: `event ${event.event_id}`, text: fmtTime(event.received_at) }),
              h("td", { class: "num", text: fmtInt(event.step) }),
              h("td", {}, h("span", { class: `badge type-${event.type}`, text: event.type })),
              h("td", { class: "event-name", text: event.name ?? "—" }),
              h("td", { class: "event-details" }, this.details(event)),
              h("td", { class: "num", text: String(event.attempt) }),
            ),
          ),
        ),
      ),
    );
  }

  details(event) {
    switch (event.type) {
      case "distribution":
        return [
          `${fmtInt(event.histogram.counts.length)} buckets, ${fmtInt(total(event.histogram.counts))} counted `,
          h("button", { type: "button", class: "link", text: "draw", onclick: () => this.pickDistribution(event.name) }),
        ];
      case "population":
        return `round ${event.round_id}: ${fmtInt(event.expected)} trials expected`;
      case "trial":
        return [
          `round ${event.round_id}, trial ${event.trial_id}, attempt ${event.trial_attempt} `,
          statusBadge(event.status),
          event.error_type ? h("span", { class: "error-type", text: ` ${event.error_type}` }) : null,
        ];
      default:
        return fields(event.fields);
    }
  }

  pickDistribution(name) {
    this.distribution = name;
    replaceParams({ dist: name });
    this.refresh();
    this.distributions.scrollIntoView({ block: "nearest" });
  }

  renderDistributions(snapshots) {
    const names = [...new Set(snapshots.map((s) => s.name))];
    if (!names.length) {
      debug.events.histogram = debug.events.heatmap = null;
      this.distributions.replaceChildren(
        h("h2", { class: "section-title", text: "Distributions" }),
        h("p", { class: "muted", text: "No distribution events yet: histograms sent with type “distribution” are drawn here, bucket by bucket." }),
      );
      return;
    }
    const name = names.includes(this.distribution) ? this.distribution : names[0];
    const select = h(
      "select",
      { name: "distribution", "aria-label": "distribution", onchange: () => this.pickDistribution(select.value) },
      names.map((n) => h("option", { value: n, text: n, selected: n === name })),
    );
    // Newest first from the server; the heatmap reads left to right in step order.
    const ofName = snapshots.filter((s) => s.name === name);
    const newest = ofName[0];
    const sameBounds = ofName.filter((s) => JSON.stringify(s.histogram.bounds) === JSON.stringify(newest.histogram.bounds));
    const series = sameBounds
      .map((s, i) => ({ step: s.step, counts: s.histogram.counts, order: i }))
      .sort((a, b) => (a.step ?? -1) - (b.step ?? -1) || b.order - a.order);
    const { bounds, counts } = newest.histogram;

    const bars = makeCanvas(640, 240, `buckets of ${name}`);
    drawHistogram(bars, bounds, counts);
    const heat = makeCanvas(640, 220, `buckets of ${name} over steps`);
    const cellAt = drawHeatmap(heat, bounds, series);
    const hover = h("p", { class: "muted heat-hover", text: "Point at a cell for its step, bucket and count." });
    heat.canvas.addEventListener("mousemove", (event) => {
      const scale = heat.width / heat.canvas.clientWidth;
      const cell = cellAt(event.offsetX * scale, event.offsetY * scale);
      hover.textContent = cell
        ? `step ${cell.step == null ? "—" : fmtInt(cell.step)}, bucket ${cell.bucket}: ${fmtInt(cell.count)}`
        : "Point at a cell for its step, bucket and count.";
    });
    debug.events.histogram = { name, bounds, counts };
    debug.events.heatmap = { name, columns: series.length, rows: bounds.length + 1 };

    const labels = bucketLabels(bounds);
    const others = ofName.length - sameBounds.length;
    this.distributions.replaceChildren(
      h("h2", { class: "section-title", text: "Distributions" }),
      h("div", { class: "toolbar" }, h("label", { class: "control" }, h("span", { class: "control-label", text: "distribution" }), select)),
      h(
        "div",
        { class: "dist-grid" },
        h(
          "figure",
          { class: "dist-figure" },
          h("figcaption", {}, `Buckets of the newest snapshot${newest.step == null ? "" : ` (step ${fmtInt(newest.step)})`}, ${fmtInt(total(counts))} counted`),
          bars.canvas,
          h(
            "table",
            { class: "table buckets-table" },
            h("thead", {}, h("tr", {}, h("th", { text: "bucket" }), h("th", { class: "num", text: "count" }))),
            h("tbody", {}, labels.map((label, i) => h("tr", {}, h("td", { class: "bucket", text: label }), h("td", { class: "num", text: fmtInt(counts[i]) })))),
          ),
        ),
        h(
          "figure",
          { class: "dist-figure" },
          h("figcaption", {}, `Over steps: ${fmtInt(series.length)} snapshot${series.length === 1 ? "" : "s"}, each column shaded by its buckets' shares`),
          heat.canvas,
          hover,
          h("p", {
            class: "muted",
            text: `From the latest ${RECENT} distribution events of this run${others ? `; ${others} snapshot${others === 1 ? "" : "s"} with other bounds left out` : ""}.`,
          }),
        ),
      ),
    );
  }
}
