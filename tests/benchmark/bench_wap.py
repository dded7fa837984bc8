"""Benchmark: what Write-Audit-Publish costs on top of a plain Iceberg append.

    python tests/benchmark/bench_wap.py --rows 10000000 --repeats 3

In one process and one SparkSession (local[2] unless one is active), on a generated CSV batch of
16 columns (ints, doubles, strings, timestamps, booleans, some NULLs), it measures:
  1. plain: read CSV -> transform -> writeTo(table).append()   (the lower bound)
  2. wap:   the job's own path: stage on a branch -> audit 11 checks -> fast_forward
  3. audit scaling: the audit of one fixed batch on a table of 1x and 10x the batch
  4. publish: fast_forward time at both table sizes
  5. Spark jobs launched by the audit, peak driver (JVM) memory
and prints a table, writes JSON, and draws a PNG chart. With --sweep 1000000,10000000 it instead
measures, at each batch size, 0, 4, 8 and 16 mixed checks with default settings (plus, at 8,
--audit_source write and a batch with one failing check): WAP/plain, audit and publish seconds,
and the bytes and records the audit read. With --steady it measures the steady state (existing
table and ledger), in this process, or with --fresh_processes true every run in a new one. With
--flights it measures issue 24's case: a new table each run from a flights CSV (19 columns, as
nycflights13 spells them) read with inferSchema, and that issue's 8 checks.
"""
import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
import wap_etl  # noqa: E402

CATALOG = "bench"
NAMESPACE = "bench"
COLUMNS = """
    id AS id,
    CAST(id % 100000 AS INT) AS customer_id,
    ROUND((id % 10007) * 0.37, 2) AS amount,
    IF(id % 11 = 0, NULL, ROUND((id % 7) * 0.05, 2)) AS discount,
    CAST(1 + id % 9 AS INT) AS quantity,
    ELT(CAST(1 + id % 3 AS INT), 'new', 'paid', 'shipped') AS status,
    CONCAT('user', id % 100000, '@example.com') AS email,
    ELT(CAST(1 + id % 5 AS INT), 'DE', 'FR', 'US', 'JP', 'BR') AS country,
    IF(id % 13 = 0, NULL, CONCAT('city_', id % 997)) AS city,
    CONCAT('sku-', LPAD(CAST(id % 50000 AS STRING), 6, '0')) AS product,
    ELT(CAST(1 + id % 4 AS INT), 'books', 'toys', 'garden', 'food') AS category,
    TIMESTAMPADD(SECOND, -CAST(id % 86400 AS INT), CURRENT_TIMESTAMP()) AS created_at,
    IF(id % 5 = 0, NULL, TIMESTAMPADD(SECOND, -CAST(id % 3600 AS INT), CURRENT_TIMESTAMP())) AS updated_at,
    ROUND(RAND(42) * 100, 3) AS score,
    id % 17 = 0 AS is_gift,
    IF(id % 3 = 0, NULL, 'standard delivery') AS note
"""
CHECKS = [
    {"check": "not_null", "column": "id"},
    {"check": "unique", "columns": ["id"]},
    {"check": "between", "column": "amount", "min": 0, "max": 100000},
    {"check": "between", "column": "quantity", "min": 1, "max": 9},
    {"check": "accepted_values", "column": "status", "values": ["new", "paid", "shipped"]},
    {"check": "regex", "column": "email", "pattern": "^[^@]+@[^@]+$"},
    {"check": "expression", "expr": "discount IS NULL OR discount < amount OR amount = 0"},
    {"check": "not_null", "column": "created_at"},
    {"check": "row_count", "min": 1},
    {"check": "freshness", "column": "created_at", "max_age_hours": 48},
    {"check": "volume", "min_ratio": 0.1, "max_ratio": 10},
]


# The sweep's checks, mixed types from the first: the first 4, 8 and all 16 are its points.
SWEEP_CHECKS = [
    {"check": "not_null", "column": "id"},
    {"check": "between", "column": "amount", "min": 0, "max": 100000},
    {"check": "accepted_values", "column": "status", "values": ["new", "paid", "shipped"]},
    {"check": "unique", "columns": ["id"]},
    {"check": "regex", "column": "email", "pattern": "^[^@]+@[^@]+$"},
    {"check": "row_count", "min": 1},
    {"check": "freshness", "column": "created_at", "max_age_hours": 48},
    {"check": "expression", "expr": "discount IS NULL OR discount < amount OR amount = 0"},
    {"check": "not_null", "column": "created_at"},
    {"check": "between", "column": "quantity", "min": 1, "max": 9},
    {"check": "accepted_values", "column": "country", "values": ["DE", "FR", "US", "JP", "BR"]},
    {"check": "stat", "column": "amount", "stat": "mean", "min": 0, "max": 10000},
    {"check": "not_null", "column": "customer_id"},
    {"check": "between", "column": "score", "min": 0, "max": 100},
    {"check": "volume", "min_ratio": 0.1, "max_ratio": 10},
    {"check": "stat", "column": "discount", "stat": "null_fraction", "max": 0.2},
]
FAILING_CHECK = {"check": "between", "column": "quantity", "max": 8, "name": "quantity_at_most_8"}

