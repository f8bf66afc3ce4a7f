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

REDACTED: Final = "[redacted]"

_SECRET_WORDS: Final = frozenset(
    {
        "key", "apikey", "token", "secret", "password", "passwd", "pwd", "credential",
        "credentials", "auth", "authorization", "cookie", "dsn", "passphrase", "privatekey",
    }
)  # fmt: skip
#: Words before "token" that make it a tokenizer's special token, not a credential.
_TOKENIZER_WORDS: Final = frozenset(
    {"pad", "eos", "bos", "unk", "sep", "cls", "mask", "start", "end", "special", "image"}
)
#: Last words of names that say what went wrong, not what a value is.
_NOT_VALUES: Final = frozenset({"error", "errors", "exception", "warning"})
_WORD: Final = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")

_SHAPES: Final = re.compile(
    r"tp[kilc]_[A-Za-z0-9_-]{8,}"  # ours: API keys, ingest tokens, share links, sessions
    r"|hf_[A-Za-z0-9]{16,}"  # Hugging Face
    r"|sk-(?:proj-|ant-)?[A-Za-z0-9_-]{16,}"  # OpenAI-compatible, Anthropic
    r"|github_pat_[A-Za-z0-9_]{20,}|gh[pousr]_[A-Za-z0-9]{20,}"  # GitHub
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"  # AWS access key IDs
    r"|AIza[0-9A-Za-z_-]{35}|ya29\.[0-9A-Za-z_-]{20,}"  # GCP API keys, OAuth tokens
    r"|xox[abprse]-[A-Za-z0-9-]{10,}"  # Slack tokens
    r"|https://hooks\.slack\.com/services/[A-Za-z0-9/_-]+"  # Slack webhooks
    r"|eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"  # JWTs
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)"
)
#: ``NAME=value``, ``NAME: value``, ``"name": "value"``, ``--name value``, ``--name=value``.
_NAMED: Final = re.compile(
    r"""(?P<lead>(?P<dash>--?)?(?P<quote>["']?)(?P<name>[A-Za-z_][A-Za-z0-9_.-]*)(?P=quote)"""
    r"""(?P<sep>\s*[=:]\s*|(?(dash)\s+|(?!)))(?P<bearer>(?i:bearer|basic|token)\s+)?)"""
    r"""(?P<value>"[^"\n]*"|'[^'\n]*'|[^\s,;'"}\]]+)"""
)
_URL_PASSWORD: Final = re.compile(r"(//[^/\s:@]+:)[^@\s/]+@")
_LOGIN: Final = re.compile(r"(?i)(\b(?:wandb|huggingface-cli|hf)\s+(?:auth\s+)?login\s+)(?!-)(\S+)")


def is_secret_name(name: str) -> bool:
    """Whether a key, variable or flag named ``name`` holds a secret.

    >>> [is_secret_name(n) for n in ("wandb_api_key", "hf_token", "pad_token", "max_tokens")]
    [True, True, False, False]
    """
    words = [word.lower() for word in _WORD.findall(name)]
    if words and words[-1] in _NOT_VALUES:
        return False  # KeyError: 'input_ids' names what was missing, not a secret
    for index, word in enumerate(words):
        if word == "token" and index > 0 and words[index - 1] in _TOKENIZER_WORDS:
            continue
        if word in _SECRET_WORDS:
            return True
        if word == "private" and words[index + 1 : index + 2] == ["key"]:
            return True
    return False


def _named(match: re.Match[str]) -> str:
    if not is_secret_name(match["name"]) or match["value"].startswith(REDACTED[:-1]):
        return match[0]
    value = match["value"]
    quote = value[0] if value[:1] in ("'", '"') else ""
    return f"{match['lead']}{quote}{REDACTED}{quote}"


def redact_text(text: str) -> str:
    """``text`` without the secrets it holds (see the module's docstring)."""
    text = _SHAPES.sub(REDACTED, text)
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
