"""Checks proven from Iceberg's file metrics: what metadata can prove is not scanned at all, what it
cannot (NaN, NULL, truncated bounds, no metrics, a file that may hold a violation) is scanned, and
either way the verdicts equal a full scan's."""
import math
import os
import random
from datetime import datetime, timedelta, timezone

import pytest

import wap_etl
from conftest import SOAK, records_read, session_conf

@pytest.fixture(autouse=True)
def large_batch_path(monkeypatch):
    """These batches are a few rows; audit them as a large batch is (pushdown reads), which is
    what this file tests. A batch under SMALL_BATCH_ROWS is scanned once instead, and one under
    FOLD_PUSHDOWN_ROWS has its pushdown counted by a scan that runs anyway."""
    monkeypatch.setattr(wap_etl, "SMALL_BATCH_ROWS", 0)
    monkeypatch.setattr(wap_etl, "FOLD_PUSHDOWN_ROWS", 0)


PROVABLE = [{"check": "not_null", "column": "id"}, {"check": "between", "column": "amount", "min": 0, "max": 100},
            {"check": "freshness", "column": "ts", "max_age_hours": 48}, {"check": "row_count", "min": 1}]


def recent(hours=1):
    return (datetime.now(timezone.utc) - timedelta(hours=hours)).strftime("%Y-%m-%d %H:%M:%S")


def staged_files(spark, wap):
    """Every data file of the audit branch's snapshot (Iceberg's planning: the `files` metadata
    table cannot be read at a branch of a partitioned table)."""
    branch = next(n for n in wap.refs() if n.startswith("audit_"))
    table = wap_etl.iceberg_table(spark, wap_etl.TableRef("local", wap.ns, "orders"))
    tasks, paths = table.newScan().useRef(branch).planFiles(), []
    try:
        iterator = tasks.iterator()
        while iterator.hasNext():
            paths.append(str(iterator.next().file().path()))
        return paths
    finally:
        tasks.close()


def hide_staged_files_during_the_audit(wap, spark, monkeypatch):
    """From the write until the audit is done, the data files the audit would have to read are
    gone (renamed); returns the list of those hidden."""
    hidden = []

    def hide(step):
        if step == "write":  # the data files the audit would have to read are gone...
            for path in staged_files(spark, wap):
                local = path[len("file:"):] if path.startswith("file:") else path
                if os.path.exists(local) and not any(local == h for h, _ in hidden):
                    os.rename(local, local + ".away")
                    hidden.append((local, local + ".away"))
        if step == "audit":  # ...until the audit is done
            for local, away in hidden:
                os.rename(away, local)
    monkeypatch.setattr(wap_etl, "fault_point", hide)
    return hidden


def test_metadata_decided_checks_read_no_data_file(wap, spark, monkeypatch):
    assert wap.run([{"id": 0, "amount": 1.0, "ts": recent()}], checks=PROVABLE)[0] == 0
    hidden = hide_staged_files_during_the_audit(wap, spark, monkeypatch)
    rows = [{"id": i, "amount": float(i), "ts": recent()} for i in range(1, 50)]
    code, report = wap.run(rows, checks=PROVABLE)
    assert hidden, "the staged files were hidden"
    assert code == 0 and report.status == "published", report.error
    assert {c["name"]: c["decided_by"] for c in report.checks} == {
        "not_null_id": "metadata", "between_amount": "metadata", "freshness_ts": "metadata",
        "row_count": "metadata"}
    assert report.rows_written == 49 and report.checks[2]["observed"] < 1.1
    assert len(wap.ids()) == 50


def spread_over_files(files):
    """A transform that writes the batch as `files` data files, ids in ranges."""
    return lambda df: df.repartitionByRange(files, "id")


@pytest.mark.parametrize("position", [0, 3, 6, 9])
def test_a_violation_in_any_one_file_is_found_and_counted_exactly(wap, monkeypatch, position):
    monkeypatch.setattr(wap_etl, "transform", spread_over_files(4))
    rows = [{"id": i, "amount": float(i), "ts": recent()} for i in range(12)]
    rows[position]["amount"] = -5.0
    rows[position + 1]["amount"] = 500.0
    code, report = wap.run(rows, checks=PROVABLE)
    result = {c["name"]: c for c in report.checks}["between_amount"]
    assert code == 3 and result["failing_rows"] == 2 and result["decided_by"] == "scan"
    assert sorted(r["amount"] for r in result["sample"]) == [-5.0, 500.0]
    assert {c["name"]: c["decided_by"] for c in report.checks}["not_null_id"] == "metadata"


def test_accepted_values_on_files_of_one_value_are_proven_and_a_bad_file_is_counted(wap, spark):
    rows = [{"id": i, "status": ["new", "paid", "shipped"][i % 3]} for i in range(30)]
    check = [{"check": "accepted_values", "column": "status", "values": ["new", "paid", "shipped"]}]
    df = spark.createDataFrame(rows, "id int, status string")
    good, bad = str(wap.tmp / "in" / "good.parquet"), str(wap.tmp / "in" / "bad.parquet")
    df.write.parquet(good)
    code, report = wap.run(good, checks=check, partition_by="status")  # a file per status
    assert code == 0 and report.checks[0]["decided_by"] == "metadata"
    df.union(spark.createDataFrame([(99, "lost")], "id int, status string")).selectExpr(
        "id + 100 AS id", "status").write.parquet(bad)
    code, report = wap.run(bad, checks=check, partition_by="status")
    assert code == 3 and report.checks[0]["failing_rows"] == 1 and report.checks[0]["decided_by"] == "pushdown"


