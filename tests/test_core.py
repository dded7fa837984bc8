"""The core loop: write to an audit branch, audit, publish only when the audit passes."""
import json
import os


import wap_etl

CLEAN_CHECKS = [{"check": "not_null", "column": "id"}, {"check": "unique", "columns": ["id"]}]
STRICT_AMOUNT = [{"check": "between", "column": "amount", "min": 0, "max": 100}]


def test_clean_batch_is_published_and_branch_dropped(wap, orders):
    code, report = wap.run(orders, checks=CLEAN_CHECKS)
    assert code == 0 and report.status == "published"
    assert wap.ids() == [1, 2, 3]
    refs = wap.refs()
    assert list(refs) == ["main"]
    assert report.main_snapshot_after == refs["main"] == report.staged_snapshot
    assert report.main_snapshot_before is None
    assert report.rows_written == 3
    assert report.branch == f"audit_{report.batch_id}_{report.run_id[:8]}"
    assert [c["passed"] for c in report.checks] == [True, True]


def test_published_snapshot_carries_the_batch_id(wap, orders, spark):
    code, report = wap.run(orders, checks=CLEAN_CHECKS, batch_id="2024-06-01")
    assert code == 0
    summary = spark.sql(f"SELECT summary FROM {wap.sql}.snapshots WHERE snapshot_id = "
                        f"{report.main_snapshot_after}").first()[0]
    assert summary["wap.batch_id"] == "2024-06-01"


def test_failed_audit_leaves_main_unchanged(wap, orders):
    assert wap.run(orders, checks=STRICT_AMOUNT)[0] == 0
    before_rows, before_main = wap.rows(), wap.refs()["main"]
    bad = [{"id": 4, "customer": "dan", "amount": 1000.0, "status": "new"}]
    code, report = wap.run(bad, checks=STRICT_AMOUNT)
    assert code == 3 and report.status == "audit_failed"
    assert wap.refs()["main"] == before_main == report.main_snapshot_after
    assert wap.rows() == before_rows


def test_failed_audit_keeps_branch_with_the_staged_rows(wap, orders, spark):
    assert wap.run(orders, checks=STRICT_AMOUNT)[0] == 0
    bad = [{"id": 4, "customer": "dan", "amount": 1000.0, "status": "new"}]
    code, report = wap.run(bad, checks=STRICT_AMOUNT)
    assert code == 3
    assert wap.refs()[report.branch] == report.staged_snapshot
    assert wap.ids(report.branch) == [1, 2, 3, 4]
    staged = spark.sql(report.inspect_sql).orderBy("id").collect()
    assert [r["id"] for r in staged] == [1, 2, 3, 4]
    failed = report.checks[0]
    assert failed["passed"] is False and failed["failing_rows"] == 1
    assert failed["sample"] == [{"id": 4, "customer": "dan", "amount": 1000.0, "status": "new"}]


def test_wap_branch_is_unset_after_success(wap, orders):
    assert wap.run(orders, checks=CLEAN_CHECKS)[0] == 0
    assert wap.wap_branch_conf() is None


def test_wap_branch_is_unset_after_audit_failure(wap, orders):
    assert wap.run(orders, checks=[{"check": "row_count", "min": 10}])[0] == 3
    assert wap.wap_branch_conf() is None


def test_wap_branch_is_unset_after_exception_during_write(wap, orders, monkeypatch):
    from pyspark.sql import functions as F
    assert wap.run(orders, checks=CLEAN_CHECKS)[0] == 0
    main_before = wap.refs()["main"]

    def explode_on_write(df):  # fails inside the write's tasks, not while planning
        return df.withColumn("amount", F.when(F.col("id") == 5, F.raise_error(F.lit("boom")))
                             .otherwise(F.col("amount")))

    monkeypatch.setattr(wap_etl, "transform", explode_on_write)
    more = [{"id": 4, "customer": "x", "amount": 1.0, "status": "new"},
            {"id": 5, "customer": "y", "amount": 2.0, "status": "new"}]
    code, report = wap.run(more, checks=CLEAN_CHECKS)
    assert code == 1 and report.status == "error" and "boom" in report.error
    assert wap.wap_branch_conf() is None
    assert wap.refs() == {"main": main_before}
    assert wap.ids() == [1, 2, 3]


def test_new_table_is_created_partitioned_with_wap_enabled(wap, orders, spark):
    assert not wap.exists()
    code, _ = wap.run(orders, checks=CLEAN_CHECKS, partition_by="status")
    assert code == 0
    props = {r[0]: r[1] for r in spark.sql(f"SHOW TBLPROPERTIES {wap.sql}").collect()}
    assert props["write.wap.enabled"] == "true"
    partitions = spark.sql(f"SELECT partition FROM {wap.sql}.partitions").collect()
    assert sorted(r[0]["status"] for r in partitions) == ["new", "paid"]


def test_existing_table_gets_wap_enabled(wap, orders, spark):
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS local.{wap.ns}")
    spark.sql(f"CREATE TABLE {wap.sql} (id int, customer string, amount double, status string) "
              "USING iceberg")
    code, _ = wap.run(orders, checks=CLEAN_CHECKS)
    assert code == 0
    props = {r[0]: r[1] for r in spark.sql(f"SHOW TBLPROPERTIES {wap.sql}").collect()}
    assert props["write.wap.enabled"] == "true"
    assert wap.ids() == [1, 2, 3]


def test_empty_input_publishes_nothing(wap, orders):
    assert wap.run(orders, checks=CLEAN_CHECKS)[0] == 0
    main_before = wap.refs()["main"]
    empty = wap.csv([], columns=["id", "customer", "amount", "status"])
    code, report = wap.run(empty, checks=CLEAN_CHECKS)
    assert code == 0 and report.status == "nothing_to_publish"
    assert wap.refs() == {"main": main_before}
    assert report.rows_written == 0


