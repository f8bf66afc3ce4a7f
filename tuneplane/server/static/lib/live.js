// Following runs as they change. One Server-Sent Events stream per run (…/runs/{run}/stream,
// event "run" = the run object); a browser keeps only six connections per server, so a
// comparison of many runs polls each project's run list instead of holding a stream per run.

import { runs as listRuns, runStreamUrl } from "./api.js";
import { debug } from "./debug.js";

export const MAX_STREAMS = 3;
const POLL_MS = 4000;
const RETRY_MAX_MS = 30000;

/**
 * refs: [{project, run, key}]; onRun(ref, runObject); onState("live"|"reconnecting"|"polling").
 * Returns stop().
 */
export function watchRuns(refs, onRun, onState = () => {}) {
  if (refs.length <= MAX_STREAMS) {
    const stops = refs.map((ref) => stream(ref, onRun, onState));
    return () => stops.forEach((stop) => stop());
  }
  return poll(refs, onRun, onState);
}

function stream(ref, onRun, onState) {
  let source = null;
  let stopped = false;
  let delay = 1000;
  let timer = null;
  const open = () => {
    source = new EventSource(runStreamUrl(ref.project, ref.run));
    source.addEventListener("open", () => {
      delay = 1000;
      debug.live[ref.key] = "live";
      onState("live");
    });
    source.addEventListener("run", (event) => onRun(ref, JSON.parse(event.data)));
    source.addEventListener("error", () => {
      debug.live[ref.key] = "reconnecting";
      onState("reconnecting");
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

function poll(refs, onRun, onState) {
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
            onRun(ref, runObject);
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
