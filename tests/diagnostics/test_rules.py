"""The diagnosis rules on evidence built by hand: tracebacks, exit codes, metric trends,
near misses. The corpus of real logs is tested in test_corpus.py."""

from __future__ import annotations

import pytest

from tuneplane.diagnostics import Evidence, LogLine, Series, diagnose


def lines(text: str, stream: str = "stderr") -> list[LogLine]:
    return [LogLine(i, stream, t) for i, t in enumerate(text.splitlines())]  # type: ignore[arg-type]


def codes(evidence: Evidence) -> list[str]:
    return [finding.code for finding in diagnose(evidence)]


CHAINED = """\
[rank1]: Traceback (most recent call last):
[rank1]:   File "/work/job/data.py", line 12, in load
[rank1]:     return rows[key]
[rank1]:            ~~~~^^^^^
[rank1]: KeyError: 'text'
[rank1]:
[rank1]: During handling of the above exception, another exception occurred:
[rank1]:
[rank1]: Traceback (most recent call last):
[rank1]:   File "/work/job/train.py", line 88, in <module>
[rank1]:     main()
[rank1]:   File "/work/job/train.py", line 61, in main
[rank1]:     batch = load(split)
[rank1]:   File "/opt/conda/lib/python3.11/site-packages/datasets/arrow_dataset.py", line 9, in x
[rank1]:     raise ValueError(msg)
[rank1]: ValueError: column 'text' is missing: available columns are ['prompt']
"""


def test_the_first_traceback_names_its_exception_and_the_users_innermost_frame() -> None:
    (finding,) = diagnose(Evidence(lines=lines(CHAINED), exit_code=1))
    assert finding.code == "python_exception"
    assert finding.title == "The job raised KeyError"
    assert "KeyError: 'text' in load (/work/job/data.py, line 12)" in finding.detail
    assert "1 later traceback followed it (the last: ValueError)" in finding.detail
    assert [c.line for c in finding.citations] == [0, 4]


SHUTDOWN = """\
[rank3]:[E ProcessGroupNCCL.cpp:1025] [PG 0 Rank 3] Process group watchdog thread terminated
Traceback (most recent call last):
  File "/job/train.py", line 70, in <module>
    dist.barrier()
torch.distributed.DistBackendError: NCCL communicator was aborted on rank 3.
Exception ignored in: <function Pool.__del__ at 0x7f3c>
Traceback (most recent call last):
  File "/usr/lib/python3.11/multiprocessing/pool.py", line 268, in __del__
ResourceWarning: unclosed running multiprocessing pool
Traceback (most recent call last):
  File "/venv/bin/torchrun", line 8, in <module>
torch.distributed.elastic.multiprocessing.errors.ChildFailedError: train.py FAILED"""


def test_the_first_cause_wins_over_the_other_ranks_and_the_shutdown() -> None:
    cause = """\
Traceback (most recent call last):
  File "/job/train.py", line 52, in <module>
    batch = next(loader)
  File "/job/data.py", line 31, in collate
    ids = torch.stack(rows)
RuntimeError: stack expects each tensor to be equal size, but got [512] at entry 0"""
    text = cause + "\n" + "\n".join(f"step noise {n}" for n in range(600)) + "\n" + SHUTDOWN
    found = diagnose(Evidence(lines=lines(text), exit_code=1))
    exception = found[-1]
    assert exception.title == "The job raised RuntimeError"
    assert "in collate (/job/data.py, line 31)" in exception.detail
    assert "3 later tracebacks followed it (the last: " in exception.detail
    assert [c.line for c in exception.citations] == [0, 5]
    # Only fallout and a finaliser's error: the first of them is said.
    (only,) = [f for f in diagnose(Evidence(lines=lines(SHUTDOWN))) if f.code == "python_exception"]
    assert only.title == "The job raised torch.distributed.DistBackendError"


