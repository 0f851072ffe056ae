#!/usr/bin/env python3
"""Curate a recorded per-op cost table: replace timings that contradict their own siblings.

    curate_cost_table.py INPUT [-o OUTPUT] [--ratio 1.25] [--slack-us 10]
                         [--batch-slack-us 0] [--date YYYY-MM-DD] [--json]

INPUT is an rlflow cost cache or cost table ({"devices": {fingerprint: {hex16 hash:
{"ms": float, "sig": "Op{params}(inputs) -> outputs"}}}}, as `rlflow` writes it to its
cost cache). Every entry's "sig" is parsed and compared with the entries that differ
from it in one respect only (its evidence). An entry fails a check when:

  batch     it is slower (by more than --batch-slack-us) than the otherwise identical
            signature at a larger batch (batch = first dimension of the first output;
            the same leading dimension of every non-constant input and output is the
            batch). The smaller-batch entry fails.
  bias      a Conv with a bias input (3 inputs) and no fused activation is slower
            than ratio x the same Conv without bias + slack. The biased entry fails.
  act       a Conv with a fused activation (act=relu, ...) is slower than ratio x the
            same Conv without the activation (same bias presence) + slack. The fused
            entry fails: the fused call ran an algorithm that was never timed.

A failing entry is kept, and its "ms" is replaced by an estimate from its evidence:

  bias      evidence ms + the median (with bias - without bias) delta
  act       evidence ms + the median (fused - unfused) delta
  batch     the bias or act estimate when the entry fails that check too (never above
            the larger-batch time); otherwise the larger-batch entry's ms (a smaller
            batch is never slower).

The medians are taken over the consistent pairs of the table: the (bias, no bias) and
(act, no act) sibling pairs in which neither entry is replaced (0 when there is none). Dropping a failing entry
instead would be worse: rlflow prices a missing signature with the analytic device
profile, which is far below the recorded siblings (8-13 us for a pointwise Conv against
34-62 us recorded), so the search would favour exactly the dropped signatures.

Checks compare an entry's recorded ms with its evidence's current ms: when the evidence
was itself replaced, its corrected value is used, both for the check and the estimate.
Replacements are resolved in passes until the set of replaced entries is stable (an
entry once replaced stays replaced; every estimate is recomputed from the current
values, in dependency order, so the result does not depend on the file's order), and
the deltas are then recomputed without the newly replaced pairs until both are stable.
A final check of the corrected table against itself must find no contradiction.
Entries whose "sig" cannot be parsed are kept as they are.

The curated table keeps the input's top-level keys ("format", "version"), its
fingerprints and every entry and hash. A replaced entry keeps its "sig", gets the
estimate as "ms", the recorded value as "recorded_ms" and a "corrected":
"<check>: <reason>" note. A top-level "curation" object records the source, the
counts ("replaced", "replaced_per_check", "dropped": 0), the deltas used (us), the
check descriptions and the date. rlflow's readers (read_cost_table and the cost
cache, both through parse_table_entries) read only "devices" and, per entry, "ms" and
"sig", so the extra keys are harmless.

The report (stdout) prints one line per replaced entry: short signature, recorded us
-> corrected us, the check(s) it failed (the first is the one whose estimate was used)
and the evidence entry; --json prints the full report as JSON instead. Without -o
nothing is written (a dry run). Exit status: 0 on success, 1 when the replacements did
not converge or the corrected table still contradicts itself, 2 on unreadable input.

Example:
    scripts/gpu/curate_cost_table.py /work/shared/gpu/h100-cost-cache.json \\
        -o configs/devices/h100-cost-table.json
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import statistics
import sys
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

# "Op{k=v k=v}(in, in) -> out, out"; the parameter block is optional.
SIG_RE = re.compile(r"^(?P<op>\w+)(?:\{(?P<params>[^}]*)\})?\((?P<ins>.*)\) -> (?P<outs>.*)$")
# "float32[1,3,224,224]" or "float32[256] const"; a scalar is "float32[]".
TENSOR_RE = re.compile(r"^(?P<dtype>\w+)\[(?P<dims>[\d,]*)\](?P<const> const)?$")

BATCH = -1  # stands for the batch dimension in a batch-free key
CHECK_ORDER = ("batch", "bias", "act")
MAX_PASSES = 10  # replacement passes per delta estimate, and delta re-estimates
MS_DIGITS = 9  # corrected ms are rounded to 1e-9 ms (1 ps)


@dataclass(frozen=True)
class Tensor:
    dtype: str
    dims: Tuple[int, ...]
    const: bool


@dataclass
class Entry:
    key: str  # hex hash, as in the file
    ms: float  # as recorded
    sig: str
    op: str
    params: Tuple[Tuple[str, str], ...]  # in signature order
    ins: Tuple[Tensor, ...]
    outs: Tuple[Tensor, ...]

    def param(self, name: str, default: Optional[str] = None) -> Optional[str]:
        for k, v in self.params:
            if k == name:
                return v
        return default


@dataclass
class Failure:
    check: str
    evidence: str  # key of the evidence entry


@dataclass
class Replacement:
    entry: Entry
    ms: float  # the estimate
    check: str  # the check whose estimate was used
    failed: List[str]  # every check it failed, in CHECK_ORDER
    evidence: Entry
    evidence_ms: float  # the evidence's current (possibly corrected) ms
    evidence_corrected: bool
    note: str  # the "corrected" text


@dataclass
class DeviceResult:
    fingerprint: str
    entries_in: int
    unparsed: List[str] = field(default_factory=list)
    replacements: List[Replacement] = field(default_factory=list)
    deltas_ms: Dict[str, float] = field(default_factory=dict)
    delta_pairs: Dict[str, int] = field(default_factory=dict)
    passes: int = 0
    delta_rounds: int = 0
    converged: bool = True
    residual: List[str] = field(default_factory=list)  # contradictions left after correction

    def per_check(self) -> Dict[str, int]:
        return {c: sum(c in r.failed for r in self.replacements) for c in CHECK_ORDER}


def parse_tensors(text: str) -> Optional[Tuple[Tensor, ...]]:
    text = text.strip()
    if not text:
        return ()
    out = []
    for part in text.split(", "):
        m = TENSOR_RE.match(part.strip())
        if not m:
            return None
        dims = tuple(int(x) for x in m["dims"].split(",")) if m["dims"] else ()
        out.append(Tensor(m["dtype"], dims, bool(m["const"])))
    return tuple(out)


def parse_entry(key: str, value: dict) -> Optional[Entry]:
    """The entry, or None when its ms or signature is not in the expected form."""
    if not isinstance(value, dict):
        return None
    ms, sig = value.get("ms"), value.get("sig")
    if not isinstance(ms, (int, float)) or isinstance(ms, bool) or not isinstance(sig, str):
        return None
    m = SIG_RE.match(sig)
    if not m:
        return None
    params = []
    for kv in (m["params"] or "").split():
        k, sep, v = kv.partition("=")
        if not sep:
            return None
        params.append((k, v))
    ins, outs = parse_tensors(m["ins"]), parse_tensors(m["outs"])
    if ins is None or outs is None:
        return None
    return Entry(key, float(ms), sig, m["op"], tuple(params), ins, outs)


# --- batch-free keys ----------------------------------------------------------------

def batch_of(e: Entry) -> Optional[int]:
    """The batch: the first dimension of the first output, when the first non-constant
    input starts with it too; None when there is no such dimension."""
    if not e.outs or not e.outs[0].dims:
        return None
    n = e.outs[0].dims[0]
    first_in = next((t for t in e.ins if not t.const), None)
    if first_in is None or not first_in.dims or first_in.dims[0] != n:
        return None
    return n


def batch_free_key(e: Entry, n: int) -> tuple:
    """The signature with the leading dimension n of every non-constant tensor replaced
    by BATCH. Constants (weights) never carry the batch."""
    def strip(ts):
        return tuple(
            (t.dtype, (BATCH,) + t.dims[1:] if (not t.const and t.dims and t.dims[0] == n) else t.dims, t.const)
            for t in ts)
    return (e.op, e.params, strip(e.ins), strip(e.outs))


def full_key(e: Entry, drop_params=(), n_ins: Optional[int] = None) -> tuple:
    params = tuple((k, v) for k, v in e.params if k not in drop_params)
    ins = e.ins if n_ins is None else e.ins[:n_ins]
    return (e.op, params, ins, e.outs)


def us(ms: float) -> str:
    return f"{ms * 1e3:.2f} us"


def is_conv(e: Entry) -> bool:
    return e.op == "Conv" and len(e.ins) >= 2


def act_of(e: Entry) -> str:
    return e.param("act", "none") or "none"


def short_sig(e: Entry) -> str:
    """A compact signature for the report: 'Conv 1x1 1024->256 @14x14 +bias relu b1'."""
    n = batch_of(e)
    if is_conv(e) and len(e.ins[0].dims) == 4 and len(e.ins[1].dims) == 4:
        _, cin, h, w = e.ins[0].dims
        cout, _, kh, kw = e.ins[1].dims
        s = f"Conv {kh}x{kw} {cin}->{cout} @{h}x{w}"
        if e.param("strides", "1,1") != "1,1":
            s += f" s{e.param('strides').replace(',', 'x')}"
        if e.param("dilations", "1,1") != "1,1":
            s += f" d{e.param('dilations').replace(',', 'x')}"
        if e.param("group", "1") != "1":
            s += f" g{e.param('group')}"
        if len(e.ins) >= 3:
            s += " +bias"
        if act_of(e) != "none":
            s += f" {act_of(e)}"
    else:
        shapes = ", ".join("x".join(map(str, t.dims)) + ("c" if t.const else "") for t in e.ins)
        s = f"{e.op}({shapes})"
    return s + (f" b{n}" if n is not None else "")


# --- relations and checks -----------------------------------------------------------

class Relations:
    """Each entry's evidence candidates, from the signatures alone."""

    def __init__(self, entries: List[Entry]):
        self.by_key = {e.key: e for e in entries}
        self.larger: Dict[str, List[str]] = {}  # larger-batch siblings
        self.bias: Dict[str, str] = {}  # Conv+bias (no act) -> same Conv without bias
        self.act: Dict[str, str] = {}  # Conv+act -> same Conv without act, same bias
        groups: Dict[tuple, List[Tuple[int, Entry]]] = {}
        for e in entries:
            n = batch_of(e)
            if n is not None:
                groups.setdefault(batch_free_key(e, n), []).append((n, e))
        for members in groups.values():
            for n, e in members:
                big = sorted(o.key for m, o in members if m > n)
                if big:
                    self.larger[e.key] = big
        no_bias = {full_key(e): e for e in entries if is_conv(e) and len(e.ins) == 2 and act_of(e) == "none"}
        plain = {full_key(e): e for e in entries if is_conv(e) and act_of(e) == "none"}
        for e in entries:
            if not is_conv(e):
                continue
            if len(e.ins) == 3 and act_of(e) == "none":
                o = no_bias.get(full_key(e, n_ins=2))
                if o is not None:
                    self.bias[e.key] = o.key
            elif act_of(e) != "none":
                o = plain.get(full_key(e, drop_params=("act",)))
                if o is not None:
                    self.act[e.key] = o.key


