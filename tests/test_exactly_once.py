"""Exactly-once: private run branches, a compare-and-swap publish and the run ledger hold whatever
retries, races, rollbacks and snapshot expiry happen. Races run as real processes, lined up at a
step of the protocol with WAP_PAUSE_AT, so the race always happens."""
import concurrent.futures
import hashlib
import json
import os
import re
import time

import pytest

import wap_etl
from conftest import soak, wait_paused, write_csv

ROWS = [{"id": i, "amount": float(i)} for i in range(1, 6)]
UNIQUE = [{"check": "unique", "columns": ["id"]}, {"check": "not_null", "column": "id"}]
POSITIVE = [{"check": "between", "column": "amount", "min": 0}]
DROP_NEGATIVE = [{"check": "between", "column": "amount", "min": 0, "action": "drop", "name": "positive"}]


def paused(gate, step):
    return {"WAP_PAUSE_AT": step, "WAP_PAUSE_DIR": str(gate)}


def release_when(gate, step, count, procs, timeout=300):
    """Wait until `count` runs have reached `step`, then let them all go at once."""
    deadline = time.time() + timeout
    while len([n for n in os.listdir(gate) if n.endswith("." + step) and not n.startswith("go")]) < count:
        dead = [p for p in procs if p.poll() is not None]
        assert not dead, "a run ended before reaching " + step + ": " + dead[0].stdout.read()[-3000:]
        assert time.time() < deadline, f"runs did not reach {step} in time"
        time.sleep(0.2)
    (gate / "go").touch()


def quarantined(spark, wap):
    """(id, run) of every row in the table's quarantine."""
    return [(r["id"], r["_wap_run_id"]) for r in spark.table(f"{wap.sql}_quarantine").collect()]

def finish(proc, timeout=400):
    """Exit code and the run report a process logged."""
    out, _ = proc.communicate(timeout=timeout)
    lines = [line for line in out.splitlines() if "WAP_REPORT " in line]
    assert lines, out[-3000:]
    return proc.returncode, json.loads(lines[-1].split("WAP_REPORT ", 1)[1]), out


def ledger(wap):
    return [r.asDict(recursive=True) for r in wap.spark.table(f"{wap.sql}_wap_runs").collect()]


@soak
def test_four_concurrent_writers_publish_every_batch_exactly_once(wap, tmp_path):
    assert wap.run([{"id": 0, "amount": 0.0}], checks=UNIQUE)[0] == 0
    gate = tmp_path / "gate"
    gate.mkdir()
    batches = [[{"id": 10 * k + i, "amount": float(k)} for i in range(1, 4)] for k in range(1, 5)]
    procs = [wap.cli(rows, env=paused(gate, "before_write"), checks=UNIQUE)
             for rows in batches]
    release_when(gate, "before_write", 4, procs)  # all four write while the others publish
    results = [finish(p) for p in procs]
    for code, report, out in results:
        assert code == 0 and report["status"] == "published", out[-3000:]
    assert wap.ids() == sorted([0] + [r["id"] for rows in batches for r in rows])
    assert sum(report["rebases"] for _, report, _ in results) >= 1, "the publishes raced"
    assert [n for n in wap.refs() if n.startswith("audit_")] == []


def test_same_batch_twice_at_once_publishes_once(wap, tmp_path):
    assert wap.run([{"id": 0, "amount": 0.0}], checks=UNIQUE)[0] == 0
    path = wap.csv(ROWS)
    gate = tmp_path / "gate"
    gate.mkdir()
    procs = [wap.cli(path, env=paused(gate, "audit"), checks=UNIQUE) for _ in range(2)]
    release_when(gate, "audit", 2, procs)  # both audited, both about to publish
    results = [finish(p) for p in procs]
    assert [code for code, _, _ in results] == [0, 0], [out[-2000:] for _, _, out in results]
    assert sorted(r["status"] for _, r, _ in results) == ["already_published", "published"]
    assert results[0][1]["batch_id"] == results[1][1]["batch_id"]
    assert results[0][1]["branch"] != results[1][1]["branch"], "each run stages on its own branch"
    assert wap.ids() == [0, 1, 2, 3, 4, 5]


def test_a_source_file_replaced_while_the_run_reads_it_is_never_published_under_its_old_identity(wap, tmp_path):
    """Identified as one content, staged from another: publishing that would let the next run load
    the new content again as a new input."""
    assert wap.run([{"id": 0, "amount": 0.0}], checks=UNIQUE)[0] == 0
    path = wap.csv(ROWS)
    gate = tmp_path / "gate"
    gate.mkdir()
    proc = wap.cli(path, env=paused(gate, "before_write"), checks=UNIQUE)
    wait_paused(gate, "before_write", proc)  # identified, not yet read
    with open(path, "a") as f:
        f.write("6,6.0\n")
    (gate / "go").touch()
    code, report, out = finish(proc)
    assert code == 1 and "changed while this run read it" in report["error"], out[-2000:]
    assert wap.ids() == [0] and [n for n in wap.refs() if n.startswith("audit_")] == []
    assert wap.run(path, checks=UNIQUE)[0] == 0 and wap.ids() == [0, 1, 2, 3, 4, 5, 6]
    code, again = wap.run(path, checks=UNIQUE)
    assert code == 0 and again.status == "already_published" and wap.ids() == [0, 1, 2, 3, 4, 5, 6]



def test_rows_quarantined_from_a_source_file_that_then_changed_are_discarded_with_the_run(wap, spark, tmp_path):
    """The changed run's quarantined rows name a batch no run will publish: left behind, they would
    sit in the quarantine forever beside the rows of the run that does publish."""
    assert wap.run([{"id": 0, "amount": 0.0}], checks=DROP_NEGATIVE)[0] == 0
    path = wap.csv(ROWS + [{"id": 6, "amount": -6.0}])
    gate = tmp_path / "gate"
    gate.mkdir()
    proc = wap.cli(path, env=paused(gate, "before_write"), checks=DROP_NEGATIVE)
    wait_paused(gate, "before_write", proc)  # its row quarantined
    assert [r["id"] for r in spark.table(f"{wap.sql}_quarantine").collect()] == [6]
    with open(path, "a") as f:
        f.write("7,7.0\n")
    (gate / "go").touch()
    code, report, out = finish(proc)
    assert code == 1 and "changed while this run read it" in report["error"], out[-2000:]
    assert spark.table(f"{wap.sql}_quarantine").count() == 0
    assert (report["rows_dropped"], report["quarantine_table"]) == (0, None), "it points to no rows"
    assert [r["rows_dropped"] for r in ledger(wap) if r["run_id"] == report["run_id"]] == [0]
    code, rerun = wap.run(path, checks=DROP_NEGATIVE)
    assert code == 0 and wap.ids() == [0, 1, 2, 3, 4, 5, 7]
    assert quarantined(spark, wap) == [(6, rerun.run_id)]


def test_quarantined_rows_of_a_snapshot_another_run_published_stay_when_their_run_sees_a_change(wap, spark, tmp_path):
    """A chmod moves a file's change time, not its bytes: a second run of the same input resumes
    the first run's snapshot and publishes it with the first run's quarantined rows, which the
    first run, seeing the change, must then leave where they are."""
    assert wap.run([{"id": 0, "amount": 0.0}], checks=DROP_NEGATIVE)[0] == 0
    path = wap.csv(ROWS + [{"id": 6, "amount": -6.0}])
    gate = tmp_path / "gate"
    gate.mkdir()
    first = wap.cli(path, env=paused(gate, "audit"), checks=DROP_NEGATIVE)
    wait_paused(gate, "audit", first)  # staged, audited, its row quarantined
    os.chmod(path, 0o600)
    code, second = wap.run(path, checks=DROP_NEGATIVE)
    assert code == 0 and second.status == "published" and wap.ids() == [0, 1, 2, 3, 4, 5]
    (gate / "go").touch()
    code, report, out = finish(first)
    assert code == 1 and "changed while this run read it" in report["error"], out[-2000:]
    assert quarantined(spark, wap) == [(6, report["run_id"])]
    assert report["rows_dropped"] == 1 and report["quarantine_table"], "they stay, and so does their record"


ALL_NEGATIVE = [{"id": 7, "amount": -7.0}, {"id": 8, "amount": -8.0}]
STRICT = [dict(DROP_NEGATIVE[0], min=100)]  # drops every row of ROWS


@soak  # the ordering the strict run's test below also makes (the first held before staging)
def test_of_two_runs_of_a_batch_whose_every_row_is_quarantined_the_one_that_commits_first_consumes_it(
        wap, spark, tmp_path):
    """The second run's commit consumed the batch: the first, held before staging, finds it and ends
    already published, its rows discarded; the quarantine holds the consumer's rows alone."""
    assert wap.run([{"id": 0, "amount": 0.0}], checks=DROP_NEGATIVE)[0] == 0
    path = wap.csv(ALL_NEGATIVE)
    gate = tmp_path / "gate"
    gate.mkdir()
    first = wap.cli(path, env=paused(gate, "stage"), checks=DROP_NEGATIVE)
    wait_paused(gate, "stage", first)  # its rows quarantined, nothing staged
    code, second = wap.run(path, checks=DROP_NEGATIVE)
    assert code == 0 and second.status == "quarantined" and second.rows_dropped == 2
    (gate / "go").touch()
    code, report, out = finish(first)
    assert code == 0 and report["status"] == "already_published", out[-2000:]
    assert (report["rows_dropped"], report["quarantine_table"]) == (0, None), "it points to no rows"
    assert sorted(quarantined(spark, wap)) == [(7, second.run_id), (8, second.run_id)]
    assert wap.ids() == [0]


def test_a_run_that_took_up_a_snapshot_whose_every_row_is_quarantined_consumes_it_with_its_own_rows(wap, spark, tmp_path):
    """Its branch is the only thing keeping the other run's rows, and it drops it: the other run,
    seeing its file changed afterwards, discards them."""
    path, first, gate, _ = first_held_at_audit(wap, tmp_path, DROP_NEGATIVE, ALL_NEGATIVE)
    os.chmod(path, 0o600)  # the same bytes: the same input, a changed stamp
    code, second = wap.run(path, checks=DROP_NEGATIVE)
    assert code == 0 and second.status == "quarantined" and second.rows_dropped == 2
    (gate / "go").touch()
    code, report, out = finish(first)
    assert code == 1 and "changed while this run read it" in report["error"], out[-2000:]
    assert second.staged_snapshot == report["staged_snapshot"], "the second run took it up"
    assert sorted(quarantined(spark, wap)) == [(7, second.run_id), (8, second.run_id)]


@soak  # the take-up of the test above, without the changed file
def test_a_run_whose_snapshot_another_run_took_up_and_consumed_whole_ends_already_published(wap, spark, tmp_path):
    """The second run took the first's snapshot up and consumed the batch with its own rows; the
    first, audited before that, finds the consumption when it decides and leaves the second's."""
    path, first, gate, _ = first_held_at_audit(wap, tmp_path, DROP_NEGATIVE, ALL_NEGATIVE)
    code, second = wap.run(path, checks=DROP_NEGATIVE)
    assert code == 0 and second.status == "quarantined"
    (gate / "go").touch()
    code, report, out = finish(first)
    assert code == 0 and report["status"] == "already_published", out[-2000:]
    assert second.staged_snapshot == report["staged_snapshot"], "the second run took it up"
    assert sorted(quarantined(spark, wap)) == [(7, second.run_id), (8, second.run_id)]


