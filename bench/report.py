#!/usr/bin/env python3
"""Renders bench/run_all's collected results into docs/benchmarks.md, docs/benchmarks.json and
PNG plots (matplotlib, Debian's python3-matplotlib). Input: the run's work directory with
machine.json, status.jsonl (one line per bench run), results.jsonl (the benches' own JSON lines:
figures and series) and loadavg.txt."""
import argparse
import json
import os
import statistics
import sys

BENCH_TITLES = {
    "materializer": "materializer: audit intake and watch appends against redis-benchmark XADD (issue #5)",
    "first_mirror": "gitworker: first mirror against git fast-import (issue #7)",
    "splice": "splicer: splice, peak RSS and live tail (issue #6)",
    "pipeline": "pipeline: change → pushed-commit latency through the local stack",
    "attribution_share": "attribution from admission: commits naming the right user, against the audit path (issue #18)",
    "replicas": "gitworker replicas: failover time and throughput with 1, 2, 3 replicas (issue #17)",
    "metrics": "runtime: the metrics registry against prometheus-cpp (issue #15)",
    "target_churn": "splicer: GitTargets arriving one by one (issue #15)",
    "fanout": "splicer: many targets over few materializations (issue #15)",
    "kube_sim": "kube-sim (the test API server the other benches use)",
}


def read_jsonl(path):
    out = []
    if os.path.exists(path):
        for line in open(path):
            line = line.strip()
            if line:
                out.append(json.loads(line))
    return out


def fmt(x, unit=""):
    if x is None:
        return "—"
    a = abs(x)
    if a >= 1000:
        s = f"{x:,.0f}"
    elif a >= 100:
        s = f"{x:.0f}"
    elif a >= 10:
        s = f"{x:.1f}"
    elif a >= 1:
        s = f"{x:.2f}"
    else:
        s = f"{x:.3f}"
    return f"{s} {unit}".strip()


def spread(f, unit):
    if f.get("median") is None:
        return "—"
    n = len(f.get("samples", []))
    if n <= 1:
        return fmt(f["median"], unit)
    return f"{fmt(f['median'], unit)} ({fmt(f['min'])}–{fmt(f['max'])}, n={n})"


def ratio_text(f):
    r = f.get("ratio")
    if r is None:
        return "—"
    paired = f.get("ratio_samples") or []
    goal = f.get("goal") or {}
    if "%" in goal.get("text", ""):  # a goal stated in percent of the anchor
        text = f"{100 * r:.1f} %"
        if len(paired) > 1:
            text += f" (per round {100 * min(paired):.1f}–{100 * max(paired):.1f} %)"
        return text
    if len(paired) > 1:
        return f"{r:.2f}× (per round {min(paired):.2f}–{max(paired):.2f})"
    return f"{r:.2f}×"


def verdict_text(f):
    v = f.get("verdict", "no goal")
    if f.get("context"):
        return "context"
    return {"met": "**met**", "not met": "**not met**"}.get(v, v)


