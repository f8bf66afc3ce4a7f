"""Supervised fine-tuning with TRL's SFTTrainer, reported into the launched job's run.

Started by the ``sft`` recipe under ``tuneplane run``: the callback reports into that run.
"""

import argparse

from datasets import load_dataset
from trl import SFTConfig, SFTTrainer

from tuneplane.integrations.transformers import TuneplaneCallback

parser = argparse.ArgumentParser()
for flag in ("--model", "--dataset", "--output-dir"):
    parser.add_argument(flag, required=True)
parser.add_argument("--learning-rate", type=float, default=2e-5)
parser.add_argument("--epochs", type=int, default=1)
parser.add_argument("--batch-size", type=int, default=4)
parser.add_argument("--grad-accum", type=int, default=4)
args = parser.parse_args()

config = SFTConfig(
    output_dir=args.output_dir,
    learning_rate=args.learning_rate,
    num_train_epochs=args.epochs,
    per_device_train_batch_size=args.batch_size,
    gradient_accumulation_steps=args.grad_accum,
    logging_steps=10,
    report_to="none",
)
trainer = SFTTrainer(
    model=args.model,
    args=config,
    train_dataset=load_dataset(args.dataset, split="train"),
    callbacks=[TuneplaneCallback()],
)
trainer.train()
trainer.save_model(args.output_dir)