def beaten_at(wap, tmp_path, step, held, first):
    """A run of a batch under `held` checks is held at `step` (before its commit), while a run under
    `first` checks consumes the batch: the held run then finds that consumption (deciding after it,
    or its compare-and-swap failing) and ends already published. Returns the first run's report."""
    assert wap.run([{"id": 0, "amount": 0.0}], checks=DROP_NEGATIVE)[0] == 0
    path = wap.csv(ROWS + [{"id": 6, "amount": -6.0}])
    gate = tmp_path / "gate"
    gate.mkdir()
    proc = wap.cli(path, env=paused(gate, step), checks=held)
    wait_paused(gate, step, proc)
    code, report = wap.run(path, checks=first)
    assert code == 0, report.error
    (gate / "go").touch()
    code, beaten, out = finish(proc)
    assert code == 0 and beaten["status"] == "already_published", out[-2000:]
    return report


def test_a_run_quarantining_every_row_consumes_the_batch_before_a_run_yet_to_publish_it(wap, spark, tmp_path):
    """Under stricter checks a second run drops every row of the batch while the first, its rows
    quarantined and nothing staged yet, has still to publish. The second's commit consumed the
    batch: the first finds it and publishes nothing (the batch once), its rows gone."""
    second = beaten_at(wap, tmp_path, "stage", held=DROP_NEGATIVE, first=STRICT)
    assert second.status == "quarantined" and second.rows_dropped == 6
    assert wap.ids() == [0] and sorted(quarantined(spark, wap)) == [(i, second.run_id) for i in range(1, 7)]


@soak  # its kind stays in the default run: test_a_publish_whose_commit_loses_to_a_run_quarantining_every_row_of_the_batch_ends_already_published
def test_a_run_quarantining_every_row_whose_commit_loses_to_a_publish_of_the_batch_ends_already_published(
        wap, spark, tmp_path):
    """The batch is consumed once, with the publisher's quarantined row."""
    publisher = beaten_at(wap, tmp_path, "decided", held=STRICT, first=DROP_NEGATIVE)
    assert publisher.status == "published"
    assert wap.ids() == [0, 1, 2, 3, 4, 5] and quarantined(spark, wap) == [(6, publisher.run_id)]


def test_a_publish_whose_commit_loses_to_a_run_quarantining_every_row_of_the_batch_ends_already_published(
        wap, spark, tmp_path):
    strict = beaten_at(wap, tmp_path, "decided", held=DROP_NEGATIVE, first=STRICT)
    assert strict.status == "quarantined"
    assert wap.ids() == [0] and sorted(quarantined(spark, wap)) == [(i, strict.run_id) for i in range(1, 7)]


@soak  # its kind stays in the default run: test_a_run_quarantining_every_row_consumes_the_batch_before_a_run_yet_to_publish_it
def test_a_run_finds_its_batch_quarantined_whole_after_it_read_the_ledger_though_another_batch_was_since(
        wap, spark, tmp_path):
    """The first run read the ledger; then a strict run consumed the batch quarantined whole and
    was killed before its ledger row, and another batch was quarantined whole, its commit
    recording the strict run's consumption before overwriting the property. The property names a
    consumption the first run's ledger rows lack: it reads the ledger again, finds the strict
    run's and publishes nothing."""
    assert wap.run([{"id": 0, "amount": 0.0}], checks=DROP_NEGATIVE)[0] == 0
    path = wap.csv(ROWS + [{"id": 6, "amount": -6.0}])
    gate = tmp_path / "gate"
    gate.mkdir()
    first = wap.cli(path, env=paused(gate, "stage"), checks=DROP_NEGATIVE)
    wait_paused(gate, "stage", first)  # it has read the ledger
    killed = wap.cli(path, env={"WAP_FAULT_AFTER": "quarantined"}, checks=STRICT)
    out, _ = killed.communicate(timeout=400)
    assert killed.returncode == 137, out[-3000:]
    code, other = wap.run([{"id": 20, "amount": -20.0}], checks=DROP_NEGATIVE)
    assert code == 0 and other.status == "quarantined"
    (gate / "go").touch()
    code, report, out = finish(first)
    assert code == 0 and report["status"] == "already_published", out[-2000:]
    assert wap.ids() == [0]
    assert [r["status"] for r in ledger(wap) if r["batch_id"] == report["batch_id"]
            and r["run_id"] != report["run_id"]] == ["quarantined"], "recorded by the other batch's commit"


@soak  # its kind stays in the default run: test_a_whole_quarantine_its_run_did_not_record_is_recorded_by_the_next_publish
def test_a_run_killed_after_consuming_a_batch_whose_every_row_is_quarantined_is_recorded_by_the_next(wap, spark):
    """Killed between its commit and its ledger row: the table's last-quarantine property names the
    consumption, so a rerun ends already published and records it."""
    assert wap.run([{"id": 0, "amount": 0.0}], checks=DROP_NEGATIVE)[0] == 0
    path = wap.csv(ALL_NEGATIVE)
    killed = wap.cli(path, env={"WAP_FAULT_AFTER": "quarantined"}, checks=DROP_NEGATIVE)
    out, _ = killed.communicate(timeout=400)
    assert killed.returncode == 137, out[-3000:]
    run_id, = {r for _, r in quarantined(spark, wap)}
    code, rerun = wap.run(path, checks=DROP_NEGATIVE)
    assert code == 0 and rerun.status == "already_published" and wap.ids() == [0]
    assert [(r["run_id"], r["status"]) for r in ledger(wap) if r["batch_id"] == rerun.batch_id
            and r["run_id"] != rerun.run_id] == [(run_id, "quarantined")]
    assert sorted(quarantined(spark, wap)) == [(7, run_id), (8, run_id)]


def test_a_whole_quarantine_its_run_did_not_record_is_recorded_by_the_next_publish(wap, spark):
    """Else every later run would find the property's consumption missing and read the ledger
    twice, until the next whole quarantine."""
    assert wap.run([{"id": 0, "amount": 0.0}], checks=DROP_NEGATIVE)[0] == 0
    killed = wap.cli(wap.csv(ALL_NEGATIVE), env={"WAP_FAULT_AFTER": "quarantined"}, checks=DROP_NEGATIVE)
    out, _ = killed.communicate(timeout=400)
    assert killed.returncode == 137, out[-3000:]
    run_id, = {r for _, r in quarantined(spark, wap)}
    code, other = wap.run([{"id": 20, "amount": 20.0}], checks=DROP_NEGATIVE)
    assert code == 0 and other.status == "published"
    assert [r["status"] for r in ledger(wap) if r["run_id"] == run_id] == ["quarantined"]


def test_a_run_whose_every_row_is_quarantined_finds_the_rerun_that_published_an_ended_runs_snapshot(
        wap, spark, tmp_path, monkeypatch):
    """The first run ended (exit 1) with its audited snapshot on its branch. A run under stricter
    checks drops every row; before it decides, a rerun takes the first's snapshot up and publishes
    it, removing the strict run's rows. The strict run finds that publish and consumes nothing:
    the first's rows, which the published snapshot carries, stay."""
    assert wap.run([{"id": 0, "amount": 0.0}], checks=DROP_NEGATIVE)[0] == 0
    path = wap.csv(ROWS + [{"id": 6, "amount": -6.0}])
    monkeypatch.setattr(wap_etl, "fault_point", crash_after_the_audit)
    code, ended = wap.run(path, checks=DROP_NEGATIVE)
    assert code == 1 and ended.rows_dropped == 1
    monkeypatch.setattr(wap_etl, "fault_point", lambda step: None)
    gate = tmp_path / "gate"
    gate.mkdir()
    strict = wap.cli(path, env=paused(gate, "audit"), checks=STRICT)
    wait_paused(gate, "audit", strict)
    code, rerun = wap.run(path, checks=DROP_NEGATIVE)
    assert code == 0 and rerun.status == "published" and rerun.staged_snapshot == ended.staged_snapshot
    (gate / "go").touch()
    code, report, out = finish(strict)
    assert code == 0 and report["status"] == "already_published", out[-2000:]
    assert wap.ids() == [0, 1, 2, 3, 4, 5] and quarantined(spark, wap) == [(6, ended.run_id)]


def test_a_run_quarantining_every_row_removes_the_rows_of_a_run_whose_audit_failed(wap, spark):
    """The failed run's branch is kept for inspection, but no rerun under its checks publishes
    that snapshot: its rows go, as any ended attempt's."""
    assert wap.run([{"id": 0, "amount": 0.0}], checks=DROP_NEGATIVE)[0] == 0
    path = wap.csv(ROWS + [{"id": 6, "amount": -6.0}])
    code, failed = wap.run(path, checks=DROP_NEGATIVE + [{"check": "between", "column": "amount", "max": 3}])
    assert code == 3 and failed.rows_dropped == 1 and failed.branch in wap.refs()
    code, report = wap.run(path, checks=STRICT)
    assert code == 0 and report.status == "quarantined" and report.rows_dropped == 6
    assert sorted(quarantined(spark, wap)) == [(i, report.run_id) for i in range(1, 7)]


@soak  # its kind stays in the default run: test_a_run_that_took_up_a_snapshot_whose_every_row_is_quarantined_consumes_it_with_its_own_rows
def test_a_rerun_taking_up_a_killed_runs_snapshot_whose_every_row_is_quarantined_leaves_the_rows_once(wap, spark):
    """The killed run never ends, so no tidy-up of ended runs would remove its rows: the rerun
    that took its snapshot up quarantines its own and removes the killed run's."""
    assert wap.run([{"id": 0, "amount": 0.0}], checks=DROP_NEGATIVE)[0] == 0
    path = wap.csv(ALL_NEGATIVE)
    killed = wap.cli(path, env={"WAP_FAULT_AFTER": "audit"}, checks=DROP_NEGATIVE)
    out, _ = killed.communicate(timeout=400)
    assert killed.returncode == 137, out[-3000:]
    code, rerun = wap.run(path, checks=DROP_NEGATIVE)
    assert code == 0 and rerun.status == "quarantined" and rerun.rows_dropped == 2
    assert sorted(quarantined(spark, wap)) == [(7, rerun.run_id), (8, rerun.run_id)]


def test_a_rerun_whose_drop_checks_keep_rows_a_taken_up_snapshot_dropped_stages_them(wap, spark, monkeypatch):
    """The crashed run dropped every row; by its rerun they pass (a drop check on the clock, or
    here a transform that is not a function of its input). Ending `quarantined` with that
    snapshot would leave them on neither main nor the quarantine."""
    code, rerun = crashed_then_rerun_negated(wap, monkeypatch, DROP_NEGATIVE)
    assert code == 0 and rerun.status == "published" and rerun.rows_dropped == 0, rerun.error
    assert wap.ids() == [0, 7, 8] and quarantined(spark, wap) == []


def test_a_rerun_whose_drop_checks_split_a_taken_up_snapshots_drops_otherwise_judges_its_own(wap, spark, monkeypatch):
    """The crashed run dropped both rows by one check; its rerun drops the same two by another,
    which allows one: consuming the batch with the snapshot's verdicts would pass a check that
    fails. It stages afresh, and its audit fails."""
    checks = [dict(DROP_NEGATIVE[0]), {"check": "between", "column": "amount", "max": 0, "action": "drop",
                                       "name": "not_positive", "max_failing_rows": 1}]
    code, rerun = crashed_then_rerun_negated(wap, monkeypatch, checks)
    assert code == 3 and rerun.status == "audit_failed", (rerun.status, rerun.checks)
    assert [r["name"] for r in rerun.checks if not r["passed"]] == ["not_positive"]
    assert wap.ids() == [0]


