"""The fixed cost of a daily run: what the ledger rows read once per run and a small batch's keys
can answer makes no Spark job of its own, and the verdicts stay exact."""
import gzip
import threading
from datetime import datetime, timedelta, timezone

import pytest

import wap_etl

VOLUME = [{"check": "volume", "min_ratio": 0.5, "max_ratio": 2}]


def test_a_volume_check_is_answered_from_the_ledger_rows_the_run_read_once(wap):
    for i in range(3):
        code, report = wap.run([{"id": 10 * i + k} for k in range(10)], checks=VOLUME, batch_id=f"b{i}")
        assert code == 0, report.error
    assert report.checks[0]["observed"] == 1.0
    assert report.spark_jobs["audit"] == 0, "no job beyond the ledger read in prepare"


def test_a_volume_check_sees_publishes_recorded_after_a_rebase(wap, monkeypatch):
    # the recheck after a rebase reads the ledger again: forget() is what makes it fresh
    calls = []
    real = wap_etl.Ledger.forget
    monkeypatch.setattr(wap_etl.Ledger, "forget", lambda self: calls.append(1) or real(self))
    code, report = wap.run([{"id": 1}], checks=VOLUME)
    assert code == 0 and report.status == "published"
    ledger = wap_etl.Ledger(wap.spark, wap_etl.TableRef("local", wap.ns, "orders_wap_runs"), f"local.{wap.table}")
    wap_etl.recheck_state(wap_etl.Run(wap.spark, None, None, [], report, ledger, None), None)
    assert calls, "the recheck forgot the rows read before the rebase"


def test_a_small_batch_with_distinct_keys_is_proven_in_one_scan(wap):
    assert wap.run([{"id": i} for i in range(5)], checks=[{"check": "unique", "columns": ["id"]}])[0] == 0
    code, report = wap.run([{"id": i} for i in range(100, 107)], checks=[{"check": "unique", "columns": ["id"]}])
    assert code == 0 and report.checks[0]["passed"], report.checks
    assert report.spark_jobs["audit"] <= 2, report.spark_jobs


def test_a_duplicate_key_in_a_small_batch_is_still_counted_exactly(wap):
    rows = [{"id": i, "name": f"n{i}"} for i in range(6)] + [{"id": 3, "name": "again"}]
    code, report = wap.run(rows, checks=[{"check": "unique", "columns": ["id", "name"]},
                                         {"check": "unique", "columns": ["id"], "name": "id"}])
    assert code == 3
    by = {r["name"]: r for r in report.checks}
    assert by["unique_id_name"]["passed"] and by["id"]["failing_rows"] == 2


BENCH_CHECKS = [{"check": "not_null", "column": "id"}, {"check": "unique", "columns": ["id"]},
                {"check": "accepted_values", "column": "status", "values": ["new", "paid"]},
                {"check": "regex", "column": "email", "pattern": "^[^@]+@[^@]+$"},
                {"check": "expression", "expr": "amount >= 0"}, {"check": "row_count", "min": 1}]


def daily(start, status="paid"):
    return [{"id": start + i, "status": status if i else "new", "email": f"u{i}@x.io", "amount": float(i)}
            for i in range(10)]


def test_a_small_batch_is_audited_in_one_scan_without_pushdown_reads(wap, monkeypatch):
    assert wap.run(daily(0), checks=BENCH_CHECKS)[0] == 0
    code, report = wap.run(daily(100), checks=BENCH_CHECKS)
    by = {r["name"]: r for r in report.checks}
    assert code == 0 and by["accepted_values_status"]["decided_by"] == "scan"
    small_jobs = report.spark_jobs["audit"]
    monkeypatch.setattr(wap_etl, "SMALL_BATCH_ROWS", 0)  # the large-batch path, for comparison
    monkeypatch.setattr(wap_etl, "FOLD_PUSHDOWN_ROWS", 0)
    monkeypatch.setattr(wap_etl, "ROW_GROUP_FILES", 0)  # its pushdown reads, not the driver's row-group test
    code, report = wap.run(daily(200), checks=BENCH_CHECKS)
    assert code == 0 and {r["name"]: r for r in report.checks}["accepted_values_status"]["decided_by"] == "pushdown"
    assert small_jobs < report.spark_jobs["audit"], (small_jobs, report.spark_jobs)


