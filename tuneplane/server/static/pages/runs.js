// "/projects/<project>": the project's runs, searched, sorted and with chosen columns by
// the server (q=, sort=, columns= in the address, as the API takes them); tick runs to
// compare them; a run's group links to its listed runs compared, charted as one mean with a
// band, and below the table each group's chosen metric is charted so (rungroups.js). The
// table refreshes itself every few seconds.

import * as api from "../lib/api.js";
import { crumbs, debounce, empty, h, mount } from "../lib/dom.js";
import { fmtAgo, fmtInt, fmtNum, fmtTime } from "../lib/format.js";
import { noProjectPage } from "../lib/missing.js";
import { address } from "../lib/root.js";
import { configChips, healthBadge, statusBadge } from "../lib/runinfo.js";
import { listParam, replaceParams } from "../lib/url.js";
import { launchPage } from "../launch/api.js";
import { matchedLaunchHref } from "../launch/matched_launch.js";
import { accessHref } from "./access.js";
import { alertsHref } from "./alerts.js";
import { GroupCharts } from "./rungroups.js";
import { confirmDelete } from "./runmanage.js";

/** How often the projects and runs tables fetch themselves again. */
export const REFRESH_MS = 5000;

/** Columns that sort, by their label: the field `sort=` names. */
const SORTS = {
  run: "display_name",
  status: "status",
  group: "group",
  "last step": "last_step",
  points: "points",
  "last update": "updated_at",
  alerts: "alerts",
};
const NUMERIC = ["last step", "points", "alerts"];

function params() {
  const q = new URLSearchParams(location.search);
  return { q: q.get("q") ?? "", sort: q.get("sort") ?? "-created_at", columns: listParam(q.get("columns")) };
}

