"""where on any check, relationship, stat, sql and anomaly checks: each through the real job."""
import math
import statistics

import pytest

import wap_etl

ROWS = [
    {"id": 1, "carrier": "AA", "amount": 10.0, "status": "paid", "code": "x"},
    {"id": 2, "carrier": "UA", "amount": 20.0, "status": "paid", "code": "yy"},
    {"id": 3, "carrier": None, "amount": -5.0, "status": "new", "code": None},
    {"id": 4, "carrier": "AA", "amount": 40.0, "status": "new", "code": "zzz"},
]


def result(report, name):
    return next(c for c in report.checks if c["name"] == name)


# ----- where --------------------------------------------------------------------------------------

def test_where_limits_a_row_check_to_the_rows_that_meet_it(wap):
    check = {"check": "between", "column": "amount", "min": 0, "where": "status = 'paid'", "name": "paid"}
    code, report = wap.run(ROWS, checks=[check])
    assert code == 0 and result(report, "paid")["failing_rows"] == 0


def test_where_failing_fraction_is_relative_to_the_matching_rows(wap):
    check = {"check": "between", "column": "amount", "min": 15, "where": "status = 'paid'",
             "name": "paid", "max_failing_fraction": 0.4}
    code, report = wap.run(ROWS, checks=[check])
    r = result(report, "paid")
    assert code == 3 and r["failing_rows"] == 1 and r["failing_fraction"] == 0.5
    assert [s["id"] for s in r["sample"]] == [1]


def test_where_on_unique_ignores_duplicates_outside_it(wap):
    rows = ROWS + [{"id": 4, "carrier": "AA", "amount": 1.0, "status": "void", "code": "q"}]
    ok = {"check": "unique", "columns": ["id"], "where": "status <> 'void'", "name": "live"}
    bad = {"check": "unique", "columns": ["id"], "name": "all", "action": "warn"}
    code, report = wap.run(rows, checks=[ok, bad])
    assert code == 0 and result(report, "live")["passed"] and result(report, "all")["failing_rows"] == 2


def test_where_on_row_count_counts_the_matching_rows(wap):
    check = {"check": "row_count", "min": 3, "where": "status = 'paid'", "name": "paid_rows"}
    code, report = wap.run(ROWS, checks=[check])
    assert code == 3 and result(report, "paid_rows")["observed"] == 2


def test_where_on_stat_measures_the_matching_rows(wap):
    check = {"check": "stat", "column": "amount", "stat": "mean", "min": 15, "max": 15,
             "where": "status = 'paid'", "name": "m"}
    code, report = wap.run(ROWS, checks=[check])
    assert code == 0 and result(report, "m")["observed"] == 15.0


def test_where_with_drop_quarantines_only_matching_rows(wap, spark):
    check = {"check": "between", "column": "amount", "min": 0, "where": "status = 'paid'",
             "action": "drop"}
    rows = ROWS + [{"id": 5, "carrier": "AA", "amount": -1.0, "status": "paid", "code": "a"}]
    code, report = wap.run(rows, checks=[check])
    assert code == 0 and report.rows_dropped == 1 and wap.ids() == [1, 2, 3, 4]


def test_where_that_does_not_parse_exits_2_before_writing(wap):
    code, report = wap.run(ROWS, checks=[{"check": "not_null", "column": "id", "where": "status ="}])
    assert code == 2 and "where" in report.error and not wap.exists()


def test_where_with_an_aggregate_is_bad_input(wap):
    code, report = wap.run(ROWS, checks=[{"check": "not_null", "column": "id", "where": "sum(amount) > 0"}])
    assert code == 2 and "where" in report.error and not wap.exists()


# ----- relationship -------------------------------------------------------------------------------

@pytest.fixture
def carriers(wap, spark):
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS local.{wap.ns}")
    spark.sql(f"CREATE TABLE local.{wap.ns}.carriers (code string, name string) USING iceberg")
    spark.sql(f"INSERT INTO local.{wap.ns}.carriers VALUES ('AA', 'American'), ('UA', 'United')")
    return f"{wap.ns}.carriers"