def test_a_scan_that_runs_anyway_counts_the_pushdown_checks_in_fewer_jobs(wap, monkeypatch):
    monkeypatch.setattr(wap_etl, "SMALL_BATCH_ROWS", 0)  # the large-batch path: metadata, then pushdown
    checks = [dict(c, action="warn") if c["check"] in ("accepted_values", "expression") else c
              for c in BENCH_CHECKS]  # the regex needs the scan: a pushdown read would be one more job
    checks.append({"check": "expression", "expr": "id < 102 OR (id >= 200 AND id < 202)", "name": "low_ids",
                   "action": "warn"})  # decided by the bounds: 8 rows of either batch fail it
    assert wap.run(daily(0), checks=checks)[0] == 0
    bad = daily(100, status="lost")
    bad[2]["amount"] = -1.0
    code, folded = wap.run(bad, checks=checks)
    monkeypatch.setattr(wap_etl, "FOLD_PUSHDOWN_ROWS", 0)  # the pushdown's own reads, for comparison
    code_pushed, pushed = wap.run([dict(r, id=r["id"] + 100) for r in bad], checks=checks)
    verdicts = [{n: r[n] for n in ("name", "passed", "failing_rows")} for r in folded.checks]
    assert code == code_pushed == 0 and verdicts == [{n: r[n] for n in ("name", "passed", "failing_rows")}
                                                     for r in pushed.checks]
    by = {r["name"]: r["decided_by"] for r in folded.checks}, {r["name"]: r["decided_by"] for r in pushed.checks}
    assert [by[0]["accepted_values_status"], by[1]["accepted_values_status"]] == ["scan", "pushdown"], by
    assert [by[0]["low_ids"], by[1]["low_ids"]] == ["scan", "pushdown"], by
    failing = {r["name"]: r["failing_rows"] for r in folded.checks}
    assert failing["accepted_values_status"] == 9 and failing["low_ids"] == 8, failing
    assert folded.spark_jobs["audit"] < pushed.spark_jobs["audit"], (folded.spark_jobs, pushed.spark_jobs)


def test_a_small_batch_scanned_once_still_counts_each_failure_exactly(wap):
    assert wap.run(daily(0), checks=BENCH_CHECKS)[0] == 0
    bad = daily(100, status="lost")
    bad[3]["id"] = bad[4]["id"]
    bad[5]["email"] = "nobody"
    code, report = wap.run(bad, checks=BENCH_CHECKS)
    by = {r["name"]: r for r in report.checks}
    assert code == 3 and by["accepted_values_status"]["failing_rows"] == 9
    assert by["unique_id"]["failing_rows"] == 2 and by["regex_email"]["failing_rows"] == 1
    assert by["not_null_id"]["passed"] and by["expression"]["passed"]


def test_a_snapshot_read_in_one_call_is_icebergs_own_snapshot(wap, spark):
    """Main's ancestry is read a snapshot per JVM call (its JSON form): the ids, time and summary,
    this job's properties among them, must be exactly what Iceberg's Snapshot holds."""
    for i in range(2):
        assert wap.run([{"id": i}], batch_id=f"b{i}", checks=[])[0] == 0
    table = wap_etl.iceberg_table(spark, wap_etl.TableRef("local", wap.ns, "orders"))
    snapshot = table.currentSnapshot()
    fields = wap_etl.snapshot_fields(snapshot)
    assert fields["snapshot-id"] == snapshot.snapshotId() and fields["parent-snapshot-id"] == snapshot.parentId()
    assert fields["timestamp-ms"] == snapshot.timestampMillis()
    assert fields["summary"] == {str(k): str(v) for k, v in snapshot.summary().items()}
    assert fields["summary"][wap_etl.BATCH_PROPERTY] == "b1"
    first = table.snapshot(snapshot.parentId())
    while first.parentId() is not None:
        first = table.snapshot(first.parentId())
    assert "parent-snapshot-id" not in wap_etl.snapshot_fields(first)
    assert wap_etl.read_mark(first).parent_id is None


def test_the_ledger_is_read_while_the_batch_is_read_not_after(wap):
    """The consumed runs' read starts in the read step, on a thread of its own, so prepare waits
    for nothing; its Spark job is counted where it started."""
    assert wap.run([{"id": 1}], batch_id="b0", checks=[])[0] == 0
    batch = wap.csv([{"id": 2}])
    code, report = wap.run(batch, batch_id="b1", checks=[])
    assert code == 0 and report.status == "published"
    # the ledger's read; the CSV header is read in the driver
    assert report.spark_jobs["prepare"] == 0 and report.spark_jobs["read"] == 1
    code, again = wap.run(batch, batch_id="b1", checks=[])
    assert code == 0 and again.status == "already_published" and wap.ids() == [1, 2]