def crashed_then_rerun_negated(wap, monkeypatch, checks):
    """A run of two negative amounts crashed after its audit, every row dropped, then its rerun
    with the amounts negated by the transform, which takes up that run's snapshot: the rerun's
    (exit code, report)."""
    assert wap.run([{"id": 0, "amount": 0.0}], checks=UNIQUE)[0] == 0
    path = wap.csv(ALL_NEGATIVE)
    monkeypatch.setattr(wap_etl, "transform", amounts_negated_when_asked)
    monkeypatch.setattr(wap_etl, "fault_point", crash_after_the_audit)
    code, crashed = wap.run(path, checks=checks)
    assert code == 1 and crashed.rows_dropped == 2 and crashed.staged_snapshot is not None
    steps = []
    monkeypatch.setattr(wap_etl, "fault_point", steps.append)
    monkeypatch.setenv("WAP_TEST_NEGATE", "1")
    code, rerun = wap.run(path, checks=checks)
    assert "resumed" in steps, "the rerun took up the crashed run's snapshot"
    return code, rerun


def amounts_negated_when_asked(df):
    """A transform whose output is not a function of its input: with WAP_TEST_NEGATE set, every
    amount is negated."""
    from pyspark.sql import functions as F
    return df.withColumn("amount", -F.col("amount")) if os.environ.get("WAP_TEST_NEGATE") else df


def test_a_run_that_consumes_nothing_leaves_other_runs_quarantined_rows(wap, spark, monkeypatch):
    """--publish false: the rows of the batch's crashed run stay for whichever run consumes it."""
    def crash_at_the_stage(step):
        if step == "stage":  # its rows quarantined, no branch made
            raise Crash("killed before staging")
    monkeypatch.setattr(wap_etl, "fault_point", crash_at_the_stage)
    code, crashed = wap.run(ALL_NEGATIVE, checks=DROP_NEGATIVE, batch_id="b1")
    assert code == 1 and crashed.rows_dropped == 2
    monkeypatch.setattr(wap_etl, "fault_point", lambda step: None)
    code, report = wap.run(ALL_NEGATIVE, checks=DROP_NEGATIVE, batch_id="b1", publish="false")
    assert code == 0 and report.status == "nothing_to_publish" and report.rows_dropped == 2
    assert sorted(quarantined(spark, wap)) == sorted((i, run) for i in (7, 8) for run in (crashed.run_id, report.run_id))


def first_held_at_audit(wap, tmp_path, checks, rows, **params):
    """A table with a row, then a run of `rows` held once it has staged and audited them: (its
    source, its process, its gate, a gate for a second run)."""
    assert wap.run([{"id": 0, "amount": 0.0}], checks=checks, **params)[0] == 0
    path = wap.csv(rows)
    first_gate, second_gate = tmp_path / "first", tmp_path / "second"
    first_gate.mkdir()
    second_gate.mkdir()
    first = wap.cli(path, env=paused(first_gate, "audit"), checks=checks, **params)
    wait_paused(first_gate, "audit", first)
    return path, first, first_gate, second_gate


def discarded_while_found(wap, spark, tmp_path, second_env=None):
    """The race: a second run of the same input has found the first run's branch and is held just
    before it makes its own there; meanwhile the first run sees its file changed (a chmod: same
    bytes, so the same identity), drops its branch and, seeing no other ref hold its snapshot,
    discards its quarantined row. Returns the second run's process, its gate and the path."""
    path, first, first_gate, second_gate = first_held_at_audit(wap, tmp_path, DROP_NEGATIVE,
                                                               ROWS + [{"id": 6, "amount": -6.0}])
    os.chmod(path, 0o600)
    second = wap.cli(path, env={**paused(second_gate, "resume"), **(second_env or {})}, checks=DROP_NEGATIVE)
    wait_paused(second_gate, "resume", second)  # it has found the first run's branch
    (first_gate / "go").touch()
    code, first_report, out = finish(first)
    assert code == 1 and "changed while this run read it" in first_report["error"], out[-2000:]
    assert quarantined(spark, wap) == [], "no ref held its snapshot when it looked"
    return second, second_gate, path, first_report


def test_a_run_that_took_up_a_snapshot_its_run_then_discarded_stages_afresh_with_its_own_quarantine(wap, spark, tmp_path):
    """Publishing the snapshot would leave its dropped row nowhere."""
    second, gate, _, first_report = discarded_while_found(wap, spark, tmp_path)
    (gate / "go").touch()
    code, report, out = finish(second)
    assert code == 0 and report["status"] == "published", out[-2000:]
    assert wap.ids() == [0, 1, 2, 3, 4, 5]
    assert quarantined(spark, wap) == [(6, report["run_id"])] and report["rows_dropped"] == 1
    assert "staging afresh" in out and report["staged_snapshot"] != first_report["staged_snapshot"]


@soak  # its kind stays in the default run: test_a_snapshot_whose_quarantined_rows_are_gone_is_not_taken_up
def test_a_branch_left_on_a_discarded_snapshot_by_a_crashed_rerun_is_not_taken_up(wap, spark, tmp_path):
    """What tells a rerun that a snapshot's quarantined rows are still there is the branch of the
    run that quarantined them, not whichever branch of the batch it found: here the second run
    made its branch on the snapshot after the rows were discarded, and died before it looked."""
    second, gate, path, first_report = discarded_while_found(wap, spark, tmp_path, {"WAP_FAULT_AFTER": "resumed"})
    (gate / "go").touch()
    out, _ = second.communicate(timeout=400)  # read as it runs: a full pipe would hold it
    assert second.returncode == 137, out[-2000:]
    left = [n for n, s in wap.refs().items() if n.startswith("audit_") and s == first_report["staged_snapshot"]]
    assert len(left) == 1
    code, third = wap.run(path, checks=DROP_NEGATIVE)
    assert code == 0 and third.status == "published" and wap.ids() == [0, 1, 2, 3, 4, 5]
    assert quarantined(spark, wap) == [(6, third.run_id)] and third.rows_dropped == 1


@soak  # its kind stays in the default run: test_quarantined_rows_of_a_snapshot_another_run_published_stay_when_their_run_sees_a_change
def test_quarantined_rows_stay_when_a_rerun_published_their_snapshot_rebased(wap, spark, tmp_path):
    """The first run finds its batch on main in a snapshot that is not its own (the rerun that took
    its snapshot up rebased it on a moved main), yet holding its quarantined rows' batch: they
    stay, as the publishing run's report says."""
    path, first, first_gate, second_gate = first_held_at_audit(wap, tmp_path, DROP_NEGATIVE,
                                                               ROWS + [{"id": 6, "amount": -6.0}])
    second = wap.cli(path, env=paused(second_gate, "audit"), checks=DROP_NEGATIVE)
    wait_paused(second_gate, "audit", second)  # it took up the first run's snapshot
    assert wap.run([{"id": 100, "amount": 1.0}], checks=DROP_NEGATIVE)[0] == 0  # main moves
    (second_gate / "go").touch()
    code, report, out = finish(second)
    assert code == 0 and report["status"] == "published" and report["rebases"] == 1, out[-2000:]
    (first_gate / "go").touch()
    code, first_report, out = finish(first)
    assert code == 0 and first_report["status"] == "already_published", out[-2000:]
    assert wap.ids() == [0, 1, 2, 3, 4, 5, 100]
    assert quarantined(spark, wap) == [(6, first_report["run_id"])] and report["rows_dropped"] == 1


@pytest.mark.parametrize("rebased", [False, pytest.param(True, marks=soak)], ids=["as_staged", "rebased"])
def test_a_rerun_whose_found_branch_was_published_meanwhile_settles_as_already_published(wap, tmp_path, rebased):
    """The branch it found is gone because its run published the snapshot. As staged: the rerun
    takes the snapshot up from main. Rebased on a moved main: the rerun stages afresh on a main
    that holds the batch, where `unique` fails on the batch's own rows, and that publish settles
    it instead of failing its audit."""
    path, first, first_gate, second_gate = first_held_at_audit(wap, tmp_path, UNIQUE, ROWS)
    second = wap.cli(path, env=paused(second_gate, "resume"), checks=UNIQUE)
    wait_paused(second_gate, "resume", second)
    if rebased:
        assert wap.run([{"id": 100, "amount": 1.0}], checks=UNIQUE)[0] == 0  # main moves
    (first_gate / "go").touch()
    code, first_report, out = finish(first)
    assert code == 0 and first_report["status"] == "published", out[-2000:]
    assert first_report["rebases"] == int(rebased)
    (second_gate / "go").touch()
    code, report, out = finish(second)
    assert code == 0 and report["status"] == "already_published", out[-2000:]
    assert ("staging afresh" in out) == rebased
    assert wap.ids() == [0, 1, 2, 3, 4, 5] + [100] * rebased
    assert [n for n in wap.refs() if n.startswith("audit_")] == []


@pytest.mark.parametrize("same_checks", [pytest.param(True, marks=soak), False], ids=["same_checks", "other_checks"])
def test_an_audit_failed_on_the_batch_another_run_published_meanwhile_settles_as_already_published(
        wap, tmp_path, same_checks):
    """The second run found the batch not yet on main, then made its branch on a main that the
    first run's publish of the batch had reached: its `unique` fails on the batch's own rows.
    That publish settles it, as it would have a moment earlier, under its checks or others; a
    warning names what failed."""
    assert wap.run([{"id": 0, "amount": 0.0}], checks=UNIQUE)[0] == 0
    path = wap.csv(ROWS)
    second = wap.cli(path, env=paused(tmp_path, "stage"), checks=UNIQUE if same_checks else UNIQUE + POSITIVE)
    wait_paused(tmp_path, "stage", second)  # past its check for the batch on main
    code, first = wap.run(path, checks=UNIQUE)
    assert code == 0 and first.status == "published"
    (tmp_path / "go").touch()
    code, report, out = finish(second)
    assert [c["check"] for c in report["checks"] if not c["passed"]] == ["unique"], out[-2000:]
    assert code == 0 and report["status"] == "already_published"
    assert re.search(r"WARNING wap_etl: the audit failed \(unique\w*\), but run \w+ published this batch", out)
    assert wap.ids() == [0, 1, 2, 3, 4, 5] and [n for n in wap.refs() if n.startswith("audit_")] == []


@soak  # its kind stays in the default run: test_a_run_that_took_up_a_snapshot_its_run_then_discarded_stages_afresh_with_its_own_quarantine
def test_a_run_that_took_up_a_snapshot_and_must_stage_again_quarantines_its_own_rows(wap, spark, tmp_path):
    """In `merge` mode a moved main means staging again, and the new stage first drops the branch
    that held the taken-up snapshot. If the run whose rows went with that snapshot sees its files
    changed right then, no ref names its rows and it discards them: the new snapshot must not
    count on them."""
    merge = {"mode": "merge", "merge_keys": "id"}
    path, first, first_gate, second_gate = first_held_at_audit(
        wap, tmp_path, DROP_NEGATIVE, ROWS + [{"id": 6, "amount": -6.0}], **merge)
    os.chmod(path, 0o600)  # the same bytes: the second run's identity is the first's
    second = wap.cli(path, env={"WAP_PAUSE_AT": "resumed,before_write", "WAP_PAUSE_DIR": str(second_gate)},
                     checks=DROP_NEGATIVE, **merge)
    wait_paused(second_gate, "resumed", second)  # its branch made on the first run's snapshot
    assert wap.run([{"id": 100, "amount": 1.0}], checks=DROP_NEGATIVE, **merge)[0] == 0  # main moves
    (second_gate / "go.resumed").touch()
    wait_paused(second_gate, "before_write", second)  # staging again: its branch on the snapshot dropped
    (first_gate / "go").touch()
    code, first_report, out = finish(first)
    assert code == 1 and "changed while this run read it" in first_report["error"], out[-2000:]
    (second_gate / "go.before_write").touch()
    code, report, out = finish(second)
    assert code == 0 and report["status"] == "published" and report["rebases"] == 1, out[-2000:]
    assert wap.ids() == [0, 1, 2, 3, 4, 5, 100]
    assert quarantined(spark, wap) == [(6, report["run_id"])] and report["rows_dropped"] == 1