def test_relationship_passes_when_every_key_exists(wap, carriers):
    check = {"check": "relationship", "column": "carrier", "to_table": carriers, "to_column": "code"}
    code, report = wap.run(ROWS, checks=[check])
    assert code == 0 and report.checks[0]["failing_rows"] == 0  # the NULL carrier passes


def test_relationship_counts_and_samples_rows_without_a_match(wap, carriers):
    rows = ROWS + [{"id": 5, "carrier": "ZZ", "amount": 1.0, "status": "new", "code": "a"},
                   {"id": 6, "carrier": "ZZ", "amount": 2.0, "status": "new", "code": "b"}]
    check = {"check": "relationship", "columns": ["carrier"], "to_table": carriers, "to_columns": ["code"]}
    code, report = wap.run(rows, checks=[check])
    r = report.checks[0]
    assert code == 3 and r["failing_rows"] == 2 and {s["id"] for s in r["sample"]} == {5, 6}
    assert "main" not in wap.refs()


def test_relationship_on_two_columns(wap, carriers):
    check = {"check": "relationship", "columns": ["carrier", "code"], "to_table": carriers,
             "to_columns": ["code", "name"]}
    code, report = wap.run(ROWS, checks=[check])
    assert code == 3 and report.checks[0]["failing_rows"] == 3  # no (carrier, name) pair matches


def test_relationship_is_audited_again_after_a_rebase(wap, spark, carriers, monkeypatch):
    assert wap.run(ROWS[:1], checks=[])[0] == 0
    check = {"check": "relationship", "column": "carrier", "to_table": carriers, "to_column": "code"}

    def carrier_deleted_and_main_moved(step):  # after the audit passed, before the publish
        if step == "audit":
            spark.sql(f"DELETE FROM local.{carriers} WHERE code = 'UA'")
            spark.sql(f"INSERT INTO {wap.sql} VALUES (50, 'AA', 5.0, 'new', 'q')")
    monkeypatch.setattr(wap_etl, "fault_point", carrier_deleted_and_main_moved)
    code, report = wap.run(ROWS[1:], checks=[check])
    assert report.rebases == 1, "main moved: the audited rows were rebased"
    assert code == 3 and report.status == "audit_failed"
    assert result(report, "relationship_carrier")["failing_rows"] == 1
    assert wap.ids() == [1, 50], "main holds none of the batch"


def loaded_meanwhile(spark, wap, values):
    """A fault hook: after the audit passed, before the publish, another writer loads a row."""
    def hook(step):
        if step == "audit":
            spark.sql(f"INSERT INTO {wap.sql} VALUES {values}")
    return hook


@pytest.mark.parametrize("check", [
    {"check": "expression", "name": "new_ids", "expr": "id NOT IN (SELECT id FROM {table})"},
    {"check": "row_count", "name": "new_ids", "max": 0, "where": "id IN (SELECT id FROM {table})"},
], ids=["expression", "where"])
def test_a_row_condition_that_reads_main_is_audited_again_after_a_rebase(wap, spark, monkeypatch, check):
    assert wap.run(ROWS[:1], checks=[])[0] == 0
    check = {k: v.format(table=wap.sql) if isinstance(v, str) else v for k, v in check.items()}
    monkeypatch.setattr(wap_etl, "fault_point", loaded_meanwhile(spark, wap, "(2, 'UA', 20.0, 'paid', 'yy')"))
    code, report = wap.run(ROWS[1:], checks=[check])
    assert report.rebases == 1, "main moved: the audited rows were rebased"
    assert code == 3 and report.status == "audit_failed", report.error
    assert wap.ids() == [1, 2], "main holds none of the batch"


