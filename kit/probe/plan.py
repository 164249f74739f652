"""Python twin of the probe's plan (kit/probe/plan.c): same seed, same samples, same hash.

The probe derives its whole measurement order from the seed on both ranks. Reproducing it
here lets ingest or a test confirm that a CSV is the plan it claims to be (``plan_hash`` in the
meta JSON) and regenerate the size sequence of a run. The algorithm is documented in
kit/probe/README.md ("Plan algorithm"); any change must be made in both places.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kit.core.errors import UserError

OPS = ("pingpong", "send", "recv", "isend", "irecv", "stream")
MASK64 = (1 << 64) - 1
WARMUP_STREAM = 0x7761726D75702121  # "warmup!!"
REPEAT_STREAM = 0x7265706561742121  # "repeat!!"
ORDERS = ("shuffled", "blocked")
FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
_SUFFIX = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


class SplitMix64:
    """splitmix64: the probe's portable generator (one 64-bit word of state)."""

    def __init__(self, seed: int) -> None:
        self.state = seed & MASK64

    def next(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)

    def uniform(self) -> float:
        """Uniform in [0, 1) from the top 53 bits, exactly as the C code computes it."""
        return (self.next() >> 11) * 2.0**-53


@dataclass(frozen=True)
class PlanEntry:
    op: str
    size: int
    warmup: bool


def parse_bytes(text: str) -> int:
    """Byte count with an optional K/M/G suffix (powers of 1024), as the probe parses it."""
    mult = _SUFFIX.get(text[-1:].upper(), 1) if text else 1
    digits = text[:-1] if mult != 1 else text
    if not digits.isdigit():
        raise UserError(f"'{text}' is not a byte count", where="--sizes",
                        hint="write sizes like 0, 512, 64K or 4M")
    return int(digits) * mult


def draw_loguniform(rng: SplitMix64, lo: int, hi: int) -> int:
    """One size, log-uniform in (size + 1) so that 0 is allowed; integer in [lo, hi]."""
    a, b = math.log(lo + 1.0), math.log(hi + 2.0)
    x = math.floor(math.exp(a + rng.uniform() * (b - a))) - 1.0
    size = lo if x <= lo else int(x)
    return min(size, hi)


def grid_sizes(lo: int, hi: int, factor: float) -> list[int]:
    """0 if lo is 0, then floor(max(lo,1) * factor**k + 0.5) up to hi, duplicates dropped."""
    sizes = [0] if lo == 0 else []
    base = 1.0 if lo == 0 else float(lo)
    k = 0
    while True:
        x = math.floor(base * math.pow(factor, k) + 0.5)
        if x > hi:
            return sizes
        if not sizes or sizes[-1] != int(x):
            sizes.append(int(x))
        k += 1


def build_plan(ops: list[str], sizes: str, samples: int, seed: int, warmup: int, *,
               order: str = "shuffled", repeat_fraction: float = 0.0,
               repeat_count: int = 1) -> list[PlanEntry]:
    """The probe's plan for these options: warm-up entries first, then the measured samples.

    ``order``, ``repeat_fraction`` and ``repeat_count`` are the probe's ``--order``,
    ``--repeat-fraction`` and ``--repeat-count`` (meta.json keys ``order``,
    ``repeat_fraction``, ``repeat_count``); their defaults give the plan of probes that
    predate them.
    """
    if order not in ORDERS:
        raise UserError(f"unknown order '{order}'", where="--order",
                        hint="use shuffled or blocked")
    kind, _, rest = sizes.partition(":")
    fields = rest.split(":")
    fixed: list[int] = []
    if kind == "loguniform" and len(fields) == 2:
        lo, hi = parse_bytes(fields[0]), parse_bytes(fields[1])
    elif kind == "grid" and len(fields) == 3:
        lo, hi = parse_bytes(fields[0]), parse_bytes(fields[1])
        fixed = grid_sizes(lo, hi, float(fields[2]))
    elif kind == "list" and len(fields) == 1:
        fixed = [parse_bytes(x) for x in fields[0].split(",")]
        lo, hi = min(fixed), max(fixed)
    else:
        raise UserError(f"unknown size specification '{sizes}'", where="--sizes",
                        hint="use loguniform:MIN:MAX, grid:MIN:MAX:FACTOR or list:A,B,C")
    main, warm = SplitMix64(seed), SplitMix64(seed ^ WARMUP_STREAM)
    logu = kind == "loguniform"

    plan = [PlanEntry(ops[j % len(ops)],
                      draw_loguniform(warm, lo, hi) if logu else fixed[j % len(fixed)], True)
            for j in range(warmup)]
    measured: list[PlanEntry] = []
    for op in ops:
        for _ in range(samples):
            if logu:
                measured.append(PlanEntry(op, draw_loguniform(main, lo, hi), False))
            else:
                measured.extend(PlanEntry(op, s, False) for s in fixed)
    # Repeats: partial Fisher-Yates over entry indices on their own stream, copies appended.
    k = len(measured)
    chosen = math.floor(repeat_fraction * k + 0.5)
    if chosen:
        rep = SplitMix64(seed ^ REPEAT_STREAM)
        idx = list(range(k))
        for i in range(chosen):
            j = i + rep.next() % (k - i)
            idx[i], idx[j] = idx[j], idx[i]
        measured += [measured[idx[i]] for _ in range(repeat_count) for i in range(chosen)]
    if order == "shuffled":
        for i in range(len(measured), 1, -1):  # Fisher-Yates, same draws as the C loop
            j = main.next() % i
            measured[i - 1], measured[j] = measured[j], measured[i - 1]
    else:  # blocked: per op in the order given, sizes ascending
        measured.sort(key=lambda e: (ops.index(e.op), e.size))
    return plan + measured


def plan_hash(plan: list[PlanEntry]) -> str:
    """FNV-1a 64 over (op code byte, size as 8 little-endian bytes, warmup byte) per entry."""
    h = FNV_OFFSET
    for e in plan:
        data = bytes([OPS.index(e.op)]) + e.size.to_bytes(8, "little") + bytes([int(e.warmup)])
        for byte in data:
            h = ((h ^ byte) * FNV_PRIME) & MASK64
    return f"{h:016x}"