VALUE_CHECKS = [{"check": "accepted_values", "column": "status", "values": ["new", "paid", "shipped"]},
                {"check": "accepted_values", "column": "k", "values": [1, 3, 5, 7, 9], "allow_null": False}]


def audit_reading(spark, monkeypatch):
    """Records every audit's rows read from files (data files and manifests) into the list returned."""
    read, real = [], wap_etl.audit
    monkeypatch.setattr(wap_etl, "audit", lambda *a, **k: read.append(records_read(
        spark, lambda: real(*a, **k), "audit")) or read[-1][0])
    return read


@pytest.mark.parametrize("driver_files, decided_by", [(8, "row_groups"), (0, "pushdown")])
def test_value_checks_the_manifests_cannot_decide_are_decided_by_row_group_dictionaries(
        wap, spark, monkeypatch, driver_files, decided_by):
    monkeypatch.setattr(wap_etl, "ROW_GROUP_FILES", driver_files)  # 0: by the filtered read
    monkeypatch.setattr(wap_etl, "transform", spread_over_files(3))
    read = audit_reading(spark, monkeypatch)
    rows = [{"id": i, "status": ["new", "paid", "shipped"][i % 3], "k": [1, 3, 5, 7, 9][i % 5]}
            for i in range(3000)]
    code, report = wap.run(rows, checks=VALUE_CHECKS)
    assert code == 0, report.error
    assert [c["decided_by"] for c in report.checks] == [decided_by] * 2
    files = spark.sql(f"SELECT count(*) FROM {wap.sql}.files").first()[0]
    assert files == 3 and read[0][1] <= files, "only manifest entries were read, no data row"
    if decided_by == "row_groups":  # the footers and dictionaries, read in the driver
        assert report.spark_jobs["audit"] == 0 and read[0][1] == 0, (report.spark_jobs, read)


@pytest.mark.parametrize("mode", ["append", "overwrite_partitions"])
def test_a_row_count_alone_is_read_from_the_snapshot_summary_not_the_manifests(wap, spark, monkeypatch,
                                                                               mode):
    assert wap.run([{"id": i, "day": i % 2} for i in range(10)], checks=[], partition_by="day")[0] == 0
    monkeypatch.setattr(wap_etl, "transform", spread_over_files(3))
    read = audit_reading(spark, monkeypatch)
    code, report = wap.run([{"id": i, "day": 0} for i in range(300)], mode=mode,
                           checks=[{"check": "row_count", "min": 300, "max": 300}])
    assert code == 0 and report.rows_written == 300 and report.checks[0]["observed"] == 300
    assert report.checks[0]["decided_by"] == "metadata"
    assert read[0][1] == 0, "neither a manifest entry nor a data row was read"


@pytest.mark.parametrize("bad, decided_by", [({"status": "lost"}, "pushdown"), ({"k": 4}, "pushdown"),
                                             ({"k": None}, "scan")])
def test_a_value_no_row_group_dictionary_clears_is_found_and_counted_exactly(wap, monkeypatch, bad,
                                                                             decided_by):
    monkeypatch.setattr(wap_etl, "transform", spread_over_files(3))
    rows = [{"id": i, "status": ["new", "paid", "shipped"][i % 3], "k": [1, 3, 5, 7, 9][i % 5]}
            for i in range(300)]
    rows[150].update(bad)
    code, report = wap.run(rows, checks=VALUE_CHECKS)
    result = next(c for c in report.checks if c["name"].endswith(next(iter(bad))))
    assert code == 3 and result["failing_rows"] == 1 and result["decided_by"] == decided_by
    assert result["sample"][0]["id"] == 150
    other = next(c for c in report.checks if c is not result)
    assert other["passed"] and other["failing_rows"] == 0


def test_a_max_over_a_file_holding_nan_is_nan_not_the_files_upper_bound(wap, spark):
    rows = [{"id": i, "x": v} for i, v in enumerate([1.0, float("nan"), 5.0])]
    path = str(wap.tmp / "in" / "nan.parquet")
    spark.createDataFrame(rows, "id int, x double").coalesce(1).write.parquet(path)
    code, report = wap.run(path, checks=[{"check": "not_null", "column": "id"},
                                         {"check": "stat", "column": "x", "stat": "max", "max": 1000}])
    assert report.checks[0]["decided_by"] == "metadata"
    assert code == 3 and report.checks[1]["detail"] and "NaN" in report.checks[1]["detail"], report.checks[1]


def test_a_sql_check_over_a_named_table_sees_its_nan(wap, spark):
    spark.sql(f"CREATE TABLE local.{wap.ns}.prices (x double) USING iceberg")
    spark.createDataFrame([(1.0,), (float("nan"),), (5.0,)], "x double").coalesce(1) \
        .writeTo(f"local.{wap.ns}.prices").append()
    code, report = wap.run([{"id": 1}], checks=[
        {"check": "sql", "query": f"SELECT max(x) FROM local.{wap.ns}.prices", "max": 1000}])
    assert code == 3 and "NaN" in (report.checks[0]["detail"] or ""), report.checks[0]