def test_a_traceback_raised_inside_a_library_says_so() -> None:
    text = """Traceback (most recent call last):
  File "/usr/lib/python3.11/runpy.py", line 198, in _run_module_as_main
  File "/venv/lib/python3.11/site-packages/torch/distributed/run.py", line 9, in main
torch.distributed.elastic.multiprocessing.errors.ChildFailedError: train.py FAILED"""
    (finding,) = diagnose(Evidence(lines=lines(text)))
    assert "ChildFailedError" in finding.title
    assert "raised inside a library" in finding.detail


@pytest.mark.parametrize(
    ("exit_code", "code", "confidence"),
    [(137, "host_oom", "likely"), (-9, "host_oom", "likely"), (143, "preempted", "possible")],
)
def test_exit_codes_of_signals_say_what_probably_happened(
    exit_code: int, code: str, confidence: str
) -> None:
    (finding,) = diagnose(Evidence(exit_code=exit_code))
    assert (finding.code, finding.confidence) == (code, confidence)


def test_a_log_line_outranks_the_exit_code_for_the_same_cause() -> None:
    kernel = "[12345.678] Out of memory: Killed process 4242 (python) total-vm:123kB"
    (finding,) = diagnose(Evidence(lines=lines(kernel), exit_code=137))
    assert (finding.code, finding.confidence) == ("host_oom", "certain")
    assert finding.citations[0].line == 0


def test_nan_onset_cites_the_first_invalid_point_and_the_last_finite_one() -> None:
    loss = Series("train/loss", [(1, 2.0), (2, 1.5), (3, None), (4, None)])
    (finding,) = diagnose(Evidence(series=[loss]))
    assert finding.code == "nan_loss"
    assert [(c.step, c.value) for c in finding.citations] == [(2, 1.5), (3, None)]


def test_divergence_and_throughput_collapse_need_enough_points() -> None:
    rising = Series("train/loss", [(i, 1.0 if i < 6 else 5.0) for i in range(10)])
    slow = Series("perf/tokens_per_s", [(i, 1000.0) for i in range(9)] + [(9, 50.0)])
    assert codes(Evidence(series=[rising, slow])) == ["loss_divergence", "throughput_collapse"]
    short = Series("train/loss", [(0, 1.0), (1, 9.0)])
    assert codes(Evidence(series=[short])) == []
    reward = Series("train/reward", [(i, 1.0 if i < 6 else 5.0) for i in range(10)])
    assert codes(Evidence(series=[reward])) == []  # only losses are judged for divergence


@pytest.mark.parametrize(
    "line",
    [
        "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to "
        "32768",
        "train/loss=0.412 grad_norm=1.2 lr=1e-5",
        "WARNING: No such file or directory for optional plugin, continuing",
        "config: {'model': 'llama', 'preemption': False, 'max_grad_norm': 1.0}",
        '{"preempted": 0, "timeout_minutes": 30}',
    ],
)
def test_near_misses_are_not_failures(line: str) -> None:
    assert codes(Evidence(lines=lines(line))) == []


def test_the_surest_findings_come_first_and_the_exception_last() -> None:
    # The NCCL error first: an exception before it would be what it follows (see below).
    text = (
        "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1269, unhandled system error\n" + CHAINED
    )
    found = codes(Evidence(lines=lines(text), exit_code=143))
    assert found[0] == "nccl_error"
    assert found[-1] == "python_exception"
    assert "preempted" in found


def test_the_sdk_saying_the_server_was_unreachable_is_a_finding() -> None:
    line = "tuneplane: 0 of 2000 points delivered (2000 dropped: server unreachable)"
    assert codes(Evidence(lines=lines(line, "stderr"))) == ["ingest_unreachable"]
    health = {"dropped_by_reason": {"server unreachable": 12}}
    assert codes(Evidence(transport=health)) == ["ingest_unreachable"]


