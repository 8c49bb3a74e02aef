"""The serving gate (`tokbackend sglang-gate`): one SGLang server with `--tokenizer-backend`
against one without, the same greedy, streamed, chat and JSON-schema requests to both, and the
answers compared (ids, logprobs, text, `prompt_tokens`), with tokbackend's start-up line in each
tokenizing process of a server started here. `tokbackend sglang-gate --help` lists the exit codes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from tokbackend._verify import EXIT_GRAMMAR, EXIT_MISMATCH, EXIT_OK, EXIT_UNAVAILABLE

# tokbackend's start-up line, one per process that loads a tokenizer with the flag, built or not (integrations._common)
STARTUP_LINE = re.compile(r"SGLang (\S+) \(pid (\d+)\) tokenizer for (.+?): backend")
# What stops the gate: Ctrl-C, and what a job runner or `kill` sends.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class GateInterrupted(BaseException):
    """A signal of `STOP_SIGNALS` reached the gate inside `interruptible()`. A BaseException, as
    KeyboardInterrupt is: nothing on its way out catches it before each server's `finally`
    has stopped that server."""

    def __init__(self, number: int) -> None:
        super().__init__(number)
        self.signal = signal.Signals(number)


@contextlib.contextmanager
def _stop_signals_to(handler: Callable[[int, Any], None]) -> Iterator[None]:
    """SIGINT and SIGTERM go to `handler` inside it, and to the handlers they had before after it."""
    previous = {number: signal.signal(number, handler) for number in STOP_SIGNALS}
    try:
        yield
    finally:
        for number, before in previous.items():
            signal.signal(number, before)


def interruptible() -> contextlib.AbstractContextManager[None]:
    """Inside it, SIGINT and SIGTERM raise `GateInterrupted` (main thread only, as any handler)."""

    def interrupt(number: int, frame: Any) -> None:
        raise GateInterrupted(number)

    return _stop_signals_to(interrupt)


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM wait until the block ends, then arrive: a server launched inside it is
    one `Server.stop` can reach by then."""
    held: list[int] = []
    try:
        with _stop_signals_to(lambda number, frame: held.append(number)):
            yield
    finally:
        if held:
            signal.raise_signal(held[0])


def _schema() -> dict[str, Any]:
    """The JSON schema the constrained chat asks for (a fresh dict: the request and the check own theirs)."""
    return {
        "type": "object",
        "properties": {
            "answer": {"type": "string", "enum": ["yes", "no"]},
            "color": {"type": "string", "enum": ["red", "green", "blue"]},
            "count": {"type": "integer", "enum": [1, 2, 3]},  # a bounded answer: random weights ramble on
        },
        "required": ["answer", "color", "count"],
        "additionalProperties": False,
    }


def probes(count_tokens: Callable[[str], int], added_tokens: list[str], long_tokens: tuple[int, ...]) -> dict[str, str]:
    """Prompt name -> text: long prompts, added tokens inside text, edge strings, pinned inputs."""
    from tokbackend._probe import EDGE_STRINGS
    from tokbackend.equivalence.corpus import prompt_of_tokens
    from tokbackend.equivalence.strategies import EXAMPLES

    found = {
        f"long {tokens // 1000}k tokens": prompt_of_tokens(count_tokens, 7_000 + tokens, tokens)
        for tokens in long_tokens
    }
    tokens = added_tokens[:6] or ["<|x|>"]
    found["added tokens inside text"] = " ".join(f"a{token}b {token}{token} x {token[:-1]}" for token in tokens)
    found["edge strings"] = "\n".join(text for text in EDGE_STRINGS if text.strip())
    for input_class, examples in EXAMPLES.items():
        for index, text in enumerate(examples):
            found[f"pinned {input_class} {index}"] = f"Repeat: {text}"
    return found


