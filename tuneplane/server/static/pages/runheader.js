// The top of a run page (one run) or of a comparison (several), redrawn on every change.

import * as api from "../lib/api.js";
import { alertAnchor } from "../lib/alerts.js";
import { h, morph, safeUrl } from "../lib/dom.js";
import { fmtAgo, fmtInt, fmtTime } from "../lib/format.js";
import { configChips, healthBadge, statusBadge } from "../lib/runinfo.js";
import { runMeta } from "./runmanage.js";

function fact(label, ...value) {
  return h("div", { class: "fact" }, h("dt", { text: label }), h("dd", {}, ...value));
}

/** `onShare`: opens the run's share panel, for callers who may share it (else no button);
 * `manage`: {edit, remove} of managePanel (runmanage.js), each null when not allowed;
 * `attemptConfigs`: the attempts whose own config differs, shown beside the run's. */
export function runHeader(run, onShare = null, manage = null, attemptConfigs = []) {
  const reports = api.page.reports(run.project, [run.run]);
  return h(
    "div",
    { class: "run-head" },
    h("div", { class: "title-line" }, h("h1", { text: run.display_name || run.run }), statusBadge(run), healthBadge(run)),
    runMeta(run, attemptConfigs),
    h(
      "dl",
      { class: "facts" },
      fact("last step", fmtInt(run.last_step)),
      fact("points", fmtInt(run.point_count)),
      fact("metrics", fmtInt(run.metric_count)),
      fact("alerts", run.alert_count ? h("a", { href: reports, text: fmtInt(run.alert_count) }) : "0"),
      fact("attempt", run.attempt == null ? "—" : String(run.attempt)),
      fact("created", h("span", { text: fmtTime(run.created_at) })),
      fact("updated", h("span", { title: fmtTime(run.updated_at), text: fmtAgo(run.updated_at) })),
    ),
    // The config's table (see configTable), made once by the page: a live update keeps it,
    // with its filter and whether it is open.
    h("div", { class: "config", dataset: { keep: "config" } }),
    // The run's summary (run.summary: final figures), made the same way, when it sent one.
    h("div", { class: "config", dataset: { keep: "summary" } }),
    h(
      "div",
      { class: "actions" },
      h("a", { class: "button secondary", href: api.csvUrl(run.project, run.run), download: true, text: "Download CSV" }),
      h("a", { class: "button secondary", href: reports, text: "Reports" }),
      onShare ? h("button", { type: "button", class: "button secondary share-button", text: "Share", onclick: onShare }) : null,
      manage?.edit ? h("button", { type: "button", class: "button secondary edit-button", text: "Edit", onclick: () => manage.edit(run) }) : null,
      manage?.remove ? h("button", { type: "button", class: "button secondary delete-button", text: "Delete", onclick: manage.remove }) : null,
    ),
  );
}

/** refs: [{project, run, label, color}]; runs: Map key -> run object. */
export function compareHeader(refs, runs, removeHref) {
  return h(
    "div",
    { class: "run-head" },
    h("h1", { text: refs.length === 1 ? "Comparing 1 run" : `Comparing ${refs.length} runs` }),
    h(
      "table",
      { class: "table compare-runs" },
      h(
        "tbody",
        {},
        refs.map((ref) => compareRow(ref, runs.get(ref.key), refs.length > 1 ? removeHref : null)),
      ),
    ),
  );
}

/** One run's row of the comparison's header; removeHref(ref) is null for the only run. */
export function compareRow(ref, run, removeHref) {
  return h(
    "tr",
    { dataset: { run: ref.run } },
    h("td", {}, h("i", { class: "swatch", style: { background: ref.color } })),
    h("td", {}, h("a", { href: api.page.run(ref.project, ref.run), text: ref.label })),
    liveCells(run).map(liveCell),
    h("td", {}, configChips(run.config, 3)),
    h("td", {}, h("a", { href: api.csvUrl(ref.project, ref.run), download: true, text: "CSV" })),
    h("td", {}, removeHref
        ? h("a", {
            href: removeHref(ref),
            title: "remove from the comparison",
            text: "remove",
            // The view may have changed since this was drawn: link the current one.
            onclick: (event) => event.currentTarget.setAttribute("href", safeUrl(removeHref(ref))),
          })
        : null),
  );
}

/** The newest alerts of a run, linking to their place on the reports page. */
export function alertStrip(run, alerts) {
  if (!alerts.length) return null;
  const reports = api.page.reports(run.project, [run.run]);
  return h(
    "div",
    { class: "alert-strip" },
    alerts.slice(0, 3).map((alert) =>
      h(
        "a",
        { class: `alert-line level-${alert.level}`, href: `${reports}#${alertAnchor(alert)}` },
        h("span", { class: `level ${alert.level}`, text: alert.level }),
        h("span", { class: "alert-title", text: alert.title }),
        alert.step != null ? h("span", { class: "muted", text: `step ${fmtInt(alert.step)}` }) : null,
      ),
    ),
    alerts.length > 3 ? h("a", { href: reports, text: `all ${alerts.length} alerts` }) : null,
  );
}

/** The first of a comparison row's cells that change as the run goes on (see liveCells). */
const LIVE_CELLS_FROM = 2;

/** What each live cell last showed: cell -> its key (see liveCells). */
const shown = new WeakMap();

/**
 * Status, transport health, last step and update time: what a live update changes. Each
 * cell comes with a key of what it shows, so that an update builds only the cells that
 * changed (with twenty runs reporting, most of a row's cells stay as they are).
 */
/**
 * The cells of a row that follow the run, each as [what it shows (unchanged, it is left as it
 * is), how to make it].
 * @returns {Array<[unknown, () => HTMLElement]>}
 */
function liveCells(run) {
  return [
    [`${run.status} ${run.exit_code}`, () => h("td", {}, statusBadge(run))],
    [JSON.stringify(run.transport ?? null), () => h("td", {}, healthBadge(run))],
    [run.last_step, () => h("td", { class: "num", text: `step ${fmtInt(run.last_step)}` })],
    [run.updated_at, () => h("td", { title: fmtTime(run.updated_at), text: fmtAgo(run.updated_at) })],
  ];
}

function liveCell([key, make]) {
  const cell = make();
  shown.set(cell, key);
  return cell;
}

/** Bring a row made by compareRow up to date; the run's name, config and links stay. */
export function updateCompareRow(row, run) {
  liveCells(run).forEach(([key, make], i) => {
    const cell = row.cells[LIVE_CELLS_FROM + i];
    if (shown.get(cell) === key) return;
    morph(cell, make());
    shown.set(row.cells[LIVE_CELLS_FROM + i], key);
  });
}
