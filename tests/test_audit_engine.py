"""The audit engine: table-level checks, drop + quarantine, and the one-scan property."""
import os
from datetime import datetime, timedelta

import pytest

import wap_etl
from conftest import records_read

NOW = datetime.now()
ROWS = [{"id": i, "email": f"u{i}@x.com", "amount": float(i), "status": "new",
         "ts": (NOW - timedelta(hours=1)).strftime("%Y-%m-%d %H:%M:%S")} for i in range(1, 5)]


def ids_from(start, n):
    return [dict(r, id=start + k) for k, r in enumerate((ROWS * n)[:n])]


def test_row_checks_read_the_data_once_however_many(spark, tmp_path):
    path = str(tmp_path / "rows.parquet")
    spark.range(2000).selectExpr("id", "id % 7 AS a", "CAST(id AS STRING) AS s").write.parquet(path)
    df = spark.read.parquet(path)
    specs = [{"check": "not_null", "column": "id"}, {"check": "between", "column": "a", "min": 0, "max": 6},
             {"check": "regex", "column": "s", "pattern": "^[0-9]+$"},
             {"check": "expression", "expr": "a >= 0"},
             {"check": "accepted_values", "column": "a", "values": [0, 1, 2, 3, 4, 5, 6]},
             {"check": "not_null", "column": "s"}, {"check": "row_count", "min": 1}]
    checks = wap_etl.parse_checks(specs)
    (results, total), read = records_read(
        spark, lambda: wap_etl.audit(wap_etl.Audit(spark, None, df, None, None), checks))
    assert total == 2000 and all(r["passed"] for r in results)
    assert read == 2000


def test_regex_passes_when_the_value_contains_a_match(wap):
    rows = [dict(ROWS[0], email="xx a@b.com yy")]
    code, report = wap.run(rows, checks=[{"check": "regex", "column": "email", "pattern": "[a-z]@[a-z]"}])
    assert code == 0
    code, report = wap.run(ids_from(10, 1) + [dict(ROWS[0], id=11, email="xx a@b.com yy")],
                           checks=[{"check": "regex", "column": "email", "pattern": "^[a-z0-9]+@[a-z.]+$"}])
    assert code == 3 and report.checks[0]["failing_rows"] == 1


def test_schema_check_passes_on_matching_types(wap):
    spec = {"check": "schema", "columns": {"id": "integer", "amount": "DOUBLE", "email": "string"}}
    code, report = wap.run(ROWS, checks=[spec])
    assert code == 0 and report.checks[0]["passed"]


def test_schema_check_fails_on_drift(wap):
    spec = {"check": "schema", "columns": {"id": "bigint", "missing_col": "string"}}
    code, report = wap.run(ROWS, checks=[spec])
    assert code == 3
    assert "id is int, expected bigint" in report.checks[0]["detail"]
    assert "missing_col missing" in report.checks[0]["detail"]


def test_schema_checks_judge_the_batchs_columns_not_the_tables_others(wap):
    """A column the batch no longer carries is NULL for its rows on the table: that is the upstream
    drift the schema checks are there to catch, not a column the batch has."""
    assert wap.run([{"id": 1, "order_id": 10, "coupon": "x"}], checks=[])[0] == 0
    checks = [{"check": "column_exists", "column": "coupon"},
              {"check": "schema", "columns": {"id": "int", "coupon": "string"}},
              {"check": "stat", "stat": "column_count", "min": 3},
              {"check": "column_exists", "column": "order_id"}]
    code, report = wap.run([{"id": 2, "order_id": 20}], checks=checks)
    assert code == 3
    assert [r["passed"] for r in report.checks] == [False, False, False, True], report.checks
    assert report.checks[1]["detail"] == "coupon missing" and report.checks[2]["observed"] == 2
    assert wap.ids() == [1]


def test_freshness_passes_on_recent_data(wap):
    code, report = wap.run(ROWS, checks=[{"check": "freshness", "column": "ts", "max_age_hours": 3}])
    assert code == 0 and 0.9 < report.checks[0]["observed"] < 1.5


def test_freshness_fails_on_stale_data(wap):
    stale = [dict(r, ts="2020-01-01 00:00:00") for r in ROWS]
    code, report = wap.run(stale, checks=[{"check": "freshness", "column": "ts", "max_age_hours": 24}])
    assert code == 3 and report.checks[0]["observed"] > 24 * 365