def test_a_source_file_rewritten_with_another_header_mid_run_fails_as_changed_not_as_bad_input(wap, tmp_path):
    """Spark checks each file's header as the write reads it: the header it finds is the changed
    file's, and "fix your file" (exit 2) would blame a file that was fine when the run began."""
    assert wap.run([{"id": 0, "amount": 0.0}], checks=UNIQUE)[0] == 0
    path = wap.csv(ROWS)
    gate = tmp_path / "gate"
    gate.mkdir()
    proc = wap.cli(path, env=paused(gate, "before_write"), checks=UNIQUE)
    wait_paused(gate, "before_write", proc)
    with open(path, "w") as f:
        f.write("amount,id\n1.0,1\n")
    (gate / "go").touch()
    code, report, out = finish(proc)
    assert code == 1 and "changed while this run read it" in report["error"], out[-2000:]
    assert wap.ids() == [0] and [n for n in wap.refs() if n.startswith("audit_")] == []

def test_a_source_file_grown_after_spark_listed_it_is_refused_before_anything_is_written(spark, tmp_path):
    """Spark reads each file only as far as the length it listed: identifying the grown file
    would name rows the write never reads."""
    path = tmp_path / "day1.csv"
    path.write_text("id,amount\n1,1.0\n")
    source = spark.read.options(header="true").schema("id int, amount double").csv(str(path))
    with open(path, "a") as f:
        f.write("2,2.0\n")
    with pytest.raises(wap_etl.WapError, match="changed while this run read it"):
        wap_etl.identify_input(spark, wap_etl.input_files(source), source)


def test_local_files_hashed_side_by_side_keep_the_identities_ledgers_hold(tmp_path):
    """A batch's identity is the SHA-256 of its files' `path, size, sha1:<content>` lines, in path
    order, whatever order their hashes finish in: the rows a ledger already holds still match."""
    paths = []
    for i in range(5):
        path = tmp_path / f"part-{i}.csv"
        rows = range((5 - i) * 40_000)  # biggest first: the hashes finish out of path order
        path.write_bytes(b"id,amount\n" + b"".join(b"%d,%d.5\n" % (k, k) for k in rows))
        paths.append(f"file://{path}")
    lines = [f"{p}\t{os.path.getsize(p[len('file://'):])}\tsha1:"
             + hashlib.sha1(open(p[len("file://"):], "rb").read()).hexdigest() for p in paths]
    files = wap_etl.identify_input(None, list(reversed(paths)))
    assert files.paths == paths
    assert files.ids == [hashlib.sha256(line.encode()).hexdigest()[:16] for line in lines]
    assert files.fingerprint == hashlib.sha256("".join(line + "\n" for line in lines).encode()).hexdigest()


def test_of_several_vanished_local_files_the_first_in_path_order_is_named(tmp_path):
    for name in ("a.csv", "c.csv"):
        (tmp_path / name).write_text("id\n1\n")
    paths = [f"file://{tmp_path / n}" for n in ("a.csv", "b.csv", "c.csv", "d.csv")]
    with pytest.raises(wap_etl.WapError, match=re.escape(f"{paths[1]} changed while this run read it")):
        wap_etl.identify_input(None, paths)


def test_without_a_thread_to_be_had_local_files_are_hashed_in_turn(tmp_path, monkeypatch):
    paths = []
    for i in range(3):
        (tmp_path / f"{i}.csv").write_text(f"id\n{i}\n")
        paths.append(f"file://{tmp_path / f'{i}.csv'}")
    side_by_side = wap_etl.identify_input(None, paths)

    def no_thread(*args, **kwargs):
        raise RuntimeError("can't start new thread")
    monkeypatch.setattr(concurrent.futures.ThreadPoolExecutor, "submit", no_thread)
    assert wap_etl.identify_input(None, paths) == side_by_side


def test_a_local_file_removed_between_its_stamp_and_its_read_is_a_changed_input(tmp_path, monkeypatch):
    (tmp_path / "a.csv").write_text("id\n1\n")
    path, real = f"file://{tmp_path / 'a.csv'}", wap_etl.file_digest

    def removed_first(p, *args, **kwargs):
        os.remove(tmp_path / "a.csv")
        return real(p, *args, **kwargs)
    monkeypatch.setattr(wap_etl, "file_digest", removed_first)
    with pytest.raises(wap_etl.WapError, match=re.escape(f"{path} changed while this run read it")):
        wap_etl.identify_input(None, [path])


def test_same_batch_id_with_bad_input_meanwhile_never_reaches_main(wap, tmp_path):
    assert wap.run([{"id": 0, "amount": 0.0}], checks=POSITIVE)[0] == 0
    gate = tmp_path / "gate"
    gate.mkdir()
    good = wap.cli(ROWS, env=paused(gate, "audit"), checks=POSITIVE, batch_id="day1")
    deadline = time.time() + 300
    while not [n for n in os.listdir(gate) if n.endswith(".audit")]:
        assert good.poll() is None and time.time() < deadline
        time.sleep(0.2)
    # the good run has audited its rows; now a bad run of the same batch id stages and fails
    bad_rows = [{"id": 100 + i, "amount": -1.0} for i in range(3)]
    code, bad, out = finish(wap.cli(bad_rows, checks=POSITIVE, batch_id="day1"))
    assert code == 3 and bad["status"] == "audit_failed", out[-2000:]
    (gate / "go").touch()
    code, report, out = finish(good)
    assert code == 0 and report["status"] == "published", out[-2000:]
    assert wap.ids() == [0, 1, 2, 3, 4, 5]
    assert all(r["amount"] >= 0 for r in wap.rows())
    assert wap.ids(bad["branch"])[-3:] == [100, 101, 102], "the failed run keeps its own branch"


def test_published_batch_rerun_after_snapshot_expiry_is_already_published(wap, spark):
    path = wap.csv(ROWS)
    assert wap.run(path, checks=UNIQUE)[0] == 0
    assert wap.run([{"id": 50, "amount": 5.0}], checks=UNIQUE)[0] == 0
    from datetime import datetime, timedelta, timezone
    later = (datetime.now(timezone.utc) + timedelta(minutes=1)).strftime("%Y-%m-%d %H:%M:%S")
    spark.sql(f"CALL local.system.expire_snapshots(table => '{wap.table}', "
              f"older_than => TIMESTAMP '{later}', retain_last => 1)")
    assert spark.table(f"{wap.sql}.snapshots").count() == 1
    main = wap.refs()["main"]
    code, report = wap.run(path, checks=UNIQUE)
    assert code == 0 and report.status == "already_published"
    assert wap.refs() == {"main": main} and wap.ids() == [1, 2, 3, 4, 5, 50]


def test_rerun_with_the_failing_check_switched_to_drop_quarantines_the_rows(wap, spark):
    path = wap.csv(ROWS + [{"id": 6, "amount": -6.0}])
    check = {"check": "between", "column": "amount", "min": 0, "name": "positive"}
    code, failed = wap.run(path, checks=[check], batch_id="d1")
    assert code == 3
    code, report = wap.run(path, checks=[dict(check, action="drop")], batch_id="d1")
    assert code == 0 and report.status == "published"
    assert report.staged_snapshot != failed.staged_snapshot, "staged afresh, not resumed"
    assert wap.ids() == [1, 2, 3, 4, 5]
    quarantined = spark.table(f"{wap.sql}_quarantine").collect()
    assert [(r["id"], r["_wap_failed_checks"]) for r in quarantined] == [(6, ["positive"])]


class Crash(Exception):
    pass


def crash_after_the_write(step):
    if step == "write":
        raise Crash("killed after the write")


def ledger_write_fails(self, rows):
    raise RuntimeError("ledger unavailable")


def test_resume_needs_the_same_config(wap, monkeypatch):
    from pyspark.sql import functions as F
    path = wap.csv(ROWS)
    monkeypatch.setattr(wap_etl, "fault_point", crash_after_the_write)
    code, first = wap.run(path, checks=UNIQUE, batch_id="b1")
    assert code == 1 and wap.ids(first.branch) == [1, 2, 3, 4, 5]
    monkeypatch.setattr(wap_etl, "fault_point", lambda step: None)
    monkeypatch.setattr(wap_etl, "transform", lambda df: df.withColumn("amount", F.col("amount") * 10))
    code, report = wap.run(path, checks=UNIQUE, batch_id="b1")
    assert code == 0 and report.staged_snapshot != first.staged_snapshot
    assert [r["amount"] for r in wap.rows()] == [10.0, 20.0, 30.0, 40.0, 50.0]


def test_a_snapshot_whose_quarantined_rows_are_gone_is_not_taken_up(wap, spark, monkeypatch):
    """A run dies after its audit, its branch and quarantined row left. A run of the batch under
    other checks stages it afresh, publishes it and tidies the dead run's row away; an operator
    rolls that publish back. A rerun under the first checks finds the dead run's branch on main:
    its snapshot names one quarantined row, and none is left, so it is staged afresh."""
    assert wap.run([{"id": 0, "amount": 0.0}], checks=DROP_NEGATIVE)[0] == 0
    before = wap.refs()["main"]
    path = wap.csv(ROWS + [{"id": 6, "amount": -6.0}])
    with monkeypatch.context() as m:
        m.setattr(wap_etl, "fault_point", crash_after_the_audit)
        code, dead = wap.run(path, checks=DROP_NEGATIVE)
    assert code == 1 and dead.branch in wap.refs() and quarantined(spark, wap) == [(6, dead.run_id)]
    code, other = wap.run(path, checks=DROP_NEGATIVE + UNIQUE)
    assert code == 0 and other.status == "published" and quarantined(spark, wap) == [(6, other.run_id)]
    spark.sql(f"CALL local.system.rollback_to_snapshot('{wap.table}', {before})")
    code, rerun = wap.run(path, checks=DROP_NEGATIVE)
    assert code == 0 and rerun.status == "published" and wap.ids() == [0, 1, 2, 3, 4, 5]
    assert rerun.staged_snapshot != dead.staged_snapshot
    assert quarantined(spark, wap) == [(6, rerun.run_id)] and rerun.rows_dropped == 1


def test_main_rolled_back_between_stage_and_publish_stays_rolled_back(wap, spark, monkeypatch):
    assert wap.run([{"id": 1, "amount": 1.0}], checks=UNIQUE)[0] == 0
    before_bad_batch = wap.refs()["main"]
    assert wap.run([{"id": 2, "amount": 2.0}], checks=UNIQUE)[0] == 0

    def operator_rolls_back(step):
        if step == "audit":
            spark.sql(f"CALL local.system.rollback_to_snapshot('{wap.table}', {before_bad_batch})")
    monkeypatch.setattr(wap_etl, "fault_point", operator_rolls_back)
    code, report = wap.run([{"id": 3, "amount": 3.0}], checks=UNIQUE)
    assert code == 0 and report.status == "published" and report.rebases == 1
    assert wap.ids() == [1, 3], "the rolled-back batch stays gone"