def test_a_ledger_read_that_fails_in_the_background_fails_the_run(wap, monkeypatch):
    """A failed background read must never look like an empty ledger: that would load a batch
    again."""
    assert wap.run([{"id": 1}], batch_id="b0", checks=[])[0] == 0

    def broken(self):
        raise RuntimeError("ledger unreadable")
    monkeypatch.setattr(wap_etl.Ledger, "read_consumed", broken)
    code, report = wap.run([{"id": 1}], batch_id="b0", checks=[])
    assert code == wap_etl.EXIT_ERROR and "ledger unreadable" in report.error
    assert wap.ids() == [1]


def on_a_thread(fn):
    """fn's result (or what it raised), run on a thread of the caller's own, within 5 minutes."""
    done = []

    def target():
        try:
            done.append(fn())
        except BaseException as e:
            done.append(e)
    runner = threading.Thread(target=target, daemon=True)
    runner.start()
    runner.join(300)
    assert done, "the run still waits"
    return done[0]


def test_a_run_on_a_thread_of_the_callers_records_its_row_and_clears_the_branch_setting(wap):
    """The JVM's active session is per thread: a run on a thread a scheduler or notebook started
    must still write its ledger row and leave spark.wap.branch unset."""
    code, report = on_a_thread(lambda: wap.run([{"id": 1}], checks=[]))
    assert code == 0 and report.status is wap_etl.Status.PUBLISHED, report.error
    rows = wap.spark.table(f"{wap.sql}_wap_runs").filter(f"run_id = '{report.run_id}'").collect()
    assert [r["status"] for r in rows] == ["published"]
    assert wap.wap_branch_conf() is None


@pytest.mark.filterwarnings(  # the thread that dies on purpose, and only it
    "ignore:(?s).*unable to create new native thread:pytest.PytestUnhandledThreadExceptionWarning")
def test_a_background_read_whose_thread_died_before_reading_is_read_again_not_waited_for(wap, monkeypatch):
    """A thread that dies before its read (no JVM thread to be had) leaves no rows and no error:
    the run reads the ledger itself, so a batch id already published is still refused. The run
    is on a thread of the caller's own, as a scheduler or notebook may start it."""
    assert wap.run([{"id": 1}], batch_id="b0", checks=[])[0] == 0

    def dies(self, read):
        raise RuntimeError("unable to create new native thread")
    monkeypatch.setattr(wap_etl.Prefetch, "_run", dies)
    code, report = on_a_thread(lambda: wap.run([{"id": 1}], batch_id="b0", checks=[]))
    assert code == wap_etl.EXIT_BAD_INPUT and "batch 'b0' was published by run" in report.error
    assert wap.ids() == [1]


def test_a_small_batch_is_audited_in_one_spark_job(wap):
    """A few rows are scanned in one task, so the shared aggregate needs no exchange: one job."""
    checks = [{"check": "not_null", "column": "id"}, {"check": "unique", "columns": ["id"]},
              {"check": "between", "column": "id", "min": 0, "max": 100}]
    assert wap.run([{"id": i} for i in range(5)], checks=checks)[0] == 0
    code, report = wap.run([{"id": i} for i in range(50, 60)], checks=checks)
    assert code == 0 and all(r["passed"] for r in report.checks)
    assert report.spark_jobs["audit"] == 1, report.spark_jobs
    code, report = wap.run([{"id": 3}, {"id": 70}, {"id": 70}, {"id": None}], checks=checks)
    assert code == 3 and {r["name"]: r["failing_rows"] for r in report.checks} == {
        "not_null_id": 1, "unique_id": 3, "between_id": 0}


def test_after_a_run_a_pyspark_function_call_is_one_jvm_round_trip(wap):
    """pyspark finds `functions.col` by reflection on every call; the job pins the class, so each
    F.col, F.lit or select costs only its own call into the JVM."""
    from py4j import clientserver
    from pyspark.sql import functions as F
    assert wap.run([{"id": 1}], checks=[{"check": "not_null", "column": "id"}])[0] == 0
    sent, caller = [], threading.get_ident()  # not py4j's own thread releasing objects
    real = clientserver.ClientServerConnection.send_command
    clientserver.ClientServerConnection.send_command = (
        lambda self, c: (threading.get_ident() == caller and sent.append(c)) or real(self, c))
    try:
        F.col("id"), F.lit(3)
    finally:
        clientserver.ClientServerConnection.send_command = real
    assert len(sent) == 2, sent
    assert wap.spark.range(1).select((F.col("id") + 1).alias("x")).first()["x"] == 1


