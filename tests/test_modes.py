"""Write modes: append, overwrite_partitions and merge all stage, audit and publish the same way."""
import os

import pytest

import wap_etl

DAY1 = [{"id": 1, "day": "d1", "amount": 1.0}, {"id": 2, "day": "d1", "amount": 2.0},
        {"id": 3, "day": "d2", "amount": 3.0}]
POSITIVE = [{"check": "between", "column": "amount", "min": 0}]


def by_id(wap):
    return {r["id"]: r for r in wap.rows()}


def test_overwrite_partitions_replaces_only_the_batch_partitions(wap):
    assert wap.run(DAY1, checks=POSITIVE, partition_by="day")[0] == 0
    late = [{"id": 10, "day": "d1", "amount": 10.0}]
    code, report = wap.run(late, checks=POSITIVE, mode="overwrite_partitions")
    assert code == 0 and report.status == "published"
    assert wap.ids() == [3, 10]
    assert report.rows_written == 1 and report.rows_deleted == 2


def test_overwrite_partitions_audits_the_replaced_partitions(wap):
    assert wap.run(DAY1 + [{"id": 4, "day": "d2", "amount": -4.0}], partition_by="day",
                   checks=[dict(POSITIVE[0], action="warn")])[0] == 0
    code, report = wap.run([{"id": 10, "day": "d1", "amount": 10.0}], checks=POSITIVE,
                           mode="overwrite_partitions")
    assert code == 0, "the bad row in partition d2 is not part of this batch"
    assert report.rows_written == 1


def test_overwrite_partitions_failed_audit_leaves_main_unchanged(wap):
    assert wap.run(DAY1, checks=POSITIVE, partition_by="day")[0] == 0
    before = (wap.refs()["main"], wap.rows())
    code, report = wap.run([{"id": 10, "day": "d1", "amount": -1.0}], checks=POSITIVE,
                           mode="overwrite_partitions")
    assert code == 3 and (wap.refs()["main"], wap.rows()) == before
    assert wap.ids(report.branch) == [3, 10]


def test_overwrite_partitions_on_an_unpartitioned_table_exits_2(wap):
    assert wap.run(DAY1, checks=POSITIVE)[0] == 0
    refs = wap.refs()
    code, report = wap.run([{"id": 9, "day": "d1", "amount": 1.0}], mode="overwrite_partitions", checks=[])
    assert code == 2 and "not partitioned" in report.error and wap.refs() == refs


def test_overwrite_partitions_after_a_partition_spec_change_exits_2_until_older_files_are_rewritten(wap, spark):
    assert wap.run(DAY1, checks=POSITIVE, partition_by="day")[0] == 0
    spark.sql(f"ALTER TABLE {wap.sql} REPLACE PARTITION FIELD day WITH truncate(10, day)")  # the same days
    refs = wap.refs()
    batch = [{"id": 10, "day": "d1", "amount": 10.0}]
    code, report = wap.run(batch, checks=POSITIVE, mode="overwrite_partitions")
    assert code == 2 and "earlier partition spec" in report.error and wap.refs() == refs, report.error
    spark.sql(f"CALL local.system.rewrite_data_files(table => '{wap.table}', options => map('rewrite-all', 'true'))")
    code, report = wap.run(batch, checks=POSITIVE, mode="overwrite_partitions")
    assert code == 0, report.error
    assert wap.ids() == [3, 10], "day d1 replaced, d2 kept"


def test_overwrite_partitions_after_a_partition_spec_change_replaces_a_partition_older_files_do_not_hold(wap, spark):
    assert wap.run(DAY1, checks=POSITIVE, partition_by="day")[0] == 0
    spark.sql(f"ALTER TABLE {wap.sql} ADD PARTITION FIELD amount")  # files of days d1, d2 under the first spec
    assert wap.run([{"id": 20, "day": "d5", "amount": 2.0}], checks=POSITIVE, mode="overwrite_partitions")[0] == 0
    code, report = wap.run([{"id": 21, "day": "d5", "amount": 2.0}], checks=POSITIVE, mode="overwrite_partitions")
    assert code == 0, report.error  # day d5 lies in files of the current spec alone
    assert wap.ids() == [1, 2, 3, 21]
    code, report = wap.run([{"id": 22, "day": "d1", "amount": 1.0}], checks=POSITIVE, mode="overwrite_partitions")
    assert code == 2 and "earlier partition spec" in report.error, report.error  # day d1 does not