# Issue 24's case: flights as nycflights13 spells them (19 columns, NULLs where a flight did not
# fly), a new table each run, the CSV read with inferSchema, and its 8 checks.
FLIGHTS_COLUMNS = """
    2013 AS year,
    CAST(1 + pmod(hash(id, 1), 12) AS INT) AS month,
    CAST(1 + pmod(hash(id, 2), 28) AS INT) AS day,
    IF(pmod(hash(id, 3), 40) = 0, NULL, 500 + pmod(hash(id, 4), 1800)) AS dep_time,
    500 + pmod(hash(id, 5), 1800) AS sched_dep_time,
    IF(pmod(hash(id, 3), 40) = 0, NULL, pmod(hash(id, 6), 200) - 20) AS dep_delay,
    IF(pmod(hash(id, 3), 36) = 0, NULL, pmod(hash(id, 7), 2400)) AS arr_time,
    pmod(hash(id, 8), 2400) AS sched_arr_time,
    IF(pmod(hash(id, 3), 36) = 0, NULL, pmod(hash(id, 9), 220) - 60) AS arr_delay,
    ELT(CAST(1 + pmod(hash(id, 10), 16) AS INT), '9E', 'AA', 'AS', 'B6', 'DL', 'EV', 'F9', 'FL', \
        'HA', 'MQ', 'OO', 'UA', 'US', 'VX', 'WN', 'YV') AS carrier,
    CAST(1 + pmod(hash(id, 11), 8500) AS INT) AS flight,
    IF(pmod(hash(id, 3), 150) = 0, NULL, CONCAT('N', CAST(100 + pmod(hash(id, 12), 4000) AS STRING), \
        ELT(CAST(1 + pmod(hash(id, 13), 4) AS INT), 'AA', 'UA', 'JB', 'DL'))) AS tailnum,
    ELT(CAST(1 + pmod(hash(id, 14), 3) AS INT), 'EWR', 'JFK', 'LGA') AS origin,
    CONCAT(CHAR(65 + pmod(hash(id, 15), 21)), CHAR(65 + pmod(hash(id, 16), 5)), 'X') AS dest,
    IF(pmod(hash(id, 3), 36) = 0, NULL, 20 + pmod(hash(id, 17), 680)) AS air_time,
    17 + pmod(hash(id, 18), 4967) AS distance,
    5 + pmod(hash(id, 5), 18) AS hour,
    pmod(hash(id, 19), 60) AS minute,
    TIMESTAMPADD(HOUR, pmod(hash(id, 20), 8760), TIMESTAMP'2013-01-01 05:00:00') AS time_hour
"""
FLIGHTS_CHECKS = [
    {"check": "between", "column": "month", "min": 1, "max": 12},
    {"check": "between", "column": "distance", "min": 1, "max": 5000},
    {"check": "accepted_values", "column": "carrier",
     "values": ["9E", "AA", "AS", "B6", "DL", "EV", "F9", "FL", "HA", "MQ", "OO", "UA", "US", "VX", "WN", "YV"]},
    {"check": "expression", "expr": "distance > 0"},
    {"check": "not_null", "column": "flight"},
    {"check": "not_null", "column": "origin"},
    {"check": "regex", "column": "origin", "pattern": "^(EWR|JFK|LGA)$"},
    {"check": "row_count", "min": 1},
]


