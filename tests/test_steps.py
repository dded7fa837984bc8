"""The report's steps account for the whole run: its seconds, its Spark jobs, its Iceberg commits."""
import json
import os
import time

import wap_etl

CLEAN_CHECKS = [{"check": "not_null", "column": "id"}, {"check": "unique", "columns": ["id"]}]


def last_job_id(spark):
    """The id of the newest Spark job in Spark's own status store (ids count up from 0)."""
    sc = spark.sparkContext
    sc._jsc.sc().listenerBus().waitUntilEmpty()
    jobs = sc._jsc.sc().statusStore().jobsList(None)
    return jobs.apply(0).jobId() if jobs.size() else -1


def metadata_versions(spark, table):
    """How many metadata versions (commits, the creation included) a table has had."""
    return spark.sql(f"SELECT count(*) FROM {table}.metadata_log_entries").first()[0]


def test_timings_cover_the_whole_run(wap, orders):
    start = time.time()
    code, report = wap.run(orders, checks=CLEAN_CHECKS, batch_id="b1")
    wall = time.time() - start
    assert code == 0, report.error
    steps = set(wap_etl.RUN_STEPS + wap_etl.SIDE_STEPS + (wap_etl.OTHER_STEP,))
    assert set(report.timings) == steps
    assert abs(sum(report.timings.values()) - report.seconds) < 0.01 * len(steps)
    assert 0 < report.seconds <= wall and wall - report.seconds < 1.0
    # a new table: the CSV's schema is inferred, by Spark jobs of the read step
    assert report.timings["read"] > 0 and report.spark_jobs["read"] >= 1
    with open(os.path.join(wap.reports, f"local.{wap.table}", "b1.json")) as f:
        written = json.load(f)
    assert written["timings"] == report.timings and written["seconds"] == report.seconds
    assert written["html_report"] == report.html_report
    with open(report.html_report, encoding="utf-8") as f:
        page = f.read()
    assert "<th>Spark jobs</th>" in page and "<th>Iceberg commits</th>" in page


def test_a_step_that_runs_again_adds_to_its_time(wap, orders, monkeypatch):
    real = wap_etl.decide_publish
    calls = []

    def slow_decide(*args, **kwargs):
        calls.append(1)
        time.sleep(0.3)
        return real(*args, **kwargs)

    monkeypatch.setattr(wap_etl, "decide_publish", slow_decide)
    code, report = wap.run(orders, checks=CLEAN_CHECKS)
    assert code == 0 and len(calls) == 1
    assert report.timings["publish"] >= 0.3 and len(report.step_windows["publish"]) == 1
    report2 = wap_etl.RunReport(started_at=report.started_at)
    for _ in range(2):
        with wap_etl.timed(report2, "publish"):
            time.sleep(0.2)
    assert report2.timings["publish"] >= 0.4 and len(report2.step_windows["publish"]) == 2


def test_report_counts_iceberg_commits_and_spark_jobs(wap, orders, spark):
    runs = f"local.{wap.table}_wap_runs"
    code, first = wap.run(orders, checks=CLEAN_CHECKS)
    assert code == 0, first.error
    # a new table and a new ledger: every commit of either is this run's
    assert sum(first.iceberg_commits.values()) == (metadata_versions(spark, wap.sql)
                                                   + metadata_versions(spark, runs))
    assert first.iceberg_commits["publish"] == 1  # the compare-and-swap of main
    assert first.iceberg_commits["ledger"] == 2  # the ledger's creation, then its row

    table_before, runs_before = metadata_versions(spark, wap.sql), metadata_versions(spark, runs)
    jobs_before = last_job_id(spark)
    more = [dict(r, id=r["id"] + 10) for r in orders]
    code, second = wap.run(more, checks=CLEAN_CHECKS)
    assert code == 0, second.error
    assert sum(second.spark_jobs.values()) == last_job_id(spark) - jobs_before
    assert second.spark_jobs["audit"] >= 1 and second.spark_jobs["session"] == 0
    commits = second.iceberg_commits
    assert sum(commits.values()) == (metadata_versions(spark, wap.sql) - table_before
                                     + metadata_versions(spark, runs) - runs_before)
    # the branch made at main, the staged write; the swap; the ledger row: nothing else
    assert (commits["write"], commits["publish"], commits["ledger"]) == (2, 1, 1)
    assert commits["alerts"] == commits["report"] == commits["other"] == 0
    snapshots = spark.sql(f"SELECT count(*) FROM {wap.sql}.snapshots").first()[0]
    assert snapshots == 2  # one staged snapshot per run, each published as it was


def test_json_report_is_written_before_the_alerts(wap, orders, monkeypatch):
    """A run killed while it alerts still leaves its JSON report."""
    path = os.path.join(wap.reports, f"local.{wap.table}", "b2.json")
    seen = []

    def put_metrics(report, *args):
        with open(path) as f:
            seen.append(json.load(f)["status"])

    monkeypatch.setattr(wap_etl, "put_metrics", put_metrics)
    code, report = wap.run(orders, checks=CLEAN_CHECKS, batch_id="b2", cloudwatch_namespace="WapTest")
    assert code == 0 and seen == ["published"]
