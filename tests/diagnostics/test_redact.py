"""The one redactor of diagnoses: every secret of the table is gone, whatever form it takes,
and what a diagnosis needs (error names, token counts, tokenizer tokens) stays."""

from __future__ import annotations

import pytest

from tuneplane.diagnostics.redact import REDACTED, is_secret_name, redact_config, redact_text

#: (text holding a secret, the secret). Shapes are made up, never real credentials.
SECRET_LINES: list[tuple[str, str]] = [
    (
        "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMIK7MDENGbPxRfiCYzEXAMPLE python train.py",
        "wJalrXUtnFEMIK7MDENGbPxRfiCYzEXAMPLE",
    ),
    ("aws_access_key_id = AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    ("python train.py --password hunter2hunter2 --lr 1e-5", "hunter2hunter2"),
    ("python train.py --api-key=abc123def456ghi --lr 1e-5", "abc123def456ghi"),
    ("python train.py --db_password 'pa ss'", "pa ss"),
    (
        "wandb login 0123456789abcdef0123456789abcdef01234567",
        "0123456789abcdef0123456789abcdef01234567",
    ),
    (
        "WANDB_API_KEY=0123456789abcdef0123456789abcdef01234567",
        "0123456789abcdef0123456789abcdef01234567",
    ),
    ("huggingface-cli login --token hf_AbCdEfGhIjKlMnOpQrStUv", "hf_AbCdEfGhIjKlMnOpQrStUv"),
    (
        "using github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
    ),
    (
        "git clone https://ghp_abcdefghijklmnopqrstuvwxyz0123@github.com/x/y",
        "ghp_abcdefghijklmnopqrstuvwxyz0123",
    ),
    ("OPENAI_API_KEY: sk-proj-abcdefghijklmnop1234567890", "sk-proj-abcdefghijklmnop1234567890"),
    ('{"db_password": "s3cret-value!", "lr": 0.1}', "s3cret-value!"),
    (
        "Authorization: Bearer eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0.SflKxwRJSMeKKF2QT4f",
        "eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0.SflKxwRJSMeKKF2QT4f",
    ),
    ("authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA=="),
    ("connecting to postgresql://trainer:pa55w0rd-db@db.internal/metrics", "pa55w0rd-db"),
    (
        "hook https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXX failed",
        "T000/B000/XXXXXXXXXXXXXXXX",
    ),
    (
        "GOOGLE_API_KEY AIzaSyA-abcdefghijklmnopqrstuvwxyz012345 rejected",
        "AIzaSyA-abcdefghijklmnopqrstuvwxyz012345",
    ),
    ("token ya29.a0AfH6SMBabcdefghijklmnopqrstuv expired", "ya29.a0AfH6SMBabcdefghijklmnopqrstuv"),
    ("slack xoxb-123456789012-abcdefghijkl", "xoxb-123456789012-abcdefghijkl"),
    (
        "-----BEGIN PRIVATE KEY----- MIIEvQIBADANBgkqhkiG9w0BAQEFAASC -----END PRIVATE KEY-----",
        "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC",
    ),
    ("export TUNEPLANE_API_KEY=tpk_abcdefghijklmnop", "tpk_abcdefghijklmnop"),
    ("secret: topsecretvalue123", "topsecretvalue123"),
]

#: Text a diagnosis needs, which must come through whole.
KEPT = [
    "KeyError: 'input_ids'",
    "loss: 0.5 step: 100 max_tokens: 512 num_tokens=1000",
    "pad_token: <pad> eos_token=</s>",
    "tokenizer_name: meta-llama/Llama-3-8B",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    "NCCL WARN Timeout(ms)=600000",
]


@pytest.mark.parametrize(("line", "secret"), SECRET_LINES)
def test_every_secret_of_the_table_is_redacted(line: str, secret: str) -> None:
    redacted = redact_text(line)
    assert secret not in redacted, redacted
    assert REDACTED in redacted


@pytest.mark.parametrize("line", KEPT)
def test_what_a_diagnosis_needs_is_kept(line: str) -> None:
    assert redact_text(line) == line


def test_config_values_under_secret_names_are_replaced_at_any_depth() -> None:
    config = {
        "wandb_api_key": "abc",
        "db_password": "x",
        "aws_secret_access_key": "y",
        "training_args": {"hub_token": "hf_z", "learning_rate": 1e-5, "max_new_tokens": 64},
        "tokenizer": {"pad_token": "<pad>", "name": "gpt2"},
        "env": ["HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUv"],
        "credentials": {"user": "me", "port": 5432},
    }
    assert redact_config(config) == {
        "wandb_api_key": REDACTED,
        "db_password": REDACTED,
        "aws_secret_access_key": REDACTED,
        "training_args": {"hub_token": REDACTED, "learning_rate": 1e-5, "max_new_tokens": 64},
        "tokenizer": {"pad_token": "<pad>", "name": "gpt2"},
        "env": [f"HF_TOKEN={REDACTED}"],
        "credentials": {"user": "me", "port": 5432},
    }


def test_secret_names() -> None:
    secret = ["apiKey", "HF_TOKEN", "privateKey", "private_key_path", "DB_PASSWD", "authToken"]
    plain = ["tokenizer", "max_tokens", "bos_token", "KeyError", "monkey", "keystrokes"]
    assert [n for n in secret if not is_secret_name(n)] == []
    assert [n for n in plain if is_secret_name(n)] == []
