#!/usr/bin/env python3
"""The numbers of a tools/gpu-visit run: each stage's results read from the visit's work folder into
JSON, the lines the visit prints, and OUT_DIR/summary.json with its verdict. Only tools/gpu-visit runs it.

  gpu_visit_report.py dtrain WORK MICRO_BATCHES WARMUP DTRAIN_LOG   JSON of the timed runs and the profile
  gpu_visit_report.py ncu WORK                                      JSON of the ncu.*.csv files
  gpu_visit_report.py variants WORK                                 JSON of the variants (WORK/var/NAME.json) and
                                                                    this tree's step time over each's
  gpu_visit_report.py show-dtrain JSON | show-ncu JSON | show-variants JSON   the lines the visit prints
  gpu_visit_report.py fp8 WORK WARMUP TOKENS_PER_STEP              JSON of the fp8 and bf16 runs (fp8_*.jsonl);
                                                                    exit 1 if fp8's late losses leave the bound
  gpu_visit_report.py llama1b WORK WARMUP MICRO_BATCH SEQ_LENGTH    JSON of the Llama 1B run (llama1b.jsonl)
  gpu_visit_report.py show-fp8 JSON                                 the lines the visit prints for fp8
  gpu_visit_report.py summary WORK OUT_DIR                          writes OUT_DIR/summary.json
  gpu_visit_report.py verdict SUMMARY                               prints it; exit 1 if a stage failed
"""
import csv
import glob
import io
import json
import os
import re
import statistics
import sys

STAGES = ["preflight", "tests", "sanitizer", "dtrain", "torch", "hf", "ncu", "attention", "variants", "fp8", "llama1b"]

# fp8 against bf16: fp8's mean loss over the last FP8_WINDOW steps within FP8_BOUND (relative) of bf16's.
# The bound is E4M3's resolution 2^-4, the coarsest rounding of the forward's operands (a run whose
# rounding were wrong, or whose scales overflowed, diverges far beyond it).
FP8_WINDOW, FP8_BOUND = 50, 2.0 ** -4


def flops_per_token(log_text):
    """The FLOPs per token dtrain printed at start-up (GFLOP/token), or None."""
    m = re.search(r"([0-9.]+) GFLOP/token", log_text)
    return float(m.group(1)) * 1e9 if m else None


def timed_run(path, warmup, tokens_per_step, fpt=None):
    """One metrics file: the timed steps' (after the warm-up) median/min/max step time, tokens/s, MFU
    against the measured GEMM peak and, given the FLOPs per token, against the data-sheet peak; peak
    memory and every step's loss. None without timed steps."""
    rows = [json.loads(l) for l in open(path)]
    timed = [r for r in rows if r["step"] > warmup]
    if not timed:
        return None
    t = [r["step_s"] for r in timed]
    med = statistics.median(t)
    return {"steps": len(t), "step_ms_median": 1e3 * med, "step_ms_min": 1e3 * min(t), "step_ms_max": 1e3 * max(t),
            "tokens_per_s_median": tokens_per_step / med, "tokens_per_s_max": tokens_per_step / min(t),
            "mfu_vs_measured_gemm": statistics.median(r["mfu"] for r in timed),
            "mfu_vs_peak": tokens_per_step / med * fpt / 989e12 if fpt else None,
            "peak_memory_bytes": max(r.get("device_peak_bytes", 0) for r in rows), "loss_first": rows[0]["loss"],
            "loss_last": rows[-1]["loss"], "losses": [r["loss"] for r in rows]}


def fp8(work, warmup, tokens_per_step):
    res = {"window": FP8_WINDOW, "bound": FP8_BOUND}
    for p in ("bf16", "fp8"):
        path = os.path.join(work, "fp8_%s.jsonl" % p)
        run = timed_run(path, int(warmup), int(tokens_per_step)) if os.path.exists(path) else None
        if run:
            res[p] = run
    if "bf16" not in res or "fp8" not in res:
        print(json.dumps(res))
        return 1
    late = {p: statistics.mean(res[p]["losses"][-FP8_WINDOW:]) for p in ("bf16", "fp8")}
    res["late_loss"] = late
    res["late_loss_relative_difference"] = abs(late["fp8"] - late["bf16"]) / late["bf16"]
    res["fp8_over_bf16_tokens_per_s"] = res["fp8"]["tokens_per_s_median"] / res["bf16"]["tokens_per_s_median"]
    res["within_bound"] = res["late_loss_relative_difference"] <= FP8_BOUND
    print(json.dumps(res))
    return 0 if res["within_bound"] else 1


