"""Hardening: each case here did the wrong thing silently before; each is now refused or right."""
import logging

import boto3
import pytest

import wap_etl

POSITIVE = [{"check": "between", "column": "amount", "min": 0}]


def by_id(wap):
    return {r["id"]: r for r in wap.rows()}


# --- merge --------------------------------------------------------------------------------------

def test_merge_with_a_null_key_exits_2_naming_the_column_and_count(wap):
    assert wap.run([{"id": 1, "amount": 1.0}], checks=[])[0] == 0
    refs = wap.refs()
    rows = [{"id": 2, "amount": 2.0}, {"id": None, "amount": 3.0}, {"id": None, "amount": 4.0}]
    code, report = wap.run(rows, checks=[], mode="merge", merge_keys="id")
    assert code == 2 and "'id'" in report.error and "2 rows" in report.error
    assert wap.refs() == refs


def test_merge_with_a_null_delete_condition_inserts_and_counts_it(wap):
    assert wap.run([{"id": 1, "amount": 1.0, "op": "U"}], checks=[])[0] == 0
    rows = [{"id": 1, "amount": 1.5, "op": None}, {"id": 2, "amount": 2.0, "op": None},
            {"id": 3, "amount": 3.0, "op": "D"}]
    code, report = wap.run(rows, checks=[], mode="merge", merge_keys="id",
                           delete_condition="s.op = 'D'")
    assert code == 0, report.error
    assert sorted(by_id(wap)) == [1, 2], "NULL condition: not a delete, so id 2 is inserted"
    assert by_id(wap)[1]["amount"] == 1.5
    assert (report.rows_inserted, report.rows_updated, report.rows_deleted) == (1, 1, 0)


def test_merge_with_a_batch_lacking_a_column_keeps_its_values_on_main(wap):
    assert wap.run([{"id": 1, "amount": 1.0, "note": "keep me"}], checks=[])[0] == 0
    code, report = wap.run([{"id": 1, "amount": 5.0}, {"id": 2, "amount": 2.0}], checks=[],
                           mode="merge", merge_keys="id")
    assert code == 0, report.error
    rows = by_id(wap)
    assert rows[1] == {"id": 1, "amount": 5.0, "note": "keep me"}
    assert rows[2] == {"id": 2, "amount": 2.0, "note": None}


# --- drop ---------------------------------------------------------------------------------------

def test_drop_beyond_its_limit_fails_the_audit(wap):
    rows = [{"id": i, "amount": -1.0 if i <= 3 else 1.0} for i in range(1, 11)]
    check = dict(POSITIVE[0], action="drop", max_failing_fraction=0.2)
    code, report = wap.run(rows, checks=[check])
    assert code == 3 and report.status == "audit_failed"
    result = report.checks[0]
    assert result["failing_rows"] == 3 and result["failing_fraction"] == 0.3 and not result["passed"]
    assert "main" not in wap.refs()


def test_drop_within_its_limit_publishes_the_rest(wap):
    rows = [{"id": i, "amount": -1.0 if i <= 2 else 1.0} for i in range(1, 11)]
    check = dict(POSITIVE[0], action="drop", max_failing_rows=2)
    code, report = wap.run(rows, checks=[check])
    assert code == 0 and report.checks[0]["passed"] and report.checks[0]["failing_fraction"] == 0.2
    assert wap.ids() == list(range(3, 11))


def test_dropping_every_row_with_a_limit_fails_instead_of_publishing_nothing(wap):
    check = dict(POSITIVE[0], action="drop", max_failing_fraction=0.5)
    code, report = wap.run([{"id": 1, "amount": -1.0}, {"id": 2, "amount": -2.0}], checks=[check])
    assert code == 3 and report.status == "audit_failed"


def test_quarantine_evolves_with_the_table(wap, spark):
    check = dict(POSITIVE[0], action="drop")
    assert wap.run([{"id": 1, "amount": -1.0}, {"id": 2, "amount": 1.0}], checks=[check])[0] == 0
    code, report = wap.run([{"id": 3, "amount": -3.0, "channel": "web"}, {"id": 4, "amount": 4.0, "channel": "app"}],
                           checks=[check], schema_evolution="add_columns")
    assert code == 0, report.error
    quarantined = {r["id"]: r for r in spark.table(f"{wap.sql}_quarantine").collect()}
    assert quarantined[3]["channel"] == "web" and quarantined[1]["channel"] is None


