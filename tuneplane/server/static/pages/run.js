// A run page (/projects/<p>/runs/<r>) and a comparison (/compare?project=<p>&runs=<a>,<b>):
// header, chart controls, every metric charted, live; the run page also has the Diagnosis
// panel (a failed run's) and the Validation, Training rollouts, Events and Logs tabs.

import * as api from "../lib/api.js";
import { Board } from "../charts/board.js";
import { runColor } from "../lib/colors.js";
import { configTable } from "../lib/config.js";
import { debug } from "../lib/debug.js";
import { crumbs, empty, h, morph, mount } from "../lib/dom.js";
import { chipsOf } from "../lib/runinfo.js";
import { fmtInt } from "../lib/format.js";
import { watchRuns } from "../lib/live.js";
import { signInHint } from "../lib/missing.js";
import { listParam, readView, writeView } from "../lib/url.js";
import { ValidationView } from "../evaluation/validation.js";
import { RolloutsView } from "../trajectories/rollouts.js";
import { EventsView } from "../events/eventsview.js";
import { LogView } from "../logs/logview.js";
import { DiagnosisPanel } from "../diagnosis/panel.js";
import { LaunchPanel, launchRecord, rerunHref } from "../launch/runjobs.js";
import { ExportsPanel } from "../launch/exports.js";
import { sharePanel } from "./access.js";
import { managePanel } from "./runmanage.js";
import { chartControls } from "./controls.js";
import { alertStrip, compareHeader, runHeader, updateCompareRow } from "./runheader.js";

export function runPage(project, run) {
  crumbs([[project, api.page.project(project)], [run, null]]);
  return chartsPage([{ project, run }], { single: true });
}

export async function comparePage() {
  const params = new URLSearchParams(location.search);
  const project = params.get("project");
  const wanted = listParam(params.get("runs")).map((entry) => {
    // "<run>" is in ?project=; "<project>/<run>" names a run of another project.
    const slash = entry.indexOf("/");
    return slash < 0 ? { project, run: entry } : { project: entry.slice(0, slash), run: entry.slice(slash + 1) };
  });
  crumbs([...(project ? [[project, api.page.project(project)]] : []), ["compare", null]]);
  if (!wanted.length || wanted.some((ref) => !ref.project)) {
    mount(
      empty(
        "Nothing to compare.",
        "Pick runs in a project's table, or write the address as /compare?project=<project>&runs=<run1>,<run2>.",
        h("a", { href: "/", text: "All projects" }),
      ),
    );
    return;
  }
  await chartsPage(wanted, { single: false });
}

/** Each wanted run's object, or a 404 error for one that does not exist. */
async function findRuns(wanted) {
  const projects = new Set(wanted.map((ref) => ref.project));
  if (wanted.length === 1 || projects.size > 1) {
    return Promise.allSettled(wanted.map((ref) => api.run(ref.project, ref.run)));
  }
  // Several runs of one project: its run list, in one request.
  const listed = new Map((await api.runs(wanted[0].project)).map((run) => [run.run, run]));
  return wanted.map((ref) =>
    listed.has(ref.run)
      ? { status: "fulfilled", value: listed.get(ref.run) }
      : { status: "rejected", reason: new api.ApiError(404, `run ${ref.run} not found`) },
  );
}

