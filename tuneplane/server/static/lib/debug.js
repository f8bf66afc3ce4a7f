// window.__tuneplane: what the page has drawn, for the browser tests and the benchmark.
//   charts[metric] = {runs: {<run key>: points drawn}, lastStep: {<run key>: step}, draws,
//                     downsampled, bands, y: [min, max], skipped,
//                     marks: {<run key>: NaN/±inf steps marked}}
//   (draws counts the data given to the chart; skipped, the live draws that kept the canvas
//   because nothing on it would move)
//   ready: every chart in view has drawn its first data; updates: live updates applied
//   paintMs: time spent drawing the charts' data layers so far (in a worker, where one draws)
//   lastObservationId: the run's last_observation_id the page last acted on
//   charts[metric].axes: each axis as last drawn (see charts/axes.js axesShown)

export const debug = {
  page: null,
  ready: false,
  charts: {},
  updates: 0,
  lastUpdateMs: null,
  paintMs: 0,
  live: {},
  logs: { lines: 0 },
  alerts: 0,
  lastObservationId: null,
};

/** @type {any} */ (window).__tuneplane = debug;

export function chartDrawn(metric, counts, downsampled, extra = {}) {
  if (!Object.keys(debug.charts).length) performance.mark("first-chart");
  const entry = (debug.charts[metric] ??= { runs: {}, draws: 0, downsampled: false });
  Object.assign(entry, extra, { runs: counts, downsampled });
  entry.draws += 1;
}

export function axesDrawn(metric, axes) {
  (debug.charts[metric] ??= { runs: {}, draws: 0, downsampled: false }).axes = axes;
}
