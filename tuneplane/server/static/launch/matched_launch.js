// "/projects/<project>/launch/matched?left=<run>&right=<run>": Start matched benchmark
// evaluations (docs/launch.md). One registered export of each run, one evaluation recipe
// (the benchmark), its shared parameters and an optional sample limit. Check both shows
// both sides' readiness reports and their protocol digests (equal by construction: only the
// model differs); any change clears them. Each side then starts as its own job: starting
// one never starts the other. Once both jobs have finished, the page links the matched view.

import * as api from "../lib/api.js";
import { crumbs, empty, h, mount } from "../lib/dom.js";
import { select } from "../lib/forms.js";
import { signInHint } from "../lib/missing.js";
import { launchPage, recipes } from "./api.js";
import { failedRequestView, reportView } from "./report.js";
import { schemaFields } from "./schema.js";

const SIDES = [
  ["left", "Left (baseline)"],
  ["right", "Right (compared)"],
];
/** Filled per side by the launch itself, so never a field of the form. */
const PER_SIDE = ["model", "limit"];
const enc = encodeURIComponent;
const matchedPath = (project) => `${api.projectPath(project)}/launch/matched`;
const csrf = async () => (await api.session()).csrf_token ?? null;

/** The page's address for two runs of a project (the runs page links it). */
export const matchedLaunchHref = (project, left, right) =>
  `/projects/${enc(project)}/launch/matched?left=${enc(left)}&right=${enc(right)}`;

/**
 * Both sides' readiness checks: {ok: true, answer} when the server answered with both
 * reports, else {ok: false, reason}: a request that failed is never shown as a pass.
 */
async function previewBoth(project, body) {
  let answer;
  try {
    answer = await api.sendJSON("POST", `${matchedPath(project)}/preview`, body, { csrf: await csrf() });
  } catch (error) {
    const said = error instanceof api.ApiError ? `the server answered ${error.status}: ${error.message}` : `the server could not be reached (${error.message ?? error})`;
    return { ok: false, reason: said };
  }
  const sides = answer?.sides;
  if (!Array.isArray(sides?.left?.report?.checks) || !Array.isArray(sides?.right?.report?.checks)) {
    return { ok: false, reason: "the server's answer is not a readiness report" };
  }
  return { ok: true, answer };
}

const exportText = (e) =>
  `step ${e.step ?? "—"} · ${e.format} · ${e.digest ? `sha256 ${e.digest.slice(0, 12)}…` : "no digest"} · ${e.uri}`;

/** One run's exports as a choice, or a line saying it registered none. */
function exportChoice(side, run, exports) {
  const label = `${side}-export`;
  if (!exports.length) {
    return { el: h("p", { class: "muted no-exports", text: `${run} registered no export (tuneplane.register_export).` }), value: () => null };
  }
  const options = exports.map((e) => [e.export_id, exportText(e)]);
  const chosen = select(label, options, exports[exports.length - 1].export_id, { "aria-label": `${side} export` });
  return { el: chosen, value: () => chosen.value };
}

/** The benchmark's shared parameters: its schema without what each side fills in. */
function sharedSchema(recipe) {
  const properties = { ...(recipe.parameters?.properties ?? {}) };
  for (const name of PER_SIDE) delete properties[name];
  const required = (recipe.parameters?.required ?? []).filter((name) => !PER_SIDE.includes(name));
  return { ...recipe.parameters, properties, required };
}

async function load(project, left, right) {
  try {
    const [all, leftExports, rightExports] = await Promise.all([
      recipes(),
      api.getJSON(`${api.runPath(project, left)}/exports`),
      api.getJSON(`${api.runPath(project, right)}/exports`),
    ]);
    return { benchmarks: all.filter((r) => r.kind === "evaluation" && r.parameters?.properties?.model), exports: { left: leftExports, right: rightExports } };
  } catch (error) {
    if (error.status === 401) mount(empty("Launching is for signed-in users.", error.message, await signInHint()));
    else if (error.status === 404) mount(empty("Nothing to evaluate here.", error.message));
    else throw error;
    return null;
  }
}

