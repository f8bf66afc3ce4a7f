"""GRPO with TRL's GRPOTrainer, reported into the launched job's run; its logged
completions become the run's training rollouts.

Started by the ``grpo`` recipe under ``tuneplane run``. The reward here is a placeholder
(shorter completions score higher): replace it with the task's verifier.
"""

import argparse

from datasets import load_dataset
from trl import GRPOConfig, GRPOTrainer

from tuneplane.integrations.transformers import TuneplaneCallback


def brevity(completions: list[str], **_: object) -> list[float]:
    return [-len(completion) / 1000 for completion in completions]


parser = argparse.ArgumentParser()
for flag in ("--model", "--dataset", "--output-dir"):
    parser.add_argument(flag, required=True)
parser.add_argument("--learning-rate", type=float, default=1e-6)
parser.add_argument("--batch-size", type=int, default=8)
parser.add_argument("--grad-accum", type=int, default=1)
parser.add_argument("--num-generations", type=int, default=8)
parser.add_argument("--max-steps", type=int, default=500)
args = parser.parse_args()

config = GRPOConfig(
    output_dir=args.output_dir,
    learning_rate=args.learning_rate,
    per_device_train_batch_size=args.batch_size,
    gradient_accumulation_steps=args.grad_accum,
    num_generations=args.num_generations,
    max_steps=args.max_steps,
    logging_steps=1,
    log_completions=True,
    report_to="none",
)
trainer = GRPOTrainer(
    model=args.model,
    reward_funcs=brevity,
    args=config,
    train_dataset=load_dataset(args.dataset, split="train"),
    callbacks=[TuneplaneCallback()],
)
trainer.train()
trainer.save_model(args.output_dir)