def test_overwrite_partitions_after_a_spec_change_refuses_a_nan_partition_older_files_may_hold(wap, spark):
    day1 = [{"id": 1, "day": "d1", "amount": 1.0}, {"id": 2, "day": "d1", "amount": "NaN"}]
    assert wap.run(day1, checks=[], partition_by="day")[0] == 0  # Iceberg's bounds leave NaN out: [1.0, 1.0]
    spark.sql(f"ALTER TABLE {wap.sql} ADD PARTITION FIELD amount")
    refs = wap.refs()
    code, report = wap.run([{"id": 3, "day": "d1", "amount": "NaN"}], checks=[], mode="overwrite_partitions")
    assert code == 2 and "earlier partition spec" in report.error and wap.refs() == refs, report.error


def test_merge_updates_and_inserts_by_key(wap):
    assert wap.run(DAY1, checks=POSITIVE)[0] == 0
    batch = [{"id": 2, "day": "d1", "amount": 20.0}, {"id": 4, "day": "d3", "amount": 4.0}]
    code, report = wap.run(batch, checks=POSITIVE, mode="merge", merge_keys="id")
    assert code == 0 and report.status == "published"
    rows = by_id(wap)
    assert sorted(rows) == [1, 2, 3, 4] and rows[2]["amount"] == 20.0 and rows[1]["amount"] == 1.0
    assert (report.rows_inserted, report.rows_updated, report.rows_deleted) == (1, 1, 0)
    assert report.rows_written == 2


def test_merge_deletes_rows_matching_the_delete_condition(wap):
    assert wap.run(DAY1, checks=POSITIVE)[0] == 0
    cdc = [{"id": 1, "day": "d1", "amount": 1.0, "op": "D"}, {"id": 3, "day": "d2", "amount": 30.0, "op": "U"},
           {"id": 5, "day": "d3", "amount": 5.0, "op": "I"}, {"id": 6, "day": "d3", "amount": 6.0, "op": "D"}]
    code, report = wap.run(cdc, checks=POSITIVE, mode="merge", merge_keys="id",
                           delete_condition="s.op = 'D'")
    assert code == 0, report.error
    rows = by_id(wap)
    assert sorted(rows) == [2, 3, 5] and rows[3]["amount"] == 30.0
    assert "op" not in rows[2], "the source-only column is not written"
    assert (report.rows_inserted, report.rows_updated, report.rows_deleted) == (1, 1, 1)


def test_merge_query_reading_a_source_only_column_exits_2_before_writing(wap):
    """The audit's {batch} is the staged rows, which lack the column only --delete_condition reads."""
    assert wap.run(DAY1, checks=POSITIVE)[0] == 0
    before = (wap.refs(), wap.rows())
    cdc = [{"id": 1, "day": "d1", "amount": 1.0, "op": "D"}, {"id": 5, "day": "d3", "amount": 5.0, "op": "I"}]
    code, report = wap.run(cdc, checks=[{"check": "sql", "query": "SELECT count(*) FROM {batch} WHERE op = 'X'",
                                         "max": 0}], mode="merge", merge_keys="id", delete_condition="s.op = 'D'")
    assert code == 2 and "query does not run" in report.error and "op" in report.error
    assert (wap.refs(), wap.rows()) == before