export async function matchedLaunchPage(project) {
  const params = new URLSearchParams(location.search);
  const runs = { left: params.get("left"), right: params.get("right") };
  crumbs([[project, api.page.project(project)], ["launch", launchPage.recipes(project)], ["matched benchmark", null]]);
  if (!runs.left || !runs.right) {
    mount(empty("Choose two runs.", "Tick two runs in the project's list, then Start matched benchmark evaluations."));
    return;
  }
  const loaded = await load(project, runs.left, runs.right);
  if (!loaded) return;
  if (!loaded.benchmarks.length) {
    mount(empty("No benchmark to run.", "The server has no evaluation recipe that takes a model parameter (docs/launch.md)."));
    return;
  }
  const form = new MatchedForm(project, runs, loaded);
  mount(h("h1", { text: "Start matched benchmark evaluations" }), form.el);
}

class MatchedForm {
  constructor(project, runs, { benchmarks, exports }) {
    this.project = project;
    this.runs = runs;
    this.benchmarks = benchmarks;
    this.version = 0; // a change discards the answer of a check started before it
    this.pair = null;
    this.choices = Object.fromEntries(SIDES.map(([side]) => [side, exportChoice(side, runs[side], exports[side])]));
    this.recipe = select("benchmark", benchmarks.map((r) => [r.name, r.description ? `${r.name}: ${r.description}` : r.name]), benchmarks[0].name, { "aria-label": "benchmark" });
    this.limit = h("input", { type: "number", name: "limit", min: "1", step: "1", placeholder: "all (the recipe's default)", "aria-label": "sample limit" });
    this.paramSlot = h("div", { class: "params-slot" });
    this.slot = h("div", { class: "report-slot matched-reports" });
    this.problem = h("p", { class: "form-error", role: "alert" });
    this.check = h("button", { type: "button", class: "button secondary check-both", text: "Check both" });
    this.sideCards = h("div", { class: "side-cards" }, SIDES.map(([side, title]) => h("section", { class: "side-card", dataset: { side } }, h("h2", { text: `${title}: ${runs[side]}` }), this.choices[side].el)));
    this.el = h(
      "form",
      { class: "matched-launch", onsubmit: (event) => event.preventDefault() },
      this.sideCards,
      h("label", { class: "field" }, h("span", { text: "Benchmark" }), this.recipe),
      this.paramSlot,
      h("label", { class: "field" }, h("span", { text: "Sample limit (optional)" }), this.limit),
      h("div", { class: "toolbar" }, this.check),
      this.problem,
      this.slot,
    );
    this.recipe.addEventListener("change", () => this.showParameters());
    this.el.addEventListener("input", () => this.changed());
    this.el.addEventListener("change", () => this.changed());
    this.check.addEventListener("click", () => this.checkBoth());
    this.showParameters();
  }

  chosenRecipe() {
    return this.benchmarks.find((r) => r.name === this.recipe.value);
  }

  showParameters() {
    this.fields = schemaFields(sharedSchema(this.chosenRecipe()));
    this.paramSlot.replaceChildren(this.fields.el);
    this.limit.disabled = !this.chosenRecipe().parameters?.properties?.limit;
  }

  /** Any change makes a shown check stale: it is cleared, never left to read as current. */
  changed() {
    this.version += 1;
    this.pair = null;
    if (this.slot.firstChild) this.slot.replaceChildren(h("p", { class: "muted report-cleared", text: "Changed since the last check: check both again." }));
  }

  body() {
    const { parameters, unreadable } = this.fields.read();
    const bad = [...unreadable];
    const sides = {};
    for (const [side] of SIDES) {
      const chosen = this.choices[side].value();
      if (chosen == null) bad.push(`${side} export (none registered)`);
      sides[side] = { run: this.runs[side], export: chosen };
    }
    /** @type {Record<string, unknown>} */
    const body = { recipe: this.recipe.value, parameters, ...sides };
    if (this.limit.value.trim() && !this.limit.disabled) body.limit = Number(this.limit.value);
    return { body, bad };
  }

