"""The serving gate's judgement (`tokbackend sglang-gate`), on CPU: the prompts it sends and what
it counts as a difference, and that an interrupted gate leaves no server running. The gate itself
boots real SGLang servers on a GPU host (bench/RESULTS.md, "Live SGLang gate"); here the answers a
server would give are the ids each tokenizer gives."""

from __future__ import annotations

import copy
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from defects import DropsOnLongTexts

import tokbackend
from tokbackend.integrations import _sglang_gate as gate


@pytest.fixture(scope="module")
def qwen3():
    return tokbackend.load_hf("qwen3")


def _count(hf):
    return lambda text: len(hf.backend_tokenizer.encode(text).ids)


def _answers(tokenizer, prompts):
    """What the gate reads from /generate, with the server's tokenizer standing in for the server."""
    found = {}
    for name, text in prompts.items():
        ids = tokenizer.encode(text)
        found[name] = {"prompt_tokens": len(ids), "input_ids": ids}
    return found


def test_the_probes_hold_long_prompts_added_tokens_and_pinned_inputs(qwen3):
    added = [str(token) for token in qwen3.added_tokens_decoder.values()]
    prompts = gate.probes(_count(qwen3), added, (2000, 8000))
    for tokens in (2000, 8000):
        assert abs(_count(qwen3)(prompts[f"long {tokens // 1000}k tokens"]) - tokens) <= tokens * 0.02
    assert all(token in prompts["added tokens inside text"] for token in added[:6])
    assert any(name.startswith("pinned ") for name in prompts)


def test_the_gate_finds_a_backend_that_drops_an_id_on_long_texts(qwen3, register_for_test):
    """The planted defect of the live run, on CPU: a backend the boot probe passes, serving."""
    added = [str(token) for token in qwen3.added_tokens_decoder.values()]
    prompts = gate.probes(_count(qwen3), added, (4000,))
    reference = _answers(qwen3, prompts)
    assert (
        gate.differences(reference, _answers(tokbackend.accelerate(copy.deepcopy(qwen3), "gigatoken"), prompts)) == []
    )
    register_for_test("drops-on-long-texts", DropsOnLongTexts)
    planted = tokbackend.accelerate(copy.deepcopy(qwen3), "drops-on-long-texts")  # the boot probe lets it through
    found = gate.differences(reference, _answers(planted, prompts))
    assert any(line.startswith("long 4k tokens: prompt_tokens differs") for line in found), found
    assert all(line.startswith("long 4k tokens") for line in found), found  # nothing else is long enough


def test_a_missing_answer_or_a_missing_field_is_a_difference():
    reference = {"a": {"prompt_tokens": 3, "input_ids": [1, 2, 3]}, "b": {"content": "x"}}
    assert gate.differences(reference, {"a": {"prompt_tokens": 3, "input_ids": [1, 2, 3]}}) == ["b: content differs"]
    assert gate.differences(reference, {"a": {"prompt_tokens": 3}, "b": {"content": "x"}})[0].startswith(
        "a: input_ids differs"
    )


def test_a_schema_answer_that_does_not_validate_is_named():
    assert gate._conforms('{"answer": "yes", "color": "red", "count": 3}') is None
    assert gate._conforms('{"answer": "maybe", "color": "red", "count": 3}').startswith("ValidationError")
    assert gate._conforms('{"answer": "yes"').startswith("JSONDecodeError")


# What the gate launches as `python -m sglang.launch_server` in the test below: a server that starts
# a child in its process group (as SGLang starts its scheduler and detokenizer), writes both pids,
# and never answers /health.
NEVER_HEALTHY_SERVER = """
import os, signal, subprocess, sys
child = subprocess.Popen([sys.executable, "-c", "import signal; signal.pause()"])
with open(os.environ["NEVER_HEALTHY_PIDS"] + ".part", "w") as handle:
    handle.write(f"{os.getpid()} {child.pid}")
os.replace(os.environ["NEVER_HEALTHY_PIDS"] + ".part", os.environ["NEVER_HEALTHY_PIDS"])
while True:
    signal.pause()
"""


