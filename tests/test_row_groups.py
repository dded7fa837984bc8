"""Row checks the manifests cannot decide, decided in the driver by the staged files' Parquet row
groups (their statistics and dictionaries, as Iceberg's reader skips row groups), with no Spark
job; what the row groups cannot clear is counted by the filtered read, exactly."""
import pytest

import wap_etl
from conftest import records_read


@pytest.fixture(autouse=True)
def large_batch_path(monkeypatch):
    """These batches are a few thousand rows; audit them as a large batch is (metadata, row groups,
    pushdown reads). A batch under SMALL_BATCH_ROWS is scanned once instead, and one under
    FOLD_PUSHDOWN_ROWS has its pushdown counted by a scan that runs anyway."""
    monkeypatch.setattr(wap_etl, "SMALL_BATCH_ROWS", 0)
    monkeypatch.setattr(wap_etl, "FOLD_PUSHDOWN_ROWS", 0)


def audit_reading(spark, monkeypatch):
    """Records every audit's rows read from files (data files and manifests) into the list returned."""
    read, real = [], wap_etl.audit
    monkeypatch.setattr(wap_etl, "audit", lambda *a, **k: read.append(records_read(
        spark, lambda: real(*a, **k), "audit")) or read[-1][0])
    return read


def one_file_of_small_row_groups(wap, spark, monkeypatch, **properties):
    """The table's next writes: one data file, sorted by id, its Parquet row groups of about 100 rows."""
    assert wap.run([{"id": -1, "qty": 1, "status": "new"}], checks=[])[0] == 0
    props = {"write.parquet.row-group-size-bytes": "1", **properties}
    spark.sql(f"ALTER TABLE {wap.sql} SET TBLPROPERTIES ("
              + ", ".join(f"'{k}'='{v}'" for k, v in props.items()) + ")")
    monkeypatch.setattr(wap_etl, "transform", lambda df: df.repartition(1).sortWithinPartitions("id"))


GAP = {"check": "expression", "expr": "qty < 10 OR qty > 20"}  # ids below 1000: 1-5, from 1000: 25-30


def gap_rows(n=2000):
    return [{"id": i, "qty": (1 + i % 5) if i < 1000 else (25 + i % 6), "status": "new"} for i in range(n)]


def row_groups_of_staged_file(spark, wap):
    """(rows, qty's min, max) of each row group of the file the run staged, from Parquet's own footer."""
    path = spark.sql(f"SELECT file_path FROM {wap.sql}.files WHERE record_count > 1").first()[0]
    jvm = spark.sparkContext._jvm
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    footer = jvm.org.apache.parquet.hadoop.ParquetFileReader.readFooter(
        hadoop, jvm.org.apache.hadoop.fs.Path(path))
    blocks = footer.getBlocks()
    return [(blocks.get(i).getRowCount(), blocks.get(i).getColumns().get(1).getStatistics().genericGetMin(),
             blocks.get(i).getColumns().get(1).getStatistics().genericGetMax()) for i in range(blocks.size())]


def test_an_expression_only_the_row_groups_bounds_rule_out_is_proven_with_no_spark_job(wap, spark, monkeypatch):
    one_file_of_small_row_groups(wap, spark, monkeypatch)
    read = audit_reading(spark, monkeypatch)
    code, report = wap.run(gap_rows(), checks=[GAP])
    groups = row_groups_of_staged_file(spark, wap)
    assert len(groups) > 2 and not any(lo < 10 and hi > 20 for _, lo, hi in groups), groups
    bounds = spark.sql(f"SELECT readable_metrics.qty.lower_bound, readable_metrics.qty.upper_bound "
                       f"FROM {wap.sql}.files WHERE record_count > 1").collect()
    assert [tuple(b) for b in bounds] == [(1, 30)], "the file's bounds admit a violation"
    assert code == 0 and report.checks[0]["decided_by"] == "row_groups", report.checks
    assert report.spark_jobs["audit"] == 0 and read[0][1] == 0, (report.spark_jobs, read)


def test_a_violation_in_one_row_group_is_counted_exactly_by_the_filtered_read(wap, spark, monkeypatch):
    one_file_of_small_row_groups(wap, spark, monkeypatch)
    rows = gap_rows()
    rows[1500]["qty"] = 15
    code, report = wap.run(rows, checks=[GAP])
    result = report.checks[0]
    assert code == 3 and result["failing_rows"] == 1 and result["decided_by"] == "pushdown", result
    assert [r["id"] for r in result["sample"]] == [1500]


def test_a_value_check_whose_column_outgrew_its_dictionary_is_counted_by_the_filtered_read(
        wap, spark, monkeypatch):
    """Parquet stops a column's dictionary at write.parquet.dict-size-bytes and writes plain pages:
    the dictionary no longer lists every value, so it proves nothing."""
    one_file_of_small_row_groups(wap, spark, monkeypatch, **{"write.parquet.row-group-size-bytes": str(64 << 20),
                                                "write.parquet.dict-size-bytes": "64"})
    values = [f"status-{i:04d}" for i in range(500)]
    rows = [{"id": i, "qty": 1, "status": values[i % 500]} for i in range(2000)]
    check = {"check": "accepted_values", "column": "status", "values": values}
    code, report = wap.run(rows, checks=[check])
    assert code == 0 and report.checks[0]["decided_by"] == "pushdown", report.checks
    rows[7]["status"] = "lost"
    code, report = wap.run([dict(r, id=r["id"] + 10_000) for r in rows], checks=[check])
    assert code == 3 and report.checks[0]["failing_rows"] == 1, report.checks


