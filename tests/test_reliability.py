"""Retries, crashes and concurrent writers never duplicate, lose or half-publish a batch."""
import time
from datetime import datetime, timedelta, timezone

import pytest

import wap_etl

ROWS = [{"id": i, "amount": float(i)} for i in range(1, 6)]
UNIQUE = [{"check": "unique", "columns": ["id"]}, {"check": "not_null", "column": "id"}]


def finish(proc, timeout=300):
    out, _ = proc.communicate(timeout=timeout)
    return proc.returncode, out


def audit_branches(wap):
    return [n for n in wap.refs() if n.startswith("audit_")]


def test_same_input_gets_the_same_batch_id(wap):
    path = wap.csv(ROWS)
    p1 = wap_etl.parse_params(wap.args(path))
    code, first = wap.run(path, checks=UNIQUE)
    assert code == 0 and first.batch_id.startswith("fp-")
    code, again = wap.run(path, checks=UNIQUE)
    assert again.batch_id == first.batch_id and p1.batch_id is None


def test_changed_input_gets_a_new_batch_id(wap):
    path = wap.csv(ROWS, name="day.csv")
    _, first = wap.run(path, checks=UNIQUE)
    time.sleep(0.01)
    wap.csv([{"id": 9, "amount": 9.0}], name="day.csv")
    code, second = wap.run(path, checks=UNIQUE)
    assert code == 0 and second.batch_id != first.batch_id
    assert wap.ids() == [1, 2, 3, 4, 5, 9]


def test_rerun_of_a_published_batch_writes_nothing(wap):
    path = wap.csv(ROWS)
    assert wap.run(path, checks=UNIQUE)[0] == 0
    main = wap.refs()["main"]
    code, report = wap.run(path, checks=UNIQUE)
    assert code == 0 and report.status == "already_published"
    assert wap.refs() == {"main": main} and wap.ids() == [1, 2, 3, 4, 5]


def test_explicit_batch_id_is_published_once(wap):
    path = wap.csv(ROWS)
    assert wap.run(path, checks=[], batch_id="b-7")[0] == 0
    code, report = wap.run(path, checks=[], batch_id="b-7")
    assert code == 0 and report.status == "already_published" and wap.ids() == [1, 2, 3, 4, 5]


def test_explicit_batch_id_reused_with_other_input_exits_2_and_writes_nothing(wap):
    assert wap.run(ROWS, checks=[], batch_id="b-7")[0] == 0
    refs = wap.refs()
    code, report = wap.run([{"id": 6, "amount": 1.0}], checks=[], batch_id="b-7")
    assert code == 2 and "b-7" in report.error
    assert wap.refs() == refs and wap.ids() == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("step", ["write", "audit"])
def test_crash_after_step_then_rerun_publishes_every_row_once(wap, step):
    path = wap.csv(ROWS)
    assert wap.run(wap.csv([{"id": 100, "amount": 1.0}]), checks=UNIQUE)[0] == 0
    code, out = finish(wap.cli(path, env={"WAP_FAULT_AFTER": step}, checks=UNIQUE))
    assert code == 137, out[-2000:]
    branches = audit_branches(wap)
    assert len(branches) == 1, "the killed run leaves its staged branch behind"
    staged = wap.refs()[branches[0]]
    assert wap.ids() == [100], "nothing reached main"
    code, report = wap.run(path, checks=UNIQUE)
    assert code == 0 and report.status == "published"
    assert report.staged_snapshot == staged, "the rerun resumed from the staged snapshot"
    assert wap.ids() == [1, 2, 3, 4, 5, 100]
    assert audit_branches(wap) == []
    assert wap.wap_branch_conf() is None


def test_rerun_with_fixed_input_restages_the_branch(wap):
    bad = wap.csv([{"id": 1, "amount": -1.0}], name="day.csv")
    checks = [{"check": "between", "column": "amount", "min": 0}]
    code, failed = wap.run(bad, checks=checks, batch_id="d1")
    assert code == 3 and wap.ids(failed.branch) == [1]
    wap.csv([{"id": 1, "amount": 1.0}, {"id": 2, "amount": 2.0}], name="day.csv")
    code, report = wap.run(bad, checks=checks, batch_id="d1")
    assert code == 0 and report.status == "published" and report.branch != failed.branch
    assert wap.rows() == [{"id": 1, "amount": 1.0}, {"id": 2, "amount": 2.0}]
    assert audit_branches(wap) == [failed.branch], "the failed run's branch stays for comparison"


