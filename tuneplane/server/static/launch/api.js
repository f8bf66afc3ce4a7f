// Launching jobs through the public API (docs/launch.md): recipes, the readiness preview,
// submission with its Idempotency-Key, a run's jobs and their cancel.

import { getJSON, projectPath, sendJSON, session } from "../lib/api.js";
import { address } from "../lib/root.js";

const enc = encodeURIComponent;
const launchPath = (project) => `${projectPath(project)}/launch`;

/** The server's recipes: [{name, description, kind, engine, command, parameters, …}]. */
export const recipes = () => getJSON("/api/v1/recipes");
export const recipe = (name) => getJSON(`/api/v1/recipes/${enc(name)}`);

/** A run's jobs (or the project's, without a run), newest first. */
export const jobs = (project, run = null) =>
  getJSON(`${launchPath(project)}/jobs${run == null ? "" : `?run=${enc(run)}`}`);

const csrf = async () => (await session()).csrf_token ?? null;

export async function cancelJob(project, id) {
  return sendJSON("POST", `${launchPath(project)}/jobs/${enc(id)}/cancel`, null, { csrf: await csrf() });
}

/**
 * The readiness checks of a launch: {ok: true, report} when the server answered with a
 * report, else {ok: false, reason}. A request that did not reach the server, that it
 * refused or failed on, or whose answer is not a report is a failed check request, never a
 * report: nothing here turns it into a pass.
 */
export async function preview(project, body) {
  let response;
  try {
    const token = await csrf();
    const headers = { Accept: "application/json", "Content-Type": "application/json", ...(token ? { "X-CSRF-Token": token } : {}) };
    response = await fetch(address(`${launchPath(project)}/preview`), { method: "POST", headers, body: JSON.stringify(body) });
  } catch (error) {
    return { ok: false, reason: `the server could not be reached (${error.message ?? error})` };
  }
  let answer = null;
  try {
    answer = await response.json();
  } catch {
    // not JSON: said below by the status
  }
  if (!response.ok) {
    const said = answer?.error?.message ?? response.statusText;
    return { ok: false, reason: `the server answered ${response.status}${said ? `: ${said}` : ""}` };
  }
  if (!Array.isArray(answer?.checks) || typeof answer.ready !== "boolean") {
    return { ok: false, reason: "the server's answer is not a readiness report" };
  }
  return { ok: true, report: answer };
}

/** Submit a launch under the form's client key: a retried or doubled submit answers the
 * job the first one made ({job, created: false}) and starts nothing. */
export async function submit(project, body, key) {
  return sendJSON("POST", launchPath(project), body, { csrf: await csrf(), headers: { "Idempotency-Key": key } });
}

/** Dashboard links of launching. */
export const launchPage = {
  recipes: (project) => `/projects/${enc(project)}/launch`,
  form: (project, name, from = null) =>
    `/projects/${enc(project)}/launch/recipes/${enc(name)}${from == null ? "" : `?from=${enc(from)}`}`,
};
