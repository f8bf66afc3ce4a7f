"""One redactor for everything a diagnosis stores and everything sent to a language model.

Secrets are found three ways:

* by **name**: a config key, an environment variable (``NAME=value``), a command-line flag
  (``--flag value``, ``--flag=value``), a JSON or YAML key (``"db_password": "…"``,
  ``token: …``) or an ``Authorization`` header whose name means a secret: one of its words
  (split on ``_ - .`` and case changes) is key, token, secret, password, passwd, pwd,
  credential(s), auth, authorization, cookie, dsn, apikey or private key. A tokenizer's
  special tokens (``pad_token``, ``eos_token``…) and counts (``max_tokens``) are not secrets;
* by **shape**: the token formats of the services training jobs talk to (ours, W&B, Hugging
  Face, OpenAI-compatible, GitHub, AWS, GCP, Slack, JWTs, PEM private keys);
* by **place**: a password in a URL, the argument of ``wandb login``.

Pure: text in, text out; a config in, a copy out. Numbers and booleans are never secrets.
"""

from __future__ import annotations

import re
from typing import Any, Final

from tuneplane.contract.secrets import REDACTED, SECRET_SHAPES, is_secret_name

#: ``NAME=value``, ``NAME: value``, ``"name": "value"``, ``--name value``, ``--name=value``.
_NAMED: Final = re.compile(
    r"""(?P<lead>(?P<dash>--?)?(?P<quote>["']?)(?P<name>[A-Za-z_][A-Za-z0-9_.-]*)(?P=quote)"""
    r"""(?P<sep>\s*[=:]\s*|(?(dash)\s+|(?!)))(?P<bearer>(?i:bearer|basic|token)\s+)?)"""
    r"""(?P<value>"[^"\n]*"|'[^'\n]*'|[^\s,;'"}\]]+)"""
)
_URL_PASSWORD: Final = re.compile(r"(//[^/\s:@]+:)[^@\s/]+@")
_LOGIN: Final = re.compile(r"(?i)(\b(?:wandb|huggingface-cli|hf)\s+(?:auth\s+)?login\s+)(?!-)(\S+)")


def _named(match: re.Match[str]) -> str:
    if not is_secret_name(match["name"]) or match["value"].startswith(REDACTED[:-1]):
        return match[0]
    value = match["value"]
    quote = value[0] if value[:1] in ("'", '"') else ""
    return f"{match['lead']}{quote}{REDACTED}{quote}"


def redact_text(text: str) -> str:
    """``text`` without the secrets it holds (see the module's docstring)."""
    text = SECRET_SHAPES.sub(REDACTED, text)
    text = _LOGIN.sub(lambda m: f"{m[1]}{REDACTED}", text)
    text = _URL_PASSWORD.sub(rf"\1{REDACTED}@", text)
    return _NAMED.sub(_named, text)


def redact_config(value: Any, name: str = "") -> Any:
    """A copy of a config (JSON-like) with every string under a secret-named key replaced,
    and every other string redacted as text."""
    if isinstance(value, dict):
        return {key: redact_config(item, str(key)) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [redact_config(item, name) for item in value]
    if isinstance(value, str):
        return REDACTED if is_secret_name(name) else redact_text(value)
    return value