def test_accepted_values_of_a_time_column_compare_as_times_not_text(wap):
    rows = [dict(r, ts=t) for r, t in zip(ROWS, ["2024-01-01 00:00:00", "2024-01-01 10:00:00", "2024-01-03 00:00:00"])]
    code, report = wap.run(rows, checks=[
        {"check": "accepted_values", "column": "ts", "values": ["2024-01-01", "2024-01-01T10:00:00", "2024-01-02"]}])
    assert code == 3 and report.checks[0]["failing_rows"] == 1, report.checks  # 2024-01-03 only
    code, report = wap.run(rows, checks='Rules = [ ColumnValues "ts" in ["2024-01-01", "2024-01-01 10:00:00"], '
                                        'ColumnValues "ts" not in ["2024-01-01", "2024-01-02"] ]')
    assert code == 3 and [c["failing_rows"] for c in report.checks] == [1, 1], report.checks


def test_volume_passes_without_history(wap):
    code, report = wap.run(ROWS, checks=[{"check": "volume", "min_ratio": 0.5, "max_ratio": 2}])
    assert code == 0 and report.checks[0]["passed"] and report.checks[0]["observed"] is None


def test_volume_compares_with_the_median_of_recent_publishes(wap):
    volume = {"check": "volume", "min_ratio": 0.5, "max_ratio": 2, "lookback": 3}
    for start, n in ((100, 4), (200, 6), (300, 4)):
        assert wap.run(ids_from(start, n), checks=[volume])[0] == 0
    # median of 4, 6, 4 is 4: 8 rows is 2.0x and passes
    code, report = wap.run(ids_from(400, 8), checks=[volume])
    assert code == 0 and report.checks[0]["observed"] == 2.0
    # now the last three are 6, 4, 8: median 6, so 1 row is 0.1667x and fails
    code, report = wap.run(ids_from(500, 1), checks=[volume])
    assert code == 3 and report.checks[0]["observed"] == 0.1667
    # lookback 1: only the last publish (8 rows) counts: 18 rows is 2.25x and fails
    code, report = wap.run(ids_from(600, 18), checks=[dict(volume, lookback=1)])
    assert code == 3 and report.checks[0]["observed"] == 2.25


def test_drop_publishes_only_the_good_rows(wap):
    rows = ROWS + [dict(ROWS[0], id=5, amount=-3.0), dict(ROWS[0], id=6, status="lost")]
    checks = [{"check": "between", "column": "amount", "min": 0, "action": "drop"},
              {"check": "accepted_values", "column": "status", "values": ["new"], "action": "drop"}]
    code, report = wap.run(rows, checks=checks)
    assert code == 0 and report.status == "published"
    assert wap.ids() == [1, 2, 3, 4]
    assert report.rows_dropped == 2 and report.rows_written == 4
    assert [c["failing_rows"] for c in report.checks] == [1, 1]


def test_quarantine_holds_exactly_the_dropped_rows_with_their_checks(wap, spark):
    rows = ROWS + [dict(ROWS[0], id=5, amount=-3.0, status="lost"), dict(ROWS[0], id=6, status="lost")]
    checks = [{"check": "between", "column": "amount", "min": 0, "action": "drop", "name": "positive"},
              {"check": "accepted_values", "column": "status", "values": ["new"], "action": "drop",
               "name": "known_status"}]
    code, report = wap.run(rows, checks=checks, batch_id="q1")
    assert code == 0 and report.quarantine_table == f"local.{wap.table}_quarantine"
    q = spark.table(f"local.{wap.table}_quarantine").orderBy("id").collect()
    assert [r["id"] for r in q] == [5, 6]
    assert sorted(q[0]["_wap_failed_checks"]) == ["known_status", "positive"]
    assert q[1]["_wap_failed_checks"] == ["known_status"]
    assert {r["_wap_batch_id"] for r in q} == {"q1"}
    assert all(r["_wap_quarantined_at"] is not None for r in q)


def test_quarantine_is_not_duplicated_when_a_batch_is_rerun(wap, spark):
    rows = ROWS + [dict(ROWS[0], id=5, amount=-3.0)]
    checks = [{"check": "between", "column": "amount", "min": 0, "action": "drop"},
              {"check": "row_count", "min": 100}]
    assert wap.run(rows, checks=checks, batch_id="q2")[0] == 3   # audit fails, quarantine written
    assert wap.run(rows, checks=checks[:1], batch_id="q2")[0] == 0
    q = spark.table(f"local.{wap.table}_quarantine").collect()
    assert [r["id"] for r in q] == [5]


