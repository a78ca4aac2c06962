#!/usr/bin/env python3
"""Turns the JSON reports of the benchmarks into the tables of
docs/PERFORMANCE.md: each Accy row beside the best of its references from
the same run, as a ratio (reference time / Accy time: above 1 is Accy
faster), with the CPU model and OpenBLAS's kernel from the report's context.

    tools/bench_table.py cpu.json [accyd.json] [gpu.json]

Medians of the repetitions are used where the report has them. A benchmark
that ended with an error is shown with its message, never as a figure.
"""

import json
import sys

# (label, Accy benchmark, [reference benchmarks], unit). The ratio is
# against the fastest reference of the row that ran.
CPU_ROWS = [
    ("`y = sin(a*x + b) * c`, 2^24 f32, 1 thread", "BM_SinAffine_Accy_1Thread",
     ["BM_SinAffine_Eigen", "BM_SinAffine_PlainLoop"], "ms"),
    ("same, all threads", "BM_SinAffine_Accy_AllThreads", ["BM_SinAffine_Eigen", "BM_SinAffine_PlainLoop"], "ms"),
    ("`y = sin(a*x + b) * c`, 2^20 f32 phases up to 10^6 (the exact reduction), 1 thread",
     "BM_SinLargePhase_Accy_1Thread", ["BM_SinLargePhase_Eigen", "BM_SinLargePhase_PlainLoop"], "ms"),
    ("`sum`, 2^24 f32, 1 thread", "BM_Sum_Accy_1Thread",
     ["BM_Sum_Avx512Intrinsics_1Thread", "BM_Sum_Avx2Intrinsics_1Thread"], "ms"),
    ("same, 2 threads (references: each thread a half)", "BM_Sum_Accy_2Threads",
     ["BM_Sum_Avx512Intrinsics_2Threads", "BM_Sum_Avx2Intrinsics_2Threads"], "ms"),
    ("`y = a*x + b`, 2^24 f32, 1 thread (references: plain and non-temporal stores)", "BM_Affine_Accy_1Thread",
     ["BM_Affine_Avx512Intrinsics/threads:1/stream:0", "BM_Affine_Avx512Intrinsics/threads:1/stream:1", "BM_Affine_Avx2Intrinsics/threads:1/stream:0", "BM_Affine_Avx2Intrinsics/threads:1/stream:1", "BM_Affine_Eigen_1Thread"], "ms"),
    ("same, 2 threads (references: each thread a half)", "BM_Affine_Accy_2Threads",
     ["BM_Affine_Avx512Intrinsics/threads:2/stream:0", "BM_Affine_Avx512Intrinsics/threads:2/stream:1", "BM_Affine_Avx2Intrinsics/threads:2/stream:0", "BM_Affine_Avx2Intrinsics/threads:2/stream:1"], "ms"),
    ("`dot` 1024^3 f32, 1 thread", "BM_Matmul1024_Accy_1Thread",
     ["BM_Matmul1024_Eigen_1Thread", "BM_Matmul1024_OpenBLAS_1Thread"], "ms"),
    ("`dot` 256^3 f32, 1 thread (reference: OpenBLAS, same threads)", "BM_Product_Accy/shape:0/threads:1",
     ["BM_Product_OpenBLAS/shape:0/threads:1"], "ms"),
    ("`dot` 4096x4096x64 (m x n x k) f32, 1 thread (reference: OpenBLAS, same threads)", "BM_Product_Accy/shape:1/threads:1",
     ["BM_Product_OpenBLAS/shape:1/threads:1"], "ms"),
    ("`dot` 64x4096x4096 f32, 1 thread (reference: OpenBLAS, same threads)", "BM_Product_Accy/shape:2/threads:1",
     ["BM_Product_OpenBLAS/shape:2/threads:1"], "ms"),
    ("`dot` 64 products of 128^3 f32, 1 thread (reference: OpenBLAS, same threads)", "BM_Product_Accy/shape:3/threads:1",
     ["BM_Product_OpenBLAS/shape:3/threads:1"], "ms"),
    ("`dot` 1024^3 f32, 1 thread (reference: OpenBLAS, same threads)", "BM_Product_Accy/shape:4/threads:1",
     ["BM_Product_OpenBLAS/shape:4/threads:1"], "ms"),
    ("`dot` 256^3 f32, 2 threads (reference: OpenBLAS, same threads)", "BM_Product_Accy/shape:0/threads:2",
     ["BM_Product_OpenBLAS/shape:0/threads:2"], "ms"),
    ("`dot` 4096x4096x64 (m x n x k) f32, 2 threads (reference: OpenBLAS, same threads)", "BM_Product_Accy/shape:1/threads:2",
     ["BM_Product_OpenBLAS/shape:1/threads:2"], "ms"),
    ("`dot` 64x4096x4096 f32, 2 threads (reference: OpenBLAS, same threads)", "BM_Product_Accy/shape:2/threads:2",
     ["BM_Product_OpenBLAS/shape:2/threads:2"], "ms"),
    ("`dot` 64 products of 128^3 f32, 2 threads (reference: OpenBLAS, same threads)", "BM_Product_Accy/shape:3/threads:2",
     ["BM_Product_OpenBLAS/shape:3/threads:2"], "ms"),
    ("`dot` 1024^3 f32, 2 threads (reference: OpenBLAS, same threads)", "BM_Product_Accy/shape:4/threads:2",
     ["BM_Product_OpenBLAS/shape:4/threads:2"], "ms"),
    ("`tanh(dot + b)` 256x512x512, 1 thread (reference: OpenBLAS sgemm, then Eigen's tanh pass)",
     "BM_ProductTanh_Accy/shape:0/threads:1", ["BM_ProductTanh_OpenBLASThenEigen/shape:0/threads:1"], "ms"),
    ("`tanh(dot + b)` 1024^3, 1 thread (same reference)", "BM_ProductTanh_Accy/shape:1/threads:1",
     ["BM_ProductTanh_OpenBLASThenEigen/shape:1/threads:1"], "ms"),
    ("`tanh(dot + b)` 256x512x512, 2 threads (same reference, the pass split over 2 threads)",
     "BM_ProductTanh_Accy/shape:0/threads:2", ["BM_ProductTanh_OpenBLASThenEigen/shape:0/threads:2"], "ms"),
    ("`tanh(dot + b)` 1024^3, 2 threads (same)", "BM_ProductTanh_Accy/shape:1/threads:2",
     ["BM_ProductTanh_OpenBLASThenEigen/shape:1/threads:2"], "ms"),
    ("perceptron training step (valueAndGrad), 1 thread", "BM_PerceptronStep_Accy_1Thread",
     ["BM_PerceptronStep_PyTorch_1Thread"], "ms"),
    ("same, 2 threads", "BM_PerceptronStep_Accy_2Threads", ["BM_PerceptronStep_PyTorch_2Threads"], "ms"),
    ("2x2 max pooling of f32[32, 64, 56, 56], 1 thread", "BM_MaxPool_Accy_1Thread", ["BM_MaxPool_PyTorch_1Thread"], "ms"),
    ("same, 2 threads", "BM_MaxPool_Accy_2Threads", ["BM_MaxPool_PyTorch_2Threads"], "ms"),
    ("embedding gather, 2^20 rows of f32[2^20, 64], 1 thread (references: PyTorch, a copy of the bytes)",
     "BM_Embedding_Accy_1Thread", ["BM_Embedding_PyTorch_1Thread", "BM_Embedding_Memcpy_1Thread"], "ms"),
    ("same, against the best hand-written gather (prefetched, streaming stores), 1 thread",
     "BM_Embedding_Accy_1Thread", ["BM_Embedding_HandLoop_1Thread"], "ms"),
    ("same, 2 threads", "BM_Embedding_Accy_2Threads", ["BM_Embedding_PyTorch_2Threads"], "ms"),
    ("its gradient (scatterAdd of 2^20 rows into a zeroed table), 1 thread (reference: PyTorch index_add_)",
     "BM_EmbeddingGrad_Accy_1Thread", ["BM_EmbeddingGrad_PyTorch_1Thread"], "ms"),
    ("same, 2 threads", "BM_EmbeddingGrad_Accy_2Threads", ["BM_EmbeddingGrad_PyTorch_2Threads"], "ms"),
    ("its gradient against the hand-written loop (the table zeroed outside its timing), 1 thread",
     "BM_EmbeddingGrad_Accy_1Thread", ["BM_EmbeddingGrad_HandLoop_1Thread"], "ms"),
    ("same, 2 threads, split by ranges of rows (CpuOptions::scatter_split; reference: the default split)",
     "BM_EmbeddingGrad_AccyRanges_2Threads", ["BM_EmbeddingGrad_Accy_2Threads"], "ms"),
    ("same, 2 threads (references: each thread its half of every row, or the rows of its half of the table)",
     "BM_EmbeddingGrad_Accy_2Threads",
     ["BM_EmbeddingGrad_HandColumns_2Threads", "BM_EmbeddingGrad_HandRanges_2Threads"], "ms"),
    ("3x3 convolution 64 -> 64 of f32[32, 64, 56, 56], 1 thread", "BM_Conv3x3_Accy_1Thread",
     ["BM_Conv3x3_PyTorch_1Thread"], "ms"),
    ("same, 2 threads", "BM_Conv3x3_Accy_2Threads", ["BM_Conv3x3_PyTorch_2Threads"], "ms"),
    ("its backward pass (input and weight gradients), 1 thread", "BM_Conv3x3Grad_Accy_1Thread",
     ["BM_Conv3x3Grad_PyTorch_1Thread"], "ms"),
    ("same, 2 threads", "BM_Conv3x3Grad_Accy_2Threads", ["BM_Conv3x3Grad_PyTorch_2Threads"], "ms"),
    ("digits-sized network, one training step (batch 256, 8x8, conv 16, pool, dense 10), 1 thread",
     "BM_DigitsStep_Accy_1Thread", ["BM_DigitsStep_PyTorch_1Thread"], "ms"),
    ("same, 2 threads", "BM_DigitsStep_Accy_2Threads", ["BM_DigitsStep_PyTorch_2Threads"], "ms"),
    ("separable 3x3 blur of f32[4096, 4096], zero outside, 1 thread", "BM_Blur_Accy_1Thread",
     ["BM_Blur_Halide_1Thread"], "ms"),
    ("same, 2 threads", "BM_Blur_Accy_2Threads", ["BM_Blur_Halide_2Threads"], "ms"),
    ("`uniform` f32, 2^24 values, 1 thread", "BM_Uniform_Accy_1Thread",
     ["BM_Uniform_NumPy_1Thread", "BM_Uniform_PyTorch_1Thread"], "ms"),
    ("`normal` f32, 2^24 values, 1 thread", "BM_Normal_Accy_1Thread",
     ["BM_Normal_NumPy_1Thread", "BM_Normal_PyTorch_1Thread"], "ms"),
    ("N-body, 1,024 bodies, 20 leapfrog steps in one scan, f64, 1 thread", "BM_NBody_Accy_1Thread",
     ["BM_NBody_NumPy_1Thread", "BM_NBody_PyTorch_1Thread"], "ms"),
    ("same, 2 threads", "BM_NBody_Accy_2Threads", ["BM_NBody_PyTorch_2Threads", "BM_NBody_PyTorch_1Thread"], "ms"),
    ("damped oscillator, 8 f32 lanes, 10^5 steps of one scan (reference: the C++ loop)",
     "BM_Loop_Oscillator_Accy_1Thread", ["BM_Loop_Oscillator_CppLoop"], "ms"),
    ("4,096-op fused chain, default fusion limits (reference: one kernel; no fusion)", "BM_Chain4096_Accy_Fused",
     ["BM_Chain4096_Accy_OneKernel", "BM_Chain4096_Accy_Unfused"], "ms"),
    ("tone program, compile", "BM_Tone_Compile", [], "us"),
    ("tone program, launch", "BM_Tone_Launch", [], "ns"),
    ("tone value-and-gradient, launch (reference: the plain launch)", "BM_ToneValueAndGrad_Launch",
     ["BM_Tone_Launch"], "ns"),
]
ACCYD_ROWS = [
    ("tone invoke round trip, gRPC over the Unix socket (reference: in process)", "BM_ToneInvoke_AccydUnixSocket",
     ["BM_ToneInvoke_InProcess"], "us"),
    ("tone invoke round trip, invoke channel (reference: gRPC)", "BM_ToneInvoke_AccydChannel",
     ["BM_ToneInvoke_AccydUnixSocket"], "us"),
    ("64 MiB in + 64 MiB out, shared memory, gRPC call (reference: the kernel in process)",
     "BM_Invoke64MiB_AccydSharedMemory", ["BM_Invoke64MiB_InProcessKernel"], "ms"),
    ("64 MiB in + 64 MiB out, shared memory, invoke channel (reference: the kernel in process)",
     "BM_Invoke64MiB_AccydChannel", ["BM_Invoke64MiB_InProcessKernel"], "ms"),
    ("same, inline bytes through gRPC (reference: shared memory)", "BM_Invoke64MiB_AccydInlineBytes",
     ["BM_Invoke64MiB_AccydSharedMemory"], "ms"),
    ("tone compile + release, cache hit (reference: a fresh compile)", "BM_Compile_AccydCacheHit",
     ["BM_Compile_AccydFresh"], "us"),
]
GPU_ROWS = [
    ("copy kernel `y = x + 0`, 2^22 f32 (host-staged launch path)", "BM_Gpu_Copy", [], "ms"),
    ("`y = 2x + b`, 2^22 f32 (reference: the copy kernel)", "BM_Gpu_Elementwise", ["BM_Gpu_Copy"], "ms"),
    ("`sum`, 2^22 f32, the device's choice (reference: the copy kernel)", "BM_Gpu_Sum", ["BM_Gpu_Copy"], "ms"),
    ("`sum`, split workgroup tree with subgroups (reference: the device's choice)", "BM_Gpu_SumTree", ["BM_Gpu_Sum"],
     "ms"),
    ("`sum`, split workgroup tree without subgroups (reference: with them)", "BM_Gpu_SumTreeWithoutSubgroups",
     ["BM_Gpu_SumTree"], "ms"),
    ("`dot` 512^3 f32, the device's choice: tiled, 4 x 4 outputs per invocation", "BM_Gpu_Dot512", [], "ms"),
    ("`dot` 512^3 untiled (reference: the device's choice)", "BM_Gpu_Dot512Untiled", ["BM_Gpu_Dot512"], "ms"),
    ("`dot` 512^3 tiled, one output per invocation (reference: the device's choice)",
     "BM_Gpu_Dot512TiledOneOutputPerInvocation", ["BM_Gpu_Dot512"], "ms"),
]

