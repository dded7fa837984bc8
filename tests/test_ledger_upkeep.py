"""The run ledger keeps itself cheap to read: its small files are compacted and its old snapshots
expired by the job, and nothing the exactly-once protocol reads is lost."""
import math
import os

import pytest

import wap_etl
from conftest import session_conf


def ledger(spark, wap):
    return wap_etl.iceberg_table(spark, wap_etl.TableRef("local", wap.ns, "orders_wap_runs"))


def run_batches(wap, n):
    """Publish batches b0..b(n-1); returns their source files."""
    return run_batches_from(wap, 0, n)


def run_batches_from(wap, first, n):
    """Publish batches b<first>..b(n-1); returns their source files."""
    paths = []
    for i in range(first, n):
        paths.append(wap.csv([{"id": i}]))
        code, report = wap.run(paths[-1], batch_id=f"b{i}", checks=[])
        assert code == 0 and report.status == "published", report.error
    return paths


def test_ledger_small_files_are_compacted_keeping_every_run(wap, spark, monkeypatch):
    monkeypatch.setattr(wap_etl, "LEDGER_MAX_FILES", 3)
    run_batches(wap, 4)
    files = int(ledger(spark, wap).currentSnapshot().summary()["total-data-files"])
    assert files < 3, "the ledger's small files were compacted"
    runs = spark.table(f"{wap.sql}_wap_runs").select("batch_id", "status").collect()
    assert sorted(r["batch_id"] for r in runs) == ["b0", "b1", "b2", "b3"]


def test_a_batch_published_before_compaction_is_not_loaded_again(wap, spark, monkeypatch):
    monkeypatch.setattr(wap_etl, "LEDGER_MAX_FILES", 2)
    paths = run_batches(wap, 3)
    code, report = wap.run(paths[0], batch_id="b0", checks=[])
    assert code == 0 and report.status == "already_published"
    assert wap.ids() == [0, 1, 2]


def test_ledger_old_snapshots_are_expired(wap, spark, monkeypatch):
    monkeypatch.setattr(wap_etl, "LEDGER_MAX_SNAPSHOTS", 3)
    monkeypatch.setattr(wap_etl, "LEDGER_KEEP_SNAPSHOTS", 2)
    monkeypatch.setattr(wap_etl, "LEDGER_SNAPSHOT_AGE_S", -60)  # every snapshot counts as old
    run_batches(wap, 4)
    snapshots = ledger(spark, wap).operations().current().snapshots().size()
    assert snapshots <= 3
    assert spark.table(f"{wap.sql}_wap_runs").count() == 4


