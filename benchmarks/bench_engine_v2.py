"""Engine v2 evaluation harness (issue 15): the model against the lookup-table floor.

On each shared platform-calibration run (``../shared/reference-data/platform-calibration``),
the ping-pongs of every size are split 70/30 at random (seed 0, per size). The *floor* is a
lookup table of the training samples: per size, their median (for the median error) and their
empirical distribution (for W1). Reported per run:

- ``med/floor``: median over sizes of |model median / held-out median − 1|, over the same for
  the training median (the lookup table);
- ``W1/floor``: mean over sizes of the Wasserstein-1 distance between the model's predictive
  distribution and the held-out samples, each divided by the held-out median, over the same
  for the training samples' empirical distribution;
- ``cov``: share of held-out samples inside the model's [p05, p95]; ``width``: median over
  sizes of the model's p95/p05 over the data's (held-out p95/p05); ``wide``: share of sizes
  where the model's band is more than 10 % wider than the data's;
- ``unseen``: hold out 30 % of the *sizes* (seed 0), fit on the others, median relative error
  of the model median vs the held-out sizes' median and mean relative W1 there;
- regimes, whether the cap (``max_regimes``) decided the count (``cap_reached_``: the
  selection wanted more), breakpoints, CPU seconds of the full fit (``time.process_time``)
  and load average.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_engine_v2.py [--runs graphene,taurus]
        [--json out.json] [--decades] [--tails] [--breaks] [--synthetic REPS:SEEDS,..]
        [--split-seeds K]

``CRPS/floor``: the same held-out samples scored by the CRPS (the pinball loss averaged over
the levels U, twice; relative to the held-out median) of the model's and of the floor's
distribution. Why beside W1: the CRPS is a proper score (the true distribution has the least
expected CRPS whatever the held-out count); W1 against a few held-out samples' quantiles is
not: it rewards a tail as short as theirs, which the floor shares. ``W1 matched/floor``: the
model's W1 made as the floor's is, from MATCHED_DRAWS draws of as many samples per size as
the floor has (each draw's quantiles against the held-out ones, averaged), over the floor's:
the true distribution scores 1 on it whatever the counts. ``--synthetic REPS:SEEDS`` scores a
truth with per-size location, spread and upper tail (SYNTH_SIZES sizes, REPS samples each)
where the true distribution's own figures are known (the truth's W1/floor and CRPS/floor):
what a perfect model would score on each yardstick. ``--split-seeds K``: every cell over K
70/30 splits (median and range), how much of it is the split's luck.

``--breaks`` prints the held-out coverage of [p05, p95] at the sizes next to each fitted
break (BREAK_SIZES on either side) against the run's other sizes.

``--tails`` splits each decade's W1 (model and floor) into the levels below 1/32, between
and above 31/32, and prints the share of held-out samples below the model's and the
floor's p01 and above their p99 (nominal 1 %): where the model misses its floor, and
whether its tails are wrong or only longer than a small held-out sample's.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from kit.model import RegimeModel

REPO = Path(__file__).resolve().parent.parent
CAL = REPO.parent / "shared" / "reference-data" / "platform-calibration"
RUNS = {
    "graphene": "graphene_eth_example",
    "taurus": "taurus_26_07_2016_calibration",
    "stampede": "stampede_17_06_01-17_14_calibration",
    "sirocco": "sirocco_26_08_2016_calibration",
    "taurus-loopback": "taurus_26_07_2016_taurus-loopback",
    "stampede-shm": "stampede_17_06_01-17_26_calibration",
}
#: Quantile grid for W1 (midpoints: W1 = mean |F⁻¹(u) − G⁻¹(u)| over u).
U = (np.arange(100) + 0.5) / 100


def read_pingpong(folder: Path) -> tuple[np.ndarray, np.ndarray]:
    """(size, one-way time) of a calibration PingPong CSV (Send/Recv row pairs)."""
    path = next(folder.glob("*_PingPong.csv"))
    raw = np.loadtxt(path, delimiter=",", usecols=(1, 3))
    send, recv = raw[0::2], raw[1::2]
    return send[:, 0], (send[:, 1] + recv[:, 1]) / 2


def split_by_repetition(s: np.ndarray, seed: int = 0, frac: float = 0.3) -> np.ndarray:
    """Held-out mask: per size, round(frac · n) of its samples at random."""
    rng = np.random.default_rng(seed)
    test = np.zeros(len(s), dtype=bool)
    for size in np.unique(s):
        idx = np.flatnonzero(s == size)
        k = round(frac * len(idx))
        test[rng.permutation(idx)[:k]] = True
    return test


def groups(s: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    order = np.argsort(s, kind="stable")
    ss, ts = s[order], t[order]
    sizes, starts = np.unique(ss, return_index=True)
    return sizes, np.split(ts, starts[1:])


def w1_rel(qa: np.ndarray, qb: np.ndarray, med: float) -> float:
    return float(np.mean(np.abs(qa - qb)) / med)


#: Draws of the model's matched-count W1 (module docstring).
MATCHED_DRAWS = 8


def crps_rel(q: np.ndarray, h: np.ndarray, med: float) -> float:
    """Mean CRPS of the distribution with quantiles ``q`` at U over the samples ``h``
    (2·mean pinball loss over the levels), relative to ``med``."""
    d = h[:, None] - q[None, :]
    return float(2 * np.mean(d * (U[None, :] - (d < 0))) / med)


def score(model: Any, s_tr: np.ndarray, t_tr: np.ndarray, s_te: np.ndarray,
          t_te: np.ndarray, truth_q: dict[float, np.ndarray] | None = None) -> dict[str, Any]:
    sizes, held = groups(s_te, t_te)
    _, own_all = groups(s_tr, t_tr)
    own_map = dict(zip(np.unique(s_tr), own_all, strict=True))
    keep = [i for i, z in enumerate(sizes) if z in own_map and len(held[i]) >= 3]
    sizes = sizes[keep]
    held = [held[i] for i in keep]
    own = [own_map[z] for z in sizes]
    med_te = np.array([np.median(h) for h in held])
    med_tr = np.array([np.median(o) for o in own])
    pred = model.predict(sizes)
    qm = model.predict_quantiles(sizes, U)
    band = model.predict_quantiles(sizes, [0.05, 0.95])
    w1_m, w1_f, cov, width, data_w, data_pw = [], [], [], [], [], []
    crps = np.zeros((len(held), 2))
    n_own = np.array([len(o) for o in own])
    draws = model.sample(sizes, MATCHED_DRAWS * int(n_own.max()), random_state=0)
    w1_x = np.array([np.mean([w1_rel(np.quantile(draws[i, r * n_own[i]:(r + 1) * n_own[i]], U),
                                     np.quantile(h, U), med_te[i])
                              for r in range(MATCHED_DRAWS)]) for i, h in enumerate(held)])
    w1_t = np.full((len(held), 2), np.nan)  # the truth's W1 and CRPS (synthetic runs)
    q01 = model.predict_quantiles(sizes, [0.01, 0.99])
    parts = {"lo": U < 1 / 32, "body": (U >= 1 / 32) & (U <= 31 / 32), "hi": U > 31 / 32}
    part_m = np.zeros((len(held), 3))
    part_f = np.zeros((len(held), 3))
    beyond = np.zeros((len(held), 4))  # model below p01, above p99; floor the same
    for i, h in enumerate(held):
        qh = np.quantile(h, U)
        w1_m.append(w1_rel(qm[i], qh, med_te[i]))
        w1_f.append(w1_rel(np.quantile(own[i], U), qh, med_te[i]))
        qf = np.quantile(own[i], U)
        crps[i] = crps_rel(qm[i], h, med_te[i]), crps_rel(qf, h, med_te[i])
        if truth_q is not None:
            qt = truth_q[float(sizes[i])]
            w1_t[i] = w1_rel(qt, qh, med_te[i]), crps_rel(qt, h, med_te[i])
        for j, m in enumerate(parts.values()):
            part_m[i, j] = np.sum(np.abs(qm[i] - qh)[m]) / len(U) / med_te[i]
            part_f[i, j] = np.sum(np.abs(qf - qh)[m]) / len(U) / med_te[i]
        f01, f99 = np.quantile(own[i], [0.01, 0.99])
        beyond[i] = [np.sum(h < q01[i, 0]), np.sum(h > q01[i, 1]), np.sum(h < f01),
                     np.sum(h > f99)]
        cov.append(np.mean((h >= band[i, 0]) & (h <= band[i, 1])))
        width.append(band[i, 1] / band[i, 0])
        both = np.r_[h, own[i]]
        d05, d95 = np.quantile(both, [0.05, 0.95])
        data_w.append(d95 / d05)
        p05, p95 = np.quantile(both, [0.05, 0.95], method="weibull")
        data_pw.append(p95 / p05)
    err_m = np.abs(pred / med_te - 1)
    err_f = np.abs(med_tr / med_te - 1)
    n_h = np.array([len(h) for h in held])
    ratio_w = np.array(width) / np.array(data_w)
    return {
        "n_sizes": len(sizes),
        "med_err": float(np.median(err_m)), "med_floor": float(np.median(err_f)),
        "med_ratio": float(np.median(err_m) / max(np.median(err_f), 1e-12)),
        "w1": float(np.mean(w1_m)), "w1_floor": float(np.mean(w1_f)),
        "w1_ratio": float(np.mean(w1_m) / max(np.mean(w1_f), 1e-12)),
        "coverage": float(np.sum(np.array(cov) * n_h) / n_h.sum()),
        "width_ratio": float(np.median(ratio_w)),
        "wide_share": float(np.mean(ratio_w > 1.1)),
        "width_ratio_pred": float(np.median(np.array(width) / np.array(data_pw))),
        # the 100 B – 10 KiB decades, where Ethernet bands sit
        "med_ratio_mid": _ratio_mid(sizes, err_m, err_f),
        "crps_ratio": float(crps[:, 0].mean() / crps[:, 1].mean()),
        "decades": _decades(sizes, held, np.array(w1_m), np.array(w1_f), np.array(cov),
                            err_m, err_f, crps, w1_t if truth_q is not None else None, w1_x),
        "tails": _tails(sizes, n_h, part_m, part_f, beyond),
    }


def _tails(sizes: np.ndarray, n_h: np.ndarray, part_m: np.ndarray, part_f: np.ndarray,
           beyond: np.ndarray) -> list[dict[str, Any]]:
    """Per size decade: mean W1 parts (lo, body, hi) of the model and the floor, and the
    shares of held-out samples beyond the model's and the floor's p01 and p99."""
    dec = np.floor(np.log10(np.maximum(sizes, 1))).astype(int)
    out = []
    for d in np.unique(dec):
        m = dec == d
        out.append({"decade": int(d), "model": part_m[m].mean(axis=0).tolist(),
                    "floor": part_f[m].mean(axis=0).tolist(),
                    "beyond": (beyond[m].sum(axis=0) / n_h[m].sum()).tolist()})
    return out


def _decades(sizes: np.ndarray, held: list[np.ndarray], w1_m: np.ndarray, w1_f: np.ndarray,
             cov: np.ndarray, err_m: np.ndarray, err_f: np.ndarray, crps: np.ndarray,
             truth: np.ndarray | None, w1_x: np.ndarray) -> list[dict[str, Any]]:
    """Issue 60's figures per size decade (1-9 B, 10-99 B, ...): W1/floor (mean over the
    decade's sizes), coverage of [p05, p95] (pooled over its held-out samples, nominal 0.90),
    median error over the floor's, CRPS/floor and the matched-count W1/floor (means over
    the decade's sizes); decades with
    fewer than 30 held-out samples are marked. ``truth``: the true distribution's W1 and CRPS
    per size, over the floor's too."""
    n_h = np.array([len(h) for h in held])
    dec = np.floor(np.log10(np.maximum(sizes, 1))).astype(int)
    out = []
    for d in np.unique(dec):
        m = dec == d
        row: dict[str, Any] = {
               "decade": int(d), "n_sizes": int(m.sum()), "n_test": int(n_h[m].sum()),
               "w1_ratio": float(w1_m[m].mean() / max(w1_f[m].mean(), 1e-12)),
               "coverage": float(np.sum(cov[m] * n_h[m]) / n_h[m].sum()),
               "med_ratio": float(np.median(err_m[m]) / max(np.median(err_f[m]), 1e-12)),
               "crps_ratio": float(crps[m, 0].mean() / crps[m, 1].mean()),
               "w1_matched": float(w1_x[m].mean() / max(w1_f[m].mean(), 1e-12))}
        if truth is not None:
            row["truth"] = [float(truth[m, 0].mean() / w1_f[m].mean()),
                            float(truth[m, 1].mean() / crps[m, 1].mean())]
        out.append(row)
    return out