def failures(e: Entry, ms: float, val: Dict[str, float], rel: Relations, args) -> List[Failure]:
    """The checks that an entry timed at ms fails against its evidence's current values,
    in CHECK_ORDER."""
    out = []
    slack_ms = args.slack_us / 1e3
    big = rel.larger.get(e.key)
    if big:
        o = min(big, key=lambda k: (val[k], k))
        if ms - val[o] > max(args.batch_slack_us / 1e3, 0.0):
            out.append(Failure("batch", o))
    for check, table in (("bias", rel.bias), ("act", rel.act)):
        o = table.get(e.key)
        if o is not None and ms > args.ratio * val[o] + slack_ms:
            out.append(Failure(check, o))
    return out


def pair_deltas(rel: Relations, replaced: set) -> Tuple[Dict[str, float], Dict[str, int]]:
    """Median (sibling - evidence) delta in ms over the bias and act pairs in which
    neither entry is replaced (the consistent pairs)."""
    deltas, counts = {}, {}
    for check, table in (("bias", rel.bias), ("act", rel.act)):
        ds = [rel.by_key[k].ms - rel.by_key[o].ms for k, o in sorted(table.items())
              if k not in replaced and o not in replaced]
        deltas[check] = statistics.median(ds) if ds else 0.0
        counts[check] = len(ds)
    return deltas, counts


