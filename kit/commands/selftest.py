"""``pt2pt selftest``: measure a shaped two-node link and compare with its known bandwidth."""

from __future__ import annotations

import argparse
from pathlib import Path

from kit.core import argtypes
from kit.outputs.selftest import EXPECTED_BPS, SHAPE, TOLERANCE, run_selftest


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "selftest", help="ground-truth check on a shaped two-node local Slurm cluster (root)",
        description=f"Bring up two local Slurm nodes joined by veths shaped with tbf "
        f"{SHAPE[0]} burst {SHAPE[1]}, run the probe over TCP between them through plan, "
        f"submit and collect, fit the large-message bandwidth (sizes >= 4 MiB), print it "
        f"against the expected 0.956 x 125 MB/s = {EXPECTED_BPS / 1e6:.1f} MB/s, tear the "
        f"cluster down, and exit 1 when outside +-{TOLERANCE:.0%}. Needs root.")
    parser.add_argument("--samples", type=argtypes.repetitions, default=12,
                        help="repetitions of each size 4, 6, 8, 12, 16 MiB (default 12); the "
                        "fastest quarter of each size is fitted")
    parser.add_argument("--work-dir", type=Path, metavar="DIR",
                        help="keep the campaign and dataset here (default: a new temp dir)")
    parser.add_argument("--state-dir", type=Path, metavar="DIR",
                        help="state directory of the temporary cluster")
    parser.add_argument("--keep-cluster", action="store_true",
                        help="leave the cluster up afterwards (for debugging)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    result = run_selftest(samples=args.samples, work_dir=args.work_dir,
                          state_dir=args.state_dir, keep=args.keep_cluster)
    verdict = "PASS" if result.ok else "FAIL"
    print(f"measured {result.measured_bps / 1e6:.1f} MB/s, expected "
          f"{result.expected_bps / 1e6:.1f} MB/s (ratio {result.ratio:.3f}, band "
          f"+-{TOLERANCE:.0%}) from the fastest quarter of {result.n_samples} samples "
          f">= 4 MiB, {result.method}: {verdict}")
    print(f"outputs: {result.work_dir}")
    return 0 if result.ok else 1