def test_a_nan_key_already_on_main_is_a_duplicate(wap, spark):
    unique = [{"check": "unique", "columns": ["k"]}]
    first, second = str(wap.tmp / "in" / "a.parquet"), str(wap.tmp / "in" / "b.parquet")
    spark.createDataFrame([(1.0,), (float("nan"),)], "k double").coalesce(1).write.parquet(first)
    spark.createDataFrame([(float("nan"),), (2.0,)], "k double").coalesce(1).write.parquet(second)
    assert wap.run(first, checks=unique)[0] == 0
    code, report = wap.run(second, checks=unique)
    assert code == 3 and report.checks[0]["failing_rows"] == 1, report.checks[0]


QTY_ROWS = [{"id": i, "qty": 1 + i % 9, "x": float(i)} for i in range(300)]


@pytest.mark.parametrize("mode", ["append", "overwrite_partitions"])
def test_an_expression_no_added_files_bounds_admit_is_proven_without_a_spark_job(wap, spark, monkeypatch, mode):
    assert wap.run([{"id": 1000, "qty": 1, "x": 0.0, "day": 9}], checks=[], partition_by="day")[0] == 0
    monkeypatch.setattr(wap_etl, "transform", spread_over_files(3))
    hidden = hide_staged_files_during_the_audit(wap, spark, monkeypatch)
    code, report = wap.run([dict(r, day=r["id"] % 2) for r in QTY_ROWS], mode=mode,
                           checks=[{"check": "expression", "expr": "qty >= 1 AND qty <= 9"}])
    assert hidden, "the staged files were hidden"
    assert code == 0 and report.checks[0]["decided_by"] == "metadata", (report.error, report.checks)
    assert report.spark_jobs["audit"] == 0, report.spark_jobs


DQDL_ROW_TESTS = ('Rules = [ ColumnValues "qty" != 0, ColumnValues "qty" not between 10 and 20, '
                  'ColumnValues "qty" not in [11, 12], DataFreshness "ts" <= 24 hours ]')


def test_dqdl_row_tests_no_value_can_leave_undecided_are_proven_by_bounds(wap, spark, monkeypatch):
    """DQDL fails a row its test cannot decide (coalesce(.., false), which Iceberg cannot read);
    a number compared with numbers, a time with a time, is always decided, so bounds prove it."""
    monkeypatch.setattr(wap_etl, "transform", spread_over_files(3))
    hidden = hide_staged_files_during_the_audit(wap, spark, monkeypatch)
    code, report = wap.run([dict(r, ts=recent()) for r in QTY_ROWS], checks=DQDL_ROW_TESTS)
    assert hidden, "the staged files were hidden"
    assert code == 0 and [c["decided_by"] for c in report.checks] == ["metadata"] * 4, (report.error, report.checks)
    assert report.spark_jobs["audit"] == 0, report.spark_jobs


def test_dqdl_row_tests_proven_by_bounds_still_fail_a_null_value(wap, monkeypatch):
    monkeypatch.setattr(wap_etl, "transform", spread_over_files(3))
    rows = [dict(r, ts=recent()) for r in QTY_ROWS]
    rows[5]["qty"], rows[7]["ts"] = None, None  # != and not in pass a NULL; not between and freshness fail it
    code, report = wap.run(rows, checks=DQDL_ROW_TESTS)
    assert code == 3 and [c["failing_rows"] for c in report.checks] == [0, 1, 0, 1], report.checks
    assert [c["decided_by"] for c in report.checks] == ["metadata", "pushdown", "metadata", "pushdown"]


def test_bounds_take_a_dqdl_row_test_unwrapped_only_where_it_decides_every_value(spark):
    df = spark.createDataFrame([], "k int, s string, x int, d date")
    row_test = "coalesce(`{}` IS NOT NULL AND ({}), false)"
    checks = wap_etl.parse_checks([{"name": name, "check": "expression", "expr": expr, **extra} for name, expr, extra in [
        ("number", row_test.format("k", "`k` <> 3L"), {}),
        ("date", "coalesce(`d` IS NULL OR (`d` <> '2024-06-05'), false)", {}),
        ("text against a number", row_test.format("s", "`s` <> 3L"), {}),  # 'abc' <> 3 is NULL
        ("another column", row_test.format("k", "`x` > 1"), {}),  # x may be NULL where k is not
        ("look-alike", row_test.format("k", "k > 1) OR (k < 0"), {}),  # not (k > 1) OR (k < 0) as one
        ("with where", row_test.format("k", "`k` <> 3L"), {"where": "x > 0"})]])
    assert set(wap_etl.bounds_tests(df, checks)) == {"number", "date"}


def test_bounds_take_a_dqdl_row_test_unwrapped_only_on_its_own_column_when_case_tells_columns_apart(spark):
    with session_conf(spark, {"spark.sql.caseSensitive": "true"}):
        df = spark.createDataFrame([], "A int, a int")
        checks = wap_etl.parse_checks([
            {"name": "own", "check": "expression", "expr": "coalesce(`A` IS NOT NULL AND (`A` > 0), false)"},
            {"name": "other", "check": "expression", "expr": "coalesce(`A` IS NOT NULL AND (`a` > 0), false)"}])
        assert set(wap_etl.bounds_tests(df, checks)) == {"own"}


