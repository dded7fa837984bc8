"""The Glue branch: parameters through the real awsglue.utils.getResolvedOptions; only what needs
Glue's JVM (GlueContext, Job) is faked."""
from datetime import datetime, timedelta, timezone

import awsglue.context
import awsglue.job
import awsglue.utils  # noqa: F401  (the real parser, from awsgluedataplanepython)
import boto3
import pytest
from pyspark.sql import SparkSession

import wap_etl
from conftest import session_conf


class FakeGlueContext:
    def __init__(self, sc):
        self.spark_session = SparkSession.getActiveSession()


class FakeJob:
    runs = []

    def __init__(self, glue_context):
        assert isinstance(glue_context, FakeGlueContext)

    def init(self, name, args):
        FakeJob.runs.append(("init", name, dict(args)))

    def commit(self):
        FakeJob.runs.append(("commit",))


@pytest.fixture
def glue(monkeypatch):
    monkeypatch.setattr(awsglue.context, "GlueContext", FakeGlueContext)
    monkeypatch.setattr(awsglue.job, "Job", FakeJob)
    FakeJob.runs = []
    return FakeJob


def glue_argv(wap, source, **params):
    # What Glue passes: its own arguments first, then the job's --name value pairs.
    return ["--JOB_ID", "j_1", "--JOB_RUN_ID", "jr_1", "--job-bookmark-option", "job-bookmark-disable",
            "--TempDir", "s3://bucket/tmp", "--JOB_NAME", "nightly_orders",
            "--catalog_type", "hadoop"] + wap.args(source, **params)


def test_glue_parameters_are_parsed_by_get_resolved_options(wap, glue, monkeypatch):
    seen = {}
    real = awsglue.utils.getResolvedOptions

    def spy(args, options):
        seen["options"] = list(options)
        return real(args, options)

    monkeypatch.setattr(awsglue.utils, "getResolvedOptions", spy)
    argv = glue_argv(wap, wap.csv([{"id": 1}, {"id": 2}]), batch_id="g1",
                     checks=[{"check": "not_null", "column": "id"}])
    p = wap_etl.parse_params(argv)
    assert p.on_glue and p.batch_id == "g1" and p.table == wap.table
    assert p.checks == [{"check": "not_null", "column": "id"}]
    assert p.publish is True and p.catalog_type == "hadoop" and p.source_format == "csv"
    assert "JOB_NAME" in seen["options"] and "source_path" in seen["options"]
    assert "mode" not in seen["options"]  # optional parameters not given are not required


def test_glue_missing_required_parameter_exits_2(wap, glue):
    code, report = wap_etl.run(["--JOB_NAME", "j", "--source_path", wap.csv([{"id": 1}])])
    assert code == 2 and "--table" in report.error


def test_a_hadoop_catalog_on_glue_without_a_warehouse_is_refused(wap, glue, spark):
    """Its default ./warehouse would be on the job's driver: published rows gone with the run."""
    argv = ["--JOB_NAME", "j", "--source_path", wap.csv([{"id": 1}]), "--table", wap.table,
            "--catalog", "nowarehouse", "--catalog_type", "hadoop", "--report_path", wap.reports]
    code, report = wap_etl.run(argv)
    assert code == 2 and report.error.startswith("--warehouse: required for a hadoop catalog on Glue"), report.error
    assert not spark.conf.get("spark.sql.catalog.nowarehouse", None), "no catalog set up"


def test_a_hadoop_catalog_set_up_in_the_glue_jobs_conf_needs_no_warehouse_parameter(wap, glue, spark):
    prefix = "spark.sql.catalog.confwarehouse"
    settings = {prefix: "org.apache.iceberg.spark.SparkCatalog", f"{prefix}.type": "hadoop",
                f"{prefix}.warehouse": wap.warehouse}
    with session_conf(spark, settings):
        code, report = wap_etl.run(["--JOB_NAME", "j", "--source_path", wap.csv([{"id": 1}]), "--table", wap.table,
                                    "--catalog", "confwarehouse", "--catalog_type", "hadoop",
                                    "--report_path", wap.reports, "--checks", "[]"])
    assert code == 0 and report.status == "published", report.error