def move_main_after_audit(monkeypatch, wap, rows_sql):
    """Simulate a concurrent run: right after our audit, another writer appends to main."""
    def after(step):
        if step == "audit":
            wap.spark.sql(f"INSERT INTO {wap.sql} VALUES {rows_sql}")
    monkeypatch.setattr(wap_etl, "fault_point", after)


def test_concurrent_publish_rebases_onto_the_new_main(wap, monkeypatch):
    assert wap.run([{"id": 0, "amount": 0.0}], checks=UNIQUE)[0] == 0
    move_main_after_audit(monkeypatch, wap, "(50, 5.0)")
    code, report = wap.run(ROWS, checks=UNIQUE)
    assert code == 0 and report.status == "published" and report.rebases == 1
    assert wap.ids() == [0, 1, 2, 3, 4, 5, 50]
    assert audit_branches(wap) == []
    # the concurrent commit is an ancestor of our published snapshot: no lost update
    history = wap.spark.sql(f"SELECT count(*) FROM {wap.sql}.history WHERE is_current_ancestor").first()[0]
    assert history == 3


def test_rebase_rechecks_unique_against_the_new_main(wap, monkeypatch):
    assert wap.run([{"id": 0, "amount": 0.0}], checks=UNIQUE)[0] == 0
    move_main_after_audit(monkeypatch, wap, "(3, 3.0)")
    code, report = wap.run(ROWS, checks=UNIQUE)
    assert code == 3 and report.status == "audit_failed"
    assert report.checks[0]["failing_rows"] == 1 and report.checks[0]["sample"][0]["id"] == 3
    assert wap.ids() == [0, 3]
    assert wap.ids(report.branch) == [0, 1, 2, 3, 3, 4, 5]


@pytest.mark.parametrize("main_moved", [False, True], ids=["publish", "rebase"])
def test_an_audited_snapshot_dropped_and_expired_before_its_publish_fails_the_run_naming_it(
        wap, monkeypatch, main_moved):
    """An operator drops the run's branch as it publishes, and expiry takes the snapshot: there is
    nothing audited left to publish (or rebase), and the run says so."""
    assert wap.run([{"id": 0, "amount": 0.0}], checks=UNIQUE)[0] == 0

    def drop_and_expire(step):
        if step == "audit":
            [branch] = audit_branches(wap)
            wap.spark.sql(f"ALTER TABLE {wap.sql} DROP BRANCH `{branch}`")
            later = (datetime.now(timezone.utc) + timedelta(minutes=1)).strftime("%Y-%m-%d %H:%M:%S")
            wap.spark.sql(f"CALL local.system.expire_snapshots(table => '{wap.table}', "
                          f"older_than => TIMESTAMP '{later}', retain_last => 1)")
            if main_moved:
                wap.spark.sql(f"INSERT INTO {wap.sql} VALUES (50, 5.0)")
    monkeypatch.setattr(wap_etl, "fault_point", drop_and_expire)
    code, report = wap.run(ROWS, checks=UNIQUE)
    assert code == 1 and report.error.startswith("publish: the audited snapshot"), report.error
    assert "is gone" in report.error and report.status == "error"
    assert wap.ids() == ([0, 50] if main_moved else [0]) and audit_branches(wap) == []


def test_publish_gives_up_after_max_retries_and_keeps_the_branch(wap, monkeypatch):
    assert wap.run([{"id": 0, "amount": 0.0}], checks=[])[0] == 0
    move_main_after_audit(monkeypatch, wap, "(50, 5.0)")
    real_rebase = wap_etl.rebase

    def rebase_then_move_main_again(*args):
        staged = real_rebase(*args)
        wap.spark.sql(f"INSERT INTO {wap.sql} VALUES (51, 5.1)")
        return staged

    monkeypatch.setattr(wap_etl, "rebase", rebase_then_move_main_again)
    code, report = wap.run(ROWS, checks=[], max_publish_retries="1")
    assert code == 1 and "gave up after 1 retries" in report.error
    assert 1 not in wap.ids()
    assert wap.ids(report.branch)[:6] == [0, 1, 2, 3, 4, 5]
    assert wap.wap_branch_conf() is None