def test_an_expression_over_a_partition_column_finds_the_violation_in_its_partition(wap, monkeypatch):
    """Iceberg applies a test of an identity-partition column itself (Spark's filter above the
    read drops it): the bounds test then sees only the rest, which files of other days can
    meet. It must not prove the check, and the count is of the violating day's row only."""
    assert wap.run([{"id": 1000, "qty": 1, "x": 0.0, "day": 9}], checks=[], partition_by="day")[0] == 0
    rows = [dict(r, day=r["id"] % 2) for r in QTY_ROWS]
    rows[10]["qty"] = rows[11]["qty"] = 0  # day 0 and day 1: only day 1's breaks the rule
    code, report = wap.run(rows, checks=[{"check": "expression", "expr": "day <> 1 OR qty >= 1"}])
    result = report.checks[0]
    assert code == 3 and result["failing_rows"] == 1 and result["decided_by"] != "metadata", result
    assert [r["id"] for r in result["sample"]] == [11]


@pytest.mark.parametrize("driver_files, decided_by", [(8, "row_groups"), (0, "pushdown")])
def test_an_expression_files_without_bounds_cannot_prove_is_counted_by_a_filtered_read(wap, spark, monkeypatch,
                                                                                       driver_files, decided_by):
    """Without bounds in the manifests, the row groups' own statistics (Parquet's, in each file's
    footer) still prove it in the driver; without that, the filtered read counts it."""
    monkeypatch.setattr(wap_etl, "ROW_GROUP_FILES", driver_files)
    assert wap.run([{"id": 1000, "qty": 1, "x": 0.0}], checks=[])[0] == 0
    spark.sql(f"ALTER TABLE {wap.sql} SET TBLPROPERTIES ('write.metadata.metrics.column.qty'='counts')")
    monkeypatch.setattr(wap_etl, "transform", spread_over_files(3))
    code, report = wap.run(QTY_ROWS, checks=[{"check": "expression", "expr": "qty >= 1 AND qty <= 9"}])
    result = report.checks[0]  # a clean batch: with bounds it would be proven by them
    assert code == 0 and result["failing_rows"] == 0 and result["decided_by"] == decided_by, result
    bounds = spark.sql(f"SELECT readable_metrics.qty.lower_bound FROM {wap.sql}.files "
                       "WHERE record_count > 1").collect()
    assert len(bounds) == 3 and all(b[0] is None for b in bounds), bounds


@pytest.mark.parametrize("why", ["more files than the driver tests", "no evaluator on this build"])
def test_an_expression_the_driver_cannot_test_against_bounds_is_counted_by_a_filtered_read(wap, monkeypatch, why):
    monkeypatch.setattr(wap_etl, "transform", spread_over_files(3))
    if why == "more files than the driver tests":
        monkeypatch.setattr(wap_etl, "MANY_FILES", 2)
        monkeypatch.setattr(wap_etl, "ROW_GROUP_FILES", 2)
    else:
        real = wap_etl.java

        def java_without_the_evaluator(jvm, name):
            if name.endswith(("InclusiveMetricsEvaluator", "RowGroupFilter")):
                raise RuntimeError(f"no {name} on this build")
            return real(jvm, name)
        monkeypatch.setattr(wap_etl, "java", java_without_the_evaluator)
    code, report = wap.run(QTY_ROWS, checks=[{"check": "expression", "expr": "qty >= 1 AND qty <= 9"}])
    result = report.checks[0]
    assert code == 0 and result["failing_rows"] == 0 and result["decided_by"] == "pushdown", result


def test_an_expression_some_files_bounds_rule_out_is_still_counted_in_the_file_that_may_fail(wap, monkeypatch):
    monkeypatch.setattr(wap_etl, "transform", spread_over_files(3))
    rows = [dict(r) for r in QTY_ROWS]
    rows[299]["qty"] = 10  # the last file only: the first two files' bounds rule the violation out
    code, report = wap.run(rows, checks=[{"check": "expression", "expr": "qty >= 1 AND qty <= 9"}])
    result = report.checks[0]
    assert code == 3 and result["failing_rows"] == 1 and result["decided_by"] == "pushdown", result
    assert [r["id"] for r in result["sample"]] == [299]


def test_an_expression_violated_in_one_file_is_counted_exactly_from_that_file(wap, monkeypatch):
    monkeypatch.setattr(wap_etl, "transform", spread_over_files(3))
    rows = [dict(r) for r in QTY_ROWS]
    rows[150]["qty"], rows[151]["qty"] = 0, 12
    code, report = wap.run(rows, checks=[{"check": "expression", "expr": "qty >= 1 AND qty <= 9"}])
    result = report.checks[0]
    assert code == 3 and result["failing_rows"] == 2 and result["decided_by"] == "pushdown"
    assert sorted(r["id"] for r in result["sample"]) == [150, 151]


def test_expressions_iceberg_cannot_evaluate_alike_are_scanned(wap):
    checks = [{"check": "expression", "expr": "qty < id + 1000", "name": "two_columns"},
              {"check": "expression", "expr": "x >= 0", "name": "floating_point"},
              {"check": "expression", "expr": "qty * 2 < 100", "name": "arithmetic"},
              {"check": "expression", "expr": "qty > 1 OR qty LIKE '1%'", "name": "number_as_text"},
              {"check": "expression", "expr": "qty IN (1, 2, 3, 4, 5, 6, 7, 8, 9)", "name": "bounds_cannot_rule_out"}]
    code, report = wap.run(QTY_ROWS, checks=checks)
    assert code == 0 and [c["decided_by"] for c in report.checks] == ["scan"] * 5, report.checks