def test_main_moving_during_the_write_is_not_an_error(wap, spark, monkeypatch):
    assert wap.run([{"id": 0, "amount": 0.0}], checks=UNIQUE)[0] == 0

    def another_publish(step):
        if step == "write":
            spark.sql(f"INSERT INTO {wap.sql} VALUES (99, 9.0)")
    monkeypatch.setattr(wap_etl, "fault_point", another_publish)
    code, report = wap.run(ROWS, checks=UNIQUE)
    assert code == 0 and report.status == "published", report.error
    assert wap.ids() == [0, 1, 2, 3, 4, 5, 99]


def test_guard_undo_refuses_when_mains_head_is_another_runs_snapshot(wap, spark, monkeypatch):
    assert wap.run([{"id": 1, "amount": 1.0}], checks=UNIQUE)[0] == 0

    def trap(step):
        if step == "before_write":  # someone turns WAP off: our write goes straight to main
            spark.sql(f"ALTER TABLE {wap.sql} SET TBLPROPERTIES ('write.wap.enabled'='false')")
        if step == "write":  # and another writer commits on top of it before the guard looks
            spark.sql(f"INSERT INTO {wap.sql} VALUES (99, 9.0)")
    monkeypatch.setattr(wap_etl, "fault_point", trap)
    code, report = wap.run([{"id": 2, "amount": 2.0}], checks=UNIQUE)
    assert code == 1 and "NOT undone" in report.error
    head = spark.sql(f"SELECT summary FROM {wap.sql}.snapshots ORDER BY committed_at DESC LIMIT 1").first()[0]
    assert wap.ids() == [1, 2, 99], "the other writer's commit is still on main"
    assert head.get("wap.run_id") is None
    t = wap_etl.TableRef("local", wap.ns, "orders")
    assert wap_etl.undo_write_to_main(spark, t, report.run_id) is False
    assert wap.ids() == [1, 2, 99]


def test_every_snapshot_carries_the_run_identity(wap, spark):
    code, report = wap.run(ROWS, checks=UNIQUE)
    summary = spark.sql(f"SELECT summary FROM {wap.sql}.snapshots").first()[0]
    assert summary["wap.run_id"] == report.run_id and summary["wap.batch_id"] == report.batch_id
    assert summary["wap.input_fingerprint"] == report.input_fingerprint
    assert summary["wap.config_fingerprint"] == report.config_fingerprint
    assert report.branch.startswith(f"audit_{report.batch_id}_")


def test_ledger_records_published_failed_error_and_already_published_runs(wap, spark):
    path = wap.csv(ROWS)
    assert wap.run(path, checks=POSITIVE)[0] == 0
    assert wap.run(path, checks=POSITIVE)[0] == 0
    assert wap.run([{"id": 9, "amount": -9.0}], checks=POSITIVE)[0] == 3
    assert wap.run(wap.csv([{"id": "ten", "amount": 1.0}]), checks=POSITIVE)[0] == 2
    rows = sorted(ledger(wap), key=lambda r: r["started_at"])
    assert [(r["status"], r["exit_code"]) for r in rows] == [
        ("published", 0), ("already_published", 0), ("audit_failed", 3), ("error", 2)]
    assert {r["table_name"] for r in rows} == {wap.sql}
    published, _, failed, error = rows
    assert published["rows_written"] == 5 and published["main_snapshot_after"] == wap.refs()["main"]
    assert published["input_files"] == [f"file://{path}"]
    assert failed["checks"] == [{"name": "between_amount", "check": "between", "action": "fail",
                                 "passed": False, "failing_rows": 1, "observed": None}]
    assert failed["branch"].startswith("audit_") and failed["staged_snapshot"] is not None
    assert "ten" in error["error"] and error["finished_at"] >= error["started_at"]
    assert len({r["run_id"] for r in rows}) == 4


def test_runs_table_parameter_names_the_ledger(wap, spark):
    assert wap.run(ROWS, checks=[], runs_table=f"{wap.ns}.audit_log")[0] == 0
    assert spark.table(f"local.{wap.ns}.audit_log").count() == 1
    assert not spark.catalog.tableExists(f"{wap.sql}_wap_runs")


def test_a_publish_missing_from_the_ledger_is_recorded_before_main_moves_on(wap, spark, monkeypatch):
    real = wap_etl.Ledger.record
    monkeypatch.setattr(wap_etl.Ledger, "record", ledger_write_fails)
    code, first = wap.run(ROWS, checks=[])
    assert code == 0 and first.status == "published" and wap.ids() == [1, 2, 3, 4, 5]
    monkeypatch.setattr(wap_etl.Ledger, "record", real)
    assert wap.run([{"id": 6, "amount": 6.0}], checks=[])[0] == 0
    by_run = {r["run_id"]: r for r in ledger(wap)}
    assert by_run[first.run_id]["status"] == "published"
    assert by_run[first.run_id]["main_snapshot_after"] == first.main_snapshot_after
    assert by_run[first.run_id]["rows_written"] == 5


def test_a_run_reads_the_ledger_once_when_no_publish_is_missing_from_it(wap, monkeypatch):
    assert wap.run(ROWS, checks=[])[0] == 0
    reads, real = [], wap_etl.Ledger.runs
    monkeypatch.setattr(wap_etl.Ledger, "runs", lambda self, *a: reads.append(1) or real(self, *a))
    code, report = wap.run([{"id": 6, "amount": 6.0}], checks=[], report_path=None)
    assert code == 0 and report.status == "published"
    assert len(reads) == 1, "the publish and the closing row used what the run had read"
    assert len(ledger(wap)) == 2, "a row each, none recorded for another run"


def test_a_publish_recorded_while_the_run_ran_is_not_recorded_again(wap, spark, monkeypatch):
    real = wap_etl.Ledger.record
    monkeypatch.setattr(wap_etl.Ledger, "record", ledger_write_fails)
    code, first = wap.run(ROWS, checks=[])  # published; its ledger row is missing
    assert code == 0 and first.status == "published"
    monkeypatch.setattr(wap_etl.Ledger, "record", real)
    ledger_ref = wap_etl.TableRef("local", wap.ns, "orders_wap_runs")

    def the_first_run_records_itself_late(step):  # after this run read the ledger
        if step == "audit":
            wap_etl.Ledger(spark, ledger_ref, f"local.{wap.table}").record([wap_etl.ledger_row(first)])
    monkeypatch.setattr(wap_etl, "fault_point", the_first_run_records_itself_late)
    code, second = wap.run([{"id": 6, "amount": 6.0}], checks=[])
    assert code == 0 and second.status == "published"
    rows = ledger(wap)
    assert sorted(r["run_id"] for r in rows) == sorted([first.run_id, second.run_id])
    assert all(r["error"] is None for r in rows), "nothing was recorded for another run"


def test_a_resumed_publish_is_recorded_once_in_the_ledger(wap, monkeypatch):
    path = wap.csv(ROWS)
    monkeypatch.setattr(wap_etl, "fault_point", crash_after_the_write)
    code, crashed = wap.run(path, checks=UNIQUE, batch_id="b1")
    assert code == 1
    staged = wap.refs()[crashed.branch]
    monkeypatch.setattr(wap_etl, "fault_point", lambda step: None)
    code, resumed = wap.run(path, checks=UNIQUE, batch_id="b1")
    assert code == 0 and resumed.status == "published" and resumed.staged_snapshot == staged
    assert [r["run_id"] for r in ledger(wap) if r["status"] == "published"] == [resumed.run_id]


def test_a_resumed_publish_whose_ledger_row_was_lost_is_recorded_under_its_publisher(wap, spark, monkeypatch):
    path = wap.csv(ROWS)
    monkeypatch.setattr(wap_etl, "fault_point", crash_after_the_write)
    code, crashed = wap.run(path, checks=UNIQUE, batch_id="b1")  # an error row for the crashed run
    assert code == 1
    monkeypatch.setattr(wap_etl, "fault_point", lambda step: None)
    real = wap_etl.Ledger.record
    monkeypatch.setattr(wap_etl.Ledger, "record", ledger_write_fails)
    code, resumed = wap.run(path, checks=UNIQUE, batch_id="b1")  # published; its ledger row is lost
    assert code == 0 and resumed.status == "published"
    monkeypatch.setattr(wap_etl.Ledger, "record", real)
    assert wap.run([{"id": 9, "amount": 9.0}], checks=UNIQUE)[0] == 0  # records the lost publish first
    runs = wap_etl.Ledger(spark, wap_etl.TableRef("local", wap.ns, "orders_wap_runs"), f"local.{wap.table}")
    # the publish is recorded under the run that made it (the property names it), once
    assert [r["status"] for r in runs.recent(10) if r["run_id"] == resumed.run_id] == ["published"]
    assert [r["status"] for r in runs.recent(10) if r["run_id"] == crashed.run_id] == ["error"]
    recorded = [r for r in ledger(wap) if r["main_snapshot_after"] == resumed.main_snapshot_after]
    assert [(r["run_id"], r["status"], r["rows_written"]) for r in recorded] == [
        (resumed.run_id, "published", 5)]


def test_new_source_files_are_each_published_exactly_once(wap, tmp_path):
    from conftest import write_csv
    folder = tmp_path / "incoming"
    for day, ids in enumerate([[1, 2], [3], [4, 5, 6]]):
        write_csv(folder / f"day{day}.csv", [{"id": i, "amount": float(i)} for i in ids])
        code, report = wap.run(str(folder), checks=UNIQUE, source_files="new", source_format="csv")
        assert code == 0 and report.status == "published", report.error
        assert len(report.input_files) == 1 and report.input_files[0].endswith(f"day{day}.csv")
    assert wap.ids() == [1, 2, 3, 4, 5, 6]
    code, report = wap.run(str(folder), checks=UNIQUE, source_files="new", source_format="csv")
    assert code == 0 and report.status == "nothing_to_publish"
    assert wap.ids() == [1, 2, 3, 4, 5, 6]


@pytest.mark.parametrize("format_given", [True, False])
def test_a_new_files_folder_emptied_after_its_loads_has_nothing_to_publish(wap, tmp_path, format_given):
    """Files archived once loaded leave the landing folder empty on a day without delivery: that
    is nothing new (exit 0), not bad input; the next delivery is loaded."""
    from conftest import write_csv
    folder, fmt = tmp_path / "landing", {"source_format": "csv"} if format_given else {}
    write_csv(folder / "day0.csv", [{"id": 1, "amount": 1.0}])
    assert wap.run(str(folder), checks=UNIQUE, source_files="new", **fmt)[0] == 0
    os.remove(folder / "day0.csv")
    code, report = wap.run(str(folder), checks=UNIQUE, source_files="new", **fmt)
    assert code == 0 and report.status == "nothing_to_publish", report.error
    write_csv(folder / "day1.csv", [{"id": 2, "amount": 2.0}])
    code, report = wap.run(str(folder), checks=UNIQUE, source_files="new", **fmt)
    assert code == 0 and report.status == "published" and wap.ids() == [1, 2], report.error


def test_a_new_files_prefix_with_no_object_left_lists_no_file(spark, tmp_path):
    """An S3 prefix whose every object was archived no longer exists for Hadoop's listing, which
    raises FileNotFoundException there (as for a local folder gone): no file is new."""
    assert wap_etl.list_source_files(spark, str(tmp_path / "gone")) == []