def test_a_statistic_whose_where_reads_a_table_is_measured_again_after_a_rebase(wap, spark, carriers, monkeypatch):
    mean = {"check": "stat", "name": "carried_mean", "stat": "mean", "column": "amount",
            "where": f"carrier IN (SELECT code FROM local.{carriers})",
            "condition": {"op": "<=", "values": ["max(last(1)) * 0 + 35"]}}  # dynamic: 35 once there is history
    assert wap.run(ROWS[:1], checks=[mean])[0] == 0

    def carrier_deleted_and_main_moved(step):  # after the audit passed (mean 30), before the publish
        if step == "audit":
            spark.sql(f"DELETE FROM local.{carriers} WHERE code = 'UA'")
            spark.sql(f"INSERT INTO {wap.sql} VALUES (50, 'AA', 5.0, 'new', 'q')")
    monkeypatch.setattr(wap_etl, "fault_point", carrier_deleted_and_main_moved)
    code, report = wap.run(ROWS[1:], checks=[mean])
    assert report.rebases == 1
    assert code == 3 and result(report, "carried_mean")["observed"] == 40.0, report.error  # AA's alone now
    assert wap.ids() == [1, 50]


@pytest.mark.parametrize("moved_at", ["audit", "stage"], ids=["before_the_publish", "before_the_stage"])
def test_a_drop_check_that_reads_main_fails_the_audit_when_main_moved_into_its_rows(wap, spark, monkeypatch,
                                                                                    moved_at):
    assert wap.run(ROWS[:1], checks=[])[0] == 0
    check = {"check": "expression", "name": "new_ids", "expr": f"id NOT IN (SELECT id FROM {wap.sql})",
             "action": "drop"}
    loaded = loaded_meanwhile(spark, wap, "(2, 'UA', 20.0, 'paid', 'yy')")
    monkeypatch.setattr(wap_etl, "fault_point", lambda step: loaded("audit") if step == moved_at else None)
    code, report = wap.run(ROWS[1:], checks=[check], batch_id="b2")
    assert code == 3 and "rerun to split the batch again" in result(report, "new_ids")["detail"], report.error
    assert wap.ids() == [1, 2], "the row of id 2 the split kept is not published"
    monkeypatch.setattr(wap_etl, "fault_point", lambda step: None)
    code, report = wap.run(ROWS[1:], checks=[check], batch_id="b2")  # split afresh: not the kept branch
    assert code == 0 and report.rows_dropped == 1, report.error  # id 2, on main now
    assert wap.ids() == [1, 2, 3, 4]


def test_a_drop_check_that_reads_main_fails_the_audit_when_rows_it_dropped_would_pass_now(wap, spark, monkeypatch):
    assert wap.run(ROWS[:2], checks=[])[0] == 0
    check = {"check": "expression", "name": "new_ids", "expr": f"id NOT IN (SELECT id FROM {wap.sql})",
             "action": "drop"}

    def id_2_deleted(step):  # after the audit passed, before the publish: main moves
        if step == "audit":
            spark.sql(f"DELETE FROM {wap.sql} WHERE id = 2")
    monkeypatch.setattr(wap_etl, "fault_point", id_2_deleted)
    code, report = wap.run(ROWS[1:], checks=[check], batch_id="b2")  # id 2 dropped: it was on main
    assert code == 3 and "1 rows it quarantined no longer do" in result(report, "new_ids")["detail"]
    assert wap.ids() == [1]
    monkeypatch.setattr(wap_etl, "fault_point", lambda step: None)
    code, report = wap.run(ROWS[1:], checks=[check], batch_id="b2")
    assert code == 0 and report.rows_dropped == 0, report.error
    assert wap.ids() == [1, 2, 3, 4]


def test_a_batch_a_drop_check_reading_main_quarantined_whole_is_audited_again_when_main_moved(wap, spark,
                                                                                               monkeypatch):
    assert wap.run(ROWS[:2], checks=[])[0] == 0
    check = {"check": "expression", "name": "new_ids", "expr": f"id NOT IN (SELECT id FROM {wap.sql})",
             "action": "drop"}
    deleted = []

    def id_2_deleted_once(step):  # after the audit passed, before the batch is consumed: main moves
        if step == "audit" and not deleted:
            deleted.append(spark.sql(f"DELETE FROM {wap.sql} WHERE id = 2"))
    monkeypatch.setattr(wap_etl, "fault_point", id_2_deleted_once)
    code, report = wap.run(ROWS[1:2], checks=[check], batch_id="b2")  # its one row is on main: dropped
    assert code == 3 and "no longer do" in result(report, "new_ids")["detail"], report.error
    monkeypatch.setattr(wap_etl, "fault_point", lambda step: None)
    code, report = wap.run(ROWS[1:2], checks=[check], batch_id="b2")  # not consumed: loaded now
    assert code == 0 and report.status == "published", report.error
    assert wap.ids() == [1, 2]