export async function runsPage(project) {
  crumbs([[project, null]]);
  let state = params();
  let found;
  try {
    found = await api.searchRuns(project, { ...state, columns: state.columns.join(",") });
  } catch (error) {
    if (error.status === 404) {
      await noProjectPage(project);
      return;
    }
    if (error.status !== 422) throw error;
    found = { runs: [], total: 0, error };
  }
  // Owners manage the project's access and may delete it; editors its share links (the
  // page shows each only what the API lets them do).
  let you = found.runs[0]?.you;
  const selected = new Set();
  const filter = h("input", {
    type: "search",
    class: "filter",
    placeholder: "filter runs: name, tag = x, config.lr < 1e-4, reward.last > 0.8…",
    value: state.q,
    "aria-label": "filter runs",
  });
  const columnsInput = h("input", {
    type: "text",
    class: "columns-input",
    placeholder: "columns: config.lr, reward.last",
    value: state.columns.join(", "),
    "aria-label": "columns",
  });
  const problem = h("p", { class: "notice error query-error", hidden: true });
  const compare = h("a", { class: "button", text: "Compare selected" });
  const reports = h("a", { class: "button secondary", text: "Alerts of selected" });
  // Two runs' exports evaluated by one benchmark, each side its own job (launch/matched_launch.js).
  const matchedLaunch = h("a", { class: "button secondary matched-launch-link", text: "Start matched benchmark evaluations" });
  const count = h("span", { class: "muted run-count" });
  const head = h("tr");
  const body = h("tbody");
  // The listed runs' groups charted as one each, below the table.
  const groupCharts = new GroupCharts(project);

  const sync = () => {
    const names = [...selected];
    compare.toggleAttribute("aria-disabled", names.length < 2);
    compare.setAttribute("href", names.length >= 2 ? api.page.compare(project, names) : "#");
    reports.setAttribute("href", api.page.reports(project, names));
    matchedLaunch.toggleAttribute("aria-disabled", names.length !== 2);
    matchedLaunch.setAttribute("href", names.length === 2 ? matchedLaunchHref(project, names[0], names[1]) : "#");
  };

  const sortHeader = (label, field) => {
    const current = state.sort.replace(/^-/, "") === field ? (state.sort.startsWith("-") ? "descending" : "ascending") : null;
    const next = current === "ascending" ? `-${field}` : field;
    return h(
      "th",
      { class: NUMERIC.includes(label) || field.includes(".") && !field.startsWith("config.") ? "num" : null, "aria-sort": current ?? "none" },
      h("button", { type: "button", class: "sort", dataset: { sort: field }, text: label + (current === "ascending" ? " ▲" : current === "descending" ? " ▼" : ""), onclick: () => change({ sort: next }) }),
    );
  };

  const render = () => {
    const labels = ["run", "status", "group"];
    head.replaceChildren(
      h("th"),
      ...labels.map((label) => sortHeader(label, SORTS[label])),
      h("th", { text: "config" }),
      h("th", { text: "checkpoint" }),
      ...state.columns.map((column) => sortHeader(column, column)),
      ...["last step", "points", "last update", "alerts"].map((label) => sortHeader(label, SORTS[label])),
      h("th", { text: "transport" }),
    );
    const members = groupMembers(found.runs);
    body.replaceChildren(...found.runs.map((run) => row(project, run, selected, sync, state.columns, members)));
    count.textContent = `${found.runs.length} of ${found.total} runs`;
    problem.hidden = !found.error;
    problem.textContent = found.error?.message ?? "";
    if (!found.runs.length) {
      const text = found.error ? "The filter is not understood." : "No run matches the filter.";
      body.append(h("tr", {}, h("td", { colspan: 11 + state.columns.length, class: "empty-cell", text })));
    }
    groupCharts.show(found.runs).catch(() => {}); // the next refresh tries again
  };

  const load = async () => {
    try {
      found = await api.searchRuns(project, { ...state, columns: state.columns.join(",") });
      you = found.runs[0]?.you ?? you;
    } catch (error) {
      if (error.status !== 422) throw error;
      found = { runs: [], total: 0, error };
    }
    render();
  };

  const change = (next) => {
    state = { ...state, ...next };
    replaceParams({
      q: state.q || null,
      sort: state.sort === "-created_at" ? null : state.sort,
      columns: state.columns.length ? state.columns.join(",") : null,
    });
    load();
  };

  filter.addEventListener("input", debounce(() => change({ q: filter.value.trim() }), 300));
  columnsInput.addEventListener("change", () => change({ columns: listParam(columnsInput.value) }));

  const manage = h("div", { class: "panel manage-panel", hidden: true });
  const heading = h("h1", { text: project });
  showDisplayName(project, heading);
  const title = h(
    "div",
    { class: "title-line project-title" },
    heading,
    // Anyone who reads the project reads its alert rules; the page offers editors the rest.
    h("a", { class: "button secondary alerts-link", href: alertsHref(project), text: "Alerts" }),
    // The recipes answer signed-in callers; launching them, the project's editors.
    h("a", { class: "button secondary launch-link", href: launchPage.recipes(project), text: "Launch" }),
    you?.manage || you?.share ? h("a", { class: "button secondary access-link", href: accessHref(project), text: "Access" }) : null,
    you?.manage
      ? h("button", {
          type: "button",
          class: "button secondary delete-project",
          text: "Delete project",
          onclick: () => {
            manage.replaceChildren(
              confirmDelete(`project ${project} with all its runs`, project, async () => {
                await api.sendJSON("DELETE", api.projectPath(project), null, { csrf: (await api.session()).csrf_token ?? null });
                location.assign(address("/"));
              }),
            );
            manage.hidden = false;
          },
        })
      : null,
  );
  if (!found.total && !state.q && !found.error) {
    mount(title, manage, empty("This project has no runs yet."));
    return;
  }
  mount(
    title,
    manage,
    h("div", { class: "toolbar" }, filter, columnsInput, count, h("span", { class: "spacer" }), reports, matchedLaunch, compare),
    problem,
    h("table", { class: "table runs" }, h("thead", {}, head), body),
    groupCharts.el,
  );
  render();
  sync();

  const timer = setInterval(async () => {
    if (!document.body.contains(body)) return clearInterval(timer);
    if (document.hidden) return;
    try {
      await load();
    } catch {
      // keep the last table; the next tick tries again
    }
  }, REFRESH_MS);
}