# Rows whose references ran alternately with Accy in the same benchmark
# (bench_util.h's runAlternating): (label, benchmark, unit). The ratio is
# the median of the repetitions' ratios of medians.
CPU_ALTERNATING = [
    ("`y = sin(a*x + b) * c`, 2^24 f32, 1 thread (reference: Eigen)", "BM_SinAffine_Alternating_1Thread", "ms"),
    ("`sum`, 2^24 f32, 1 thread (references: AVX-512 and AVX2 loops)", "BM_Sum_Alternating_1Thread", "ms"),
    ("same, 2 threads (references: each thread a half)", "BM_Sum_Alternating_2Threads", "ms"),
    ("`y = a*x + b`, 2^24 f32, 1 thread (references: AVX-512 and AVX2 loops, plain and non-temporal stores; Eigen)",
     "BM_Affine_Alternating_1Thread", "ms"),
    ("same, 2 threads (references: the loops, each thread a half)", "BM_Affine_Alternating_2Threads", "ms"),
]
ACCYD_ALTERNATING = [
    ("64 MiB in + 64 MiB out, shared memory, invoke channel (reference: the kernel in process)",
     "BM_Invoke64MiB_ChannelAlternating", "ms"),
]

TO_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


def load(path):
    with open(path) as f:
        report = json.load(f)
    runs = {}
    for b in report.get("benchmarks", []):
        # "BM_Sum_Accy_1Thread/real_time" -> "BM_Sum_Accy_1Thread";
        # "BM_Product_Accy/shape:0/threads:1/real_time" keeps its arguments.
        parts = (b.get("run_name") or b["name"]).split("/")
        parts = [q for q in parts if q not in ("real_time", "manual_time") and not q.startswith("iterations:")]
        name = "/".join(parts)
        kind = b.get("aggregate_name")
        if b.get("error_occurred"):
            runs[name] = {"error": b.get("error_message", "error")}
            continue
        if kind not in (None, "median"):
            continue
        if kind is None and name in runs and "median" in runs[name]:
            continue
        entry = {"ns": b["real_time"] * TO_NS[b.get("time_unit", "ns")], "counters": b}
        if kind == "median":
            entry["median"] = True
        if kind == "median" or name not in runs:
            runs[name] = entry
    return report.get("context", {}), runs