GLUE_ERA_SESSION = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from pyspark.sql import SparkSession
import wap_etl
jar, warehouse = sys.argv[2:4]
spark = (SparkSession.builder.master("local[1]").config("spark.jars", jar)
         .config("spark.sql.extensions", wap_etl.ICEBERG_EXTENSIONS).config("spark.ui.enabled", "false")
         .config("spark.sql.catalog.local", "org.apache.iceberg.spark.SparkCatalog")
         .config("spark.sql.catalog.local.type", "hadoop")
         .config("spark.sql.catalog.local.warehouse", warehouse)
         .config("spark.sql.catalog.local.cache-enabled", "false").getOrCreate())
"""
GLUE_ERA_EXPIRY = GLUE_ERA_SESSION + """
source, second, repair = (sys.argv[4:7] + [""])[:3]
args = ["--table", "ns.orders", "--catalog", "local", "--checks", "[]"]
code, first = wap_etl.run(args + ["--source_path", source, "--batch_id", "b0"])
assert code == 0
wap_etl.fault_point = lambda step: step == "audit" and spark.sql("INSERT INTO local.ns.orders VALUES (50, 5.0)")
code, report = wap_etl.run(args + ["--source_path", second, "--batch_id", "b1"])
table = wap_etl.iceberg_table(spark, wap_etl.TableRef("local", "ns", "orders"))
if repair:  # the README's repair of a rebased publish: roll back past the bad commit, pick its source
    staged = table.snapshot(report.main_snapshot_after).summary().get("source-snapshot-id")
    spark.sql(f"CALL local.system.rollback_to_snapshot('ns.orders', {first.main_snapshot_after})")
    spark.sql(f"CALL local.system.cherrypick_snapshot('ns.orders', {staged})")
    wap_etl.fault_point = lambda step: None
    code, again = wap_etl.run(args + ["--source_path", second, "--batch_id", "b1"])
    assert code == 0 and again.status == "already_published", again.error
    table = wap_etl.iceberg_table(spark, wap_etl.TableRef("local", "ns", "orders"))
refs = sorted(str(n) for n in table.refs().keySet())
table.expireSnapshots().expireOlderThan(int(time.time() * 1000) + 60000).retainLast(1).commit()
try:
    rows = len(spark.table("local.ns.orders").collect())  # reads every data file
except Exception as e:
    rows = "unreadable: " + str(e).splitlines()[0][:200]
print("RESULT " + json.dumps({"code": code, "rebases": report.rebases, "refs": refs, "rows": rows}))
"""


def glue_era_iceberg_jar(cache):
    """Iceberg 1.9.2's runtime (from PyPI): its snapshot expiry cleans up incrementally when main
    is the only ref, exactly as 1.7.1 on Glue 5.0 does (1.10 switched to a safer rule)."""
    import glob
    import subprocess
    import sys
    import zipfile
    jars = glob.glob(str(cache / "*-runtime-3.5_2.12-1.9.2.jar"))
    if not jars:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(cache),
                        "snowpark-connect-deps-iceberg==1.0.1"], check=True, timeout=600)
        wheel = glob.glob(str(cache / "snowpark_connect_deps_iceberg-1.0.1-*.whl"))[0]
        with zipfile.ZipFile(wheel) as z:
            name = "snowpark_connect_deps_iceberg/jars/iceberg-spark-runtime-3.5_2.12-1.9.2.jar"
            (cache / os.path.basename(name)).write_bytes(z.read(name))
        jars = glob.glob(str(cache / "*-runtime-3.5_2.12-1.9.2.jar"))
    return jars[0]


def test_rebased_batch_survives_snapshot_expiry_by_the_java_api(tmp_path_factory, tmp_path):
    """Engines other than Spark's procedures (Trino, Athena, Flink, a Java job) expire snapshots
    with Iceberg's Java API, which deletes the files that an expired, non-ancestor snapshot added,
    unless a snapshot on main names it as its source. A rebase leaves exactly such a snapshot."""
    import subprocess
    import sys
    jar = glue_era_iceberg_jar(tmp_path_factory.getbasetemp() / "glue_era_jar")
    from conftest import ROOT, write_csv
    source = write_csv(tmp_path / "rows.csv", ROWS)
    second = write_csv(tmp_path / "more.csv", [{"id": 10 + r["id"], "amount": r["amount"]} for r in ROWS])
    done = subprocess.run([sys.executable, "-c", GLUE_ERA_EXPIRY, ROOT, jar, str(tmp_path / "wh"), source,
                           second],
                          capture_output=True, text=True, timeout=600)
    lines = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
    assert lines, done.stderr[-3000:]
    result = json.loads(lines[0][len("RESULT "):])
    assert result["code"] == 0 and result["rebases"] == 1 and result["refs"] == ["main"]
    assert result["rows"] == 11, "every published row is still readable after the expiry"


def test_a_rebased_publish_repaired_by_picking_its_source_survives_expiry_by_the_java_api(tmp_path_factory, tmp_path):
    """The README's repair of a rebased publish: roll main back past a bad commit and cherry-pick
    the publish's `source-snapshot-id` (the audited snapshot). Picking the rebased snapshot itself
    would leave the audited one, whose files both share, unprotected from Java's expiry."""
    import subprocess
    import sys
    jar = glue_era_iceberg_jar(tmp_path_factory.getbasetemp() / "glue_era_jar")
    from conftest import ROOT, write_csv
    source = write_csv(tmp_path / "rows.csv", ROWS)
    second = write_csv(tmp_path / "more.csv", [{"id": 10 + r["id"], "amount": r["amount"]} for r in ROWS])
    done = subprocess.run([sys.executable, "-c", GLUE_ERA_EXPIRY, ROOT, jar, str(tmp_path / "wh"), source,
                           second, "repair"], capture_output=True, text=True, timeout=600)
    lines = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
    assert lines, done.stderr[-3000:]
    result = json.loads(lines[0][len("RESULT "):])
    assert result["refs"] == ["main"], "main the only ref: Java's incremental clean-up"
    assert result["rows"] == 10, "both batches readable after the expiry, the bad commit gone"


KEPT_BRANCH_EXPIRY = GLUE_ERA_SESSION + """
import conftest
source, failing, second = sys.argv[4:7]
ref = wap_etl.TableRef("local", "ns", "orders")
args = ["--table", "ns.orders", "--catalog", "local", "--branch_retention_days", "1"]
assert wap_etl.run(args + ["--checks", "[]", "--source_path", source, "--batch_id", "b0"])[0] == 0
failed = json.dumps([{"check": "between", "column": "amount", "max": 0}])
assert wap_etl.run(args + ["--checks", failed, "--source_path", failing, "--batch_id", "bad"])[0] == 3
conftest.age_table(spark, ref, 2)  # two days later: the kept branch is older than its retention
wap_etl.fault_point = lambda step: step == "audit" and spark.sql("INSERT INTO local.ns.orders VALUES (50, 5.0)")
code, report = wap_etl.run(args + ["--checks", "[]", "--source_path", second, "--batch_id", "b1"])
table = wap_etl.iceberg_table(spark, ref)
before = [str(n) for n in table.operations().refresh().refs().keySet()]  # in the order expiry reads them
table.expireSnapshots().expireOlderThan(int(time.time() * 1000) + 60000).retainLast(1).commit()
after = sorted(str(n) for n in wap_etl.iceberg_table(spark, ref).refs().keySet())
try:
    rows = len(spark.table("local.ns.orders").collect())  # reads every data file
except Exception as e:
    rows = "unreadable: " + str(e).splitlines()[0][:200]
print("RESULT " + json.dumps({"code": code, "rebases": report.rebases, "before": before, "after": after,
                              "rows": rows}))
"""


def test_a_kept_branch_never_leaves_main_to_javas_expiry_with_the_wrong_history(tmp_path_factory, tmp_path):
    """A failed audit's branch, kept, then older than its retention; a later batch rebased on a
    moved main (its files added by a snapshot off main, named as the source); then Java's expiry.
    Had the expiry itself removed the aged branch, main would be the only ref left and Java's
    incremental clean-up would follow the first ref it read before: the branch, half the time by
    the refs' hash order, whose history lacks the rebased publish, so its files would be deleted.
    The job's next run drops the aged branch itself; the expiry then only ever sees main."""
    import subprocess
    import sys
    jar = glue_era_iceberg_jar(tmp_path_factory.getbasetemp() / "glue_era_jar")
    from conftest import ROOT, write_csv
    for attempt in range(8):  # until the refs' order would have let the branch lead the clean-up
        work = tmp_path / str(attempt)
        csvs = [write_csv(work / f"{name}.csv", [{"id": base + r["id"], "amount": r["amount"]} for r in ROWS])
                for name, base in (("rows", 0), ("bad", 20), ("more", 10))]
        done = subprocess.run([sys.executable, "-c", KEPT_BRANCH_EXPIRY, ROOT, jar, str(work / "wh")] + csvs,
                              capture_output=True, text=True, timeout=600)
        lines = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
        assert lines, done.stderr[-3000:]
        result = json.loads(lines[0][len("RESULT "):])
        if result["before"][0] != "main" or result["before"] == result["after"]:
            break
    assert result["code"] == 0 and result["rebases"] == 1
    assert result["rows"] == 11, "every published row is still readable after the expiry"


def test_a_run_whose_branch_is_dropped_between_its_decision_and_its_rebase_decides_again(wap, spark, monkeypatch):
    """Main moved, so it decided to rebase; before the rebase its snapshot reached main (here an
    operator's cherry-pick, which drops the branch as a publish of the batch would). It decides
    again on what main holds, never failing on the missing branch nor publishing a second copy.
    (A live run's snapshot published by hand before its ledger row is taken for an unaudited
    write: the README's known limit.)"""
    assert wap.run(ROWS[:1], checks=UNIQUE)[0] == 0

    def main_moves_then_the_snapshot_is_picked(step):
        if step == "audit":
            spark.sql(f"INSERT INTO {wap.sql} VALUES (50, 5.0)")
        if step == "decided":
            monkeypatch.setattr(wap_etl, "fault_point", lambda step: None)
            [(branch, head)] = [(n, i) for n, i in wap.refs().items() if n.startswith("audit_")]
            spark.sql(f"CALL local.system.cherrypick_snapshot('{wap.table}', {head})")
            spark.sql(f"ALTER TABLE {wap.sql} DROP BRANCH `{branch}`")
    monkeypatch.setattr(wap_etl, "fault_point", main_moves_then_the_snapshot_is_picked)
    code, report = wap.run(ROWS[1:], checks=UNIQUE)
    assert code == 1 and "that no publish recorded" in report.error, report.error
    assert wap.ids() == [1, 2, 3, 4, 5, 50]


def test_a_shared_ledger_keeps_tables_apart(wap, spark):
    shared = f"{wap.ns}.all_runs"
    assert wap.run(ROWS, checks=[], batch_id="2024-06-01", runs_table=shared)[0] == 0
    other = wap_etl.run(wap.args(wap.csv(ROWS), table=f"{wap.ns}.payments", checks=[],
                                 batch_id="2024-06-01", runs_table=shared))
    assert other[0] == 0 and other[1].status == "published"
    assert spark.table(f"local.{wap.ns}.payments").count() == 5
    tables = sorted(r[0] for r in spark.table(f"local.{shared}").select("table_name").collect())
    assert tables == [f"local.{wap.ns}.orders", f"local.{wap.ns}.payments"]