def test_empty_input_on_a_new_table_publishes_nothing(wap):
    empty = wap.csv([], columns=["id", "amount"])
    code, report = wap.run(empty, checks=[{"check": "not_null", "column": "id"}])
    assert code == 0 and report.status == "nothing_to_publish"
    assert "main" not in wap.refs()


def test_publish_false_stages_and_keeps_branch(wap, orders):
    code, report = wap.run(orders, checks=CLEAN_CHECKS, publish="false")
    assert code == 0 and report.status == "staged"
    refs = wap.refs()
    assert "main" not in refs and refs[report.branch] == report.staged_snapshot
    assert wap.ids(report.branch) == [1, 2, 3]


def test_csv_null_value_option_turns_marker_into_null(wap):
    path = wap.csv([{"id": 1, "amount": "NA"}, {"id": 2, "amount": 3.5}])
    code, report = wap.run(path, source_options={"nullValue": "NA"},
                           checks=[{"check": "not_null", "column": "amount", "action": "warn"}])
    assert code == 0
    assert [r["amount"] for r in wap.rows()] == [None, 3.5]
    assert report.checks[0]["failing_rows"] == 1 and report.checks[0]["passed"] is False


def test_json_and_parquet_sources_are_read(wap, spark, tmp_path):
    src = spark.createDataFrame([(1, "a"), (2, "b")], "id int, name string")
    src.write.json(str(tmp_path / "j"))
    src.write.parquet(str(tmp_path / "p"))
    not_null = [{"check": "not_null", "column": "id"}]
    assert wap.run(str(tmp_path / "j"), checks=not_null)[0] == 0
    assert wap.run(str(tmp_path / "p"), checks=not_null)[0] == 0
    assert wap.ids() == [1, 1, 2, 2]


def test_report_is_written_as_json(wap, orders):
    code, report = wap.run(orders, checks=CLEAN_CHECKS, batch_id="b1")
    path = os.path.join(wap.reports, f"local.{wap.table}", "b1.json")
    with open(path) as f:
        written = json.load(f)
    assert written["status"] == "published" and written["batch_id"] == "b1"
    assert written["rows_written"] == 3
    assert set(written["timings"]) >= {"read", "write", "audit", "publish"}
    assert {c["name"] for c in written["checks"]} == {"not_null_id", "unique_id"}


def test_namespace_named_like_the_catalog_is_published(spark, warehouse, tmp_path):
    from conftest import write_csv
    path = write_csv(tmp_path / "in.csv", [{"id": 1}, {"id": 2}])
    code, report = wap_etl.run(["--source_path", path, "--table", "local.orders", "--catalog", "local",
                                "--checks", "[]"])
    assert code == 0 and report.status == "published", report.error
    assert spark.table("local.local.orders").count() == 2


def test_write_that_reaches_main_is_caught_and_undone(wap, orders, monkeypatch, spark):
    assert wap.run(orders, checks=CLEAN_CHECKS)[0] == 0
    before = (wap.refs()["main"], wap.rows())

    def wap_switched_off(step):  # the trap: another actor turns the property off mid-run
        if step == "before_write":
            spark.sql(f"ALTER TABLE {wap.sql} SET TBLPROPERTIES ('write.wap.enabled'='false')")

    monkeypatch.setattr(wap_etl, "fault_point", wap_switched_off)
    code, report = wap.run([{"id": 9, "customer": "z", "amount": 1.0, "status": "new"}], checks=CLEAN_CHECKS)
    assert code == 1 and "write reached main" in report.error and "taken off main again" in report.error
    assert (wap.refs()["main"], wap.rows()) == before
    assert wap.wap_branch_conf() is None


def test_iceberg_jar_is_found_in_the_documented_order(tmp_path, monkeypatch):
    mine, env_jar = tmp_path / "mine.jar", tmp_path / "env.jar"
    mine.write_bytes(b"jar")
    env_jar.write_bytes(b"jar")
    monkeypatch.setenv("ICEBERG_SPARK_RUNTIME_JAR", str(env_jar))
    assert wap_etl.iceberg_jar_conf(str(mine)) == ("spark.jars", str(mine))
    assert wap_etl.iceberg_jar_conf() == ("spark.jars", str(env_jar))
    monkeypatch.delenv("ICEBERG_SPARK_RUNTIME_JAR")
    key, jar = wap_etl.iceberg_jar_conf()
    assert key == "spark.jars" and "snowpark_connect_deps_iceberg" in jar
    assert jar.endswith(".jar") and "3.5_2.12" in jar
    monkeypatch.setattr(wap_etl, "find_iceberg_jar", lambda explicit=None: None)
    assert wap_etl.iceberg_jar_conf() == ("spark.jars.packages", wap_etl.ICEBERG_MAVEN)


def test_a_run_with_a_drop_check_leaves_nothing_cached_in_the_driver(wap, spark):
    """The split of a batch by its drop checks is cached for the run alone: left cached, a later
    run of the same plan in the same driver (a notebook, a scheduler's process) would reuse it."""
    spark.catalog.clearCache()
    drop = [{"check": "between", "column": "amount", "min": 0, "action": "drop"}]
    code, report = wap.run([{"id": 1, "amount": 1.0}, {"id": 2, "amount": -2.0}], checks=drop)
    assert code == 0 and report.rows_dropped == 1, report.error
    assert spark._jsparkSession.sharedState().cacheManager().isEmpty()