def show(ns, unit):
    value = ns / TO_NS[unit]
    return ("%.3g" % value if value < 100 else "%.0f" % value) + " " + unit


def extra(run):
    c = run["counters"]
    if "GFLOP/s" in c:
        return " (%.1f GFLOP/s)" % (c["GFLOP/s"])
    if "bytes_per_second" in c:
        return " (%.1f GB/s)" % (c["bytes_per_second"] / 1e9)
    if "p50_us" in c:
        return " (p50 %.1f us, p99 %.1f us)" % (c["p50_us"], c["p99_us"])
    return ""


def table(title, rows, runs, out):
    out.append("| %s | Accy | best reference (same run) | ratio (reference time / Accy time) |" % title)
    out.append("| --- | --- | --- | --- |")
    for label, accy, refs, unit in rows:
        run = runs.get(accy)
        if run is None:
            continue
        if "error" in run:
            out.append("| %s | FAILED: %s | | |" % (label, run["error"]))
            continue
        ran = [(r, runs[r]) for r in refs if r in runs and "error" not in runs[r]]
        skipped = ["%s (%s)" % (r, runs[r]["error"]) for r in refs if r in runs and "error" in runs[r]]
        cell = show(run["ns"], unit) + extra(run)
        if not ran:
            out.append("| %s | %s | %s | |" % (label, cell, "; ".join(skipped)))
            continue
        best_name, best = min(ran, key=lambda kv: kv[1]["ns"])
        ratio = best["ns"] / run["ns"]
        others = ", ".join("%s %s" % (n.replace("BM_", ""), show(r["ns"], unit)) for n, r in ran if n != best_name)
        ref_cell = "%s %s%s" % (best_name.replace("BM_", ""), show(best["ns"], unit), extra(best))
        if best["counters"].get("label"):
            ref_cell += " [%s]" % best["counters"]["label"]
        if others:
            ref_cell += "; also " + others
        if skipped:
            ref_cell += "; not run: " + "; ".join(skipped)
        shown = "%.2fx" % ratio if ratio >= 0.01 else "1/%.0fx" % (1 / ratio)
        out.append("| %s | %s | %s | **%s** |" % (label, cell, ref_cell, shown))
    out.append("")