def chats(added_tokens: list[str]) -> dict[str, dict[str, Any]]:
    """Chat request bodies: tools and `<think>` in the history, and a JSON-schema answer."""
    think = next((token for token in added_tokens if "think" in token), "<think>")
    tool = {
        "type": "function",
        "function": {"name": "lookup", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}},
    }
    history = [
        {"role": "system", "content": "You are a careful agent. Tools: lookup."},
        {"role": "user", "content": "Find the capital of France, résumé e\u0301 1\ufe0f\u20e3"},
        {"role": "assistant", "content": f"{think}plan: call lookup{think.replace('<', '</')}", "tool_calls": []},
        {"role": "tool", "content": '{"q": "capital of France", "answer": "Paris"}'},
        {"role": "user", "content": "And now in one word?"},
    ]
    return {
        "chat with tools and think": {"messages": history, "tools": [tool], "max_tokens": 8},
        "json schema": {
            "messages": [{"role": "user", "content": "Answer yes or no, pick a color, count to three. Reply in JSON."}],
            "max_tokens": 96,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "pick", "schema": _schema(), "strict": True},
            },
        },
    }


def _post(url: str, body: dict[str, Any]) -> Any:
    """`body` POSTed as JSON: the answer's JSON, or for a streamed request its last text (each is cumulative)."""
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as response:
        if not body.get("stream"):
            return json.loads(response.read())
        text = ""
        for line in response:
            event = line.decode().strip()
            if event.startswith("data:") and event != "data: [DONE]":
                text = json.loads(event[5:])["text"]
        return text


def answers(url: str, prompts: dict[str, str], chat_bodies: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Everything the gate compares, from one server: 8 greedy tokens after each prompt."""
    found: dict[str, Any] = {}
    for name, text in prompts.items():
        body = {"text": text, "sampling_params": {"temperature": 0, "max_new_tokens": 8}, "logprob_start_len": 0}
        result = _post(url + "/generate", {**body, "return_logprob": True})
        meta = result["meta_info"]
        found[name] = {
            "prompt_tokens": meta["prompt_tokens"],
            "input_ids": [entry[1] for entry in meta["input_token_logprobs"]],
            "output_ids": [entry[1] for entry in meta["output_token_logprobs"]],
            "output_logprobs": [entry[0] for entry in meta["output_token_logprobs"]],
            "text": result["text"],
            "streamed": _post(url + "/generate", {**body, "stream": True}),
        }
    for name, body in chat_bodies.items():
        result = _post(url + "/v1/chat/completions", {"model": "default", "temperature": 0, **body})
        content = result["choices"][0]["message"].get("content") or ""
        found[name] = {"prompt_tokens": result["usage"]["prompt_tokens"], "content": content}
        if "response_format" in body:
            found[name]["conforms"] = _conforms(content)
    return found


def first_token_seconds(url: str, prompts: list[str]) -> list[float]:
    """Seconds from request to answer for each prompt with one new token: the time to first
    token a user sees. The server's prefix cache is flushed first (a server shared by several
    gates has seen these prompts) and the prompts are distinct, so none is served from it."""
    urllib.request.urlopen(url + "/flush_cache", timeout=60).close()
    seconds = []
    for text in prompts:
        started = time.perf_counter()
        _post(url + "/generate", {"text": text, "sampling_params": {"temperature": 0, "max_new_tokens": 1}})
        seconds.append(time.perf_counter() - started)
    return seconds


def _conforms(content: str) -> str | None:
    """None when `content` is JSON that validates against the schema, else why not."""
    try:
        import jsonschema

        jsonschema.validate(json.loads(content), _schema())
    except Exception as error:  # noqa: BLE001 - any failure is the finding
        return f"{type(error).__name__}: {str(error)[:200]}"
    return None


def differences(reference: dict[str, Any], candidate: dict[str, Any]) -> list[str]:
    """What differs between the two servers' answers, one line each."""
    found = []
    for name, expected in reference.items():
        actual = candidate.get(name)
        for key, value in expected.items():
            if key != "conforms" and (actual is None or actual.get(key) != value):
                shown = "" if actual is None else f": {str(value)[:80]!r} vs {str(actual.get(key))[:80]!r}"
                found.append(f"{name}: {key} differs{shown}")
    return found


