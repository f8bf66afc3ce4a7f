// "/projects/<project>/launch": the recipes this server launches, each with its engine,
// resources and parameters, linking to its launch form for the project; then the project's
// launched jobs.

import * as api from "../lib/api.js";
import { crumbs, empty, h, mount } from "../lib/dom.js";
import { signInHint } from "../lib/missing.js";
import { launchPage, recipes } from "./api.js";
import { jobsTable } from "./jobs.js";
import { schemaSummary } from "./schema.js";

/** "2 GPUs, 8 CPUs, 32 GB, 90 min": what a recipe asks its engine for. */
export function resourcesText(resources) {
  const r = resources ?? {};
  const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;
  const said = [plural(r.gpus ?? 0, "GPU"), plural(r.cpus ?? 1, "CPU"), `${r.memory_gb ?? 1} GB`];
  said.push(r.time_minutes == null ? "no time limit" : `${r.time_minutes} min`);
  return said.join(", ");
}

export async function recipesPage(project) {
  crumbs([[project, api.page.project(project)], ["launch", null]]);
  let listed;
  try {
    listed = await recipes();
  } catch (error) {
    if (error.status !== 401 && error.status !== 403) throw error;
    mount(empty("Recipes are shown to signed-in users.", error.message, await signInHint()));
    return;
  }
  const title = h("div", { class: "title-line" }, h("h1", { text: `Launch in ${project}` }));
  if (!listed.length) {
    mount(title, empty("This server has no recipes.", "Recipes are files in the server's recipes directory (TUNEPLANE_RECIPES_DIR); see docs/launch.md."));
    return;
  }
  mount(
    title,
    h("p", { class: "muted", text: "Each recipe is a job template of this server. Open one to fill in its parameters, check readiness and submit it." }),
    h(
      "table",
      { class: "table recipes" },
      h("thead", {}, h("tr", {}, ["recipe", "kind", "engine", "resources", "parameters"].map((label) => h("th", { text: label })))),
      h("tbody", {}, listed.map((recipe) => recipeRow(project, recipe))),
    ),
    h("h2", { text: "Jobs" }),
    await jobsTable(project),
  );
}

function recipeRow(project, recipe) {
  return h(
    "tr",
    { dataset: { recipe: recipe.name } },
    h(
      "td",
      {},
      h("a", { class: "recipe-link", href: launchPage.form(project, recipe.name), text: recipe.name }),
      recipe.description ? h("div", { class: "muted", text: recipe.description }) : null,
    ),
    h("td", { text: recipe.kind ?? "training" }),
    h("td", { class: "recipe-engine", text: recipe.engine }),
    h("td", { class: "recipe-resources", text: resourcesText(recipe.resources) }),
    h("td", { class: "recipe-params", text: schemaSummary(recipe.parameters) }),
  );
}