def test_merge_drop_check_with_a_subquery_on_a_source_only_column_exits_2_before_writing(wap):
    """Counted again on the staged rows at every audit, which lack the column only --delete_condition reads."""
    assert wap.run(DAY1, checks=POSITIVE)[0] == 0
    before = (wap.refs(), wap.rows())
    cdc = [{"id": 1, "day": "d1", "amount": 1.0, "op": "D"}, {"id": 5, "day": "d3", "amount": 5.0, "op": "I"}]
    drop = {"check": "expression", "name": "known_ops", "action": "drop",
            "expr": "op IN (SELECT op FROM VALUES ('D'), ('I') AS ops(op))"}
    code, report = wap.run(cdc, checks=[drop], mode="merge", merge_keys="id", delete_condition="s.op = 'D'")
    assert code == 2 and "known_ops" in report.error and "--delete_condition" in report.error, report.error
    assert (wap.refs(), wap.rows()) == before


def test_merge_delete_condition_may_end_in_a_comment(wap):
    assert wap.run(DAY1, checks=POSITIVE)[0] == 0
    cdc = [{"id": 1, "day": "d1", "amount": 1.0, "op": "D"}, {"id": 5, "day": "d3", "amount": 5.0, "op": "I"}]
    code, report = wap.run(cdc, checks=POSITIVE, mode="merge", merge_keys="id",
                           delete_condition="s.op = 'D' -- a CDC delete")
    assert code == 0, report.error
    assert sorted(by_id(wap)) == [2, 3, 5] and report.rows_deleted == 1


def test_merge_failed_audit_leaves_main_unchanged(wap):
    assert wap.run(DAY1, checks=POSITIVE)[0] == 0
    before = (wap.refs()["main"], wap.rows())
    code, report = wap.run([{"id": 2, "day": "d1", "amount": -2.0}], checks=POSITIVE,
                           mode="merge", merge_keys="id")
    assert code == 3 and (wap.refs()["main"], wap.rows()) == before
    assert {r["id"]: r["amount"] for r in wap.rows(report.branch)}[2] == -2.0


def test_merge_audits_only_the_rows_it_inserted_or_updated(wap):
    assert wap.run(DAY1 + [{"id": 9, "day": "d9", "amount": -9.0}],
                   checks=[dict(POSITIVE[0], action="warn")])[0] == 0
    code, report = wap.run([{"id": 1, "day": "d1", "amount": 11.0}], checks=POSITIVE,
                           mode="merge", merge_keys="id")
    assert code == 0 and report.rows_written == 1


def test_merge_with_duplicate_keys_in_the_batch_exits_2(wap):
    assert wap.run(DAY1, checks=[])[0] == 0
    refs = wap.refs()
    batch = [{"id": 7, "day": "d1", "amount": 1.0}, {"id": 7, "day": "d2", "amount": 2.0}]
    code, report = wap.run(batch, checks=[], mode="merge", merge_keys="id")
    assert code == 2 and "id=7" in report.error and wap.refs() == refs


def test_merge_never_publishes_duplicate_keys(wap):
    dupes = DAY1 + [{"id": 1, "day": "d9", "amount": 9.0}]
    assert wap.run(dupes, checks=[])[0] == 0   # appended without a unique check
    main = wap.refs()["main"]
    code, report = wap.run([{"id": 5, "day": "d5", "amount": 5.0}], checks=[], mode="merge",
                           merge_keys="id")
    assert code == 3 and wap.refs()["main"] == main
    assert report.checks[-1]["name"] == "unique_merge_keys" and not report.checks[-1]["passed"]


def test_merge_batch_is_published_once(wap):
    path = wap.csv([{"id": 2, "day": "d1", "amount": 20.0}])
    assert wap.run(DAY1, checks=[])[0] == 0
    assert wap.run(path, checks=[], mode="merge", merge_keys="id")[0] == 0
    main = wap.refs()["main"]
    code, report = wap.run(path, checks=[], mode="merge", merge_keys="id")
    assert report.status == "already_published" and wap.refs()["main"] == main


def test_merge_without_keys_exits_2(wap):
    code, report = wap.run(DAY1, checks=[], mode="merge")
    assert code == 2 and "--merge_keys" in report.error


