"""Encode benchmarks on the built-in Qwen3.6 model: HF, raw gigatoken, tokbackend and peers.

Run: `pytest bench/ --benchmark-only --benchmark-json=bench/results.json`, then
`python bench/report.py bench/results.json` for the ratio table and chart. Every measured round
encodes text generated for that round (the backends cache what they have seen); the "warm"
group repeats one prompt on purpose and says so. Every row names the backend that served it and
whether tokbackend's build was final (`bench/served.py`): the steady-state rows wait for the
final build; the first burst on a fresh replica does not, and says what it met.
"""

from __future__ import annotations

import pytest

from bench import served, workloads

SIZES = (8_000, 32_000, 64_000)
KINDS = ("code", "prose", "mixed")
SINGLE = workloads.single_prompt_encoders()
BURST = workloads.burst_encoders()


def _rounds(name: str, tokens: int) -> int:
    slow = name.startswith("HF")
    return max(2, (3 if slow else 15) * 32_000 // tokens)


def _timed(benchmark, serving, *args, **kwargs):
    """`benchmark.pedantic(*args, **kwargs)`, with what served every round in the row."""
    result, row = served.during(serving, lambda: benchmark.pedantic(*args, **kwargs))
    benchmark.extra_info.update(row)
    return result


@pytest.mark.parametrize("competitor", sorted(SINGLE))
@pytest.mark.parametrize("tokens", SIZES)
@pytest.mark.parametrize("kind", KINDS)
def test_single_prompt(benchmark, competitor, tokens, kind):
    benchmark.group = f"single {kind} {tokens // 1000}k"
    benchmark.extra_info.update(competitor=competitor, workload=benchmark.group)
    encode, serving = SINGLE[competitor]
    ids = _timed(
        benchmark,
        serving,
        encode,
        setup=lambda: ((workloads.unseen_prompt(tokens, kind),), {}),
        rounds=_rounds(competitor, tokens),
        iterations=1,
    )
    assert type(ids) is list


@pytest.mark.parametrize("competitor", sorted(BURST))
def test_burst_of_40_prompts(benchmark, competitor):
    benchmark.group = "burst 40 x 32k mixed"
    benchmark.extra_info.update(competitor=competitor, workload=benchmark.group)
    encode, serving = BURST[competitor]

    def burst():
        return ([workloads.unseen_prompt(32_000) for _ in range(40)],), {}

    result = _timed(
        benchmark, serving, encode, setup=burst, rounds=2 if competitor.startswith("HF") else 5, iterations=1
    )
    assert len(result) == 40


def test_first_burst_on_a_fresh_replica(benchmark):
    """The burst that hits a freshly started replica: accelerate() then at once 40 prompts. The
    prompts are made first (40 unseen prompts take seconds: the final build would be in by
    then); each round's row is what served its burst, read right before it (a call is served by
    one build)."""
    import tokbackend

    benchmark.group = "burst 40 x 32k mixed"
    benchmark.extra_info.update(competitor="tokbackend first burst after accelerate()", workload=benchmark.group)
    rounds, replicas = [], []

    def fresh_replica():
        if replicas:  # the last round's replica finishes its build on a thread: not while this one is timed
            served.steady(replicas.pop())
        texts = [workloads.unseen_prompt(32_000) for _ in range(40)]
        tokenizer = tokbackend.accelerate(workloads.hf_tokenizer())
        rounds.append(served.row_of(tokenizer))
        replicas.append(tokenizer)
        return (tokenizer, texts), {}

    benchmark.pedantic(
        lambda tokenizer, texts: tokenizer(texts)["input_ids"], setup=fresh_replica, rounds=3, iterations=1
    )
    benchmark.extra_info.update(served.spanning(rounds))


@pytest.mark.parametrize("competitor", ["HF", "tokbackend accelerated"])
def test_chat_template_encode(benchmark, competitor):
    benchmark.group = "chat template 32k"
    benchmark.extra_info.update(competitor=competitor, workload=benchmark.group)
    tokenizer = workloads.hf_tokenizer() if competitor == "HF" else workloads.accelerated()

    def conversation():
        messages = [
            {"role": "system", "content": workloads.unseen_prompt(8_000, "prose")},
            {"role": "user", "content": workloads.unseen_prompt(24_000, "code")},
        ]
        return (messages,), {}

    _timed(
        benchmark,
        tokenizer,
        lambda messages: tokenizer.apply_chat_template(
            messages, tokenize=True, add_generation_prompt=True, return_dict=False
        ),
        setup=conversation,
        rounds=3 if competitor == "HF" else 15,
        iterations=1,
    )


@pytest.mark.parametrize("competitor", ["HF encode", "tokbackend accelerated encode"])
def test_warm_repeated_prompt(benchmark, competitor):
    """Labelled warm: the same 32k prompt every round, so the backend's caches are hot."""
    benchmark.group = "single mixed 32k WARM (repeated prompt)"
    benchmark.extra_info.update(competitor=competitor, workload=benchmark.group)
    prompt = workloads.unseen_prompt(32_000)
    encode, serving = SINGLE[competitor]
    _timed(benchmark, serving, encode, args=(prompt,), rounds=3 if competitor.startswith("HF") else 20, iterations=1)
