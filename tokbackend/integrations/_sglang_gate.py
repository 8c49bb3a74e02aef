"""The serving gate: one SGLang server with `--tokenizer-backend` against one without, the same
requests to both, and the answers compared (`tokbackend sglang-gate`).

What it sends: greedy `/generate` on prompts that matter for tokenization (long 8k-32k-token
prompts built by the exactness harness, added and special tokens inside text, the harness's
pinned counterexamples and the boot probe's edge strings), with input and output logprobs; the
same prompts streamed; OpenAI chat with tools and `<think>`; a JSON-schema-constrained chat
completion. What must hold: the same prompt token ids and `prompt_tokens`, the same output ids
and logprobs, the same streamed text, a JSON answer that parses and validates against its schema
on both, and, in the candidate's server log, tokbackend's start-up line in each process that
tokenizes. The servers are started here (`python -m sglang.launch_server` with the arguments
given, once without and once with the flag) or are given by URL.

Exit codes follow `tokbackend verify`'s: 0 identical, 1 a difference (printed), 2 usage error,
3 a JSON-schema answer that does not conform, 5 missing tools (jsonschema and the harness's
generators: the [verify] extra), 6 a server that cannot serve (did not start, or answered with an
error).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_MISMATCH, EXIT_GRAMMAR, EXIT_UNAVAILABLE = 0, 1, 3, 6
SCHEMA = {
    "type": "object",
    "properties": {
        "answer": {"type": "string", "enum": ["yes", "no"]},
        "color": {"type": "string", "enum": ["red", "green", "blue"]},
        "count": {"type": "integer", "enum": [1, 2, 3]},  # a bounded answer: random weights ramble on
    },
    "required": ["answer", "color", "count"],
    "additionalProperties": False,
}
# tokbackend's start-up line, one per process that builds a tokenizer (integrations._common)
STARTUP_LINE = re.compile(r"SGLang (\S+) \(pid (\d+)\) tokenizer for (.+?): backend")


def probes(count_tokens: Callable[[str], int], added_tokens: list[str], long_tokens: tuple[int, ...]) -> dict[str, str]:
    """Prompt name -> text: long prompts, added tokens inside text, edge strings, pinned inputs."""
    from equivalence.corpus import prompt_of_tokens
    from equivalence.strategies import EXAMPLES
    from tokbackend._probe import EDGE_STRINGS

    found = {f"long {tokens // 1000}k tokens": prompt_of_tokens(count_tokens, 7_000 + tokens, tokens) for tokens in long_tokens}
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
            "response_format": {"type": "json_schema", "json_schema": {"name": "pick", "schema": SCHEMA, "strict": True}},
        },
    }


def _post(url: str, path: str, body: dict[str, Any], timeout: float = 600) -> Any:
    request = urllib.request.Request(url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


def _stream(url: str, body: dict[str, Any], timeout: float = 600) -> str:
    request = urllib.request.Request(
        url + "/generate", data=json.dumps({**body, "stream": True}).encode(), headers={"Content-Type": "application/json"}
    )
    text = ""
    with urllib.request.urlopen(request, timeout=timeout) as response:
        for line in response:
            line = line.decode().strip()
            if line.startswith("data:") and line != "data: [DONE]":
                text = json.loads(line[5:])["text"]  # cumulative
    return text


def answers(url: str, prompts: dict[str, str], chat_bodies: dict[str, dict[str, Any]], new_tokens: int = 8) -> dict[str, Any]:
    """Everything the gate compares, from one server."""
    found: dict[str, Any] = {}
    for name, text in prompts.items():
        body = {
            "text": text,
            "sampling_params": {"temperature": 0, "max_new_tokens": new_tokens},
            "return_logprob": True,
            "logprob_start_len": 0,
        }
        result = _post(url, "/generate", body)
        meta = result["meta_info"]
        found[name] = {
            "prompt_tokens": meta["prompt_tokens"],
            "input_ids": [entry[1] for entry in meta["input_token_logprobs"]],
            "output_ids": [entry[1] for entry in meta["output_token_logprobs"]],
            "output_logprobs": [entry[0] for entry in meta["output_token_logprobs"]],
            "text": result["text"],
            "streamed": _stream(url, {key: value for key, value in body.items() if key != "return_logprob"}),
        }
    for name, body in chat_bodies.items():
        result = _post(url, "/v1/chat/completions", {"model": "default", "temperature": 0, **body})
        content = result["choices"][0]["message"].get("content") or ""
        found[name] = {"prompt_tokens": result["usage"]["prompt_tokens"], "content": content}
        if "response_format" in body:
            found[name]["conforms"] = _conforms(content)
    return found


def first_token_seconds(url: str, prompts: list[str]) -> list[float]:
    """Seconds from request to answer for each prompt with one new token: the time to first
    token a user sees. The server's prefix cache is flushed first (a server shared by several
    gates has seen these prompts) and the prompts are distinct, so none is served from it."""
    with urllib.request.urlopen(url + "/flush_cache", timeout=60):
        pass
    seconds = []
    for text in prompts:
        started = time.perf_counter()
        _post(url, "/generate", {"text": text, "sampling_params": {"temperature": 0, "max_new_tokens": 1}})
        seconds.append(time.perf_counter() - started)
    return seconds


def _conforms(content: str) -> str | None:
    """None when `content` is JSON that validates against SCHEMA, else why not."""
    try:
        import jsonschema

        jsonschema.validate(json.loads(content), SCHEMA)
    except Exception as error:  # noqa: BLE001 - any failure is the finding
        return f"{type(error).__name__}: {str(error)[:200]}"
    return None


def differences(reference: dict[str, Any], candidate: dict[str, Any]) -> list[str]:
    """What differs between the two servers' answers, one line each."""
    found = []
    for name, expected in reference.items():
        actual = candidate.get(name)
        for key, value in expected.items():
            if key == "conforms":
                continue
            if actual is None or actual.get(key) != value:
                shown = "" if actual is None else f": {str(value)[:80]!r} vs {str(actual.get(key))[:80]!r}"
                found.append(f"{name}: {key} differs{shown}")
    return found