def session():
    from pyspark.sql import SparkSession
    spark = SparkSession.getActiveSession()
    if spark is None:
        spark = (SparkSession.builder.master("local[2]").appName("bench_wap")
                 .config(*wap_etl.iceberg_jar_conf())
                 .config("spark.sql.extensions", wap_etl.ICEBERG_EXTENSIONS)
                 .config("spark.ui.showConsoleProgress", "false")
                 .config("spark.driver.memory", "4g")
                 .getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
    return spark


def use_catalog(spark, warehouse):
    prefix = f"spark.sql.catalog.{CATALOG}"
    spark.conf.set(prefix, "org.apache.iceberg.spark.SparkCatalog")
    spark.conf.set(f"{prefix}.type", "hadoop")
    spark.conf.set(f"{prefix}.warehouse", warehouse)
    spark.conf.set(f"{prefix}.cache-enabled", "false")


def generate(spark, rows, columns=COLUMNS):
    """A realistic batch: 16 columns, some NULLs (or the flights' 19)."""
    return spark.range(rows, numPartitions=max(2, rows // 2_500_000)).selectExpr(
        *[c.strip() for c in columns.strip().split(",\n")])


def make_csv(spark, rows, path, columns=COLUMNS):
    """The batch as a few CSV files with a header."""
    df = generate(spark, rows, columns)
    df.write.mode("overwrite").option("header", "true").csv(path)
    return df.schema


def offset_transform(offset):
    """Each repeat gets fresh ids, so `unique` passes honestly on every batch."""
    from pyspark.sql import functions as F

    def transform(df):
        return df.withColumn("id", F.col("id") + F.lit(offset))
    return transform


def create_table(spark, name, schema, partitioned=False):
    ddl = spark.sparkContext._jvm.org.apache.spark.sql.types.DataType.fromJson(schema.json()).toDDL()
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.{NAMESPACE}")
    spark.sql(f"DROP TABLE IF EXISTS {CATALOG}.{NAMESPACE}.{name}")
    spark.sql(f"CREATE TABLE {CATALOG}.{NAMESPACE}.{name} ({ddl}) USING iceberg "
              "TBLPROPERTIES ('format-version'='2', 'write.wap.enabled'='true')")
    return f"{CATALOG}.{NAMESPACE}.{name}"


def plain_append(spark, csv_path, table, offset):
    """The lower bound: what a job without WAP does (same reader, same schema, same transform).
    Returns its report, timed, its Spark jobs and Iceberg commits counted by the job's own steps:
    `read` (the reader, lazy: the CSV is read by the write), `write` (the append alone)."""
    report = wap_etl.RunReport(started_at=datetime.now(timezone.utc).isoformat())
    with wap_etl.timed(report, "read"):
        schema = spark.table(table).schema
        df = (spark.read.option("header", "true").option("mode", "FAILFAST").schema(schema)
              .csv(csv_path))
    with wap_etl.timed(report, "write"):
        offset_transform(offset)(df).writeTo(table).append()
    wap_etl.close_timings(report)
    wap_etl.count_spark_jobs(spark, report)
    wap_etl.count_iceberg_commits(spark, report, [wap_etl.TableRef(*table.split("."))])
    return report


def wap_run(csv_path, table, offset, batch_id, audit_source, checks=CHECKS, expect=0):
    """One run of the job; `offset` added to the ids (None: the batch as it is)."""
    wap_etl.transform = offset_transform(offset) if offset is not None else (lambda df: df)
    code, report = wap_etl.run([
        "--source_path", csv_path, "--source_format", "csv", "--table", f"{NAMESPACE}.{table}",
        "--catalog", CATALOG, "--checks", json.dumps(checks), "--batch_id", batch_id,
        "--audit_source", audit_source])
    if code != expect:
        raise SystemExit(f"wap run exited {code}, expected {expect}: {report.error or report.checks}")
    return report


def audit_input(spark, job_ids):
    """Bytes and records the audit's Spark jobs read (data files, and the manifests the metadata
    proof reads), from the Spark UI's REST API; None without a UI."""
    import urllib.request
    sc = spark.sparkContext
    if not sc.uiWebUrl:
        return None
    infos = [sc.statusTracker().getJobInfo(j) for j in job_ids]
    stages = {s for info in infos if info is not None for s in info.stageIds}
    total = {"bytes": 0, "records": 0, "tasks": 0}
    for stage in stages:
        url = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/stages/{stage}"
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                attempts = json.load(r)
        except OSError:
            continue
        for a in attempts[:1]:
            total["bytes"] += a.get("inputBytes", 0)
            total["records"] += a.get("inputRecords", 0)
            total["tasks"] += a.get("numTasks", 0)
    return total


def count_audit_jobs(spark, fn):
    """Run fn with every Spark job of the audit step tagged, and count them."""
    sc = spark.sparkContext
    real_audit = wap_etl.audit

    def tagged(*args, **kwargs):
        sc.setJobGroup("bench_audit", "audit")
        try:
            return real_audit(*args, **kwargs)
        finally:
            sc.setLocalProperty("spark.jobGroup.id", None)

    wap_etl.audit = tagged
    before = set(sc.statusTracker().getJobIdsForGroup("bench_audit"))
    try:
        result = fn()
    finally:
        wap_etl.audit = real_audit
    jobs = [j for j in sc.statusTracker().getJobIdsForGroup("bench_audit") if j not in before]
    return result, jobs


def profile_audit(spark, table, report):
    """Where the audit's time goes: the same staged batch audited by groups of checks."""
    t = wap_etl.TableRef(CATALOG, NAMESPACE, table)
    ledger = wap_etl.Ledger(spark, wap_etl.TableRef(CATALOG, NAMESPACE, f"{table}_wap_runs"),
                            f"{CATALOG}.{NAMESPACE}.{table}")
    staged_df = wap_etl.read_staged(spark, t, report.staged_snapshot, report.main_snapshot_before,
                                    summary=wap_etl.snapshot_info(spark, t, report.staged_snapshot).summary)
    checks = wap_etl.parse_checks(CHECKS)
    groups = {"row checks + freshness (one scan)": [c for c in checks if c.row_level or c.check == "freshness"],
              "unique (main look-up + key proof)": [c for c in checks if c.check == "unique"],
              "row_count + volume (count scan + metadata)": [c for c in checks if c.check in ("row_count", "volume")]}
    profile = {}
    for name, subset in groups.items():
        profile[name] = round(timed(lambda: wap_etl.audit(
            wap_etl.Audit(spark, t, staged_df, report.main_snapshot_before, ledger), subset))[0], 3)
    return profile


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def median_steps(timings):
    """Each step's median seconds over runs (a step a run lacks took 0 s in it)."""
    steps = dict.fromkeys(k for t in timings for k in t)
    return {k: round(statistics.median(t.get(k, 0.0) for t in timings), 3) for k in steps}


def summary(values):
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3),
            "max": round(max(values), 3), "runs": [round(v, 3) for v in values]}


