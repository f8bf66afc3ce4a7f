// Numbers and times as people read them.

const INT = new Intl.NumberFormat("en-US");

/** @param {number | bigint | null | undefined} n */
export const fmtInt = (n) => (n == null ? "—" : INT.format(n));

/**
 * A metric value: 4 significant digits, exponent for very large or small magnitudes.
 * @param {number | null | undefined} v
 */
export function fmtNum(v) {
  if (v == null) return "—";
  if (!Number.isFinite(v)) return String(v);
  const a = Math.abs(v);
  if (a !== 0 && (a >= 1e6 || a < 1e-3)) return v.toExponential(2);
  return String(Number(v.toPrecision(4)));
}

/**
 * Labels of evenly spaced axis ticks `incr` apart: as many digits as tell neighbours apart
 * and no more, so a constant learning rate reads 9.5e-5, 1e-4, 1.05e-4 (not 1.00e-4 five
 * times). Plain decimals between 1e-3 and 1e6, an exponent beyond.
 */
export function fmtTicks(splits, incr) {
  const step = Math.abs(incr) || 1;
  const largest = Math.max(0, ...splits.map((v) => (v == null ? 0 : Math.abs(v))));
  const plain = largest === 0 || (largest >= 1e-3 && largest < 1e6);
  const decimals = Math.min(12, Math.max(0, decimalsOf(step)));
  return splits.map((v) => {
    if (v == null) return null;
    if (plain || v === 0) return trimZeros(v.toFixed(decimals));
    // The mantissa's digits down to the step's last digit.
    const exponent = Math.floor(Math.log10(Math.abs(v)));
    return expLabel(v, Math.min(12, Math.max(0, exponent + decimalsOf(step))));
  });
}

/** How many decimals a tick increment (1, 2 or 2.5 times a power of ten) is written with. */
function decimalsOf(step) {
  for (let d = -20; d <= 20; d++) {
    const scaled = step * 10 ** d;
    if (scaled >= 0.5 && Math.abs(scaled - Math.round(scaled)) < 1e-6 * scaled) return d;
  }
  return 20;
}

const trimZeros = (text) => (text.includes(".") ? text.replace(/\.?0+$/, "") : text);

/** 1.5e-4, 2e6: an exponent without "+" or a mantissa's trailing zeros. */
function expLabel(v, digits) {
  const [mantissa, exponent] = v.toExponential(digits).split("e");
  return `${trimZeros(mantissa)}e${exponent.replace("+", "")}`;
}

/** A tick of a log axis: 0.01, 0.5, 10, 1e-5, 2e6. */
export function fmtLogTick(v) {
  if (v == null) return null;
  const a = Math.abs(v);
  if (a >= 1e-3 && a < 1e5) return String(Number(v.toPrecision(3)));
  return expLabel(v, 2);
}

/** Axis tick for steps: 1.5k, 200k, 1.2M. */
export function fmtStep(v) {
  const a = Math.abs(v);
  if (a >= 1e6) return `${Number((v / 1e6).toPrecision(3))}M`;
  if (a >= 1e4) return `${Number((v / 1e3).toPrecision(3))}k`;
  return String(Math.round(v * 100) / 100);
}

const pad = (n) => String(n).padStart(2, "0");

/**
 * Local wall time: 2026-11-29 10:56:03.
 * @param {number | null | undefined} seconds since the epoch, as the API answers times
 */
export function fmtTime(seconds) {
  if (seconds == null) return "—";
  const d = new Date(seconds * 1000);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(
    d.getHours(),
  )}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/**
 * Elapsed seconds: 45s, 3m 05s, 2h 01m, 3d 04h.
 * @param {number | null | undefined} seconds
 */
export function fmtDuration(seconds) {
  if (seconds == null || !Number.isFinite(seconds)) return "—";
  const sign = seconds < 0 ? "-" : "";
  let s = Math.abs(seconds);
  if (s < 60) return `${sign}${Number(s.toPrecision(3))}s`;
  s = Math.round(s);
  const d = Math.floor(s / 86400);
  const hr = Math.floor((s % 86400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  if (d) return `${sign}${d}d ${pad(hr)}h`;
  if (hr) return `${sign}${hr}h ${pad(m)}m`;
  return `${sign}${m}m ${pad(s % 60)}s`;
}

/**
 * "3 min ago" relative to now.
 * @param {number | null | undefined} seconds since the epoch
 * @param {number} [now]
 */
export function fmtAgo(seconds, now = Date.now() / 1000) {
  if (seconds == null) return "never";
  const age = Math.max(0, now - seconds);
  if (age < 5) return "just now";
  if (age < 60) return `${Math.floor(age)} s ago`;
  if (age < 3600) return `${Math.floor(age / 60)} min ago`;
  if (age < 86400) return `${Math.floor(age / 3600)} h ago`;
  return `${Math.floor(age / 86400)} d ago`;
}