def test_a_drop_check_that_reads_main_keeps_its_counts_through_a_rebase(wap, spark, monkeypatch):
    assert wap.run(ROWS[:2], checks=[])[0] == 0
    check = {"check": "expression", "name": "new_ids", "expr": f"id NOT IN (SELECT id FROM {wap.sql})",
             "action": "drop"}
    monkeypatch.setattr(wap_etl, "fault_point", loaded_meanwhile(spark, wap, "(50, 'AA', 5.0, 'new', 'q')"))
    code, report = wap.run(ROWS[1:], checks=[check])
    assert code == 0 and report.rebases == 1, report.error
    assert result(report, "new_ids")["failing_rows"] == 1 and report.rows_dropped == 1  # id 2
    assert wap.ids() == [1, 2, 3, 4, 50]


def test_a_condition_with_a_subquery_is_audited_from_the_branch_when_the_write_observes_the_rest(wap):
    assert wap.run(ROWS[:1], checks=[])[0] == 0
    check = {"check": "expression", "name": "new_ids", "expr": f"id NOT IN (SELECT id FROM {wap.sql})"}
    code, report = wap.run(ROWS[1:], checks=[check, {"check": "not_null", "column": "id"}], audit_source="write")
    assert code == 0 and report.audit_source == "branch", report.error
    assert wap.ids() == [1, 2, 3, 4]


def test_every_kind_of_check_says_what_it_reads_besides_the_rows():
    rereads = {name for name, kind in wap_etl.KINDS.items() if kind.reads}
    assert rereads == {"unique", "primary_key", "sql", "sql_rows", "relationship", "volume", "anomaly", "row_count_match",
                       "schema_match", "aggregate_match", "dataset_match"}


def test_relationship_to_a_missing_table_exits_2_before_writing(wap):
    check = {"check": "relationship", "column": "carrier", "to_table": f"{wap.ns}.nope"}
    code, report = wap.run(ROWS, checks=[check])
    assert code == 2 and "does not exist" in report.error and not wap.exists()


# ----- stat ---------------------------------------------------------------------------------------

AMOUNTS = [10.0, 20.0, -5.0, 40.0]
EXPECTED = {
    "mean": statistics.mean(AMOUNTS), "stddev": statistics.stdev(AMOUNTS), "sum": sum(AMOUNTS),
    "min": -5.0, "max": 40.0, "median": 10.0, "distinct_count": 4.0, "null_fraction": 0.0,
}


@pytest.mark.parametrize("stat", EXPECTED)
def test_stat_observes_the_value(wap, stat):
    value = EXPECTED[stat]
    check = {"check": "stat", "column": "amount", "stat": stat, "min": value - 1e-6, "max": value + 1e-6}
    code, report = wap.run(ROWS, checks=[check])
    assert code == 0, report.checks
    assert math.isclose(report.checks[0]["observed"], value, rel_tol=1e-9)
    assert report.checks[0].get("approximate", False) == (stat == "median")


def test_stat_string_lengths_and_null_fraction(wap):
    checks = [{"check": "stat", "column": "code", "stat": "min_length", "min": 1, "max": 1},
              {"check": "stat", "column": "code", "stat": "max_length", "max": 3, "min": 3},
              {"check": "stat", "column": "code", "stat": "null_fraction", "max": 0.25, "min": 0.25},
              {"check": "stat", "column": "amount", "stat": "quantile", "q": 1.0, "min": 40, "max": 40}]
    code, report = wap.run(ROWS, checks=checks)
    assert code == 0, report.checks


def test_stat_outside_its_bounds_fails_the_audit(wap):
    check = {"check": "stat", "column": "amount", "stat": "mean", "max": 10}
    code, report = wap.run(ROWS, checks=[check])
    r = report.checks[0]
    assert code == 3 and r["observed"] == 16.25 and "outside" in r["detail"]


