"""Every check's result is its own: names are unique after automatic suffixes, expanded profiles
and a merge's key check, or the run exits 2 before writing."""
import pytest

import wap_etl


def test_automatic_names_skip_the_names_checks_were_given():
    checks = wap_etl.parse_checks([{"check": "not_null", "column": "a", "name": "not_null_a_2"},
                                   {"check": "not_null", "column": "a"}, {"check": "not_null", "column": "a"}])
    assert [c.name for c in checks] == ["not_null_a_2", "not_null_a", "not_null_a_3"]


def test_a_check_named_like_a_profile_statistic_exits_2_before_writing(wap):
    code, report = wap.run([{"id": 1, "a": 2}], checks=[
        {"check": "row_count", "min": 1000, "name": "p: row_count"},
        {"check": "profile", "column": "a", "name": "p", "action": "record"}])
    assert code == 2 and "'p: row_count': name used twice" in report.error
    assert not wap.exists()


@pytest.mark.parametrize("path", ["hdfs://nn/in/", "gs://bucket/in/"])
def test_a_file_rule_on_a_path_it_cannot_read_exits_2(path):
    with pytest.raises(wap_etl.WapError) as info:
        wap_etl.parse_checks([{"check": "file_size", "path": path, "max": 10}])
    assert info.value.code == 2 and "path must be a local path or s3://" in str(info.value)
