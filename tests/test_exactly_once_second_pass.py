"""Exactly-once, second pass: a publish is remembered through crashes and snapshot expiry, a
table is one table under any alias, what main no longer holds was not published, and a batch
id names one input. Crashes are real processes killed with WAP_FAULT_AFTER."""
import logging
import os
from datetime import datetime, timedelta, timezone

import pytest

import wap_etl
from conftest import session_conf, write_csv

ROWS = [{"id": i, "amount": float(i)} for i in range(1, 6)]
UNIQUE = [{"check": "unique", "columns": ["id"]}, {"check": "not_null", "column": "id"}]


def expire_all_but_the_last(spark, wap):
    later = (datetime.now(timezone.utc) + timedelta(minutes=1)).strftime("%Y-%m-%d %H:%M:%S")
    spark.sql(f"CALL local.system.expire_snapshots(table => '{wap.table}', "
              f"older_than => TIMESTAMP '{later}', retain_last => 1)")


def killed_after_the_publish(wap, path, **params):
    """Run the batch as a real process killed right after its compare-and-swap moved main."""
    proc = wap.cli(path, env={"WAP_FAULT_AFTER": "publish"}, checks=UNIQUE, **params)
    out, _ = proc.communicate(timeout=400)
    assert proc.returncode == 137, out[-3000:]
    return out


def wap_off_then_killed_before_the_guard(spark, wap):
    """A fault hook: WAP turned off just before the write, the run killed right after it."""
    def hook(step):
        if step == "before_write":
            spark.sql(f"ALTER TABLE {wap.sql} SET TBLPROPERTIES ('write.wap.enabled'='false')")
        if step == "write":
            raise RuntimeError("killed before the guard")
    return hook


def published_runs(spark, wap):
    if not spark.catalog.tableExists(f"{wap.sql}_wap_runs"):
        return []
    return [r for r in spark.table(f"{wap.sql}_wap_runs").collect() if r["status"] == "published"]


def test_a_publish_killed_before_its_ledger_row_is_never_published_twice_after_expiry(wap, spark):
    assert wap.run([{"id": 0, "amount": 0.0}], checks=UNIQUE)[0] == 0
    path = wap.csv(ROWS)
    killed_after_the_publish(wap, path)
    assert wap.ids() == [0, 1, 2, 3, 4, 5] and len(published_runs(spark, wap)) == 1
    assert wap.run([{"id": 50, "amount": 5.0}], checks=UNIQUE)[0] == 0  # another batch on top
    expire_all_but_the_last(spark, wap)
    assert spark.table(f"{wap.sql}.snapshots").count() == 1
    code, retry = wap.run(path, checks=UNIQUE)  # the scheduler retries the killed run
    assert code == 0 and retry.status == "already_published", retry.error
    assert wap.ids() == [0, 1, 2, 3, 4, 5, 50]


def test_a_publish_killed_before_its_ledger_row_survives_another_engines_commit_and_expiry(wap, spark):
    assert wap.run([{"id": 0, "amount": 0.0}], checks=UNIQUE)[0] == 0
    path = wap.csv(ROWS)
    killed_after_the_publish(wap, path)
    spark.sql(f"INSERT INTO {wap.sql} VALUES (60, 6.0)")  # not this job: nothing recorded
    expire_all_but_the_last(spark, wap)
    code, retry = wap.run(path, checks=UNIQUE)
    assert code == 0 and retry.status == "already_published", retry.error
    assert wap.ids() == [0, 1, 2, 3, 4, 5, 60]
    killed = [r for r in published_runs(spark, wap) if r["batch_id"] == retry.batch_id]
    assert len(killed) == 1 and killed[0]["run_id"] != retry.run_id, "the found publish is recorded"


def test_the_same_table_under_another_catalog_alias_is_the_same_table(wap, spark, warehouse):
    path = wap.csv(ROWS)
    assert wap.run(path, checks=UNIQUE)[0] == 0
    with session_conf(spark, {f"spark.sql.catalog.other{key}": value for key, value in {
            "": "org.apache.iceberg.spark.SparkCatalog", ".type": "hadoop", ".warehouse": warehouse,
            ".cache-enabled": "false"}.items()}):
        code, again = wap.run(path, checks=UNIQUE, catalog="other")
    assert code == 0 and again.status == "already_published", again.error
    assert wap.ids() == [1, 2, 3, 4, 5]


def test_s3a_and_s3_spellings_of_one_object_are_one_input(monkeypatch):
    import boto3
    from moto import mock_aws
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(key, value)
    with mock_aws():
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket="landing")
        s3.put_object(Bucket="landing", Key="orders/day1.csv", Body=b"id\n1\n")
        a = wap_etl.identify_input(None, ["s3a://landing/orders/day1.csv"])
        b = wap_etl.identify_input(None, ["s3://landing/orders/day1.csv"])
        s3.put_object(Bucket="landing", Key="orders/day1.csv", Body=b"id\n2\n")
        changed = wap_etl.identify_input(None, ["s3://landing/orders/day1.csv"])
    assert a == b and a.paths == ["s3://landing/orders/day1.csv"]
    assert changed.fingerprint != a.fingerprint, "other content is other input"


