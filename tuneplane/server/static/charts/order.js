// Which charts come first: grouped by name prefix ("train/…", "arena/…"), and within the
// page reward, loss and step time before everything else — what users come for. The
// machine's own series (system/…: CPU, memory, GPU) come after every training metric.

const SYSTEM = "system";

const FIRST = [
  /reward/i,
  /loss/i,
  /step.?(time|seconds|secs|duration)|(time|seconds|secs).?per.?step/i,
];

/** 0 for reward, 1 for loss, 2 for step time, 3 for the rest. */
export function priority(metric) {
  const leaf = metric.slice(metric.lastIndexOf("/") + 1);
  const index = FIRST.findIndex((pattern) => pattern.test(leaf));
  return index < 0 ? FIRST.length : index;
}

export const prefixOf = (metric) => {
  const slash = metric.indexOf("/");
  return slash < 0 ? "" : metric.slice(0, slash);
};

const byPriority = (a, b) => priority(a) - priority(b) || a.localeCompare(b);

/** [{prefix, metrics}] ordered: the group holding the most wanted metric first. */
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
  const last = (group) => (group.prefix === SYSTEM ? 1 : 0);
  return ordered.sort(
    (a, b) =>
      last(a) - last(b) ||
      best(a) - best(b) ||
      (a.prefix === "" ? -1 : 0) - (b.prefix === "" ? -1 : 0) ||
      a.prefix.localeCompare(b.prefix),
  );
}