def test_a_kept_audit_branch_never_ages_out_by_snapshot_expiry(wap, spark):
    """A branch that expiry removes while it expires snapshots can leave main the table's only
    ref, and then Iceberg's Java expiry (1.7.1) cleans files up by the wrong branch's history:
    the job's branches outlast any expiry, even under a table-wide ref age; its runs drop them."""
    code, report = wap.run(ROWS, checks=[], publish="false", branch_retention_days="3")
    assert code == 0 and retention_days(wap, report.branch) == wap_etl.NO_AGE_LIMIT_DAYS
    spark.sql(f"ALTER TABLE {wap.sql} SET TBLPROPERTIES ('history.expire.max-ref-age-ms'='1000')")
    age_the_table(wap, 30)
    expire_snapshots(wap)
    assert audit_branches(wap) == [report.branch]


def test_a_branch_an_earlier_version_made_with_a_retention_gets_the_endless_one(wap, spark):
    assert wap.run([{"id": 0, "amount": 0.0}], checks=[])[0] == 0
    kept = wap.run([{"id": 1, "amount": 1.0}], checks=[], batch_id="old", publish="false")[1]
    spark.sql(f"ALTER TABLE {wap.sql} REPLACE BRANCH {kept.branch} AS OF VERSION {kept.staged_snapshot} "
              "RETAIN 2 DAYS")  # as versions before this one made every branch
    code, report = wap.run(ROWS, checks=[], batch_id="next")
    assert code == 0 and report.status == "published", report.error
    assert retention_days(wap, kept.branch) == wap_etl.NO_AGE_LIMIT_DAYS
    age_the_table(wap, 3)
    expire_snapshots(wap)
    assert audit_branches(wap) == [kept.branch], "past its old 2 days, kept: it is 3 days of 7"


def test_a_branch_left_by_a_run_that_died_before_writing_goes_once_main_moved_on_from_it_long_ago(wap, spark):
    """A run killed between making its branch at main and writing leaves a branch headed by main's
    snapshot and no ledger row. Once main moved on from that snapshot longer ago than any run
    lives, no live run can own it; one at main's head still may."""
    assert wap.run([{"id": 0, "amount": 0.0}], checks=[])[0] == 0
    dead = "audit_next_y_0123abcd"  # (of batch next_y: a run of batch "next" does not spare it)
    spark.sql(f"ALTER TABLE {wap.sql} CREATE BRANCH {dead}")
    assert wap.run([{"id": 1, "amount": 1.0}], checks=[])[0] == 0  # main moves on
    maybe_live = "audit_other_4567cdef"
    spark.sql(f"ALTER TABLE {wap.sql} CREATE BRANCH {maybe_live}")
    age_the_table(wap, 8)
    code, report = wap.run(ROWS[1:], checks=[], batch_id="next")
    assert code == 0 and report.status == "published", report.error
    assert audit_branches(wap) == [maybe_live]


def test_a_branch_at_a_snapshot_main_left_only_now_stays_however_old_the_snapshot_after_it(wap, spark):
    """Main moved off the branch's snapshot by a fast-forward just now, to a snapshot written 8
    days ago: a run may have made the branch until now. The move's time is main's snapshot log's."""
    assert wap.run([{"id": 0, "amount": 0.0}], checks=[])[0] == 0
    staged = wap.run([{"id": 1, "amount": 1.0}], checks=[], batch_id="staged", publish="false")[1].branch
    age_the_table(wap, 8)
    maybe_live = "audit_other_4567cdef"  # a run's, made at main just now, not written to yet
    spark.sql(f"ALTER TABLE {wap.sql} CREATE BRANCH {maybe_live}")
    spark.sql(f"CALL local.system.fast_forward('{wap.table}', 'main', '{staged}')")
    code, report = wap.run(ROWS[1:], checks=[], batch_id="next")
    assert code == 0 and report.status == "published", report.error
    assert maybe_live in audit_branches(wap)


