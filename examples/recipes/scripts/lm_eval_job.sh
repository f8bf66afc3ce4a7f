#!/bin/sh
# lm_eval_job.sh MODEL TASKS LIMIT BATCH_SIZE: run lm-eval, then import its native result
# records into this job's run (under `tuneplane run`, which the launch room starts it with).
set -eu
out="$(mktemp -d)"
lm_eval --model hf --model_args "pretrained=$1" --tasks "$2" --limit "$3" \
    --batch_size "$4" --output_path "$out/results" --log_samples
tuneplane import lm-eval "$out/results" --out "$out/snapshots" --upload