# --- volume -------------------------------------------------------------------------------------

def test_volume_ignores_compaction_commits(wap, spark):
    volume = [{"check": "volume", "min_ratio": 0.5, "max_ratio": 2.0}]
    for day in range(3):
        rows = [{"id": 100 * day + i, "amount": 1.0} for i in range(10)]
        assert wap.run(rows, checks=volume)[0] == 0
    spark.sql(f"CALL local.system.rewrite_data_files(table => '{wap.table}', "
              "options => map('min-input-files', '2', 'rewrite-all', 'true'))")
    summary = spark.sql(f"SELECT summary FROM {wap.sql}.snapshots ORDER BY committed_at DESC").first()[0]
    assert int(summary["added-records"]) == 30, "the compaction re-added every row"
    code, report = wap.run([{"id": 900 + i, "amount": 1.0} for i in range(10)], checks=volume)
    assert code == 0 and report.checks[0]["observed"] == 1.0


# --- typed bounds -------------------------------------------------------------------------------

@pytest.mark.parametrize("spec", [
    {"check": "between", "column": "month", "min": "one"},
    {"check": "between", "column": "month", "max": True},
    {"check": "accepted_values", "column": "month", "values": [1, "two"]},
    {"check": "between", "column": "day", "min": "yesterday"},
    {"check": "accepted_values", "column": "day", "values": ["2024-13-45"]},
])
def test_bound_of_the_wrong_type_exits_2_naming_the_check(wap, spec):
    rows = [{"month": 1, "day": "2024-06-01", "name": "a"}]
    code, report = wap.run(rows, checks=[spec], source_options={"dateFormat": "yyyy-MM-dd"})
    assert code == 2 and report.error.startswith("check ") and spec["check"] in report.error, report.error
    assert not wap.exists()


def test_date_bounds_as_iso_strings_are_compared_as_dates(wap):
    rows = [{"id": 1, "day": "2024-06-01"}, {"id": 2, "day": "2024-07-01"}]
    checks = [{"check": "between", "column": "day", "min": "2024-06-01", "max": "2024-06-30",
               "action": "warn"}]
    code, report = wap.run(rows, checks=checks)
    assert code == 0 and report.checks[0]["failing_rows"] == 1


# --- nothing written on exit 2 ------------------------------------------------------------------

def test_schema_refused_after_evolution_writes_nothing(wap, spark):
    assert wap.run([{"id": 1, "amount": 1.0}], checks=[])[0] == 0
    refs, columns = wap.refs(), spark.table(wap.sql).columns
    path = wap.csv([{"id": "x", "amount": 1.0, "extra": 1}])
    code, report = wap.run(path, checks=[], schema_evolution="add_columns", source_schema="infer")
    assert code == 2 and "'id'" in report.error
    assert spark.table(wap.sql).columns == columns, "no column was added"
    assert wap.refs() == refs


def test_overwrite_on_an_unpartitioned_new_table_creates_nothing(wap):
    code, report = wap.run([{"id": 1, "amount": 1.0}], checks=[], mode="overwrite_partitions")
    assert code == 2 and "--mode" in report.error
    assert not wap.exists()


def test_wap_property_is_not_set_on_bad_input(wap, spark):
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS local.{wap.ns}")
    spark.sql(f"CREATE TABLE {wap.sql} (id int, amount double) USING iceberg")
    code, _ = wap.run([{"id": 1, "amount": 1.0}], checks=[{"check": "not_null", "column": "nope"}])
    assert code == 2
    props = {r[0]: r[1] for r in spark.sql(f"SHOW TBLPROPERTIES {wap.sql}").collect()}
    assert "write.wap.enabled" not in props


# --- bounded waits ------------------------------------------------------------------------------

