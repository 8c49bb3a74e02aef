"""The lanes against the servers' built-in options, in one table: exactness and capability measured
here with the real libraries, chat through SGLang's own code, speed read from bench/servers.py's
JSON.

Lanes: stock HuggingFace; the servers' built-in option (SGLang's `--tokenizer-backend fastokens`
and vLLM's `VLLM_USE_FASTOKENS=1` both call `fastokens.patch_transformers()` before the tokenizer
loads); tokbackend's `gigatoken` and `tokbackend-auto` (`tokbackend.accelerate(hf, BACKEND)`).
Each lane runs in a process of its own, since the patch is process-global.

  exactness  the same calls in every lane, each answer compared with stock HF's (ids, offsets,
             exceptions by type): plain-text ids on a corpus (the boot probe's edge strings and
             prompt text of 300 to 125,000 characters: `encode`, `tok(text)`, one batch call,
             chat templates) on the built-in models; `return_offsets_mapping=True`; text pairs
             `tok(a, b)`; a lone surrogate; and every family of equivalence/families.py (small
             vocabularies): does it load, and does it give HF's ids on the corpus
  chat       SGLang's `OpenAIServingChat` + `TokenizerManager` on the CPU (bench/servers.py's
             driver), a chat request of 40,000 characters and one of 2,000, per SGLang mode
  speed      request_32k, burst_40, agent_chat and first_seconds from bench/servers.py's JSON, as
             ratios against stock in the same run

  python bench/options.py measure [--sglang-python .venv-sglang/bin/python] [--servers FILE ...]
  python bench/options.py table     # the markdown table of bench/options.json
  python bench/options.py readme    # the same table into README.md, between its markers
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "options.json"
# the runs of bench/servers.py the table's speed rows come from, in its order: each server's current run
SERVERS = [ROOT / "bench" / "servers-sglang.json", ROOT / "bench" / "servers-vllm.json"]
README = ROOT / "README.md"
MARKERS = ("<!-- options-table:start -->", "<!-- options-table:end -->")

# lane: what it is called in the table
LANES = {
    "hf": "stock HF",
    "option": "the servers' fastokens option",
    "gigatoken": "`gigatoken`",
    "tokbackend-auto": "`tokbackend-auto`",
}
BACKEND = {"gigatoken": "gigatoken", "tokbackend-auto": "auto"}  # tokbackend.accelerate's backend
SGLANG_MODES = {
    "hf": "huggingface",
    "option": "fastokens",
    "gigatoken": "gigatoken",
    "tokbackend-auto": "tokbackend-auto",
}
MODELS = ("qwen3.6", "qwen3")  # the built-in models
CAPABILITIES = {  # check: its row in the table
    "offsets": "`return_offsets_mapping=True`",
    "pairs": "text pairs, `tok(a, b)`",
    "surrogate": 'a lone surrogate, `tok("\\ud800")` and `encode("a\\ud800b")`',
}
CHAT_CHARS = (40_000, 2_000)  # a chat of 32,768+ characters, and a short one
SPEED_WORKLOADS = ("request_32k", "burst_40", "agent_chat", "agent_text", "first_seconds")
LIBRARIES = ("transformers", "tokenizers", "fastokens", "gigatoken", "tokbackend")


# -- exactness: one lane, in a process of its own -------------------------------------------------


def corpus() -> list[str]:
    """The boot probe's edge strings and prompt text of each kind, 300 to 125,000 characters."""
    from tokbackend._probe import EDGE_STRINGS
    from tokbackend.equivalence.corpus import prompt_text

    prompts = [
        prompt_text(seed, chars, kind) for kind in ("code", "prose", "mixed") for seed, chars in ((1, 300), (2, 3_000))
    ]
    return [*EDGE_STRINGS, *prompts, prompt_text(3, 30_000, "mixed"), prompt_text(4, 125_000, "mixed")]


def plain(answer):
    """An answer as JSON holds it: BatchEncodings as dicts, tuples as lists."""
    if hasattr(answer, "keys"):
        answer = dict(answer)
    return json.loads(json.dumps(answer))


def attempt(calls: list) -> dict:
    """Each call's answer (None where it raised) and the outcome of each: "ok" or the exception's type."""
    answers, outcomes = [], []
    for call in calls:
        try:
            answers.append(plain(call()))
            outcomes.append("ok")
        except Exception as error:
            answers.append(None)
            outcomes.append(type(error).__name__)
    return {"outcomes": outcomes, "answers": answers}