def jvm_peak_rss_mb(spark):
    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def measure(rows, repeats, scaling_rows, work, audit_source):
    spark = session()
    use_catalog(spark, os.path.join(work, "warehouse"))
    csv_path = os.path.join(work, "batch_csv")
    schema = make_csv(spark, rows, csv_path)
    results = {"rows": rows, "repeats": repeats, "columns": len(schema.fields),
               "checks": len(CHECKS), "audit_source": audit_source}

    # 1 + 2: plain vs wap on the same input, interleaved so drift hits both alike
    plain_table = create_table(spark, "plain", schema)
    create_table(spark, "wap", schema)
    plain_append(spark, csv_path, plain_table, 0)            # warm-up and history for `volume`
    wap_run(csv_path, "wap", 0, "warmup", audit_source)
    plain, wap, audit, publish, reports, plain_reports = [], [], [], [], [], []
    jobs = None
    for r in range(1, repeats + 1):
        seconds, plain_report = timed(lambda: plain_append(spark, csv_path, plain_table, r * rows))
        plain.append(seconds)
        plain_reports.append(plain_report.timings)
        seconds, (report, jobs) = timed(lambda: count_audit_jobs(
            spark, lambda: wap_run(csv_path, "wap", r * rows, f"rep{r}", audit_source)))
        jobs = len(jobs)
        wap.append(seconds)
        audit.append(report.timings["audit"])
        publish.append(report.timings["publish"])
        reports.append(report.timings)
    results["plain_seconds"] = summary(plain)
    results["wap_seconds"] = summary(wap)
    results["wap_over_plain"] = round(statistics.median(wap) / statistics.median(plain), 3)
    results["wap_step_seconds"] = median_steps(reports)
    results["plain_step_seconds"] = median_steps(plain_reports)
    results["audit_spark_jobs"] = jobs
    results["audit_profile_seconds"] = profile_audit(spark, "wap", report)

    # 3 + 4: the same fixed batch audited and published on a 1x and a 10x table
    if not scaling_rows:
        return finish_results(results, spark)
    scale_csv = os.path.join(work, "scale_csv")
    make_csv(spark, scaling_rows, scale_csv)
    scaling = {}
    for factor in (1, 10):
        name = f"scale{factor}"
        table = create_table(spark, name, schema)
        generate(spark, scaling_rows * factor).writeTo(table).append()
        audits, publishes = [], []
        for r in range(1, repeats + 1):
            report = wap_run(scale_csv, name, (factor + r) * scaling_rows * 10, f"s{factor}_{r}",
                             audit_source)
            audits.append(report.timings["audit"])
            publishes.append(report.timings["publish"])
        scaling[f"{factor}x"] = {"table_rows": scaling_rows * factor, "audit_seconds": summary(audits),
                                 "publish_seconds": summary(publishes)}
    results["scaling_batch_rows"] = scaling_rows
    results["scaling"] = scaling
    results["audit_10x_over_1x"] = round(scaling["10x"]["audit_seconds"]["median"]
                                         / scaling["1x"]["audit_seconds"]["median"], 3)
    results["publish_max_seconds"] = max(v["publish_seconds"]["max"] for v in scaling.values())
    return finish_results(results, spark)


def batch_files(work, rows_list, name):
    """For each batch size, its CSV batch in `work`: (spark, rows, path, schema)."""
    spark = session()
    use_catalog(spark, os.path.join(work, "warehouse"))
    for rows in rows_list:
        csv_path = os.path.join(work, f"{name}_csv_{rows}")
        yield spark, rows, csv_path, make_csv(spark, rows, csv_path)


def sweep(rows_list, repeats, work, counts=(0, 4, 8, 16), extra=True):
    """WAP against plain at 0, 4, 8 and 16 checks (`counts`) for each batch size, with default
    settings; at 8 checks also (`extra`) --audit_source write and a batch with one failing check
    (exit 3). Runs of a point alternate, so drift hits all alike."""
    points = []
    for spark, rows, csv_path, schema in batch_files(work, rows_list, "sweep"):
        for n in counts:
            variants = {"branch": (SWEEP_CHECKS[:n], "branch", 0)}
            if n == 8 and extra:
                variants["write"] = (SWEEP_CHECKS[:8], "write", 0)
                variants["failing"] = (SWEEP_CHECKS[:8] + [FAILING_CHECK], "branch", 3)
            plain_table = create_table(spark, "plain", schema)
            for v in variants:
                create_table(spark, f"wap_{v}", schema)
            if not points:  # the JVM's first jobs are slow: warm up once, unmeasured
                plain_append(spark, csv_path, plain_table, 0)
                wap_run(csv_path, "wap_branch", 0, "warmup", "branch", SWEEP_CHECKS[:n])
            plain, runs = [], {v: [] for v in variants}
            for r in range(1, repeats + 1):
                plain.append(timed(lambda: plain_append(spark, csv_path, plain_table, r * rows))[0])
                for v, (checks, source, expect) in variants.items():
                    seconds, (report, jobs) = timed(lambda: count_audit_jobs(spark, lambda: wap_run(
                        csv_path, f"wap_{v}", r * rows, f"{v}{r}", source, checks, expect)))
                    runs[v].append({"seconds": seconds, "audit": report.timings.get("audit"),
                                    "publish": report.timings.get("publish", 0.0),
                                    "write": report.timings.get("write"), "jobs": len(jobs),
                                    "read": audit_input(spark, jobs),
                                    "decided_by": sorted({c.get("decided_by") for c in report.checks})})
            for v, measured in runs.items():
                point = {"rows": rows, "checks": len(variants[v][0]), "variant": v,
                         "plain_seconds": summary(plain),
                         "wap_seconds": summary([m["seconds"] for m in measured]),
                         "audit_seconds": summary([m["audit"] for m in measured]),
                         "write_seconds": summary([m["write"] for m in measured]),
                         "publish_seconds": summary([m["publish"] for m in measured]),
                         "audit_spark_jobs": measured[-1]["jobs"], "audit_read": measured[-1]["read"],
                         "decided_by": measured[-1]["decided_by"]}
                point["wap_over_plain"] = round(point["wap_seconds"]["median"]
                                                / point["plain_seconds"]["median"], 3)
                points.append(point)
                print_point(point)
            for table in ["plain"] + [f"wap_{v}" for v in variants]:
                spark.sql(f"DROP TABLE IF EXISTS {CATALOG}.{NAMESPACE}.{table} PURGE")
                spark.sql(f"DROP TABLE IF EXISTS {CATALOG}.{NAMESPACE}.{table}_wap_runs PURGE")
    return finish_results({"sweep": points, "repeats": repeats}, session())