def test_a_consumer_without_drop_checks_leaves_no_earlier_attempts_rows_in_the_quarantine(wap, spark):
    rows = ROWS + [dict(ROWS[0], id=5, amount=-3.0)]
    checks = [{"check": "between", "column": "amount", "min": 0, "action": "drop"},
              {"check": "row_count", "min": 100}]
    assert wap.run(rows, checks=checks, batch_id="q3")[0] == 3  # audit fails, id 5 quarantined
    code, report = wap.run(rows, checks=[], batch_id="q3")  # the rows accepted as they are: all published
    assert code == 0 and 5 in wap.ids()
    assert spark.table(f"local.{wap.table}_quarantine").count() == 0, "id 5 is on main, not in quarantine too"


def test_sample_is_fetched_only_for_failed_checks(wap):
    rows = ROWS + [dict(ROWS[0], id=5, amount=-3.0)]
    checks = [{"check": "between", "column": "amount", "min": 0, "action": "warn"},
              {"check": "not_null", "column": "id"}]
    code, report = wap.run(rows, checks=checks)
    assert code == 0
    assert report.checks[0]["sample"][0]["id"] == 5 and report.checks[1]["sample"] == []


def test_audit_from_the_write_matches_the_branch_scan(wap, monkeypatch):
    monkeypatch.setattr(wap_etl, "SMALL_BATCH_ROWS", 0)  # the branch audit as a large batch's: metadata first
    rows = ROWS + [dict(ROWS[0], id=5, amount=-3.0, email=None)]
    checks = [{"check": "between", "column": "amount", "min": 0, "action": "warn"},
              {"check": "not_null", "column": "email", "action": "warn"},
              {"check": "freshness", "column": "ts", "max_age_hours": 5},
              {"check": "unique", "columns": ["id"]}]
    code, scanned = wap.run(rows, checks=checks, batch_id="scan", publish="false")
    code2, observed = wap.run(rows, checks=checks, batch_id="obs", publish="false", audit_source="write")
    assert code == code2 == 0
    assert scanned.audit_source == "branch" and observed.audit_source == "write"
    strip = lambda r: [{k: v for k, v in c.items() if k not in ("observed", "decided_by")} for c in r.checks]
    assert strip(scanned) == strip(observed)
    assert observed.rows_written == 5
    assert [c["decided_by"] for c in observed.checks] == ["write", "write", "write", "scan"]
    assert [c["decided_by"] for c in scanned.checks] == ["scan", "scan", "metadata", "scan"]


def test_observed_metrics_are_refused_when_the_count_differs_from_the_snapshot(wap, spark):
    code, report = wap.run(ROWS, checks=[], publish="false")
    t = wap_etl.TableRef("local", wap.ns, "orders")
    summary = wap_etl.snapshot_info(spark, t, report.staged_snapshot).summary

    class Observed:
        get = {"rows": 999}

    assert wap_etl.observed_metrics(summary, Observed()) is None

    class Right:
        get = {"rows": 4}

    assert wap_etl.observed_metrics(summary, Right()) == {"rows": 4}


def test_unique_still_finds_clashes_outside_pruned_ranges(wap):
    assert wap.run([dict(ROWS[0], id=i) for i in (1, 50, 100)], checks=[])[0] == 0
    code, report = wap.run([dict(ROWS[0], id=i) for i in (49, 50, 51)],
                           checks=[{"check": "unique", "columns": ["id"]}])
    assert code == 3 and report.checks[0]["sample"][0]["id"] == 50


def bitmap_proof(spark, keys, dtype="bigint"):
    df = spark.createDataFrame([(k,) for k in keys], f"k0 {dtype}")
    bounds = [(min(k for k in keys if k is not None), max(k for k in keys if k is not None))]
    return wap_etl.keys_distinct_by_bitmap(df.filter("k0 IS NOT NULL"), bounds, len(keys))


def test_bitmap_proves_distinct_integer_keys_across_bucket_and_sign_boundaries(spark):
    keys = sorted(set(range(-70000, 70000, 7)) | {-32769, -32768, -32767, 32767, 32768, 32769, 0})
    assert bitmap_proof(spark, keys) is True
    assert bitmap_proof(spark, [k for k in keys if abs(k) < 30000], "int") is True


@pytest.mark.parametrize("dupe", [-32768, -1, 0, 1, 32768, 69993])
def test_bitmap_never_proves_keys_with_a_duplicate(spark, dupe):
    keys = list(range(-70000, 70000, 7)) + [-32768, 32768, 0, 1, -1]
    keys = sorted(set(keys)) + [dupe]
    assert bitmap_proof(spark, keys) is False