@pytest.mark.parametrize("entries", [{}, {"": "e"}, {"main": "1"}, {"a": "1", "b\0c": "2", "d\ne": "3"}])
def test_a_java_map_is_read_whole_whatever_its_keys(spark, entries):
    """Table refs and summaries are read with their keys fetched at once; a key with a NUL or a
    line break in it is still read exactly."""
    jmap = spark.sparkContext._jvm.java.util.HashMap()
    for k, v in entries.items():
        jmap.put(k, v)
    assert dict(wap_etl.java_items(jmap)) == entries


HEADERS = [  # (file text, reader options): plain headers the driver reads as Spark does
    ("id,amount,status\r\n1,2.5,new\r\n", {}),
    ("\n\nid,Amount, note \n1,2,x\n", {}),
    ("id\tamount\n1\t2\n", {"sep": "\t"}),
    ("id;amount\n1;2\n", {"delimiter": ";"}),
    ("order id,amount\n1,2\n", {}),
]


@pytest.mark.parametrize("gzipped", [False, True])
@pytest.mark.parametrize("text,options", HEADERS)
def test_a_csv_header_read_in_the_driver_names_the_columns_as_spark_does(spark, tmp_path, text, options, gzipped):
    path = tmp_path / ("batch.csv.gz" if gzipped else "batch.csv")
    path.write_bytes(gzip.compress(text.encode()) if gzipped else text.encode())
    names = wap_etl.csv_header_in_driver(spark, {"header": "true", **options}, str(path))
    assert names is not None and names == spark.read.options(header="true", **options).csv(str(path)).columns


@pytest.mark.parametrize("text,options", [
    ('"id","amount"\n1,2\n', {}),                      # quoted: Spark's parser decides
    ("id,id\n1,2\n", {}),                              # Spark renames duplicates
    ("id,,amount\n1,2,3\n", {}),                       # and names a blank one _c1
    ("\ufeffid,amount\n1,2\n", {}),                    # a byte-order mark
    ("id,NA\n1,2\n", {"nullValue": "NA"}),             # the null value names no column
    ("#note\nid,amount\n1,2\n", {"comment": "#"}),    # an option that changes the parsing
    ("", {}),                                           # no header at all
    ("  \nid,amount\n1,2\n", {}),                       # a blank line of spaces
    ("\x01\nid,amount\n1,2\n", {}),                     # control characters
])
def test_a_csv_header_the_driver_cannot_read_exactly_is_left_to_spark(spark, tmp_path, text, options):
    path = tmp_path / "batch.csv"
    path.write_text(text)
    assert wap_etl.csv_header_in_driver(spark, {"header": "true", **options}, str(path)) is None


def test_a_csv_batch_with_blank_lines_before_its_header_loads_into_the_right_columns(wap):
    assert wap.run([{"id": 1, "amount": 1.5, "status": "new"}], checks=[])[0] == 0
    path = wap.tmp / "in" / "blank_lines.csv"
    path.write_text("\n\nstatus,id,amount\npaid,2,7.5\n")
    code, report = wap.run(str(path), checks=[])
    assert code == 0 and report.spark_jobs["read"] == 1, report.error
    assert [(r["id"], r["amount"], r["status"]) for r in wap.rows()] == [(1, 1.5, "new"), (2, 7.5, "paid")]


@pytest.mark.parametrize("other,detail", [
    ("amount,id\n3.5,3\n", "expected 'id', found 'amount'"),  # the same columns in another order
    ("id,amount,note\n3,3.5,x\n", ""),                         # another column
])
def test_a_csv_file_whose_header_differs_from_the_others_is_bad_input_naming_it(wap, other, detail):
    assert wap.run([{"id": 1, "amount": 1.5}], checks=[])[0] == 0
    folder = wap.tmp / "in" / "day2"
    folder.mkdir(parents=True)
    (folder / "a.csv").write_text("id,amount\n2,2.5\n")
    (folder / "b.csv").write_text(other)
    code, report = wap.run(str(folder), checks=[])
    assert code == 2 and wap.ids() == [1], report.error
    assert "b.csv: its CSV header does not match" in report.error and detail in report.error