def plots(series, out_dir, rel):
    """Writes the PNGs; returns {key: relative path}."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    os.makedirs(out_dir, exist_ok=True)
    made = {}

    lat = series.get(("pipeline", "latency"))
    if lat:
        values = lat["latencies_ms"]
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
        ax1.hist(values, bins=60, color="#4878a8")
        for p, style in ((50, "--"), (99, ":")):
            v = sorted(values)[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]
            ax1.axvline(v, color="k", linestyle=style, label=f"p{p} {v:.0f} ms")
        ax1.axvline(50, color="#2a9d3a", linestyle="-", alpha=0.6, label="goal p50 ≤ 50 ms")
        ax1.axvline(250, color="#c0392b", linestyle="-", alpha=0.6, label="goal p99 ≤ 250 ms")
        ax1.set_xlabel("change → pushed commit (ms)")
        ax1.set_ylabel("changes")
        ax1.set_title(f"latency distribution, {len(values)} creates at {lat['rate']:g}/s")
        ax1.legend(fontsize=8)
        ax2.scatter(lat["offsets_s"], values, s=3, color="#4878a8")
        ax2.set_xlabel("time the change was sent (s into the run)")
        ax2.set_ylabel("latency (ms)")
        ax2.set_title("latency over the run")
        fig.tight_layout()
        path = os.path.join(out_dir, "pipeline_latency.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        made["pipeline_latency"] = f"{rel}/pipeline_latency.png"

    sweep = series.get(("pipeline", "latency_vs_rate"))
    if sweep:
        fig, ax = plt.subplots(figsize=(6.5, 4))
        rates = [p["rate"] for p in sweep]
        for key, style in (("p50", "o-"), ("p90", "s--"), ("p99", "^:")):
            ax.plot(rates, [p[key] for p in sweep], style, label=key)
        ax.axhline(50, color="#2a9d3a", alpha=0.5, label="goal p50 ≤ 50 ms")
        ax.axhline(250, color="#c0392b", alpha=0.5, label="goal p99 ≤ 250 ms")
        ax.set_xlabel("creates per second")
        ax.set_ylabel("change → pushed commit (ms)")
        ax.set_title("latency vs rate (one fresh stack per rate)")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, "latency_vs_rate.png"), dpi=110)
        plt.close(fig)
        made["latency_vs_rate"] = f"{rel}/latency_vs_rate.png"

    stack = series.get(("pipeline", "first_mirror_rss"))
    if stack:
        fig, ax = plt.subplots(figsize=(8, 4.2))
        for name, points in stack["timeline"].items():
            if points:
                ax.plot([p[0] for p in points], [p[1] for p in points], label=name)
        ax.axvline(stack["seconds"], color="k", linestyle=":", label="every file pushed")
        ax.set_xlabel("seconds since the mirror was applied")
        ax.set_ylabel("RSS (MiB)")
        ax.set_title(f"RSS of each process during a first mirror of {stack['objects']:,} ConfigMaps")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, "first_mirror_stack_rss.png"), dpi=110)
        plt.close(fig)
        made["first_mirror_stack_rss"] = f"{rel}/first_mirror_stack_rss.png"

    for key, data in series.items():
        if key[0] == "first_mirror" and key[1].startswith("rss_timeline"):
            fig, ax = plt.subplots(figsize=(7, 4))
            for name, label in (("gitworker", "gitworker (branch worker)"), ("git_fast_import", "git fast-import")):
                points = data.get(name) or []
                ax.plot([p[0] for p in points], [p[1] for p in points], label=label)
            ax.set_xlabel("seconds since fork")
            ax.set_ylabel("RSS (MiB)")
            ax.set_title(f"first mirror of {data['objects']:,} objects: RSS over time (last run)")
            ax.legend(fontsize=8)
            fig.tight_layout()
            name = f"first_mirror_rss{key[1][len('rss_timeline'):]}.png"
            fig.savefig(os.path.join(out_dir, name), dpi=110)
            plt.close(fig)
            made["first_mirror_rss" + key[1][len("rss_timeline"):]] = f"{rel}/{name}"
    return made


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--markdown", required=True)
    ap.add_argument("--json", required=True)
    ap.add_argument("--plots", required=True)
    ap.add_argument("--quick", type=int, default=0)
    args = ap.parse_args()

    machine = json.load(open(os.path.join(args.work, "machine.json")))
    status = read_jsonl(os.path.join(args.work, "status.jsonl"))
    lines = read_jsonl(os.path.join(args.work, "results.jsonl"))
    figures = [l for l in lines if "figure" in l]
    series = {(l["bench"], l["series"]): l["data"] for l in lines if "series" in l}
    loads = []
    if os.path.exists(os.path.join(args.work, "loadavg.txt")):
        for line in open(os.path.join(args.work, "loadavg.txt")):
            parts = line.split()
            if len(parts) >= 2:
                loads.append(float(parts[1]))
    machine["loadavg_during"] = ({"min": min(loads), "median": statistics.median(loads), "max": max(loads),
                                  "samples": len(loads)} if loads else None)
    cores = machine.get("cores") or 1
    start_load = float(machine["loadavg_start"][0])
    busy = start_load >= 0.5 * cores or (loads and statistics.median(loads) >= cores)
    machine["busy"] = bool(busy)

    md_dir = os.path.dirname(os.path.abspath(args.markdown))
    rel = os.path.relpath(os.path.abspath(args.plots), md_dir)
    try:
        made = plots(series, args.plots, rel)
    except ImportError as e:
        print(f"report: no plots ({e})", file=sys.stderr)
        made = {}

    # Paths of this machine's build tree are not the reader's: commands are shown relative.
    for s in status:
        cmd = s.get("command", "")
        parts = []
        for word in cmd.split(" "):
            if "/bazel-out/" in word or "/execroot/" in word:
                if word.endswith("/bin"):
                    word = "bazel-bin"
                elif "/bin/" in word:
                    word = "bazel-bin/" + word.split("/bin/", 1)[1]
            parts.append(word)
        s["command"] = " ".join(parts)

    doc = {"machine": machine, "runs": status, "figures": figures,
           "series": [{"bench": b, "series": n, "data": d} for (b, n), d in series.items()],
           "plots": made}
    with open(args.json, "w") as f:
        json.dump(doc, f, indent=1, ensure_ascii=False)
        f.write("\n")

    m = machine
    out = []
    out.append("# Benchmarks")
    out.append("")
    out.append("Generated by `bench/run_all` (opt build); do not edit by hand — rerun it. Every figure "
               "below is also in [`benchmarks.json`](benchmarks.json) with all its samples. "
               "How each bench works: `bench/README.md`.")
    out.append("")
    if busy:
        out.append(f"> **Busy machine.** The load average was {m['loadavg_start'][0]} at the start"
                   + (f" and {machine['loadavg_during']['min']:.1f}–{machine['loadavg_during']['max']:.1f} "
                      f"(median {machine['loadavg_during']['median']:.1f}) during the run"
                      if machine["loadavg_during"] else "")
                   + f" on {cores} cores shared with other work: absolute figures are noisy and "
                   "low; compare the ratios, which are between samples of one run, interleaved.")
        out.append("")
    if args.quick:
        out.append("> Quick run (`--quick`): smaller sizes than the full run.")
        out.append("")
    out.append("## Machine")
    out.append("")
    out.append("| | |")
    out.append("|---|---|")
    out.append(f"| CPU | {m['cpu_model']}, {m['cores']} cores |")
    out.append(f"| memory | {m['memory_gib']} GiB |")
    out.append(f"| kernel | {m['kernel']} (Debian {m.get('os', '')}) |")
    out.append(f"| commit | `{m['commit'][:12]}` {m['commit_subject']}{' (with uncommitted changes)' if m['dirty'] else ''} |")
    out.append(f"| started | {m['started']} |")
    ld = m.get("loadavg_during")
    out.append(f"| load average | {' / '.join(m['loadavg_start'])} at the start"
               + (f"; {ld['min']:.1f}–{ld['max']:.1f} (median {ld['median']:.1f}) during the run, every 5 s" if ld else "")
               + " |")
    out.append("")
    out.append("## How to read this")
    out.append("")
    out.append("* **value**: the median of the samples (min–max, n = number of samples). "
               "**anchor**: what the figure is measured against, sampled the same number of times, "
               "timed the same way, interleaved with it in the same run. **ratio**: median ÷ anchor "
               "median (per-round ratios beside it). A constant is never an anchor: a goal that names "
               "a number is judged on the value.")
    out.append("* **verdict**: the goal the issue names, judged on the median. *context* rows are "
               "printed beside a verdict (other anchors, ceilings, in-process steps); they are not "
               "verdicts.")
    out.append("")

    out.append("## Verdicts")
    out.append("")
    out.append("| bench | figure | value | anchor | ratio | goal | verdict |")
    out.append("|---|---|---|---|---|---|---|")
    for f in figures:
        if f.get("goal") and not f.get("context"):
            a = f.get("anchor")
            out.append(f"| {f['bench']} | {f['label']} | {spread(f, f['unit'])} | "
                       f"{(a['label'] + ': ' + spread(a, '')) if a else '—'} | {ratio_text(f)} | "
                       f"{f['goal']['text']} | {verdict_text(f)} |")
    out.append("")

    plot_after = {"pipeline": ["pipeline_latency", "latency_vs_rate", "first_mirror_stack_rss"],
                  "first_mirror": [k for k in made if k.startswith("first_mirror_rss")]}
    by_bench = {}
    for f in figures:
        by_bench.setdefault(f["bench"], []).append(f)
    for s in status:
        name = s["bench"]
        out.append(f"## {BENCH_TITLES.get(name, name)}")
        out.append("")
        out.append(f"`{s['command']}` — {'ok' if s['exit'] == 0 else '**FAILED (exit ' + str(s['exit']) + ')**'}, "
                   f"{s['seconds']:.0f} s")
        out.append("")
        rows = by_bench.get(name, [])
        if rows:
            out.append("| figure | value | anchor | ratio | goal | verdict |")
            out.append("|---|---|---|---|---|---|")
            for f in rows:
                a = f.get("anchor")
                out.append(f"| {f['label']} | {spread(f, f['unit'])} | "
                           f"{(a['label'] + ': ' + spread(a, '')) if a else '—'} | {ratio_text(f)} | "
                           f"{f['goal']['text'] if f.get('goal') else '—'} | {verdict_text(f)} |")
            out.append("")
            timings = []
            for f in rows:
                if f.get("timing") and f["timing"] not in timings:
                    timings.append(f["timing"])
            for t in timings:
                out.append(f"* timed: {t}")
            out.append("")
        for key in plot_after.get(name, []):
            if key in made:
                out.append(f"![{key}]({made[key]})")
                out.append("")
    with open(args.markdown, "w") as f:
        f.write("\n".join(out).rstrip() + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