def test_a_branch_resuming_a_snapshot_rolled_back_off_main_stays(wap, spark):
    """A staged snapshot published by hand and rolled back: main left it long ago, but its parent
    is main's snapshot again, so a rerun of its batch may have just made a branch at it to resume it."""
    assert wap.run([{"id": 0, "amount": 0.0}], checks=[])[0] == 0
    main = wap.refs()["main"]
    staged = wap.run([{"id": 1, "amount": 1.0}], checks=[], batch_id="x", publish="false")[1]
    spark.sql(f"CALL local.system.fast_forward('{wap.table}', 'main', '{staged.branch}')")
    spark.sql(f"CALL local.system.rollback_to_snapshot('{wap.table}', {main})")
    age_the_table(wap, 8)
    resuming = "audit_x_89abcdef"  # a rerun of batch x's, made at the staged snapshot just now
    spark.sql(f"ALTER TABLE {wap.sql} CREATE BRANCH {resuming} AS OF VERSION {staged.staged_snapshot}")
    code, report = wap.run(ROWS[1:], checks=[], batch_id="next")
    assert code == 0 and report.status == "published", report.error
    assert audit_branches(wap) == [resuming], "the staged run's own branch went (8 days), not this one"


def test_a_branch_resuming_a_first_snapshot_staged_on_a_replaced_table_stays(wap, spark):
    """REPLACE TABLE empties main but keeps its snapshot log: a snapshot staged on the empty main
    has no parent, and a rerun may resume it for as long as main stays empty."""
    assert wap.run([{"id": 0, "amount": 0.0}], checks=[])[0] == 0
    age_the_table(wap, 10)
    spark.sql(f"CREATE OR REPLACE TABLE {wap.sql} (id BIGINT, amount DOUBLE) USING iceberg")
    staged = wap.run([{"id": 1, "amount": 1.0}], checks=[], batch_id="x", publish="false")[1]
    assert staged.status == "staged", staged.error
    resuming = "audit_x_89abcdef"  # a rerun of batch x's, made at the staged snapshot
    spark.sql(f"ALTER TABLE {wap.sql} CREATE BRANCH {resuming} AS OF VERSION {staged.staged_snapshot}")
    age_the_table(wap, 8)
    code, report = wap.run(ROWS[1:], checks=[], batch_id="y", branch_retention_days="1")
    assert code == 0 and report.status == "published", report.error
    assert audit_branches(wap) == [resuming], "the staged run's own branch went (8 days), not this one"


def test_the_next_run_drops_a_kept_branch_older_than_its_retention(wap):
    assert wap.run([{"id": 0, "amount": 0.0}], checks=[])[0] == 0
    old = wap.run([{"id": 1, "amount": 1.0}], checks=[], batch_id="old", publish="false")[1].branch
    age_the_table(wap, 3)
    young = wap.run([{"id": 2, "amount": 2.0}], checks=[], batch_id="young", publish="false")[1].branch
    assert sorted(audit_branches(wap)) == sorted([old, young]), "3 days: under the default 7"
    code, report = wap.run(ROWS, checks=[], batch_id="next", branch_retention_days="2")
    assert code == 0 and report.status == "published", report.error
    assert audit_branches(wap) == [young], "the 3-day-old kept branch went, the fresh one stayed"
    assert wap.ids() == [0, 1, 2, 3, 4, 5]


def test_a_run_keeps_the_branch_of_a_live_run_made_at_a_main_older_than_its_retention(wap, monkeypatch):
    assert wap.run([{"id": 0, "amount": 0.0}], checks=[])[0] == 0
    age_the_table(wap, 3)  # main's head, where the live run makes its branch, is 3 days old
    seen = {}

    def another_run_while_this_one_waits_to_write(step):
        if step == "before_write" and not seen:
            seen["live"] = audit_branches(wap)
            seen["other"] = wap.run([{"id": 9, "amount": 9.0}], checks=[], batch_id="other",
                                    branch_retention_days="1")
            seen["after"] = audit_branches(wap)
    monkeypatch.setattr(wap_etl, "fault_point", another_run_while_this_one_waits_to_write)
    code, report = wap.run(ROWS, checks=[], batch_id="live", branch_retention_days="1")
    assert seen["other"][0] == 0 and seen["other"][1].status == "published"
    assert seen["after"] == seen["live"] == [report.branch], "no ledger row yet: its run may be live"
    assert code == 0 and report.status == "published", report.error
    assert wap.ids() == [0, 1, 2, 3, 4, 5, 9]


