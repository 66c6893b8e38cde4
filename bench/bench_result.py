"""Machine-readable bench results for Python benches: the same JSON line per figure as
bench/common/bench_result.h, appended to the file named by $REVERSER_BENCH_JSON (bench/run_all
sets it; unset: nothing is written)."""
import json
import os


def stats(samples):
    values = sorted(samples)
    if not values:
        return {"samples": [], "min": None, "median": None, "max": None}
    n = len(values)
    median = values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2
    return {"samples": list(samples), "min": values[0], "median": median, "max": values[-1]}


def percentile(values, p):
    """Nearest-rank percentile of `values` (p in 0..100)."""
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100.0 * (len(values) - 1))))]


def figure(bench, name, label, unit, samples, better="higher", anchor=None, goal=None, timing="",
           context=False, extra=None):
    """One figure. anchor: {"name", "label", "samples"}; goal: {"text", "on": "ratio"|"value",
    "op": ">="|"<=", "value"}. Returns the JSON object (with ratio and verdict)."""
    out = {"bench": bench, "figure": name, "label": label, "unit": unit, "better": better,
           "timing": timing, "context": context}
    out.update(stats(samples))
    ratio = None
    out["ratio_samples"] = []
    if anchor is not None:
        a = dict(anchor)
        a.update(stats(anchor["samples"]))
        out["anchor"] = a
        if a["median"]:
            ratio = out["median"] / a["median"]
        out["ratio_samples"] = [s / t for s, t in zip(samples, anchor["samples"]) if t]
    else:
        out["anchor"] = None
    out["ratio"] = ratio
    out["goal"] = goal
    if goal is None:
        out["verdict"] = "no goal"
    else:
        x = ratio if goal["on"] == "ratio" else out["median"]
        if x is None:
            out["verdict"] = "not met"
        else:
            met = x >= goal["value"] if goal["op"] == ">=" else x <= goal["value"]
            out["verdict"] = "met" if met else "not met"
    if extra:
        out["extra"] = extra
    return out


def emit(obj):
    path = os.environ.get("REVERSER_BENCH_JSON")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(obj) + "\n")
    return obj


def emit_figure(*args, **kwargs):
    return emit(figure(*args, **kwargs))


def emit_series(bench, name, data):
    return emit({"bench": bench, "series": name, "data": data})