def tokenizer_for(lane: str, source: str):
    """`source` (a built-in name or a directory) loaded as `lane` serves it."""
    import tokbackend
    from bench import served

    hf = tokbackend.load_hf(source)
    if lane not in BACKEND:
        return hf
    return served.steady(tokbackend.accelerate(hf, BACKEND[lane]))


def served_by(tokenizer) -> str:
    """What answers: tokbackend's serving backend, or the module of the Rust tokenizer HF calls
    (`fastokens` where the patch took)."""
    from bench import served

    if hasattr(tokenizer, "tokbackend"):
        return served.row_of(tokenizer)["backend"]
    return type(tokenizer._tokenizer).__module__.split(".")[0]


def ids_calls(tokenizer, texts: list[str], chat: bool) -> list:
    calls = [lambda text=text: tokenizer.encode(text) for text in texts]
    calls += [lambda text=text: tokenizer(text)["input_ids"] for text in texts]
    calls.append(lambda: tokenizer(texts)["input_ids"])
    if chat:
        calls += [
            lambda text=text: tokenizer.apply_chat_template(
                [{"role": "user", "content": text}], tokenize=True, return_dict=False
            )
            for text in texts[-4:]
        ]
    return calls


def model_checks(tokenizer, texts: list[str]) -> dict:
    """A built-in model's checks: ids in every call form, offsets, pairs, a lone surrogate."""
    pairs = [(texts[2], texts[3]), (texts[10], texts[11]), (texts[-4], texts[-3])]
    return {
        "served_by": served_by(tokenizer),
        "ids": attempt(ids_calls(tokenizer, texts, chat=True)),
        "offsets": attempt([lambda text=text: tokenizer(text, return_offsets_mapping=True) for text in texts[-6:-2]]),
        "pairs": attempt([lambda pair=pair: tokenizer(*pair) for pair in pairs]),
        "surrogate": attempt([lambda: tokenizer("\ud800"), lambda: tokenizer.encode("a\ud800b")]),
    }


def lane_checks(lane: str) -> dict:
    """Every check's answers in this process, for `lane`."""
    if lane == "option":
        import fastokens

        fastokens.patch_transformers()  # before any tokenizer loads, as the servers call it
    from tokbackend.equivalence.families import FAMILY_NAMES, family_dir

    texts = corpus()
    out: dict = {"models": {model: model_checks(tokenizer_for(lane, model), texts) for model in MODELS}, "families": {}}
    for family in FAMILY_NAMES:
        try:
            tokenizer = tokenizer_for(lane, str(family_dir(family, "small")))
        except Exception as error:
            out["families"][family] = {"load": type(error).__name__, "error": str(error)[:300]}
            continue
        out["families"][family] = {
            "load": "ok",
            "served_by": served_by(tokenizer),
            "ids": attempt(ids_calls(tokenizer, texts, False)),
        }
    return out


def differing(ours, theirs) -> int:
    """How many ids (or offsets) of two answers differ: position by position, plus the length difference."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        return sum(differing(ours.get(key), theirs.get(key)) for key in ours.keys() | theirs.keys())
    if isinstance(ours, list) and isinstance(theirs, list):
        return sum(differing(mine, hfs) for mine, hfs in zip(ours, theirs)) + abs(len(ours) - len(theirs))
    return int(ours != theirs)


def compared(attempted: dict, hf: dict) -> dict:
    """A check against stock HF's: each outcome, the ids differing where both answered, and whether
    every call went as HF's did."""
    outcomes = list(dict.fromkeys(attempted["outcomes"]))
    both = [
        (ours, theirs)
        for ours, theirs in zip(attempted["answers"], hf["answers"])
        if ours is not None and theirs is not None
    ]
    ids = sum(differing(ours, theirs) for ours, theirs in both)
    same = attempted["outcomes"] == hf["outcomes"] and ids == 0
    calls = len(attempted["outcomes"])
    return {
        "outcome": ", ".join(outcomes),
        "calls": calls,
        "compared": len(both),
        "differing_ids": ids,
        "same_as_hf": same,
    }


