"""Formats window.benchDone's JSON (bench.js) as docs/PERFORMANCE.md rows."""
import json
import sys

r = json.load(sys.stdin)
print("adapter:", r["adapter"])
print("| WGSL benchmark, 2^22 f32 | Accy | hand-written WGSL | ratio (hand-written time / Accy time) | largest relative difference |")
print("| --- | --- | --- | --- | --- |")
for row in r["rows"]:
    ratio = row["reference_ms"] / row["accy_ms"]
    print(f"| {row['name']} | {row['accy_ms']:.1f} ms | {row['reference_ms']:.1f} ms | **{ratio:.2f}x** | "
          f"{row['largest_relative_difference']:.1e} |")
