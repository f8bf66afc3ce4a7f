// One run's points of one metric as the server sent them (buckets from
// …/points/{metric}?max_points=N), and the arrays a chart draws from them.

/** Columnar buckets; appending keeps step order. */
export class Series {
  constructor() {
    this.stepMin = [];
    this.stepMax = [];
    this.count = [];
    this.min = [];
    this.max = [];
    this.mean = [];
    this.time = [];
    this.x = []; // with ?x=<metric>: that metric's value at each bucket's last step, or null
    this.points = 0;
    this.downsampled = false;
    this.version = 0; // counts the appends that changed it
    this.span = 1; // the steps a bucket covers, on average (see from())
    /** @type {number[] | null} A group's series: how many runs each cell holds (see groups.js). */
    this.n = null;
  }

  static from(body) {
    const series = new Series().append(body);
    // The steps a bucket of this reduction covers, on average.
    series.span = series.length ? (series.lastStep - series.stepMin[0] + 1) / series.length : 1;
    return series;
  }

  /**
   * Add the buckets of a response; those not after the last step are ignored. With merge,
   * a downsampled series folds new points into its last bucket while that bucket covers no
   * more steps than the others, so a live point changes one bucket instead of adding one.
   */
  append(body, { merge = false } = {}) {
    if (body.buckets.length) this.version += 1;
    let last = this.lastStep;
    for (const b of body.buckets) {
      if (last != null && b.step_min <= last) continue;
      last = b.step_max;
      const i = this.stepMin.length - 1;
      if (merge && this.downsampled && i >= 0 && b.step_max - this.stepMin[i] < this.span) {
        const count = this.count[i] + b.count;
        this.mean[i] = (this.mean[i] * this.count[i] + b.mean * b.count) / count;
        this.count[i] = count;
        this.min[i] = Math.min(this.min[i], b.min);
        this.max[i] = Math.max(this.max[i], b.max);
        this.stepMax[i] = b.step_max;
        this.time[i] = b.time;
        this.x[i] = b.x ?? null;
        this.points += b.count;
        continue;
      }
      this.stepMin.push(b.step_min);
      this.stepMax.push(b.step_max);
      this.count.push(b.count);
      this.min.push(b.min);
      this.max.push(b.max);
      this.mean.push(b.count === 1 ? b.last : b.mean);
      this.time.push(b.time);
      this.x.push(b.x ?? null);
      this.points += b.count;
      if (b.count > 1) this.downsampled = true;
    }
    return this;
  }

  get length() {
    return this.stepMin.length;
  }

  get lastStep() {
    return this.stepMax.length ? this.stepMax[this.stepMax.length - 1] : null;
  }
}

/** A pushed point [step, value, time] as a bucket of one. */
export function pointBucket([step, value, time]) {
  return { step_min: step, step_max: step, count: 1, min: value, max: value, mean: value, last: value, time };
}

/**
 * The x of each bucket: its step (the middle of its step range), its wall time, seconds
 * since `t0` (the run's creation), so runs started at different times line up, or another
 * metric's value at its last step as the server paired them (axis "metric:<name>"; null
 * before that metric's first point). With `xs` and `from`, only the buckets from there on
 * are placed (in `xs`, in place).
 */
export function xValues(series, axis, t0 = 0, xs = new Array(series.length), from = 0) {
  const n = series.length;
  if (axis === "step") {
    for (let i = from; i < n; i++) xs[i] = (series.stepMin[i] + series.stepMax[i]) / 2;
  } else if (axis.startsWith("metric:")) {
    for (let i = from; i < n; i++) xs[i] = series.x[i];
  } else {
    const offset = axis === "relative" ? t0 : 0;
    let previous = from > 0 ? xs[from - 1] : -Infinity;
    for (let i = from; i < n; i++) {
      // Time must not go backwards along steps for a line chart; a late point keeps its order.
      previous = Math.max(previous, series.time[i] - offset);
      xs[i] = previous;
    }
  }
  return xs;
}

/**
 * On a log scale nothing at or below zero can be drawn: those become gaps. With `out` and
 * `from`, only the values from there on are written (in `out`, in place).
 */
export function positive(values, log, out = new Array(values.length), from = 0) {
  if (!log) return values;
  for (let i = from; i < values.length; i++) out[i] = values[i] > 0 ? values[i] : null;
  return out;
}

/**
 * Exponential moving average with bias correction (as TensorBoard's smoothing), where a
 * bucket of n points counts as n steps, so the curve does not change with the zoom level.
 * Resumable: `state` ({acc, seen}, before index `from`) becomes the state before the last
 * value, from where the next call goes on once that value changed or more came.
 */
export function ema(values, counts, weight, out = new Array(values.length), from = 0, state = { acc: 0, seen: 0 }) {
  let { acc, seen } = state;
  for (let i = from; i < values.length; i++) {
    if (i === values.length - 1) Object.assign(state, { acc, seen });
    const v = values[i];
    if (v == null || !Number.isFinite(v)) {
      out[i] = null;
      continue;
    }
    const n = counts[i] || 1;
    const w = weight ** n;
    acc = acc * w + (1 - w) * v;
    seen += n;
    out[i] = acc / (1 - weight ** seen);
  }
  return out;
}

/** Index of the value in ascending `xs` closest to x (-1 when empty). */
export function nearest(xs, x) {
  let lo = 0;
  let hi = xs.length - 1;
  if (hi < 0) return -1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (xs[mid] < x) lo = mid + 1;
    else hi = mid;
  }
  if (lo > 0 && Math.abs(xs[lo - 1] - x) <= Math.abs(xs[lo] - x)) return lo - 1;
  return lo;
}

/** First index with xs[i] >= x (xs.length when none). */
function lowerBound(xs, x) {
  let lo = 0;
  let hi = xs.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (xs[mid] < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * The steps a run has between x = lo and x = hi, to ask the server for that range only.
 * Null when the run has nothing there.
 */
export function stepRange(series, xs, axis, lo, hi) {
  if (axis === "step") {
    const start = Math.max(0, Math.ceil(lo));
    const end = Math.floor(hi);
    return end >= start ? [start, end] : null;
  }
  const first = lowerBound(xs, lo);
  const last = lowerBound(xs, hi + Number.EPSILON * Math.abs(hi)) - 1;
  if (first >= xs.length || last < 0) return null;
  // Include the neighbour buckets so the line reaches the edges of the selection.
  const i = Math.max(0, Math.min(first, last) - 1);
  const j = Math.min(xs.length - 1, Math.max(first, last) + 1);
  return [series.stepMin[i], series.stepMax[j]];
}

/** Steps (from …/invalid/{metric}) placed on the x axis of a series. */
export function invalidX(series, xs, axis, steps) {
  if (axis === "step") return steps.map((s) => s.step);
  return steps.map((s) => {
    const index = Math.min(lowerBound(series.stepMax, s.step), xs.length - 1);
    return index < 0 ? null : xs[index];
  });
}