def files_opened(monkeypatch):
    """The files the driver opens to test their row groups, listed as it opens them."""
    opened, real = [], wap_etl.file_may_hold
    monkeypatch.setattr(wap_etl, "file_may_hold", lambda *a: opened.append(a[-1][0]) or real(*a))
    return opened


STATUS = {"check": "accepted_values", "column": "status", "values": ["new", "paid", "shipped"]}


def test_value_checks_on_an_orc_table_are_counted_by_the_filtered_read(wap, spark, monkeypatch):
    assert wap.run([{"id": -1, "status": "new"}], checks=[])[0] == 0
    spark.sql(f"ALTER TABLE {wap.sql} SET TBLPROPERTIES ('write.format.default'='orc')")
    monkeypatch.setattr(wap_etl, "transform", lambda df: df.repartitionByRange(3, "id"))
    opened = files_opened(monkeypatch)
    rows = [{"id": i, "status": ["new", "paid", "shipped"][i % 3]} for i in range(3000)]
    code, report = wap.run(rows, checks=[STATUS])
    formats = {r[0] for r in spark.sql(f"SELECT file_format FROM {wap.sql}.files").collect()}
    assert "ORC" in formats, formats
    assert code == 0 and report.checks[0]["decided_by"] == "pushdown", report.checks
    assert opened == [], "no ORC file is opened as Parquet"


def test_value_checks_are_proven_from_the_row_groups_in_overwrite_partitions_mode(wap, monkeypatch):
    assert wap.run([{"id": -1, "day": 9, "status": "new"}], checks=[], partition_by="day")[0] == 0
    monkeypatch.setattr(wap_etl, "transform", lambda df: df.repartitionByRange(3, "id"))
    rows = [{"id": i, "day": i % 2, "status": ["new", "paid", "shipped"][i % 3]} for i in range(3000)]
    code, report = wap.run(rows, checks=[STATUS], mode="overwrite_partitions")
    assert code == 0 and report.checks[0]["decided_by"] == "row_groups", report.checks
    rows[2500]["status"] = "lost"
    code, report = wap.run(rows, checks=[STATUS], mode="overwrite_partitions")
    assert code == 3 and report.checks[0]["failing_rows"] == 1, report.checks


def test_a_batch_of_more_files_than_the_driver_reads_is_counted_by_the_filtered_read(wap, monkeypatch):
    monkeypatch.setattr(wap_etl, "ROW_GROUP_FILES", 2)
    monkeypatch.setattr(wap_etl, "transform", lambda df: df.repartitionByRange(3, "id"))
    rows = [{"id": i, "status": ["new", "paid", "shipped"][i % 3]} for i in range(3000)]
    code, report = wap.run(rows, checks=[{"check": "accepted_values", "column": "status",
                                          "values": ["new", "paid", "shipped"]}])
    assert code == 0 and report.checks[0]["decided_by"] == "pushdown", report.checks


def test_more_row_groups_than_the_driver_reads_are_counted_by_the_filtered_read(wap, spark, monkeypatch):
    one_file_of_small_row_groups(wap, spark, monkeypatch)
    monkeypatch.setattr(wap_etl, "ROW_GROUP_LIMIT", 3)
    code, report = wap.run(gap_rows(), checks=[GAP])
    assert len(row_groups_of_staged_file(spark, wap)) > 3
    assert code == 0 and report.checks[0]["decided_by"] == "pushdown", report.checks


def test_a_list_holding_the_replacement_character_is_not_tested_against_dictionaries(wap, monkeypatch):
    """Iceberg decodes a dictionary's malformed UTF-8 as U+FFFD, which Spark compares as bytes."""
    monkeypatch.setattr(wap_etl, "transform", lambda df: df.repartitionByRange(3, "id"))
    rows = [{"id": i, "status": ["new", "paid"][i % 2]} for i in range(3000)]
    code, report = wap.run(rows, checks=[{"check": "accepted_values", "column": "status",
                                          "values": ["new", "paid", "\ufffd"]}])
    assert code == 0 and report.checks[0]["decided_by"] == "scan", report.checks


@pytest.mark.parametrize("why", ["too many row groups", "an unreadable file"])
def test_the_first_file_that_cannot_be_tested_stops_the_others(wap, monkeypatch, why):
    monkeypatch.setattr(wap_etl, "DRIVER_READERS", 1)  # one file after another
    if why == "too many row groups":
        monkeypatch.setattr(wap_etl, "ROW_GROUP_LIMIT", 0)
    opened, real = [], wap_etl.parquet_reader

    def counting(jvm):
        open_file, adapt = real(jvm)

        def opening(f):
            opened.append(f)
            if why == "an unreadable file":
                raise OSError("this file cannot be read")
            return open_file(f)
        return opening, adapt
    monkeypatch.setattr(wap_etl, "parquet_reader", counting)
    monkeypatch.setattr(wap_etl, "transform", lambda df: df.repartitionByRange(3, "id"))
    rows = [{"id": i, "status": ["new", "paid", "shipped"][i % 3]} for i in range(3000)]
    code, report = wap.run(rows, checks=[STATUS])
    assert code == 0 and report.checks[0]["decided_by"] == "pushdown", report.checks
    assert len(opened) == 1, f"{len(opened)} files opened: the first one's failure did not stop the others"