def resolve(rel: Relations, deltas: Dict[str, float], args) -> Tuple[Dict[str, List[Failure]], Dict[str, float], int, bool]:
    """Replace failing entries until the replaced set is stable. Returns the failures of
    every replaced entry, the current values, the passes run and whether it converged."""
    recorded = {k: e.ms for k, e in rel.by_key.items()}
    failed: Dict[str, List[Failure]] = {}
    val = dict(recorded)
    for passes in range(1, MAX_PASSES + 1):
        changed = False
        for k in sorted(rel.by_key):
            fs = failures(rel.by_key[k], recorded[k], val, rel, args)
            known = {f.check for f in failed.get(k, [])}
            new = [f for f in fs if f.check not in known]
            if new:
                # Once replaced, always replaced; a check failed earlier stays on record.
                merged = {f.check: f for f in failed.get(k, [])}
                merged.update({f.check: f for f in fs})
                failed[k] = [merged[c] for c in CHECK_ORDER if c in merged]
                changed = True
        val = estimates(rel, failed, deltas)
        if not changed:
            return failed, val, passes, True
    return failed, val, MAX_PASSES, False


def pick(failed: List[Failure]) -> Failure:
    """The failure whose estimate is used: bias or act before batch."""
    for c in ("bias", "act", "batch"):
        for f in failed:
            if f.check == c:
                return f
    raise ValueError("no failure")