def test_a_long_message_is_cut_at_a_word_and_says_so() -> None:
    text = 'Traceback (most recent call last):\n  File "/job/t.py", line 1, in f\n'
    text += "RuntimeError: " + "word " * 100
    (finding,) = diagnose(Evidence(lines=lines(text)))
    assert finding.detail.endswith("word … in f (/job/t.py, line 1)")


ASYNC_NCCL_ERROR = """\
[E ProcessGroupNCCL.cpp:828] [Rank 3] Exception (either an error or timeout) detected by \
watchdog at work: 2, last enqueued NCCL work: 2, last completed NCCL work: 1.
[E ProcessGroupNCCL.cpp:414] Some NCCL operations have failed or timed out. Due to the \
asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete \
data. To avoid this inconsistency, we are taking the entire process down.
[E ProcessGroupNCCL.cpp:737] [Rank 3] NCCL watchdog thread terminated with exception: NCCL \
error: unhandled system error, WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, \
Timeout(ms)=1800000)"""


def test_an_async_nccl_error_is_an_error_not_a_timeout() -> None:
    assert codes(Evidence(lines=lines(ASYNC_NCCL_ERROR))) == ["nccl_error"]
    timeout = (
        "[E ProcessGroupNCCL.cpp:475] [Rank 0] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=7, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800439 "
        "milliseconds before timing out."
    )
    assert codes(Evidence(lines=lines(timeout))) == ["nccl_timeout"]


@pytest.mark.parametrize(
    "line",
    [
        "Exception: data did not match any variant of untagged enum ModelWrapper at line 1 "
        "column 1",
        "Exception: data did not match any variant of untagged enum PyPreTokenizerTypeWrapper "
        "at line 951 column 3",
        "Exception: data did not match any variant of untagged enum PyNormalizerTypeWrapper at "
        "line 49 column 3",
    ],
)
def test_a_family_of_messages_is_one_finding(line: str) -> None:
    assert codes(Evidence(lines=lines(line))) == ["tokenizer_error"]


KILLED_THEN_TIMEOUTS = """\
[E ProcessGroupNCCL.cpp:475] [Rank 1] Watchdog caught collective operation timeout: \
WorkNCCL(SeqNum=9, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600324 milliseconds before \
timing out.
[E ProcessGroupNCCL.cpp:475] [Rank 2] Watchdog caught collective operation timeout: \
WorkNCCL(SeqNum=9, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600329 milliseconds before \
timing out."""


def test_a_sigkill_explains_the_timeouts_of_the_surviving_ranks() -> None:
    found = codes(Evidence(lines=lines(KILLED_THEN_TIMEOUTS), exit_code=137))
    assert found == ["host_oom", "nccl_timeout"]
    kernel = "[Tue Mar  4 10:12:01 2025] Out of memory: Killed process 81 (python) total-vm:1kB"
    found = codes(Evidence(lines=lines(KILLED_THEN_TIMEOUTS + "\n" + kernel)))
    assert found == ["host_oom", "nccl_timeout"]


def test_an_nccl_error_explains_the_timeouts_and_an_oom_explains_both() -> None:
    text = KILLED_THEN_TIMEOUTS + "\n" + ASYNC_NCCL_ERROR
    assert codes(Evidence(lines=lines(text))) == ["nccl_error", "nccl_timeout"]
    oom = (
        "[rank5]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.2 GiB. GPU 5 "
        "has a total capacity of 79.1 GiB of which 300 MiB is free."
    )
    assert codes(Evidence(lines=lines(text + "\n" + oom))) == [
        "cuda_oom", "nccl_error", "nccl_timeout"
    ]  # fmt: skip


CLEANUP_AFTER_OOM = """\
Traceback (most recent call last):
  File "/job/train.py", line 40, in step
    loss.backward()
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB.

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/job/train.py", line 52, in main
    save_emergency_checkpoint(model)
  File "/job/ckpt.py", line 9, in save_emergency_checkpoint
    os.rename(tmp, final)
FileExistsError: [Errno 17] File exists: '/ckpt/step_100'"""


