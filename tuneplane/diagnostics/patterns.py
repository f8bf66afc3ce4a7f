"""Failures recognised by what the tools print: one table, each entry a finding's code,
what it is called, how sure a match makes us, the lines that show it, the lines that look
alike but are not it, and the next thing to try."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from tuneplane.diagnostics.evidence import Confidence


@dataclass(frozen=True, slots=True)
class Pattern:
    code: str
    title: str
    confidence: Confidence
    shows: re.Pattern[str]
    next_action: str
    #: A line that matches ``shows`` but also this is not the failure (a warning, say).
    unless: re.Pattern[str] | None = None


def _any(*alternatives: str, flags: int = 0) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{a})" for a in alternatives), flags)


PATTERNS: Final[tuple[Pattern, ...]] = (
    Pattern(
        "cuda_oom",
        "The GPU ran out of memory",
        "certain",
        _any(
            r"CUDA out of memory",
            r"torch\.(cuda\.)?OutOfMemoryError",
            r"CUDA error: out of memory",
            r"CUBLAS_STATUS_ALLOC_FAILED",
            r"HIP out of memory",
            r"No available memory for the cache blocks",
            r"cudaErrorMemoryAllocation",
        ),
        "Lower the per-device batch size or sequence length, enable gradient checkpointing, "
        "or shard the model (FSDP/ZeRO); for vLLM lower gpu_memory_utilization or max_model_len.",
    ),
    Pattern(
        "host_oom",
        "The host ran out of memory (the kernel's OOM killer)",
        "certain",
        _any(
            r"Out of memory: Killed process",
            r"invoked oom-killer",
            r"oom-kill:",
            r"oom_reaper: reaped process",
            r"Memory cgroup out of memory",
            r"OOMKilled",
            r"oom-kill event",
            r"kernel: Killed process \d+",
            r"exitcode\s*:\s*-9\b",
            r"Signal 9 \(SIGKILL\)",
        ),
        "Give the job more host memory, or lower what it holds in RAM: fewer dataloader "
        "workers, streaming datasets, smaller CPU offload buffers.",
    ),
    Pattern(
        "nccl_timeout",
        "A collective operation timed out (NCCL)",
        "certain",
        _any(
            r"Watchdog caught collective operation timeout",
            r"collective operation timeout",
            r"NCCL (communicator|operation) .*timed? ?out",
            r"ProcessGroupNCCL.*[Tt]imeout",
            r"Timed out waiting \d+ms for send operation",
        ),
        "One rank stopped reaching the collective: look for the rank that failed first (its own "
        "error comes before the timeouts), a hang in data loading, or uneven work per rank; "
        "raise the timeout only once that is ruled out.",
    ),
    Pattern(
        "nccl_error",
        "NCCL reported an error",
        "certain",
        _any(
            r"NCCL error",
            r"ncclSystemError",
            r"ncclInternalError",
            r"ncclUnhandledCudaError",
            r"ncclRemoteError",
            r"ncclInvalidUsage",
            r"ncclInvalidArgument",
            r"\bNCCL WARN\b",
        ),
        "Rerun with NCCL_DEBUG=INFO to see which transport failed; check the network "
        "interfaces (NCCL_SOCKET_IFNAME), shared memory (/dev/shm) and that every rank sees "
        "the same GPUs.",
    ),
    Pattern(
        "disk_full",
        "The disk is full",
        "certain",
        _any(
            r"No space left on device",
            r"\[Errno 28\]",
            r"ENOSPC",
            r"Disk quota exceeded",
            r"\[Errno 122\]",
        ),
        "Free space where the job writes (checkpoints, caches such as HF_HOME, /tmp), keep "
        "fewer checkpoints (save_total_limit), or write to a larger volume.",
    ),
    Pattern(
        "missing_file",
        "A file or checkpoint was not found",
        "likely",
        _any(
            r"FileNotFoundError",
            r"No such file or directory",
            r"does not appear to have a file named",
            r"is not a local folder and is not a valid model identifier",
            r"Can't load (the )?(model|config|weights)",
            r"[Cc]heckpoint .*(not found|does not exist)",
            r"Error no file named",
        ),
        "Check the path the job was given (relative to its working directory), that the "
        "checkpoint was fully written and is mounted on this node, and the model name.",
        unless=re.compile(r"ldconfig|Warning|warning:|WARNING"),
    ),
    Pattern(
        "dataset_error",
        "The dataset could not be loaded or read",
        "likely",
        _any(
            r"DatasetNotFoundError",
            r"DatasetGenerationError",
            r"datasets\.exceptions\.\w+",
            r"Couldn't find (a )?dataset",
            r"pyarrow\.lib\.Arrow(Invalid|TypeError)",
            r"Couldn't cast array of type",
            r"column names don't match",
        ),
        "Check the dataset's name, split and configuration, and that its columns are the "
        "ones the trainer expects (for chat data, a 'messages' column of role/content).",
    ),
    Pattern(
        "tokenizer_error",
        "The tokenizer failed",
        "likely",
        _any(
            r"tokenizer does not have a padding token",
            r"Tokenizer class \w+ does not exist",
            r"tokenizer\.chat_template is not set",
            r"chat_template is not set",
            r"Couldn't instantiate the backend tokenizer",
            r"requires the SentencePiece library",
            r"Can't load tokenizer",
            r"untagged enum ModelWrapper",
        ),
        "Set a padding token (tokenizer.pad_token = tokenizer.eos_token), give the tokenizer "
        "a chat template, or install what it needs (sentencepiece, tokenizers).",
    ),
    Pattern(
        "nan_loss",
        "The loss or the gradients became NaN or infinite",
        "likely",
        _any(
            r"\bloss\b[^\n]{0,24}\b(nan|inf)\b",
            r"\b(nan|NaN) loss\b",
            r"NaN or Inf found in input tensor",
            r"non-finite (loss|gradient|values)",
            r"for gradients from `parameters` is non-finite",
            r"returned nan values in its \d+th output",
            r"Detected (NaN|Inf|inf) ",
            r"grad[ _]norm\s*[:=]\s*(nan|inf)\b",
            flags=re.IGNORECASE,
        ),
        "Lower the learning rate or raise warmup, clip gradients, use bf16 instead of fp16, "
        "and check the data of the steps just before for empty or extreme samples.",
        unless=re.compile(r"OVERFLOW|Attempted loss scale|skipping step", re.IGNORECASE),
    ),
    Pattern(
        "preempted",
        "The node was preempted or the job was told to stop",
        "likely",
        _any(
            r"DUE TO PREEMPTION",
            r"\bpreempted\b",
            r"Received SIGTERM",
            r"Signals\.SIGTERM",
            r"got signal: 15",
            r"spot (instance )?interruption",
        ),
        "Resume from the last checkpoint (tuneplane run resumes the run and continues its "
        "steps); checkpoint more often on preemptible nodes, or ask for a longer time limit.",
        unless=re.compile(r"preempted\s*=\s*(false|0)", re.IGNORECASE),
    ),
    Pattern(
        "time_limit",
        "The scheduler's time limit ended the job",
        "certain",
        _any(r"DUE TO TIME LIMIT", r"TIMEOUT.*time limit", r"Job .* exceeded (its )?time limit"),
        "Resume from the last checkpoint, ask for a longer time limit, or checkpoint often "
        "enough that a limit loses little.",
    ),
    Pattern(
        "ingest_unreachable",
        "The telemetry or tracking server could not be reached",
        "likely",
        _any(
            r"tuneplane: .*server unreachable",
            r"tuneplane: .*telemetry is off for .* is unreachable",
            # The trackers people ran before, or beside: their endpoints fail the same way.
            r"wandb: Network error",
            r"wandb: ERROR .*(timed out|[Cc]onnection)",
            r"^Retry attempt failed:$",
            r"API request to \S+ failed with exception .*(Max retries exceeded|[Cc]onnection)",
        ),
        "Check TUNEPLANE_URL / TUNEPLANE_INGEST_URL from the training node (the address the "
        "workers use, not the dashboard's); set TUNEPLANE_SPOOL_DIR to keep points through "
        "an outage.",
    ),
)