def estimates(rel: Relations, failed: Dict[str, List[Failure]], deltas: Dict[str, float]) -> Dict[str, float]:
    """Every entry's value: recorded, or for a replaced one the estimate from its
    evidence's value, computed in dependency order (evidence first)."""
    val: Dict[str, float] = {}
    active = set()

    def value(k: str) -> float:
        if k in val:
            return val[k]
        if k not in failed:
            val[k] = rel.by_key[k].ms
            return val[k]
        if k in active:
            raise ValueError(f"cyclic evidence at {k}")
        active.add(k)
        fs = failed[k]
        f = pick(fs)
        if f.check == "batch":
            v = min(value(o) for o in rel.larger[k])
        else:
            v = value(f.evidence) + deltas[f.check]
            if any(g.check == "batch" for g in fs):
                v = min(v, min(value(o) for o in rel.larger[k]))  # never above a larger batch
        active.discard(k)
        val[k] = round(v, MS_DIGITS)
        return val[k]

    for k in sorted(rel.by_key):
        value(k)
    return val


def check_descriptions(args, deltas_ms: Dict[str, float]) -> List[str]:
    r, s = f"{args.ratio:g}", f"{args.slack_us:g}"
    b = f" by more than {args.batch_slack_us:g} us" if args.batch_slack_us > 0 else ""
    db, da = deltas_ms.get("bias", 0.0) * 1e3, deltas_ms.get("act", 0.0) * 1e3
    return [
        f"batch: an entry slower{b} than the otherwise identical signature at a larger batch; "
        f"ms := its bias/act estimate when it fails that check too (capped at the larger-batch ms), "
        f"else the larger-batch entry's ms",
        f"bias: a Conv+bias (no act) slower than {r}x the same Conv without bias + {s} us; "
        f"ms := that Conv's ms + {db:.2f} us (median bias delta of the consistent pairs)",
        f"act: a Conv with a fused act slower than {r}x the same Conv without act (same bias) + {s} us; "
        f"ms := that Conv's ms + {da:.2f} us (median act delta of the consistent pairs)",
    ]


def note_for(e: Entry, fs: List[Failure], f: Failure, ev_ms: float, ev_corr: bool, est: float,
             deltas: Dict[str, float], rel: Relations, args) -> str:
    corr = " (corrected)" if ev_corr else ""
    if f.check == "batch":
        m = batch_of(rel.by_key[f.evidence])
        text = (f"batch: {us(e.ms)} at batch {batch_of(e)} > {us(ev_ms)}{corr} at batch {m}; "
                f"set to the batch-{m} time")
    else:
        what = "without bias" if f.check == "bias" else "without act"
        text = (f"{f.check}: {us(e.ms)} > {args.ratio:g}x {us(ev_ms)}{corr} {what} + {args.slack_us:g} us; "
                f"set to {us(ev_ms)} {deltas[f.check] * 1e3:+.2f} us median {f.check} delta")
        if est < round(ev_ms + deltas[f.check], MS_DIGITS):
            text += f", capped at the larger-batch {us(est)}"
    others = [g.check for g in fs if g.check != f.check]
    if others:
        text += "; also failed " + ", ".join(others)
    return text + f"; evidence {f.evidence}"