def test_bitmap_declines_sparse_and_non_integer_keys(spark):
    assert bitmap_proof(spark, [1, 10**12, 2 * 10**12]) is False   # too sparse for bitmaps
    df = spark.createDataFrame([("a",), ("b",)], "k0 string")
    assert wap_etl.keys_distinct_by_bitmap(df, [("a", "b")], 2) is False


def test_unique_passes_clean_batches_by_bitmap_and_counts_duplicates_by_grouping(wap, monkeypatch):
    proofs = []
    real = wap_etl.keys_distinct_by_bitmap
    monkeypatch.setattr(wap_etl, "SMALL_BATCH_KEYS", 0)  # as a batch too big to compare in the driver
    monkeypatch.setattr(wap_etl, "keys_distinct_by_bitmap",
                        lambda *a: proofs.append(real(*a)) or proofs[-1])
    unique = [{"check": "unique", "columns": ["id"]}]
    assert wap.run([dict(ROWS[0], id=i) for i in range(1, 40)], checks=unique)[0] == 0
    code, report = wap.run([dict(ROWS[0], id=i) for i in (100, 101, 101, 102, 102, 102)],
                           checks=unique)
    assert proofs == [True, False]
    assert code == 3 and report.checks[0]["failing_rows"] == 5
    assert report.checks[0]["sample"][0] == {"id": 102, "count": 3, "on_main": False}


def parquet(spark, path, rows, schema):
    spark.createDataFrame(rows, schema).coalesce(1).write.mode("overwrite").parquet(str(path))
    return next(str(path / n) for n in os.listdir(path) if n.endswith(".parquet"))


def test_numbers_beside_a_float_column_are_the_floats_written_so(wap, spark, tmp_path):
    """0.1 beside a float column is the float 0.1 (a little above the double 0.1), 0.7 the float
    0.7 (a little below): a value written as the bound passes as equal to it."""
    source = parquet(spark, tmp_path / "f", [(1, 0.1), (2, 0.05), (3, 0.7)], "id int, f float")
    code, report = wap.run(source, checks=[
        {"check": "accepted_values", "column": "f", "values": [0.1, 0.05, 0.7]},
        {"check": "between", "column": "f", "min": 0.05, "max": 0.7},
        {"check": "between", "column": "f", "max": 0.7, "max_exclusive": True, "name": "below"}])
    assert code == 3 and [r["passed"] for r in report.checks] == [True, True, False], report.checks
    assert report.checks[2]["failing_rows"] == 1


def test_a_number_no_float_is_written_as_stays_exact_beside_a_float_column(wap, spark, tmp_path):
    """1000000.05 is no float's shortest form (the float near it is 1000000.0625, written 1000000.06):
    the column's 1000000.06 is above it, and 99999999.99 is not the column's 1e8."""
    source = parquet(spark, tmp_path / "f", [(1, 1000000.06), (2, 1e8)], "id int, f float")
    code, report = wap.run(source, checks=[
        {"check": "between", "column": "f", "max": 1000000.05, "name": "max"},
        {"check": "accepted_values", "column": "f", "values": [1000000.06, 99999999.99], "name": "values"}])
    assert code == 3 and [r["failing_rows"] for r in report.checks] == [2, 1], report.checks


def test_dqdl_rules_read_numbers_beside_a_float_column_as_the_json_checks_do(wap, spark, tmp_path):
    source = parquet(spark, tmp_path / "f", [(1, 0.1), (2, 0.3)], "id int, f float")
    rules = ['ColumnValues "f" != 0.1', 'ColumnValues "f" not between 0.1 and 0.2', 'ColumnValues "f" <= 0.1',
             'ColumnValues "f" not in [0.1, 0.2]']
    code, report = wap.run(source, checks="Rules = [ " + ", ".join(rules) + " ]")
    assert code == 3 and [r["failing_rows"] for r in report.checks] == [1, 0, 1, 1], report.checks