def test_a_process_killed_right_after_the_ledger_compaction_loses_no_run(wap, spark):
    import os
    import subprocess
    import sys
    paths = run_batches(wap, 2)
    newest = wap.csv([{"id": 2}])
    # a real process, its compaction threshold lowered, killed once the compaction has committed
    job = ("import sys, wap_etl; wap_etl.LEDGER_MAX_FILES = 2; "
           f"sys.argv = ['wap_etl.py'] + {wap.args(newest, batch_id='b2', checks=[])!r}; wap_etl.main()")
    env = dict(os.environ, WAP_SPARK_MASTER="local[1]", WAP_FAULT_AFTER="ledger_upkeep")
    done = subprocess.run([sys.executable, "-c", job], cwd=os.path.dirname(wap_etl.__file__), env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 137, done.stderr[-2000:]
    assert "killing the process" in done.stderr
    assert wap.ids() == [0, 1, 2], "the killed run had published before its ledger upkeep"
    for i, path in enumerate(paths + [newest]):
        code, report = wap.run(path, batch_id=f"b{i}", checks=[])
        assert code == 0 and report.status == "already_published", (i, report.status, report.error)
    assert wap.ids() == [0, 1, 2]
    runs = spark.table(f"{wap.sql}_wap_runs").filter("status = 'published'").select("batch_id").collect()
    assert sorted({r["batch_id"] for r in runs}) == ["b0", "b1", "b2"]


@pytest.mark.parametrize("timestamps", ["TIMESTAMP_LTZ", "TIMESTAMP_NTZ"])
def test_a_ledger_row_reads_back_exactly_as_recorded(wap, spark, timestamps):
    """Rows travel to the ledger as JSON text: every value, NaN and infinities, 64-bit ids, quotes,
    backslashes, non-ASCII text and zone-aware times included, must read back unchanged, whichever
    timestamp type the session gives a ledger's `timestamp` columns."""
    with session_conf(spark, {"spark.sql.timestampType": timestamps}):
        check_round_trip(wap, spark)


def check_round_trip(wap, spark):
    import math
    from datetime import datetime, timedelta, timezone
    at = datetime(2026, 3, 29, 1, 30, 0, 123456, tzinfo=timezone(timedelta(hours=2)))
    row = {"table_name": "local.x.t", "run_id": 'r"\\1', "batch_id": "b\u00e9\u4e2d\n", "status": "published",
           "exit_code": 0, "main_snapshot_after": 9223372036854775807, "rows_written": 10,
           "checks": [{"name": "c", "check": "not_null", "action": "fail", "passed": True,
                       "failing_rows": 0, "observed": '{"a": 1}'}],
           "metrics": {"nan": math.nan, "inf": math.inf, "-inf": -math.inf, "x": 0.1 + 0.2},
           "input_files": ["s3://b/k 1.csv"], "started_at": at, "finished_at": at}
    ledger = wap_etl.Ledger(spark, wap_etl.TableRef("local", wap.ns, "exact_runs"), "local.x.t")
    ledger.record([row, dict(row, run_id="second")])
    got = {r["run_id"]: r for r in spark.table(f"local.{wap.ns}.exact_runs").collect()}
    assert set(got) == {'r"\\1', "second"}
    r = got['r"\\1']
    assert (r["batch_id"], r["main_snapshot_after"], r["rows_written"]) == (row["batch_id"], 2**63 - 1, 10)
    assert r["checks"][0].asDict() == row["checks"][0] and r["input_files"] == row["input_files"]
    assert math.isnan(r["metrics"]["nan"]) and r["metrics"]["inf"] == math.inf
    assert r["metrics"]["-inf"] == -math.inf and r["metrics"]["x"] == 0.1 + 0.2
    # the session is UTC: the instant, not the wall clock, is what must survive
    assert r["started_at"].replace(tzinfo=timezone.utc) == at and r["rows_dropped"] is None


def test_a_ledger_row_with_a_time_without_its_zone_is_refused(wap, spark):
    from datetime import datetime
    ledger = wap_etl.Ledger(spark, wap_etl.TableRef("local", wap.ns, "naive_runs"), "local.x.t")
    with pytest.raises(TypeError, match="datetime"):
        ledger.record([{"table_name": "local.x.t", "run_id": "r", "started_at": datetime(2026, 1, 1)}])


def test_a_run_records_its_row_when_a_run_of_an_older_version_adds_some_ledger_columns_meanwhile(
        wap, spark, monkeypatch):
    # the ledger's columns are read at the run's start; by its end another run (of a version that
    # knew only the first two added columns) has added those: the rest are still added, the row kept
    assert wap.run([{"id": 1}], batch_id="b0", checks=[])[0] == 0
    runs = f"local.{wap.ns}.orders_wap_runs"
    added = list(wap_etl.LEDGER_ADDED_COLUMNS)
    spark.sql(f"ALTER TABLE {runs} DROP COLUMNS ({', '.join(added)})")  # a ledger from before them
    real = wap_etl.fault_point

    def older_run_adds_two(step):
        if step == "audit":
            spark.sql(f"ALTER TABLE {runs} ADD COLUMNS (table_uuid string, input_file_ids array<string>)")
        real(step)
    monkeypatch.setattr(wap_etl, "fault_point", older_run_adds_two)
    code, report = wap.run([{"id": 2}], batch_id="b1", checks=[{"check": "not_null", "column": "id"}])
    assert code == 0 and report.status == "published", report.error
    assert added == [c for c in spark.table(runs).columns if c in added]
    row = spark.table(runs).filter(f"run_id = '{report.run_id}'").first()
    assert row is not None, "the run's ledger row was lost"
    assert row["table_uuid"] == report.table_uuid and row["score"] == 1.0


def full_row(run_id, **changes):
    """A ledger row with every column set, nested ones included (Glue-shaped rule results)."""
    from datetime import datetime, timedelta, timezone
    row = {"table_name": "local.x.orders", "run_id": run_id, "batch_id": "b", "status": "published",
           "exit_code": 0, "mode": "append", "branch": "audit_b", "main_snapshot_before": 1,
           "main_snapshot_after": 2 ** 62, "staged_snapshot": -3, "rows_written": 10, "rows_dropped": 0,
           "rows_inserted": 5, "rows_updated": 4, "rows_deleted": 1,
           "checks": [{"name": "n", "check": "not_null", "action": "fail", "passed": True, "failing_rows": 0,
                       "observed": None},
                      {"name": "é \"q\"", "check": "sql", "action": "warn", "passed": False, "failing_rows": None,
                       "observed": "[1, 2]"}],
           "metrics": {"rows": 10.0, "mean:amount": 1.5e300, "min": -0.0}, "timings": {"read": 0.25, "audit": 1},
           "input_fingerprint": "f" * 64, "config_fingerprint": "c" * 64,
           "input_files": ["s3://b/k 1.csv", "file:///tmp/ü.csv"],
           "started_at": datetime(2026, 3, 29, 1, 30, 0, 123456, tzinfo=timezone(timedelta(hours=-5))),
           "finished_at": datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=timezone.utc),
           "error": "line\nbreak", "table_uuid": "u", "input_file_ids": ["a", "b"], "score": 0.5,
           "rule_results": [{"Name": "Rule_1", "Description": "RowCount > 1", "EvaluationMessage": None,
                             "Result": "PASS", "EvaluatedMetrics": {"Dataset.*.RowCount": 10.0},
                             "EvaluatedRule": "RowCount > 1", "Labels": {"team": "a"}}]}
    return {**row, **changes}