def test_published_batch_quarantine_holds_only_the_publishing_runs_rows(wap, spark):
    drop = {"check": "between", "column": "amount", "min": 0, "action": "drop"}
    unique = {"check": "unique", "columns": ["id"]}
    first = [{"id": 1, "amount": -1.0}, {"id": 2, "amount": 2.0}, {"id": 2, "amount": 3.0}]
    code, failed = wap.run(first, checks=[drop, unique], batch_id="b1")
    assert code == 3 and failed.rows_dropped == 1
    code, report = wap.run([{"id": 3, "amount": -3.0}, {"id": 4, "amount": 4.0}], checks=[drop, unique],
                           batch_id="b1")
    assert code == 0 and report.status == "published"
    rows = [(r["id"], r["_wap_run_id"]) for r in spark.table(f"{wap.sql}_quarantine").collect()]
    assert rows == [(3, report.run_id)]


def test_a_publish_whose_commit_outcome_was_lost_tidies_the_quarantine_as_any_publish(wap, spark, monkeypatch):
    """The catalog's answer to the swap is lost (a timeout after it landed): the run decides again,
    finds its own snapshot on main, and ends published, with the batch's quarantine its own."""
    drop = {"check": "between", "column": "amount", "min": 0, "action": "drop"}
    code, failed = wap.run([{"id": 1, "amount": -1.0}, {"id": 2, "amount": 2.0}, {"id": 2, "amount": 3.0}],
                           checks=[drop, {"check": "unique", "columns": ["id"]}], batch_id="b1")
    assert code == 3 and failed.rows_dropped == 1
    real = wap_etl.swap_main

    def answer_lost(*args):
        real(*args)
        raise wap_etl.CommitConflict("CommitStateUnknownException")
    monkeypatch.setattr(wap_etl, "swap_main", answer_lost)
    code, report = wap.run([{"id": 3, "amount": -3.0}, {"id": 4, "amount": 4.0}], checks=[drop], batch_id="b1")
    assert code == 0 and report.status == "published" and wap.ids() == [4]
    assert quarantined(spark, wap) == [(3, report.run_id)]


def test_a_publish_whose_lost_commit_failed_while_a_rerun_published_its_snapshot_ends_already_published(
        wap, spark, monkeypatch):
    """Its swap's answer is lost and the swap did not land; meanwhile a rerun of the batch took its
    snapshot up and published it. The snapshot on main is this run's, the publish is not: it ends
    already_published, and the ledger holds one publish of the batch."""
    assert wap.run([{"id": 0, "amount": 0.0}], checks=UNIQUE)[0] == 0
    path, real, other = wap.csv(ROWS), wap_etl.swap_main, []

    def lost_while_a_rerun_publishes(*args):
        if other:
            return real(*args)  # the rerun's own swap
        other.append(None)
        other[0] = wap.run(path, checks=UNIQUE, batch_id="b1")
        raise wap_etl.CommitConflict("CommitStateUnknownException")
    steps = []
    monkeypatch.setattr(wap_etl, "swap_main", lost_while_a_rerun_publishes)
    monkeypatch.setattr(wap_etl, "fault_point", steps.append)
    code, report = wap.run(path, checks=UNIQUE, batch_id="b1")
    assert other[0][1].status == "published" and "resumed" in steps, "the rerun took the snapshot up"
    assert code == 0 and report.status == "already_published", report.error
    runs = [r["run_id"] for r in ledger(wap) if r["batch_id"] == "b1" and r["status"] == "published"]
    assert runs == [other[0][1].run_id] and wap.ids() == [0, 1, 2, 3, 4, 5]


def test_guard_ends_already_published_when_another_run_published_this_runs_snapshot(wap, spark,
                                                                                   monkeypatch):
    assert wap.run([{"id": 0, "amount": 0.0}], checks=UNIQUE)[0] == 0
    path, other = wap.csv(ROWS), []

    def a_rerun_resumes_and_publishes_it(step):  # a second run of the batch, while this one waits
        if step == "write" and not other:
            other.append(wap.run(path, checks=UNIQUE, batch_id="b1"))
    monkeypatch.setattr(wap_etl, "fault_point", a_rerun_resumes_and_publishes_it)
    code, report = wap.run(path, checks=UNIQUE, batch_id="b1")
    (other_code, other_report), = other
    assert other_code == 0 and other_report.status == "published"
    assert other_report.staged_snapshot == report.staged_snapshot, "it resumed this run's snapshot"
    assert code == 0 and report.status == "already_published", report.error
    assert wap.ids() == [0, 1, 2, 3, 4, 5], "the legitimate publish stays on main, once"


def test_guard_undoes_a_write_that_reached_main_when_wap_was_off_and_the_branch_is_gone(wap, spark,
                                                                                       monkeypatch):
    assert wap.run([{"id": 0, "amount": 0.0}], checks=UNIQUE)[0] == 0

    def trap(step):
        if step == "before_write":  # WAP turned off: the write goes straight to main
            spark.sql(f"ALTER TABLE {wap.sql} SET TBLPROPERTIES ('write.wap.enabled'='false')")
        if step == "write":  # and someone drops the run's branch
            branch = next(n for n in wap.refs() if n.startswith("audit_"))
            spark.sql(f"ALTER TABLE {wap.sql} DROP BRANCH `{branch}`")
    monkeypatch.setattr(wap_etl, "fault_point", trap)
    code, report = wap.run(ROWS, checks=UNIQUE)
    assert code == 1 and "write.wap.enabled" in report.error and "taken off main" in report.error
    assert wap.ids() == [0], "the unaudited rows are off main"


def crash_after_the_audit(step):
    if step == "audit":
        raise Crash("killed after the audit")


def test_a_publish_of_a_taken_up_snapshot_it_rebased_drops_the_crashed_runs_branch(wap, spark, monkeypatch):
    """The crashed run's branch still heads the snapshot the rerun took up and rebased: left there
    it would outlive main's copy of those files, which Iceberg's Java expiry then deletes once main
    is the only ref. The publish drops it."""
    assert wap.run(ROWS, checks=[])[0] == 0
    path = wap.csv([{"id": 7, "amount": 7.0}])
    monkeypatch.setattr(wap_etl, "fault_point", crash_after_the_audit)
    code, crashed = wap.run(path, checks=[], batch_id="b7")
    assert code == 1 and crashed.branch in wap.refs()
    steps = []

    def main_moves_during_the_audit(step):
        steps.append(step)
        if step == "audit":
            spark.sql(f"INSERT INTO {wap.sql} VALUES (100, 1.0)")
    monkeypatch.setattr(wap_etl, "fault_point", main_moves_during_the_audit)
    code, rerun = wap.run(path, checks=[], batch_id="b7")
    assert code == 0 and rerun.status == "published" and rerun.rebases == 1 and "resumed" in steps
    assert wap.ids() == [1, 2, 3, 4, 5, 7, 100] and set(wap.refs()) == {"main"}


CDC = {"mode": "merge", "merge_keys": "id", "delete_condition": "s.op = 'D'", "batch_id": "cdc1"}


def test_a_resumed_delete_only_merge_publishes_its_deletes(wap):
    assert wap.run(ROWS, checks=[])[0] == 0
    path = wap.csv([{"id": i, "amount": float(i), "op": "D"} for i in (1, 2, 3)])
    proc = wap.cli(path, env={"WAP_FAULT_AFTER": "audit"}, checks=[], **CDC)
    out, _ = proc.communicate(timeout=400)
    assert proc.returncode == 137, out[-3000:]
    (branch, staged), = [(n, s) for n, s in wap.refs().items() if n.startswith("audit_")]
    code, report = wap.run(path, checks=[], **CDC)
    assert code == 0 and report.status == "published", report.error
    assert report.staged_snapshot == staged, "the crashed run's snapshot, resumed"
    assert report.rows_deleted == 3 and (report.rows_inserted, report.rows_updated) == (0, 0)
    assert wap.ids() == [4, 5] and wap.refs()["main"] == staged


def test_a_resumed_merge_whose_kept_rows_change_nothing_leaves_its_quarantined_rows_once(wap, spark):
    """The batch's one kept row deletes a key main does not hold: nothing to publish, yet not every
    row was dropped. The rerun that takes the killed run's snapshot up drops what it dropped, so it
    ends quarantined with those rows as its own, once."""
    assert wap.run(ROWS, checks=[])[0] == 0
    path = wap.csv([{"id": 8, "amount": -8.0, "op": "U"}, {"id": 9, "amount": 9.0, "op": "D"}])
    proc = wap.cli(path, env={"WAP_FAULT_AFTER": "audit"}, checks=DROP_NEGATIVE, **CDC)
    out, _ = proc.communicate(timeout=400)
    assert proc.returncode == 137, out[-3000:]
    code, report = wap.run(path, checks=DROP_NEGATIVE, **CDC)
    assert code == 0 and report.status == "quarantined", report.error
    assert quarantined(spark, wap) == [(8, report.run_id)] and wap.ids() == [1, 2, 3, 4, 5]


def deletes_made_inserts_when_asked(df):
    """A transform whose output is not a function of its input (the clock, another table, an
    environment variable, as here): with WAP_TEST_INSERTS set, a row deleting a key becomes one
    inserting the next key."""
    from pyspark.sql import functions as F
    if not os.environ.get("WAP_TEST_INSERTS"):
        return df
    delete = F.col("op") == "D"
    return df.select(*[F.when(delete, F.col("id") + 1).otherwise(F.col("id")).cast(f.dataType).alias("id")
                       if f.name == "id" else F.when(delete, F.lit("U")).otherwise(F.col("op")).alias("op")
                       if f.name == "op" else F.col(f.name) for f in df.schema.fields])


def test_a_rerun_whose_kept_rows_differ_from_the_taken_up_snapshots_stages_them(wap, spark, monkeypatch):
    """The crashed run kept one row that changes nothing (a delete of a key main lacks) and
    quarantined the other; by the rerun the transform makes it an insert of another key, the same
    counts. Consuming the batch whole with the snapshot that changes nothing would lose the
    insert: a rerun that keeps rows stages them afresh and publishes them."""
    assert wap.run(ROWS, checks=[])[0] == 0
    path = wap.csv([{"id": 8, "amount": -8.0, "op": "U"}, {"id": 9, "amount": 9.0, "op": "D"}])
    monkeypatch.setattr(wap_etl, "transform", deletes_made_inserts_when_asked)
    monkeypatch.setattr(wap_etl, "fault_point", crash_after_the_audit)
    code, crashed = wap.run(path, checks=DROP_NEGATIVE, **CDC)
    assert code == 1 and crashed.rows_dropped == 1 and crashed.staged_snapshot is not None
    monkeypatch.setattr(wap_etl, "fault_point", lambda step: None)
    monkeypatch.setenv("WAP_TEST_INSERTS", "1")
    code, report = wap.run(path, checks=DROP_NEGATIVE, **CDC)
    assert code == 0 and report.status == "published", report.error
    assert wap.ids() == [1, 2, 3, 4, 5, 10] and quarantined(spark, wap) == [(8, report.run_id)]


def key_left_out_when_asked(df):
    """A transform whose output is not a function of its input: with WAP_TEST_LEAVE_OUT set, the
    row of key 7 is left out."""
    from pyspark.sql import functions as F
    return df.filter(F.col("id") != 7) if os.environ.get("WAP_TEST_LEAVE_OUT") else df


