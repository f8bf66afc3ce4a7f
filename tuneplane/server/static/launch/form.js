// "/projects/<project>/launch/recipes/<recipe>": the launch form of one recipe. Its
// parameters come from the recipe's schema, its config is JSON; Check readiness shows the
// server's preview, which any change clears; Submit sends the launch under one client key
// per form (a double click or a retry never starts two jobs) and opens the new run.
// "?from=<run>" re-runs that run: the form starts from its recipe, parameters and config,
// says what changed against them, and the new run records it as its parent.

import * as api from "../lib/api.js";
import { flattenConfig, valueText } from "../lib/config.js";
import { crumbs, empty, h, mount } from "../lib/dom.js";
import { signInHint } from "../lib/missing.js";
import { address } from "../lib/root.js";
import { launchPage, preview, recipe as getRecipe, submit } from "./api.js";
import { resourcesText } from "./recipes.js";
import { failedRequestView, reportView } from "./report.js";
import { schemaFields } from "./schema.js";
import { CHECK_RECORD_KEY } from "./runjobs.js";

/** A client key for the form's submissions: 32 hex digits (an ID the API takes). */
function clientKey() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** The recipe and, for a re-run, the run it starts from; null when the page says why not. */
async function load(project, name, from) {
  try {
    const [recipe, original] = await Promise.all([getRecipe(name), from == null ? null : api.run(project, from)]);
    return { recipe, original };
  } catch (error) {
    if (error.status === 401) mount(empty("Launching is for signed-in users.", error.message, await signInHint()));
    else if (error.status === 404) mount(empty("Nothing to launch here.", error.message, h("a", { href: launchPage.recipes(project), text: "All recipes" })));
    else throw error;
    return null;
  }
}

export async function launchFormPage(project, name) {
  const from = new URLSearchParams(location.search).get("from");
  crumbs([[project, api.page.project(project)], ["launch", launchPage.recipes(project)], [from ? `re-run ${from}` : name, null]]);
  const loaded = await load(project, name, from);
  if (!loaded) return;
  const { recipe, original } = loaded;
  const started = original?.config ?? {};
  const fields = schemaFields(recipe.parameters, isObject(started.parameters) ? started.parameters : {});
  const config = h("textarea", { name: "config", class: "config-editor", rows: 8, spellcheck: "false", "aria-label": "config" });
  config.value = JSON.stringify(isObject(started.config) ? started.config : {}, null, 2);
  const runName = h("input", { name: "run", placeholder: `${recipe.name}-<8 hex digits>`, "aria-label": "new run ID" });
  const problem = h("p", { class: "form-error launch-error", role: "alert" });
  const slot = h("div", { class: "report-slot" });
  const changes = h("div", { class: "changes" });
  const check = h("button", { type: "button", class: "button secondary check-readiness", text: "Check readiness" });
  const send = h("button", { type: "submit", class: "button submit-launch", text: "Submit" });
  const key = clientKey();
  let shown = 0; // the form's version a check started on: a later change discards its answer

  const read = () => {
    const { parameters, problems, unreadable } = fields.read();
    let parsed = null;
    const bad = [...unreadable];
    try {
      parsed = JSON.parse(config.value.trim() || "{}");
      if (!isObject(parsed)) throw new Error("must be a JSON object");
    } catch (error) {
      bad.push(`config (${error instanceof SyntaxError ? "not valid JSON" : error.message})`);
    }
    const body = { recipe: recipe.name, parameters, config: parsed ?? {} };
    if (runName.value.trim()) body.run = runName.value.trim();
    if (original) body.parent = original.run;
    return { body, problems, bad };
  };
  const blocked = (bad) => {
    problem.textContent = bad.length ? `Not sent: ${bad.join(", ")} cannot be read.` : "";
    return bad.length > 0;
  };
  const changed = () => {
    shown += 1;
    if (slot.firstChild) slot.replaceChildren(h("p", { class: "muted report-cleared", text: "Changed since the last check: check readiness again." }));
    const { body, bad } = read();
    blocked(bad);
    if (original) changes.replaceChildren(changeList(original, fields.effective(body.parameters), body.config));
  };

  check.addEventListener("click", async () => {
    const { body, bad } = read();
    if (blocked(bad)) return;
    const version = (shown += 1);
    check.disabled = true;
    slot.replaceChildren(h("p", { class: "muted", text: "Checking…" }));
    const answer = await preview(project, body);
    check.disabled = false;
    if (version !== shown) return; // the form changed meanwhile: that answer is of other values
    slot.replaceChildren(answer.ok ? reportView(answer.report) : failedRequestView(answer.reason));
  });

  const form = h(
    "form",
    {
      class: "launch-form",
      oninput: changed,
      onchange: changed,
      onsubmit: async (event) => {
        event.preventDefault();
        const { body, bad } = read();
        if (send.disabled || blocked(bad)) return;
        send.disabled = true;
        send.textContent = "Submitting…";
        try {
          const answer = await submit(project, body, key);
          location.assign(address(api.page.run(project, answer.job.run)));
        } catch (error) {
          // A refusal names each failed check (checks.<name>): all of them are said.
          const said = error.details?.length ? error.details.map((d) => `${d.field}: ${d.rule}`).join("; ") : error.message;
          problem.textContent = `Not submitted: ${said}`;
          send.disabled = false;
          send.textContent = "Submit";
        }
      },
    },
    fields.count ? h("fieldset", {}, h("legend", { text: "Parameters" }), fields.el) : h("p", { class: "muted", text: "This recipe takes no parameters." }),
    h("fieldset", {}, h("legend", { text: "Config (JSON)" }), config),
    h("label", { class: "field" }, h("span", { text: "New run ID (optional)" }), runName),
    changes,
    problem,
    h("div", { class: "actions" }, check, send),
  );
  mount(
    h("div", { class: "title-line" }, h("h1", { text: original ? `Re-run ${original.run}` : `Launch ${recipe.name}` })),
    recipeFacts(project, recipe, original),
    form,
    slot,
  );
  changed();
}