def flights(rows, repeats, work):
    """Issue 24's measure: a new table every run, from the flights CSV read with inferSchema.
    Plain reads it so and `writeTo(table).create()`s; WAP runs the job on it (which creates the
    table, stages, audits the 8 checks and publishes). Alternating, each run's tables dropped
    before it (not timed)."""
    spark = session()
    use_catalog(spark, os.path.join(work, "warehouse"))
    csv_path = os.path.join(work, f"flights_csv_{rows}")
    make_csv(spark, rows, csv_path, FLIGHTS_COLUMNS)
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.{NAMESPACE}")

    def drop():
        for table in ("flights_plain", "flights_wap", "flights_wap_wap_runs"):
            spark.sql(f"DROP TABLE IF EXISTS {CATALOG}.{NAMESPACE}.{table} PURGE")

    def plain_create():
        report = wap_etl.RunReport(started_at=datetime.now(timezone.utc).isoformat())
        with wap_etl.timed(report, "read"):  # inferSchema reads the CSV once here
            df = spark.read.option("header", "true").option("inferSchema", "true").csv(csv_path)
        with wap_etl.timed(report, "write"):
            df.writeTo(f"{CATALOG}.{NAMESPACE}.flights_plain").create()
        wap_etl.close_timings(report)
        wap_etl.count_spark_jobs(spark, report)
        return report

    plain, wap = [], []
    for r in range(repeats + 1):  # the first pair warms the JVM up, unmeasured
        drop()
        plain_run = timed(plain_create)
        wap_run_ = timed(lambda: wap_run(csv_path, "flights_wap", None, f"flights{r}", "branch", FLIGHTS_CHECKS))
        if r:
            plain.append(plain_run)
            wap.append(wap_run_)
            print(f"pair {r}: plain {plain_run[0]:.2f} s, WAP {wap_run_[0]:.2f} s, "
                  f"{wap_run_[0] / plain_run[0]:.3f}x", flush=True)
    drop()
    point = {"rows": rows, "ledger_runs": 1, "flights": True, "checks": len(FLIGHTS_CHECKS),
             "plain": side(plain), "wap": side(wap),
             "pair_ratios": [round(w[0] / p[0], 3) for p, w in zip(plain, wap)],
             "decided_by": {c["name"]: c.get("decided_by") for c in wap[-1][1].checks}}
    point["wap_over_plain"] = round(point["wap"]["seconds"]["median"] / point["plain"]["seconds"]["median"], 3)
    point["median_pair_ratio"] = round(statistics.median(point["pair_ratios"]), 3)
    print_steady(point)
    print(f"pairs: {point['pair_ratios']} (median {point['median_pair_ratio']}); decided by {point['decided_by']}")
    return finish_results({"flights": point, "repeats": repeats}, spark)


def fill_ledger(spark, ledger_table, template, runs):
    """`runs` earlier published runs in the ledger, in one Spark write in the ledger's own schema:
    a real run's row, each copy with a run, batch, fingerprint and snapshot of its own, finished
    before it, and one input file of its own (an S3 path and its identity, as a daily run of one
    file records them; none matches a batch the benchmark loads)."""
    from pyspark.sql import functions as F
    row = spark.createDataFrame([wap_etl.ledger_row(template)], wap_etl.LEDGER_COLUMNS)
    n = F.col("_n")
    synthetic_id = F.concat(F.lit("synthetic-"), n.cast("string"))
    earlier = F.col("finished_at") - F.make_interval(mins=(n + 1).cast("int"))
    copies = (row.crossJoin(spark.range(runs).withColumnRenamed("id", "_n"))
              .withColumn("run_id", synthetic_id).withColumn("batch_id", synthetic_id)
              .withColumn("branch", F.concat(F.lit(wap_etl.BRANCH_PREFIX), synthetic_id))
              .withColumn("input_fingerprint", F.sha2(synthetic_id, 256))
              .withColumn("main_snapshot_before", -2 - n).withColumn("main_snapshot_after", -1 - n)
              .withColumn("staged_snapshot", -1 - n)
              .withColumn("input_files", F.array(F.concat(F.lit("s3://bench-input/day="), synthetic_id,
                                                          F.lit("/part-00000.csv"))))
              .withColumn("input_file_ids", F.array(F.substring(F.sha2(F.concat(F.lit("file "), synthetic_id),
                                                                       256), 1, 16)))
              .withColumn("started_at", earlier).withColumn("finished_at", earlier))
    copies.select(*row.columns).writeTo(ledger_table).append()


def side(runs):
    """One side's runs (wall seconds, report) as medians with min and max: the run, each step,
    and its Spark jobs and Iceberg commits per step."""
    reports = [report for _, report in runs]
    steps = dict.fromkeys(k for report in reports for k in report.timings)
    return {"seconds": summary([seconds for seconds, _ in runs]),
            "steps": {k: summary([report.timings.get(k, 0.0) for report in reports]) for k in steps},
            "spark_jobs": median_steps([report.spark_jobs for report in reports]),
            "iceberg_commits": median_steps([report.iceberg_commits for report in reports])}