def test_a_rolled_back_batch_is_published_again_after_its_snapshot_expired(wap, spark):
    assert wap.run([{"id": 0, "amount": 0.0}], checks=UNIQUE)[0] == 0
    before = wap.refs()["main"]
    code, bad = wap.run(ROWS, checks=UNIQUE, batch_id="d1")
    assert code == 0
    spark.sql(f"CALL local.system.rollback_to_snapshot('{wap.table}', {before})")
    assert wap.run([{"id": 70, "amount": 7.0}], checks=UNIQUE)[0] == 0  # main moves on
    expire_all_but_the_last(spark, wap)
    assert spark.table(f"{wap.sql}.snapshots").filter(f"snapshot_id = {bad.main_snapshot_after}").count() == 0
    corrected = [{"id": i, "amount": float(i) * 10} for i in range(1, 6)]
    code, report = wap.run(corrected, checks=UNIQUE, batch_id="d1")
    assert code == 0 and report.status == "published", report.error
    assert wap.ids() == [0, 1, 2, 3, 4, 5, 70] and wap.rows()[1]["amount"] == 10.0


def test_new_files_of_a_rolled_back_publish_are_new_again_after_expiry(wap, spark, tmp_path):
    folder = tmp_path / "incoming"
    write_csv(folder / "day0.csv", [{"id": 0, "amount": 0.0}])
    assert wap.run(str(folder), checks=UNIQUE, source_files="new", source_format="csv")[0] == 0
    before = wap.refs()["main"]
    write_csv(folder / "day1.csv", [{"id": 1, "amount": 1.0}])
    assert wap.run(str(folder), checks=UNIQUE, source_files="new", source_format="csv")[0] == 0
    spark.sql(f"CALL local.system.rollback_to_snapshot('{wap.table}', {before})")
    expire_all_but_the_last(spark, wap)
    code, report = wap.run(str(folder), checks=UNIQUE, source_files="new", source_format="csv")
    assert code == 0 and report.status == "published", report.error
    assert [os.path.basename(f) for f in report.input_files] == ["day1.csv"]
    assert wap.ids() == [0, 1]


def test_new_files_of_two_publishes_rolled_back_in_a_row_are_new_again_after_expiry(wap, spark, tmp_path):
    folder = tmp_path / "incoming"
    write_csv(folder / "day0.csv", [{"id": 0, "amount": 0.0}])
    assert wap.run(str(folder), checks=UNIQUE, source_files="new", source_format="csv")[0] == 0
    spark.sql(f"INSERT INTO {wap.sql} VALUES (60, 6.0)")  # not this job: where the rollback goes
    before = wap.refs()["main"]
    for day in (1, 2):
        write_csv(folder / f"day{day}.csv", [{"id": day, "amount": float(day)}])
        assert wap.run(str(folder), checks=UNIQUE, source_files="new", source_format="csv")[0] == 0
    spark.sql(f"CALL local.system.rollback_to_snapshot('{wap.table}', {before})")
    spark.sql(f"INSERT INTO {wap.sql} VALUES (70, 7.0)")  # main moves on; the walk stops where 60 was
    expire_all_but_the_last(spark, wap)
    code, report = wap.run(str(folder), checks=UNIQUE, source_files="new", source_format="csv")
    assert code == 0 and report.status == "published", report.error
    assert sorted(os.path.basename(f) for f in report.input_files) == ["day1.csv", "day2.csv"]
    assert wap.ids() == [0, 1, 2, 60, 70]


def test_a_reused_batch_id_with_other_input_exits_2_naming_both_inputs(wap, spark):
    first = wap.csv(ROWS, name="day1.csv")
    assert wap.run(first, checks=UNIQUE, batch_id="2024-06-01")[0] == 0
    main = wap.refs()
    other = wap.csv([{"id": 9, "amount": 9.0}], name="day2.csv")
    code, report = wap.run(other, checks=UNIQUE, batch_id="2024-06-01")
    assert code == 2 and report.status == "error"
    assert "2024-06-01" in report.error and "day1.csv" in report.error and "day2.csv" in report.error
    assert wap.refs() == main and wap.ids() == [1, 2, 3, 4, 5], "nothing written"


def test_an_identical_reupload_with_a_new_modification_time_is_already_published(wap):
    path = wap.csv(ROWS, name="day1.csv")
    assert wap.run(path, checks=UNIQUE, batch_id="2024-06-01")[0] == 0
    content = open(path, "rb").read()
    os.remove(path)
    with open(path, "wb") as f:
        f.write(content)
    os.utime(path, (1_900_000_000, 1_900_000_000))
    for batch_id in ("2024-06-01", None):  # named, and derived from the input
        code, report = wap.run(path, checks=UNIQUE, batch_id=batch_id)
        assert code == 0 and report.status == "already_published", report.error
    assert wap.ids() == [1, 2, 3, 4, 5]


