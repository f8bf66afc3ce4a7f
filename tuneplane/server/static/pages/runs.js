// "/projects/<project>": the project's runs in a table filtered by text; tick runs to
// compare them. The table refreshes itself every few seconds.

import * as api from "../lib/api.js";
import { crumbs, debounce, empty, h, mount } from "../lib/dom.js";
import { fmtAgo, fmtInt, fmtTime } from "../lib/format.js";
import { configChips, healthBadge, runSearchText, statusBadge } from "../lib/runinfo.js";
import { address } from "../lib/root.js";
import { withParam } from "../lib/url.js";
import { accessHref } from "./access.js";
import { signInHint } from "./account.js";

/** How often the projects and runs tables fetch themselves again. */
export const REFRESH_MS = 5000;

export async function runsPage(project) {
  crumbs([[project, null]]);
  let runs;
  try {
    runs = await api.runs(project);
  } catch (error) {
    if (error.status === 404) {
      mount(empty(`No project named “${project}”.`, h("a", { href: "/", text: "All projects" }), await signInHint()));
      return;
    }
    throw error;
  }
  const selected = new Set();
  const filter = h("input", {
    type: "search",
    class: "filter",
    placeholder: "filter runs by name, status, config…",
    value: new URLSearchParams(location.search).get("q") ?? "",
    "aria-label": "filter runs",
  });
  const compare = h("a", { class: "button", text: "Compare selected" });
  const reports = h("a", { class: "button secondary", text: "Alerts of selected" });
  const count = h("span", { class: "muted" });
  const body = h("tbody");

  const sync = () => {
    const names = [...selected];
    compare.toggleAttribute("aria-disabled", names.length < 2);
    compare.setAttribute("href", names.length >= 2 ? address(api.page.compare(project, names)) : "#");
    reports.setAttribute("href", address(api.page.reports(project, names)));
  };

  const render = () => {
    const words = filter.value.toLowerCase().split(/\s+/).filter(Boolean);
    const shown = runs
      .slice()
      .reverse()
      .filter((run) => words.every((w) => runSearchText(run).includes(w)));
    body.replaceChildren(...shown.map((run) => row(project, run, selected, sync)));
    count.textContent = `${shown.length} of ${runs.length} runs`;
    if (!shown.length) {
      body.append(h("tr", {}, h("td", { colspan: 9, class: "empty-cell", text: "No run matches the filter." })));
    }
  };

  filter.addEventListener(
    "input",
    debounce(() => {
      history.replaceState(null, "", address(withParam("q", filter.value)));
      render();
    }, 120),
  );

  // Owners manage the project's access; editors its share links (the page shows each
  // only what the API lets them do).
  const you = runs[0]?.you;
  const title = h(
    "div",
    { class: "title-line project-title" },
    h("h1", { text: project }),
    you?.manage || you?.share ? h("a", { class: "button secondary access-link", href: accessHref(project), text: "Access" }) : null,
  );
  if (!runs.length) {
    mount(title, empty("This project has no runs yet."));
    return;
  }
  mount(
    title,
    h("div", { class: "toolbar" }, filter, count, h("span", { class: "spacer" }), reports, compare),
    h(
      "table",
      { class: "table runs" },
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          ["", "run", "status", "config", "last step", "points", "last update", "alerts", "transport"].map(
            (label) => h("th", { text: label, class: ["last step", "points", "alerts"].includes(label) ? "num" : null }),
          ),
        ),
      ),
      body,
    ),
  );
  render();
  sync();

  const timer = setInterval(async () => {
    if (!document.body.contains(body)) return clearInterval(timer);
    if (document.hidden) return;
    try {
      runs = await api.runs(project);
      render();
    } catch {
      // keep the last table; the next tick tries again
    }
  }, REFRESH_MS);
}

function row(project, run, selected, sync) {
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
    h("td", {}, h("a", { class: "run-link", href: api.page.run(project, run.run), text: run.run })),
    h("td", {}, statusBadge(run)),
    h("td", { class: "config" }, configChips(run.config, 4)),
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