def steady(rows_list, repeats, ledger_runs, work):
    """The steady state: an existing table and an existing ledger, as every run after the first
    sees them; WAP and plain alternate, so drift hits both alike. At each batch size, with the
    ledger of the warm-up run alone, then holding `ledger_runs` earlier runs."""
    points = []
    for spark, rows, csv_path, schema in batch_files(work, rows_list, "steady"):
        for earlier in sorted({0, ledger_runs}):
            plain_table = create_table(spark, "plain", schema)
            create_table(spark, "wap", schema)
            spark.sql(f"DROP TABLE IF EXISTS {CATALOG}.{NAMESPACE}.wap_wap_runs PURGE")
            plain_append(spark, csv_path, plain_table, 0)  # warm-up: history for `volume`, a ledger
            warmup = wap_run(csv_path, "wap", 0, "warmup", "branch")
            if earlier:
                fill_ledger(spark, f"{CATALOG}.{NAMESPACE}.wap_wap_runs", warmup, earlier)
            plain, wap = [], []
            for r in range(1, repeats + 1):
                plain.append(timed(lambda: plain_append(spark, csv_path, plain_table, r * rows)))
                wap.append(timed(lambda: wap_run(csv_path, "wap", r * rows, f"steady{r}", "branch")))
            point = {"rows": rows, "ledger_runs": earlier + 1, "plain": side(plain), "wap": side(wap)}
            point["wap_over_plain"] = round(point["wap"]["seconds"]["median"]
                                            / point["plain"]["seconds"]["median"], 3)
            points.append(point)
            print_steady(point)
    spark = session()
    for table in ("plain", "wap", "wap_wap_runs"):
        spark.sql(f"DROP TABLE IF EXISTS {CATALOG}.{NAMESPACE}.{table} PURGE")
    return finish_results({"steady": points, "repeats": repeats}, spark)


def fresh(rows_list, repeats, work):
    """The steady state as Glue runs it: every run a process (and a JVM) of its own, so each pays
    the JVM's start and the first run of each kind of work in it. WAP through its command line,
    plain through `--plain_process`, alternating on the same batch (fresh ids each repeat, since
    the command line's transform is the file's own); wall seconds from outside the process."""
    from pyspark.sql import functions as F
    spark = session()  # makes the batches only: the tables are the processes' own
    points, env = [], dict(os.environ, WAP_SPARK_MASTER=os.environ.get("WAP_SPARK_MASTER", "local[2]"))
    for rows in rows_list:
        warehouse = os.path.join(work, f"fresh_warehouse_{rows}")
        paths = [os.path.join(work, f"fresh_csv_{rows}_{r}") for r in range(repeats + 1)]
        for r, path in enumerate(paths):  # the warm-up's batch, then one per repeat
            generate(spark, rows).withColumn("id", F.col("id") + r * rows).write.mode("overwrite") \
                .option("header", "true").csv(path)

        def wap_process(r):
            argv = [sys.executable, os.path.join(ROOT, "wap_etl.py"), "--source_path", paths[r],
                    "--source_format", "csv", "--table", f"{NAMESPACE}.wap", "--catalog", CATALOG,
                    "--warehouse", warehouse, "--checks", json.dumps(CHECKS), "--batch_id", f"fresh{r}"]
            return process(argv, "WAP_STEPS ", env)

        def plain_process(r):
            argv = [sys.executable, os.path.abspath(__file__), "--plain_process", paths[r], warehouse]
            return process(argv, "PLAIN_STEPS ", env)

        plain_process(0)  # creates both tables, as create_table does
        wap_process(0)  # the table's first run: its ledger, and history for `volume`
        plain, wap = [], []
        for r in range(1, repeats + 1):
            plain.append(plain_process(r))
            wap.append(wap_process(r))
        point = {"rows": rows, "ledger_runs": 1, "fresh_processes": True,
                 "plain": side(plain), "wap": side(wap)}
        point["wap_over_plain"] = round(point["wap"]["seconds"]["median"]
                                        / point["plain"]["seconds"]["median"], 3)
        points.append(point)
        print_steady(point)
    return finish_results({"steady": points, "repeats": repeats, "fresh_processes": True}, spark)


def process(argv, marker, env):
    """(wall seconds, its report's steps) of one run in a process of its own."""
    import subprocess
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - start
    lines = [line for line in (done.stdout + done.stderr).splitlines() if marker in line]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"{argv[1]} exited {done.returncode}: {done.stderr[-2000:]}")
    steps = json.loads(lines[-1].split(marker, 1)[1])
    report = wap_etl.RunReport(timings=steps["timings"], spark_jobs=steps["spark_jobs"],
                               iceberg_commits=steps["iceberg_commits"])
    return seconds, report


def plain_once(csv_path, warehouse):
    """One plain append in this process, its session built as the job builds its own; the
    first creates both tables of `fresh`."""
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.appName("plain").master(os.environ.get("WAP_SPARK_MASTER", "local[*]"))
             .config("spark.sql.extensions", wap_etl.ICEBERG_EXTENSIONS)
             .config(*wap_etl.iceberg_jar_conf(None)).config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    use_catalog(spark, warehouse)
    if not spark.catalog.tableExists(f"{CATALOG}.{NAMESPACE}.plain"):
        for name in ("plain", "wap"):
            create_table(spark, name, generate(spark, 1).schema)
    report = plain_append(spark, csv_path, f"{CATALOG}.{NAMESPACE}.plain", 0)
    print("PLAIN_STEPS " + json.dumps({"timings": report.timings, "spark_jobs": report.spark_jobs,
                                       "iceberg_commits": report.iceberg_commits}), flush=True)


