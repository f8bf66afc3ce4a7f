"""Which names and values are secrets: one rule for every place that keeps text or
settings people did not write for us (a diagnosis's config and log, a round's recorded
protocol settings).

A name holds a secret when one of its words (split on ``_ - .`` and case changes) is key,
token, secret, password, passwd, pwd, credential(s), auth, authorization, cookie, dsn,
apikey or private key; a tokenizer's special tokens (``pad_token``) and counts
(``max_tokens``) are not secrets. A value is one by its shape: the token formats of the
services training jobs talk to (:data:`SECRET_SHAPES`). Pure: no I/O.
"""

from __future__ import annotations

import re
from typing import Final

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

SECRET_SHAPES: Final = re.compile(
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