def show_fp8(path):
    r = json.load(open(path))
    for p in ("bf16", "fp8"):
        if p in r:
            q = r[p]
            print("   %s: %d steps, loss %.4f -> %.4f, %.0f tokens/s (median of %d timed), %.1f%% MFU" % (
                p, len(q["losses"]), q["loss_first"], q["loss_last"], q["tokens_per_s_median"], q["steps"], 100 * q["mfu_vs_measured_gemm"]))
    if "late_loss" in r:
        print("   last %d steps' mean loss: fp8 %.4f, bf16 %.4f (relative %.2e, bound %.2e); fp8 tokens/s x%.2f of bf16's" % (
            r["window"], r["late_loss"]["fp8"], r["late_loss"]["bf16"], r["late_loss_relative_difference"], r["bound"],
            r["fp8_over_bf16_tokens_per_s"]))


def llama1b(work, warmup, micro_batch, seq_length):
    """The Llama run at the micro-batch that fitted (llama1b.jsonl, its log llama1b.dtrain.log), MFU
    against the data-sheet peak from the FLOPs per token dtrain printed, and PyTorch's runs at the same
    micro-batch (torch_llama.json) with dtrain's tokens/s and peak memory over theirs."""
    mb, t = int(micro_batch), int(seq_length)
    log = os.path.join(work, "llama1b.dtrain.log")
    fpt = flops_per_token(open(log).read()) if os.path.exists(log) else None
    res = timed_run(os.path.join(work, "llama1b.jsonl"), int(warmup), mb * t, fpt)
    if res is None:
        return 1
    res.update(micro_batch=mb, seq_length=t, flops_per_token=fpt)
    del res["losses"]
    path = os.path.join(work, "torch_llama.json")
    if os.path.exists(path):
        torch_runs = json.load(open(path)).get("runs", [])
        res["torch"] = torch_runs
        res["dtrain_over_torch"] = {q["impl"]: {"tokens_per_s": res["tokens_per_s_median"] / q["tokens_per_s_median"],
                                                "peak_memory": res["peak_memory_bytes"] / q["peak_memory_bytes"]
                                                if q.get("peak_memory_bytes") and res["peak_memory_bytes"] else None}
                                    for q in torch_runs if q["micro_batch"] == mb}
    print(json.dumps(res))


def dtrain(work, mbs, warmup, log):
    """The timed runs (mbN.jsonl: median/min step time after the warm-up, tokens/s, MFU, peak memory) and
    the profiled run (phase totals from the trace, every launch waited for; kernels from the profile)."""
    mbs, warmup = [int(x) for x in mbs.split(",")], int(warmup)
    text = open(log).read()
    fpt = flops_per_token(text)
    res = {"runs": [], "flops_per_token": fpt, "peak_tflops_datasheet": 989.0}
    for mb in mbs:
        path = os.path.join(work, "mb%d.jsonl" % mb)
        run = timed_run(path, warmup, mb * 1024, fpt) if os.path.exists(path) else None
        if run:
            del run["losses"]
            res["runs"].append(dict(micro_batch=mb, **run))
    m = re.search(r"peak ([0-9.]+) GFLOP/s \(([^)]*)\)", text)
    if m:
        res["measured_gemm_tflops"] = float(m.group(1)) / 1e3
    prof = os.path.join(work, "profile.jsonl")
    traces = glob.glob(os.path.join(work, "trace*.json"))
    if os.path.exists(prof) and traces:
        rows = [json.loads(l) for l in open(prof)][1:]  # the first step warms up
        wall = sum(r["step_s"] for r in rows)
        ev = json.load(open(traces[0]))
        ev = ev["traceEvents"] if isinstance(ev, dict) else ev
        steps_ts = sorted(e["ts"] for e in ev if e.get("cat") == "step")
        first_cut = steps_ts[1] if len(steps_ts) > 1 else 0
        phases = {}
        for e in ev:
            if e.get("ph") != "X" or e["ts"] < first_cut or e.get("cat") == "step":
                continue
            phases[e["cat"]] = phases.get(e["cat"], 0.0) + e["dur"] / 1e6
        res["profile"] = {"steps": len(rows), "step_s_total": wall,
                          "phase_seconds": phases, "phase_share": {k: v / wall for k, v in phases.items()} if wall else {}}
        kern = []
        kp = os.path.join(work, "kernels.txt")
        if os.path.exists(kp):
            for line in open(kp):
                if line.startswith("#"):
                    continue
                s, share, calls, host, name = line.rstrip("\n").split("\t", 4)
                kern.append({"name": name, "seconds": float(s), "share": float(share), "calls": int(calls),
                             "host_seconds_before": float(host)})
        res["profile"]["kernels_top"] = kern[:15]
        res["profile"]["host_seconds_between_launches"] = sum(k["host_seconds_before"] for k in kern)
        res["profile"]["host_top"] = sorted(kern, key=lambda k: -k["host_seconds_before"])[:5]
    print(json.dumps(res))


