"""The run ledger keeps itself cheap to read: its small files are compacted and its old snapshots
expired by the job, and nothing the exactly-once protocol reads is lost."""
import wap_etl


def ledger(spark, wap):
    return wap_etl.iceberg_table(spark, wap_etl.TableRef("local", wap.ns, "orders_wap_runs"))


def run_batches(wap, n):
    """Publish batches b0..b(n-1); returns their source files."""
    paths = []
    for i in range(n):
        paths.append(wap.csv([{"id": i}]))
        code, report = wap.run(paths[-1], batch_id=f"b{i}", checks=[])
        assert code == 0 and report.status == "published", report.error
    return paths


def test_ledger_small_files_are_compacted_keeping_every_run(wap, spark, monkeypatch):
    monkeypatch.setattr(wap_etl, "LEDGER_MAX_FILES", 3)
    run_batches(wap, 4)
    files = int(ledger(spark, wap).currentSnapshot().summary()["total-data-files"])
    assert files < 3, "the ledger's small files were compacted"
    runs = spark.table(f"{wap.sql}_wap_runs").select("batch_id", "status").collect()
    assert sorted(r["batch_id"] for r in runs) == ["b0", "b1", "b2", "b3"]


def test_a_batch_published_before_compaction_is_not_loaded_again(wap, spark, monkeypatch):
    monkeypatch.setattr(wap_etl, "LEDGER_MAX_FILES", 2)
    paths = run_batches(wap, 3)
    code, report = wap.run(paths[0], batch_id="b0", checks=[])
    assert code == 0 and report.status == "already_published"
    assert wap.ids() == [0, 1, 2]


def test_ledger_old_snapshots_are_expired(wap, spark, monkeypatch):
    monkeypatch.setattr(wap_etl, "LEDGER_MAX_SNAPSHOTS", 3)
    monkeypatch.setattr(wap_etl, "LEDGER_KEEP_SNAPSHOTS", 2)
    monkeypatch.setattr(wap_etl, "LEDGER_SNAPSHOT_AGE_S", -60)  # every snapshot counts as old
    run_batches(wap, 4)
    snapshots = ledger(spark, wap).operations().current().snapshots().size()
    assert snapshots <= 3
    assert spark.table(f"{wap.sql}_wap_runs").count() == 4
