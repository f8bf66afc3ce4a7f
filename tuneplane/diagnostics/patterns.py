"""Failures recognised by what the tools print: one table, each entry a finding's code,
what it is called, how sure a match makes us, the lines that show it, the lines that look
alike but are not it, and the next thing to try. Where two entries match one line, the
earlier in the table is said first: the more specific comes before the more general (a
dataset's FileNotFoundError is a dataset error before it is a missing file)."""

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
    #: Lines that show the failure only beside a line matching the second pattern within
    #: ``NEAR_LINES`` (a ``socket.gaierror`` is the tracker's only with its frames around).
    with_context: tuple[re.Pattern[str], re.Pattern[str]] | None = None
    #: Words of which every line this pattern matches holds one (its context lines too):
    #: a whole log is searched for these first (see ``search``). Most begin with a capital,
    #: which keeps that search fast.
    anchors: tuple[str, ...] = ()


#: Lines either side of a line that ``with_context`` looks at for its context.
NEAR_LINES: Final = 30


def _any(*alternatives: str, flags: int = 0) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{a})" for a in alternatives), flags)


_I = re.IGNORECASE

PATTERNS: Final[tuple[Pattern, ...]] = (
    Pattern(
        "cuda_oom",
        "The GPU ran out of memory",
        "certain",
        _any(
            r"CUDA out of memory",
            r"torch\.(cuda\.)?OutOfMemoryError",
            r"OutOfMemoryError: (CUDA|HIP)",
            r"CUDA error: out of memory",
            r"CUDA_ERROR_OUT_OF_MEMORY",
            r"cudaErrorMemoryAllocation",
            r"CUBLAS_STATUS_ALLOC_FAILED",
            r"(HIP|XPU|NPU|MPS backend) out of memory",
            r"hipErrorOutOfMemory",
            r"RESOURCE_EXHAUSTED: Out of memory",
            r"Out of memory while trying to allocate",
            r"cudaMalloc(Async)? .*out of memory",
        ),
        "Lower the per-device batch size or sequence length, enable gradient checkpointing, "
        "or shard the model (FSDP/ZeRO); for vLLM lower gpu_memory_utilization or max_model_len.",
        anchors=(
            "CUDA",
            "OutOfMemory",
            "OUT_OF_MEMORY",
            "MemoryAllocation",
            "ALLOC_FAILED",
            "HIP",
            "XPU",
            "NPU",
            "MPS",
            "Out of memory",
            "Malloc",
        ),
    ),
    Pattern(
        "kv_cache_too_small",
        "The inference engine's KV cache is too small for the model's length",
        "certain",
        _any(
            r"larger than the maximum number of tokens that can be stored in KV cache",
            r"KV cache is needed, which is larger than the available KV cache memory",
            r"No available memory for the cache blocks",
            r"Not enough memory\. Please try to increase --mem-fraction-static",
        ),
        "Raise gpu_memory_utilization (SGLang: --mem-fraction-static), lower max_model_len / "
        "--context-length, or give the engine more GPUs (tensor parallelism).",
        anchors=("KV cache", "No available memory for the cache", "Not enough memory"),
    ),
    Pattern(
        "cuda_illegal_access",
        "A GPU kernel accessed memory it may not (illegal memory access)",
        "certain",
        _any(
            r"illegal memory access",
            r"cudaErrorIllegalAddress",
            r"CUDA_ERROR_ILLEGAL_ADDRESS",
            r"CUDA error: misaligned address",
            r"CUDA error: an illegal instruction",
            r"CUDA error: unspecified launch failure",
            r"Memory access fault by GPU",
        ),
        "Rerun with CUDA_LAUNCH_BLOCKING=1 to find the kernel; it is often a custom or fused "
        "kernel (flash-attention, a compiled extension) with a shape or dtype it does not "
        "support, or a mismatch between the CUDA build and the driver.",
        anchors=(
            "CUDA",
            "Cuda",
            "IllegalAddress",
            "ILLEGAL_ADDRESS",
            "Memory access fault",
            "Error: an illegal",
        ),
    ),
    Pattern(
        "device_assert",
        "A GPU kernel's assertion failed (an index or label out of range)",
        "certain",
        _any(
            r"device-side assert(ion)?s? triggered",
            r"cudaErrorAssert",
            r"block: \[\d+,\d+,\d+\], thread: \[\d+,\d+,\d+\] Assertion",
            r"\.cuh?:\d+: .*Assertion .* failed",
            r"Assertion `t >= 0 && t < n_classes` failed",
            r"index out of range in self",
            r"index -?\d+ is out of bounds for dimension \d+",
        ),
        "A label or token id is out of range: check that labels are below the number of "
        "classes (and -100 is the ignore index), and that token ids fit the embedding "
        "(resize_token_embeddings after adding tokens). Rerun with CUDA_LAUNCH_BLOCKING=1.",
        anchors=("CUDA", "Cuda", "RuntimeError: cuda", "Assert", "IndexError"),
    ),
    Pattern(
        "gpu_fault",
        "The GPU or its driver failed (hardware or driver fault)",
        "certain",
        _any(
            r"fallen off the bus",
            r"\bNVRM: Xid\b",
            r"\bXid \d+\b",
            r"uncorrectable ECC error",
            r"CUDA error: ECC error",
            r"cudaErrorECCUncorrectable",
            r"CUDA error: unknown error",
        ),
        "Take the node out of service and report it (nvidia-smi -q, dmesg for Xid); resume "
        "from the last checkpoint on another node.",
        anchors=("GPU", "Xid", "ECC", "CUDA"),
    ),
    Pattern(
        "cuda_setup",
        "The job could not use the GPU (driver, build or visibility)",
        "certain",
        _any(
            r"no kernel image is available for execution on the device",
            r"CUDA driver version is insufficient",
            r"[Nn]o CUDA GPUs are available",
            r"Found no NVIDIA driver on your system",
            r"all CUDA-capable devices are busy or unavailable",
            r"CUDA error: invalid device ordinal",
            r"Torch not compiled with CUDA enabled",
        ),
        "Check that the job sees its GPUs (CUDA_VISIBLE_DEVICES, the scheduler's GPU request) "
        "and that the installed PyTorch/CUDA build supports the node's driver and GPU.",
        anchors=("CUDA", "NVIDIA", "Torch not compiled"),
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
            r"oom[-_]kill events?",
            r"oom-kill:constraint",
            r"kernel: Killed process \d+",
            r"oom-kill event.*killed by the cgroup out-of-memory handler",
            r"exitcode\s*:\s*-9\b",
            r"Signal 9 \(SIGKILL\)",
            r"<Signals\.SIGKILL: 9>",
            r"is killed by signal: Killed",
            # Ray's memory monitor kills a worker before the kernel would.
            r"killed due to the node running low on memory",
            r"ray\.exceptions\.OutOfMemoryError",
            r"killed due to memory pressure \(OOM\)",
            # The kubelet's eviction of a pod from a node short of memory.
            r"[Tt]he node was low on resource: memory",
            r"[Tt]he node had condition: \[MemoryPressure\]",
        ),
        "Give the job more host memory, or lower what it holds in RAM: fewer dataloader "
        "workers, streaming datasets, smaller CPU offload buffers.",
        anchors=(
            "Out of memory",
            "OOM",
            "Memory cgroup",
            "Killed",
            "Detected",
            "CONSTRAINT",
            "SIGKILL",
            "Task was killed",
            "OutOfMemoryError",
            "Workers",
            "low on resource",
            "MemoryPressure",
        ),
    ),
    Pattern(
        "loss_scale_collapse",
        "The fp16 loss scale collapsed (the gradients overflow at every step)",
        "certain",
        _any(
            r"Attempted loss scale: 1(\.0)?, reducing to 1(\.0)?\b",
            r"Current loss scale already at minimum",
            r"[Mm]inimum loss scale reached",
            r"reducing loss scale to (0|1)(\.0+)?\b",
            r"reducing loss scale to \d(\.\d+)?e-\d+",
        ),
        "Train in bf16 instead of fp16, or lower the learning rate and clip gradients; check "
        "the data for extreme samples and the model for layers that overflow in fp16.",
        anchors=(
            "Attempted loss scale",
            "Current loss scale",
            "Minimum loss scale",
            "Gradient overflow",
            "Skipping step",
        ),
    ),
    Pattern(
        "nccl_timeout",
        "A collective operation timed out (NCCL)",
        "certain",
        _any(
            r"Watchdog caught collective operation timeout",
            r"collective operation timeout",
            r"ran for \d+ milliseconds before timing out",
            r"NCCL (communicator|operation) .*timed? ?out",
            # Not the Timeout(ms)= setting every WorkNCCL prints, nor the watchdog's "either
            # an error or timeout" and "failed or timed out", which an NCCL error prints too.
            r"ProcessGroupNCCL.*(?:(?<!failed or )timed out"
            r"|(?<!error or )\b[Tt]imeout\b(?!\(ms\)))",
            r"Timed out waiting \d+ms for send operation",
        ),
        "One rank stopped reaching the collective: look for the rank that failed first (its own "
        "error comes before the timeouts), a hang in data loading, or uneven work per rank; "
        "raise the timeout only once that is ruled out.",
        anchors=(
            "collective operation timeout",
            "WorkNCCL",
            "ProcessGroupNCCL",
            "NCCL communicator",
            "NCCL operation",
            "Watchdog",
            "Timed out waiting",
        ),
    ),
    Pattern(
        "nccl_error",
        "NCCL reported an error",
        "certain",
        _any(
            r"\b[NR]CCL error",
            r"\b[nr]ccl(System|Internal|UnhandledCuda|Remote|InvalidUsage|InvalidArgument)Error",
            r"\b[NR]CCL WARN\b",
            r"NCCL watchdog thread terminated with exception",
        ),
        "Rerun with NCCL_DEBUG=INFO to see which transport failed; check the network "
        "interfaces (NCCL_SOCKET_IFNAME), shared memory (/dev/shm) and that every rank sees "
        "the same GPUs.",
        anchors=(
            "NCCL error",
            "RCCL error",
            "NCCL WARN",
            "RCCL WARN",
            "NCCL watchdog",
            "SystemError",
            "InternalError",
            "UnhandledCudaError",
            "RemoteError",
            "InvalidUsage",
            "InvalidArgument",
        ),
    ),
    Pattern(
        "disk_full",
        "The disk is full",
        "certain",
        _any(
            r"No space left on device",
            r"\[Errno 28\]",
            r"ENOSPC",
            r"StorageFull",
            r"Disk quota exceeded",
            r"\[Errno 122\]",
            # torch.save's writer says only that the write failed; a full disk is its cause.
            r"PytorchStreamWriter failed writing file",
            r"[Nn]ot enough (free )?disk space",
            r"database or disk is full",
            r"insufficient shared memory \(shm\)",
            # The kubelet's eviction for a node's or a container's local storage.
            r"[Tt]he node was low on resource: ephemeral-storage",
            r"exceeded its local ephemeral storage limit",
        ),
        "Free space where the job writes (checkpoints, caches such as HF_HOME, /tmp, /dev/shm), "
        "keep fewer checkpoints (save_total_limit), or write to a larger volume.",
        anchors=(
            "No space left",
            "Errno 28",
            "Errno 122",
            "ENOSPC",
            "StorageFull",
            "Disk quota",
            "PytorchStreamWriter",
            "Not enough",
            "OperationalError",
            "(shm)",
            "low on resource",
            "ephemeral storage",
        ),
    ),
    Pattern(
        "dataset_error",
        "The dataset could not be loaded or read",
        "likely",
        _any(
            r"\b(Dataset\w*|DataFiles\w*|Schema\w*|\w*Splits\w*|\w*Checksums?\w*)Error\b",
            r"datasets\.exceptions\.\w+",
            r"Couldn't find (a )?dataset",
            r"\bArrow(Invalid|TypeError|CapacityError)\b",
            r"Couldn't cast array of type",
            r"column names don't match",
            r"An error occurred while generating the dataset",
            r"Please pass `features` or at least one example when writing data",
            r"Unknown split \"?\w+",
        ),
        "Check the dataset's name, split and configuration, and that its columns are the "
        "ones the trainer expects (for chat data, a 'messages' column of role/content).",
        anchors=(
            "Dataset",
            "DataFiles",
            "Schema",
            "Splits",
            "Checksum",
            "Couldn't",
            "Arrow",
            "An error occurred while generating",
            "Please pass",
            "Unknown split",
            "ValueError",
        ),
    ),
    Pattern(
        "tokenizer_error",
        "The tokenizer failed",
        "likely",
        _any(
            r"tokenizer does not have a padding token",
            r"Tokenizer class \w+ does not exist",
            r"chat_template is not set",
            r"(does not have|No) (a )?chat template",
            r"Couldn't instantiate the backend tokenizer",
            r"requires the (SentencePiece|protobuf|tiktoken) library",
            r"Can't load tokenizer",
            # tokenizer.json written by a newer tokenizers than the one installed: one
            # message per part of it (ModelWrapper, PyPreTokenizerTypeWrapper, …).
            r"untagged enum \w+",
            r"sentencepiece_processor\.cc.*\b(ParseFromArray|Internal|failed)",
            r"Converting from (Tiktoken|SentencePiece) failed",
        ),
        "Set a padding token (tokenizer.pad_token = tokenizer.eos_token), give the tokenizer "
        "a chat template, install what it needs (sentencepiece, tokenizers), or upgrade "
        "tokenizers when the tokenizer.json is newer than it.",
        anchors=(
            "Tokenizer",
            "Asking to pad",
            "TemplateError",
            "No chat template",
            "SentencePiece",
            "Wrapper",
            "Exception: data did not match",
            "Internal:",
            "Converting from",
            "ValueError",
            "OSError",
            "ImportError",
        ),
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
            r"EntryNotFoundError|RepositoryNotFoundError|RevisionNotFoundError",
        ),
        "Check the path the job was given (relative to its working directory), that the "
        "checkpoint was fully written and is mounted on this node, and the model name.",
        unless=re.compile(r"ldconfig|Warning|warning:|WARNING"),
        anchors=(
            "NotFoundError",
            "No such file",
            "OSError",
            "Can't load",
            "Checkpoint",
            "Error no file",
        ),
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
            # Megatron-core's rerun state machine: a bucket's grad norm or the forward loss.
            r"found (NaN|Inf) in local (grad norm|forward loss)",
            r"Unexpected result tensor\((nan|inf|-inf)\b",
            flags=_I,
        ),
        "Lower the learning rate or raise warmup, clip gradients, use bf16 instead of fp16, "
        "and check the data of the steps just before for empty or extreme samples.",
        unless=re.compile(r"OVERFLOW|Attempted loss scale|skipping step", _I),
        anchors=("nan", "NaN", "NAN", "Nan", "inf", "non-finite", "Non-finite", "RuntimeError"),
    ),
    Pattern(
        "preempted",
        "The node was preempted or the job was told to stop",
        "likely",
        _any(
            r"DUE TO PREEMPTION",
            r"\bpreempt(ed|ion)\b",
            r"\bPREEMPTED\b",
            r"Received SIGTERM",
            r"Signals\.SIGTERM",
            r"got signal: 15",
            r"spot (instance )?interruption",
            r"[Ss]pot [Ii]nstance (interruption|termination) notice",
            r"\"EventType\":\s*\"Preempt\"",
            r"(Spot|Low-priority) (VM|node|instance)s? .*evicted",
            # Kubernetes' graceful node shutdown (1.20 and 1.21+ wordings).
            r"terminated in response to imminent node shutdown",
            r"Node is shutting, evicting pods",
            r"rejected as the node is shutting down",
            # A GCE spot VM's metadata server announcing the preemption (a worker's log).
            r"[Mm]etadata [Ss]ervice says termination is imminent",
        ),
        "Resume from the last checkpoint (tuneplane run resumes the run and continues its "
        "steps); checkpoint more often on preemptible nodes, or ask for a longer time limit.",
        # A setting, not an event: preemption=false, "preempted": 0, 'preemption': False.
        unless=re.compile(r"preempt\w*['\"]?\s*[=:]\s*['\"]?(false|0|none|no)\b", _I),
        anchors=(
            "PREEMPT",
            "preempt",
            "Preempt",
            "SIGTERM",
            "Signal",
            "Spot",
            "Low-priority",
            "node shutdown",
            "shutting",
            "termination is imminent",
        ),
    ),
    Pattern(
        "time_limit",
        "The scheduler's time limit ended the job",
        "certain",
        _any(
            r"DUE TO TIME LIMIT",
            r"TIMEOUT.*time limit",
            r"Job .* exceeded (its )?time limit",
            r"DeadlineExceeded",
            r"active longer than specified deadline",
        ),
        "Resume from the last checkpoint, ask for a longer time limit, or checkpoint often "
        "enough that a limit loses little.",
        anchors=("TIME LIMIT", "TIMEOUT", "Job ", "DeadlineExceeded"),
    ),
    Pattern(
        "port_in_use",
        "The rendezvous port was already in use",
        "certain",
        _any(
            r"EADDRINUSE",
            r"[Aa]ddress already in use",
            r"The server socket has failed to (listen|bind)",
        ),
        "Another job (or a previous run that did not exit) holds MASTER_PORT on this node: "
        "choose a free port (torchrun --master-port, --rdzv-endpoint) or stop the old process.",
        anchors=("EADDRINUSE", "Address already", "Errno 98", "The server socket"),
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
            r"wandb: ERROR .*(timed out|[Cc]onnection|resolve|unreachable)",
            r"wandb\.errors\.(\w+\.)?CommError",
            r"^Retry attempt failed:$",
            r"API request to \S+ failed with exception .*(Max retries exceeded|[Cc]onnection)",
            r"host='[^']*(wandb|mlflow)[^']*'.*(Max retries|[Cc]onnection|resolution)",
            r"(Max retries exceeded|Failed to establish).*(wandb|mlflow)",
        ),
        "Check TUNEPLANE_URL / TUNEPLANE_INGEST_URL (or the tracker's URL: WANDB_BASE_URL, "
        "MLFLOW_TRACKING_URI) from the training node, and its DNS; set TUNEPLANE_SPOOL_DIR "
        "to keep points through an outage.",
        with_context=(
            re.compile(
                r"socket\.gaierror|NameResolutionError|Temporary failure in name resolution|"
                r"Name or service not known|nodename nor servname|Failed to establish a new "
                r"connection|Connection refused|ConnectTimeout"
            ),
            re.compile(r"wandb|mlflow|MLFLOW_TRACKING_URI|tracking server", _I),
        ),
        anchors=(
            "unreachable",
            "Network error",
            "ConnectionError",
            "ERROR",
            "CommError",
            "Retry attempt failed",
            "API request to",
            "Max retries",
            "Failed to establish",
            "Errno -",
            "Errno 8",
            "NameResolutionError",
            "Temporary failure in name",
            "Name or service not known",
            "Connection refused",
            "ConnectTimeout",
        ),
    ),
)

#: Every signature at once: what a search of a whole log looks for (a line that matches
#: none of these can make no finding, whatever its neighbours).
SIGNATURES: Final = re.compile(
    "|".join(
        f"(?{'i' if p.shows.flags & re.IGNORECASE else ''}:{p.shows.pattern})" for p in PATTERNS
    )
    + "|"
    + "|".join(p.with_context[0].pattern for p in PATTERNS if p.with_context is not None),
    re.MULTILINE,
)