def test_overwrite_restages_when_main_moves_before_publish(wap, monkeypatch):
    assert wap.run(DAY1, checks=POSITIVE, partition_by="day")[0] == 0

    def after(step):
        if step == "audit" and not getattr(after, "done", False):
            after.done = True
            wap.spark.sql(f"INSERT INTO {wap.sql} VALUES (50, 'd5', 5.0)")
    monkeypatch.setattr(wap_etl, "fault_point", after)
    code, report = wap.run([{"id": 10, "day": "d1", "amount": 10.0}], checks=POSITIVE,
                           mode="overwrite_partitions")
    assert code == 0 and report.rebases == 1
    assert wap.ids() == [3, 10, 50]


def test_schema_evolution_add_columns_adds_nullable_columns(wap):
    assert wap.run(DAY1, checks=[])[0] == 0
    code, report = wap.run([{"id": 4, "day": "d4", "amount": 4.0, "channel": "web"}], checks=[],
                           schema_evolution="add_columns")
    assert code == 0
    rows = by_id(wap)
    assert rows[4]["channel"] == "web" and rows[1]["channel"] is None


def test_schema_evolution_fail_is_the_default(wap):
    assert wap.run(DAY1, checks=[])[0] == 0
    code, report = wap.run([{"id": 4, "day": "d4", "amount": 4.0, "channel": "web"}], checks=[])
    assert code == 2 and "channel" in report.error and "add_columns" in report.error


class Crash(Exception):
    pass


@pytest.mark.parametrize("mode", ["overwrite_partitions", "merge"])
def test_crash_after_write_resumes_without_rewriting_in_every_mode(wap, monkeypatch, mode):
    assert wap.run(DAY1, checks=POSITIVE, partition_by="day")[0] == 0
    path = wap.csv([{"id": 2, "day": "d1", "amount": 20.0}])
    params = {"mode": mode, "checks": POSITIVE}
    if mode == "merge":
        params["merge_keys"] = "id"

    def crash(step):
        if step == "write":
            raise Crash("killed after the write")
    monkeypatch.setattr(wap_etl, "fault_point", crash)
    code, first = wap.run(path, **params)
    assert code == 1 and wap.refs()["main"] == first.main_snapshot_before
    staged = wap.refs()[first.branch]
    monkeypatch.setattr(wap_etl, "fault_point", lambda step: None)
    code, report = wap.run(path, **params)
    assert code == 0 and report.status == "published" and report.staged_snapshot == staged
    assert {r["id"]: r["amount"] for r in wap.rows()}[2] == 20.0


def changed_after_prepare(monkeypatch, wap, sql):
    """Another actor changes the table after this run planned and prepared it, before its write."""
    real = wap_etl.prepare_table

    def then_changed(*args):
        real(*args)
        wap.spark.sql(sql.format(table=wap.sql))
    monkeypatch.setattr(wap_etl, "prepare_table", then_changed)


def test_a_column_dropped_and_added_again_before_the_publish_is_staged_again_with_its_values(wap, spark,
                                                                                              monkeypatch):
    assert wap.run(DAY1, checks=POSITIVE)[0] == 0
    replaced = []

    def column_replaced_once(step):  # after the audit, before the publish; main does not move
        if step == "audit" and not replaced:
            replaced.append(spark.sql(f"ALTER TABLE {wap.sql} DROP COLUMN amount"))
            spark.sql(f"ALTER TABLE {wap.sql} ADD COLUMN amount double")
    monkeypatch.setattr(wap_etl, "fault_point", column_replaced_once)
    code, report = wap.run([{"id": 10, "day": "d3", "amount": 10.0}], checks=[])
    assert code == 0, report.error
    assert by_id(wap)[10]["amount"] == 10.0, "the batch's values, not the dropped column's"


def at_steps_once(spark, wap, **sql):
    """A fault hook: at each named step, the first time, run its SQL on the table."""
    def hook(step):
        for statement in sql.pop(step, []):
            spark.sql(statement.format(table=wap.sql))
    return hook