def test_a_csv_header_is_read_from_a_file_whose_name_has_percent_signs_and_spaces(spark, tmp_path):
    path = tmp_path / "day%41 one.csv"
    path.write_text("id,amount\n1,2\n")
    assert wap_etl.csv_header_in_driver(spark, {"header": "true"}, str(tmp_path / "day*")) == ["id", "amount"]


def test_the_schema_of_a_table_in_hand_is_the_schema_spark_reads(spark, ns):
    # the read step loads the table once and takes its schema from it, not from another load
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS local.{ns}")
    spark.sql(f"CREATE TABLE local.{ns}.wide (id bigint NOT NULL COMMENT 'the key', amount decimal(12,3), "
              "at timestamp, local_at timestamp_ntz, day date, ok boolean, ratio double, name string, "
              "tags array<string>, attrs map<string, int>, `odd name` struct<a: int, `b.c`: array<struct<d: string>>>) "
              "USING iceberg")
    t = wap_etl.TableRef("local", ns, "wide")
    assert wap_etl.table_schema(spark, wap_etl.iceberg_table(spark, t)) == spark.table(t.sql).schema


def caching_catalog_sees_another_writers_commit(spark, ns, warehouse, after_first_load=lambda name: None):
    """Load a table through a catalog that caches, commit to it through the job's own catalog
    (another catalog instance: the cache does not see it), and load it again through the cache."""
    cached = f"cached_{ns}"[:40].lower()
    spark.conf.set(f"spark.sql.catalog.{cached}", "org.apache.iceberg.spark.SparkCatalog")
    spark.conf.set(f"spark.sql.catalog.{cached}.type", "hadoop")
    spark.conf.set(f"spark.sql.catalog.{cached}.warehouse", warehouse)
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS local.{ns}")
    spark.sql(f"CREATE TABLE local.{ns}.t (id bigint) USING iceberg")
    spark.sql(f"INSERT INTO local.{ns}.t VALUES (1)")
    through_cache = wap_etl.TableRef(cached, ns, "t")
    first = wap_etl.iceberg_table(spark, through_cache).currentSnapshot().snapshotId()
    after_first_load(cached)
    spark.sql(f"INSERT INTO local.{ns}.t VALUES (2)")
    newest = wap_etl.iceberg_table(spark, wap_etl.TableRef("local", ns, "t")).currentSnapshot().snapshotId()
    assert newest != first
    return wap_etl.iceberg_table(spark, through_cache).currentSnapshot().snapshotId() == newest


def test_a_table_from_a_caching_catalog_is_refreshed_to_another_writers_commit(spark, ns, warehouse):
    # the job's own catalog loads afresh each time; one that caches (a user's) must still be refreshed
    assert caching_catalog_sees_another_writers_commit(spark, ns, warehouse)
    assert wap_etl.catalog_caches(spark, f"cached_{ns}"[:40].lower())
    assert not wap_etl.catalog_caches(spark, "local")


def test_a_catalog_that_cached_before_its_setting_was_turned_off_is_still_refreshed(spark, ns, warehouse):
    # a catalog reads its settings when first used: turning its cache off later changes nothing
    turn_off = lambda name: spark.conf.set(f"spark.sql.catalog.{name}.cache-enabled", "false")  # noqa: E731
    assert caching_catalog_sees_another_writers_commit(spark, ns, warehouse, after_first_load=turn_off)


def maintain(wap, spark):
    """Two publishes with another writer's snapshot (compaction's, here an insert) between them,
    then expiry: main's ancestry ends at an expired snapshot that is not this job's."""
    assert wap.run([{"id": 1}], checks=VOLUME)[0] == 0
    spark.sql(f"INSERT INTO {wap.sql} VALUES (2)")  # not this job's
    assert wap.run([{"id": 3}], checks=VOLUME)[0] == 0
    later = (datetime.now(timezone.utc) + timedelta(minutes=1)).strftime("%Y-%m-%d %H:%M:%S")
    spark.sql(f"CALL local.system.expire_snapshots(table => '{wap.table}', older_than => TIMESTAMP '{later}', "
              "retain_last => 1)")


