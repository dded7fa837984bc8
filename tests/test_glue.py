"""The Glue branch: parameters through the real awsglue.utils.getResolvedOptions; only what needs
Glue's JVM (GlueContext, Job) is faked."""
import awsglue.context
import awsglue.job
import awsglue.utils  # noqa: F401  (the real parser, from awsgluedataplanepython)
import pytest
from pyspark.sql import SparkSession

import wap_etl


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