def test_a_column_replaced_while_a_rebase_waits_is_staged_again_with_its_values(wap, spark, monkeypatch):
    assert wap.run(DAY1, checks=POSITIVE)[0] == 0
    monkeypatch.setattr(wap_etl, "fault_point", at_steps_once(
        spark, wap, audit=["INSERT INTO {table} VALUES (50, 'd9', 5.0)"],  # main moves: a rebase
        decided=["ALTER TABLE {table} DROP COLUMN amount", "ALTER TABLE {table} ADD COLUMN amount double"]))
    code, report = wap.run([{"id": 10, "day": "d3", "amount": 10.0}], checks=[])
    assert code == 0, report.error
    assert by_id(wap)[10]["amount"] == 10.0, "the rebased files' values, read as NULL, were not published"


def test_a_nested_field_replaced_before_the_publish_is_staged_again_with_its_values(wap, spark, monkeypatch, tmp_path):
    paths = [str(tmp_path / name) for name in ("n1", "n2")]
    for k, path in enumerate(paths):
        spark.createDataFrame([(k, (k, 10 + k))], "id int, info struct<a:int,b:int>").write.parquet(path)
    assert wap.run(paths[0], checks=[], source_format="parquet")[0] == 0
    monkeypatch.setattr(wap_etl, "fault_point", at_steps_once(
        spark, wap, audit=["ALTER TABLE {table} DROP COLUMN info.b", "ALTER TABLE {table} ADD COLUMN info.b int"]))
    code, report = wap.run(paths[1], checks=[], source_format="parquet")
    assert code == 0, report.error
    assert {r["id"]: r["info"]["b"] for r in wap.rows()}[1] == 11, "the batch's value, not NULL"


def test_a_column_renamed_before_the_publish_is_published_as_it_is(wap, spark, monkeypatch):
    assert wap.run(DAY1, checks=POSITIVE)[0] == 0
    monkeypatch.setattr(wap_etl, "fault_point", at_steps_once(
        spark, wap, audit=["ALTER TABLE {table} RENAME COLUMN amount TO price"]))
    code, report = wap.run([{"id": 10, "day": "d3", "amount": 10.0}], checks=[])
    assert code == 0 and report.rebases == 0, report.error
    assert by_id(wap)[10]["price"] == 10.0


def test_a_column_dropped_before_the_publish_ends_the_run_with_nothing_published(wap, spark, monkeypatch):
    assert wap.run(DAY1, checks=POSITIVE)[0] == 0
    monkeypatch.setattr(wap_etl, "fault_point", at_steps_once(
        spark, wap, audit=["ALTER TABLE {table} DROP COLUMN amount"]))
    code, report = wap.run([{"id": 10, "day": "d3", "amount": 10.0}], checks=[])
    assert code == 1 and "'amount' was dropped" in report.error, report.error
    assert sorted(by_id(wap)) == [1, 2, 3]


@pytest.mark.parametrize("change", ["DROP PARTITION FIELD day", "REPLACE PARTITION FIELD day WITH truncate(10, day)"])
def test_a_partition_spec_changed_just_before_an_overwrite_partitions_write_replaces_only_the_batchs_partitions(
        wap, spark, monkeypatch, change):
    """After the last look at the spec, before the write: the write keeps to the spec it was
    approved by, so the batch's partitions are replaced, no more (an unpartitioned spec would have
    replaced the whole table) and no less (another spec would have kept the old files beside)."""
    assert wap.run(DAY1, checks=POSITIVE, partition_by="day")[0] == 0
    monkeypatch.setattr(wap_etl, "fault_point", at_steps_once(
        spark, wap, before_write=["ALTER TABLE {table} " + change]))
    code, report = wap.run([{"id": 10, "day": "d1", "amount": 10.0}], checks=POSITIVE, mode="overwrite_partitions")
    assert code == 0 and report.rows_deleted == 2, report.error
    assert wap.ids() == [3, 10]