def test_a_ledger_row_written_in_the_driver_reads_as_sparks_write_of_it(spark, ns):
    ref = wap_etl.TableRef("local", ns, "runs")
    wap_etl.create_table(spark, ref, wap_etl.LEDGER_COLUMNS)
    ledger = wap_etl.Ledger(spark, ref, "local.x.orders")
    assert ledger.append_in_driver([full_row("driver")])
    ledger.frame([full_row("spark")]).writeTo(ref.sql).append()
    rows = {r["run_id"]: r.asDict(recursive=True) for r in spark.table(ref.sql).collect()}
    assert rows["driver"] == dict(rows["spark"], run_id="driver")
    assert rows["driver"]["finished_at"] is not None and rows["driver"]["rule_results"][0]["Labels"] == {"team": "a"}
    assert math.copysign(1, rows["driver"]["metrics"]["min"]) == -1 and rows["driver"]["timings"]["audit"] == 1.0


def test_a_ledger_whose_nested_names_are_lower_case_gets_every_value(spark, ns):
    ref = wap_etl.TableRef("local", ns, "runs")  # as Athena or a Glue table definition would name them
    wap_etl.create_table(spark, ref, wap_etl.LEDGER_COLUMNS.replace("Name:", "name:").replace("Result:", "result:")
                         .replace("Labels:", "labels:").replace("run_id string", "RUN_ID string"))
    ledger = wap_etl.Ledger(spark, ref, "local.x.orders")
    assert ledger.append_in_driver([full_row("driver")])
    ledger.frame([full_row("spark")]).writeTo(ref.sql).append()
    rows = {r["RUN_ID"]: r.asDict(recursive=True) for r in spark.table(ref.sql).collect()}
    assert rows["driver"] == dict(rows["spark"], RUN_ID="driver")
    assert rows["driver"]["rule_results"][0]["name"] == "Rule_1" and rows["driver"]["rule_results"][0]["labels"]


def test_a_ledger_row_refused_while_written_in_the_driver_leaves_no_file_behind(spark, ns, warehouse):
    import glob
    ref = wap_etl.TableRef("local", ns, "runs")
    wap_etl.create_table(spark, ref, wap_etl.LEDGER_COLUMNS)
    ledger = wap_etl.Ledger(spark, ref, "local.x.orders")
    with pytest.raises(Exception, match="MALFORMED_RECORD"):  # an int column's value past 32 bits: Spark refuses it too
        ledger.record([full_row("fits"), full_row("big", exit_code=2 ** 40)])  # the first one opens the file
    assert spark.table(ref.sql).count() == 0
    assert not glob.glob(os.path.join(warehouse, ns, "runs", "**", "ledger-*"), recursive=True), "the file was deleted"


