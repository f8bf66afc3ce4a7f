// The public JSON API (docs/api.md, docs/sdk-protocol.md): the dashboard reads nothing else.
// Paths are written from the server's root; requests add its prefix (lib/root.js).

import { address } from "./root.js";

const enc = encodeURIComponent;

export class ApiError extends Error {
  /** `details`: the rules broken, [{field, rule}], when the API named them. */
  constructor(status, message, details = null) {
    super(message);
    this.status = status;
    this.details = details;
  }
}

export const projectPath = (project) => `/api/v1/projects/${enc(project)}`;
export const runPath = (project, run) => `${projectPath(project)}/runs/${enc(run)}`;
// Metric names go in the query (?metric=), never in the path: a name may be any printable
// text, and URL normalisation would change "a/../b" or "." in a path.

export const csvUrl = (project, run) => `${runPath(project, run)}/export.csv`;
export const runStreamUrl = (project, run) => `${runPath(project, run)}/stream`;
export const logStreamUrl = (project, run) => `${runPath(project, run)}/logs/stream`;

/**
 * A query string ("?a=1&b=x", or "" for none) of the parameters that have a value: null,
 * undefined and "" are left out.
 * @param {Record<string, unknown>} params
 */
export function query(params) {
  const q = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value != null && value !== "") q.set(key, String(value));
  }
  const text = q.toString();
  return text ? `?${text}` : "";
}

/**
 * GET a path; an answer that is not a success is thrown as an ApiError with the API's
 * message ({"error": {"message": ...}}).
 * @param {string} path
 * @param {{signal?: AbortSignal}} [options]
 */
async function get(path, { signal } = {}) {
  const response = await fetch(address(path), { signal, headers: { Accept: "application/json" } });
  if (!response.ok) {
    let message = `${response.status} ${response.statusText}`;
    try {
      message = (await response.json()).error?.message ?? message;
    } catch {
      // not JSON: keep the status line
    }
    throw new ApiError(response.status, message);
  }
  return response;
}

/**
 * GET a JSON document; errors carry the API's message.
 * @param {string} path
 * @param {{signal?: AbortSignal}} [options]
 */
export async function getJSON(path, options = {}) {
  return (await get(path, options)).json();
}

/**
 * Send a JSON body (POST, PATCH, PUT, DELETE). A signed-in browser's writes carry the CSRF
 * token the session answer gave (GET /api/v1/session); the browser adds the Origin.
 * `headers`: more request headers (a submission's Idempotency-Key).
 */
export async function sendJSON(method, path, body = null, { csrf = null, headers: extra = {} } = {}) {
  const headers = { Accept: "application/json", ...extra };
  if (body != null) headers["Content-Type"] = "application/json";
  if (csrf) headers["X-CSRF-Token"] = csrf;
  const response = await fetch(address(path), { method, headers, body: body == null ? null : JSON.stringify(body) });
  let answer = null;
  try {
    answer = await response.json();
  } catch {
    // not JSON: the status line says enough
  }
  if (!response.ok) {
    const message = answer?.error?.message ?? `${response.status} ${response.statusText}`;
    throw new ApiError(response.status, message, answer?.error?.details ?? null);
  }
  return answer;
}

/** Who this browser is signed in as: {signed_in, login, is_admin, csrf_token, …}. */
export const session = () => getJSON("/api/v1/session");
export const projects = () => getJSON("/api/v1/projects");
export const runs = (project) => getJSON(`${projectPath(project)}/runs`);
/** A page of a project's runs found by a search (docs/api.md, "Searching runs"): {runs, total}. */
export async function searchRuns(project, { q = null, sort = null, columns = null, limit = 200 } = {}) {
  const response = await get(`${projectPath(project)}/runs${query({ q, sort, columns, limit })}`);
  return { runs: await response.json(), total: Number(response.headers.get("X-Total-Count") ?? 0) };
}
export const run = (project, name) => getJSON(runPath(project, name));
export const metrics = (project, name) => getJSON(`${runPath(project, name)}/metrics`);
/** The metric summaries of several runs of a project: {runs: [{run, metrics}]}. */
export const metricsOfRuns = (project, names) =>
  getJSON(`${projectPath(project)}/metrics${query({ runs: names.join(",") })}`);
export const alerts = (project, name, level = null) =>
  getJSON(`${runPath(project, name)}/alerts${query({ level })}`);
export const invalid = (project, name, metric) =>
  getJSON(`${runPath(project, name)}/invalid${query({ metric })}`);
export const logs = (project, name, after = 0, limit = 500) =>
  getJSON(`${runPath(project, name)}/logs${query({ after, limit })}`);

/** The latest observation events, newest first; a type (e.g. "health") finds older ones. */
export const observations = (project, name, type = null, limit = null) =>
  getJSON(`${runPath(project, name)}/observations${query({ type, limit })}`);

// The evaluation reads are evaluation/api.js's, the trajectory reads trajectories/api.js's.

// Point reads take x: another metric of the run, whose value at each bucket's last step the
// server adds to the bucket (an x axis over that metric); null for the step.

/** Several metrics of one run, each reduced to at most maxPoints: {metrics, missing}. */
export function pointsOfMetrics(project, name, metrics, { maxPoints, start = null, x = null }) {
  const q = new URLSearchParams();
  for (const metric of metrics) q.append("metric", metric);
  q.set("max_points", String(maxPoints));
  if (start != null) q.set("start", String(start));
  if (x != null) q.set("x", x);
  return getJSON(`${runPath(project, name)}/points?${q}`);
}

/** One metric of several runs of a project, each reduced to at most maxPoints: {runs, missing}. */
export const pointsOfRuns = (project, names, metric, { maxPoints, x = null }) =>
  getJSON(`${projectPath(project)}/points${query({ metric, runs: names.join(","), max_points: maxPoints, x })}`);

/**
 * One metric of the named runs aggregated per group by the server (within start..end):
 * {groups: [{group, runs, missing, buckets: [{x, step_min, step_max, mean, min, max, std, n,
 * time, elapsed}]}], ungrouped}.
 */
export const groupPoints = (project, names, metric, { maxPoints, start = null, end = null, x = null }) =>
  getJSON(
    `${projectPath(project)}/groups/points${query({ metric, runs: names.join(","), max_points: maxPoints, start, end, x })}`,
  );

/**
 * Buckets of one metric reduced by the server to at most maxPoints (within start..end).
 * @param {string} project
 * @param {string} name
 * @param {string} metric
 * @param {{maxPoints: number, start?: number | null, end?: number | null, x?: string | null, signal?: AbortSignal}} options
 */
export async function points(project, name, metric, { maxPoints, start = null, end = null, x = null, signal }) {
  const body = await getJSON(
    `${runPath(project, name)}/points${query({ metric, max_points: maxPoints, start, end, x })}`,
    { signal },
  );
  if (!body.metrics.length) throw new ApiError(404, `metric ${metric} not found in this run`);
  return body.metrics[0];
}

/** Dashboard links. */
export const page = {
  project: (project) => `/projects/${enc(project)}`,
  run: (project, name, search = "") => `/projects/${enc(project)}/runs/${enc(name)}${search}`,
  compare: (project, names, { groups = false } = {}) =>
    `/compare${query({ project, runs: names.join(","), groups: groups ? "1" : null })}`,
  reports: (project, names = [], level = null) =>
    `/reports${query({ project, runs: names.length ? names.join(",") : null, level })}`,
};