def test_glue_catalog_type_defaults_to_glue(wap, glue):
    argv = ["--JOB_NAME", "j", "--source_path", wap.csv([{"id": 1}]), "--table", "db.t"]
    p = wap_etl.parse_params(argv)
    assert p.catalog_type == "glue" and p.catalog == "glue_catalog" and p.warehouse is None


def test_glue_run_publishes_and_commits_the_job(wap, glue):
    argv = glue_argv(wap, wap.csv([{"id": 1}, {"id": 2}]), checks=[{"check": "not_null", "column": "id"}])
    code, report = wap_etl.run(argv)
    assert code == 0 and report.status == "published"
    assert wap.ids() == [1, 2]
    assert glue.runs[0][0] == "init" and glue.runs[0][1] == "nightly_orders"
    assert glue.runs[-1] == ("commit",)


def test_glue_run_with_failed_audit_does_not_commit(wap, glue):
    argv = glue_argv(wap, wap.csv([{"id": 1}, {"id": None}]), checks=[{"check": "not_null", "column": "id"}])
    code, _ = wap_etl.run(argv)
    assert code == 3 and ("commit",) not in glue.runs


def test_glue_run_with_a_misspelled_parameter_exits_2(wap, glue):
    """Glue's parser drops names it was not asked for; a typo must not silently change the run."""
    argv = glue_argv(wap, wap.csv([{"id": 1}]), checks=[]) + ["--delete_conditon", "s.op = 'D'"]
    code, report = wap_etl.run(argv)
    assert code == 2 and "--delete_conditon" in report.error
    assert not wap.exists()


# --- Glue's own job arguments, through the real getResolvedOptions (no Spark) ------------------

# What Glue 5.0 passes beside the job's own parameters: run ids, bare flags, and a value that starts
# with -- itself (docs.aws.amazon.com/glue/latest/dg/aws-glue-programming-etl-glue-arguments.html).
GLUE_OWN = ["--JOB_ID", "j_1", "--JOB_RUN_ID", "jr_1", "--enable-metrics",
            "--python-modules-installer-option", "--upgrade", "--TempDir", "s3://bucket/tmp",
            "--enable-glue-datacatalog", "true", "--job-language", "python",
            "--job-bookmark-option", "job-bookmark-disable", "--enable-continuous-cloudwatch-log", "true",
            "--extra-py-files", "s3://bucket/lib.zip", "--additional-python-modules", "pyarrow==17.0.0",
            "--conf", "spark.sql.extensions=x --conf spark.sql.catalog.glue_catalog.warehouse=s3://w/",
            "--WORKFLOW_NAME", "nightly", "--WORKFLOW_RUN_ID", "wr_1", "--JOB_NAME", "load_orders"]


@pytest.fixture
def no_session(monkeypatch):
    """Parameter checks need neither Spark nor Glue: building a session fails the test."""
    monkeypatch.setattr(wap_etl, "create_session", lambda p: pytest.fail("a session was built"))


@pytest.fixture
def source(tmp_path):
    from conftest import write_csv
    return write_csv(tmp_path / "in" / "orders.csv", [{"id": 1}, {"id": 2}])


def test_glue_own_arguments_are_tolerated_and_not_taken_for_ours(source):
    argv = GLUE_OWN + ["--source_path", source, "--table", "shop.orders", "--catalog_type", "hadoop", "--warehouse", "wh",
                       "--enable-metrics", "--batch_id", "b1", "--publish", "false"]
    p = wap_etl.parse_params(argv)
    assert (p.table, p.batch_id, p.publish, p.source_path) == ("shop.orders", "b1", False, source)
    assert p.glue_args["JOB_NAME"] == "load_orders" and p.glue_args["JOB_RUN_ID"] == "jr_1"
    assert (p.glue_args["WORKFLOW_NAME"], p.glue_args["WORKFLOW_RUN_ID"]) == ("nightly", "wr_1")
    assert p.glue_args["job_bookmark_option"] == "job-bookmark-disable"  # what Job.init reads