def exactness(python: str) -> dict:
    """Every lane's checks, each lane in a process of its own, compared with stock HF's."""
    measured = {}
    for lane in LANES:
        with tempfile.NamedTemporaryFile(suffix=".json") as output:
            subprocess.run([python, __file__, "lane", lane, output.name], check=True, timeout=3000)
            measured[lane] = json.loads(Path(output.name).read_text())
        print(f"exactness: {lane} measured", flush=True)
    hf = measured["hf"]
    out: dict = {}
    for lane, answers in measured.items():
        models = {
            model: {"served_by": checks["served_by"]}
            | {check: compared(checks[check], hf["models"][model][check]) for check in ("ids", *CAPABILITIES)}
            for model, checks in answers["models"].items()
        }
        families = {}
        for family, loaded in answers["families"].items():
            families[family] = {key: loaded[key] for key in ("load", "error", "served_by") if key in loaded}
            reference = hf["families"][family]
            if "ids" in loaded and "ids" in reference:
                families[family]["ids"] = compared(loaded["ids"], reference["ids"])
        out[lane] = {"models": models, "families": families}
    return out


# -- chat on SGLang, one mode in a process of its own ----------------------------------------------


def chat_messages(chars: int) -> list[dict]:
    from tokbackend.equivalence.corpus import prompt_text

    return [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": prompt_text(11, chars, "mixed")},
    ]


def chat_one(mode: str, directory: str) -> dict:
    """Each chat request through SGLang's own chat path with `--tokenizer-backend MODE`: the ids'
    digest, or the error a server answers with a 500."""
    import asyncio
    from importlib.metadata import version

    from bench import servers

    servers.sglang_plugins()
    manager = servers.sglang_manager(mode, directory)
    chat = servers.sglang_chat(manager, directory)

    async def requests() -> dict:
        answered = {}
        for chars in CHAT_CHARS:
            try:
                tokenized = await servers.sglang_chat_request(
                    chat, servers.sglang_chat_completion(chat_messages(chars))
                )
                answered[str(chars)] = {"outcome": "ok", "ids": servers.digest(tokenized.input_ids)}
            except Exception as error:
                answered[str(chars)] = {"outcome": type(error).__name__, "error": str(error)[:300]}
        return answered

    versions = {name: version(name) for name in ("sglang", *LIBRARIES[:-1])}
    return {"versions": versions, "served_by": served_by(manager.tokenizer), "requests": asyncio.run(requests())}


def chat(python: str) -> dict:
    """SGLang's chat path per mode, each in a process of its own; ids compared with stock SGLang's."""
    from bench import servers

    directory = servers.model_dir()
    modes = {}
    for lane, mode in SGLANG_MODES.items():
        with tempfile.NamedTemporaryFile(suffix=".json") as output:
            subprocess.run([python, __file__, "chat-one", mode, directory, output.name], check=True, timeout=1200)
            modes[lane] = json.loads(Path(output.name).read_text())
        print(f"chat: {mode} measured", flush=True)
    shutil.rmtree(directory, ignore_errors=True)
    stock = {chars: request.get("ids") for chars, request in modes["hf"]["requests"].items()}
    for measured in modes.values():
        for chars, request in measured["requests"].items():
            ids = request.pop("ids", None)
            if ids is not None and stock.get(chars) is not None:
                request["same_as_stock"] = ids == stock[chars]
    lanes = {lane: {"served_by": measured["served_by"], **measured["requests"]} for lane, measured in modes.items()}
    return {"versions": modes["hf"]["versions"], "model": servers.MODEL, "lanes": lanes}


# -- speed, from bench/servers.py's JSON -----------------------------------------------------------


def speed(paths: list[Path]) -> list[dict]:
    """Each lane's ms (or error) per workload, from each servers JSON, as that run measured them."""
    from bench import servers

    out = []
    for path in paths:
        result = json.loads(path.read_text())
        server = result["server"]
        mode_of = {"hf": servers.STOCK[server], "option": servers.OPTION[server], "gigatoken": "gigatoken"}
        mode_of["tokbackend-auto"] = "tokbackend-auto"
        workloads: dict = {}
        for workload in SPEED_WORKLOADS:
            row = {}
            for lane, mode in mode_of.items():
                measured = result["modes"].get(mode, {})
                cell = measured.get(workload, {"error": measured["error"]} if "error" in measured else None)
                if cell is not None:
                    row[lane] = {key: cell[key] for key in ("ms", "error", "ids_equal_hf") if key in cell}
            if any("ms" in cell for cell in row.values()):
                workloads[workload] = row
        source = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        out.append(
            {
                "server": server,
                "version": result["version"],
                "cpu_count": result["cpu_count"],
                "source": str(source),
                "workloads": workloads,
            }
        )
    return out