def print_steady(p):
    """WAP's and plain's steps side by side: where WAP's extra seconds go."""
    print(f"\n{p['rows']:,} rows, ledger of {p['ledger_runs']:,} runs: WAP / plain = {p['wap_over_plain']:.3f}")
    print(f"{'step':10} {'wap median':>10} {'min':>7} {'max':>7} {'jobs':>5} {'commits':>7}   "
          f"{'plain median':>12} {'min':>7} {'max':>7} {'jobs':>5} {'commits':>7}")
    steps = list(dict.fromkeys(list(wap_etl.RUN_STEPS) + list(wap_etl.SIDE_STEPS) + [wap_etl.OTHER_STEP]
                               + list(p["wap"]["steps"]) + list(p["plain"]["steps"])))
    for step in steps + ["run"]:
        cells = []
        for name, width in (("wap", 10), ("plain", 12)):
            s = p[name]
            v = s["seconds"] if step == "run" else s["steps"].get(step)
            jobs = sum(s["spark_jobs"].values()) if step == "run" else s["spark_jobs"].get(step, 0)
            commits = sum(s["iceberg_commits"].values()) if step == "run" else s["iceberg_commits"].get(step, 0)
            cells.append(f"{'-':>{width}} {'':>7} {'':>7} {'':>5} {'':>7}" if v is None else
                         f"{v['median']:{width}.2f} {v['min']:7.2f} {v['max']:7.2f} {jobs:5g} {commits:7g}")
        print(f"{step:10} {cells[0]}   {cells[1]}", flush=True)


def print_point(p):
    read = p["audit_read"] or {}
    print(f"{p['rows']:>11,} rows {p['checks']:>2} checks {p['variant']:8} plain "
          f"{p['plain_seconds']['median']:7.2f} s  wap {p['wap_seconds']['median']:7.2f} s  "
          f"= {p['wap_over_plain']:.3f}x  audit {p['audit_seconds']['median']:6.2f} s  "
          f"publish {p['publish_seconds']['median']:5.2f} s  audit read "
          f"{read.get('bytes', 0) / 1e6:8.1f} MB {read.get('records', 0):>11,} records", flush=True)