@pytest.mark.parametrize("case", ["NaN above the range", "NaN with only a lower bound", "NULL",
                                  "all NULL", "truncated string bounds", "metrics mode none"])
def test_what_metadata_cannot_decide_falls_back_to_a_scan(wap, spark, case):
    checks = {"NaN above the range": [{"check": "between", "column": "x", "max": 10}],
              "NaN with only a lower bound": [{"check": "between", "column": "x", "min": 0}],
              "NULL": [{"check": "not_null", "column": "x"}],
              "all NULL": [{"check": "between", "column": "x", "min": 0}],
              "truncated string bounds": [{"check": "between", "column": "s", "max": "a" * 20 + "5"}],
              "metrics mode none": [{"check": "not_null", "column": "x"}]}[case]
    x = {"NaN above the range": [1.0, float("nan")], "NaN with only a lower bound": [1.0, float("nan")],
         "NULL": [1.0, None], "all NULL": [None, None]}.get(case, [1.0, 2.0])
    rows = [{"id": i, "x": v, "s": "a" * 20 + str(i)} for i, v in enumerate(x)]
    expected = {"NaN above the range": 1, "NULL": 1}.get(case, 0)
    if case == "metrics mode none":
        assert wap.run([{"id": 9, "x": 1.0, "s": "z"}], checks=[])[0] == 0
        spark.sql(f"ALTER TABLE {wap.sql} SET TBLPROPERTIES ('write.metadata.metrics.default'='none')")
    df = wap.spark.createDataFrame(rows, "id int, x double, s string")
    path = str(wap.tmp / "in" / "batch.parquet")
    df.write.parquet(path)
    code, report = wap.run(path, checks=checks)
    result = report.checks[0]
    assert result["decided_by"] == "scan" and result["failing_rows"] == expected, result
    assert code == (3 if expected else 0)


def proven_and_scanned(wap, spark, path, checks, batch_id):
    """The batch at `path` staged (not published), then audited twice: with the metadata proof
    and by a full scan; each audit's results, after asserting they agree on every verdict and
    failing-row count."""
    code, report = wap.run(path, checks=[], publish="false", batch_id=batch_id)
    assert code == 0, report.error
    table = wap_etl.TableRef("local", wap.ns, "orders")
    ledger = wap_etl.Ledger(spark, wap_etl.TableRef("local", wap.ns, "orders_wap_runs"), f"local.{wap.table}")
    staged_df = wap_etl.read_staged(spark, table, report.staged_snapshot, report.main_snapshot_before)
    wap_etl.validate_checks_against(spark, checks, staged_df, table)  # as the job does before any audit
    wap_etl.fit_staged_bounds(checks, staged_df)
    def audit(proof_snapshot=None):
        return wap_etl.audit(wap_etl.Audit(spark, table, staged_df, report.main_snapshot_before, ledger),
                             checks, proof_snapshot)[0]
    proven, scanned = audit(report.staged_snapshot), audit()
    assert [(r["name"], r["passed"], r["failing_rows"]) for r in proven] == \
           [(r["name"], r["passed"], r["failing_rows"]) for r in scanned], batch_id
    return proven, scanned


DQDL_PROPERTY_RULES = ('Rules = [ ColumnValues "k" != {k}, ColumnValues "k" not in [1, 2], '
                       'ColumnValues "k" not between 2 and 7, ColumnValues "d" != "2024-06-05", '
                       'ColumnValues "d" not in ["2024-06-05", "2024-06-30"], '
                       'ColumnValues "d" not between "2024-06-03" and "2024-06-20" ]')


def test_proofs_equal_the_scan_on_random_batches(wap, spark):
    """A property over seeded random batches: with or without the metadata proof, every check
    reaches the same verdict and failing-row count."""
    rng = random.Random(20261122)
    by_metadata = by_pushdown = by_row_groups = dqdl_by_bounds = 0
    for trial in range(40 if SOAK else 6):
        n = rng.randint(1, 40)
        rows = [{"id": trial * 100 + i,
                 "x": rng.choice([None, math.nan, rng.uniform(-20, 120), rng.uniform(0, 100)]),
                 "d": rng.choice([None, f"2024-06-{rng.randint(1, 28):02d}"]),
                 "k": rng.choice([None, 1, 2, 3, 5, 7, 9]),
                 "s": rng.choice([None, "new", "paid", "paid", "x" * 20, "lost"])} for i in range(n)]
        low, high = sorted(rng.sample(range(-10, 110), 2))
        checks = wap_etl.parse_checks([
            {"check": "not_null", "column": "x"}, {"check": "not_null", "column": "id"},
            {"check": "between", "column": "x", "min": low, "max": high},
            {"check": "between", "column": "x", "min": low},
            {"check": "between", "column": "d", "min": "2024-06-05", "max": "2024-06-25"},
            {"check": "between", "column": "x", "min": low, "max": high, "min_exclusive": True,
             "max_exclusive": True, "allow_null": False},
            {"check": "accepted_values", "column": "k", "values": [1, 2, 3, 7]},
            {"check": "accepted_values", "column": "k", "values": [1, 2, 3, 5, 9], "allow_null": False},
            {"check": "accepted_values", "column": "s", "values": ["new", "paid", "x" * 20]},
            {"check": "accepted_values", "column": "s", "values": ["new", "paid", None], "allow_null": False},
            {"check": "expression", "expr": f"k IS NULL OR k <= {rng.choice([3, 7, 9])}"},
            {"check": "expression", "expr": "d >= DATE'2024-06-03' AND d < DATE'2024-06-27'"},
            {"check": "expression", "expr": f"x < {high}"},
            {"check": "row_count", "min": 5}] + wap_etl.parse_dqdl(DQDL_PROPERTY_RULES.format(k=rng.choice([3, 7]))))
        df = spark.createDataFrame(rows, "id int, x double, d string, k int, s string").selectExpr(
            "id", "x", "to_date(d) AS d", "k", "s")
        path = str(wap.tmp / "in" / f"trial{trial}.parquet")
        by = rng.choice([[], ["k"], ["s"]])  # files of one value let accepted_values be proven
        df.repartition(rng.randint(1, 4), *by).write.parquet(path)
        proven, scanned = proven_and_scanned(wap, spark, path, checks, f"t{trial}")
        by_metadata += sum(r["decided_by"] == "metadata" for r in proven)
        by_pushdown += sum(r["decided_by"] == "pushdown" for r in proven)
        by_row_groups += sum(r["decided_by"] == "row_groups" for r in proven)
        dqdl_by_bounds += sum(r["decided_by"] != "scan" for r in proven if r["name"].startswith("ColumnValues"))
    assert by_metadata >= 6, "the proof decided checks in the trials, not only the scan"
    assert by_pushdown >= 2, "row group dictionaries decided checks in the trials"
    assert by_row_groups >= 1, "row groups tested in the driver decided checks in the trials"
    assert dqdl_by_bounds >= 6, "DQDL's row tests were decided by bounds in the trials"


