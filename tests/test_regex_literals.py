"""A regex that is a whole-value alternation of literals (`^(EWR|JFK|LGA)$`) is decided like an
accepted_values: by the files' bounds or the row groups' dictionaries, with no pattern evaluated
per row; a batch it may fail is scanned with the pattern itself, so its verdict is the regex's."""
import pytest

import wap_etl
from conftest import records_read

@pytest.fixture(autouse=True)
def large_batch_path(monkeypatch):
    """These batches are a few rows; audit them as a large batch is (pushdown reads), which is
    what this file tests. A batch under SMALL_BATCH_ROWS is scanned once instead, and one under
    FOLD_PUSHDOWN_ROWS has its pushdown counted by a scan that runs anyway."""
    monkeypatch.setattr(wap_etl, "SMALL_BATCH_ROWS", 0)
    monkeypatch.setattr(wap_etl, "FOLD_PUSHDOWN_ROWS", 0)


AIRPORT = {"check": "regex", "column": "origin", "pattern": "^(EWR|JFK|LGA)$"}


def spread_over_files(files):
    return lambda df: df.repartitionByRange(files, "id")


def audit_reading(spark, monkeypatch):
    read, real = [], wap_etl.audit
    monkeypatch.setattr(wap_etl, "audit", lambda *a, **k: read.append(records_read(
        spark, lambda: real(*a, **k), "audit")) or read[-1][0])
    return read


@pytest.mark.parametrize("driver_files, decided_by", [(8, "row_groups"), (0, "pushdown")])
def test_a_literal_alternation_regex_on_a_clean_batch_reads_no_data_row(wap, spark, monkeypatch, driver_files,
                                                                        decided_by):
    monkeypatch.setattr(wap_etl, "ROW_GROUP_FILES", driver_files)  # 0: the filtered read
    monkeypatch.setattr(wap_etl, "transform", spread_over_files(3))
    read = audit_reading(spark, monkeypatch)
    rows = [{"id": i, "origin": ["EWR", "JFK", "LGA"][i % 3]} for i in range(3000)]
    code, report = wap.run(rows, checks=[AIRPORT])
    assert code == 0, report.error
    assert report.checks[0]["decided_by"] == decided_by and report.checks[0]["passed"]
    assert read[0][1] <= 3, "only manifest entries were read, no data row"


def test_a_literal_alternation_regex_is_proven_by_one_valued_files(wap, monkeypatch):
    monkeypatch.setattr(wap_etl, "transform", lambda df: df.repartition(1))
    code, report = wap.run([{"id": i, "origin": "JFK"} for i in range(50)], checks=[AIRPORT])
    assert code == 0, report.error
    assert report.checks[0]["decided_by"] == "metadata"


def test_a_value_outside_the_alternation_fails_with_exact_count_and_sample(wap, monkeypatch):
    monkeypatch.setattr(wap_etl, "transform", spread_over_files(3))
    rows = [{"id": i, "origin": ["EWR", "JFK", "LGA"][i % 3]} for i in range(300)]
    rows[10]["origin"], rows[200]["origin"] = "BOS", "jfk"
    code, report = wap.run(rows, checks=[AIRPORT])
    assert code == 3
    result = report.checks[0]
    assert result["failing_rows"] == 2 and result["decided_by"] == "scan"
    assert sorted(s["origin"] for s in result["sample"]) == ["BOS", "jfk"]


def test_a_value_the_pattern_matches_outside_the_list_passes_as_the_regex_says(wap, monkeypatch):
    # Java's $ matches before a final line break: "EWR\n" matches ^(EWR|JFK|LGA)$
    from pyspark.sql import functions as F
    monkeypatch.setattr(wap_etl, "transform", lambda df: df.withColumn(
        "origin", F.when(F.col("id") == 1, F.lit("EWR\n")).otherwise(F.col("origin"))))
    code, report = wap.run([{"id": i, "origin": "LGA"} for i in range(5)], checks=[AIRPORT])
    assert code == 0, report.checks
    assert report.checks[0]["passed"] and report.checks[0]["failing_rows"] == 0


def test_only_whole_value_alternations_of_literals_count_as_lists():
    lists = {p: wap_etl.accepted(wap_etl.Check(name="r", check="regex", column="c", pattern=p))
             for p in ["^(EWR|JFK)$", "^(?:a b|c-d)$", "^abc$", "^a|b$", "^(a.b|c)$", "(a|b)", "^[ab]$", "^(a|)$",
                       r"^(?:EWR|JFK)\z", r"^abc\z", r"^(a|b)\Z"]}
    assert lists == {"^(EWR|JFK)$": ["EWR", "JFK"], "^(?:a b|c-d)$": ["a b", "c-d"], "^abc$": ["abc"],
                     "^a|b$": None, "^(a.b|c)$": None, "(a|b)": None, "^[ab]$": None, "^(a|)$": None,
                     r"^(?:EWR|JFK)\z": ["EWR", "JFK"], r"^abc\z": ["abc"], r"^(a|b)\Z": None}