def test_a_batchs_timestamp_ntz_column_staged_as_a_timestamp_takes_a_bound_with_an_offset(wap, spark, tmp_path):
    from datetime import datetime
    assert wap.run([{"id": 1, "ts": "2024-06-01T09:00:00Z"}], checks=[])[0] == 0
    source = parquet(spark, tmp_path / "n", [(2, datetime(2024, 6, 1, 10))], "id int, ts timestamp_ntz")
    code, report = wap.run(source, checks=[{"check": "between", "column": "ts", "max": "2024-06-01T12:00:00+05:00"}])
    assert code == 3 and report.checks[0]["failing_rows"] == 1, (report.error, report.checks)  # 10:00 UTC > 07:00 UTC
    source = parquet(spark, tmp_path / "m", [(3, datetime(2024, 6, 1, 7)), (4, datetime(2024, 6, 1, 12))],
                     "id int, ts timestamp_ntz")
    code, report = wap.run(source, checks=[{"check": "accepted_values", "column": "ts",
                                            "values": ["2024-06-01T12:00:00+05:00"]}])
    assert code == 3 and report.checks[0]["failing_rows"] == 1, (report.error, report.checks)
    assert report.checks[0]["sample"][0]["id"] == 4, report.checks  # 07:00 UTC is the accepted instant


def test_a_batchs_float_column_staged_as_a_double_is_judged_as_the_double_it_is(wap, spark, tmp_path):
    """The audit reads the staged double 0.10000000149011612: it is not 0.1, by = as by !=."""
    assert wap.run([{"id": 1, "f": 0.5}], checks=[])[0] == 0
    source = parquet(spark, tmp_path / "f", [(2, 0.1)], "id int, f float")
    code, report = wap.run(source, checks='Rules = [ ColumnValues "f" in [0.1], ColumnValues "f" != 0.1 ]')
    assert code == 3 and [r["failing_rows"] for r in report.checks] == [1, 0], report.checks


def test_a_whole_number_no_float_holds_is_compared_exactly_beside_a_float_column(wap, spark, tmp_path):
    """Spark would round 16777217 to the float 16777216 beside a float column."""
    source = parquet(spark, tmp_path / "f", [(1, 16777216.0)], "id int, f float")
    code, report = wap.run(source, checks=[{"check": "between", "column": "f", "min": 16777217, "name": "min"}])
    assert code == 3 and report.checks[0]["failing_rows"] == 1, report.checks
    code, report = wap.run(source, checks='Rules = [ ColumnValues "f" != 16777217 ]')
    assert code == 0 and report.checks[0]["failing_rows"] == 0, report.checks
    source = parquet(spark, tmp_path / "g", [(1, float(2 ** 53))], "id int, f float")
    code, report = wap.run(source, checks=[{"check": "between", "column": "f", "min": 2 ** 53 + 1},
                                           {"check": "between", "column": "f", "max": 2 ** 53 - 1, "name": "max"}])
    assert code == 3 and [r["failing_rows"] for r in report.checks] == [1, 1], report.checks
    largest = 3.4028234663852886e38  # and a number between the largest float and 2^128 is not it
    source = parquet(spark, tmp_path / "h", [(1, largest)], "id int, f float")
    code, report = wap.run(source, checks=[{"check": "between", "column": "f", "min": 3.40282354e38},
                                           {"check": "accepted_values", "column": "f", "values": [3.40282354e38]}])
    assert code == 3 and [r["failing_rows"] for r in report.checks] == [1, 1], report.checks


def test_a_dqdl_list_of_numbers_no_float_holds_is_judged_beside_a_float_column(wap, spark, tmp_path):
    """No float is 16777217 or 1000000.05: every row passes a not in of them (Spark, which leaves
    such values out of an IN on a float column, is given them as doubles no float equals)."""
    source = parquet(spark, tmp_path / "f", [(1, 16777216.0), (2, 0.5)], "id int, f float")
    code, report = wap.run(source, checks='Rules = [ ColumnValues "f" not in [16777217, 1000000.05] ]')
    assert code == 0 and report.checks[0]["failing_rows"] == 0, (report.error, report.checks)


@pytest.mark.parametrize("schema,values,failing", [("id int, f int", [1.5, 2.5], 2), ("id int, f tinyint", [300, 1], 1),
                                                   ("id int, f float", [0.1, 1e39], 1)])
def test_accepted_values_its_column_cannot_hold_accept_nothing_and_the_audit_fails(wap, spark, tmp_path, schema,
                                                                                    values, failing):
    source = parquet(spark, tmp_path / "v", [(1, 1), (2, 2)] if "float" not in schema else [(1, 0.1), (2, 0.2)], schema)
    code, report = wap.run(source, checks=[{"check": "accepted_values", "column": "f", "values": values}])
    assert code == 3 and report.checks[0]["failing_rows"] == failing, (report.error, report.checks)
    assert report.checks[0]["sample"], report.checks