def test_a_glue_argument_whose_value_looks_like_ours_is_not_ours(source):
    """pip options go in --python-modules-installer-option; its value is never a parameter of ours."""
    argv = ["--JOB_NAME", "j", "--python-modules-installer-option", "--batch_id",
            "--source_path", source, "--table", "shop.orders", "--catalog_type", "hadoop", "--warehouse", "wh"]
    p = wap_etl.parse_params(argv)
    assert p.batch_id is None and p.table == "shop.orders"


def test_glue_parameter_without_its_value_exits_2(source, no_session):
    argv = ["--JOB_NAME", "j", "--batch_id", "--source_path", source, "--table", "shop.orders"]
    code, report = wap_etl.run(argv)
    assert code == 2 and report.error.startswith("--batch_id: expected a value")


def test_glue_rerun_command_keeps_the_job_arguments_but_not_this_runs_ids(source):
    argv = GLUE_OWN + ["--source_path", source, "--table", "shop.orders", "--catalog_type", "hadoop", "--warehouse", "wh"]
    command = wap_etl.rerun_command(wap_etl.parse_params(argv), argv)
    arguments = wap_etl.json.loads(wap_etl.shlex.split(command)[-1])
    assert arguments["--table"] == "shop.orders" and arguments["--enable-metrics"] == ""
    assert arguments["--python-modules-installer-option"] == "--upgrade"
    assert not {"--JOB_NAME", "--JOB_RUN_ID", "--WORKFLOW_NAME", "--WORKFLOW_RUN_ID"} & arguments.keys()


def test_lake_formation_fine_grained_access_exits_2_before_any_session(source, no_session):
    argv = GLUE_OWN + ["--enable-lakeformation-fine-grained-access", "true",
                       "--source_path", source, "--table", "shop.orders"]
    code, report = wap_etl.run(argv)
    assert code == 2 and report.error.startswith("--enable-lakeformation-fine-grained-access: ")
    assert "read only" in report.error and "\n" not in report.error
    off = GLUE_OWN + ["--enable-lakeformation-fine-grained-access", "false",
                      "--source_path", source, "--table", "shop.orders"]
    assert wap_etl.parse_params(off).catalog_type == "glue"


# --- Names the Glue Data Catalog refuses (no Spark, no Glue: parameter validation) --------------

@pytest.mark.parametrize("glue_job", [False, True], ids=["local", "on_glue"])
def test_glue_catalog_refuses_a_mixed_case_table_before_any_session(source, no_session, glue_job):
    argv = ["--source_path", source, "--table", "Shop.Orders"]
    argv += ["--JOB_NAME", "j"] if glue_job else ["--catalog_type", "glue"]
    code, report = wap_etl.run(argv)
    assert code == 2 and report.error.startswith("--table: database name 'Shop' is not allowed in the Glue")
    assert "use 'shop'" in report.error


def test_glue_catalog_refuses_a_mixed_case_runs_table(source, no_session):
    code, report = wap_etl.run(["--source_path", source, "--table", "shop.orders", "--catalog_type", "glue",
                                "--runs_table", "audit.OrderRuns"])
    assert code == 2 and report.error.startswith("--runs_table: table name 'OrderRuns'")


def test_glue_catalog_refuses_a_mixed_case_relationship_table(source, no_session):
    checks = [{"check": "relationship", "column": "id", "to_table": "shop.Customers"}]
    code, report = wap_etl.run(["--source_path", source, "--table", "shop.orders", "--catalog_type", "glue",
                                "--checks", wap_etl.json.dumps(checks)])
    assert code == 2
    assert report.error.startswith('check #1 ("relationship"): to_table: table name \'Customers\'')


def test_glue_catalog_takes_the_longest_table_name_with_its_ledger_and_quarantine(source):
    """Table names stop at 128 characters, so <table>_quarantine and <table>_wap_runs stay within
    Glue's 255."""
    name = "o" * 128
    p = wap_etl.parse_params(["--source_path", source, "--table", f"shop.{name}", "--catalog_type", "glue"])
    assert p.runs_name == f"{name}_wap_runs" and len(f"{name}_quarantine") <= 255