def test_wap_turned_off_during_a_run_writes_nothing_to_main(wap, monkeypatch):
    assert wap.run(DAY1, checks=POSITIVE)[0] == 0
    main = wap.refs()["main"]
    snapshots = wap.spark.sql(f"SELECT count(*) FROM {wap.sql}.snapshots").first()[0]
    changed_after_prepare(monkeypatch, wap, "ALTER TABLE {table} SET TBLPROPERTIES ('write.wap.enabled'='false')")
    code, report = wap.run([{"id": 9, "day": "d3", "amount": 9.0}], checks=POSITIVE)
    assert code == wap_etl.EXIT_ERROR and "write.wap.enabled is not true" in report.error
    assert wap.refs() == {"main": main} and wap.ids() == [1, 2, 3]
    assert wap.spark.sql(f"SELECT count(*) FROM {wap.sql}.snapshots").first()[0] == snapshots, "no write at all"


def test_a_table_made_unpartitioned_during_an_overwrite_partitions_run_loses_no_partition(wap, monkeypatch):
    assert wap.run(DAY1, checks=POSITIVE, partition_by="day")[0] == 0
    changed_after_prepare(monkeypatch, wap, "ALTER TABLE {table} DROP PARTITION FIELD day")
    code, report = wap.run([{"id": 10, "day": "d1", "amount": 10.0}], checks=POSITIVE,
                           mode="overwrite_partitions")
    assert code == wap_etl.EXIT_ERROR and "made unpartitioned" in report.error
    assert wap.ids() == [1, 2, 3], "partition d2 must survive"


def test_a_merge_after_a_column_rename_audits_only_the_rows_it_changed(wap, spark):
    """A copy-on-write merge rewrites whole files: the rows it carried over unchanged are no rows of
    the batch's, whatever the table's schema became since they were written (a rename)."""
    assert wap.run([{"id": i, "amount": float(i), "note": None if i == 1 else "x"} for i in range(1, 6)],
                   checks=[])[0] == 0
    spark.sql(f"ALTER TABLE {wap.sql} RENAME COLUMN amount TO price")
    code, report = wap.run([{"id": 2, "price": 20.0, "note": "y"}], checks=[{"check": "not_null", "column": "note"}],
                           mode="merge", merge_keys="id")
    assert code == 0 and report.rows_written == 1, report.error


def test_a_merge_on_read_merge_audits_the_rows_it_wrote(wap, spark):
    """Merge-on-read: the merge writes delete files, which Iceberg's changelog does not read; the
    rows of the data files it added are its own, and they are audited."""
    assert wap.run([{"id": i, "amount": float(i)} for i in range(1, 6)], checks=[])[0] == 0
    spark.sql(f"ALTER TABLE {wap.sql} SET TBLPROPERTIES ('write.merge.mode'='merge-on-read')")
    code, report = wap.run([{"id": 2, "amount": None}, {"id": 9, "amount": 9.0}],
                           checks=[{"check": "not_null", "column": "amount"}], mode="merge", merge_keys="id")
    assert code == wap_etl.EXIT_AUDIT_FAILED and report.rows_written == 2, report.error
    assert wap.ids() == [1, 2, 3, 4, 5]


def test_a_copy_on_write_merge_on_a_table_with_delete_files_audits_only_the_rows_it_changed(wap, spark):
    """Iceberg's changelog refuses a table with any live delete file (another engine's merge-on-read
    DELETE); a copy-on-write merge there still audits its own rows, not those it carried over."""
    assert wap.run([{"id": i, "amount": float(i), "note": None if i == 1 else "x"} for i in range(1, 6)],
                   checks=[])[0] == 0
    spark.sql(f"ALTER TABLE {wap.sql} SET TBLPROPERTIES ('write.delete.mode'='merge-on-read')")
    spark.sql(f"DELETE FROM {wap.sql} WHERE id = 5")
    spark.sql(f"ALTER TABLE {wap.sql} SET TBLPROPERTIES ('write.delete.mode'='copy-on-write')")
    code, report = wap.run([{"id": 2, "amount": 20.0, "note": "y"}], checks=[{"check": "not_null", "column": "note"}],
                           mode="merge", merge_keys="id")
    assert code == 0 and report.rows_written == 1, report.error