def test_proofs_equal_the_scan_for_every_type_a_bound_has(wap, spark):
    """The bounds are read from the manifests and compared in Python: for longs, floats,
    decimals, dates and timestamps with and without a zone (literals with and without
    an offset, in a session zone with daylight saving), every verdict, count and newest value
    equals the scan's."""
    rng = random.Random(20261124)
    by_metadata = set()
    with session_conf(spark, {"spark.sql.session.timeZone": "America/New_York"}):
        for trial in range(8):
            rows = [{"id": trial * 100 + i, "l": rng.choice([None, rng.randint(-2 ** 40, 2 ** 40), rng.randint(0, 9)]),
                     "f": rng.choice([None, rng.uniform(-5, 5), 0.1, 2.5]),
                     "dec": rng.choice([None, f"{rng.uniform(0, 100):.2f}", "0.10"]),
                     "b": rng.choice([None, True, False, True]),
                     "t": rng.choice([None, f"2024-03-{rng.randint(9, 11):02d} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:00"])}
                    for i in range(rng.randint(2, 30))]
            df = spark.createDataFrame(rows, "id int, l long, f float, dec string, b boolean, t string").selectExpr(
                "id", "l", "f", "CAST(dec AS DECIMAL(10, 2)) AS dec", "b", "to_date(t) AS d",
                "CAST(t AS TIMESTAMP) AS ts", "CAST(t AS TIMESTAMP_NTZ) AS ntz")
            path = str(wap.tmp / "in" / f"types{trial}.parquet")
            df.repartition(rng.randint(1, 3), *rng.choice([[], ["b"], ["l"]])).write.parquet(path)
            moment = f"2024-03-10 {rng.choice(['01:30', '02:30', '03:30', '12:00'])}"  # 02:30 is in the gap
            checks = wap_etl.parse_checks([
                {"check": "between", "column": "l", "min": rng.choice([-2 ** 41, 0, -3.5]), "max": 2 ** 40},
                {"check": "between", "column": "f", "min": rng.choice([-5, 0.1, -4.9]), "max": 5.0},
                {"check": "between", "column": "dec", "min": rng.choice([0, 0.1, 0.11]), "max": 100,
                 "min_exclusive": rng.choice([True, False])},
                {"check": "between", "column": "d", "min": rng.choice(["2024-03-09", "2024-03-10"])},
                {"check": "between", "column": "ts", "min": moment, "name": "ts_local"},
                {"check": "between", "column": "ts", "min": moment + rng.choice(["Z", "-05:00", "+01:00"]),
                 "name": "ts_offset"},
                {"check": "between", "column": "ntz", "min": moment, "allow_null": False},
                {"check": "accepted_values", "column": "l", "values": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]},
                {"check": "accepted_values", "column": "b", "values": [True]},
                {"check": "not_null", "column": "dec"}, {"check": "not_null", "column": "ts"},
                {"check": "freshness", "column": "d", "max_age_hours": 10 ** 6},
                {"check": "freshness", "column": "ts", "max_age_hours": 10 ** 6},
                {"check": "freshness", "column": "ntz", "max_age_hours": 10 ** 6}])
            proven, scanned = proven_and_scanned(wap, spark, path, checks, f"types{trial}")
            for p, q in zip(proven, scanned):  # a freshness's age in hours, taken a moment apart
                if p["name"].startswith("freshness"):
                    assert (p["observed"] is None) == (q["observed"] is None), (trial, p, q)
                    assert p["observed"] is None or abs(p["observed"] - q["observed"]) < 0.01, (trial, p, q)
            by_metadata |= {r["name"] for r in proven if r["decided_by"] == "metadata"}
    assert {"between_l", "between_f", "between_dec", "between_d", "ts_local", "ts_offset", "between_ntz",
            "freshness_d", "freshness_ts", "freshness_ntz"} <= by_metadata, by_metadata


