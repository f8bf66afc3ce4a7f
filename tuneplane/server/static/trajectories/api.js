// The trajectory reads of the public API (docs/trajectories.md): the index, which anyone
// who may read the run may list, and pages of a body's messages, which need the content
// permission. And the dashboard's own addresses for them.

import { getJSON, query, runPath } from "../lib/api.js";

const enc = encodeURIComponent;

/** One page of index rows matching every filter: {items, next, total, total_is_lower_bound, steps}. */
export const index = (project, run, filters) => getJSON(`${runPath(project, run)}/trajectories${query(filters)}`);

/** A row and one page of its messages: {...row, messages, offset, limit, next_offset}. */
export const body = (project, run, id, offset, limit) =>
  getJSON(`${runPath(project, run)}/trajectories/${enc(id)}${query({ offset, limit })}`);

/** Where a text occurs in a body: {id, body, query, matches, messages, occurrences}. */
export const search = (project, run, id, q) => getJSON(`${runPath(project, run)}/trajectories/${enc(id)}/search${query({ q })}`);

/** What names one execution on the trajectory page, in the order it is written. */
export const EVALUATION_KEYS = ["attempt", "round_id", "trial_id", "trial_attempt"];
export const TRAINING_KEYS = ["attempt", "step", "trajectory_id"];

/** The trajectory page of one execution: a trial attempt or a training rollout. */
export function pageHref(project, run, row) {
  const keys = row.scope === "training" || row.trajectory_id != null ? TRAINING_KEYS : EVALUATION_KEYS;
  const named = Object.fromEntries(keys.map((key) => [key, row[key]]));
  return `/projects/${enc(project)}/runs/${enc(run)}/trajectory${query(named)}`;
}