def _ratio_mid(sizes: np.ndarray, err_m: np.ndarray, err_f: np.ndarray) -> float:
    m = (sizes >= 100) & (sizes < 10240)
    if not m.any():
        return float("nan")
    return float(np.median(err_m[m]) / max(np.median(err_f[m]), 1e-12))


def unseen_sizes(s: np.ndarray, t: np.ndarray, seed: int = 0) -> dict[str, float]:
    """Hold out 30 % of the sizes (never the smallest/largest), fit on the rest."""
    sizes = np.unique(s)
    rng = np.random.default_rng(seed)
    inner = sizes[1:-1]
    held = rng.permutation(inner)[: round(0.3 * len(sizes))]
    te = np.isin(s, held)
    model = RegimeModel().fit(s[~te], t[~te])
    zs, hs = groups(s[te], t[te])
    med = np.array([np.median(h) for h in hs])
    qm = model.predict_quantiles(zs, U)
    w1 = [w1_rel(qm[i], np.quantile(h, U), med[i]) for i, h in enumerate(hs)]
    band = model.predict_quantiles(zs, [0.05, 0.95])
    cov = np.mean(np.concatenate([(h >= band[i, 0]) & (h <= band[i, 1])
                                  for i, h in enumerate(hs)]))
    return {"unseen_med_err": float(np.median(np.abs(model.predict(zs) / med - 1))),
            "unseen_w1": float(np.mean(w1)), "unseen_coverage": float(cov)}


