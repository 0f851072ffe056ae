"""Running rlflow subcommands with --json from the benchmark scripts."""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path


# The model zoo that scripts/corpus/export_models writes, in the order the benchmark tables list it.
ZOO = ["squeezenet1_1", "resnet18", "resnet50", "inception_v3", "mobilenet_v3_small", "vit_b_16", "bert_base", "transformer_encoder", "gpt_block",
       "resnet18_fp16", "transformer_encoder_fp16"]


def rlflow(binary: str, args: list[str], timeout: float | None) -> dict:
    """Runs `rlflow ARGS --json`. Returns {ok, doc, wall_s} or {ok: False, error, wall_s}; never raises."""
    cmd = [binary, *args, "--json"]
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"timed out after {timeout:g} s", "wall_s": time.monotonic() - t0}
    except OSError as e:
        return {"ok": False, "error": f"cannot run {binary}: {e.strerror or e}", "wall_s": time.monotonic() - t0}
    wall = time.monotonic() - t0
    try:
        doc = json.loads(p.stdout)
    except json.JSONDecodeError:
        doc = None
    if p.returncode == 0 and isinstance(doc, dict) and doc.get("ok", True):
        return {"ok": True, "doc": doc, "wall_s": wall}
    if isinstance(doc, dict) and doc.get("error"):
        why = str(doc["error"])
    else:
        lines = [line for line in p.stderr.strip().splitlines() if line.strip()]
        why = lines[-1] if lines else "no output"
        if why.startswith("rlflow: error: "):
            why = why[len("rlflow: error: "):]
    code = p.returncode
    if code < 0:
        why = f"killed by signal {-code}: {why}"
    return {"ok": False, "error": f"{why} (exit {code})", "wall_s": wall}


def fresh(*paths: Path) -> None:
    """Removes old outputs before a run: train-agent appends to an existing log, train-world-model reuses its
    rollout data."""
    for p in paths:
        if p.exists():
            p.unlink()


def split_passthrough(argv: list[str]) -> tuple[list[str], list[str]]:
    """(the script's own arguments, the ones after `--` that go to rlflow)."""
    if "--" not in argv:
        return argv, []
    i = argv.index("--")
    return argv[:i], argv[i + 1:]