def test_a_run_records_its_ledger_row_without_a_spark_job(wap, spark):
    code, report = wap.run([{"id": 1}], checks=[{"check": "not_null", "column": "id"}])
    assert code == 0 and report.spark_jobs["ledger"] == 0, report.spark_jobs
    row = spark.table(f"{wap.sql}_wap_runs").collect()[0]
    assert (row["run_id"], row["status"], row["rows_written"]) == (report.run_id, "published", 1)


@pytest.mark.parametrize("changes", [{"metrics": {"rows": float("nan")}}, {"score": float("inf")},
                                     {"rule_results": [dict(full_row("x")["rule_results"][0], Labels={"k": None})]}])
def test_a_ledger_value_the_driver_cannot_write_is_written_by_spark(spark, ns, changes):
    ref = wap_etl.TableRef("local", ns, "runs")
    wap_etl.create_table(spark, ref, wap_etl.LEDGER_COLUMNS)
    ledger = wap_etl.Ledger(spark, ref, "local.x.orders")
    assert not ledger.append_in_driver([full_row("driver", **changes)])
    assert spark.table(ref.sql).count() == 0, "nothing written when the driver cannot write it"
    ledger.record([full_row("spark", **changes)])
    row = spark.table(ref.sql).collect()[0].asDict(recursive=True)
    key, value = next(iter(changes.items()))
    assert row["run_id"] == "spark" and str(row[key]) == str(value)


@pytest.mark.parametrize("failure, kept", [("CommitFailedException", False), ("CommitStateUnknownException", True),
                                           ("RuntimeIOException", True)])  # an I/O error mid-commit: unknown too
def test_a_driver_commit_that_surely_failed_leaves_no_file_and_one_of_unknown_outcome_keeps_it(
        spark, ns, warehouse, monkeypatch, failure, kept):
    """Iceberg's commit throws: a failure it marks cleanable surely committed nothing, so the
    driver's file goes; after an unknown outcome the file may be live, so it stays. Spark then
    writes the row either way."""
    import glob
    ref = wap_etl.TableRef("local", ns, "runs")
    wap_etl.create_table(spark, ref, wap_etl.LEDGER_COLUMNS)
    jvm, real = spark.sparkContext._jvm, wap_etl.iceberg_table

    def throws():  # the very Java exception Iceberg's commit would throw
        exceptions = jvm.org.apache.iceberg.exceptions
        no_args = spark.sparkContext._gateway.new_array(jvm.java.lang.Object, 0)
        error = (exceptions.CommitStateUnknownException(jvm.java.lang.RuntimeException("no answer"))
                 if failure == "CommitStateUnknownException" else getattr(exceptions, failure)("lost", no_args))
        jvm.org.apache.iceberg.util.ExceptionUtil.castAndThrow(error, jvm.java.lang.Class.forName("java.lang.RuntimeException"))

    class Append:  # the append as Iceberg builds it, its commit throwing
        def __init__(self, append):
            self.append = append

        def appendFile(self, data_file):
            return Append(self.append.appendFile(data_file))

        def commit(self):
            throws()

    class Table:
        def __init__(self, table):
            self.table = table

        def __getattr__(self, name):
            return getattr(self.table, name)

        def newAppend(self):
            return Append(self.table.newAppend())

    monkeypatch.setattr(wap_etl, "iceberg_table", lambda *a: Table(real(*a)))
    wap_etl.Ledger(spark, ref, "local.x.orders").record([full_row("r")])
    assert [r["run_id"] for r in spark.table(ref.sql).collect()] == ["r"], "Spark wrote the row once"
    files = glob.glob(os.path.join(warehouse, ns, "runs", "**", "ledger-*"), recursive=True)
    assert len(files) == (1 if kept else 0), files


