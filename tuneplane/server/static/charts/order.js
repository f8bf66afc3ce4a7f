// Which charts come first: grouped by name prefix ("train/…", "arena/…"). What users come
// for leads: the loss, then the reward (and a reward's parts, rewards/<fn>/…), then step
// time, then the rest. The training groups (top level and train/) come first, then other
// groups holding one of those, then evaluation (eval/…: a Trainer logs as much there as in
// train/, and it would push the training loss below the fold), then the rest; the machine's
// own series (system/…: CPU, memory, GPU) come after every training metric.

const SYSTEM = "system";
const TRAINING = new Set(["", "train", "training"]);
const EVALUATION = /^(eval|evaluation|val|validation|test)$/i;

const FIRST = [
  (leaf) => /loss/i.test(leaf),
  (leaf) => /reward/i.test(leaf),
  (leaf, rest) => /^rewards?\//i.test(rest),
  (leaf) => /step.?(time|seconds|secs|duration)|(time|seconds|secs).?per.?step/i.test(leaf),
];

/** 0 for a loss, 1 for a reward, 2 for a reward's part, 3 for step time, 4 for the rest. */
export function priority(metric) {
  const leaf = metric.slice(metric.lastIndexOf("/") + 1);
  const rest = metric.slice(metric.indexOf("/") + 1);
  const index = FIRST.findIndex((test) => test(leaf, rest));
  return index < 0 ? FIRST.length : index;
}

export const prefixOf = (metric) => {
  const slash = metric.indexOf("/");
  return slash < 0 ? "" : metric.slice(0, slash);
};

const byPriority = (a, b) => priority(a) - priority(b) || a.localeCompare(b);

/**
 * 0 for the training groups, 1 for another group holding a loss, reward or step time, 2 for
 * evaluation, 3 for the rest, 4 for the machine's series.
 */
function tier({ prefix, metrics }) {
  if (prefix === SYSTEM) return 4;
  if (TRAINING.has(prefix)) return 0;
  if (EVALUATION.test(prefix)) return 2;
  return priority(metrics[0]) < FIRST.length ? 1 : 3;
}

/** [{prefix, metrics}] ordered: see the top of this module. */
export function groupMetrics(names) {
  const groups = new Map();
  for (const name of names) {
    const prefix = prefixOf(name);
    if (!groups.has(prefix)) groups.set(prefix, []);
    groups.get(prefix).push(name);
  }
  const ordered = [...groups].map(([prefix, metrics]) => ({
    prefix,
    metrics: metrics.sort(byPriority),
  }));
  const best = (group) => priority(group.metrics[0]);
  const training = (group) => (group.prefix === "" ? 0 : TRAINING.has(group.prefix) ? 1 : 2);
  return ordered.sort(
    (a, b) =>
      tier(a) - tier(b) ||
      best(a) - best(b) ||
      training(a) - training(b) ||
      a.prefix.localeCompare(b.prefix),
  );
}
