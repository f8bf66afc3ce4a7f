// The run's failure diagnoses (docs/diagnostics.md): listed newest first, re-run on request.

import { getJSON, runPath, sendJSON, session } from "../lib/api.js";

const diagnosesPath = (project, run) => `${runPath(project, run)}/diagnoses`;

/** The run's diagnoses, newest first: [{id, attempt, trigger, state, findings, error, …}]. */
export async function listDiagnoses(project, run) {
  return (await getJSON(diagnosesPath(project, run))).diagnoses;
}

/**
 * Diagnose an attempt again (null: the run's latest); answers the new record. A signed-in
 * browser's write carries its session's CSRF token, asked for when the button is pressed.
 */
export async function rerunDiagnosis(project, run, attempt = null) {
  const csrf = (await session()).csrf_token ?? null;
  const q = attempt == null ? "" : `?attempt=${encodeURIComponent(attempt)}`;
  return sendJSON("POST", `${diagnosesPath(project, run)}${q}`, null, { csrf });
}
