// "/reports?project=<p>&runs=<r1>,<r2>&level=error#alert-<id>": the runs' alerts, newest
// first, filtered by level, each with an anchor a link can point at. Updates live: the named
// runs through their stream, a whole project's through its run list (new runs included).

import * as api from "../lib/api.js";
import { LEVELS, alertCard } from "../lib/alerts.js";
import { debug } from "../lib/debug.js";
import { crumbs, empty, h, mount } from "../lib/dom.js";
import { watchRuns } from "../lib/live.js";
import { runsOrMissing } from "../lib/missing.js";
import { listParam, withParam } from "../lib/url.js";
import { REFRESH_MS } from "./runs.js";

export async function reportsPage() {
  const params = new URLSearchParams(location.search);
  const project = params.get("project");
  if (!project) return chooseProject();
  const level = params.get("level");
  const badLevel = level && !LEVELS.includes(level);
  let names = listParam(params.get("runs"));
  const all = !names.length;
  crumbs([[project, api.page.project(project)], ["reports", null]]);

  const runObjects = await runsOrMissing(project, "/reports");
  if (!runObjects) return;
  const known = new Map(runObjects.map((r) => [r.run, r]));
  const missing = names.filter((name) => !known.has(name));
  names = all ? runObjects.filter((r) => r.alert_count > 0).map((r) => r.run) : names.filter((n) => known.has(n));

  const alertsByRun = new Map();
  const load = async (name) => {
    const list = await api.alerts(project, name);
    alertsByRun.set(name, list.map((a) => ({ ...a, project, run: name })));
  };
  await Promise.all(names.map(load));

  const filters = h("nav", { class: "levels", "aria-label": "level filter" });
  const list = h("div", { class: "alerts" });
  const note = h("p", { class: "muted" });
  const heading = all
    ? `Alerts in ${project}`
    : `Alerts of ${names.length === 1 ? names[0] : `${names.length} runs`}`;

  const render = () => {
    const alerts = [...alertsByRun.values()]
      .flat()
      .sort((a, b) => b.received_at - a.received_at);
    const counts = Object.fromEntries(LEVELS.map((l) => [l, alerts.filter((a) => a.level === l).length]));
    filters.replaceChildren(
      levelLink(null, "all", alerts.length, !level || badLevel),
      ...LEVELS.map((l) => levelLink(l, l, counts[l], level === l)),
    );
    const shown = alerts.filter((a) => !level || badLevel || a.level === level);
    const ids = new Set();
    list.replaceChildren(
      ...shown.map((alert) => {
        const first = !ids.has(alert.alert_id);
        ids.add(alert.alert_id);
        return alertCard(alert, { withId: first, showRun: names.length !== 1 || all });
      }),
    );
    debug.alerts = shown.length;
    if (!alerts.length) {
      list.replaceChildren(
        empty(
          names.length ? "No alerts yet." : "No run in this project has alerts.",
          "Workers send alerts to POST /ingest; they appear here as they arrive.",
        ),
      );
    } else if (!shown.length) {
      list.replaceChildren(empty(`No ${level} alerts.`, h("a", { href: withParam("level", null), text: "Show all levels" })));
    }
    note.textContent = [
      badLevel ? `Unknown level “${level}”: showing all levels.` : "",
      missing.length ? `Not found in ${project}: ${missing.join(", ")}.` : "",
    ]
      .filter(Boolean)
      .join(" ");
  };

  render();
  mount(
    h("h1", { text: heading }),
    h(
      "p",
      { class: "subtitle" },
      names.length && !all
        ? names.flatMap((name, i) => [i ? ", " : "", h("a", { href: api.page.run(project, name), text: name })])
        : h("a", { href: api.page.project(project), text: `all runs of ${project}` }),
    ),
    note,
    filters,
    list,
  );
  scrollToAnchor();
  window.addEventListener("hashchange", scrollToAnchor);

  const counts = new Map(names.map((name) => [name, known.get(name).alert_count]));
  if (all) {
    followProject(project, counts, async (changed) => {
      await Promise.all(changed.map(load));
      names = [...new Set([...names, ...changed])];
      render();
    });
    return;
  }
  watchRuns(
    names.map((name) => ({ project, run: name, key: `${project}/${name}` })),
    {
      onRun: async (ref, run) => {
        if (counts.get(ref.run) === run.alert_count) return;
        counts.set(ref.run, run.alert_count);
        await load(ref.run);
        render();
      },
    },
  );
}

/**
 * Every run of a project, those created after the page loaded too, through its run list
 * fetched every few seconds: onAlerts(names) for the runs whose alert count moved.
 */
function followProject(project, counts, onAlerts) {
  let busy = false;
  setInterval(async () => {
    if (busy || document.hidden) return;
    busy = true;
    try {
      const moved = (await api.runs(project)).filter((run) => run.alert_count !== (counts.get(run.run) ?? 0));
      if (moved.length) await onAlerts(moved.map((run) => run.run));
      for (const run of moved) counts.set(run.run, run.alert_count);
    } catch {
      // keep the list shown; the next tick tries again
    } finally {
      busy = false;
    }
  }, REFRESH_MS);
}

function levelLink(value, label, count, current) {
  return h(
    "a",
    {
      href: withParam("level", value),
      class: `level-filter ${value ?? "all"}`,
      "aria-current": current ? "page" : null,
    },
    h("span", { text: label }),
    h("span", { class: "count", text: String(count) }),
  );
}

/** The browser scrolled before the alerts existed: do it now that they do. */
function scrollToAnchor() {
  const id = decodeURIComponent(location.hash.slice(1));
  for (const el of document.querySelectorAll(".alert.targeted")) el.classList.remove("targeted");
  if (!id.startsWith("alert-")) return;
  const target = document.getElementById(id);
  if (target) {
    target.classList.add("targeted");
    target.scrollIntoView({ block: "center" });
    debug.scrolledTo = id;
    return;
  }
  const note = h(
    "p",
    { class: "notice" },
    `Alert “${id.slice(6)}” is not in this list`,
    new URLSearchParams(location.search).has("level")
      ? [" (the level filter hides it): ", h("a", { href: `${withParam("level", null)}#${id}`, text: "show all levels" })]
      : ".",
  );
  document.querySelector(".alerts")?.before(note);
}

async function chooseProject() {
  crumbs([["reports", null]]);
  const projects = await api.projects();
  mount(
    h("h1", { text: "Reports" }),
    projects.length
      ? h(
          "ul",
          { class: "plain" },
          projects.map((p) => h("li", {}, h("a", { href: api.page.reports(p.project), text: p.project }))),
        )
      : empty("No projects yet."),
  );
}
