"""Bad parameters and bad check specs exit 2 with a one-line error, before anything is written."""
import json
import os
import subprocess
import sys

import pytest

import wap_etl

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOOD = [{"id": 1, "amount": 5.0, "status": "new"}, {"id": 2, "amount": 6.0, "status": "paid"}]

BAD_PARAMS = {
    "table without namespace": {"table": "orders"},
    "sql in table name": {"table": "db.t; DROP TABLE x"},
    "bad catalog type": {"catalog_type": "hive"},
    "bad source format": {"source_format": "xml"},
    "malformed source options": {"source_options": "{not json"},
    "source options not an object": {"source_options": "[1, 2]"},
    "malformed checks": {"checks": "[{\"check\": "},
    "batch id with quotes": {"batch_id": "x'); DROP TABLE t; --"},
    "publish not a boolean": {"publish": "maybe"},
    "unknown partition column": {"partition_by": "nope"},
    "bad source schema mode": {"source_schema": "guess"},
    "bad retention": {"branch_retention_days": "0"},
}

BAD_CHECKS = {
    "unknown type": {"check": "no_such_check", "column": "id"},
    "unknown column": {"check": "not_null", "column": "nope"},
    "missing parameter": {"check": "accepted_values", "column": "status"},
    "wrong parameter type": {"check": "between", "column": "amount", "min": [1]},
    "unknown parameter": {"check": "not_null", "colum": "id"},
    "invalid regex": {"check": "regex", "column": "status", "pattern": "([a-z"},
    "expression does not parse": {"check": "expression", "expr": "amount >>> 3 AND"},
    "expression not a condition": {"check": "expression", "expr": "amount + 1"},
    "drop on a table-level check": {"check": "unique", "columns": ["id"], "action": "drop"},
    "unknown action": {"check": "not_null", "column": "id", "action": "explode"},
    "bad tolerance": {"check": "not_null", "column": "id", "max_failing_fraction": 2},
    "schema with unknown type": {"check": "schema", "columns": {"id": "integr"}},
    "freshness on a number": {"check": "freshness", "column": "amount", "max_age_hours": 1},
}


def assert_nothing_written(wap):
    assert not wap.exists(), "the table must not be created for bad input"
    assert wap.wap_branch_conf() is None


@pytest.mark.parametrize("case", BAD_PARAMS)
def test_bad_parameter_exits_2_with_nothing_written(wap, case):
    params = {"checks": [{"check": "not_null", "column": "id"}], **BAD_PARAMS[case]}
    code, report = wap.run(GOOD, **params)
    assert code == 2 and report.status == "error"
    assert "\n" not in report.error
    name = next(iter(BAD_PARAMS[case]))
    assert f"--{name}" in report.error or (name == "table" and "--table" in report.error), report.error
    assert_nothing_written(wap)


@pytest.mark.parametrize("case", BAD_CHECKS)
def test_bad_check_spec_exits_2_naming_the_check(wap, case):
    spec = BAD_CHECKS[case]
    code, report = wap.run(GOOD, checks=[spec])
    assert code == 2, report.error
    assert "check" in report.error and "\n" not in report.error
    assert_nothing_written(wap)


def test_bad_check_spec_leaves_an_existing_table_untouched(wap):
    assert wap.run(GOOD, checks=[{"check": "not_null", "column": "id"}])[0] == 0
    refs = wap.refs()
    code, _ = wap.run([{"id": 3, "amount": 1.0, "status": "x"}],
                      checks=[{"check": "not_null", "column": "nope"}])
    assert code == 2 and wap.refs() == refs


def test_missing_source_path_exits_2(wap):
    code, report = wap.run(str(wap.tmp / "nothing_here.csv"), checks=[])
    assert code == 2 and "--source_path" in report.error
    assert_nothing_written(wap)


def test_empty_source_folder_exits_2(wap):
    os.makedirs(wap.tmp / "empty")
    code, report = wap.run(str(wap.tmp / "empty"), checks=[], source_format="csv")
    assert code == 2 and "--source_path" in report.error


def test_missing_required_parameter_exits_2(wap):
    code, report = wap_etl.run(["--source_path", wap.csv(GOOD)])
    assert code == 2 and "--table" in report.error


def test_unknown_parameter_exits_2(wap):
    code, report = wap_etl.run(wap.args(wap.csv(GOOD)) + ["--colour", "blue"])
    assert code == 2 and "--colour" in report.error


def test_checks_are_read_from_a_json_file(wap):
    path = wap.tmp / "checks.json"
    path.write_text(json.dumps([{"check": "between", "column": "amount", "max": 5.5}]))
    code, report = wap.run(GOOD, checks=str(path))
    assert code == 3 and report.checks[0]["name"] == "between_amount"


def test_batch_with_columns_the_table_lacks_exits_2(wap):
    assert wap.run(GOOD, checks=[])[0] == 0
    refs = wap.refs()
    code, report = wap.run([{"id": 3, "amount": 1.0, "status": "x", "extra": 1}], checks=[])
    assert code == 2 and "extra" in report.error and wap.refs() == refs


def test_batch_with_incompatible_type_exits_2(wap):
    assert wap.run(GOOD, checks=[])[0] == 0
    path = wap.csv([{"id": "three", "amount": 1.0, "status": "x"}])
    code, report = wap.run(path, checks=[], source_schema="infer")
    assert code == 2 and "'id'" in report.error and "string" in report.error
    assert wap.ids() == [1, 2]


def test_cli_runs_end_to_end_in_a_subprocess(tmp_path):
    src = tmp_path / "orders.csv"
    src.write_text("id,amount\n1,5.0\n2,7.5\n")
    bad = tmp_path / "bad.csv"
    bad.write_text("id,amount\n3,-5.0\n")
    checks = json.dumps([{"check": "between", "column": "amount", "min": 0}])
    base = [sys.executable, os.path.join(ROOT, "wap_etl.py"), "--table", "shop.orders",
            "--catalog", "local", "--warehouse", str(tmp_path / "wh"), "--checks", checks,
            "--report_path", str(tmp_path / "reports")]
    env = dict(os.environ, WAP_SPARK_MASTER="local[1]")
    ok = subprocess.run(base + ["--source_path", str(src), "--batch_id", "one"],
                        capture_output=True, text=True, env=env, timeout=300)
    assert ok.returncode == 0, ok.stderr[-3000:]
    assert "WAP_REPORT" in ok.stderr and '"status": "published"' in ok.stderr
    failed = subprocess.run(base + ["--source_path", str(bad), "--batch_id", "two"],
                            capture_output=True, text=True, env=env, timeout=300)
    assert failed.returncode == 3, failed.stderr[-3000:]
    assert "VERSION AS OF 'audit_two_" in failed.stderr
    report = json.loads((tmp_path / "reports" / "local.shop.orders" / "two.json").read_text())
    assert report["status"] == "audit_failed"
    assert report["main_snapshot_after"] == report["main_snapshot_before"] is not None
    usage = subprocess.run(base + ["--source_path", str(src), "--table", "nodot"],
                           capture_output=True, text=True, env=env, timeout=300)
    assert usage.returncode == 2 and "--table" in usage.stderr


def test_a_number_where_a_json_object_goes_is_named_a_float():
    with pytest.raises(wap_etl.WapError) as info:
        wap_etl.parse_json_param("source_options", "1.5", dict)
    assert info.value.code == 2 and str(info.value).endswith("got float")
