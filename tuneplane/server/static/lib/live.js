// Following runs as they change. A browser keeps only six connections per server, so one
// Server-Sent Events stream follows a run page's run (…/runs/{run}/stream) or all the runs
// of a project in a comparison (/projects/{p}/stream?runs=…); with ?points=1 the streams
// also carry each changed metric's new points, so drawing them needs no request. A
// comparison across more projects than MAX_STREAMS polls each project's run list instead.

import { projectPath, runs as listRuns, runStreamUrl } from "./api.js";
import { debug } from "./debug.js";
import { address } from "./root.js";

export const MAX_STREAMS = 3;
/** Runs one stream follows (the server takes at most 64). */
const RUNS_PER_STREAM = 64;
const POLL_MS = 4000;
const RETRY_MAX_MS = 30000;

/** @typedef {{project: string, run: string, key: string}} WatchedRef */

/**
 * @template {WatchedRef} R
 * @typedef {object} WatchHandlers
 * @property {(ref: R, runObject: any, how: {catchUp: boolean}) => void} onRun
 * @property {(ref: R, metrics: any[]) => void} [onPoints]
 * @property {(state: "live" | "reconnecting" | "polling") => void} [onState]
 */

/**
 * refs: [{project, run, key}]. Handlers:
 *   onRun(ref, runObject, {catchUp}): catchUp is true when points that changed the run may
 *     not have come with it (a stream's first event for the run, or polling): fetch them;
 *   onPoints(ref, metrics), when given (the streams then carry points): [{metric, count,
 *     corrected, invalid_count, …, points: [[step, value, time]], more}] for the metrics
 *     that changed, before the run event;
 *   onState("live"|"reconnecting"|"polling").
 * Returns stop().
 * @template {WatchedRef} R
 * @param {R[]} refs
 * @param {WatchHandlers<R>} handlers
 * @returns {() => void}
 */
export function watchRuns(refs, handlers) {
  const groups = new Map();
  for (const ref of refs) groups.set(ref.project, [...(groups.get(ref.project) ?? []), ref]);
  const streams = [];
  for (const [project, group] of groups) {
    for (let i = 0; i < group.length; i += RUNS_PER_STREAM) {
      const part = group.slice(i, i + RUNS_PER_STREAM);
      const q = new URLSearchParams(part.length === 1 ? {} : { runs: part.map((r) => r.run).join(",") });
      if (handlers.onPoints) q.set("points", "1");
      const base = part.length === 1 ? runStreamUrl(project, part[0].run) : `${projectPath(project)}/stream`;
      const url = q.size ? `${base}?${q}` : base;
      streams.push([url, part]);
    }
  }
  if (streams.length > MAX_STREAMS) return poll(refs, handlers);
  const stops = streams.map(([url, part]) => stream(url, part, handlers));
  return () => stops.forEach((stop) => stop());
}

/**
 * @template {WatchedRef} R
 * @param {string} url
 * @param {R[]} refs
 * @param {WatchHandlers<R>} handlers
 */
function stream(url, refs, { onRun, onPoints, onState = () => {} }) {
  const byName = new Map(refs.map((ref) => [ref.run, ref]));
  const mark = (state) => {
    for (const ref of refs) debug.live[ref.key] = state;
    onState(state);
  };
  let source = null;
  let stopped = false;
  let delay = 1000;
  let timer = null;
  // Runs whose first event of this connection came: a browser's own reconnect opens anew.
  let seen = new Set();
  const open = () => {
    source = new EventSource(address(url));
    source.addEventListener("open", () => {
      seen = new Set();
      delay = 1000;
      mark("live");
    });
    source.addEventListener("run", (event) => {
      const run = JSON.parse(event.data);
      const ref = byName.get(run.run);
      if (!ref) return;
      // What changed before this connection (or while it was down) was not pushed.
      const catchUp = !seen.has(ref.key);
      seen.add(ref.key);
      onRun(ref, run, { catchUp });
    });
    source.addEventListener("points", (event) => {
      const body = JSON.parse(event.data);
      const ref = byName.get(body.run);
      if (ref && seen.has(ref.key)) onPoints(ref, body.metrics);
    });
    source.addEventListener("error", () => {
      mark("reconnecting");
      // The browser retries by itself unless the server answered with an error status.
      if (source.readyState === EventSource.CLOSED && !stopped) {
        timer = setTimeout(open, delay);
        delay = Math.min(delay * 2, RETRY_MAX_MS);
      }
    });
  };
  open();
  return () => {
    stopped = true;
    clearTimeout(timer);
    source?.close();
  };
}

/**
 * @template {WatchedRef} R
 * @param {R[]} refs
 * @param {WatchHandlers<R>} handlers
 */
function poll(refs, { onRun, onState = () => {} }) {
  const byProject = new Map();
  for (const ref of refs) {
    if (!byProject.has(ref.project)) byProject.set(ref.project, new Map());
    byProject.get(ref.project).set(ref.run, ref);
  }
  const seen = new Map();
  let timer = null;
  let stopped = false;
  const tick = async () => {
    for (const [project, wanted] of byProject) {
      try {
        for (const runObject of await listRuns(project)) {
          const ref = wanted.get(runObject.run);
          if (!ref) continue;
          const stamp = `${runObject.updated_at}|${runObject.transport?.heartbeat_at}|${runObject.status}`;
          if (seen.get(ref.key) !== stamp) {
            seen.set(ref.key, stamp);
            onRun(ref, runObject, { catchUp: true });
          }
        }
        onState("polling");
      } catch {
        onState("reconnecting");
      }
    }
    if (!stopped) timer = setTimeout(tick, document.hidden ? POLL_MS * 4 : POLL_MS);
  };
  tick();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
