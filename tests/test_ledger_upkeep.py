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


def test_a_process_killed_right_after_the_ledger_compaction_loses_no_run(wap, spark):
    import os
    import subprocess
    import sys
    paths = run_batches(wap, 2)
    newest = wap.csv([{"id": 2}])
    # a real process, its compaction threshold lowered, killed once the compaction has committed
    job = ("import sys, wap_etl; wap_etl.LEDGER_MAX_FILES = 2; "
           f"sys.argv = ['wap_etl.py'] + {wap.args(newest, batch_id='b2', checks=[])!r}; wap_etl.main()")
    env = dict(os.environ, WAP_SPARK_MASTER="local[1]", WAP_FAULT_AFTER="ledger_upkeep")
    done = subprocess.run([sys.executable, "-c", job], cwd=os.path.dirname(wap_etl.__file__), env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 137, done.stderr[-2000:]
    assert "killing the process" in done.stderr
    assert wap.ids() == [0, 1, 2], "the killed run had published before its ledger upkeep"
    for i, path in enumerate(paths + [newest]):
        code, report = wap.run(path, batch_id=f"b{i}", checks=[])
        assert code == 0 and report.status == "already_published", (i, report.status, report.error)
    assert wap.ids() == [0, 1, 2]
    runs = spark.table(f"{wap.sql}_wap_runs").filter("status = 'published'").select("batch_id").collect()
    assert sorted({r["batch_id"] for r in runs}) == ["b0", "b1", "b2"]