def test_a_row_a_merge_wrote_with_a_null_key_is_audited(wap, monkeypatch, tmp_path):
    """The batch evaluated for the MERGE gave key 7 a NULL (a transform that is not a function of
    its input), which no merge key matches: the MERGE inserts the row, and the audit judges it."""
    flag = str(tmp_path / "null_key")

    def null_key_when_flagged(df):
        from pyspark.sql import functions as F
        flagged = F.udf(lambda: os.path.exists(flag), "boolean")
        return df.withColumn("id", F.when(flagged() & (F.col("id") == 7), F.lit(None)).otherwise(F.col("id")))
    assert wap.run(DAY1, checks=[])[0] == 0
    monkeypatch.setattr(wap_etl, "transform", null_key_when_flagged)
    monkeypatch.setattr(wap_etl, "fault_point", lambda step: step == "before_write" and open(flag, "w").close())
    code, report = wap.run([{"id": 6, "day": "d6", "amount": 6.0}, {"id": 7, "day": "d7", "amount": None}],
                           checks=[{"check": "not_null", "column": "amount"}], mode="merge", merge_keys="id")
    assert code == wap_etl.EXIT_AUDIT_FAILED, report.error
    assert wap.ids() == [1, 2, 3]


def test_a_struct_the_batch_declares_without_nulls_goes_into_the_tables_nullable_one(wap, spark, monkeypatch, tmp_path):
    """A transform building a struct from literals makes its fields non-NULL: the table's nullable
    struct takes it (the same shape, NULLs allowed where the table allows them)."""
    from pyspark.sql import functions as F
    path = str(tmp_path / "s1")
    spark.createDataFrame([(1, (5, [1], {"k": 1}))], "id int, s struct<x:int,a:array<int>,m:map<string,int>>").write.parquet(path)
    assert wap.run(path, checks=[], source_format="parquet")[0] == 0
    monkeypatch.setattr(wap_etl, "transform", lambda df: df.withColumn("s", F.struct(
        F.lit(7).alias("x"), F.array(F.lit(2)).alias("a"), F.create_map(F.lit("k"), F.lit(2)).alias("m"))))
    code, report = wap.run([{"id": 2}], checks=[])
    assert code == 0, report.error
    assert {r["id"]: r["s"]["x"] for r in wap.rows()} == {1: 5, 2: 7}


def test_a_narrower_decimal_or_a_whole_number_goes_into_a_decimal_column_with_room_for_every_digit(wap, spark, tmp_path):
    from decimal import Decimal
    first, second, third = (str(tmp_path / n) for n in ("d1", "d2", "d3"))
    spark.createDataFrame([(1, Decimal("1.50"))], "id int, amount decimal(12,2)").write.parquet(first)
    spark.createDataFrame([(2, Decimal("99999999.99"))], "id int, amount decimal(10,2)").write.parquet(second)
    spark.createDataFrame([(3, 2147483647)], "id int, amount int").write.parquet(third)
    assert wap.run(first, checks=[], source_format="parquet")[0] == 0
    for path in (second, third):
        code, report = wap.run(path, checks=[], source_format="parquet")
        assert code == 0, report.error
    assert {r["id"]: r["amount"] for r in wap.rows()} == {1: Decimal("1.50"), 2: Decimal("99999999.99"),
                                                          3: Decimal("2147483647.00")}
    spark.createDataFrame([(4, Decimal("1.125"))], "id int, amount decimal(10,3)").write.parquet(str(tmp_path / "d4"))
    code, report = wap.run(str(tmp_path / "d4"), checks=[], source_format="parquet")
    assert code == 2 and "decimal(10,3) in the batch but decimal(12,2)" in report.error, report.error