def test_a_bound_spark_rounds_onto_the_literal_is_not_proven_past_the_scan(wap, spark):
    """Where Spark casts one side before comparing (a decimal to double against 0.3, a long to
    double against a fraction), an exclusive bound can turn equal: the proof must fail the row as
    the scan does. Decimals of 38 digits, and strings longer than their 16-character bounds,
    likewise. (A whole number no float holds beside a float column is fitted to compare exactly:
    16777216 is below 16777217, by the proof as by the scan.)"""
    rows = [{"id": i, "a": "0.30", "b": "0.10", "f": 16777216.0, "l": 2 ** 53 + 1, "d": 2.0 ** 53,
             "big": "99999999999.999999999999999999", "s": "b" * 20 + "za"[i]} for i in range(2)]
    df = spark.createDataFrame(rows, "id int, a string, b string, f float, l long, d double, big string, "
                                     "s string").selectExpr(
        "id", "CAST(a AS DECIMAL(10, 2)) AS a", "CAST(b AS DECIMAL(10, 2)) AS b", "f", "l", "d",
        "CAST(big AS DECIMAL(38, 18)) AS big", "s")
    path = str(wap.tmp / "in" / "edges.parquet")
    df.coalesce(1).write.parquet(path)
    checks = wap_etl.parse_checks([
        {"check": "between", "column": "a", "min": 0.3, "min_exclusive": True, "name": "above_0_3"},
        {"check": "between", "column": "b", "max": 0.1, "max_exclusive": True, "name": "below_0_1"},
        {"check": "between", "column": "f", "max": 16777217, "max_exclusive": True, "name": "float_max"},
        {"check": "between", "column": "l", "min": 9007199254740992.0, "min_exclusive": True, "name": "long_min"},
        {"check": "between", "column": "d", "max": 2 ** 53 + 1, "max_exclusive": True, "name": "double_max"},
        {"check": "between", "column": "big", "min": 100000000000, "name": "big_min"},
        {"check": "between", "column": "s", "max": "b" * 20 + "m", "name": "long_string"},
        {"check": "between", "column": "a", "max": 0.5, "name": "inclusive"}])
    proven, scanned = proven_and_scanned(wap, spark, path, checks, "edges")
    assert {r["name"]: r["failing_rows"] for r in scanned} == {
        "above_0_3": 2, "below_0_1": 2, "float_max": 0, "long_min": 2, "double_max": 2, "big_min": 2,
        "long_string": 1, "inclusive": 0}
    assert {r["name"]: r["decided_by"] for r in proven}["inclusive"] == "metadata"


def test_the_key_range_of_the_proof_is_the_batchs_and_many_files_read_alike(wap, spark, monkeypatch):
    """unique's key range from the files' bounds is the batch's own min and max (strings longer
    than their bounds included); a snapshot of more than MANY_FILES files has its metrics read by a
    Spark job instead, which gives the same files' metrics."""
    rows = [{"id": i, "s": f"{'k' * 18}{i:03d}"} for i in range(40, 90)]
    path = str(wap.tmp / "in" / "keys.parquet")
    spark.createDataFrame(rows, "id long, s string").repartitionByRange(4, "id").write.parquet(path)
    code, report = wap.run(path, checks=[], publish="false", batch_id="keys")
    assert code == 0, report.error
    t = wap_etl.TableRef("local", wap.ns, "orders")
    checks = wap_etl.parse_checks([{"check": "unique", "columns": ["id"]}, {"check": "unique", "columns": ["s"]}])
    table, staged = wap_etl.iceberg_table(spark, t), report.staged_snapshot
    summary = wap_etl.snapshot_info(spark, t, staged, table).summary
    proof = wap_etl.prove_from_metadata(spark, t, table, staged, summary, checks, checks)
    assert proof.keys["unique_id"] == [(40, 89)]
    (low, high), = proof.keys["unique_s"]
    assert low <= "k" * 18 + "040" and high >= "k" * 18 + "089"
    in_driver = wap_etl.added_file_metrics(spark, t, table, staged, summary)
    monkeypatch.setattr(wap_etl, "MANY_FILES", 0)
    by_spark = wap_etl.added_file_metrics(spark, t, table, staged, summary)
    assert len(in_driver[1]) >= 2 and in_driver[0] == by_spark[0]
    def canonical(files):
        return sorted((f.records, *[sorted(getattr(f, m).items()) for m in ("nulls", "nans", "lower", "upper")])
                      for f in files)
    assert canonical(in_driver[1]) == canonical(by_spark[1])
    assert wap_etl.prove_from_metadata(spark, t, table, staged, summary, checks, checks) == proof


def test_main_may_hold_a_key_only_where_its_files_bounds_reach_the_batchs_range(wap, spark):
    """The unique look-up on main is planned by Iceberg from the manifests: a batch key range
    clear of every file's bounds needs no query; one that reaches a file's bounds does."""
    assert wap.run([{"id": i, "s": f"k{i:02d}"} for i in range(10, 20)], checks=[])[0] == 0
    table = wap_etl.iceberg_table(spark, wap_etl.TableRef("local", wap.ns, "orders"))
    main = table.currentSnapshot().snapshotId()
    assert not wap_etl.main_may_hold(table, main, [("id", 20, 30)])
    assert wap_etl.main_may_hold(table, main, [("id", 15, 30)])
    assert wap_etl.main_may_hold(table, main, [("ID", 19, 19)])  # as Spark: names ignore case
    assert not wap_etl.main_may_hold(table, main, [("s", "k20", "k30")])
    assert wap_etl.main_may_hold(table, main, [("id", 0, 10), ("s", "k00", "k10")])
    assert not wap_etl.main_may_hold(table, main, [("id", 15, 30), ("s", "k20", "k30")])


