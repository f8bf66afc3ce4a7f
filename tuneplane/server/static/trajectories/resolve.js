// The execution a trajectory page's address names, and its index row: a trial attempt
// (?attempt=&round_id=&trial_id=&trial_attempt=) or a training rollout
// (?attempt=&step=&trajectory_id=), found through the index's filters.

import * as api from "./api.js";

const count = (text) => (text != null && /^\d+$/.test(text) ? Number(text) : null);

/** {scope, named: {key: value}, missing: [keys]} from the query string. */
export function addressed(search = location.search) {
  const q = new URLSearchParams(search);
  const training = q.has("trajectory_id") || q.has("step");
  const keys = training ? api.TRAINING_KEYS : api.EVALUATION_KEYS;
  const numeric = new Set(["attempt", "step", "trial_attempt"]);
  const named = {};
  for (const key of keys) {
    const raw = q.get(key);
    named[key] = numeric.has(key) ? count(raw) : raw || null;
  }
  // The execution attempt may be left out: every attempt's row is then offered.
  const missing = keys.filter((key) => key !== "attempt" && named[key] == null);
  return { scope: training ? "training" : "evaluation", named, missing };
}

/** The index rows of the named execution (one, or one per execution attempt). */
export async function findRows(ref, { scope, named }) {
  if (scope === "evaluation") {
    const answer = await api.index(ref.project, ref.run, { scope, ...named, limit: 100 });
    return answer.items;
  }
  // The index has no rollout-ID filter; a step holds a few dozen rollouts at most.
  const found = [];
  let after = null;
  do {
    const answer = await api.index(ref.project, ref.run, { scope, attempt: named.attempt, step: named.step, after, limit: 500 });
    found.push(...answer.items.filter((row) => row.trajectory_id === named.trajectory_id));
    after = answer.next;
  } while (after != null);
  return found;
}
