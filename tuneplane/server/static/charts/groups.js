// Groups of runs charted as one: each group's aggregate as the server made it
// (…/groups/points: per cell the runs' mean, min, max, std and n) turned into a Series the
// chart draws as it draws a run's, its mean as the line and, as the band, the runs' min–max
// or the mean ± one standard deviation.

import { Series } from "./series.js";

/** The band a group is drawn with, as its legend says it. */
export const BAND_LABELS = { minmax: "mean, min–max band", std: "mean ± std band" };

/**
 * The groups of a board's runs, in the order their first run comes: [{key, project, name,
 * label, color, refs}]. A group is of one project (the server aggregates a project's runs).
 */
export function groupsOf(refs, oneProject) {
  const groups = new Map();
  for (const ref of refs) {
    if (!ref.group) continue;
    const key = `${ref.project}/${ref.group}`;
    if (!groups.has(key)) {
      const label = oneProject ? ref.group : `${ref.project}/${ref.group}`;
      groups.set(key, { key, project: ref.project, name: ref.group, label, color: ref.color, refs: [] });
    }
    groups.get(key).refs.push(ref);
  }
  return groups;
}

/**
 * A group's answer held by a chart: its buckets, and the series made of them for each band
 * and time axis asked for (made once each).
 */
export class GroupHeld {
  constructor(body) {
    this.body = body;
    this.made = new Map();
  }

  /** The series drawn for `band` (minmax|std); on the relative time axis, with `elapsed`. */
  series(band, relative) {
    const key = `${band} ${relative}`;
    if (!this.made.has(key)) this.made.set(key, groupSeries(this.body, band, relative));
    return this.made.get(key);
  }
}

function groupSeries(body, band, relative) {
  const series = new Series();
  series.n = [];
  for (const b of body.buckets) {
    series.stepMin.push(b.step_min);
    series.stepMax.push(b.step_max);
    // Smoothing weighs a cell by the steps it covers, as it does a run's bucket.
    series.count.push(b.step_max - b.step_min + 1);
    series.n.push(b.n);
    series.mean.push(b.mean);
    series.min.push(band === "std" ? b.mean - b.std : b.min);
    series.max.push(band === "std" ? b.mean + b.std : b.max);
    series.time.push(relative ? b.elapsed : b.time);
    series.x.push(b.x);
  }
  series.points = body.total_points;
  // Always a band, even where it is as narrow as a line (one run there).
  series.downsampled = true;
  series.version = 1;
  return series;
}
