// The evaluation reads of the public API (docs/api.md), each naming the execution attempt:
// a round is (run, execution attempt, round_id). A null attempt asks for the default, the
// latest attempt that reported outcomes; every answer says which one it is.

import { getJSON, query, runPath } from "../lib/api.js";

const enc = encodeURIComponent;

const roundPath = (project, run, round) => `${runPath(project, run)}/evaluation/${enc(round)}`;

/** Rounds of one execution attempt: {state, execution_attempt, execution_attempts, rounds}. */
export const evaluation = (project, run, attempt = null) => getJSON(`${runPath(project, run)}/evaluation${query({ attempt })}`);

/** One round, with `repeats` (pass@k, the clustered interval) when its tasks ran more than once. */
export const round = (project, run, roundId, attempt) => getJSON(`${roundPath(project, run, roundId)}${query({ attempt })}`);

/** One page of current outcomes by trial id: {execution_attempt, trials, next}. */
export const trials = (project, run, round, attempt, { status = null, after = null, limit = null } = {}) =>
  getJSON(`${roundPath(project, run, round)}/trials${query({ attempt, status, after, limit })}`);

/** A trial's retry history: {total_attempts, shown, attempts}, current attempt first. */
export const trialHistory = (project, run, round, trial, attempt) =>
  getJSON(`${roundPath(project, run, round)}/trials/${enc(trial)}${query({ attempt })}`);

/** Matched evidence; each side is "project/run/round" with its execution attempt. */
export const matched = (left, right, leftAttempt = null, rightAttempt = null) =>
  getJSON(`/api/v1/evaluation/matched${query({ left, left_attempt: leftAttempt, right, right_attempt: rightAttempt })}`);

/** The matched view's address, keeping each side's execution attempt. */
export const matchedPage = (left = null, right = null, leftAttempt = null, rightAttempt = null) =>
  `/matched${query({ left, left_attempt: leftAttempt, right, right_attempt: rightAttempt })}`;

/** One transition's trials between two rounds, by trial ID: {transition, left, right, trials,
 * next}. `sides`: {left, left_attempt, right, right_attempt}. */
export const matchedTrials = (sides, transition, after = null, limit = null) =>
  getJSON(`/api/v1/evaluation/matched/trials${query({ ...sides, transition, after, limit })}`);

/** One trial on both sides with both trajectories' messages, the first divergence and each
 * side's first failed tool call. */
export const matchedTrial = (sides, trial) => getJSON(`/api/v1/evaluation/matched/trials/${enc(trial)}${query(sides)}`);
