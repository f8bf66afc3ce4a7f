"""A benchmark that runs here without a download: a tiny GPT-2 built from a configuration
(random weights from a seed, a byte-level tokenizer of 256 symbols and no merges), a small
local multiple-choice task for lm-eval, and an evaluation recipe that runs the real
``lm_eval`` on it and imports its native records into the job's run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

TASK = "tiny_arith"
#: Questions with two answers each: lm-eval scores each answer's log-likelihood.
DOCS = [
    {"question": f"{a} + {b} =", "choices": [f" {a + b}", f" {a + b + 1}"], "answer": 0}
    for a, b in [(1, 1), (2, 3), (4, 4), (5, 2), (3, 6), (7, 1), (2, 2), (6, 3)]
]
TASK_YAML = f"""
task: {TASK}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {{data}}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{question}}}}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: "{{{{answer}}}}"
metric_list:
  - metric: acc
metadata:
  version: 1.0
"""
JOB = """#!/bin/sh
# bench_job.sh MODEL TASKS LIMIT: lm-eval on the local tasks beside this script, then its
# native records imported into this job's run.
set -eu
out="$(mktemp -d)"
python -m lm_eval --model hf --model_args "pretrained=$1,dtype=float32" --device cpu \\
    --tasks "$2" --include_path "$(pwd)/tasks" --limit "$3" --batch_size 4 \\
    --output_path "$out/results" --log_samples
tuneplane import lm-eval "$out/results" --out "$out/snapshots" --upload
rm -rf "$out"
"""
RECIPE = f"""
description = "lm-eval on a local task"
kind = "evaluation"
engine = "local"
command = ["sh", "bench_job.sh", "{{model}}", "{{tasks}}", "{{limit}}"]
rules = [{{ check = "limit >= 1", message = "an evaluation of no documents says nothing" }}]

[source]
path = "bench"

[runtime]
python = "{sys.prefix}"

[parameters]
type = "object"
required = ["model", "tasks"]

[parameters.properties]
model = {{ type = "string", minLength = 1 }}
tasks = {{ type = "string", pattern = "^[A-Za-z0-9_,.-]+$" }}
limit = {{ type = "integer", minimum = 1, maximum = 100000, default = 100 }}
"""
#: Variables the server (and so its jobs) runs with: nothing is fetched from the network.
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def write_benchmark(recipes: Path, engine: str = "local") -> None:
    """The ``bench`` recipe on ``engine`` and its source directory (script and task) in
    ``recipes``."""
    tasks = recipes / "bench" / "tasks"
    tasks.mkdir(parents=True)
    data = tasks / f"{TASK}.jsonl"
    data.write_text("".join(json.dumps(doc) + "\n" for doc in DOCS))
    (tasks / f"{TASK}.yaml").write_text(TASK_YAML.replace("{data}", str(data)))
    (recipes / "bench" / "bench_job.sh").write_text(JOB)
    (recipes / "bench.toml").write_text(RECIPE.replace('"local"', f'"{engine}"'))


def tiny_model(where: Path, seed: int) -> Path:
    """An HF model directory: GPT-2 of one layer, its weights drawn from ``seed``."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from tokenizers.decoders import ByteLevel as ByteLevelDecoder
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {symbol: index for index, symbol in enumerate(sorted(alphabet))}
    vocab["<|endoftext|>"] = len(vocab)
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = ByteLevelDecoder()
    wrapped = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=tokenizer, eos_token="<|endoftext|>"
    )
    wrapped.save_pretrained(where)
    torch.manual_seed(seed)
    config = GPT2Config(
        vocab_size=len(vocab),
        n_positions=64,
        n_embd=16,
        n_layer=1,
        n_head=2,
        bos_token_id=256,
        eos_token_id=256,
    )
    GPT2LMHeadModel(config).save_pretrained(where)
    return where