#: Sizes next to a fitted break whose coverage --breaks reports, on either side.
BREAK_SIZES = 2


def break_coverage(model: Any, s_te: np.ndarray, t_te: np.ndarray) -> dict[str, Any]:
    """Held-out coverage of the model's [p05, p95] at the BREAK_SIZES distinct sizes on
    either side of every fitted break, and at the other sizes (pooled samples)."""
    sizes, held = groups(s_te, t_te)
    near = np.zeros(len(sizes), dtype=bool)
    for bp in model.breakpoints_:
        at = int(np.searchsorted(sizes, bp))
        near[max(at - BREAK_SIZES, 0):at + BREAK_SIZES] = True
    band = model.predict_quantiles(sizes, [0.05, 0.95])
    inside = np.array([np.sum((h >= band[i, 0]) & (h <= band[i, 1]))
                       for i, h in enumerate(held)])
    n = np.array([len(h) for h in held])
    return {"near": float(inside[near].sum() / max(n[near].sum(), 1)),
            "n_near": int(n[near].sum()),
            "other": float(inside[~near].sum() / max(n[~near].sum(), 1))}


#: The synthetic truth of --synthetic (kit.fit.synth.size_effects): distinct sizes, and draws
#: per size for its true quantiles.
SYNTH_SIZES = 600
TRUTH_DRAWS = 20000