async function chartsPage(wanted, { single }) {
  const answers = await findRuns(wanted);
  const missing = wanted.filter((_, i) => answers[i].status === "rejected");
  const failed = answers.find((a) => a.status === "rejected" && a.reason.status !== 404);
  if (failed) throw failed.reason;
  const found = answers.filter((a) => a.status === "fulfilled").map((a) => a.value);
  if (!found.length) {
    const ref = wanted[0];
    mount(
      empty(
        single ? `No run named “${ref.run}” in project “${ref.project}”.` : "None of these runs exist.",
        h("a", { href: api.page.project(ref.project), text: `Runs of ${ref.project}` }),
        await signInHint(),
      ),
    );
    return;
  }
  const oneProject = new Set(found.map((r) => r.project)).size === 1;
  const refs = found.map((run, i) => ({
    project: run.project,
    run: run.run,
    key: `${run.project}/${run.run}`,
    label: oneProject ? run.run : `${run.project}/${run.run}`,
    color: runColor(i),
    t0: run.created_at,
    group: run.group ?? null,
  }));
  const runs = new Map(refs.map((ref, i) => [ref.key, found[i]]));
  // Groups are drawn as one in a comparison only.
  let view = single ? { ...readView(), groups: false } : readView();
  debug.page = single ? "run" : "compare";

  const head = h("div");
  // "Share" for callers who may (the first answer's `you`: live updates do not carry it).
  const share = single && found[0].you?.share ? sharePanel(refs[0].project, refs[0].run) : null;
  // Editors edit the run's name, group, tags and note; owners delete it.
  const you = found[0].you;
  const manage = single && (you?.write || you?.manage)
    ? managePanel(refs[0], you, (changed) => {
        runs.set(refs[0].key, changed);
        renderHead();
      })
    : null;
  const attemptConfigs = single ? found[0].attempt_configs ?? [] : [];
  const header = () => runHeader(runs.get(refs[0].key), share?.toggle, manage, attemptConfigs);
  const strip = h("div");
  const removeHref = (ref) => removeRun(refs, ref);
  // The header changes with every live update: it is changed in place, and in a comparison
  // only the changing cells of the changed run's row.
  // A run's config never changes: its table is made once and kept through every update.
  const config = single ? configTable(found[0].config, (rows) => chipsOf(rows, 6)) : null;
  const sent = single ? found[0].summary ?? {} : {};
  const summary = Object.keys(sent).length ? configTable(sent, (rows) => chipsOf(rows, 6), "summary") : null;
  const renderHead = (ref = null) => {
    const row = ref && !single ? head.querySelector("tbody")?.rows[refs.indexOf(ref)] : null;
    if (row) updateCompareRow(row, runs.get(ref.key));
    else if (head.firstChild) morph(head.firstChild, single ? header() : compareHeader(refs, runs, removeHref));
    else head.append(single ? header() : compareHeader(refs, runs, removeHref));
    for (const [key, table] of [["config", config], ["summary", summary]]) {
      const slot = table && head.querySelector(`[data-keep="${key}"]`);
      if (slot && !slot.contains(table)) slot.replaceChildren(table);
    }
  };
  renderHead();

  // Runs whose header changed, drawn in the board's next live frame with the charts.
  const changedHeads = new Set();
  const board = new Board(refs, view, {
    onFrame: () => {
      for (const ref of changedHeads) renderHead(ref);
      changedHeads.clear();
    },
    onZoom: (range) => {
      controls.setZoom(range);
      view = { ...view, zoom: range };
      writeView(view);
    },
    onExpand: (expand) => {
      view = { ...view, expand };
      writeView(view);
    },
    onMetrics: (names, shown) => {
      controls.setMetrics(names);
      controls.el.hidden = !names.length;
      noMetrics.replaceChildren(...emptyCharts(refs, runs, names, shown));
    },
  });
  const controls = chartControls(view, {
    onChange: (next) => {
      // A new x axis unzooms: the range is in the units of the old one.
      view = { ...next, tab: view.tab, expand: view.expand, zoom: next.x === view.x ? view.zoom : null };
      writeView(view);
      board.setView(view);
    },
    onResetZoom: () => board.resetZoom(),
  });
  controls.setZoom(view.zoom);
  controls.setGroups(!single && board.groups.size > 0);
  const noMetrics = h("div");
  const chartsPanel = h("div", { class: "panel" }, strip, controls.el, noMetrics, board.el);

  // A launched run: its recipe, its parent, Re-run, and its jobs as the engine has them.
  const launch = single && launchRecord(found[0]) ? new LaunchPanel(refs[0], found[0], you) : null;
  launch?.follow(found[0]);
  // The exports the run registered (tuneplane.register_export), when it has any.
  const exportsPanel = single ? new ExportsPanel(refs[0]) : null;
  exportsPanel?.follow(found[0]);
  const parts = [
    head,
    launch?.el,
    exportsPanel?.el,
    share?.el,
    manage?.el,
    missing.length
      ? h("p", { class: "notice", text: `Not found: ${missing.map((r) => `${r.project}/${r.run}`).join(", ")}.` })
      : null,
  ];
  // The run page's other tabs are made when first shown.
  const views = {};
  // Tabs whose data changed while they were hidden: fetched again when shown.
  const stale = new Set();
  const panels = { charts: chartsPanel };
  let diagnosis = null;
  const makers = {
    validation: () => new ValidationView(refs[0]),
    rollouts: () => new RolloutsView(refs[0]),
    events: () => new EventsView(refs[0]),
    // What the caller may do, as the first answer said (live updates do not carry it).
    logs: () => new LogView(refs[0], found[0].you),
  };
  if (single) {
    const tabs = h("nav", { class: "tabs", role: "tablist" });
    const showTab = (tab) => {
      view = { ...view, tab };
      writeView(view);
      for (const [name, panel] of Object.entries(panels)) panel.hidden = name !== tab;
      for (const button of tabs.children) button.setAttribute("aria-selected", String(button.dataset.tab === tab));
      if (makers[tab] && !views[tab]) {
        views[tab] = makers[tab]();
        panels[tab].append(views[tab].el);
        views[tab].start();
      } else if (stale.delete(tab)) {
        views[tab].refresh();
      }
    };
    for (const tab of Object.keys(makers)) panels[tab] = h("div", { class: "panel" });
    tabs.append(
      ...[
        ["charts", "Charts"],
        ["validation", "Validation"],
        ["rollouts", "Training rollouts"],
        ["events", "Events"],
        ["logs", "Logs"],
      ].map(([tab, label]) =>
        h("button", { type: "button", role: "tab", class: "tab", dataset: { tab }, text: label, onclick: () => showTab(tab) }),
      ),
    );
    // Above the tabs, whichever is shown; a cited log line opens the Logs tab at that line.
    diagnosis = new DiagnosisPanel(refs[0], found[0].you, {
      onLine: (attempt, citation) => {
        showTab("logs");
        views.logs.reveal(attempt, citation.text);
      },
      // A suggested next action opens the same Re-run form as the launch panel.
      rerun: launch?.canWrite ? rerunHref(found[0]) : null,
    });
    diagnosis.follow(found[0]);
    parts.push(diagnosis.el, tabs, ...Object.values(panels));
    mount(...parts);
    showTab(view.tab);
  } else {
    parts.push(chartsPanel);
    mount(...parts);
  }

  await board.load();

  const alertCounts = new Map();
  const refreshAlerts = async (ref, run) => {
    if (!single || alertCounts.get(ref.key) === run.alert_count) return;
    alertCounts.set(ref.key, run.alert_count);
    const alerts = run.alert_count ? await api.alerts(ref.project, ref.run) : [];
    strip.replaceChildren(alertStrip(run, alerts) ?? "");
  };
  refreshAlerts(refs[0], runs.get(refs[0].key));

  const liveState = h("span", { class: "live-state", text: "connecting…" });
  head.after(h("div", { class: "live-line" }, liveState));
  watchRuns(refs, {
    onRun: (ref, run, { catchUp }) => {
      const before = runs.get(ref.key);
      runs.set(ref.key, run);
      diagnosis?.follow(run);
      launch?.follow(run);
      exportsPanel?.follow(run);
      // Without charts the page says how many alerts the run has: that count follows too.
      if (before?.alert_count !== run.alert_count && !board.metricNames().length) {
        noMetrics.replaceChildren(...emptyCharts(refs, runs, [], []));
      }
      const refreshTab = (tab) => {
        if (!views[tab]) return;
        if (panels[tab].hidden) stale.add(tab);
        else views[tab].refresh();
      };
      // Events and outcomes move only last_observation_id: the tabs that show them fetch.
      const observed = before?.last_observation_id !== run.last_observation_id;
      if (observed) {
        debug.lastObservationId = run.last_observation_id;
        for (const tab of ["validation", "events"]) refreshTab(tab);
      }
      // Rollouts move neither: they come with a training step's points or events.
      if (observed || before?.updated_at !== run.updated_at) refreshTab("rollouts");
      // A stream's first event is the run as it is now: nothing to fetch if it is unchanged.
      if (before && sameRun(before, run)) return;
      changedHeads.add(ref);
      board.wantFrame();
      refreshAlerts(ref, run);
      // Otherwise the new points came with the stream, just before.
      if (catchUp) board.update(ref);
    },
    onPoints: (ref, metrics) => board.push(ref, metrics),
    onState: (state) => {
      liveState.textContent = state === "reconnecting" ? "reconnecting…" : state === "polling" ? "live (polling)" : "live";
      liveState.className = `live-state ${state}`;
    },
  });
}

