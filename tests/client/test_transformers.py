"""The Hugging Face ``Trainer`` callback: a tiny model built from a configuration (no
download) trained for a few steps on the CPU by the real ``transformers`` Trainer, in a
real process, reporting to a real server."""

from __future__ import annotations

import uuid

from tests.client.runs import PROJECT, Server
from tests.client.test_init import metric_names, points, script
from tuneplane.contract.ids import id_for_name

TRAIN = """
import torch, tuneplane
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments
from tuneplane.integrations.transformers import TuneplaneCallback

class Tokens(torch.utils.data.Dataset):
    def __len__(self):
        return 64
    def __getitem__(self, i):
        ids = torch.tensor([(i + j) % 32 for j in range(8)])
        return {{"input_ids": ids, "labels": ids}}

torch.manual_seed(0)
model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=32,
                                   n_positions=8, bos_token_id=0, eos_token_id=0))
args = TrainingArguments(
    output_dir={output!r}, run_name={run_name!r}, max_steps=6, logging_steps=2,
    eval_strategy="steps", eval_steps=3, per_device_train_batch_size=4,
    per_device_eval_batch_size=8, report_to="none", use_cpu=True, save_strategy="no",
    learning_rate=1e-3,
)
callback = TuneplaneCallback(project={project!r})
trainer = Trainer(model=model, args=args, train_dataset=Tokens(), eval_dataset=Tokens(),
                  callbacks=[callback])
{body}
"""


def train(server: Server, tmp_path: object, run: str, body: str = "trainer.train()") -> str:
    code = TRAIN.format(output=str(tmp_path), run_name=f"outputs/{run}", project=PROJECT,
                        body=body)  # fmt: skip
    done = script(server, code)
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_a_trainer_reports_its_logs_config_evaluation_and_outcome(
    server: Server, tmp_path: object
) -> None:
    run = f"hf-{uuid.uuid4().hex[:8]}"
    train(server, tmp_path, run)
    name = id_for_name(f"outputs/{run}")  # the run_name's ID; the name is kept for people
    assert [step for step, _ in points(server, name, "train/loss")] == [2, 4, 6]
    assert [step for step, _ in points(server, name, "eval/loss")] == [3, 6]
    assert {"train/learning_rate", "train/grad_norm", "train/epoch"} <= metric_names(server, name)
    assert not any(m.startswith("train/train_runtime") for m in metric_names(server, name))
    found = server.run(name)
    assert found["display_name"] == f"outputs/{run}"
    assert found["config"]["training_args"]["learning_rate"] == 1e-3
    assert found["config"]["model_config"]["n_embd"] == 16
    assert found["status"] == "succeeded"
    events = server.get(f"/api/v1/projects/{PROJECT}/runs/{name}/observations")
    (summary,) = [e for e in events if e["name"] == "trainer/summary"]
    assert summary["step"] == 6
    assert summary["fields"]["train_runtime"] > 0


def test_training_that_never_ends_is_reported_failed(
    sqlite_server: Server, tmp_path: object
) -> None:
    server = sqlite_server
    run = f"hf-{uuid.uuid4().hex[:8]}"
    crash = """
from transformers import TrainerCallback
class Crash(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == 3:
            raise SystemExit(0)  # the job goes away before train end
trainer.add_callback(Crash())
trainer.train()
"""
    train(server, tmp_path, run, crash)
    name = id_for_name(f"outputs/{run}")
    assert [step for step, _ in points(server, name, "train/loss")] == [2]
    assert server.run(name)["status"] == "failed"


def test_a_run_started_by_the_user_is_reported_into_and_left_to_them(
    sqlite_server: Server, tmp_path: object
) -> None:
    server = sqlite_server
    run = f"hf-{uuid.uuid4().hex[:8]}"
    mine = f"""
own = tuneplane.init(project={PROJECT!r}, name={run!r})
trainer.train()
assert callback.run is own
tuneplane.log({{"after/train": 1.0}}, step=7)
tuneplane.finish()
"""
    train(server, tmp_path, run, mine)
    assert [step for step, _ in points(server, run, "train/loss")] == [2, 4, 6]
    assert points(server, run, "after/train") == [(7, 1.0)]
    assert server.run(run)["status"] == "succeeded"
