#!/usr/bin/env python3
"""Spearman's ρ of weights-only statistics with measured sensitivity (bench/validity.sh).
usage: validity.py SENS.json THETA.json [SENS2.json THETA2.json ...]
SENS.json: `organ sensitivity --json` (with --repeat-text: the ceiling ρ between texts);
THETA.json: `organ measure --json` of the same model. Prints, per pair: ρ with θ, with the
tensor's size, and the mean ρ within each kind (attn_q, ffn_down, ...)."""
import json, sys


def ranks(v):
    order = sorted(range(len(v)), key=lambda i: v[i])
    r = [0.0] * len(v)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
            j += 1
        for k in order[i:j + 1]:
            r[k] = (i + j) / 2 + 1
        i = j + 1
    return r


def spearman(a, b):
    pairs = [(x, y) for x, y in zip(a, b) if x is not None and y is not None]
    if len(pairs) < 3:
        return float("nan")
    x, y = ranks([p[0] for p in pairs]), ranks([p[1] for p in pairs])
    n = len(x)
    mx, my = sum(x) / n, sum(y) / n
    sxy = sum((p - mx) * (q - my) for p, q in zip(x, y))
    sxx = sum((p - mx) ** 2 for p in x)
    syy = sum((q - my) ** 2 for q in y)
    return sxy / (sxx * syy) ** 0.5 if sxx > 0 and syy > 0 else float("nan")


def within_kind(rows, stat):
    kinds = sorted({r["kind"] for r in rows})
    rhos = [spearman([stat(r) for r in rows if r["kind"] == k], [r["kld"]["value"] for r in rows if r["kind"] == k]) for k in kinds]
    rhos = [x for x in rhos if x == x]
    return sum(rhos) / len(rhos) if rhos else float("nan")


def theta_of(report):
    out = {}
    for m in report.get("models", [report]):
        for t in m.get("tensors", []):
            out[t["name"]] = t.get("theta")
    return out


def main(args):
    for sens_path, theta_path in zip(args[::2], args[1::2]):
        s = json.load(open(sens_path))
        th = theta_of(json.load(open(theta_path)))
        rows = s["tensors"]
        kld = [r["kld"]["value"] for r in rows]
        print(f"{s['model']}, each of {len(rows)} tensors changed to {s['change']} "
              f"(ctx {s['text']['ctx']}, {s['text']['chunks']} chunks of {s['text']['text']}):")
        if s.get("repeat_rho") is not None:
            print(f"  ceiling: the same measurement on {s['repeat']['text']}: rho {s['repeat_rho']:+.2f}")
        stats = {"theta (z1)": lambda r: th.get(r["name"]), "tensor size": lambda r: r["n_elements"]}
        for name, f in stats.items():
            w = within_kind(rows, f)
            within = f"{w:+.2f} mean within kind" if w == w else "constant within a kind"
            print(f"  {name:<12} rho {spearman([f(r) for r in rows], kld):+.2f} overall, {within}")


if __name__ == "__main__":
    main(sys.argv[1:])