def test_an_oom_comes_before_the_exception_raised_while_cleaning_up() -> None:
    found = diagnose(Evidence(lines=lines(CLEANUP_AFTER_OOM), exit_code=1))
    assert [f.code for f in found] == ["cuda_oom", "python_exception"]
    # The traceback is the OOM's, not the cleanup's that followed it.
    assert "OutOfMemoryError" in found[-1].title
    assert "the last: FileExistsError" in found[-1].detail


def test_of_two_causes_the_surer_then_the_earlier_comes_first() -> None:
    text = (
        "OSError: [Errno 28] No space left on device: '/ckpt/step_9/model.safetensors'\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
    )
    assert codes(Evidence(lines=lines(text))) == ["disk_full", "cuda_oom"]
    swapped = "\n".join(reversed(text.splitlines()))
    assert codes(Evidence(lines=lines(swapped))) == ["cuda_oom", "disk_full"]


def test_only_the_exit_code_and_the_last_line_known_is_said_as_such() -> None:
    text = "step 10 loss 2.31\nmodel: something went wrong in the reward worker"
    (finding,) = diagnose(Evidence(lines=lines(text), exit_code=3))
    assert finding.code == "exit_status"
    assert finding.confidence == "possible"
    assert "exit code 3" in finding.detail
    assert "something went wrong in the reward worker" in finding.detail
    assert [c.line for c in finding.citations] == [1]
    (killed,) = diagnose(Evidence(exit_code=134))
    assert "SIGABRT" in killed.detail
    assert diagnose(Evidence(lines=lines(text), exit_code=0)) == []


def test_a_bug_on_one_rank_comes_before_the_other_ranks_timeouts() -> None:
    bug = """\
[rank2]: Traceback (most recent call last):
[rank2]:   File "/job/reward.py", line 18, in format_reward
[rank2]:     return 1.0 if parsed['answer'] == ref else 0.0
[rank2]: KeyError: 'answer'"""
    found = codes(Evidence(lines=lines(bug + "\n" + KILLED_THEN_TIMEOUTS), exit_code=1))
    assert found[:2] == ["python_exception", "nccl_timeout"]
    # A cause said in as many words still comes first, and an exception after the
    # timeouts (their own fallout) stays last.
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
    first = codes(Evidence(lines=lines(oom + "\n" + bug + "\n" + KILLED_THEN_TIMEOUTS)))[0]
    assert first == "cuda_oom"
    after = codes(Evidence(lines=lines(KILLED_THEN_TIMEOUTS + "\n" + bug)))
    assert after[0] == "nccl_timeout"
    assert after[-1] == "python_exception"


def test_of_two_findings_on_one_line_the_more_specific_comes_first() -> None:
    line = (
        "FileNotFoundError: Couldn't find a dataset script at /data/x/x.py or any data file in "
        "the same directory."
    )
    assert codes(Evidence(lines=lines(line)))[:2] == ["dataset_error", "missing_file"]


def test_kubernetes_evictions_and_node_shutdowns_name_their_cause() -> None:
    evicted = (
        "Warning  Evicted  3m  kubelet  The node was low on resource: {}. Container trainer "
        "was using 91234Ki, which exceeds its request of 0."
    )
    assert codes(Evidence(lines=lines(evicted.format("memory")))) == ["host_oom"]
    assert codes(Evidence(lines=lines(evicted.format("ephemeral-storage")))) == ["disk_full"]
    limit = 'Container trainer exceeded its local ephemeral storage limit "20Gi". '
    assert codes(Evidence(lines=lines(limit))) == ["disk_full"]
    for status in (
        "Message:  Pod was terminated in response to imminent node shutdown.",
        "Message:  Node is shutting, evicting pods",
        "Message:  Pod was rejected: Pod was rejected as the node is shutting down.",
    ):
        assert codes(Evidence(lines=lines(status))) == ["preempted"], status