def synthetic_run(reps: int, seed: int) -> tuple[np.ndarray, np.ndarray, dict[float, np.ndarray]]:
    """(sizes, times, true quantiles at U per size): ``reps`` samples of every size of
    kit.fit.synth.size_effects."""
    from kit.fit import synth

    s, t, grid, true_q = synth.size_effects(reps, seed, n_sizes=SYNTH_SIZES, levels=U,
                                            truth_draws=TRUTH_DRAWS)
    return s, t, {float(z): q for z, q in zip(grid, true_q, strict=True)}


def run_synthetic(reps: int, seed: int) -> dict[str, Any]:
    """The floor check where the truth is known, with the model's W1/floor beside it."""
    s, t, truth = synthetic_run(reps, seed)
    te = split_by_repetition(s, seed)
    model = RegimeModel().fit(s[~te], t[~te])
    out = score(model, s[~te], t[~te], s[te], t[te], truth)
    out["breaks"] = break_coverage(model, s[te], t[te])
    out["run"] = f"synthetic {reps}/size seed {seed}"
    return out


def print_decades(r: dict[str, Any]) -> None:
    truth = "truth" in r["decades"][0]
    print("    decade: W1/floor, W1 matched/floor, CRPS/floor, coverage (nominal 0.90), "
          "med/floor, held-out samples (* fewer than 30)"
          + ("; the truth's W1/floor, CRPS/floor" if truth else ""))
    for d in r["decades"]:
        star = "*" if d["n_test"] < 30 else ""
        t = f"; {d['truth'][0]:.2f}, {d['truth'][1]:.2f}" if truth else ""
        print(f"    1e{d['decade']}: {d['w1_ratio']:.2f}, {d['w1_matched']:.2f}, "
              f"{d['crps_ratio']:.2f}, "
              f"{d['coverage']:.3f}, {d['med_ratio']:.2f}, {d['n_test']}{star}{t}")