@dataclasses.dataclass
class Server:
    """A server under test: started here from `arguments`, or already running at `url`."""

    name: str
    url: str
    arguments: list[str] | None = None
    log_path: Path | None = None
    process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float) -> str | None:
        """Start it and wait for /health; None when it serves, else why not (its log's end)."""
        if self.arguments is None:
            return None
        assert self.log_path is not None  # given with the arguments
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(self.log_path, "w")  # noqa: SIM115 - held for the server's life
        self.process = subprocess.Popen(
            [sys.executable, "-m", "sglang.launch_server", *self.arguments],
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return f"exited with {self.process.returncode}: {self._log_tail()}"
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=5) as response:
                    if response.status == 200:
                        return None
            except OSError:
                pass
            time.sleep(0.5)
        return f"no /health after {timeout:.0f} s: {self._log_tail()}"

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)

    def startup_lines(self) -> list[str]:
        """tokbackend's start-up lines in the log of a server started here ([] for one given by URL)."""
        if self.arguments is None or self.log_path is None:
            return []
        return STARTUP_LINE.findall(self.log_path.read_text(errors="replace"))

    def _log_tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-1500:] if self.arguments is not None and self.log_path else ""


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
        failure = server.start(timeout)
        to_health[server.name] = round(time.perf_counter() - started, 1)
        if failure is not None:
            announce(f"{server.name} cannot serve: {failure}")
            server.stop()
            return EXIT_UNAVAILABLE, {"failed": server.name, "why": failure, "prompts_answered": answered}
        try:
            results[server.name] = answers(server.url, prompts, chat_bodies)
            answered[server.name] = len(prompts)
            timings[server.name] = first_token_seconds(server.url, list(timed_prompts))
        except OSError as error:
            return EXIT_UNAVAILABLE, {"failed": server.name, "why": f"a request failed: {error}", "prompts_answered": answered}
        finally:
            server.stop()
        announce(f"   answered {len(prompts)} prompts and {len(chat_bodies)} chats in {time.perf_counter() - started:.0f} s")
    report: dict[str, Any] = {
        "differences": differences(results[reference.name], results[candidate.name]),
        "nonconforming": {
            server: answer["conforms"]
            for server, answered in results.items()
            for answer in answered.values()
            if answer.get("conforms")
        },
        "startup_lines": {server.name: server.startup_lines() for server in (reference, candidate)},
        "prompt_tokens": {name: answer["prompt_tokens"] for name, answer in results[reference.name].items()},
        "first_token_seconds": timings,
        "seconds_to_health": to_health if reference.arguments is not None else {},
        "prompts_answered": answered,
    }
    for line in report["differences"]:
        announce(f"DIFFERS {line}")
    if candidate.arguments is not None and len(report["startup_lines"][candidate.name]) < 2:
        report["differences"].append(
            f"{candidate.name}: tokbackend's start-up line in {len(report['startup_lines'][candidate.name])} processes "
            "(expected the tokenizer manager's and the scheduler's at least)"
        )
    if report["differences"]:
        return EXIT_MISMATCH, report
    if report["nonconforming"]:
        return EXIT_GRAMMAR, report
    return EXIT_OK, report
