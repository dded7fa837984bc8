"""The check engine as metrics and conditions: each kind of check is one entry of KINDS (its
parameters, parser, metric and judge); a metric is computed once however many checks use it."""
import pytest

import wap_etl
from wap_etl import parse_checks

ROWS = [{"id": i, "status": "paid" if i % 3 else "new", "amount": float(i)} for i in range(60)]


def audit_jobs(wap, checks, table):
    code, report = wap.run(ROWS, checks=checks, table=f"{wap.ns}.{table}")
    assert code == 0, report.error
    return report.spark_jobs["audit"], {r["name"]: r for r in report.checks}


def test_checks_of_different_kinds_on_one_metric_share_one_aggregate(spark):
    checks = parse_checks([{"check": "stat", "stat": "mean", "column": "amount", "min": 0},
                           {"check": "stat", "stat": "mean", "column": "amount", "max": 100, "name": "m2"},
                           {"check": "anomaly", "metric": "mean:amount"},
                           {"check": "not_null", "column": "id"},
                           {"check": "not_null", "column": "id", "action": "warn", "name": "again"}])
    names = [str(a) for a in wap_etl.row_metrics(checks)]
    assert len(names) == 3, names  # rows, the mean, the NULL count of id


def test_grouped_statistics_of_one_column_share_one_grouping_job(wap):
    one, _ = audit_jobs(wap, [{"check": "stat", "stat": "distinct_count", "column": "status", "min": 1}], "one")
    three, results = audit_jobs(wap, [
        {"check": "stat", "stat": "distinct_count", "column": "status", "min": 1},
        {"check": "stat", "stat": "entropy", "column": "status", "min": 0},
        {"check": "stat", "stat": "unique_value_ratio", "column": "status", "max": 1}], "three")
    assert three == one
    assert results["distinct_count_status"]["observed"] == 2
    assert results["unique_value_ratio_status"]["observed"] == 0


def test_every_kind_is_one_entry_with_its_parser_and_judge():
    for name, kind in wap_etl.KINDS.items():
        assert callable(kind.parse), name
        assert callable(kind.judge) or name in ("composite", "profile"), name  # audited as their parts
        required, optional = kind.params
        assert not (required & optional), name
    assert set(wap_etl.ROW_CHECKS) == {n for n, k in wap_etl.KINDS.items() if k.fails}


def test_every_statistic_is_one_entry_measured_one_way():
    for name, stat in wap_etl.STATS.items():
        ways = [stat.aggregate is not None, stat.grouped is not None, name == "column_count"]
        assert ways.count(True) == 1, name  # in the shared pass, off the value groups, or counted
        assert stat.columns in (0, 1, 2, "1+") and stat.needs in (None, "numeric", "string"), name


@pytest.mark.parametrize("stat", [["mean"], {"mean": 1}, "nope"])
def test_a_stat_that_is_no_statistic_s_name_is_bad_input(stat):
    with pytest.raises(wap_etl.WapError) as info:
        wap_etl.parse_checks([{"check": "stat", "column": "a", "stat": stat, "min": 0}])
    assert info.value.code == wap_etl.EXIT_BAD_INPUT and "stat must be one of mean, stddev" in str(info.value)


def test_an_anomaly_on_a_statistic_of_the_table_names_no_column():
    with pytest.raises(wap_etl.WapError) as info:
        wap_etl.parse_checks([{"check": "anomaly", "metric": "column_count:amount"}])
    assert info.value.code == wap_etl.EXIT_BAD_INPUT and "metric column_count takes no column" in str(info.value)
    assert wap_etl.parse_checks([{"check": "anomaly", "metric": "column_count"}])[0].stat == "column_count"


def test_a_column_name_with_a_comma_keeps_a_history_of_its_own():
    one, two = parse_checks([{"check": "stat", "stat": "distinct_count", "columns": ["a,b"], "min": 1},
                             {"check": "stat", "stat": "distinct_count", "columns": ["a", "b"], "min": 1}])
    assert wap_etl.metric_key(one) == "distinct_count:`a,b`" and wap_etl.metric_key(two) == "distinct_count:a,b"
    pairs = wap_etl.parse_dqdl('Rules = [ ReferentialIntegrity "a=b" "ns.ref.{c}" = 1.0, '
                               'ReferentialIntegrity "a" "ns.ref.{b=c}" = 1.0 ]')
    keys = {wap_etl.metric_key(c) for c in parse_checks(pairs)}
    assert len(keys) == 2, keys


def test_a_file_rule_s_history_is_its_path_s_whatever_the_case():
    row = {"metrics": {"file_uniqueness:s3://b/data/": 0.5, "mean:amount": 2.0}, "rows_written": 4}
    assert wap_etl.ledger_metric(row, "file_uniqueness:s3://b/Data/") is None
    assert wap_etl.ledger_metric(row, "file_uniqueness:s3://b/data/") == 0.5
    assert wap_etl.ledger_metric(row, "mean:Amount") == 2.0  # a column's key as an older run wrote it


def test_a_column_name_holding_where_keeps_a_history_of_its_own():
    one, two = parse_checks([{"check": "stat", "stat": "mean", "column": "x WHERE y > 0", "min": 1},
                             {"check": "stat", "stat": "mean", "column": "x", "where": "y > 0", "min": 1}])
    assert wap_etl.metric_key(one) == "mean:`x where y > 0`" and wap_etl.metric_key(two) == "mean:x where y > 0"
    ends, where = parse_checks([{"check": "stat", "stat": "mean", "column": "x where", "where": "- y > 0", "min": 1},
                                {"check": "stat", "stat": "mean", "column": "x", "where": "where - y > 0", "min": 1}])
    assert wap_etl.metric_key(ends) != wap_etl.metric_key(where)
