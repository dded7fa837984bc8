"""How often one steady-state run reads each table's metadata from its catalog.

    python tests/benchmark/count_catalog_reads.py [--runs 3]

On Glue every load of a table is a GetTable call plus an S3 GET of its metadata file (and a
refresh of a loaded table one more GetTable), so these counts are a fixed cost per run there
that a local run barely shows. Here, with the benchmark's Hadoop catalog, a load opens the
table's version-hint.text and a metadata read opens a vN.metadata.json: the job runs under
`strace -f -e openat` (Linux, strace installed), a 10-row batch with the benchmark's checks into
an existing table and ledger, warm-up runs first; only the opens between two marker files,
around the last run, are counted.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))


def child(work, runs):
    """The runs themselves (in the traced process): warm-ups, then one run between the markers."""
    sys.path.insert(0, HERE)
    import bench_wap
    for spark, rows, csv_path, schema in bench_wap.batch_files(work, [10], "count"):
        bench_wap.create_table(spark, "wap", schema)
        for r in range(runs):
            bench_wap.wap_run(csv_path, "wap", r * rows, f"warm{r}", "branch")
        open(os.path.join(work, "MARK_START"), "w").close()
        bench_wap.wap_run(csv_path, "wap", runs * rows, "counted", "branch")
        open(os.path.join(work, "MARK_END"), "w").close()


def count(trace):
    """{(table, what): opens} between the markers."""
    counts, inside = Counter(), False
    for line in open(trace):
        if "ENOENT" in line or "openat(" not in line:
            continue
        path = re.search(r'openat\([^"]*"([^"]+)"', line)
        if not path:
            continue
        path = path.group(1)
        if path.endswith("MARK_START"):
            inside = True
        elif path.endswith("MARK_END"):
            break
        elif inside and "/metadata/" in path and "/." not in path:
            table = path.split("/metadata/")[0].rsplit("/", 1)[-1]
            if path.endswith("version-hint.text"):
                counts[(table, "loads")] += 1
            elif path.endswith(".metadata.json"):
                counts[(table, "metadata reads")] += 1
    return counts


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3, help="warm-up runs before the counted one")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.child, args.runs)
    work = tempfile.mkdtemp(prefix="count_catalog_reads_")
    trace = os.path.join(work, "openat.trace")
    subprocess.run(["strace", "-f", "-qq", "-e", "trace=openat", "-o", trace, sys.executable,
                    os.path.abspath(__file__), "--child", work, "--runs", str(args.runs)],
                   check=True, stdout=subprocess.DEVNULL)
    for (table, what), n in sorted(count(trace).items()):
        print(f"{table:14s} {what:15s} {n}")


if __name__ == "__main__":
    main()