def test_observation_that_never_arrives_times_out(spark):
    from pyspark.sql import Observation, functions as F
    never = Observation("never_run")
    spark.range(3).observe(never, F.count(F.lit(1)).alias("rows"))  # planned, never executed
    assert wap_etl.observation_result(never, timeout=1) is None


def test_audit_falls_back_to_a_scan_when_metrics_are_lost(wap, monkeypatch):
    monkeypatch.setattr(wap_etl, "observation_result", lambda observation, timeout=None: None)
    code, report = wap.run([{"id": 1, "amount": 1.0}, {"id": 2, "amount": -2.0}], checks=POSITIVE,
                           audit_source="write")
    assert code == 3 and report.checks[0]["failing_rows"] == 1 and report.audit_source == "branch"


# --- catalogs -----------------------------------------------------------------------------------

def test_hadoop_catalog_on_s3_exits_2_with_the_fix(wap):
    code, report = wap.run([{"id": 1}], checks=[], catalog="s3cat", catalog_type="hadoop",
                           warehouse="s3://bucket/warehouse")
    assert code == 2 and "--catalog_type" in report.error and "glue" in report.error


def test_catalog_with_caching_on_warns_how_to_turn_it_off(wap, spark, caplog):
    spark.conf.set("spark.sql.catalog.cached", "org.apache.iceberg.spark.SparkCatalog")
    spark.conf.set("spark.sql.catalog.cached.type", "hadoop")
    spark.conf.set("spark.sql.catalog.cached.warehouse", wap.warehouse)
    with caplog.at_level(logging.WARNING):
        code, _ = wap.run([{"id": 1}], checks=[], catalog="cached")
    assert code == 0
    assert "spark.sql.catalog.cached.cache-enabled=false" in caplog.text


# --- S3 folders ---------------------------------------------------------------------------------

@pytest.fixture
def s3(monkeypatch):
    from moto import mock_aws
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    with mock_aws():
        client = boto3.client("s3")
        client.create_bucket(Bucket="incoming")
        yield client


def test_s3_folder_format_is_inferred_from_its_files(s3):
    for key in ("orders/2024-06-01/part-0.parquet", "orders/2024-06-01/part-1.parquet",
                "orders/2024-06-01/_SUCCESS"):
        s3.put_object(Bucket="incoming", Key=key, Body=b"x")
    assert wap_etl.infer_format("s3://incoming/orders/2024-06-01/") == "parquet"


@pytest.mark.parametrize("path, cause", [("s3://no-such-bucket/orders/", "NoSuchBucket"),
                                         ("s3:///orders/", "Invalid bucket name")])
def test_s3_folder_that_cannot_exist_exits_2_naming_source_path(s3, path, cause):
    with pytest.raises(wap_etl.WapError) as e:
        wap_etl.parse_params(["--source_path", path, "--table", "shop.orders"])
    assert e.value.code == 2
    assert str(e.value).startswith(f"--source_path: cannot list {path}: ")
    assert cause in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("keys, named", [
    (["d/a.csv", "d/b.json"], ".csv, .json"),
    (["d/readme.txt"], ".txt"),
    ([], "no files"),
])
def test_s3_folder_with_mixed_or_no_data_files_exits_2(s3, keys, named):
    for key in keys:
        s3.put_object(Bucket="incoming", Key=key, Body=b"x")
    with pytest.raises(wap_etl.WapError) as e:
        wap_etl.infer_format("s3://incoming/d/")
    assert e.value.code == 2 and "--source_format" in str(e.value) and named in str(e.value)


def test_local_folder_with_mixed_files_exits_2_naming_the_extensions(wap, tmp_path):
    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "a.csv").write_text("id\n1\n")
    (folder / "b.json").write_text('{"id": 2}\n')
    code, report = wap.run(str(folder), checks=[])
    assert code == 2 and ".csv" in report.error and ".json" in report.error


# --- second review --------------------------------------------------------------------------------

@pytest.mark.parametrize("bound", ["20240601", "2024-W23-6", "2024-06-01T10"])
def test_date_bounds_spark_cannot_read_exit_2(wap, bound):
    rows = [{"id": 1, "day": "2024-06-01"}]
    code, report = wap.run(rows, checks=[{"check": "between", "column": "day", "min": bound}],
                           source_options={"dateFormat": "yyyy-MM-dd"})
    assert code == 2 and "ISO date" in report.error and not wap.exists()