def test_stat_exclusive_bound_fails_at_equality(wap):
    check = {"check": "stat", "column": "amount", "stat": "max", "max": 40, "max_exclusive": True}
    assert wap.run(ROWS, checks=[check])[0] == 3


def test_stat_mean_of_a_string_column_exits_2_before_writing(wap):
    code, report = wap.run(ROWS, checks=[{"check": "stat", "column": "status", "stat": "mean", "min": 0}])
    assert code == 2 and "numeric" in report.error and not wap.exists()


def test_stat_that_is_nan_fails(wap, spark):
    df = spark.createDataFrame([(1, 1.0), (2, float("nan"))], "id int, x double")
    path = str(wap.tmp / "in" / "nan.parquet")
    df.write.parquet(path)
    code, report = wap.run(path, checks=[{"check": "stat", "column": "x", "stat": "max", "max": 100}])
    assert code == 3 and report.checks[0]["detail"] == "the value is NaN"


def test_stat_min_max_and_distinct_count_are_exact(wap, spark):
    big = 2 ** 53 + 1  # not a double
    df = spark.createDataFrame([(1, big), (2, 7), (3, 7)], "id int, n bigint")
    path = str(wap.tmp / "in" / "big.parquet")
    df.write.parquet(path)
    checks = [{"check": "stat", "column": "n", "stat": "max", "max": 2 ** 53, "name": "max"},
              {"check": "stat", "column": "n", "stat": "distinct_count", "min": 2, "max": 2, "name": "d"}]
    code, report = wap.run(path, checks=checks)
    result = {c["name"]: c for c in report.checks}
    assert code == 3 and result["max"]["observed"] == big and not result["max"]["passed"]
    assert result["d"]["observed"] == 2 and result["d"]["passed"] and "approximate" not in result["d"]


def test_stat_checks_evaluated_during_the_write_match_the_scan(wap):
    checks = [{"check": "stat", "column": "amount", "stat": "mean", "min": 16.25, "max": 16.25, "name": "m"},
              {"check": "row_count", "min": 2, "max": 2, "where": "status = 'paid'", "name": "paid"},
              {"check": "primary_key", "columns": ["carrier"], "action": "warn", "name": "pk"}]
    code, report = wap.run(ROWS, checks=checks, audit_source="write")
    result = {c["name"]: c for c in report.checks}
    assert code == 0 and report.audit_source == "write"
    assert result["m"]["decided_by"] == "write" and result["paid"]["observed"] == 2
    assert result["pk"]["failing_rows"] == 3  # two AA rows and one NULL key


def test_drop_with_where_limits_the_fraction_of_matching_rows(wap):
    rows = ROWS + [{"id": 10 + i, "carrier": "UA", "amount": 1.0, "status": "new", "code": "q"} for i in range(20)]
    check = {"check": "between", "column": "amount", "min": 15, "where": "status = 'paid'",
             "action": "drop", "max_failing_fraction": 0.4}
    code, report = wap.run(rows, checks=[check])  # 1 of the 2 paid rows: 0.5 > 0.4
    assert code == 3 and report.checks[0]["failing_fraction"] == 0.5


def test_where_on_primary_key_and_relationship(wap, carriers):
    rows = ROWS + [{"id": 1, "carrier": "ZZ", "amount": 5.0, "status": "void", "code": "v"}]
    live = "status <> 'void'"
    checks = [{"check": "primary_key", "columns": ["id"], "where": live},
              {"check": "relationship", "column": "carrier", "to_table": carriers, "to_column": "code",
               "where": live}]
    code, report = wap.run(rows, checks=checks)
    assert code == 0, report.checks


# ----- sql ----------------------------------------------------------------------------------------

def test_sql_check_counts_in_the_batch(wap):
    check = {"check": "sql", "query": "SELECT count(*) FROM {batch} WHERE amount < 0", "max": 0}
    code, report = wap.run(ROWS, checks=[check])
    assert code == 3 and report.checks[0]["observed"] == 1.0