def _until(condition, seconds: float = 120) -> bool:
    """Poll `condition` until it holds (True) or `seconds` have passed (False)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _running_in_group(group: int) -> list[int]:
    """The processes of process group `group` that still run (Linux's /proc; a zombie has exited)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, _, process_group = stat.read_text().rsplit(")", 1)[1].split()[:3]
        except OSError:  # it exited meanwhile
            continue
        if int(process_group) == group and state != "Z":
            found.append(int(stat.parent.name))
    return found


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="reads process groups from /proc")
@pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupted_gate_stops_the_server_it_is_waiting_for(number, tmp_path):
    """Ctrl-C (or SIGTERM) while the gate waits for /health: the server it started runs in a session
    of its own, out of the terminal's reach, so the gate must stop its whole process group itself,
    then say so and exit 128 + the signal's number. The real `tokbackend sglang-gate`, in a process
    of its own, with a stand-in for `sglang.launch_server` first on its path."""
    (tmp_path / "sglang").mkdir()
    (tmp_path / "sglang" / "__init__.py").write_text("")
    (tmp_path / "sglang" / "launch_server.py").write_text(NEVER_HEALTHY_SERVER)
    pids = tmp_path / "pids"
    with socket.socket() as probe:  # a port nothing listens on: /health is refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    path = os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))
    environment = {**os.environ, "PYTHONPATH": path, "NEVER_HEALTHY_PIDS": str(pids)}
    arguments = [
        "--model-path",
        "qwen3.6",
        "--port",
        str(port),
        "--long",
        "64",
        "--timed",
        "1",
        "--log-dir",
        str(tmp_path),
    ]
    command = [sys.executable, "-m", "tokbackend._cli", "sglang-gate", *arguments, "--timeout", "600"]
    gate_process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment)
    server = child = None
    try:
        assert _until(lambda: pids.exists() or gate_process.poll() is not None), "the server never started"
        assert pids.exists(), gate_process.communicate()
        server, child = map(int, pids.read_text().split())
        gate_process.send_signal(number)
        output, errors = gate_process.communicate(timeout=120)
        assert _until(lambda: not _running_in_group(server), seconds=30), f"left running: {_running_in_group(server)}"
        assert gate_process.returncode == 128 + number, output + errors
        assert f"{number.name}: stopped the servers it started; no verdict" in errors, errors
    finally:
        if gate_process.poll() is None:
            gate_process.kill()
            gate_process.communicate()
        for pid in (server, child):  # what a failing gate left behind
            if pid is not None and pid in _running_in_group(server):
                os.kill(pid, signal.SIGKILL)


def test_a_signal_while_a_server_launches_arrives_once_the_gate_can_stop_it(tmp_path, monkeypatch):
    """SIGINT sent while `subprocess.Popen` is still launching the server (its process exists, the
    gate does not hold it yet) is held until the gate does, then stops it like any other."""
    launched = []
    launch = subprocess.Popen

    def launched_then_interrupted(command, **options):
        launched.append(launch([sys.executable, "-c", "import signal; signal.pause()"], start_new_session=True))
        os.kill(os.getpid(), signal.SIGINT)
        return launched[-1]

    monkeypatch.setattr(gate.subprocess, "Popen", launched_then_interrupted)
    server = gate.Server("launching", "http://127.0.0.1:9", [], tmp_path / "server.log")
    given = gate.Server("given", "http://127.0.0.1:9", None, tmp_path / "given.log")
    try:
        with pytest.raises(gate.GateInterrupted), gate.interruptible():
            gate.run_gate(server, given, {}, {}, announce=lambda line: None)
        assert launched[0].poll() is not None, "the server launched as the signal came is still running"
    finally:
        for process in launched:
            process.kill()
            process.wait()