def measure(arguments) -> dict:
    from importlib.metadata import version

    return {
        "date": datetime.date.today().isoformat(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "versions": {name: version(name) for name in LIBRARIES},
        "exactness": exactness(sys.executable),
        "chat_sglang": chat(arguments.sglang_python),
        "speed": speed([Path(path).resolve() for path in arguments.servers]),
    }


# -- the table ------------------------------------------------------------------------------------

SPEED_ROWS = {
    "request_32k": "one ~32k-token request",
    "burst_40": "40 such requests at once",
    "agent_chat": "agent chat turns",
    "agent_text": "agent turns sent as rendered text",
    "first_seconds": "40 prompts at once on a fresh process",
}


def _speed_cell(lane: str, row: dict) -> str:
    """Stock's ms, or the lane's ratio to it (same run), or why the lane failed."""
    cell, stock = row.get(lane), row.get("hf", {}).get("ms")
    if cell is None:
        return "-"
    if "error" in cell:
        return f"fails: {cell['error'].split(':')[0]}"
    shown = f"{cell['ms']:,.1f} ms" if lane == "hf" or not stock else f"{stock / cell['ms']:.1f}x"
    return shown + ("" if cell.get("ids_equal_hf", True) else ", **ids differ**")


def _check_cell(lane: str, results: list[dict]) -> str:
    """One check over the built-in models: HF's outcome in its own column, elsewhere "same as HF"
    or what differs."""
    outcome = ", ".join(dict.fromkeys(result["outcome"] for result in results))
    if lane == "hf" or all(result["same_as_hf"] for result in results):
        return outcome if lane == "hf" else "same as HF"
    ids = sum(result["differing_ids"] for result in results)
    return f"**{outcome}**" + (f", {ids:,} ids differ" if ids else "")


def _ids_cell(lane: str, results: list[dict]) -> str:
    """Ids differing from HF's over every call both answered, and how many calls that was."""
    calls, compared = (sum(result[key] for result in results) for key in ("calls", "compared"))
    if lane == "hf":
        return f"{calls} calls"
    ids = sum(result["differing_ids"] for result in results)
    return (f"**{ids:,} differ**" if ids else "0") + f" ({compared} of {calls} calls answered)"


def _families_cell(lane: str, families: dict) -> str:
    """How many families load (the rest grouped by the exception) and, beside HF, their ids."""
    loaded = [family for family in families.values() if family["load"] == "ok"]
    failed: dict[str, list[str]] = {}
    for name, family in families.items():
        if family["load"] != "ok":
            failed.setdefault(family["load"], []).append(name)
    cell = f"{len(loaded)} of {len(families)} load"
    cell += "".join(f"; {', '.join(names)}: **{error}**" for error, names in failed.items())
    if lane == "hf":
        return cell
    ids = sum(family["ids"]["differing_ids"] for family in loaded if "ids" in family)
    cell += "; HF's ids on those loaded" if not ids else f"; **{ids:,} ids differ**"
    if lane in BACKEND:  # which of tokbackend's backends served the families
        served = collections.Counter(family["served_by"] for family in loaded)
        cell += " (" + ", ".join(f"{backend} {count}" for backend, count in served.most_common()) + ")"
    return cell


def _chat_cell(lane: str, request: dict) -> str:
    if request["outcome"] != "ok":
        return f"**{request['outcome']}** (a 500)"
    if lane == "hf":
        return "ok"
    return "same ids as stock" if request.get("same_as_stock") else "**ids differ from stock**"


def table(results: dict) -> str:
    """The markdown table of a bench/options.json: a row per check or workload, a column per lane."""
    lines = ["| | " + " | ".join(LANES.values()) + " |", "|---|" + "---|" * len(LANES)]

    def row(label: str, cells) -> None:
        lines.append(f"| {label} | " + " | ".join(cells) + " |")

    for run in results["speed"]:
        server = "SGLang" if run["server"] == "sglang" else "vLLM"
        for workload, measured in run["workloads"].items():
            row(
                f"{server} {run['version']}, {run['cpu_count']} cores: {SPEED_ROWS[workload]}",
                (_speed_cell(lane, measured) for lane in LANES),
            )
    exactness = results["exactness"]
    models = {lane: list(exactness[lane]["models"].values()) for lane in LANES}
    names = " and ".join(MODELS)
    row(
        f"what encodes ({names})",
        (", ".join(dict.fromkeys(model["served_by"] for model in models[lane])) for lane in LANES),
    )
    row(
        f"ids differing from HF's ({names}: the corpus, in every call form)",
        (_ids_cell(lane, [m["ids"] for m in models[lane]]) for lane in LANES),
    )
    for check, label in CAPABILITIES.items():
        row(label, (_check_cell(lane, [model[check] for model in models[lane]]) for lane in LANES))
    chat_run = results["chat_sglang"]
    for chars in (str(chars) for chars in CHAT_CHARS):
        label = f"chat on SGLang {chat_run['versions']['sglang']}, {int(chars):,} characters"
        row(label, (_chat_cell(lane, chat_run["lanes"][lane][chars]) for lane in LANES))
    families = next(iter(exactness.values()))["families"]
    row(
        f"the hold-out: the {len(families)} families of equivalence/families.py (small vocabularies)",
        (_families_cell(lane, exactness[lane]["families"]) for lane in LANES),
    )
    versions = ", ".join(f"{name} {number}" for name, number in results["versions"].items())
    sglang = ", ".join(f"{name} {number}" for name, number in chat_run["versions"].items())
    speed = ", ".join(f"`{run['source']}`" for run in results["speed"])
    lines += [
        "",
        f"Measured {results['date']} by `bench/options.py` ({versions}; the chat rows: {sglang}, model "
        f"{chat_run['model']}); "
        f"speed: ms for stock, x stock for the others, both from one run of `bench/servers.py` ({speed}).",
    ]
    return "\n".join(lines)


def readme(results: dict, path: Path = README) -> None:
    """Put `table(results)` into `path` between the two markers."""
    text = path.read_text(encoding="utf-8")
    start, end = (text.index(marker) for marker in MARKERS)
    path.write_text(text[: start + len(MARKERS[0])] + "\n" + table(results) + "\n" + text[end:], encoding="utf-8")


def readme_table(path: Path = README) -> str:
    """The table README.md holds between the markers."""
    text = path.read_text(encoding="utf-8")
    start, end = (text.index(marker) for marker in MARKERS)
    return text[start + len(MARKERS[0]) : end].strip("\n")


def main() -> None:
    sys.path.insert(
        0, str(ROOT)
    )  # bench and tokbackend import from the tree (its harness: CONTRIBUTING, "Running a checkout")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    measure_parser = sub.add_parser("measure")
    measure_parser.add_argument("--sglang-python", default=str(ROOT / ".venv-sglang" / "bin" / "python"))
    measure_parser.add_argument("--servers", nargs="+", default=[str(path) for path in SERVERS])
    measure_parser.add_argument("--json", default=str(RESULTS))
    for name in ("table", "readme"):
        sub.add_parser(name).add_argument("--json", default=str(RESULTS))
    lane_parser = sub.add_parser("lane")
    lane_parser.add_argument("lane", choices=list(LANES))
    lane_parser.add_argument("output")
    chat_parser = sub.add_parser("chat-one")
    for name in ("mode", "directory", "output"):
        chat_parser.add_argument(name)
    arguments = parser.parse_args()
    if arguments.command == "lane":
        Path(arguments.output).write_text(json.dumps(lane_checks(arguments.lane)))
    elif arguments.command == "chat-one":
        Path(arguments.output).write_text(json.dumps(chat_one(arguments.mode, arguments.directory)))
        sys.stdout.flush()
        os._exit(0)  # SGLang's manager tasks and ZMQ context: nothing to wait for
    elif arguments.command == "measure":
        results = measure(arguments)
        Path(arguments.json).write_text(json.dumps(results, indent=1) + "\n")
        print(table(results))
    elif arguments.command == "table":
        print(table(json.loads(Path(arguments.json).read_text())))
    else:
        readme(json.loads(Path(arguments.json).read_text()))


if __name__ == "__main__":
    main()