def curate_device(fingerprint: str, table: dict, args) -> DeviceResult:
    res = DeviceResult(fingerprint, len(table))
    entries = []
    for key, value in table.items():
        e = parse_entry(key, value)
        if e is None:
            res.unparsed.append(key)
        else:
            entries.append(e)
    rel = Relations(entries)

    # Deltas first from the pairs of entries that pass every check on the recorded values,
    # then again without the pairs that turned out to hold a replaced entry (an entry that
    # fails only against its evidence's corrected value), until the replaced set is stable.
    recorded = {e.key: e.ms for e in entries}
    replaced = {e.key for e in entries if failures(e, e.ms, recorded, rel, args)}
    for rounds in range(1, MAX_PASSES + 1):
        deltas, counts = pair_deltas(rel, replaced)
        failed, val, passes, ok = resolve(rel, deltas, args)
        res.converged = ok
        if set(failed) == replaced or not ok:
            break
        replaced = set(failed)
    else:
        res.converged = False
    res.deltas_ms, res.delta_pairs, res.passes, res.delta_rounds = deltas, counts, passes, rounds

    for k, fs in failed.items():
        e, f = rel.by_key[k], pick(fs)
        ev = rel.by_key[f.evidence]
        ev_ms = val[ev.key]
        res.replacements.append(Replacement(
            e, val[k], f.check, [g.check for g in fs], ev, ev_ms, ev.key in failed,
            note_for(e, fs, f, ev_ms, ev.key in failed, val[k], deltas, rel, args)))
    res.replacements.sort(key=lambda r: (CHECK_ORDER.index(r.check), r.entry.sig))

    # The corrected table must not contradict itself.
    for k in sorted(rel.by_key):
        for f in failures(rel.by_key[k], val[k], val, rel, args):
            res.residual.append(f"{short_sig(rel.by_key[k])} ({k}) still fails {f.check} against {f.evidence}")
    return res


# --- output -------------------------------------------------------------------------

def print_report(results: List[DeviceResult], out=sys.stdout) -> None:
    for r in results:
        pc = r.per_check()
        print(f"device {r.fingerprint}", file=out)
        print(f"  entries in: {r.entries_in}  unparsed (kept): {len(r.unparsed)}  "
              f"replaced: {len(r.replacements)}  dropped: 0  entries out: {r.entries_in}", file=out)
        print("  failed " + ", ".join(f"{c}: {pc[c]}" for c in CHECK_ORDER)
              + f"  (an entry failing several checks is replaced once)", file=out)
        print(f"  deltas: bias {r.deltas_ms['bias'] * 1e3:+.2f} us ({r.delta_pairs['bias']} consistent pairs), "
              f"act {r.deltas_ms['act'] * 1e3:+.2f} us ({r.delta_pairs['act']} consistent pairs); "
              f"{r.delta_rounds} delta round(s), {r.passes} pass(es) in the last"
              + ("" if r.converged else "  NOT CONVERGED"), file=out)
        w = max((len(short_sig(x.entry)) for x in r.replacements), default=0)
        for x in r.replacements:
            checks = "+".join([x.check] + [c for c in x.failed if c != x.check])
            star = "*" if x.evidence_corrected else " "
            print(f"    {short_sig(x.entry):<{w}}  {x.entry.ms * 1e3:7.2f} -> {x.ms * 1e3:7.2f} us  {checks:<10} "
                  f"evidence {x.evidence_ms * 1e3:7.2f}{star} {short_sig(x.evidence)} ({x.evidence.key})", file=out)
        if any(x.evidence_corrected for x in r.replacements):
            print("    * evidence was itself replaced; its corrected value is shown and used", file=out)
        for line in r.residual:
            print(f"  RESIDUAL {line}", file=out)