def test_unique_finds_a_string_key_already_on_main(wap):
    assert wap.run([{"id": i, "s": f"k{i:02d}"} for i in range(10, 20)], checks=[])[0] == 0
    code, report = wap.run([{"id": 30, "s": "k15"}, {"id": 31, "s": "k99"}],
                           checks=[{"check": "unique", "columns": ["s"]}])
    assert code == 3 and report.checks[0]["sample"] == [{"s": "k15", "count": 1, "on_main": True}]


def raw_string_parquet(spark, path, names):
    """A Parquet file of (id, name) whose names are the bytes given, UTF-8 or not (a Latin-1
    export): Spark reads and writes a string's bytes as they are."""
    from pyspark.sql import functions as F
    df = spark.createDataFrame([(i, bytearray(n)) for i, n in enumerate(names)], "id long, name binary")
    df.select("id", F.col("name").cast("string").alias("name")).coalesce(1).write.mode("overwrite").parquet(str(path))
    return str(path)


def test_unique_finds_a_key_already_on_main_whose_bytes_are_not_utf8(wap, spark):
    """Iceberg writes such a key's bounds with U+FFFD for the bad bytes, which Spark orders as other
    bytes: a key range taken from them would leave the key on main out of the look-up."""
    unique = [{"check": "unique", "columns": ["name"]}]
    key = b"m\xfcller"
    first = raw_string_parquet(spark, wap.tmp / "day1", [b"anna", key])
    assert wap.run(first, checks=unique, source_format="parquet")[0] == 0
    code, report = wap.run(raw_string_parquet(spark, wap.tmp / "day2", [b"bert", key]), checks=unique,
                           source_format="parquet")
    assert code == 3 and report.checks[0]["failing_rows"] >= 1, report.checks


def test_a_string_bound_that_is_not_utf8_proves_nothing(wap, spark):
    """b"\\xc0x" is below "é" as Spark compares bytes; its file's lower bound, decoded by Iceberg with
    U+FFFD, is above it ("ÿ" is above it either way)."""
    batch = raw_string_parquet(spark, wap.tmp / "day1", [b"\xc0x", "\u00ff".encode()])
    code, report = wap.run(batch, checks=[{"check": "between", "column": "name", "min": "\u00e9"}],
                           source_format="parquet")
    assert code == 3 and report.checks[0]["failing_rows"] == 1, report.checks


def test_a_staged_batch_of_several_files_is_read_on_every_core(wap, spark):
    """Iceberg packs up to 16 MB into one task when it adapts its split size: a batch of a few
    small files would be audited by one task on one core of the two."""
    rows = spark.range(40_000).selectExpr("CAST(id AS INT) AS id", "id * 1.5 AS amount", "id % 2 AS part")
    path = str(wap.tmp / "in" / "two_files.parquet")
    rows.write.parquet(path)
    code, report = wap.run(path, checks=[], publish="false", partition_by="part")  # a file a partition
    assert code == 0, report.error
    table = wap_etl.TableRef("local", wap.ns, "orders")
    assert int(wap_etl.snapshot_info(spark, table, report.staged_snapshot).summary["added-data-files"]) == 2
    summary = wap_etl.snapshot_info(spark, table, report.staged_snapshot).summary
    staged = wap_etl.read_staged(spark, table, report.staged_snapshot, report.main_snapshot_before,
                                 summary=summary)
    assert staged.rdd.getNumPartitions() == spark.sparkContext.defaultParallelism == 2


def test_unique_finds_a_uuid_key_already_on_main(wap, spark):
    """Spark reads an Iceberg uuid column as text, but Iceberg orders UUIDs as signed numbers: the
    batch's text range must not prune main's files, or a key already there goes unseen."""
    jvm = spark._jvm
    types = jvm.org.apache.iceberg.types.Types
    fields = jvm.java.util.ArrayList()
    fields.add(types.NestedField.optional(1, "id", types.UUIDType.get()))
    fields.add(types.NestedField.optional(2, "n", types.IntegerType.get()))
    properties = jvm.java.util.HashMap()
    properties.put("format-version", "2")
    properties.put("write.wap.enabled", "true")
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS local.{wap.ns}")
    jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergCatalog(spark._jsparkSession, "local").createTable(
        jvm.org.apache.iceberg.catalog.TableIdentifier.parse(f"{wap.ns}.orders"), jvm.org.apache.iceberg.Schema(fields),
        jvm.org.apache.iceberg.PartitionSpec.unpartitioned(), properties)
    high, low = "90000000-0000-0000-0000-000000000000", "10000000-0000-0000-0000-000000000000"
    assert wap.run([{"id": high, "n": 1}], checks=[])[0] == 0
    code, report = wap.run([{"id": low, "n": 2}, {"id": high, "n": 3}],
                           checks=[{"check": "unique", "columns": ["id"]}])
    assert code == 3 and report.checks[0]["sample"] == [{"id": high, "count": 1, "on_main": True}]