def draw_sweep_chart(r, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    sizes = sorted({p["rows"] for p in r["sweep"]})
    colors = ["#1a73e8", "#f9ab00", "#34a853", "#d93025"]
    for size, color in zip(sizes, colors):
        line = [p for p in r["sweep"] if p["rows"] == size and p["variant"] == "branch"]
        a.plot([p["checks"] for p in line], [p["wap_over_plain"] for p in line], "o-", color=color,
               label=f"{size:,} rows")
        b.plot([p["checks"] for p in line], [p["audit_seconds"]["median"] for p in line], "o-",
               color=color, label=f"audit, {size:,} rows")
        for p in r["sweep"]:
            if p["rows"] == size and p["variant"] != "branch":
                marker = {"write": "s", "failing": "x"}[p["variant"]]
                a.plot([p["checks"]], [p["wap_over_plain"]], marker, color=color, markersize=8,
                       label=f"{size:,} rows, {p['variant']}")
    a.axhline(1.05, color="#5f6368", linestyle="--", linewidth=1, label="target 1.05x")
    a.set_xticks([0, 4, 8, 16])
    a.set_xlabel("checks")
    a.set_ylabel("WAP / plain append (median)")
    a.set_title("WAP cost with default settings")
    a.legend(fontsize=7)
    b.set_xticks([0, 4, 8, 16])
    b.set_xlabel("checks")
    b.set_ylabel("audit seconds (median)")
    b.set_title("audit step")
    b.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def finish_results(results, spark):
    results["peak_driver_jvm_rss_mb"] = jvm_peak_rss_mb(spark)
    results["peak_python_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    results["machine"] = {"cpus": os.cpu_count(), "platform": platform.platform(),
                          "python": platform.python_version(),
                          "spark_master": spark.sparkContext.master,
                          "spark": spark.version}
    return results


def print_table(r):
    print(f"\nWAP benchmark: {r['rows']:,} rows x {r['columns']} columns, {r['checks']} checks, "
          f"{r['repeats']} repeats, audit from {r['audit_source']}, {r['machine']['spark_master']}")
    print(f"{'measure':36} {'median':>9} {'min':>9} {'max':>9}")
    for label, key in (("plain append (s)", "plain_seconds"), ("wap: write+audit+publish (s)", "wap_seconds")):
        v = r[key]
        print(f"{label:36} {v['median']:9.2f} {v['min']:9.2f} {v['max']:9.2f}")
    print(f"{'wap / plain':36} {r['wap_over_plain']:9.3f}")
    print(f"{'wap steps (median s)':36} " + ", ".join(f"{k} {v}" for k, v in r["wap_step_seconds"].items()))
    print(f"{'plain steps (median s)':36} " + ", ".join(f"{k} {v}" for k, v in r["plain_step_seconds"].items()))
    for size, v in r.get("scaling", {}).items():
        print(f"{'audit, table ' + size + ' (s)':36} {v['audit_seconds']['median']:9.2f} "
              f"{v['audit_seconds']['min']:9.2f} {v['audit_seconds']['max']:9.2f}")
        print(f"{'publish, table ' + size + ' (s)':36} {v['publish_seconds']['median']:9.2f} "
              f"{v['publish_seconds']['min']:9.2f} {v['publish_seconds']['max']:9.2f}")
    if "audit_10x_over_1x" in r:
        print(f"{'audit 10x / 1x':36} {r['audit_10x_over_1x']:9.3f}")
    print(f"{'Spark jobs in the audit':36} {r['audit_spark_jobs']:9d}")
    for name, seconds in r["audit_profile_seconds"].items():
        print(f"{'  audit profile: ' + name:60} {seconds:7.2f} s")
    print(f"{'peak driver JVM RSS (MB)':36} {r['peak_driver_jvm_rss_mb']}")


def draw_chart(r, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    steps = r["wap_step_seconds"]
    labels = ["plain append", "WAP"]
    a.bar([0], [r["plain_seconds"]["median"]], color="#9aa0a6")
    bottom = 0.0
    colors = {"read": "#8ab4f8", "prepare": "#c6dafc", "write": "#1a73e8", "audit": "#f9ab00",
              "publish": "#34a853", "session": "#dadce0"}
    for step in ("session", "read", "prepare", "write", "audit", "publish"):
        if step in steps:
            a.bar([1], [steps[step]], bottom=bottom, color=colors[step], label=step)
            bottom += steps[step]
    a.set_xticks([0, 1], labels)
    a.set_ylabel("seconds (median)")
    a.set_title(f"{r['rows']:,} rows: WAP = {r['wap_over_plain']:.3f}x plain")
    a.legend(fontsize=8)
    sizes = list(r["scaling"])
    b.bar([x - 0.2 for x in range(len(sizes))], [r["scaling"][s]["audit_seconds"]["median"] for s in sizes],
          width=0.4, label="audit", color="#f9ab00")
    b.bar([x + 0.2 for x in range(len(sizes))], [r["scaling"][s]["publish_seconds"]["median"] for s in sizes],
          width=0.4, label="publish", color="#34a853")
    b.set_xticks(range(len(sizes)), [f"table {s}\n({r['scaling'][s]['table_rows']:,} rows)" for s in sizes])
    b.set_title(f"fixed batch of {r['scaling_batch_rows']:,} rows")
    b.set_ylabel("seconds (median)")
    b.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--scaling_rows", type=int, default=1_000_000, help="0: skip the audit-scaling part")
    ap.add_argument("--audit_source", default="branch", choices=["branch", "write"])
    ap.add_argument("--work", default=None, help="scratch folder (default: a temporary one)")
    ap.add_argument("--sweep", default=None,
                    help="comma-separated batch sizes: measure 0/4/8/16 checks (plus --audit_source "
                         "write and a failing check at 8) at each, instead of the single point")
    ap.add_argument("--sweep_checks", default="0,4,8,16",
                    help="with --sweep: the check counts to measure, e.g. 8")
    ap.add_argument("--sweep_extra", default="true", choices=["true", "false"],
                    help="with --sweep: also --audit_source write and a failing batch at 8 checks")
    ap.add_argument("--steady", default=None,
                    help="comma-separated batch sizes: the steady state (existing table and ledger, "
                         "WAP and plain alternating) at each, instead of the single point")
    ap.add_argument("--ledger_runs", type=int, default=10_000,
                    help="with --steady: also measure with a ledger holding this many earlier runs")
    ap.add_argument("--fresh_processes", default="false", choices=["true", "false"],
                    help="with --steady: every run a new process (a new JVM), as on Glue")
    ap.add_argument("--flights", type=int, default=None,
                    help="issue 24's measure at this many rows: a new table per run from a flights CSV "
                         "read with inferSchema, its 8 checks, WAP and plain alternating")
    ap.add_argument("--plain_process", nargs=2, metavar=("CSV", "WAREHOUSE"), help=argparse.SUPPRESS)
    ap.add_argument("--json", default=os.path.join(ROOT, "tests", "benchmark", "results.json"))
    ap.add_argument("--chart", default=os.path.join(ROOT, "img", "benchmark.png"))
    args = ap.parse_args(argv)
    if args.plain_process:
        return plain_once(*args.plain_process)
    work = args.work or tempfile.mkdtemp(prefix="bench_wap_")
    try:
        if args.flights:
            results = flights(args.flights, args.repeats, work)
            with open(args.json, "w") as f:
                json.dump(results, f, indent=2)
            print(f"\nwrote {args.json}")
            return results
        if args.steady:
            sizes = [int(x) for x in args.steady.split(",")]
            results = (fresh(sizes, args.repeats, work) if args.fresh_processes == "true"
                       else steady(sizes, args.repeats, args.ledger_runs, work))
            with open(args.json, "w") as f:
                json.dump(results, f, indent=2)
            print(f"\nwrote {args.json}")
            return results
        if args.sweep:
            results = sweep([int(x) for x in args.sweep.split(",")], args.repeats, work,
                            [int(x) for x in args.sweep_checks.split(",")], args.sweep_extra == "true")
            with open(args.json, "w") as f:
                json.dump(results, f, indent=2)
            draw_sweep_chart(results, args.chart)
            print(f"\nwrote {args.json} and {args.chart}")
            return results
        results = measure(args.rows, args.repeats, args.scaling_rows, work, args.audit_source)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    print_table(results)
    with open(args.json, "w") as f:
        json.dump(results, f, indent=2)
    if "scaling" in results:  # --scaling_rows 0 measures plain vs WAP only: no chart
        draw_chart(results, args.chart)
    print(f"\nwrote {args.json}" + (f" and {args.chart}" if "scaling" in results else ""))
    return results


if __name__ == "__main__":
    main()