def test_cleanup_drops_only_old_audit_branches(wap, spark, capsys):
    assert wap.run([{"id": 0, "amount": 0.0}], checks=[])[0] == 0
    wap.run(ROWS, checks=[], batch_id="old", publish="false")
    spark.sql(f"ALTER TABLE {wap.sql} CREATE BRANCH keep_me")
    spark.sql(f"ALTER TABLE {wap.sql} CREATE TAG audit_tag")
    time.sleep(4)
    wap.run([{"id": 7, "amount": 7.0}], checks=[], batch_id="new", publish="false")
    heads = dict(spark.sql(f"SELECT r.name, s.committed_at FROM {wap.sql}.refs r JOIN {wap.sql}.snapshots s "
                           f"ON r.snapshot_id = s.snapshot_id WHERE r.name LIKE 'audit_%'").collect())
    old_at, new_at = (next(v.timestamp() for k, v in heads.items() if k.startswith(p)) for p in ("audit_old", "audit_new"))
    # an age halfway between the two heads' ages, however slow the machine was to stage "new"
    days = str((time.time() - new_at + (new_at - old_at) / 2) / 86400)
    code, _ = wap_etl.run(["--table", wap.table, "--catalog", "local", "--cleanup_branches_older_than_days", days])
    assert code == 0
    names = sorted(wap.refs())
    assert [n.rsplit("_", 1)[0] if n.startswith("audit_new_") else n for n in names] == [
        "audit_new", "audit_tag", "keep_me", "main"]
    assert "audit_old_" in capsys.readouterr().out


class Crash(Exception):
    pass


def crash_at(at):
    def fault(step):
        if step == at:
            raise Crash(f"killed at {at}")
    return fault


def cleanup(wap, days):
    return wap_etl.run(["--table", wap.table, "--catalog", "local",
                        "--cleanup_branches_older_than_days", f"{days:.8f}"])[0]


def expire_snapshots(wap):
    """Iceberg's own expiry, as Glue's optimizer or an operator runs it: every snapshot older than
    now that no ref keeps; a branch goes once its head is older than its retention."""
    from datetime import datetime, timezone
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    wap.spark.sql(f"CALL local.system.expire_snapshots(table => '{wap.table}', "
                  f"older_than => TIMESTAMP '{now}', retain_last => 1)")


def retention_days(wap, branch):
    age = wap.spark.sql(f"SELECT max_reference_age_in_ms FROM {wap.sql}.refs WHERE name = '{branch}'").first()
    return None if age is None or age[0] is None else age[0] / 86_400_000


def age_the_table(wap, days):
    from conftest import age_table
    age_table(wap.spark, wap_etl.TableRef("local", wap.ns, "orders"), days)


def test_cleanup_keeps_the_branch_of_a_run_that_has_not_written_yet(wap, monkeypatch, capsys):
    assert wap.run([{"id": 0, "amount": 0.0}], checks=[])[0] == 0
    monkeypatch.setattr(wap_etl, "fault_point", crash_at("before_write"))
    code, ended = wap.run([{"id": 9, "amount": 9.0}], checks=[])  # its ledger row says it ended
    assert code == 1 and ended.branch in audit_branches(wap)
    time.sleep(1.5)  # main's head, where both branches were made, is older than the cleanup's limit
    seen = {}

    def cleanup_while_the_run_waits_to_write(step):
        if step == "before_write":
            seen["cleanup"] = cleanup(wap, 1 / 86400)
            seen["after"] = audit_branches(wap)
    monkeypatch.setattr(wap_etl, "fault_point", cleanup_while_the_run_waits_to_write)
    code, report = wap.run(ROWS, checks=[])
    assert seen == {"cleanup": 0, "after": [report.branch]}, "the ended run's branch went, the live one's stayed"
    assert f"may still be running (no ledger row yet):\n  {report.branch}" in capsys.readouterr().out
    assert code == 0 and report.status == "published" and wap.ids() == [0, 1, 2, 3, 4, 5]