def test_merge_drop_check_quarantines_a_null_key_instead_of_refusing_the_batch(wap, spark):
    assert wap.run([{"id": 1, "amount": 1.0}], checks=[])[0] == 0
    checks = [{"check": "not_null", "column": "id", "action": "drop"}]
    code, report = wap.run([{"id": None, "amount": 2.0}, {"id": 2, "amount": 3.0}], checks=checks,
                           mode="merge", merge_keys="id")
    assert code == 0 and report.rows_dropped == 1, report.error
    assert sorted(by_id(wap)) == [1, 2]
    assert spark.table(f"{wap.sql}_quarantine").count() == 1


def test_merge_delete_condition_does_not_smuggle_in_new_columns(wap):
    assert wap.run([{"id": 1, "amount": 1.0}], checks=[])[0] == 0
    rows = [{"id": 1, "amount": 2.0, "op": "U", "discount": 0.5}]
    code, report = wap.run(rows, checks=[], mode="merge", merge_keys="id", delete_condition="s.op = 'D'")
    assert code == 2 and "discount" in report.error and "op" not in report.error.split("lacks:")[-1]


def test_merge_delete_condition_must_be_a_condition(wap):
    assert wap.run([{"id": 1, "amount": 1.0, "op": "U"}], checks=[])[0] == 0
    code, report = wap.run([{"id": 1, "amount": 2.0, "op": "D"}], checks=[], mode="merge", merge_keys="id",
                           delete_condition="s.op")
    assert code == 2 and "--delete_condition" in report.error and "boolean" in report.error


def test_quarantine_follows_a_widened_column(wap, spark):
    check = dict(POSITIVE[0], action="drop")
    assert wap.run([{"id": 1, "amount": -1.0}, {"id": 2, "amount": 1.0}], checks=[check])[0] == 0
    spark.sql(f"ALTER TABLE {wap.sql} ALTER COLUMN id TYPE bigint")
    code, report = wap.run([{"id": 3, "amount": -3.0}, {"id": 4, "amount": 4.0}], checks=[check])
    assert code == 0, report.error
    assert sorted(r["id"] for r in spark.table(f"{wap.sql}_quarantine").collect()) == [1, 3]


def test_headerless_csv_and_numbered_column_names_are_fine(wap, tmp_path):
    numbered = tmp_path / "q.csv"
    numbered.write_text("id,q1,q2\n1,2,3\n")
    assert wap.run(str(numbered), checks=[])[0] == 0
    headerless = tmp_path / "h.csv"
    headerless.write_text("5,6,7\n")
    code, report = wap.run(str(headerless), checks=[], source_options={"header": "false"},
                           table=f"{wap.ns}.raw")
    assert code == 0, report.error


def test_s3_folder_markers_are_not_files(s3):
    for key in ("orders/2024-06-01/", "orders/2024-06-01/part-0.csv", "orders/2024-06-01/sub_$folder$"):
        s3.put_object(Bucket="incoming", Key=key, Body=b"")
    assert wap_etl.infer_format("s3://incoming/orders/2024-06-01/") == "csv"


def test_the_rerun_command_never_shows_the_slack_webhook(wap):
    code, report = wap.run([{"id": 1}], checks=[], slack_webhook_url="https://hooks.slack.example/T0/B0/secret",
                           alert_on="audit_failed")
    assert "secret" not in report.rerun_command and "<redacted>" in report.rerun_command


def test_merge_delete_condition_may_only_read(wap):
    assert wap.run([{"id": 1, "op": "U"}], checks=[])[0] == 0
    main = wap.refs()["main"]
    code, report = wap.run([{"id": 1, "op": "D"}], checks=[], mode="merge", merge_keys="id",
                           delete_condition="java_method('java.lang.System', 'exit', 0) = ''")
    assert code == 2 and "--delete_condition" in report.error and "may only read" in report.error
    assert wap.refs()["main"] == main
