// Alert rules as people read them: each kind's fields (tuneplane/contract/alert_rules.py)
// and a rule's condition in words ("reward below 0.1", "no heartbeat for 30 s").

export const KINDS = ["threshold", "change", "nan", "stall", "heartbeat", "eval_drop"];
export const LEVELS = ["info", "warn", "error"];

/** What each kind is called in the kind selector. */
export const KIND_LABELS = {
  nan: "NaN or infinite value",
  threshold: "threshold",
  change: "change over a window",
  stall: "metric stalled",
  heartbeat: "heartbeat stale",
  eval_drop: "evaluation drop",
};

/** The fields of each kind, as the form shows them. */
export const FIELDS = {
  nan: ["metric"],
  threshold: ["metric", "op", "value"],
  change: ["metric", "percent", "window", "direction"],
  stall: ["metric", "seconds"],
  heartbeat: ["seconds"],
  eval_drop: ["points", "baseline.run", "baseline.round_id", "baseline.attempt", "round_id"],
};

/** The server's default level of a kind (docs/alerts.md). */
export const defaultLevel = (kind) => (kind === "nan" || kind === "heartbeat" ? "error" : "warn");

const num = (value) => (value == null ? "?" : String(value));

function baselineText(baseline) {
  if (!baseline) return "?";
  const attempt = baseline.attempt == null ? "" : ` (attempt ${baseline.attempt})`;
  return `${baseline.run}/${baseline.round_id}${attempt}`;
}

/** A rule's condition in words. */
export function condition(rule) {
  switch (rule.kind) {
    case "nan":
      return `${rule.metric} is NaN or infinite`;
    case "threshold":
      return `${rule.metric} ${rule.op} ${num(rule.value)}`;
    case "change": {
      const way = rule.direction === "either" || !rule.direction ? "either way" : rule.direction;
      return `${rule.metric} changes by more than ${num(rule.percent)}% over ${num(rule.window)} steps (${way})`;
    }
    case "stall":
      return `no point of ${rule.metric} for ${num(rule.seconds)} s`;
    case "heartbeat":
      return `no heartbeat for ${num(rule.seconds)} s`;
    case "eval_drop": {
      const rounds = rule.round_id ? ` (rounds ${rule.round_id})` : "";
      return `success rate more than ${num(rule.points)} points below ${baselineText(rule.baseline)}${rounds}`;
    }
    default:
      return rule.kind;
  }
}
