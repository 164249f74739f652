"""``pt2pt datasets DIR``: the series of a dataset, one line each."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path

from kit.data import series_summary
from kit.data.series_keys import SERIES_KEYS, pairs_count
from kit.figures import bandwidth, latency
from kit.figures.series import SeriesFigures


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "datasets",
        help="list the series of a dataset (counts, size range, latency, bandwidth)",
        description="One line per series (campaign, tool, transport, placement, host pair, "
        "concurrent pairs when some run had more than one, op, stat): samples "
        "outside warm-up, size range, latency (median time of messages <= 64 B) and "
        "effective bandwidth (median size / time over the top octave of sizes), each with "
        "the 95 %% interval of its median: the figures every surface of the kit shows.",
    )
    parser.add_argument("dataset", type=Path, metavar="DIR", help="dataset folder")
    parser.add_argument("--csv", action="store_true", help="print CSV instead of a table")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.csv:
        from kit.data.dataset import require_ingested, series_table

        print(series_table(require_ingested(args.dataset)).write_csv(), end="")
        return 0
    # The stored summary, when current, is read without Polars (its import alone is ~0.5 s);
    # otherwise kit.data.dataset computes it, and stores it for the next listing.
    summary = series_summary.read_current(args.dataset)
    if summary is None:
        from kit.data.dataset import listing, require_ingested

        # A folder without a runs table holds no ingested run: an empty listing would hide
        # a wrong path (e.g. the campaign folder instead of its dataset).
        summary = listing(require_ingested(args.dataset))
    _print(args.dataset, summary)
    return 0


def _print(dataset: Path, summary: series_summary.Summary) -> None:
    from rich.console import Console
    from rich.table import Table

    rows = [dict(zip(series_summary.COLUMNS, r, strict=True)) for r in summary.rows]
    out = Table(title=f"{dataset}: {len(rows)} series",
                caption=f"{latency.DEFINITION}; {bandwidth.DEFINITION}")
    # The pairs column only when a contention run is there (the CSV always has it).
    # ... and the program column only when an app run is there.
    keys = [k for k in SERIES_KEYS if (k != "pairs" or any(pairs_count(r["pairs"]) > 1
                                                            for r in rows))
            and (k != "program" or any(r["program"] for r in rows))]
    for key in keys:
        out.add_column(key)
    for name in ("samples", "size min", "size max", latency.LABEL, bandwidth.LABEL):
        out.add_column(name, justify="right", no_wrap=True)
    for row in rows:
        figures = SeriesFigures.of(row)
        out.add_row(*(str(row[k]) for k in keys), str(row["n_samples"]),
                    str(row["size_min"]), str(row["size_max"]),
                    figures.latency_text(), figures.bandwidth_text())
    console = Console(width=160)
    console.print(out)
    for line in placement_notes(summary.placement_sources):
        console.print(line, highlight=False)


def placement_notes(counts: Mapping[str, int]) -> list[str]:
    """Say where a run's placement is not confirmed by both the campaign and the hosts
    (``counts``: runs per ``placement_source``)."""
    notes = []
    if counts.get("hosts"):
        notes.append(f"placement: {counts['hosts']} run(s) from their hosts alone (no campaign "
                     "record; two ranks on one host count as intra-node)")
    if counts.get("campaign"):
        notes.append(f"placement: {counts['campaign']} run(s) as the campaign planned it (the "
                     "tool recorded no hosts to check it against)")
    if counts.get("hosts-override"):
        notes.append(f"placement: {counts['hosts-override']} run(s) where the hosts contradicted "
                     "the campaign's placement; the hosts were used")
    if counts.get("unknown"):
        notes.append(f"placement: {counts['unknown']} run(s) unknown (no hosts, no campaign "
                     "placement); ingest their files into a new dataset with --placement "
                     "to set it")
    return notes