def ncu(work):
    """Every ncu.NAME.csv (--csv --print-units base: one row per launch and metric), summed per kernel."""
    per = {}
    for path in sorted(glob.glob(os.path.join(work, "ncu.*.csv"))):
        lines = open(path).read().splitlines()
        start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
        if start is None:
            continue
        for row in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
            launch = per.setdefault(row["Kernel Name"], {}).setdefault(row["ID"], {})
            try:  # the sections' rows hold words too (a cache configuration): numbers only
                launch[row["Metric Name"]] = float(row["Metric Value"].replace(",", ""))
            except ValueError:
                pass
    kern = []
    for name, launches in per.items():
        ls = list(launches.values())
        secs = sum(l.get("gpu__time_duration.sum", 0.0) for l in ls) * 1e-9
        mean = lambda m: sum(l.get(m, 0.0) for l in ls) / len(ls)
        kern.append({"name": name, "launches": len(ls), "seconds": secs, "mean_us": 1e6 * secs / len(ls),
                     "sm_pct": mean("sm__throughput.avg.pct_of_peak_sustained_elapsed"),
                     "memory_pct": mean("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"),
                     "metrics": {m: mean(m) for m in sorted({m for l in ls for m in l})}})
    kern.sort(key=lambda k: -k["seconds"])
    print(json.dumps({"kernels": kern[:20], "seconds_total": sum(k["seconds"] for k in kern)}))


def variants(work):
    """Each variant's runs and profile (WORK/var/NAME.json, as dtrain() writes them), and the step time of
    this tree (WORK/dtrain.json) over each variant's at the micro-batch both ran."""
    main = {}
    if os.path.exists(os.path.join(work, "dtrain.json")):
        try:
            main = {r["micro_batch"]: r for r in json.load(open(os.path.join(work, "dtrain.json")))["runs"]}
        except ValueError:
            pass
    res = {"variants": {}, "main_over_variant": {}}
    for path in sorted(glob.glob(os.path.join(work, "var", "*.json"))):
        name = os.path.basename(path)[:-len(".json")]
        try:
            v = json.load(open(path))
        except ValueError:
            continue
        res["variants"][name] = v
        for r in v.get("runs", []):
            if r["micro_batch"] in main:
                m = main[r["micro_batch"]]
                res["main_over_variant"][name] = {"micro_batch": r["micro_batch"],
                                                  "step_ms_median": m["step_ms_median"] / r["step_ms_median"],
                                                  "step_ms_min": m["step_ms_min"] / r["step_ms_min"]}
    print(json.dumps(res))


def show_variants(path):
    d = json.load(open(path))
    for name, v in d["variants"].items():
        for r in v.get("runs", []):
            print("   variant %s mb %d: %.1f ms/step median (min %.1f)" % (name, r["micro_batch"], r["step_ms_median"], r["step_ms_min"]))
    for name, q in d["main_over_variant"].items():
        print("   this tree over %s at mb %d: step time x%.3f (median), x%.3f (min)" % (name, q["micro_batch"], q["step_ms_median"],
                                                                                        q["step_ms_min"]))


def show_dtrain(path):
    d = json.load(open(path))
    for r in d["runs"]:
        print("   dtrain mb %d: %.1f ms/step median (min %.1f), %.0f tok/s, MFU %.1f%% (measured GEMM) %.1f%% (989), GPU peak %.2f GiB, "
              "loss %.3f -> %.3f" % (r["micro_batch"], r["step_ms_median"], r["step_ms_min"], r["tokens_per_s_median"],
                                     100 * r["mfu_vs_measured_gemm"], 100 * (r["mfu_vs_peak"] or 0), r["peak_memory_bytes"] / 2**30,
                                     r["loss_first"], r["loss_last"]))
    p = d.get("profile", {})
    print("   phases:", {k: round(v, 3) for k, v in p.get("phase_share", {}).items()})
    for k in p.get("kernels_top", [])[:10]:
        print("   %5.1f%% %6d %s (host before: %.1f ms)" % (100 * k["share"], k["calls"], k["name"], 1e3 * k["host_seconds_before"]))
    print("   host time between launches: %.1f ms; most before: %s" % (
        1e3 * p.get("host_seconds_between_launches", 0),
        ", ".join("%s %.1f ms" % (k["name"], 1e3 * k["host_seconds_before"]) for k in p.get("host_top", []))))