/** The name the project was given (qwen2.5 evals) as the heading, its ID beside it, when
 * it has one; the ID stays when the list cannot be read. */
async function showDisplayName(project, heading) {
  try {
    const shown = (await api.projects()).find((p) => p.project === project)?.display_name;
    if (shown) heading.replaceChildren(shown, " ", h("code", { class: "muted project-id", text: project }));
  } catch {
    // the ID is a name too
  }
}

function cell(value) {
  if (value == null) return h("td", { class: "muted", text: "—" });
  const text = typeof value === "number" ? fmtNum(value) : typeof value === "object" ? JSON.stringify(value) : String(value);
  return h("td", { class: typeof value === "number" ? "num" : null, text });
}

/** Each group's runs among those listed (at most 64, as a comparison takes), by group. */
function groupMembers(runs) {
  const members = new Map();
  for (const run of runs) {
    if (!run.group) continue;
    const names = members.get(run.group) ?? [];
    if (names.length < 64) names.push(run.run);
    members.set(run.group, names);
  }
  return members;
}

/** The checkpoint of the run's latest evaluated round that recorded one, opening that round. */
function checkpointCell(project, run) {
  const mark = run.latest_checkpoint;
  if (!mark) return h("td", { class: "checkpoint muted", text: "—" });
  const round = `?tab=validation&attempt=${mark.execution_attempt}&round=${encodeURIComponent(mark.round_id)}`;
  const title = `round ${mark.round_id}, execution attempt ${mark.execution_attempt}${mark.digest ? `\n${mark.digest}` : ""}`;
  return h("td", { class: "checkpoint" }, h("a", { class: "checkpoint-link", href: api.page.run(project, run.run, round), title, text: mark.name ?? "unnamed" }));
}

function row(project, run, selected, sync, columns = [], members = new Map()) {
  const box = h("input", {
    type: "checkbox",
    "aria-label": `select ${run.run}`,
    checked: selected.has(run.run),
    onchange: (event) => {
      if (event.target.checked) selected.add(run.run);
      else selected.delete(run.run);
      sync();
    },
  });
  return h(
    "tr",
    { dataset: { run: run.run } },
    h("td", {}, box),
    h(
      "td",
      {},
      h("a", { class: "run-link", href: api.page.run(project, run.run), text: run.display_name || run.run, title: run.run }),
      run.note ? h("div", { class: "muted note-line", text: run.note.split("\n")[0] }) : null,
    ),
    h("td", {}, statusBadge(run)),
    h(
      "td",
      { class: "group-cell" },
      run.group
        ? h("a", {
            class: "group",
            href: api.page.compare(project, members.get(run.group) ?? [run.run], { groups: true }),
            title: `chart the listed runs of ${run.group} as one mean with a band`,
            text: run.group,
          })
        : null,
      ...(run.tags ?? []).map((tag) => h("span", { class: "tag", text: tag })),
    ),
    h("td", { class: "config" }, configChips(run.config, 4)),
    checkpointCell(project, run),
    ...columns.map((column) => cell(run.columns?.[column])),
    h("td", { class: "num", text: fmtInt(run.last_step) }),
    h("td", { class: "num", text: fmtInt(run.point_count) }),
    h("td", { title: fmtTime(run.updated_at), text: fmtAgo(run.updated_at) }),
    h(
      "td",
      { class: "num" },
      run.alert_count
        ? h("a", { href: api.page.reports(project, [run.run]), text: fmtInt(run.alert_count) })
        : "0",
    ),
    h("td", {}, healthBadge(run)),
  );
}