def test_a_resumed_merge_audits_every_row_its_snapshot_wrote_whatever_the_batch_is_now(wap, monkeypatch):
    """The crashed run merged key 7 with no amount; by the rerun the transform leaves key 7 out.
    The rerun takes up the snapshot, and its audit judges the rows the snapshot wrote, key 7's
    too, not the batch as it is now: the NULL amount fails the audit instead of reaching main."""
    assert wap.run(ROWS, checks=[])[0] == 0
    path = wap.csv([{"id": 6, "amount": 6.0}, {"id": 7, "amount": None}])
    not_null = [{"check": "not_null", "column": "amount"}]
    monkeypatch.setattr(wap_etl, "transform", key_left_out_when_asked)

    def crash_after_the_write(step):
        if step == "write":
            raise Crash("killed after the write")
    monkeypatch.setattr(wap_etl, "fault_point", crash_after_the_write)
    code, crashed = wap.run(path, checks=not_null, mode="merge", merge_keys="id")
    assert code == 1 and crashed.staged_snapshot is None
    monkeypatch.setattr(wap_etl, "fault_point", lambda step: None)
    monkeypatch.setenv("WAP_TEST_LEAVE_OUT", "1")
    code, report = wap.run(path, checks=not_null, mode="merge", merge_keys="id")
    assert code == wap_etl.EXIT_AUDIT_FAILED and report.staged_snapshot == wap.refs()[crashed.branch], report.error
    assert wap.ids() == [1, 2, 3, 4, 5]


def test_a_merge_that_kept_no_rows_is_consumed_whole_at_once_though_main_moved(wap, spark, monkeypatch):
    """Every row quarantined, nothing to merge: main moving meanwhile cannot change that, so it is
    consumed as quarantined whole without staging again (which --max_publish_retries 0 forbids)."""
    assert wap.run(ROWS, checks=[])[0] == 0

    def main_moved(step):
        if step == "audit":
            spark.sql(f"INSERT INTO {wap.sql} (id, amount) VALUES (50, 50.0)")
    monkeypatch.setattr(wap_etl, "fault_point", main_moved)
    code, report = wap.run([{"id": 8, "amount": -8.0, "op": "U"}, {"id": 9, "amount": -9.0, "op": "D"}],
                           checks=DROP_NEGATIVE, max_publish_retries="0", **CDC)
    assert code == 0 and report.status == "quarantined" and report.rebases == 0, report.error
    assert sorted(quarantined(spark, wap)) == [(8, report.run_id), (9, report.run_id)]
    assert wap.ids() == [1, 2, 3, 4, 5, 50]


@soak  # its kind stays in the default run: test_a_merge_whose_deletes_change_nothing_stages_again_when_main_gains_their_keys
def test_a_merge_whose_kept_deletes_change_nothing_stages_again_when_main_gains_their_keys(wap, spark, tmp_path):
    """Its one kept row deletes a key main lacked when it staged (every other row quarantined);
    meanwhile another batch inserts that key. Consuming the batch as quarantined whole would
    leave the row it deletes: it stages again on the new main and publishes the delete."""
    assert wap.run(ROWS, checks=[])[0] == 0
    path = wap.csv([{"id": 8, "amount": -8.0, "op": "U"}, {"id": 9, "amount": 9.0, "op": "D"}])
    gate = tmp_path / "gate"
    gate.mkdir()
    proc = wap.cli(path, env=paused(gate, "audit"), checks=DROP_NEGATIVE, **CDC)
    wait_paused(gate, "audit", proc)  # staged: a snapshot that changes nothing
    assert wap.run([{"id": 9, "amount": 9.0}], checks=[])[0] == 0
    (gate / "go").touch()
    code, report, out = finish(proc)
    assert code == 0 and report["status"] == "published", out[-2000:]
    assert wap.ids() == [1, 2, 3, 4, 5] and quarantined(spark, wap) == [(8, report["run_id"])]


def test_a_new_files_run_whose_file_another_run_published_meanwhile_leaves_no_quarantined_rows(wap, spark, tmp_path):
    """It staged two new files; meanwhile another run publishes one of them. It can never publish
    (exit 1, rerun): its branch and the rows it quarantined go, so the rerun that loads the other
    file leaves each bad row in the quarantine once."""
    folder = tmp_path / "incoming"
    write_csv(folder / "f1.csv", [{"id": 1, "amount": 1.0}, {"id": 11, "amount": -11.0}])
    write_csv(folder / "f2.csv", [{"id": 2, "amount": 2.0}, {"id": 12, "amount": -12.0}])
    new = {"source_files": "new", "source_format": "csv"}
    gate = tmp_path / "gate"
    gate.mkdir()
    proc = wap.cli(str(folder), env=paused(gate, "audit"), checks=DROP_NEGATIVE, **new)
    wait_paused(gate, "audit", proc)  # staged f1 and f2, its rows 11 and 12 quarantined
    code, first = wap.run(str(folder / "f1.csv"), checks=DROP_NEGATIVE)
    assert code == 0 and first.status == "published"
    (gate / "go").touch()
    code, report, out = finish(proc)
    assert code == 1 and "rerun to load the rest" in out, out[-2000:]
    assert report["branch"] not in wap.refs()
    code, rerun = wap.run(str(folder), checks=DROP_NEGATIVE, **new)
    assert code == 0 and rerun.status == "published" and wap.ids() == [1, 2]
    assert sorted(quarantined(spark, wap)) == [(11, first.run_id), (12, rerun.run_id)]


def test_a_new_files_run_never_loads_a_path_published_and_uploaded_again_after_it_listed(wap, tmp_path, monkeypatch):
    """It lists two new files; before it reads them another run publishes one and the producer
    uploads that file again, corrected (a new identity; on S3 the same bytes uploaded in parts
    are one too). With --source_files new a path is loaded once, as the listing would have said a
    moment later: the run publishes nothing (exit 1, rerun for the rest), and the rerun loads
    only the other file."""
    folder = tmp_path / "incoming"
    write_csv(folder / "f1.csv", [{"id": 1, "amount": 1.0}])
    write_csv(folder / "f2.csv", [{"id": 2, "amount": 2.0}])
    new = {"source_files": "new", "source_format": "csv"}
    listed = wap_etl.select_source_files

    def others_publish_and_upload_f1_again(*args):
        files = listed(*args)
        code, first, out = finish(wap.cli(str(folder / "f1.csv"), checks=[]))
        assert code == 0 and first["status"] == "published", out[-2000:]
        write_csv(folder / "f1.csv", [{"id": 1, "amount": 1.5}])  # a corrected file: a new identity
        return files
    monkeypatch.setattr(wap_etl, "select_source_files", others_publish_and_upload_f1_again)
    code, report = wap.run(str(folder), checks=[], **new)
    assert code == 1 and "rerun to load the rest" in report.error and wap.ids() == [1]
    monkeypatch.setattr(wap_etl, "select_source_files", listed)
    code, rerun = wap.run(str(folder), checks=[], **new)
    assert code == 0 and rerun.status == "published" and wap.ids() == [1, 2]


@soak  # its kind stays in the default run: test_a_new_files_run_whose_file_another_run_published_meanwhile_leaves_no_quarantined_rows
def test_a_new_files_run_that_took_up_a_crashed_runs_snapshot_and_lost_a_file_leaves_no_quarantined_rows(
        wap, spark, tmp_path, monkeypatch):
    """As above, with the crashed run's snapshot taken up: its rows go too, since no run can ever
    consume that batch now."""
    folder = tmp_path / "incoming"
    write_csv(folder / "f1.csv", [{"id": 1, "amount": 1.0}, {"id": 11, "amount": -11.0}])
    write_csv(folder / "f2.csv", [{"id": 2, "amount": 2.0}, {"id": 12, "amount": -12.0}])
    new = {"source_files": "new", "source_format": "csv"}
    monkeypatch.setattr(wap_etl, "fault_point", crash_after_the_audit)
    code, crashed = wap.run(str(folder), checks=DROP_NEGATIVE, **new)
    assert code == 1 and crashed.rows_dropped == 2
    monkeypatch.setattr(wap_etl, "fault_point", lambda step: None)
    gate = tmp_path / "gate"
    gate.mkdir()
    proc = wap.cli(str(folder), env=paused(gate, "audit"), checks=DROP_NEGATIVE, **new)
    wait_paused(gate, "audit", proc)  # it took up the crashed run's snapshot and rows
    code, first = wap.run(str(folder / "f1.csv"), checks=DROP_NEGATIVE)
    assert code == 0 and first.status == "published"
    (gate / "go").touch()
    code, report, out = finish(proc)
    assert code == 1 and "rerun to load the rest" in out and "resum" in out, out[-2000:]
    code, rerun = wap.run(str(folder), checks=DROP_NEGATIVE, **new)
    assert code == 0 and rerun.status == "published" and wap.ids() == [1, 2]
    assert sorted(quarantined(spark, wap)) == [(11, first.run_id), (12, rerun.run_id)]


def test_a_merge_whose_deletes_change_nothing_stages_again_when_main_gains_their_keys(wap, tmp_path):
    """No check drops a row: its one row deletes a key main lacked when it staged, and meanwhile
    another batch inserts that key. Ending with nothing to publish would lose the delete (and,
    exit 0, its rerun): it stages again on the new main and publishes the delete."""
    assert wap.run(ROWS, checks=[])[0] == 0
    path = wap.csv([{"id": 9, "amount": 9.0, "op": "D"}])
    gate = tmp_path / "gate"
    gate.mkdir()
    proc = wap.cli(path, env=paused(gate, "audit"), checks=[], **CDC)
    wait_paused(gate, "audit", proc)  # staged: a snapshot that changes nothing
    assert wap.run([{"id": 9, "amount": 9.0}], checks=[])[0] == 0
    (gate / "go").touch()
    code, report, out = finish(proc)
    assert code == 0 and report["status"] == "published", out[-2000:]
    assert wap.ids() == [1, 2, 3, 4, 5]


def test_a_merge_that_changes_nothing_on_an_unmoved_main_has_nothing_to_publish(wap):
    assert wap.run(ROWS, checks=[])[0] == 0
    main = wap.refs()["main"]
    code, report = wap.run(wap.csv([{"id": 9, "amount": 9.0, "op": "D"}]), checks=[], **CDC)
    assert code == 0 and report.status == "nothing_to_publish" and report.main_snapshot_after == main
    assert wap.ids() == [1, 2, 3, 4, 5] and wap.refs() == {"main": main}


def test_a_resumed_upsert_merge_reports_the_counts_of_an_uninterrupted_run(wap, monkeypatch):
    assert wap.run(ROWS, checks=[])[0] == 0
    path = wap.csv([{"id": 1, "amount": 10.0, "op": "U"}, {"id": 2, "amount": 20.0, "op": "U"},
                    {"id": 9, "amount": 9.0, "op": "I"}])
    monkeypatch.setattr(wap_etl, "fault_point", crash_after_the_audit)
    code, crashed = wap.run(path, checks=[], **CDC)
    assert code == 1 and crashed.staged_snapshot is not None
    monkeypatch.setattr(wap_etl, "fault_point", lambda step: None)
    code, resumed = wap.run(path, checks=[], **CDC)
    assert code == 0 and resumed.status == "published" and resumed.staged_snapshot == crashed.staged_snapshot
    counts = (resumed.rows_inserted, resumed.rows_updated, resumed.rows_deleted)
    assert counts == (crashed.rows_inserted, crashed.rows_updated, crashed.rows_deleted) == (1, 2, 0)
    assert {r["id"]: r["amount"] for r in wap.rows()} == {1: 10.0, 2: 20.0, 3: 3.0, 4: 4.0, 5: 5.0, 9: 9.0}