function sameRun(a, b) {
  return (
    a.updated_at === b.updated_at &&
    a.status === b.status &&
    a.transport?.state === b.transport?.state &&
    a.transport?.heartbeat_at === b.transport?.heartbeat_at
  );
}

function removeRun(refs, ref) {
  const rest = refs.filter((r) => r !== ref);
  const project = rest[0].project;
  const names = rest.map((r) => (r.project === project ? r.run : `${r.project}/${r.run}`));
  const params = new URLSearchParams(location.search);
  params.set("project", project);
  params.set("runs", names.join(","));
  return `/compare?${params}`;
}

/** What to say when there is no chart: which metrics are missing, and what the run has. */
function emptyCharts(refs, runs, names, shown) {
  if (!names.length) {
    const single = refs.length === 1;
    const run = runs.get(refs[0].key);
    const details = [];
    if (single && run.alert_count) {
      details.push(
        h(
          "p",
          {},
          `This run has ${fmtInt(run.alert_count)} alert${run.alert_count === 1 ? "" : "s"}: `,
          h("a", { href: api.page.reports(run.project, [run.run]), text: "read them in Reports" }),
          ".",
        ),
      );
    }
    details.push("Charts appear here as soon as the first points arrive.");
    return [empty(single ? "No metrics yet." : "None of these runs has metrics yet.", ...details)];
  }
  if (!shown.length) return [empty("No metric matches the filter.", `The runs have ${names.length} metrics.`)];
  return [];
}