def split_seeds(name: str, folder: Path, seeds: int) -> list[dict[str, Any]]:
    """Per size decade, the issue-60 figures over ``seeds`` 70/30 splits (seeds 0..):
    how much of a cell's W1/floor is the split's luck."""
    s, t = read_pingpong(folder)
    per: list[list[dict[str, Any]]] = []
    for seed in range(seeds):
        te = split_by_repetition(s, seed)
        model = RegimeModel().fit(s[~te], t[~te])
        per.append(score(model, s[~te], t[~te], s[te], t[te])["decades"])
    out = []
    for j, d in enumerate(per[0]):
        row: dict[str, Any] = {"decade": d["decade"], "n_test": d["n_test"]}
        for key in ("w1_ratio", "w1_matched", "crps_ratio", "coverage", "med_ratio"):
            row[key] = [p[j][key] for p in per]
        out.append(row)
    return out


def run_one(name: str, folder: Path, with_unseen: bool = True,
            checks: bool = False) -> dict[str, Any]:
    s, t = read_pingpong(folder)
    te = split_by_repetition(s)
    c0 = time.process_time()
    w0 = time.perf_counter()
    model = RegimeModel().fit(s[~te], t[~te])
    cpu = time.process_time() - c0
    wall = time.perf_counter() - w0
    out: dict[str, Any] = {"run": name, "n_train": int((~te).sum()), "cpu_s": cpu,
                           "wall_s": wall, "load": os.getloadavg()[0],
                           "regimes": len(model.regimes_),
                           "breakpoints": [round(b) for b in model.breakpoints_],
                           "bands": sum(r.is_mixture for r in model.regimes_)}
    out.update(score(model, s[~te], t[~te], s[te], t[te]))
    if checks:
        out["breaks"] = break_coverage(model, s[te], t[te])
    ps = getattr(model, "per_size_", None)
    if ps is not None:
        out["per_size"] = {"estimated": ps.estimated, "n_adjusted": len(ps.sizes),
                           "describe": ps.describe()}
    # Full-run fit (all samples): the regime count a user sees, and the fit time of 33 k.
    c0 = time.process_time()
    full = RegimeModel().fit(s, t)
    out["cpu_full_s"] = time.process_time() - c0
    out["n_full"] = len(s)
    out["regimes_full"] = len(full.regimes_)
    out["cap_reached"] = [bool(getattr(model, "cap_reached_", False)),
                          bool(getattr(full, "cap_reached_", False))]
    out["breakpoints_full"] = [round(b) for b in full.breakpoints_]
    if with_unseen:
        out.update(unseen_sizes(s, t))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", default=",".join(RUNS))
    ap.add_argument("--no-unseen", action="store_true")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--verbose", action="store_true", help="print the per-size summary")
    ap.add_argument("--tails", action="store_true",
                    help="per decade: W1 parts by level range, shares beyond p01/p99")
    ap.add_argument("--decades", action="store_true",
                    help="print W1/floor, coverage and med/floor per size decade (issue 60)")
    ap.add_argument("--breaks", action="store_true",
                    help="coverage of [p05, p95] at the sizes next to each break")
    ap.add_argument("--synthetic", default="",
                    help="REPS:SEEDS (e.g. 50:2,10:2): the checks on a known truth instead")
    ap.add_argument("--split-seeds", type=int, default=0,
                    help="per decade, the figures over this many 70/30 splits instead")
    args = ap.parse_args()
    rows = []
    if args.split_seeds:
        print("decade: median [min-max] over splits of W1/floor; W1 matched/floor; "
              "CRPS/floor; coverage of [p05, p95]; held-out samples")
        for name in args.runs.split(","):
            print(name, flush=True)
            for d in split_seeds(name, CAL / RUNS[name], args.split_seeds):
                print(f"    1e{d['decade']}: " + "; ".join(
                    f"{np.median(d[k]):.{3 if k == 'coverage' else 2}f} [{min(d[k]):.2f}-"
                    f"{max(d[k]):.2f}]" for k in ("w1_ratio", "w1_matched", "crps_ratio",
                                                  "coverage")) + f"; {d['n_test']}",
                    flush=True)
        return
    if args.synthetic:
        for spec in args.synthetic.split(","):
            reps, seeds = (int(x) for x in spec.split(":"))
            for seed in range(seeds):
                r = run_synthetic(reps, seed)
                rows.append(r)
                b = r["breaks"]
                print(f"{r['run']}: W1/floor {r['w1_ratio']:.2f}, coverage {r['coverage']:.3f}"
                      f" (next to breaks {b['near']:.3f} of {b['n_near']}, elsewhere "
                      f"{b['other']:.3f})", flush=True)
                print_decades(r)
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1))
        return
    print("| run | regimes (70 % / all) | cap decided | breaks (all) | med/floor | mid med/floor "
          "| W1/floor | cov | width/data | width (pred.) | wide sizes | unseen med err "
          "| unseen W1 | unseen cov "
          "| CPU fit 70 % / all (s) | load |")
    print("|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in args.runs.split(","):
        r = run_one(name, CAL / RUNS[name], not args.no_unseen,
                    args.breaks)
        rows.append(r)
        cap = "/".join("yes" if c else "no" for c in r["cap_reached"])
        print(f"| {name} | {r['regimes']} / {r['regimes_full']} | {cap} | "
              f"{', '.join(map(str, r['breakpoints_full']))} | {r['med_ratio']:.2f} "
              f"({r['med_err']:.1%} vs {r['med_floor']:.1%}) | {r['med_ratio_mid']:.2f} | "
              f"{r['w1_ratio']:.2f} | {r['coverage']:.3f} | {r['width_ratio']:.2f} | "
              f"{r['width_ratio_pred']:.2f} | "
              f"{r['wide_share']:.0%} | {r.get('unseen_med_err', float('nan')):.1%} | "
              f"{r.get('unseen_w1', float('nan')):.3f} | "
              f"{r.get('unseen_coverage', float('nan')):.3f} | "
              f"{r['cpu_s']:.2f} / {r['cpu_full_s']:.2f} | {r['load']:.1f} |", flush=True)
        if args.decades:
            print_decades(r)
        if args.tails:
            print("    decade: W1 x1000 of the median, model/floor, below 1/32 | 1/32-31/32 "
                  "| above 31/32; held-out beyond p01, p99 (nominal 1 %): model | floor")
            for d in r["tails"]:
                wm, wf, b = d["model"], d["floor"], d["beyond"]
                print(f"    1e{d['decade']}: " + " | ".join(
                    f"{1e3 * x:.2f}/{1e3 * y:.2f}" for x, y in zip(wm, wf, strict=True))
                    + f"; {b[0]:.1%}, {b[1]:.1%} | {b[2]:.1%}, {b[3]:.1%}")
        if args.breaks:
            b = r["breaks"]
            print(f"    coverage of [p05, p95] next to breaks {b['near']:.3f} "
                  f"({b['n_near']} held-out samples), elsewhere {b['other']:.3f}")
        if args.verbose and "per_size" in r:
            print("    " + "\n    ".join(r["per_size"]["describe"]))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
