// How a training rollout's diagnostics read. A low reward is a low reward, not a failed
// answer: only a producer's explicit `failure` is called a failure.

import { fmtNum } from "../lib/format.js";

/** The API's categories (contract/trajectories.py), in its order, with their words. */
export const CATEGORIES = [
  ["failure", "failure"],
  ["anomaly", "anomaly"],
  ["low_reward", "low reward"],
  ["invalid_reward", "invalid or missing reward"],
  ["representative", "representative"],
];
export const CATEGORY_LABEL = Object.fromEntries(CATEGORIES);

export const categoryLabel = (category) => CATEGORY_LABEL[category] ?? category ?? "—";

/** The reward as reported: a number, "invalid" (NaN or infinite), or "missing"; with the
 * reward functions that gave none, whose absence the sum (the trainer's) leaves out. */
export function rewardText(row) {
  if (row.reward_invalid) return "invalid";
  const reward = row.reward == null ? "missing" : fmtNum(row.reward);
  const without = row.reward_missing?.length ? ` (none from ${row.reward_missing.join(", ")})` : "";
  return reward + without;
}

/** A policy version, or "unknown" when the producer did not say (a step proves nothing). */
export const policyText = (value) => (value == null ? "unknown" : String(value));

/** Said wherever rollouts are listed: they are chosen, so no rate may be read from them. */
export const BIASED_SAMPLES =
  "These rollouts are biased samples: producers keep failures, anomalies and low or invalid rewards on purpose, and at most a few per step. They show what went wrong, not how often; no success rate or mean reward can be read from them (the run's charts have the metrics).";