@dataclasses.dataclass
class Server:
    """A server under test: started here from `arguments`, logging to `log_path`, or (arguments
    None) already running at `url`."""

    name: str
    url: str
    arguments: list[str] | None
    log_path: Path
    process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float) -> str | None:
        """Start it and wait for /health; None when it serves, else why not (its log's end)."""
        if self.arguments is None:
            return None
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "w") as handle, _signals_held():  # the server writes to its own copy of the descriptor
            command = [sys.executable, "-m", "sglang.launch_server", *self.arguments]
            self.process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return f"exited with {self.process.returncode}: {self._log()[-1500:]}"
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=5) as response:
                    if response.status == 200:
                        return None
            except OSError:
                pass
            time.sleep(0.5)
        return f"no /health after {timeout:.0f} s: {self._log()[-1500:]}"

    def stop(self) -> None:
        """Stop a server started here, with its whole process group: SIGTERM, then SIGKILL to what is
        left once its first process exits, after 30 s, or at a second interrupt."""
        if self.process is None:
            return
        try:
            _signal_group(self.process.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(30)
        finally:
            _signal_group(self.process.pid, signal.SIGKILL)

    def _log(self) -> str:
        return self.log_path.read_text(errors="replace")


def _signal_group(group: int, number: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # none of it is left
        os.killpg(group, number)


def run_gate(
    reference: Server,
    candidate: Server,
    prompts: dict[str, str],
    chat_bodies: dict[str, dict[str, Any]],
    announce: Callable[[str], None] = print,
    timeout: float = 900,
    timed_prompts: Sequence[str] = (),
) -> tuple[int, dict[str, Any]]:
    """(exit code, report): each server started in turn (one GPU holds one), asked, stopped;
    `timed_prompts` are timed to their first token on each (reported, not compared). The
    report's `prompts_answered` counts, per server, the prompts it answered (none where it
    never served)."""
    results: dict[str, Any] = {}
    answered: dict[str, int] = {server.name: 0 for server in (reference, candidate)}
    timings: dict[str, list[float]] = {}
    to_health: dict[str, float] = {}  # seconds from the launch to /health (0.5 s resolution)
    for server in (reference, candidate):
        announce(f"== {server.name}: {'starting' if server.arguments else server.url}")
        started = time.perf_counter()
        try:
            failure = server.start(timeout)
            to_health[server.name] = round(time.perf_counter() - started, 1)
            try:
                if failure is None:
                    results[server.name] = answers(server.url, prompts, chat_bodies)
                    answered[server.name] = len(prompts)
                    timings[server.name] = first_token_seconds(server.url, list(timed_prompts))
            except OSError as error:
                failure = f"a request failed: {error}"
        finally:  # also when a signal interrupts it (`interruptible()`): no server is left running
            server.stop()
        if failure is not None:
            announce(f"{server.name} cannot serve: {failure}")
            return EXIT_UNAVAILABLE, {"failed": server.name, "why": failure, "prompts_answered": answered}
        announce(
            f"   answered {len(prompts)} prompts and {len(chat_bodies)} chats in {time.perf_counter() - started:.0f} s"
        )
    report: dict[str, Any] = {
        "differences": differences(results[reference.name], results[candidate.name]),
        "nonconforming": {
            server: answer["conforms"]
            for server, found in results.items()
            for answer in found.values()
            if answer.get("conforms")
        },
        # tokbackend's start-up lines in the log of a server started here (none for one given by URL)
        "startup_lines": {
            server.name: STARTUP_LINE.findall(server._log()) if server.arguments is not None else []
            for server in (reference, candidate)
        },
        "prompt_tokens": {name: answer["prompt_tokens"] for name, answer in results[reference.name].items()},
        "first_token_seconds": timings,
        "seconds_to_health": to_health if reference.arguments is not None else {},
        "prompts_answered": answered,
    }
    for line in report["differences"]:
        announce(f"DIFFERS {line}")
    started_lines = len(report["startup_lines"][candidate.name])
    if candidate.arguments is not None and started_lines < 2:
        report["differences"].append(
            f"{candidate.name}: tokbackend's start-up line in {started_lines} processes "
            "(expected the tokenizer manager's and the scheduler's at least)"
        )
    if report["differences"]:
        return EXIT_MISMATCH, report
    return (EXIT_GRAMMAR if report["nonconforming"] else EXIT_OK), report