def report_json(results: List[DeviceResult]) -> dict:
    return {"devices": [{
        "fingerprint": r.fingerprint,
        "entries_in": r.entries_in,
        "unparsed": len(r.unparsed),
        "replaced": len(r.replacements),
        "dropped": 0,
        "entries_out": r.entries_in,
        "per_check": r.per_check(),
        "deltas_us": {c: round(v * 1e3, 3) for c, v in r.deltas_ms.items()},
        "delta_pairs": r.delta_pairs,
        "converged": r.converged,
        "residual": r.residual,
        "replacements": [{
            "key": x.entry.key, "sig": x.entry.sig, "recorded_ms": x.entry.ms, "ms": x.ms,
            "check": x.check, "failed": x.failed, "corrected": x.note,
            "evidence": {"key": x.evidence.key, "sig": x.evidence.sig, "recorded_ms": x.evidence.ms,
                         "ms": x.evidence_ms, "corrected": x.evidence_corrected}}
            for x in r.replacements],
    } for r in results]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 2)[2])
    ap.add_argument("input", help="cost cache or cost table (JSON)")
    ap.add_argument("-o", "--output", help="write the curated table here (omit for a dry run)")
    ap.add_argument("--ratio", type=float, default=1.25, help="bias/act checks: allowed ratio (default 1.25)")
    ap.add_argument("--slack-us", type=float, default=10.0, help="bias/act checks: allowed extra us (default 10)")
    ap.add_argument("--batch-slack-us", type=float, default=0.0,
                    help="batch check: replace only when slower by more than this many us (default 0)")
    ap.add_argument("--date", default=datetime.date.today().isoformat(), help="curation date (default today)")
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    args = ap.parse_args(argv)

    try:
        with open(args.input, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as exc:
        print(f"{args.input}: {exc}", file=sys.stderr)
        return 2
    if not isinstance(doc, dict) or not isinstance(doc.get("devices"), dict):
        print(f"{args.input}: not a cost table (no 'devices' object)", file=sys.stderr)
        return 2

    results = []
    devices = {}
    for fp, table in doc["devices"].items():
        if not isinstance(table, dict):
            devices[fp] = table
            continue
        r = curate_device(fp, table, args)
        results.append(r)
        new_table = dict(table)
        for x in r.replacements:
            entry = dict(table[x.entry.key])
            entry["recorded_ms"] = x.entry.ms
            entry["ms"] = x.ms
            entry["corrected"] = x.note
            new_table[x.entry.key] = entry
        devices[fp] = new_table

    if args.json:
        json.dump(report_json(results), sys.stdout, indent=1)
        print()
    else:
        print_report(results)

    bad = [r.fingerprint for r in results if not r.converged or r.residual]
    if bad:
        print(f"not converged or still contradictory: {', '.join(bad)}; nothing written", file=sys.stderr)
        return 1

    if args.output:
        out = dict(doc)
        out["devices"] = devices
        per_check = {c: sum(r.per_check()[c] for r in results) for c in CHECK_ORDER}
        deltas = results[0].deltas_ms if len(results) == 1 else {}
        out["curation"] = {
            "source": os.path.basename(args.input),
            "method": "replace: an entry that contradicts its sibling keeps its hash and signature; "
                      "its ms is estimated from the sibling, the recorded ms is kept as recorded_ms",
            "replaced": sum(len(r.replacements) for r in results),
            "replaced_per_check": per_check,
            "dropped": 0,
            "deltas_us": ({c: round(v * 1e3, 3) for c, v in deltas.items()} if len(results) == 1 else
                          {r.fingerprint: {c: round(v * 1e3, 3) for c, v in r.deltas_ms.items()} for r in results}),
            "delta_pairs": (results[0].delta_pairs if len(results) == 1 else
                            {r.fingerprint: r.delta_pairs for r in results}),
            "checks": check_descriptions(args, deltas if len(results) == 1 else {}),
            "date": args.date,
        }
        tmp = args.output + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            # Sorted keys and one-space indent, as rlflow writes its cost cache.
            json.dump(out, f, indent=1, sort_keys=True, ensure_ascii=False)
            f.write("\n")
        os.replace(tmp, args.output)
        print(f"wrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