def test_a_run_on_a_table_whose_compaction_snapshot_expired_reads_the_ledger_once(wap, spark, monkeypatch):
    """Another writer's snapshot (compaction's, here an insert) expired from main's ancestry ends
    every walk of it; the ledger's rows, unchanged since the run read them, are not read again."""
    maintain(wap, spark)
    reads, real = [], wap_etl.Ledger.read_consumed
    monkeypatch.setattr(wap_etl.Ledger, "read_consumed", lambda self: reads.append(1) or real(self))
    asked, since = [], wap_etl.Ledger.recorded_since_read
    monkeypatch.setattr(wap_etl.Ledger, "recorded_since_read", lambda self: asked.append(since(self)) or asked[-1])
    code, report = wap.run([{"id": 4}], checks=VOLUME)
    assert code == 0 and report.status == "published" and wap.ids() == [1, 2, 3, 4]
    assert asked and not any(asked), "the walk stopped at the expired snapshot; the ledger had no new rows"
    assert len(reads) == 1


def test_a_ledger_dropped_while_a_run_on_a_maintained_table_publishes_stops_the_run_naming_it(wap, spark, monkeypatch):
    """Main's ancestry ends at an expired snapshot, so the ledger is what the publish decision
    reads past it: dropped under the run, the run stops (exit 1, main untouched), and says why."""
    maintain(wap, spark)
    code, report = run_dropping_the_ledger_at_the_audit(wap, spark, monkeypatch)
    assert wap.ids() == [1, 2, 3] and report.branch in wap.refs(), "main untouched, the audited batch kept"


@pytest.mark.parametrize("made_again", [False, True], ids=["dropped", "dropped_and_made_again"])
def test_a_ledger_dropped_while_a_run_rebases_stops_the_run_and_gets_no_row_of_it(wap, spark, monkeypatch, made_again):
    """The rebase reads the ledger again for the history checks: gone, or another ledger under its
    name (made by a run that began after the drop), the run stops rather than judge them on rows
    that are not the table's history, and writes no row: a new ledger would take the name the old
    one is restored under."""
    assert wap.run([{"id": 1}], checks=VOLUME)[0] == 0
    code, report = run_dropping_the_ledger_at_the_audit(wap, spark, monkeypatch, main_moves=True,
                                                        made_again=made_again)
    assert report.rebases == 1 and wap.ids() == [1, 50] and report.branch in wap.refs()
    runs = f"local.{wap.ns}.orders_wap_runs"
    assert spark.catalog.tableExists(runs) == made_again
    assert not made_again or spark.table(runs).count() == 0


def test_a_ledger_dropped_as_a_run_first_reads_it_is_not_made_again_for_the_runs_row(wap, spark, monkeypatch):
    """Dropped between the check that it exists and its load: the run stops, and its closing row
    makes no new ledger under the name the old one is restored to."""
    assert wap.run([{"id": 1}], checks=VOLUME)[0] == 0
    runs, real, calls = f"local.{wap.ns}.orders_wap_runs", wap_etl.Ledger.head, []

    def dropped_just_before(self):
        if not calls:
            calls.append(1)
            spark.sql(f"DROP TABLE {runs}")
        return real(self)
    monkeypatch.setattr(wap_etl.Ledger, "head", dropped_just_before)
    code, report = wap.run([{"id": 2}], checks=VOLUME)
    assert code == 1 and report.error.startswith("run ledger: "), report.error
    assert wap.ids() == [1] and not spark.catalog.tableExists(runs)


def run_dropping_the_ledger_at_the_audit(wap, spark, monkeypatch, main_moves=False, made_again=False):
    """A run whose ledger is dropped (and, if `made_again`, made anew; if `main_moves`, main
    moved) just after its audit: it must stop, exit 1, naming the ledger."""
    def drop_ledger(step):
        if step == "audit":
            spark.sql(f"DROP TABLE local.{wap.ns}.orders_wap_runs")
            if made_again:
                wap_etl.create_table(spark, wap_etl.TableRef("local", wap.ns, "orders_wap_runs"),
                                     wap_etl.LEDGER_COLUMNS)
            if main_moves:
                spark.sql(f"INSERT INTO {wap.sql} VALUES (50)")
    monkeypatch.setattr(wap_etl, "fault_point", drop_ledger)
    code, report = wap.run([{"id": 4}], checks=VOLUME)
    assert code == 1 and report.error.startswith("run ledger: ") and "orders_wap_runs` was dropped" in report.error, \
        report.error
    return code, report