def test_cleanup_and_expiry_under_a_resumed_run_leave_it_its_audited_snapshot(wap, monkeypatch):
    assert wap.run([{"id": 0, "amount": 0.0}], checks=[])[0] == 0
    path = wap.csv(ROWS)
    monkeypatch.setattr(wap_etl, "fault_point", crash_at("audit"))
    code, crashed = wap.run(path, checks=[], batch_id="b1")
    assert code == 1
    survived = []

    def maintenance_while_the_resumed_run_publishes(step):
        if step == "audit":
            cleanup(wap, 0)  # the crashed run's branch goes: its head is its own, old
            expire_snapshots(wap)  # the staged snapshot is kept only by the resumed run's branch
            survived.extend(audit_branches(wap))
    monkeypatch.setattr(wap_etl, "fault_point", maintenance_while_the_resumed_run_publishes)
    code, report = wap.run(path, checks=[], batch_id="b1")
    assert survived == [report.branch]
    assert code == 0 and report.status == "published", report.error
    assert report.staged_snapshot == crashed.staged_snapshot == wap.refs()["main"]
    assert wap.ids() == [0, 1, 2, 3, 4, 5]


def test_a_branch_made_at_a_main_older_than_its_retention_outlives_snapshot_expiry(wap, monkeypatch):
    assert wap.run([{"id": 0, "amount": 0.0}], checks=[])[0] == 0
    age_the_table(wap, 3)  # main was last written three days ago
    seen = {}

    def expiry_before_the_write(step):
        branch = next(iter(audit_branches(wap)), None)
        if step == "before_write":
            seen["made with"] = retention_days(wap, branch)
            expire_snapshots(wap)  # a branch aged by its 3-day-old head would go
            seen["after expiry"] = audit_branches(wap)
        if step == "audit":
            seen["after the write"] = retention_days(wap, branch)
    monkeypatch.setattr(wap_etl, "fault_point", expiry_before_the_write)
    code, report = wap.run(ROWS, checks=[], branch_retention_days="1")
    assert seen["after expiry"] == [report.branch]
    assert seen["made with"] == seen["after the write"] == wap_etl.NO_AGE_LIMIT_DAYS, "never ages out"
    assert code == 0 and report.status == "published" and wap.ids() == [0, 1, 2, 3, 4, 5]


def test_a_resumed_branch_at_a_snapshot_older_than_its_retention_outlives_snapshot_expiry(wap, monkeypatch):
    assert wap.run([{"id": 0, "amount": 0.0}], checks=[])[0] == 0
    path = wap.csv(ROWS)
    monkeypatch.setattr(wap_etl, "fault_point", crash_at("audit"))
    code, crashed = wap.run(path, checks=[], batch_id="b1", branch_retention_days="1")
    assert code == 1
    age_the_table(wap, 3)  # the crashed run staged its snapshot three days ago
    survived = []

    def expiry_while_the_resumed_run_publishes(step):
        if step == "audit":
            expire_snapshots(wap)  # neither branch ages out: both stay, whatever their heads' age
            survived.extend(audit_branches(wap))
    monkeypatch.setattr(wap_etl, "fault_point", expiry_while_the_resumed_run_publishes)
    code, report = wap.run(path, checks=[], batch_id="b1", branch_retention_days="1")
    assert sorted(survived) == sorted([crashed.branch, report.branch])
    assert code == 0 and report.status == "published", report.error
    assert report.staged_snapshot == crashed.staged_snapshot == wap.refs()["main"]
    assert wap.ids() == [0, 1, 2, 3, 4, 5]
    assert audit_branches(wap) == [], "the publish drops every branch of its batch"