  async checkBoth() {
    const { body, bad } = this.body();
    this.problem.textContent = bad.length ? `Not sent: ${bad.join(", ")}.` : "";
    if (bad.length) return;
    const version = ++this.version;
    this.slot.replaceChildren(h("p", { class: "muted", text: "Checking both sides…" }));
    const result = await previewBoth(this.project, body);
    if (version !== this.version) return; // changed meanwhile: this answer is stale
    if (!result.ok) {
      this.slot.replaceChildren(failedRequestView(result.reason));
      return;
    }
    this.pair = result.answer.pair;
    this.slot.replaceChildren(this.previewView(result.answer, body));
  }

  previewView(answer, body) {
    const protocol = h(
      "p",
      { class: `protocol ${answer.same_protocol ? "same" : "differs"}`, dataset: { same: String(answer.same_protocol) } },
      answer.same_protocol ? "Same protocol on both sides: " : "The protocol digests differ: ",
      h("span", { class: "muted", text: answer.protocol_covers }),
    );
    const sides = SIDES.map(([side, title]) => {
      const shown = answer.sides[side];
      const status = h("div", { class: "side-status", dataset: { side } });
      const start = h("button", { type: "button", class: "button start-side", dataset: { side }, text: `Start ${side}`, disabled: !shown.report.ready });
      start.addEventListener("click", () => this.start(side, body, start, status));
      return h(
        "section",
        { class: "side-preview", dataset: { side } },
        h("h2", { text: `${title}: ${shown.run}` }),
        h("p", {}, "Export ", h("code", { text: shown.export.digest ?? "no digest" }), h("span", { class: "muted", text: ` ${shown.export.uri}` })),
        h("p", { class: "side-protocol" }, "Protocol digest ", h("code", { class: "protocol-digest", text: shown.protocol })),
        h("p", { class: "muted", text: `Starts the run ${shown.job_run}.` }),
        reportView(shown.report),
        h("div", { class: "toolbar" }, start),
        status,
      );
    });
    this.pairStatus = h("div", { class: "pair-status" });
    return h("div", { class: "matched-preview", dataset: { pair: answer.pair } }, protocol, h("div", { class: "side-cards" }, sides), this.pairStatus);
  }

  async start(side, body, button, status) {
    button.disabled = true;
    try {
      const answer = await api.sendJSON("POST", matchedPath(this.project), { ...body, pair: this.pair, side }, { csrf: await csrf() });
      const job = answer.job;
      status.replaceChildren(h("a", { class: "side-job", href: api.page.run(this.project, job.run), text: `Job ${job.id}: ${job.run}` }));
      this.follow(this.pair);
    } catch (error) {
      button.disabled = false;
      status.replaceChildren(h("p", { class: "form-error", role: "alert", text: `Not started: ${error.message}` }));
    }
  }

  /** The pair's jobs until both have ended; then the matched view's links. */
  follow(pair) {
    if (this.following === pair) return;
    this.following = pair;
    const tick = async () => {
      if (this.following !== pair) return;
      let answer;
      try {
        answer = await api.getJSON(`${matchedPath(this.project)}/${enc(pair)}`);
      } catch (error) {
        this.pairStatus.replaceChildren(h("p", { class: "form-error", text: `The jobs could not be read: ${error.message}` }));
        setTimeout(tick, 3000);
        return;
      }
      this.pairStatus.replaceChildren(pairView(answer));
      const ended = SIDES.every(([side]) => ["succeeded", "failed", "cancelled", "lost"].includes(answer.sides[side].job?.state));
      if (!ended) setTimeout(tick, 2000);
    };
    tick();
  }
}

function pairView(answer) {
  const states = SIDES.map(([side]) => {
    const job = answer.sides[side].job;
    return h("li", { dataset: { side, state: job?.state ?? "not_started" } }, `${side}: `, job ? `${job.state}` : "not started");
  });
  const links = answer.matched.map((m) => h("li", {}, h("a", { class: "matched-link", href: m.url, text: `Open the matched view: ${m.task}` })));
  const said = answer.finished
    ? answer.matched.length
      ? h("ul", { class: "matched-links" }, links)
      : h("p", { class: "muted", text: "Both jobs finished, but no task reported a round on both sides." })
    : h("p", { class: "muted", text: "The matched view is linked here once both jobs have finished." });
  return h("div", {}, h("ul", { class: "pair-states" }, states), said);
}
