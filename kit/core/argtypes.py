"""argparse types that range-check option values, shared by every ``pt2pt`` command.

A count of 10^12 draws, a negative seed or a latency of 1e308 s used to reach numpy or the
exporter and end in a traceback (or worse, in a file holding ``inf``). Each option's value is
checked where it is parsed, against the range it can mean; argparse then reports a bad one
as ``argument -n: ...`` with the command's usage, exit 2, like any other option error.
Integers may be written as ``1e6`` or ``1_000_000`` when they are whole numbers.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

#: The largest seed every consumer takes: scikit-learn's ``random_state`` is a 32-bit
#: unsigned integer (numpy's SeedSequence would take more, and no negative one).
SEED_MAX = 2**32 - 1


def _number(text: str) -> float:
    try:
        value = float(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def integer(lo: int, hi: int, what: str = "") -> Callable[[str], int]:
    """A whole number in [lo, hi]."""
    def parse(text: str) -> int:
        try:
            value = int(text.replace("_", ""))
        except ValueError:
            number = _number(text)
            if not number.is_integer():
                raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
            value = int(number)
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(
                f"{text} is out of range: give {what or 'a whole number'} from {lo:,} to {hi:,}")
        return value

    parse.__name__ = "integer"  # argparse names the type in some messages
    return parse


def real(lo: float, hi: float, what: str = "", *, lo_open: bool = False,
         hi_open: bool = False) -> Callable[[str], float]:
    """A finite number in [lo, hi] (``lo_open``/``hi_open``: the bound itself excluded)."""
    def parse(text: str) -> float:
        value = _number(text)
        below = value <= lo if lo_open else value < lo
        above = value >= hi if hi_open else value > hi
        if below or above:
            left, right = "(" if lo_open else "[", ")" if hi_open else "]"
            raise argparse.ArgumentTypeError(
                f"{text} is out of range: give {what or 'a number'} in {left}{lo:g}, {hi:g}{right}")
        return value

    parse.__name__ = "number"
    return parse


def size_bytes(hi: int = 1 << 34) -> Callable[[str], int]:
    """A message size in bytes, ``64K`` / ``4M`` / ``1G`` (powers of 1024, as the probe
    reads them, :func:`kit.core.checks.parse_size`), from 0 to ``hi``."""

    def parse(text: str) -> int:
        from kit.core.checks import parse_size

        try:
            value = parse_size(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a size in bytes (e.g. 65536 or 64K)") from None
        if not 0 <= value <= hi:
            raise argparse.ArgumentTypeError(f"{text!r}: a size from 0 to {hi} bytes")
        return value

    parse.__name__ = "size"
    return parse


#: ``--seed``: any non-negative integer numpy accepts.
seed = integer(0, SEED_MAX, "a seed")
#: ``--jobs``: worker processes.
jobs = integer(1, 1024, "a number of processes")
#: bootstrap / Monte-Carlo resamples: enough for any interval, small enough to finish.
resamples = integer(20, 20_000, "a number of resamples")
#: ``-n`` of ``pt2pt sample``: draws per size (the CSV gets sizes x n rows).
draws = integer(1, 10_000_000, "a number of draws per size")
#: ``--max-regimes``: the model file holds at most 64 (kit.model.schema.MAX_REGIMES).
regimes = integer(1, 64, "a number of regimes")
#: ``--min-support``: samples per regime.
support = integer(1, 10**9, "a number of samples")
#: ``--max-samples``: rows fitted before subsampling (0: all of them).
sample_cap = integer(0, 10**12, "a number of samples")
#: a share of the samples (test fraction): strictly between 0 and 1.
fraction = real(0.0, 1.0, "a fraction", lo_open=True, hi_open=True)
#: a probability (significance level).
probability = real(0.0, 1.0, "a probability", lo_open=True, hi_open=True)
#: a percentage (thresholds, effect sizes): 0 to 1000 %.
percent = real(0.0, 1000.0, "a percentage")
#: a wait in minutes (``--wait-idle``): up to a day.
wait_minutes = real(0.0, 1_440.0, "a number of minutes")
#: size bins per decade of message sizes.
bins_per_decade = integer(1, 1000, "a number of bins per decade")
#: repetitions of a simulated program.
repetitions = integer(1, 100_000, "a number of repetitions")