def test_corrupt_source_file_exits_1_and_leaves_nothing(wap, spark, tmp_path):
    assert wap.run([{"id": 0, "amount": 0.0}], checks=[])[0] == 0
    refs = wap.refs()
    folder = tmp_path / "parquet"
    spark.createDataFrame([(1, 1.0)], "id int, amount double").write.parquet(str(folder))
    (folder / "part-99999-corrupt.parquet").write_bytes(b"PAR1 this is not parquet at all PAR1")
    code, report = wap.run(str(folder), checks=[])
    assert code == 1 and report.status == "error"
    assert wap.refs() == refs and wap.ids() == [0]
    assert wap.wap_branch_conf() is None


def test_malformed_csv_value_fails_the_run_instead_of_becoming_null(wap):
    assert wap.run(ROWS, checks=[])[0] == 0
    code, report = wap.run(wap.csv([{"id": 6, "amount": 1.0}, {"id": "seven", "amount": 2.0}]), checks=[])
    assert code == 2 and "seven" in report.error and "line 3" in report.error
    assert wap.ids() == [1, 2, 3, 4, 5] and audit_branches(wap) == []


def test_batch_missing_a_required_column_exits_2(wap, spark):
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS local.{wap.ns}")
    spark.sql(f"CREATE TABLE {wap.sql} (id int NOT NULL, amount double) USING iceberg")
    code, report = wap.run([{"amount": 1.0}], checks=[])
    assert code == 2 and "required column 'id'" in report.error
    assert wap.refs() == {}


def test_cleanup_keeps_the_branch_of_a_run_that_wrote_and_is_still_auditing(wap, monkeypatch, capsys):
    assert wap.run([{"id": 0, "amount": 0.0}], checks=[])[0] == 0
    kept = []

    def cleanup_while_auditing(step):  # the branch is headed by this run's own, fresh snapshot
        if step == "audit" and not kept:
            time.sleep(1.1)
            kept.append(cleanup(wap, 1 / 86400))  # one second: older than that, were the run over
            kept.append(sorted(n for n in wap.refs() if n.startswith("audit_")))
    monkeypatch.setattr(wap_etl, "fault_point", cleanup_while_auditing)
    code, report = wap.run(ROWS, checks=[])
    assert kept[0] == 0 and kept[1] == [report.branch], "the live run's branch survived the clean-up"
    assert code == 0 and report.status == "published", report.error
    assert "may still be running" in capsys.readouterr().out


def test_a_commit_refused_for_a_clock_behind_the_tables_last_says_so_and_main_is_unchanged(wap):
    """Iceberg refuses a commit timed more than a minute before the table's last (made by a machine
    whose clock is ahead): the run exits 1 naming the clocks, and main keeps its rows."""
    assert wap.run([{"id": 1, "amount": 1.0}], checks=[])[0] == 0
    age_the_table(wap, -5 / 1440)  # the last commit as a clock five minutes ahead made it
    code, report = wap.run([{"id": 2, "amount": 2.0}], checks=[])
    assert code == 1 and "clock is more than a minute behind" in report.error, report.error
    assert wap.ids() == [1]


@pytest.mark.parametrize("added", [False, True])
def test_a_crashed_run_that_made_a_column_is_resumed_though_iceberg_stored_another_type(wap, spark, monkeypatch,
                                                                                     tmp_path, added):
    """Iceberg stores the batch's tinyint as an int (in a new table, or a column added to one): the
    checks are fitted to the int on the first run as on its rerun (the same config), so the rerun
    takes up the staged snapshot."""
    if added:
        assert wap.run([{"id": 0}], checks=[])[0] == 0
    path = str(tmp_path / "t")
    spark.createDataFrame([(1, 1)], "id int, t tinyint").coalesce(1).write.parquet(path)
    checks = [{"check": "accepted_values", "column": "t", "values": [1, 300]}]
    monkeypatch.setattr(wap_etl, "fault_point", crash_at("write"))
    assert wap.run(path, checks=checks, source_format="parquet", schema_evolution="add_columns")[0] == 1
    staged = wap.refs()[audit_branches(wap)[0]]
    monkeypatch.setattr(wap_etl, "fault_point", lambda step: None)
    code, report = wap.run(path, checks=checks, source_format="parquet", schema_evolution="add_columns")
    assert code == 0 and report.staged_snapshot == staged, (report.error, report.staged_snapshot, staged)