def test_hadoop_catalog_keeps_accepting_mixed_case_names(source):
    checks = [{"check": "relationship", "column": "id", "to_table": "Shop.Customers"}]
    p = wap_etl.parse_params(["--source_path", source, "--table", "Shop.Orders", "--catalog_type", "hadoop",
                              "--runs_table", "Audit.Runs", "--checks", wap_etl.json.dumps(checks)])
    wap_etl.check_glue_references(p, p.checks, wap_etl.parse_checks(p.checks))
    assert (p.table, p.runs_namespace, p.runs_name) == ("Shop.Orders", "Audit", "Runs")


# --- After the run: Glue workflow run properties and CloudWatch metrics, against moto -----------

def start_workflow_run(name="nightly"):
    client = boto3.client("glue")
    client.create_workflow(Name=name)
    return client, client.start_workflow_run(Name=name, RunProperties={"day": "2024-06-01"})["RunId"]


def in_workflow(argv, run_id, name="nightly"):
    return argv + ["--WORKFLOW_NAME", name, "--WORKFLOW_RUN_ID", run_id]


def test_glue_workflow_run_properties_carry_the_published_batch(wap, glue, aws):
    client, run_id = start_workflow_run()
    argv = glue_argv(wap, wap.csv([{"id": 1}, {"id": 2}]), batch_id="b1",
                     checks=[{"check": "not_null", "column": "id"}])
    code, report = wap_etl.run(in_workflow(argv, run_id))
    props = client.get_workflow_run_properties(Name="nightly", RunId=run_id)["RunProperties"]
    key = f"wap_etl.{wap.table}."
    assert code == 0 and props["day"] == "2024-06-01"  # the workflow's own properties stay
    assert (props[key + "status"], props[key + "batch_id"], props[key + "exit_code"]) == ("published", "b1", "0")
    assert props[key + "published_snapshot"] == str(wap.refs()["main"])
    assert props[key + "staged_snapshot"] == str(report.staged_snapshot) and props[key + "run_id"] == report.run_id


def test_glue_workflow_run_properties_carry_a_failed_audit(wap, glue, aws):
    client, run_id = start_workflow_run()
    argv = glue_argv(wap, wap.csv([{"id": 1}, {"id": None}]), batch_id="b2",
                     checks=[{"check": "not_null", "column": "id"}])
    code, report = wap_etl.run(in_workflow(argv, run_id))
    props = client.get_workflow_run_properties(Name="nightly", RunId=run_id)["RunProperties"]
    key = f"wap_etl.{wap.table}."
    assert code == 3 and (props[key + "status"], props[key + "exit_code"]) == ("audit_failed", "3")
    assert props[key + "staged_snapshot"] == str(report.staged_snapshot) != ""
    assert props[key + "published_snapshot"] == ""


def test_glue_workflow_that_cannot_be_told_does_not_change_the_outcome(wap, glue, aws, caplog):
    argv = glue_argv(wap, wap.csv([{"id": 1}]), checks=[])
    code, report = wap_etl.run(in_workflow(argv, "wr_missing", name="no_such_workflow"))
    assert code == 0 and report.status == "published" and wap.ids() == [1]
    assert ("commit",) in glue.runs
    assert "Glue workflow run properties failed (the run's outcome stands)" in caplog.text


def test_glue_metrics_carry_job_name_job_run_id_and_table(wap, glue, aws):
    argv = glue_argv(wap, wap.csv([{"id": 1}, {"id": 2}]), checks=[], cloudwatch_namespace="WAP/Glue")
    code, _ = wap_etl.run(argv)
    cw, now = boto3.client("cloudwatch"), datetime.now(timezone.utc)
    table = {"Name": "Table", "Value": f"local.{wap.table}"}

    def rows_written(*dims):
        points = cw.get_metric_statistics(
            Namespace="WAP/Glue", MetricName="RowsWritten", Dimensions=list(dims), Period=60,
            StartTime=now - timedelta(minutes=10), EndTime=now + timedelta(minutes=10),
            Statistics=["Maximum"])["Datapoints"]
        return [p["Maximum"] for p in points]

    job = {"Name": "JobName", "Value": "nightly_orders"}
    assert code == 0
    assert rows_written(job, {"Name": "JobRunId", "Value": "jr_1"}, table) == [2.0]
    assert rows_written(job, {"Name": "JobRunId", "Value": "ALL"}, table) == [2.0]
    assert rows_written(table) == [2.0]  # alarms on the table alone keep working