def test_an_all_run_never_reloads_files_that_new_runs_loaded(wap, tmp_path):
    folder = tmp_path / "incoming"
    for day in range(2):
        write_csv(folder / f"day{day}.csv", [{"id": day, "amount": float(day)}])
        assert wap.run(str(folder), checks=UNIQUE, source_files="new", source_format="csv")[0] == 0
    main = wap.refs()
    code, report = wap.run(str(folder), checks=UNIQUE, source_format="csv")  # both files again
    assert code == 0 and report.status == "already_published", report.error
    write_csv(folder / "day2.csv", [{"id": 2, "amount": 2.0}])
    code, report = wap.run(str(folder), checks=UNIQUE, source_format="csv")  # two loaded, one not
    assert code == 2 and "2 of the batch's 3 files are already on main" in report.error
    assert "day0.csv" in report.error
    assert wap.refs() == main and wap.ids() == [0, 1]


def test_a_new_run_never_reloads_files_an_all_run_loaded(wap, tmp_path):
    folder = tmp_path / "incoming"
    write_csv(folder / "day0.csv", [{"id": 0, "amount": 0.0}])
    assert wap.run(str(folder), checks=UNIQUE, source_format="csv")[0] == 0
    code, report = wap.run(str(folder), checks=UNIQUE, source_files="new", source_format="csv")
    assert code == 0 and report.status == "nothing_to_publish"
    assert wap.ids() == [0]


@pytest.mark.parametrize("where", ["ledger", "property"])
def test_every_publish_records_what_it_consumed_whichever_mode(wap, spark, where):
    path = wap.csv(ROWS)
    code, report = wap.run(path, checks=UNIQUE)
    assert code == 0
    t = wap_etl.iceberg_table(spark, wap_etl.TableRef("local", wap.ns, "orders"))
    if where == "ledger":
        row, = spark.table(f"{wap.sql}_wap_runs").collect()
        files, ids = row["input_files"], row["input_file_ids"]
        assert row["table_uuid"] == str(t.uuid().toString())
    else:
        summary = t.snapshot(report.main_snapshot_after).summary()
        files = wap_etl.json.loads(summary.get("wap.input_files"))
        ids = wap_etl.json.loads(summary.get("wap.input_file_ids"))
        last = wap_etl.last_publish(t)
        assert (last.run_id, last.snapshot_id) == (report.run_id, report.main_snapshot_after)
        assert (list(last.input_files), list(last.file_ids)) == (files, ids)
    assert files == [f"file://{path}"] and len(ids) == 1