def test_two_keys_for_one_ledger_column_are_left_to_spark():
    struct = {"type": "struct", "fields": [{"id": 1, "name": "run_id", "required": False, "type": "string"}]}
    assert wap_etl.single_value({"RUN_ID": "a"}, struct) == {"1": "a"}
    for row in ({"run_id": "a", "Run_Id": "b"}, {"run_id": None, "RUN_ID": "b"}):
        with pytest.raises(wap_etl.NotRepresentable):
            wap_etl.single_value(row, struct)


def test_a_ledger_read_that_fails_is_not_taken_for_an_empty_ledger(wap, spark):
    run_batches(wap, 1)
    ref = wap_etl.TableRef("local", wap.ns, "orders_wap_runs")
    runs = wap_etl.Ledger(spark, ref, f"local.{wap.ns}.orders")
    for row in spark.table(f"{ref.sql}.files").select("file_path").collect():
        os.remove(row["file_path"].removeprefix("file:"))  # the read of its rows now fails
    for _ in range(2):  # and fails again: never "no run consumed anything"
        with pytest.raises(Exception, match="(?i)file"):
            runs.published()


# ----- a long ledger: a run reads the rows its decisions need, not every run the table had -----

@pytest.fixture
def long_ledger(monkeypatch):
    """Ledgers of 5 rows and more count as long (the job's bound is 20,000 rows)."""
    monkeypatch.setenv("WAP_LEDGER_BOUNDED_FROM", "5")


def expire_all_but(spark, wap, snapshots):
    """Expire main's history but for its newest `snapshots` (and what a tag or branch keeps)."""
    spark.sql(f"CALL local.system.expire_snapshots(table => '{wap.ns}.orders', "
              f"older_than => TIMESTAMP '9999-01-01 00:00:00', retain_last => {snapshots})").collect()


def published_snapshot(spark, wap, batch_id):
    row = (spark.table(f"{wap.sql}_wap_runs").filter(f"batch_id = '{batch_id}' AND status = 'published'")
           .select("main_snapshot_after").first())
    return row["main_snapshot_after"]


def test_a_run_over_a_long_ledger_reads_only_the_rows_its_decisions_need(wap, spark, long_ledger):
    run_batches(wap, 6)
    expire_all_but(spark, wap, 2)
    code, report = wap.run(wap.csv([{"id": 6}]), batch_id="b6", checks=[])
    assert code == 0 and report.status == "published", report.error
    assert report.ledger_rows_read == 2, "the rows of the two publishes main's metadata still names"
    assert wap.ids() == list(range(7))


def test_a_bounded_read_finds_a_batch_published_long_ago(wap, spark, long_ledger):
    paths = run_batches(wap, 6)
    expire_all_but(spark, wap, 2)
    code, report = wap.run(paths[0], batch_id="b0", checks=[])
    assert code == 0 and report.status == "already_published", report.error
    assert wap.ids() == list(range(6))


def test_a_bounded_read_republishes_a_batch_rolled_back_long_ago(wap, spark, long_ledger):
    """b3 and b4 were rolled back, then main moved on and their snapshots expired: only every row
    of the ledger carries main's ancestry far enough back to show that b4 is not on main."""
    paths = run_batches(wap, 5)
    spark.sql(f"CALL local.system.rollback_to_snapshot('{wap.ns}.orders', "
              f"{published_snapshot(spark, wap, 'b2')})").collect()
    for i in (5, 6):
        code, report = wap.run(wap.csv([{"id": i}]), batch_id=f"b{i}", checks=[])
        assert code == 0 and report.status == "published", report.error
    expire_all_but(spark, wap, 2)
    code, report = wap.run(paths[4], batch_id="b4", checks=[])
    assert code == 0 and report.status == "published", report.error
    assert wap.ids() == [0, 1, 2, 4, 5, 6]