def alternating(title, rows, runs, out):
    shown = [(label, runs[name], unit) for label, name, unit in rows if name in runs]
    if not shown:
        return
    out.append("| %s, alternated call by call | Accy | fastest reference | ratio (reference time / Accy time) |" % title)
    out.append("| --- | --- | --- | --- |")
    for label, run, unit in shown:
        if "error" in run:
            out.append("| %s | FAILED: %s | | |" % (label, run["error"]))
            continue
        c = run["counters"]
        out.append("| %s | %s | %s | **%.2fx** |" % (label, show(c["accy_ns"], unit), show(c["ref_ns"], unit),
                                                     c["ratio"]))
    out.append("")


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    out = []
    context, cpu = load(argv[1])
    out.append("CPU: %s; %s cores; OpenBLAS kernel %s (%s)" % (
        context.get("cpu_model", "unknown"), context.get("num_cpus", "?"), context.get("openblas_kernel", "?"),
        context.get("openblas_config", "?")))
    out.append("")
    table("CPU benchmark", CPU_ROWS, cpu, out)
    alternating("CPU benchmark", CPU_ALTERNATING, cpu, out)
    if len(argv) > 2:
        _, accyd = load(argv[2])
        table("accyd benchmark", ACCYD_ROWS, accyd, out)
        alternating("accyd benchmark", ACCYD_ALTERNATING, accyd, out)
    if len(argv) > 3:
        gctx, gpu = load(argv[3])
        out.append("Vulkan device: %s" % gctx.get("vulkan_device", "?"))
        out.append("")
        table("Vulkan benchmark", GPU_ROWS, gpu, out)
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