def test_sql_check_sees_table_and_main(wap):
    assert wap.run(ROWS, checks=[])[0] == 0
    rows = [dict(r, id=r["id"] + 10) for r in ROWS]
    checks = [{"check": "sql", "name": "grows", "query": "SELECT (SELECT count(*) FROM {table}) - "
               "(SELECT count(*) FROM {main})", "min": 4, "max": 4},
              {"check": "sql", "name": "batch", "query": "SELECT max(id) FROM {batch}", "min": 14, "max": 14},
              {"check": "sql", "name": "cte", "query": "WITH new AS (SELECT * FROM {batch} WHERE id > 12) "
               "SELECT n FROM (SELECT count(*) AS n FROM new)", "min": 2, "max": 2}]
    code, report = wap.run(rows, checks=checks)
    assert code == 0, report.checks


@pytest.mark.parametrize("statement", [
    "DROP TABLE {table_sql}", "WITH a AS (SELECT 1) INSERT INTO {table_sql} SELECT * FROM {table_sql}",
    "CALL local.system.rollback_to_snapshot('{table}', 1)", "DELETE FROM {table_sql}",
    "INSERT OVERWRITE DIRECTORY '{tmp}/out' USING parquet SELECT 1",
    "SELECT count(*) FROM (SELECT TRANSFORM(id) USING 'touch {tmp}/ran' AS (x) FROM {{batch}})",
    "SELECT (SELECT count(*) FROM (SELECT TRANSFORM(id) USING 'touch {tmp}/ran' AS (x) FROM {{batch}}))",
    "SELECT count(*) FROM {{batch}} WHERE reflect('java.lang.Thread', 'sleep', 100000L) IS NULL",
    "WITH x AS (SELECT TRANSFORM(id) USING 'touch {tmp}/ran' AS (y) FROM {{batch}}) SELECT count(*) FROM x",
    "SELECT count(*) FROM {{batch}} WHERE IDENTIFIER('java_method')('java.lang.Thread', 'sleep', 100000L) IS NULL",
    "SELECT max(c) FROM (SELECT count(*) OVER w AS c FROM {{batch}} "
    "WINDOW w AS (PARTITION BY java_method('java.lang.Thread', 'sleep', 100000L)))",
    # a statement on an IDENTIFIER() name is built only in analysis: it must be refused before it runs
    "INSERT INTO IDENTIFIER('{table_sql}') SELECT * FROM {table_sql}",
    "DELETE FROM IDENTIFIER('{table_sql}')", "DROP TABLE IDENTIFIER('{table_sql}')"])
def test_sql_check_that_is_not_a_query_exits_2_and_runs_nothing(wap, spark, statement):
    assert wap.run(ROWS, checks=[])[0] == 0
    main = wap.refs()["main"]
    query = statement.format(table_sql=wap.sql, table=wap.table, tmp=wap.tmp)
    code, report = wap.run(ROWS, checks=[{"check": "sql", "query": query, "max": 0}])
    assert code == 2 and "not a read-only SQL query" in report.error
    assert wap.refs()["main"] == main and len(wap.rows()) == len(ROWS)
    assert not (wap.tmp / "out").exists() and not (wap.tmp / "ran").exists()


def test_sql_check_reading_a_catalog_view_that_calls_java_exits_2(wap, spark):
    """Only the job's own views of the batch are taken on trust: a view in the catalog is read
    through, and its body may not do more than read either."""
    view = f"spark_catalog.default.{wap.table.replace('.', '_')}_calls_java"
    spark.sql(f"CREATE VIEW {view} AS SELECT reflect('java.lang.Thread', 'sleep', 1L) AS x")
    try:
        code, report = wap.run(ROWS, checks=[{"check": "sql", "query": f"SELECT count(*) FROM {view}", "min": 1}])
    finally:
        spark.sql(f"DROP VIEW IF EXISTS {view}")
    assert code == 2 and "CallMethodViaReflection" in report.error and not wap.exists()


