// The rules table: each rule's name, kind, condition, level, run, state and open episodes.
// Editors and owners also get the enabled toggle, an edit form in place and delete (after
// an inline confirmation); readers get the same table without them.

import * as api from "../lib/api.js";
import { h } from "../lib/dom.js";
import { fmtTime } from "../lib/format.js";
import { attempt, confirmBox, errorLine } from "../lib/forms.js";
import { KIND_LABELS, condition } from "./describe.js";
import { rulesPath } from "./common.js";
import { ruleForm } from "./ruleform.js";

const COLUMNS = ["name", "kind", "condition", "level", "run", "state", ""];

function stateCell(rule) {
  const open = rule.open_episodes ?? 0;
  return h(
    "td",
    { class: "rule-state" },
    h("span", { class: `badge rule-enabled ${rule.enabled ? "on" : "off"}`, text: rule.enabled ? "enabled" : "disabled" }),
    open ? h("span", { class: "badge warn rule-firing", text: open === 1 ? "firing" : `firing (${open})` }) : null,
  );
}

/** The rule's latest episodes, fetched when asked for (GET …/alert-rules/<id>). */
async function episodesOf(project, rule) {
  const found = await api.getJSON(`${rulesPath(project)}/${rule.id}`);
  if (!found.episodes.length) return h("p", { class: "muted", text: "No episode yet." });
  return h(
    "table",
    { class: "table episodes" },
    h("thead", {}, h("tr", {}, ["run", "subject", "opened", "step", "resolved"].map((text) => h("th", { text })))),
    h(
      "tbody",
      {},
      found.episodes.map((e) =>
        h(
          "tr",
          {},
          h("td", {}, h("a", { href: api.page.run(project, e.run), text: e.run })),
          h("td", { text: e.subject }),
          h("td", { text: fmtTime(e.opened_at) }),
          h("td", { class: "num", text: e.opened_step ?? "—" }),
          h("td", { text: e.resolved_at == null ? "open" : fmtTime(e.resolved_at) }),
        ),
      ),
    ),
  );
}

function ruleRow(project, rule, ctx) {
  const { editable, error, reload } = ctx;
  const detail = h("tr", { class: "rule-detail", hidden: true }, h("td", { colspan: COLUMNS.length }));
  const open = (content) => {
    detail.firstChild.replaceChildren(content);
    detail.hidden = false;
  };
  const episodes = h("button", { type: "button", class: "link", text: "episodes", "aria-label": `episodes of ${rule.name}`, onclick: () =>
    attempt(error, async () => open(await episodesOf(project, rule))) });
  const actions = [episodes];
  if (editable) {
    const toggle = h("input", { type: "checkbox", checked: rule.enabled, "aria-label": `enabled: ${rule.name}`, onchange: (event) =>
      attempt(error, () => api.sendJSON("PATCH", `${rulesPath(project)}/${rule.id}`, { enabled: event.target.checked }, { csrf: ctx.csrf }), reload) });
    const remove = confirmBox(`Delete the rule “${rule.name}” and its episodes? The alerts it raised stay on their runs.`, "Delete", () =>
      attempt(error, () => api.sendJSON("DELETE", `${rulesPath(project)}/${rule.id}`, null, { csrf: ctx.csrf }), reload));
    const close = () => {
      detail.hidden = true;
    };
    actions.unshift(h("label", { class: "toggle" }, toggle, " on"));
    actions.push(
      h("button", { type: "button", class: "link", text: "edit", "aria-label": `edit ${rule.name}`, onclick: () =>
        open(ruleForm(project, ctx.runs, ctx.csrf, { rule, onSaved: reload, onCancel: close })) }),
      h("button", { type: "button", class: "link", text: "delete", "aria-label": `delete ${rule.name}`, onclick: () => {
        open(remove.el);
        remove.open();
      } }),
    );
  }
  const row = h(
    "tr",
    { class: "rule", dataset: { rule: rule.id, kind: rule.kind } },
    h("td", { class: "rule-name", text: rule.name }),
    h("td", { text: KIND_LABELS[rule.kind] ?? rule.kind }),
    h("td", { class: "rule-condition", text: condition(rule) }),
    h("td", {}, h("span", { class: `level ${rule.level}`, text: rule.level })),
    h("td", { class: "rule-run" }, rule.run ? h("a", { href: api.page.run(project, rule.run), text: rule.run }) : h("span", { class: "muted", text: "all runs" })),
    stateCell(rule),
    h("td", { class: "rule-actions" }, actions),
  );
  return [row, detail];
}

/** The rules section: the table and, for editors, the add form. `runs`: run names. */
export async function rulesSection(project, runs, { editable, csrf }) {
  const error = errorLine();
  const rows = h("tbody");
  const ctx = { editable, csrf, runs, error, reload: null };
  ctx.reload = async () => {
    const { rules } = await api.getJSON(rulesPath(project));
    rows.replaceChildren(...rules.flatMap((rule) => ruleRow(project, rule, ctx)));
    if (!rules.length) rows.append(h("tr", {}, h("td", { colspan: COLUMNS.length, class: "empty-cell", text: "No alert rules." })));
  };
  await ctx.reload();
  return h(
    "section",
    { class: "alerts-section rules" },
    h("h2", { text: "Rules" }),
    h("table", { class: "table alert-rules" }, h("thead", {}, h("tr", {}, COLUMNS.map((text) => h("th", { text })))), rows),
    error.el,
    editable
      ? h("div", { class: "rule-create" }, h("h3", { text: "Add a rule" }), ruleForm(project, runs, csrf, { onSaved: ctx.reload }))
      : h("p", { class: "muted read-only-note", text: "Only the project's editors and owners change its rules and see its webhooks." }),
  );
}