@pytest.mark.parametrize("spelling", ["--delete-condition", "--Delete_Condition", "--delete_condition=s.op = 'D'"])
def test_a_parameter_of_ours_spelled_as_glue_would_drop_it_exits_2(source, no_session, spelling):
    argv = ["--JOB_NAME", "j", "--source_path", source, "--table", "shop.orders", "--mode", "merge",
            "--merge_keys", "id", spelling] + ([] if "=" in spelling else ["s.op = 'D'"])
    code, report = wap_etl.run(argv)
    assert code == 2 and "--delete_condition" in report.error and "separate argument" in report.error


def test_a_token_in_a_glue_argument_never_reaches_the_rerun_command(source):
    argv = ["--JOB_NAME", "j", "--python-modules-installer-option",
            "--index-url https://aws:TOKEN-S3CR3T@repo.example/simple", "--conf",
            "spark.hadoop.fs.s3a.secret.key=KEY-S3CR3T --conf spark.sql.shuffle.partitions=4",
            "--source_path", source, "--table", "shop.orders", "--catalog_type", "hadoop", "--warehouse", "wh"]
    p = wap_etl.parse_params(argv)
    command = wap_etl.rerun_command(p, argv)
    assert "S3CR3T" not in command and "<redacted>" in command
    assert "spark.sql.shuffle.partitions=4" in command


# Spark internals reached by reflection: on a Spark build where they differ (Glue runs AWS's own),
# a condition or query that cannot be proven read-only is refused (exit 2 naming the check, nothing
# written) and a metric that cannot be narrowed to its columns scans them all.
ANOTHER_BUILD = "com.example.spark.catalyst"  # where another build might keep Spark's plan classes
ORIGINS = [{"id": 1, "origin": "JFK"}, {"id": 2, "origin": "XXX"}, {"id": 3, "origin": "EWR"}]


def test_a_condition_spark_cannot_prove_read_only_exits_2_naming_the_check(wap, monkeypatch):
    monkeypatch.setattr(wap_etl, "CATALYST", ANOTHER_BUILD)
    code, report = wap.run(ORIGINS, checks=[{"check": "expression", "name": "positive", "expr": "id > 0"}])
    assert code == 2 and "'positive'" in report.error and "cannot be proven read-only" in report.error
    assert "\n" not in report.error and "Traceback" not in report.error
    assert not wap.exists()


def test_a_sql_check_spark_cannot_prove_read_only_exits_2_naming_the_check(wap, monkeypatch):
    monkeypatch.setattr(wap_etl, "CATALYST", ANOTHER_BUILD)
    sql = {"check": "sql", "name": "some_rows", "query": "SELECT count(*) FROM {batch}", "min": 1}
    code, report = wap.run(ORIGINS, checks=[sql])
    assert code == 2 and "'some_rows'" in report.error and "cannot be proven" in report.error
    assert not wap.exists()


def test_row_checks_scan_every_column_when_spark_cannot_say_which_they_read(wap, monkeypatch):
    from py4j.protocol import Py4JError

    def not_on_this_build(df):
        raise Py4JError("An error occurred while calling o77.queryExecution: method does not exist")
    monkeypatch.setattr(wap_etl, "analyzed_plan", not_on_this_build)
    regex = {"check": "regex", "name": "airport", "column": "origin", "pattern": "^(EWR|JFK|LGA)$"}
    code, report = wap.run(ORIGINS, checks=[regex])
    assert code == 3, report.error
    assert [c["failing_rows"] for c in report.checks if c["name"] == "airport"] == [1]
    assert wap.run([{"id": 4, "origin": "LGA"}], checks=[regex])[0] == 0
    assert wap.ids() == [4]