def test_expression_and_where_may_only_read(wap):
    for check in [{"check": "expression", "expr": "reflect('java.lang.System', 'exit', 0) IS NULL"},
                  {"check": "not_null", "column": "id", "where": "java_method('java.lang.System', 'exit', 0) = ''"},
                  {"check": "expression", "expr": "IDENTIFIER('reflect')('java.lang.System', 'exit', 0) IS NULL"}]:
        code, report = wap.run(ROWS, checks=[check])
        assert code == 2 and "may only read" in report.error and not wap.exists()


@pytest.mark.parametrize("query", ["SELECT id, amount FROM {batch}", "SELECT 'a' FROM {batch}",
                                   "SELEKT 1", "SELECT amount FROM {batch}",
                                   "SELECT count(*) FROM {batch} GROUP BY status",
                                   "SELECT count(*) FROM {batch} HAVING count(*) > 10"])
def test_sql_check_not_returning_one_number_exits_2_before_writing(wap, query):
    code, report = wap.run(ROWS, checks=[{"check": "sql", "query": query, "max": 0}])
    assert code == 2 and "query" in report.error and not wap.exists()


# ----- anomaly ------------------------------------------------------------------------------------

def batch(n, start=0):
    return [{"id": start + i, "carrier": "AA", "amount": 1.0, "status": "paid", "code": "x"}
            for i in range(n)]


ANOMALY = {"check": "anomaly", "metric": "row_count", "lookback": 10, "min_history": 3,
           "max_deviations": 3}


def test_anomaly_passes_until_there_is_enough_history(wap):
    for i, n in enumerate([10, 50, 3]):
        code, report = wap.run(batch(n, 100 * i), checks=[ANOMALY])
        assert code == 0 and report.checks[0]["history"] == i


def test_anomaly_flags_a_batch_far_from_the_robust_history(wap):
    for i, n in enumerate([100, 110, 90, 105]):
        assert wap.run(batch(n, 1000 * i), checks=[ANOMALY])[0] == 0
    code, report = wap.run(batch(400, 9000), checks=[ANOMALY])
    r = report.checks[0]
    assert code == 3 and r["observed"] == 400 and "deviations" in r["detail"]
    code, report = wap.run(batch(104, 20000), checks=[ANOMALY])
    assert code == 0, report.checks


def test_anomaly_with_zero_spread_flags_any_change(wap):
    for i in range(3):
        assert wap.run(batch(5, 100 * i), checks=[ANOMALY])[0] == 0
    assert wap.run(batch(6, 900), checks=[ANOMALY])[0] == 3
    assert wap.run(batch(5, 800), checks=[ANOMALY])[0] == 0


def test_anomaly_on_a_stat_uses_the_ledger_metric(wap, spark):
    check = dict(ANOMALY, metric="null_fraction:code")
    for i in range(3):
        rows = batch(4, 100 * i)
        rows[0]["code"] = None
        assert wap.run(rows, checks=[check])[0] == 0
    code, report = wap.run([dict(r, code=None) for r in batch(4, 900)], checks=[check])
    assert code == 3 and report.checks[0]["observed"] == 1.0
    metrics = [r["metrics"] for r in spark.table(f"local.{wap.ns}.orders_wap_runs").collect()]
    assert sorted(m["null_fraction:code"] for m in metrics) == [0.25, 0.25, 0.25, 1.0]


def test_anomaly_ignores_runs_that_did_not_publish(wap):
    for i in range(3):
        assert wap.run(batch(5, 100 * i), checks=[ANOMALY])[0] == 0
    failing = [{"check": "not_null", "column": "carrier"}, ANOMALY]
    rows = batch(50, 500)
    rows[0]["carrier"] = None
    assert wap.run(rows, checks=failing)[0] == 3
    code, report = wap.run(batch(5, 700), checks=[ANOMALY])
    assert code == 0 and report.checks[0]["history"] == 3


def test_anomaly_bad_metric_exits_2(wap):
    code, report = wap.run(ROWS, checks=[dict(ANOMALY, metric="average:amount")])
    assert code == 2 and "metric" in report.error and not wap.exists()


def test_a_stat_bound_may_exceed_a_64_bit_long_since_it_is_compared_in_python():
    [c] = wap_etl.parse_checks([{"check": "stat", "column": "amount", "stat": "sum", "max": 10 ** 19}])
    assert c.max == 10 ** 19