def test_history_checks_over_a_bounded_read_compare_with_the_newest_publishes(wap, spark, long_ledger):
    """main's metadata names only the last publish (20 rows); the volume check's lookback of 2
    reaches the one before (1,000 rows), which the bounded read still holds: 20 rows against a
    median of 510 fail, where against the last publish alone (or none) they would pass."""
    run_batches(wap, 4)
    for batch, rows in (("huge", range(100, 1100)), ("last", range(2000, 2020))):
        code, report = wap.run(wap.csv([{"id": i} for i in rows]), batch_id=batch, checks=[])
        assert code == 0 and report.status == "published", report.error
    expire_all_but(spark, wap, 1)
    volume = [{"check": "volume", "lookback": 2, "min_ratio": 0.5}]
    code, report = wap.run(wap.csv([{"id": i} for i in range(3000, 3020)]), batch_id="next", checks=volume)
    assert code == 3 and [c["passed"] for c in report.checks] == [False], report.checks
    assert report.ledger_rows_read < 7


def test_history_checks_read_every_row_when_the_newest_publishes_were_rolled_back(wap, spark, long_ledger):
    """The newest 19 publish rows a lookback of 1 has a bounded read take are all of publishes
    main no longer holds (rolled back): the newest one it holds (1,000 rows) lies beyond them, so
    the run reads every row, and 20 rows fail against it, where against no history they would pass."""
    from pyspark.sql import functions as F
    for batch, rows in (("huge", range(1000)), ("rolled_back", [5000])):
        code, report = wap.run(wap.csv([{"id": i} for i in rows]), batch_id=batch, checks=[])
        assert code == 0 and report.status == "published", report.error
    spark.sql(f"CALL local.system.rollback_to_snapshot('{wap.ns}.orders', "
              f"{published_snapshot(spark, wap, 'huge')})").collect()
    runs, n = f"{wap.sql}_wap_runs", F.col("_n")
    name = F.concat(F.lit("rolled-back-"), n.cast("string"))
    (spark.table(runs).filter("batch_id = 'rolled_back'").crossJoin(spark.range(25).withColumnRenamed("id", "_n"))
     .withColumn("run_id", name).withColumn("batch_id", name)
     .withColumn("input_file_ids", F.array(name)).withColumn("input_files", F.array(name))
     .withColumn("finished_at", F.col("finished_at") + F.make_interval(secs=(n + 1).cast("decimal(18,6)")))
     .drop("_n").writeTo(runs).append())
    volume = [{"check": "volume", "lookback": 1, "min_ratio": 0.5}]
    code, report = wap.run(wap.csv([{"id": i} for i in range(3000, 3020)]), batch_id="next", checks=volume)
    assert code == 3 and [c["passed"] for c in report.checks] == [False], report.checks


def test_a_bounded_read_republishes_a_batch_just_rolled_back_without_reading_every_row(wap, spark, long_ledger):
    """b5 was rolled back and its snapshot expired: its parent is on main's ancestry, so the rows
    read show it off main without following main past the expired snapshots."""
    paths = run_batches(wap, 6)
    spark.sql(f"CALL local.system.rollback_to_snapshot('{wap.ns}.orders', "
              f"{published_snapshot(spark, wap, 'b4')})").collect()
    expire_all_but(spark, wap, 2)
    code, report = wap.run(paths[5], batch_id="b5", checks=[])
    assert code == 0 and report.status == "published", report.error
    assert wap.ids() == list(range(6))
    assert report.ledger_rows_read < 6, "not every row"


def test_a_publish_recorded_between_a_bounded_read_s_two_reads_is_in_the_history(wap, spark, monkeypatch, tmp_path,
                                                                                  long_ledger):
    """Another run's publish (100 rows) is on main and its ledger row is written after this run
    read its newest publishes but before it read its rows: the volume check compares 100 rows
    with it (they pass), not with the 1-row publish before it (they would fail)."""
    from conftest import wait_paused
    run_batches(wap, 5)
    gate = tmp_path / "gate"
    gate.mkdir()
    other = wap.cli([{"id": i} for i in range(100, 200)], batch_id="other", checks=[],
                    env={"WAP_PAUSE_AT": "publish", "WAP_PAUSE_DIR": str(gate)})
    wait_paused(gate, "publish", other)  # on main, its ledger row not yet written

    def record_between_the_reads(step):
        if step == "ledger_read":
            monkeypatch.setattr(wap_etl, "fault_point", lambda step: None)
            (gate / "go").touch()
            assert other.wait(timeout=400) == 0, other.stdout.read()[-3000:]
    monkeypatch.setattr(wap_etl, "fault_point", record_between_the_reads)
    volume = [{"check": "volume", "lookback": 1, "min_ratio": 0.5, "max_ratio": 2}]
    try:
        code, report = wap.run(wap.csv([{"id": i} for i in range(300, 400)]), batch_id="next", checks=volume)
    finally:  # never leave the other run waiting
        (gate / "go").touch()
        other.wait(timeout=400)
    assert code == 0 and report.status == "published", report.checks