def test_a_batch_whose_rows_were_all_quarantined_is_consumed_once_and_alerts(wap, spark, tmp_path):
    import http.server
    import json
    import threading
    posts = []

    class Hook(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            posts.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass
    server = http.server.HTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    folder = tmp_path / "incoming"
    write_csv(folder / "day0.csv", [{"id": 0, "amount": 0.0}])
    drop = [{"check": "between", "column": "amount", "min": 0, "action": "drop"}]
    assert wap.run(str(folder), checks=drop, source_files="new", source_format="csv")[0] == 0
    write_csv(folder / "day1.csv", [{"id": 1, "amount": -1.0}, {"id": 2, "amount": -2.0}])
    url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    try:
        code, report = wap.run(str(folder), checks=drop, source_files="new", source_format="csv",
                               slack_webhook_url=url)
        assert code == 0 and report.status == "quarantined" and report.rows_dropped == 2
        assert len(posts) == 1 and "quarantined" in posts[0]["text"]
        code, again = wap.run(str(folder), checks=drop, source_files="new", source_format="csv")
        assert code == 0 and again.status == "nothing_to_publish", "day1.csv is consumed"
    finally:
        server.shutdown()
    assert wap.ids() == [0]
    assert sorted(r["id"] for r in spark.table(f"{wap.sql}_quarantine").collect()) == [1, 2]


def test_a_staged_only_run_whose_rows_were_all_quarantined_consumes_nothing(wap, spark):
    path = wap.csv([{"id": 1, "amount": -1.0}, {"id": 2, "amount": 2.0}])
    too_strict = [{"check": "between", "column": "amount", "min": 5, "action": "drop"}]
    code, report = wap.run(path, checks=too_strict, publish="false")
    assert code == 0 and report.status == "nothing_to_publish" and report.rows_dropped == 2
    code, report = wap.run(path, checks=[{"check": "not_null", "column": "id"}])
    assert code == 0 and report.status == "published", "the corrected run loads the batch"
    assert wap.ids() == [1, 2]


def test_new_files_of_a_killed_publish_are_not_reloaded_after_other_commits_and_expiry(wap, spark, tmp_path):
    folder = tmp_path / "incoming"
    write_csv(folder / "day0.csv", [{"id": 0, "amount": 0.0}])
    assert wap.run(str(folder), checks=UNIQUE, source_files="new", source_format="csv")[0] == 0
    write_csv(folder / "day1.csv", [{"id": 1, "amount": 1.0}])
    killed_after_the_publish(wap, str(folder), source_files="new", source_format="csv")
    for i in (60, 61):  # two commits by another engine: the ancestry no longer reaches day1's publish
        spark.sql(f"INSERT INTO {wap.sql} VALUES ({i}, 6.0)")
    expire_all_but_the_last(spark, wap)
    write_csv(folder / "day2.csv", [{"id": 2, "amount": 2.0}])
    code, report = wap.run(str(folder), checks=UNIQUE, source_files="new", source_format="csv")
    assert code == 0 and report.status == "published", report.error
    assert [os.path.basename(f) for f in report.input_files] == ["day2.csv"]
    assert wap.ids() == [0, 1, 2, 60, 61]


def test_an_unaudited_write_left_on_main_is_never_taken_for_a_publish(wap, spark, monkeypatch):
    assert wap.run([{"id": 0, "amount": 0.0}], checks=UNIQUE)[0] == 0
    path = wap.csv(ROWS)

    monkeypatch.setattr(wap_etl, "fault_point", wap_off_then_killed_before_the_guard(spark, wap))
    assert wap.run(path, checks=UNIQUE, batch_id="b1")[0] == 1
    assert wap.ids() == [0, 1, 2, 3, 4, 5], "the write went straight to main"
    monkeypatch.setattr(wap_etl, "fault_point", lambda step: None)
    code, retry = wap.run(path, checks=UNIQUE, batch_id="b1")
    assert code == 1 and "no publish recorded" in retry.error and retry.status == "error"
    assert not [r for r in published_runs(spark, wap) if r["batch_id"] == "b1"], "never recorded as published"
    assert wap.ids() == [0, 1, 2, 3, 4, 5]
    assert wap.run([{"id": 50, "amount": 5.0}], checks=UNIQUE)[0] == 0  # records it before moving on
    expire_all_but_the_last(spark, wap)
    code, retry = wap.run(path, checks=UNIQUE, batch_id="b1")
    assert code == 1 and "no publish recorded" in retry.error, "expiry does not make it loadable again"
    statuses = [r["status"] for r in spark.table(f"{wap.sql}_wap_runs").collect() if r["batch_id"] == "b1"]
    assert "unaudited" in statuses and "published" not in statuses
    assert wap.ids() == [0, 1, 2, 3, 4, 5, 50]


def test_a_publish_cherry_picked_back_after_a_rollback_is_still_on_main(wap, spark):
    assert wap.run([{"id": 0, "amount": 0.0}], checks=UNIQUE)[0] == 0
    before = wap.refs()["main"]
    assert wap.run([{"id": 1, "amount": -1.0}], checks=UNIQUE, batch_id="bad")[0] == 0
    good = wap.csv([{"id": 2, "amount": 2.0}])
    code, kept = wap.run(good, checks=UNIQUE, batch_id="good")
    assert code == 0
    # the usual repair: drop the bad batch, keep the later one
    spark.sql(f"CALL local.system.rollback_to_snapshot('{wap.table}', {before})")
    spark.sql(f"CALL local.system.cherrypick_snapshot('{wap.table}', {kept.main_snapshot_after})")
    assert wap.ids() == [0, 2]
    code, again = wap.run(good, checks=UNIQUE, batch_id="good")
    assert code == 0 and again.status == "already_published", again.error
    assert wap.ids() == [0, 2]


def test_a_publish_cherry_picked_again_by_a_second_repair_is_still_on_main(wap, spark):
    """The second repair cherry-picks the first one's copy, which Iceberg's new copy names as its
    only source: the batch is known by following the copies back to its publish."""
    assert wap.run([{"id": 0, "amount": 0.0}], checks=UNIQUE)[0] == 0
    first = wap.refs()["main"]
    assert wap.run([{"id": 1, "amount": 1.0}], checks=UNIQUE, batch_id="later-bad")[0] == 0
    before = wap.refs()["main"]
    assert wap.run([{"id": 2, "amount": -2.0}], checks=UNIQUE, batch_id="bad")[0] == 0
    good = wap.csv([{"id": 3, "amount": 3.0}])
    code, kept = wap.run(good, checks=UNIQUE, batch_id="good")
    assert code == 0
    spark.sql(f"CALL local.system.rollback_to_snapshot('{wap.table}', {before})")
    spark.sql(f"CALL local.system.cherrypick_snapshot('{wap.table}', {kept.main_snapshot_after})")
    copy = wap.refs()["main"]
    spark.sql(f"CALL local.system.rollback_to_snapshot('{wap.table}', {first})")  # day 3: `later-bad` too
    spark.sql(f"CALL local.system.cherrypick_snapshot('{wap.table}', {copy})")
    assert wap.ids() == [0, 3]
    code, again = wap.run(good, checks=[], batch_id="good")
    assert code == 0 and again.status == "already_published", again.error
    assert wap.ids() == [0, 3]
    # the next publish records the copy under its own snapshot: known once the copy between expires
    assert wap.run([{"id": 60, "amount": 6.0}], checks=UNIQUE, batch_id="other")[0] == 0
    second_copy = spark.sql(f"SELECT parent_id FROM {wap.sql}.snapshots ORDER BY committed_at DESC").first()[0]
    spark.sql(f"CALL local.system.expire_snapshots(table => '{wap.table}', older_than => TIMESTAMP "
              f"'{(datetime.now(timezone.utc) + timedelta(minutes=1)).strftime('%Y-%m-%d %H:%M:%S')}', retain_last => 2)")
    snapshots = {r[0] for r in spark.sql(f"SELECT snapshot_id FROM {wap.sql}.snapshots").collect()}
    assert second_copy in snapshots and not {copy, kept.main_snapshot_after} & snapshots  # main's history whole
    code, again = wap.run(good, checks=[], batch_id="good")
    assert code == 0 and again.status == "already_published", again.error
    assert wap.ids() == [0, 3, 60]


def test_a_rebased_publish_repaired_by_picking_its_source_stays_published_through_expiry(wap, spark, monkeypatch):
    """The README's repair of a rebased publish picks the audited snapshot it re-commits: that
    copy is recorded as the batch's by the next publish, so the batch stays consumed once the
    audited and rebased snapshots expire."""
    assert wap.run([{"id": 0, "amount": 0.0}], checks=UNIQUE)[0] == 0
    marks = {}

    def others_commit(step):  # while it audits: a good commit, then a bad one
        if step == "audit":
            spark.sql(f"INSERT INTO {wap.sql} VALUES (40, 4.0)")
            marks["good"] = wap.refs()["main"]
            spark.sql(f"INSERT INTO {wap.sql} VALUES (50, 5.0)")
    monkeypatch.setattr(wap_etl, "fault_point", others_commit)
    path = wap.csv(ROWS)
    code, rebased = wap.run(path, checks=UNIQUE, batch_id="b1")
    assert code == 0 and rebased.rebases == 1, rebased.error
    monkeypatch.setattr(wap_etl, "fault_point", lambda step: None)
    source = spark.sql(f"SELECT summary['source-snapshot-id'] FROM {wap.sql}.snapshots "
                       f"WHERE snapshot_id = {rebased.main_snapshot_after}").first()[0]
    spark.sql(f"CALL local.system.rollback_to_snapshot('{wap.table}', {marks['good']})")  # id 50 was bad
    spark.sql(f"CALL local.system.cherrypick_snapshot('{wap.table}', {source})")  # the README's way
    assert wap.ids() == [0, 1, 2, 3, 4, 5, 40]
    assert wap.run([{"id": 60, "amount": 6.0}], checks=UNIQUE, batch_id="other")[0] == 0  # records the copy
    spark.sql(f"CALL local.system.expire_snapshots(table => '{wap.table}', older_than => TIMESTAMP "
              f"'{(datetime.now(timezone.utc) + timedelta(minutes=1)).strftime('%Y-%m-%d %H:%M:%S')}', retain_last => 4)")
    snapshots = {r[0] for r in spark.sql(f"SELECT snapshot_id FROM {wap.sql}.snapshots").collect()}
    assert not {int(source), rebased.main_snapshot_after} & snapshots and marks["good"] in snapshots
    code, again = wap.run(path, checks=[], batch_id="b1")
    assert code == 0 and again.status == "already_published", again.error
    assert wap.ids() == [0, 1, 2, 3, 4, 5, 40, 60]


def test_a_staged_batch_cherry_picked_by_hand_then_picked_again_is_published_once(wap, spark):
    """A kept branch's snapshot is picked onto main, and that copy is picked again by a later
    repair: the audit the ledger records is of the snapshot the copies go back to."""
    assert wap.run([{"id": 0, "amount": 0.0}], checks=UNIQUE)[0] == 0
    path = wap.csv(ROWS)
    code, staged = wap.run(path, checks=UNIQUE, batch_id="picked", publish="false")
    before = wap.refs()["main"]
    assert wap.run([{"id": 50, "amount": 5.0}], checks=UNIQUE)[0] == 0  # main moved: a cherry-pick
    spark.sql(f"CALL local.system.cherrypick_snapshot('{wap.table}', {staged.staged_snapshot})")
    copy = wap.refs()["main"]
    spark.sql(f"CALL local.system.rollback_to_snapshot('{wap.table}', {before})")  # id 50 was bad
    spark.sql(f"CALL local.system.cherrypick_snapshot('{wap.table}', {copy})")
    code, again = wap.run(path, checks=UNIQUE, batch_id="picked")
    assert code == 0 and again.status == "already_published", again.error
    assert wap.ids() == [0, 1, 2, 3, 4, 5]


def test_a_file_whose_name_has_a_space_is_one_file_in_both_modes(wap, tmp_path):
    folder = tmp_path / "incoming"
    write_csv(folder / "day 0.csv", [{"id": 0, "amount": 0.0}])
    code, report = wap.run(str(folder), checks=UNIQUE, source_format="csv")
    assert code == 0 and report.input_files[0].endswith("/day 0.csv")
    code, report = wap.run(str(folder), checks=UNIQUE, source_files="new", source_format="csv")
    assert code == 0 and report.status == "nothing_to_publish"
    assert wap.ids() == [0]


def test_a_staged_batch_published_by_hand_stays_published_through_expiry(wap, spark):
    assert wap.run([{"id": 0, "amount": 0.0}], checks=UNIQUE)[0] == 0
    path = wap.csv(ROWS)
    code, staged = wap.run(path, checks=UNIQUE, batch_id="by-hand", publish="false")
    assert code == 0 and staged.status == "staged"
    spark.sql(f"CALL local.system.fast_forward('{wap.table}', 'main', '{staged.branch}')")  # README's way
    code, again = wap.run(path, checks=UNIQUE, batch_id="by-hand")
    assert code == 0 and again.status == "already_published", again.error
    assert wap.run([{"id": 50, "amount": 5.0}], checks=UNIQUE)[0] == 0
    expire_all_but_the_last(spark, wap)
    code, again = wap.run(path, checks=UNIQUE, batch_id="by-hand")
    assert code == 0 and again.status == "already_published", again.error
    assert wap.ids() == [0, 1, 2, 3, 4, 5, 50]


def test_a_batch_published_by_hand_is_remembered_through_expiry_with_no_publish_after_it(wap, spark):
    """The next run of the job records the hand publish, whatever its own outcome (here a failed
    audit of another batch): no publish of this job need come before expiry hides the snapshot."""
    assert wap.run([{"id": 0, "amount": 0.0}], checks=UNIQUE)[0] == 0
    path = wap.csv(ROWS)
    code, staged = wap.run(path, checks=UNIQUE, batch_id="by-hand", publish="false")
    assert code == 0 and staged.status == "staged"
    spark.sql(f"CALL local.system.fast_forward('{wap.table}', 'main', '{staged.branch}')")  # README's way
    spark.sql(f"ALTER TABLE {wap.sql} DROP BRANCH `{staged.branch}`")  # as its retention would, later
    assert wap.run([{"id": 1, "amount": 1.0}], checks=UNIQUE, batch_id="other")[0] == 3  # id 1 is on main
    spark.sql(f"INSERT INTO {wap.sql} VALUES (60, 6.0)")  # another engine's commit
    expire_all_but_the_last(spark, wap)
    code, again = wap.run(path, checks=[{"check": "not_null", "column": "id"}], batch_id="by-hand")
    assert code == 0 and again.status == "already_published", again.error
    assert wap.ids() == [0, 1, 2, 3, 4, 5, 60]


def test_a_kept_branch_cherry_picked_onto_main_is_dropped_by_the_next_publish(wap, spark):
    """Left in place, it would outlive main's copy, and Iceberg 1.7.1's Java expiry (main the only
    ref) deletes what an expired snapshot added unless a snapshot still there names it as its source."""
    assert wap.run([{"id": 0, "amount": 0.0}], checks=UNIQUE)[0] == 0
    code, staged = wap.run(ROWS, checks=UNIQUE, batch_id="picked", publish="false")
    assert wap.run([{"id": 50, "amount": 5.0}], checks=UNIQUE)[0] == 0  # main moved: a cherry-pick
    spark.sql(f"CALL local.system.cherrypick_snapshot('{wap.table}', {staged.staged_snapshot})")
    assert staged.branch in wap.refs(), "the operator left the branch"
    code, other = wap.run([{"id": 60, "amount": 6.0}], checks=UNIQUE, batch_id="other")
    assert code == 0 and other.status == "published"
    assert [n for n in wap.refs() if n.startswith("audit_")] == []
    assert wap.ids() == [0, 1, 2, 3, 4, 5, 50, 60]


def test_a_cherry_picked_batch_stays_consumed_once_its_source_snapshot_expires(wap, spark):
    """Iceberg's copy carries only `source-snapshot-id`; once the dropped branch's snapshot expires,
    the copy still on main is known by the ledger row the next publish wrote for it."""
    assert wap.run([{"id": 0, "amount": 0.0}], checks=UNIQUE)[0] == 0
    path = wap.csv(ROWS)
    code, staged = wap.run(path, checks=UNIQUE, batch_id="picked", publish="false")
    assert wap.run([{"id": 50, "amount": 5.0}], checks=UNIQUE)[0] == 0  # main moved: a cherry-pick
    spark.sql(f"CALL local.system.cherrypick_snapshot('{wap.table}', {staged.staged_snapshot})")
    assert wap.run([{"id": 60, "amount": 6.0}], checks=UNIQUE, batch_id="other")[0] == 0  # drops the branch
    copy = spark.sql(f"SELECT snapshot_id FROM {wap.sql}.snapshots WHERE summary['source-snapshot-id'] = "
                     f"'{staged.staged_snapshot}'").first()[0]
    spark.sql(f"CALL local.system.expire_snapshots(table => '{wap.table}', older_than => TIMESTAMP "
              f"'{(datetime.now(timezone.utc) + timedelta(minutes=1)).strftime('%Y-%m-%d %H:%M:%S')}', retain_last => 2)")
    snapshots = {r[0] for r in spark.sql(f"SELECT snapshot_id FROM {wap.sql}.snapshots").collect()}
    assert staged.staged_snapshot not in snapshots and copy in snapshots
    code, again = wap.run(path, checks=UNIQUE, batch_id="picked")
    assert code == 0 and again.status == "already_published", again.error
    assert wap.ids() == [0, 1, 2, 3, 4, 5, 50, 60]


def test_a_staged_branch_cherry_picked_onto_main_by_hand_is_published_once(wap, spark):
    assert wap.run([{"id": 0, "amount": 0.0}], checks=UNIQUE)[0] == 0
    path = wap.csv(ROWS)
    code, staged = wap.run(path, checks=UNIQUE, batch_id="picked", publish="false")
    assert wap.run([{"id": 50, "amount": 5.0}], checks=UNIQUE)[0] == 0  # main moved: no fast_forward
    spark.sql(f"CALL local.system.cherrypick_snapshot('{wap.table}', {staged.staged_snapshot})")
    code, again = wap.run(path, checks=UNIQUE, batch_id="picked")
    assert code == 0 and again.status == "already_published", again.error
    assert wap.ids() == [0, 1, 2, 3, 4, 5, 50]


def test_a_batch_rolled_back_to_another_engines_snapshot_comes_back_after_both_expired(wap, spark):
    assert wap.run([{"id": 0, "amount": 0.0}], checks=UNIQUE)[0] == 0
    spark.sql(f"INSERT INTO {wap.sql} VALUES (60, 6.0)")  # not this job: main's parent of the batch
    before = wap.refs()["main"]
    assert wap.run(ROWS, checks=UNIQUE, batch_id="d2")[0] == 0
    spark.sql(f"CALL local.system.rollback_to_snapshot('{wap.table}', {before})")
    spark.sql(f"INSERT INTO {wap.sql} VALUES (70, 7.0)")  # main moves on from that snapshot
    expire_all_but_the_last(spark, wap)  # the batch's snapshot and its parent both expire
    assert spark.table(f"{wap.sql}.snapshots").filter(f"snapshot_id = {before}").count() == 0
    code, report = wap.run(ROWS, checks=UNIQUE, batch_id="d2")
    assert code == 0 and report.status == "published", report.error
    assert wap.ids() == [0, 1, 2, 3, 4, 5, 60, 70]


@pytest.mark.parametrize("bounded", [False, True], ids=["whole_ledger_read", "bounded_ledger_read"])
def test_a_rollback_of_two_publishes_in_a_row_brings_both_batches_back_after_they_expired(wap, spark, monkeypatch,
                                                                                        caplog, bounded):
    checks = UNIQUE
    if bounded:  # every read bounded; a volume check's history puts d1's row among the rows read
        monkeypatch.setenv("WAP_LEDGER_BOUNDED_FROM", "0")
        checks = UNIQUE + [{"check": "volume", "min_ratio": 0.01, "max_ratio": 100}]
    assert wap.run([{"id": 0, "amount": 0.0}], checks=checks)[0] == 0
    spark.sql(f"INSERT INTO {wap.sql} VALUES (60, 6.0)")  # not this job: where the rollback goes
    before = wap.refs()["main"]
    first, second = wap.csv(ROWS[:2]), wap.csv(ROWS[2:])
    assert wap.run(first, checks=checks, batch_id="d1")[0] == 0
    assert wap.run(second, checks=checks, batch_id="d2")[0] == 0  # its parent is d1's publish
    spark.sql(f"CALL local.system.rollback_to_snapshot('{wap.table}', {before})")
    spark.sql(f"INSERT INTO {wap.sql} VALUES (70, 7.0)")  # main moves on from that snapshot
    expire_all_but_the_last(spark, wap)  # both publishes expire, and the snapshot before them
    assert spark.table(f"{wap.sql}.snapshots").filter(f"snapshot_id = {before}").count() == 0
    caplog.set_level(logging.INFO, logger="wap_etl")
    for path, batch_id in ((second, "d2"), (first, "d1")):
        code, report = wap.run(path, checks=checks, batch_id=batch_id)
        assert code == 0 and report.status == "published", (batch_id, report.status, report.error)
    assert wap.ids() == [0, 1, 2, 3, 4, 5, 60, 70]
    if bounded:  # decided from the bounded rows: d1's record shows d2's publish off main
        assert "reading every row" not in caplog.text


def test_an_unaudited_write_is_recorded_as_soon_as_a_rerun_finds_it(wap, spark, monkeypatch):
    assert wap.run([{"id": 0, "amount": 0.0}], checks=UNIQUE)[0] == 0
    path = wap.csv(ROWS)

    monkeypatch.setattr(wap_etl, "fault_point", wap_off_then_killed_before_the_guard(spark, wap))
    assert wap.run(path, checks=UNIQUE, batch_id="b2")[0] == 1
    monkeypatch.setattr(wap_etl, "fault_point", lambda step: None)
    assert wap.run(path, checks=UNIQUE, batch_id="b2")[0] == 1
    statuses = [r["status"] for r in spark.table(f"{wap.sql}_wap_runs").collect() if r["batch_id"] == "b2"]
    assert "unaudited" in statuses, "recorded by the rerun that found it, not by a later publish"
    spark.sql(f"INSERT INTO {wap.sql} VALUES (60, 6.0)")  # no publish of this job in between
    expire_all_but_the_last(spark, wap)
    code, retry = wap.run(path, checks=UNIQUE, batch_id="b2")
    assert code == 1 and "no publish recorded" in retry.error
    assert wap.ids() == [0, 1, 2, 3, 4, 5, 60], "never loaded a second time"


def test_a_failed_audit_fast_forwarded_by_hand_is_not_taken_for_a_publish(wap, spark):
    assert wap.run([{"id": 0, "amount": 0.0}], checks=UNIQUE)[0] == 0
    path = wap.csv(ROWS)
    strict = UNIQUE + [{"check": "between", "column": "amount", "max": 2}]
    code, failed = wap.run(path, checks=strict, batch_id="f1")
    assert code == 3
    spark.sql(f"CALL local.system.fast_forward('{wap.table}', 'main', '{failed.branch}')")
    code, again = wap.run(path, checks=strict, batch_id="f1")
    assert code == 1 and "no publish recorded" in again.error, again.error
    assert not [r for r in published_runs(spark, wap) if r["batch_id"] == "f1"]


def test_new_files_written_without_an_audit_are_never_loaded_again_after_expiry(wap, spark, tmp_path,
                                                                                 monkeypatch):
    assert wap.run([{"id": 0, "amount": 0.0}], checks=UNIQUE)[0] == 0
    folder = tmp_path / "landing"
    write_csv(folder / "a.csv", ROWS)
    monkeypatch.setattr(wap_etl, "fault_point", wap_off_then_killed_before_the_guard(spark, wap))
    assert wap.run(str(folder), checks=UNIQUE, source_files="new", source_format="csv")[0] == 1
    monkeypatch.setattr(wap_etl, "fault_point", lambda step: None)
    code, retry = wap.run(str(folder), checks=UNIQUE, source_files="new", source_format="csv")
    assert code == 1 and "no publish recorded" in retry.error, retry.error
    statuses = [r["status"] for r in spark.table(f"{wap.sql}_wap_runs").collect()]
    assert "unaudited" in statuses, "recorded by the run that found it"
    spark.sql(f"INSERT INTO {wap.sql} VALUES (60, 6.0)")
    expire_all_but_the_last(spark, wap)
    write_csv(folder / "b.csv", [{"id": 7, "amount": 7.0}])
    code, retry = wap.run(str(folder), checks=UNIQUE, source_files="new", source_format="csv")
    assert code == 0 and retry.status == "published", "the rest of the folder still loads"
    assert wap.ids() == [0, 1, 2, 3, 4, 5, 7, 60], "a.csv never loaded a second time"


def test_a_dropped_ledger_does_not_make_past_publishes_unaudited(wap, spark):
    path = wap.csv(ROWS)
    assert wap.run(path, checks=UNIQUE)[0] == 0
    assert wap.run([{"id": 50, "amount": 5.0}], checks=UNIQUE)[0] == 0  # the property names this one
    spark.sql(f"DROP TABLE {wap.sql}_wap_runs")
    code, again = wap.run(path, checks=UNIQUE)
    assert code == 0 and again.status == "already_published", again.error
    assert wap.ids() == [1, 2, 3, 4, 5, 50]


def test_a_publish_recorded_and_expired_after_the_run_read_the_ledger_is_still_found(wap, spark, monkeypatch):
    """Just after this run read the ledger, another run publishes the batch and records it, a
    third publishes on top, and expiry takes the batch's snapshot: main's ancestry stops there, the
    ledger has rows since the read, and reading them again finds the batch on main. Without that,
    this run, staged on main as it now is, would publish the batch a second time."""
    assert wap.run([{"id": 0, "amount": 0.0}], checks=UNIQUE)[0] == 0
    path, real, done = wap.csv(ROWS), wap_etl.Ledger.consumed, []

    def read_then_others_publish_and_expire(self):
        rows = real(self)
        if not done:
            done.append(1)
            for source in (path, [{"id": 70, "amount": 7.0}]):  # the batch, then another on top
                other = wap.cli(source, checks=UNIQUE)
                out, _ = other.communicate(timeout=400)
                assert other.returncode == 0, out[-3000:]
            expire_all_but_the_last(spark, wap)
        return rows
    monkeypatch.setattr(wap_etl.Ledger, "consumed", read_then_others_publish_and_expire)
    code, report = wap.run(path, checks=UNIQUE)
    assert code == 0 and report.status == "already_published" and report.rebases == 0, report.error
    assert wap.ids() == [0, 1, 2, 3, 4, 5, 70]