const isObject = (value) => value != null && typeof value === "object" && !Array.isArray(value);

function recipeFacts(project, recipe, original) {
  const launchedFrom = original?.config?.[CHECK_RECORD_KEY]?.recipe;
  return h(
    "div",
    { class: "recipe-facts" },
    recipe.description ? h("p", { text: recipe.description }) : null,
    h("p", { class: "muted", text: `Recipe ${recipe.name} on the ${recipe.engine} engine: ${resourcesText(recipe.resources)}.` }),
    original
      ? h(
          "p",
          { class: "rerun-of" },
          "Starts from ",
          h("a", { href: api.page.run(project, original.run), text: original.run }),
          ": its parameters and config; the new run records it as its parent.",
        )
      : null,
    original && launchedFrom !== recipe.name
      ? h("p", { class: "notice", text: `${original.run} was not launched from ${recipe.name}${launchedFrom ? ` but from ${launchedFrom}` : ""}: its values may not fit this recipe.` })
      : null,
  );
}

/** A launch's parameters and config by dotted key: "parameters.lr", "config.model.layers". */
function flatLaunch(parameters, config) {
  const rows = new Map();
  for (const [key, value] of flattenConfig(parameters)) rows.set(`parameters.${key}`, value);
  for (const [key, value] of flattenConfig(config)) rows.set(`config.${key}`, value);
  return rows;
}

/** The parameters and config that differ from the run's: "lr: 0.001 → 0.01". */
function changeList(original, parameters, config) {
  const before = flatLaunch(original.config?.parameters ?? {}, original.config?.config ?? {});
  const after = flatLaunch(parameters, config);
  const rows = [];
  for (const name of new Set([...before.keys(), ...after.keys()])) {
    const [was, now] = [before.get(name), after.get(name)];
    if (JSON.stringify(was) === JSON.stringify(now)) continue;
    const text = (v) => (v === undefined ? "(not set)" : valueText(v));
    rows.push(h("li", { dataset: { name } }, h("code", { text: name }), `: ${text(was)} → ${text(now)}`));
  }
  return h(
    "section",
    { class: "rerun-changes", "aria-label": "changes against the original" },
    h("h3", { text: `Changes against ${original.run}` }),
    rows.length ? h("ul", {}, rows) : h("p", { class: "muted", text: "None yet: the same parameters and config." }),
  );
}