def test_a_bounded_read_finds_an_unaudited_write_of_the_batch_kept_beyond_an_expired_snapshot(wap, spark, long_ledger):
    """A write of b1 reached main unaudited and no ledger row names it (it predates the ledger);
    a tag keeps its snapshot, main moved on and the snapshots between expired: the rerun of b1
    still finds it, as a read of every row does, and publishes nothing."""
    path = wap.csv([{"id": 1}])
    spark.sql(f"CREATE TABLE {wap.sql} (id bigint) USING iceberg")
    (spark.createDataFrame([(1,)], "id bigint").writeTo(wap.sql)
     .option(f"snapshot-property.{wap_etl.BATCH_PROPERTY}", "b1")
     .option(f"snapshot-property.{wap_etl.RUN_PROPERTY}", "unaudited-run").append())
    unaudited = wap.refs()["main"]
    spark.sql(f"ALTER TABLE {wap.sql} CREATE TAG kept AS OF VERSION {unaudited}")
    for i in range(2, 8):
        code, report = wap.run(wap.csv([{"id": i}]), batch_id=f"b{i}", checks=[])
        assert code == 0 and report.status == "published", report.error
    expire_all_but(spark, wap, 2)
    spark.sql(f"DELETE FROM {wap.sql}_wap_runs WHERE batch_id = 'b1'")
    code, report = wap.run(path, batch_id="b1", checks=[])
    assert code == 1 and "no publish recorded" in report.error, report.error
    assert wap.ids() == list(range(1, 8))


def test_snapshots_that_expire_during_a_bounded_run_are_not_recorded_again(wap, spark, monkeypatch, long_ledger):
    """Another writer's snapshot, expired, stops main's walk; the run walks b2..b5, which then
    expire while it runs, and the ledger moves on: its later reads still hold their rows (the walk
    still passes them), so no run is recorded a second time as found missing."""
    run_batches(wap, 1)
    spark.sql(f"INSERT INTO {wap.sql} (id) VALUES (100)")  # another writer's commit
    run_batches_from(wap, 1, 6)
    expire_all_but(spark, wap, 4)

    def expire_and_move_the_ledger(step):
        if step == "stage":
            monkeypatch.setattr(wap_etl, "fault_point", lambda step: None)
            expire_all_but(spark, wap, 1)
            runs = f"{wap.sql}_wap_runs"  # another run's row: a failed one, say
            spark.table(runs).filter("batch_id = 'b5'").selectExpr("*", "'error' AS _status").drop("status") \
                .withColumnRenamed("_status", "status").writeTo(runs).append()
    monkeypatch.setattr(wap_etl, "fault_point", expire_and_move_the_ledger)
    code, report = wap.run(wap.csv([{"id": 6}]), batch_id="b6", checks=[])
    assert code == 0 and report.status == "published", report.error
    rows = spark.table(f"{wap.sql}_wap_runs").filter("status = 'published'").groupBy("batch_id").count().collect()
    assert {r["batch_id"]: r["count"] for r in rows} == {f"b{i}": 1 for i in range(7)}


def test_a_snapshot_whose_file_identities_cannot_be_read_does_not_stop_a_bounded_read(wap, spark, long_ledger):
    run_batches(wap, 5)
    (spark.createDataFrame([(100,)], "id bigint").writeTo(wap.sql)  # another writer's, badly stamped
     .option(f"snapshot-property.{wap_etl.FILE_IDS_PROPERTY}", "not json").append())
    code, report = wap.run(wap.csv([{"id": 5}]), batch_id="b5", checks=[])
    assert code == 0 and report.status == "published", report.error
    assert wap.ids() == [0, 1, 2, 3, 4, 5, 100]
