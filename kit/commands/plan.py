"""``pt2pt plan CAMPAIGN -o DIR``: render every job of a campaign and its manifest."""

from __future__ import annotations

import argparse
from pathlib import Path

from kit.measure.campaign.manifest import read_manifest
from kit.measure.campaign.plan import plan_campaign


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "plan", help="render a campaign's Slurm jobs and manifest into a directory",
        description="Validate CAMPAIGN (YAML; errors name the line), then write one sbatch "
        "script per configuration (tool, transport, placement, repetition) and manifest.json "
        "into DIR. The job order is shuffled from the campaign seed; the same inputs give "
        "byte-identical files. Site defaults come from /etc/pt2pt/site.yaml "
        "(or $PT2PT_SITE_CONFIG). A campaign with 'design: adaptive' is planned round by "
        "round as it runs: DIR then records the campaign, for 'pt2pt submit DIR' (Slurm) or "
        "'pt2pt run-local DIR'.")
    parser.add_argument("campaign", type=Path, metavar="CAMPAIGN", help="campaign YAML file")
    parser.add_argument("-o", "--output", type=Path, required=True, metavar="DIR",
                        help="campaign directory to create (or re-plan if nothing ran yet)")
    parser.add_argument("--force", action="store_true",
                        help="plan over a directory that already holds results (they stay)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kit.measure.campaign.schema import load_campaign

    if args.campaign.is_file() and load_campaign(args.campaign).adaptive is not None:
        return _adaptive(args)
    path = plan_campaign(args.campaign, args.output, force=args.force)
    manifest = read_manifest(path.parent)
    jobs = manifest["jobs"]
    arrays = manifest.get("arrays", {})
    print(f"planned {len(jobs)} job(s) of campaign {manifest['campaign']['name']} "
          f"in {path.parent}: {len(arrays)} Slurm job array(s), one per tool, transport "
          "and placement")
    if manifest["campaign"].get("pairs"):
        pairs = manifest["campaign"]["pairs"]
        print(f"  node pairs ({len(pairs)}): " + ", ".join("-".join(p) for p in pairs[:8])
              + (", ..." if len(pairs) > 8 else ""))
        print("  order: round by round (every pair's visit r before any pair's r + 1), "
              "each round disjoint pairs in a random order")
    budget = manifest["campaign"].get("budget")
    if budget:
        from kit.measure.campaign.pairplan import BudgetPlan

        plan = BudgetPlan(budget["samples_per_size"], budget["sizes"], budget["job_s"],
                          budget["estimate_s"], budget["budget_s"], budget["concurrent"],
                          budget["jobs"])
        print(f"  {plan.describe()}")
    for item in manifest["not_planned"]:
        print(f"  not planned: {item['tool']} {item['what']} (line {item['line']}): "
              f"{item['reason']}")
    print(f"next: pt2pt submit {path.parent}   or   pt2pt run-local {path.parent}")
    return 0


def _adaptive(args: argparse.Namespace) -> int:
    from kit.fit.adaptive_campaign import prepare

    state = prepare(args.campaign, args.output)
    out = args.output.resolve()
    settings = state["settings"]
    print(f"adaptive campaign {args.campaign} in {out}: rounds of about "
          f"{settings['round_samples']} samples (at most {settings['budget']['rounds']} "
          f"rounds, {settings['budget']['samples']} samples), each planned into "
          f"{out}/round-KK when the previous one is fitted, collected into {state['dataset']}")
    print(f"next: pt2pt submit {out}   or   pt2pt run-local {out}")
    return 0