def show_ncu(path):
    d = json.load(open(path))
    print("   ncu: %d kernels, first launches of each" % len(d["kernels"]))
    for k in d["kernels"][:12]:
        print("   %8.3f ms %5d x %8.1f us  SM %4.1f%%  memory %4.1f%%  %s" % (1e3 * k["seconds"], k["launches"], k["mean_us"], k["sm_pct"],
                                                                        k["memory_pct"], k["name"]))
        for m, v in k.get("metrics", {}).items():
            print("              %-60s %.4g" % (m, v))


def summary(work, out):
    """OUT/summary.json: each stage's status (WORK/NAME.status: exit code and seconds) and numbers
    (WORK/NAME.json), and dtrain's tokens/s and peak memory over PyTorch's at each micro-batch."""
    s = {"gpu": None, "stages": {}}
    pre_path = os.path.join(out, "preflight.log")
    pre = open(pre_path).read() if os.path.exists(pre_path) else ""
    m = re.search(r"^name, memory.total.*\n(.*)$", pre, re.M)
    s["gpu"] = m.group(1) if m else None
    for name in STAGES:
        path = os.path.join(work, name + ".status")
        if not os.path.exists(path):
            continue
        rc, secs = open(path).read().split()
        # exit 77: the stage had nothing to run here (transformers missing for hf): skipped, not failed
        st = {"passed": rc == "0", "skipped": rc == "77", "exit": int(rc), "seconds": int(secs)}
        extra = os.path.join(work, name + ".json")
        if os.path.exists(extra):
            try:
                st.update(json.load(open(extra)))
            except ValueError:  # its parser failed (the stage's log says why): the status still counts
                st["numbers"] = "unreadable: the stage's output could not be parsed"
        s["stages"][name] = st
    d, t = s["stages"].get("dtrain", {}), s["stages"].get("torch", {})
    ratios = {}
    for r in d.get("runs", []):
        for impl in ("eager", "compiled"):
            for q in t.get("runs", []):
                if q["impl"] == impl and q["micro_batch"] == r["micro_batch"]:
                    ratios["mb%d_vs_torch_%s" % (r["micro_batch"], impl)] = {
                        "tokens_per_s": r["tokens_per_s_median"] / q["tokens_per_s_median"],
                        "peak_memory": (r["peak_memory_bytes"] / q["peak_memory_bytes"]) if q.get("peak_memory_bytes") else None}
    s["dtrain_over_torch"] = ratios
    json.dump(s, open(os.path.join(out, "summary.json"), "w"), indent=1)


def verdict(path):
    s = json.load(open(path))
    word = lambda v: "passed" if v["passed"] else "skipped" if v["skipped"] else "FAILED (exit %d)" % v["exit"]
    print("   " + ", ".join("%s %s (%ds)" % (k, word(v), v["seconds"]) for k, v in s["stages"].items()))
    for k, v in s.get("dtrain_over_torch", {}).items():
        print("   %s: tokens/s x%.2f, memory x%s" % (k, v["tokens_per_s"], "%.2f" % v["peak_memory"] if v["peak_memory"] else "?"))
    return 0 if all(v["passed"] or v["skipped"] for v in s["stages"].values()) else 1


COMMANDS = {"fp8": (fp8, 3), "llama1b": (llama1b, 4), "show-fp8": (show_fp8, 1), "dtrain": (dtrain, 4), "ncu": (ncu, 1), "variants": (variants, 1), "show-dtrain": (show_dtrain, 1), "show-ncu": (show_ncu, 1),
            "show-variants": (show_variants, 1),
            "summary": (summary, 2), "verdict": (verdict, 1)}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS or len(sys.argv) - 2 != COMMANDS[sys.argv[1]][1]:
        sys.exit(__doc__)
    sys.exit(COMMANDS[sys.argv[1]][0](*sys.argv[2:]) or 0)
