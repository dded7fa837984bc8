"""The last DQDL forms: dynamic values on Completeness and FileUniqueness, DetectAnomalies on
ColumnLength, ColumnValues and CustomSql, the ColumnValues analyzer, and the file rules' tags
(recentFiles, uriRegex, filterOrder, matchFileName); each through the real job."""
import os
import shutil
import time

import pytest

import wap_etl
from conftest import soak, wait_paused, write_csv

DAY = 86400


def rows(n, start=0, carrier="AA", amount=1.0):
    return [{"id": start + i, "carrier": carrier, "amount": amount} for i in range(n)]


def folder(wap, *contents, name="src", names=None):
    """A source folder of CSV files, one per list of rows."""
    path = wap.tmp / name
    for i, part in enumerate(contents):
        write_csv(path / (names[i] if names else f"part{i}.csv"), part)
    return str(path)


def age(path, days):
    then = time.time() - days * DAY
    os.utime(path, (then, then))


# ----- dynamic values ---------------------------------------------------------------------------

def test_completeness_with_a_dynamic_value_fails_when_completeness_drops_below_its_history(wap):
    rules = 'Rules = [ Completeness "carrier" >= avg(last(3)) - 0.1 ]'
    for i in range(3):
        code, report = wap.run(rows(10, 100 * i), checks=rules)
        assert code == 0, report.checks
    worse = rows(10, 900)
    for r in worse[:5]:
        r["carrier"] = None
    code, report = wap.run(worse, checks=rules)
    r = report.checks[0]
    assert code == 3 and r["observed"] == 0.5 and r["history"] == 3
    assert r["metric"] == "completeness:carrier"


def test_completeness_with_a_dynamic_value_passes_within_its_history(wap):
    rules = 'Rules = [ Completeness "carrier" >= avg(last(3)) - 0.1 ]'
    for i in range(2):
        assert wap.run(rows(10, 100 * i), checks=rules)[0] == 0
    almost = rows(10, 900)
    almost[0]["carrier"] = None
    code, report = wap.run(almost, checks=rules)
    assert code == 0 and report.checks[0]["observed"] == 0.9, report.checks


def test_fileuniqueness_with_a_dynamic_value_compares_with_past_publishes(wap):
    rules = "Rules = [ FileUniqueness >= min(last(3)) ]"
    for i in range(2):
        source = folder(wap, rows(2, 10 * i), rows(2, 10 * i + 5), name=f"day{i}")
        code, report = wap.run(source, checks=rules)
        assert code == 0 and report.checks[0]["observed"] == 1.0, report.checks
    source = folder(wap, rows(2, 50), rows(2, 50), rows(2, 55), name="day9")
    code, report = wap.run(source, checks=rules)
    r = report.checks[0]
    assert code == 3 and r["observed"] == pytest.approx(1 / 3, abs=1e-6) and r["history"] == 2


def test_a_dynamic_rule_inside_a_composite_compares_with_past_publishes(wap):
    rules = 'Rules = [ (RowCount >= avg(last(2)) * 0.5) AND (IsComplete "id") ]'
    for i in range(2):
        assert wap.run(rows(10, 100 * i), checks=rules)[0] == 0
    code, report = wap.run(rows(3, 900), checks=rules)
    assert code == 3 and report.checks[0]["rules"][0]["history"] == 2, report.checks


# held before it stages, main not compacted: the compacted case's path, less the compaction (soak)
@pytest.mark.parametrize("step, rebases, compacted", [("audit", 1, False), pytest.param("stage", 0, False, marks=soak),
                                                      ("stage", 0, True)],
                         ids=["held_after_its_audit", "held_before_it_stages", "held_before_it_stages_main_compacted"])
def test_a_dynamic_rule_is_judged_against_a_publish_made_after_the_run_read_the_ledger(wap, spark, monkeypatch, step,
                                                                                        rebases, compacted):
    """Another run publishes (and records) 100 rows after this run read the ledger. Held after its
    audit passed (6 rows > half the last three publishes' 10), the run is rebased and judged
    again; held just before it stages, it stages on that publish (or on a compaction after it)
    and reads the ledger again. Against that history it fails, and main keeps none."""
    rules = "Rules = [ RowCount > avg(last(3)) * 0.5 ]"
    for i in range(3):
        assert wap.run(rows(10, 100 * i), checks=rules)[0] == 0

    def a_bigger_batch_published_meanwhile(at):
        if at == step:
            monkeypatch.setattr(wap_etl, "fault_point", lambda step: None)
            other = wap.cli(rows(100, 1000), checks=rules)
            out, _ = other.communicate(timeout=400)
            assert other.returncode == 0, out[-2000:]
            if compacted:  # a maintenance commit on main, naming no run
                spark.sql(f"CALL local.system.rewrite_data_files(table => '{wap.table}', "
                          "options => map('min-input-files', '2', 'rewrite-all', 'true'))")
    monkeypatch.setattr(wap_etl, "fault_point", a_bigger_batch_published_meanwhile)
    code, report = wap.run(rows(6, 900), checks=rules)
    assert report.rebases == rebases
    if compacted:
        assert spark.sql(f"SELECT operation FROM {wap.sql}.snapshots WHERE snapshot_id = "
                         f"{report.main_snapshot_before}").first()[0] == "replace", "staged on the compaction"
    assert code == 3 and report.status == "audit_failed", report.checks
    assert report.checks[0]["expected"] == "> 20" and report.checks[0]["history"] == 3
    assert not any(900 <= i < 1000 for i in wap.ids()), "main holds none of the batch"


def test_a_file_rule_with_a_dynamic_value_is_audited_again_after_a_rebase_on_the_batchs_own_files(wap, monkeypatch):
    rules = "Rules = [ FileUniqueness >= min(last(3)) ]"
    for i in range(3):
        assert wap.run(folder(wap, rows(2, 10 * i), rows(2, 10 * i + 5), name=f"day{i}"), checks=rules)[0] == 0

    def another_day_published_meanwhile(step):
        if step == "audit":
            monkeypatch.setattr(wap_etl, "fault_point", lambda step: None)
            other = wap.cli(folder(wap, rows(2, 500), rows(2, 505), name="day5"), checks=rules)
            out, _ = other.communicate(timeout=400)
            assert other.returncode == 0, out[-2000:]
    monkeypatch.setattr(wap_etl, "fault_point", another_day_published_meanwhile)
    code, report = wap.run(folder(wap, rows(2, 900), rows(2, 905), name="day9"), checks=rules)
    assert report.rebases == 1, "main moved: the audited rows were rebased"
    assert code == 0 and report.status == "published", report.checks
    assert report.checks[0]["observed"] == 1.0 and report.checks[0]["history"] == 3


def test_a_dynamic_rule_waits_for_the_ledger_row_of_a_publish_main_already_holds(wap, monkeypatch, tmp_path):
    """Another run has published 100 rows, and not yet recorded them, when this run stages on its
    publish: the check waits for that run's ledger row rather than compare without it, and the 6
    rows fail."""
    rules = "Rules = [ RowCount > avg(last(3)) * 0.5 ]"
    for i in range(3):
        assert wap.run(rows(10, 100 * i), checks=rules)[0] == 0
    gate, other = tmp_path / "gate", []
    gate.mkdir()

    def published_not_yet_recorded(step):
        if step == "stage":
            monkeypatch.setattr(wap_etl, "fault_point", lambda step: None)
            other.append(wap.cli(rows(100, 1000), checks=rules,
                                 env={"WAP_PAUSE_AT": "publish", "WAP_PAUSE_DIR": str(gate)}))
            wait_paused(gate, "publish", other[0])  # its commit to main made, its ledger row not yet
    real_wait = wap_etl.await_history

    def recorded_once_this_run_waits(*args):
        (gate / "go").touch()
        return real_wait(*args)
    monkeypatch.setattr(wap_etl, "fault_point", published_not_yet_recorded)
    monkeypatch.setattr(wap_etl, "await_history", recorded_once_this_run_waits)
    code, report = wap.run(rows(6, 900), checks=rules)
    assert other[0].wait(timeout=400) == 0
    assert code == 3 and report.status == "audit_failed", report.checks
    assert report.checks[0]["expected"] == "> 20" and report.checks[0]["history"] == 3


def test_a_dynamic_rule_waits_only_so_long_for_a_run_that_died_before_its_ledger_row(wap, spark, monkeypatch, caplog):
    """The publisher was killed between its commit and its ledger row: the next run waits until
    the limit after that commit, says so, and compares without it; later, such a publish is not
    waited for at all; a publish records that run, and the run after it does not wait."""
    rules = "Rules = [ RowCount > avg(last(3)) * 0.5 ]"
    for i in range(3):
        assert wap.run(rows(10, 100 * i), checks=rules)[0] == 0
    killed = wap.cli(rows(100, 1000), checks=rules, env={"WAP_FAULT_AFTER": "publish"})
    out, _ = killed.communicate(timeout=400)
    assert killed.returncode == 137 and 1000 in wap.ids(), out[-2000:]
    monkeypatch.setattr(wap_etl, "HISTORY_WAIT_SECONDS", 2)
    code, report = wap.run(rows(6, 900), checks=rules, publish="false")
    assert code == 0 and report.status == "staged", report.checks
    assert "has not recorded it in the run ledger" in caplog.text

    p = wap_etl.parse_params(wap.args(wap.csv(rows(1)), checks=rules))
    checks = wap_etl.parse_checks(p.checks)
    ledger = wap_etl.Ledger.of(spark, p, checks)
    ledger.identify(report.table_uuid)
    mark, published_ms = wap_etl.newest_publish(wap_etl.iceberg_table(spark, wap_etl.TableRef(*wap.sql.split("."))))
    assert mark.run_id not in {m.run_id for m in ledger.published()}, "the killed run is still unrecorded"

    def no_wait(seconds):
        raise AssertionError("waited for a publish made an hour ago")
    with monkeypatch.context() as m:
        m.setattr(wap_etl.time, "sleep", no_wait)
        wap_etl.await_history(checks, wap_etl.SnapshotInfo(None, None, {}, (mark, published_ms - 3_600_000)), ledger)

    caplog.clear()
    assert wap.run(rows(6, 900), checks=rules)[0] == 0  # its publish records the killed run's
    caplog.clear()
    assert wap.run(rows(30, 2000), checks=rules)[0] == 0
    assert "has not recorded it in the run ledger" not in caplog.text


@pytest.mark.parametrize("rules", [  # beside a dynamic rule: the dynamic one's path, its value kept (soak)
    pytest.param("Rules = [ (FileSize < 1 MB) AND (RowCount > avg(last(3)) * 0.5) ]", marks=soak),
    "Rules = [ FileUniqueness >= min(last(3)) ]",
], ids=["beside_a_dynamic_rule", "dynamic"])
def test_a_file_rule_rebased_after_its_source_file_was_replaced_keeps_what_it_measured(wap, monkeypatch, rules):
    """A file rule judged the files as the batch read them. After the rebase, the rule beside it is
    audited again and it keeps its verdict; a dynamic one keeps its value under the new history.
    The file is no longer as the batch read it: measured again, it could only fail to be read."""
    for i in range(3):
        assert wap.run(folder(wap, rows(2, 10 * i), rows(2, 10 * i + 5), name=f"day{i}"), checks=rules)[0] == 0
    source = folder(wap, rows(2, 900), rows(2, 905), name="day9")

    def another_day_published_then_a_file_replaced(step):
        if step == "audit":
            other = wap.cli(folder(wap, rows(2, 500), rows(2, 505), name="day5"), checks=rules)
            out, _ = other.communicate(timeout=400)
            assert other.returncode == 0, out[-2000:]
        if step == "decided":  # after the run checked its input was unchanged, before the rebase
            monkeypatch.setattr(wap_etl, "fault_point", lambda step: None)
            write_csv(os.path.join(source, "part0.csv"), rows(3, 950))
    monkeypatch.setattr(wap_etl, "fault_point", another_day_published_then_a_file_replaced)
    code, report = wap.run(source, checks=rules)
    assert report.rebases == 1, "main moved: the audited rows were rebased"
    assert code == 0 and report.status == "published", report.checks
    results = wap_etl.nested_results(report.checks)
    assert all(r["passed"] for r in results) and [r.get("history") for r in results if "history" in r] == [3]
    assert [r["observed"] for r in results if r["check"].startswith("file_")] == [1.0]
    assert sorted(i for i in wap.ids() if i >= 900) == [900, 901, 905, 906]


@pytest.mark.parametrize("rules, metrics", [
    ('Rules = [ RowCount > 0, Completeness "carrier" > 0.5 ]', False),
    ('Rules = [ RowCount > avg(last(3)) * 0.5 ]', True),
    ('Rules = [ (IsComplete "id") OR (RowCount > avg(last(3))) ]', True),
], ids=["no_history", "dynamic", "dynamic_in_a_composite"])
def test_a_run_reads_the_ledger_metrics_of_earlier_runs_only_for_checks_that_compare_with_them(wap, spark, rules, metrics):
    source = wap.csv(rows(10))
    code, report = wap.run(source, checks=rules)
    assert code == 0, report.error
    p = wap_etl.parse_params(wap.args(source, checks=rules))
    ledger = wap_etl.Ledger.of(spark, p, wap_etl.parse_checks(p.checks))
    ledger.identify(report.table_uuid)
    [row] = ledger.consumed()
    assert ("metrics" in row) is metrics and row["rows_written"] == 10
    assert not metrics or row["metrics"]["row_count"] == 10


@pytest.mark.parametrize("rules, published, batch, expected", [
    ("RowCount >= percentile(last(3), 0.5) * 0.5", [10, 14, 12], 5, ">= 6"),
    ("RowCount >= median(last(3))", [10, 12, 30], 11, ">= 12"),
    ("RowCount > last() * 0.9", [20], 17, "> 18"),  # AWS's example: last() is last(1), a number
    ("RowCount >= abs(index(last(2), 0) - index(last(2), 1))", [30, 10], 19, ">= 20"),  # the last change
], ids=["percentile", "median", "last_without_a_count", "abs"])
def test_a_function_of_the_history_bounds_the_row_count(wap, rules, published, batch, expected):
    rules = f"Rules = [ {rules} ]"
    for i, n in enumerate(published):
        assert wap.run(rows(n, 100 * i), checks=rules)[0] == 0
    code, report = wap.run(rows(batch, 900), checks=rules)
    r = report.checks[0]
    assert code == 3 and r["expected"] == expected and r["history"] == len(published), r


def test_a_rolled_back_publish_is_no_history_so_its_rerun_is_not_compared_with_itself(wap, spark):
    assert wap.run(rows(10), checks=[])[0] == 0
    before = wap.refs()["main"]
    assert wap.run(rows(100, 1000), checks=[], batch_id="big")[0] == 0
    spark.sql(f"CALL local.system.rollback_to_snapshot('{wap.table}', {before})")  # an operator's undo
    code, report = wap.run(rows(100, 1000), checks="Rules = [ RowCount <= max(last(3)) * 1.1 ]", batch_id="big")
    r = report.checks[0]
    assert code == 3 and r["history"] == 1 and r["expected"] == "<= 11", r


def test_a_publish_rolled_back_while_the_run_prepares_is_no_history(wap, spark, monkeypatch):
    """The operator's rollback lands after this run read which publishes main holds, before its
    branch is made on main: the history is that of main as the batch is staged on it."""
    assert wap.run(rows(10), checks=[])[0] == 0
    before = wap.refs()["main"]
    assert wap.run(rows(100, 1000), checks=[])[0] == 0

    def operator_rolls_back(step):
        if step == "stage":
            spark.sql(f"CALL local.system.rollback_to_snapshot('{wap.table}', {before})")
    monkeypatch.setattr(wap_etl, "fault_point", operator_rolls_back)
    code, report = wap.run(rows(100, 2000), checks="Rules = [ RowCount <= max(last(3)) * 1.1 ]")
    r = report.checks[0]
    assert code == 3 and r["history"] == 1 and r["expected"] == "<= 11", r


def test_a_rollback_undone_while_the_run_prepares_counts_its_publish_again(wap, spark, monkeypatch):
    assert wap.run(rows(10), checks=[])[0] == 0
    before = wap.refs()["main"]
    assert wap.run(rows(100, 1000), checks=[])[0] == 0
    big = wap.refs()["main"]
    spark.sql(f"CALL local.system.rollback_to_snapshot('{wap.table}', {before})")

    def operator_undoes_the_rollback(step):
        if step == "stage":
            spark.sql(f"CALL local.system.set_current_snapshot('{wap.table}', {big})")
    monkeypatch.setattr(wap_etl, "fault_point", operator_undoes_the_rollback)
    code, report = wap.run(rows(100, 2000), checks="Rules = [ RowCount <= max(last(3)) * 1.1 ]")
    r = report.checks[0]
    assert code == 0 and r["history"] == 2 and r["expected"] == "<= 110", r


def test_a_publish_made_and_rolled_back_while_the_run_prepares_is_no_history(wap, spark, monkeypatch):
    """Another run publishes and records 100 rows after this run read the ledger, and the operator
    rolls them back before this run's branch is made: main is as this run found it, but the rows
    it reads again to catch up with that publish hold it. It is no history."""
    rules = "Rules = [ RowCount <= max(last(3)) * 1.1 ]"
    assert wap.run(rows(10), checks=[])[0] == 0
    before = wap.refs()["main"]

    def published_and_rolled_back(step):
        if step == "stage":
            monkeypatch.setattr(wap_etl, "fault_point", lambda step: None)
            other = wap.cli(rows(100, 1000), checks=[])
            out, _ = other.communicate(timeout=400)
            assert other.returncode == 0 and 1000 in wap.ids(), out[-2000:]
            spark.sql(f"CALL local.system.rollback_to_snapshot('{wap.table}', {before})")
    monkeypatch.setattr(wap_etl, "fault_point", published_and_rolled_back)
    code, report = wap.run(rows(100, 2000), checks=rules)
    r = report.checks[0]
    assert code == 3 and r["history"] == 1 and r["expected"] == "<= 11", r


def test_a_run_whose_main_did_not_move_decides_the_rolled_back_publishes_no_more_often(wap, monkeypatch):
    rules = "Rules = [ RowCount <= max(last(3)) * 1.1 ]"
    assert wap.run(rows(10), checks=rules)[0] == 0
    calls, real = [], wap_etl.consumed_publishes
    monkeypatch.setattr(wap_etl, "consumed_publishes", lambda *a, **k: calls.append(1) or real(*a, **k))
    assert wap.run(rows(10, 100), checks=[])[0] == 0
    without_history, calls[:] = len(calls), []
    assert wap.run(rows(10, 200), checks=rules)[0] == 0
    assert len(calls) == without_history


def test_a_run_row_completed_for_a_publish_later_does_not_hide_the_runs_own_metrics(wap, spark):
    """Another run records a publish whose own ledger row it did not find yet (no metrics, dated
    when it wrote it, here after a later publish); the run's own row, with them, lands too:
    history reads the run's own, in the order the runs finished."""
    rules = 'Rules = [ Mean "amount" >= index(last(2), 0) * 0.9 ]'  # the newest publish's mean
    recorded = 'Analyzers = [ Mean "amount" ]'
    code, first = wap.run(rows(10, amount=8.0), checks=recorded)
    assert code == 0 and wap.run(rows(10, 100, amount=2.0), checks=recorded)[0] == 0
    table = wap_etl.iceberg_table(spark, wap_etl.TableRef("local", wap.ns, "orders"))
    mark = wap_etl.read_mark(table.snapshot(first.main_snapshot_after))
    ledger = wap_etl.Ledger(spark, wap_etl.TableRef("local", wap.ns, "orders_wap_runs"), f"local.{wap.table}")
    ledger.record([wap_etl.ledger_row_of_mark(mark, f"local.{wap.table}", str(table.uuid()))])
    code, report = wap.run(rows(10, 200, amount=1.9), checks=rules)
    r = report.checks[0]
    assert code == 0 and r["history"] == 2 and r["expected"] == ">= 1.8", r


def test_history_of_a_metric_ignores_the_case_of_older_column_names_but_not_of_its_where():
    old = {"metrics": {"mean:Amount": 3.0, "mean:amount where region = 'EU'": 500.0}, "rows_written": 10}
    assert wap_etl.ledger_metric(old, "mean:amount") == 3.0
    assert wap_etl.ledger_metric(old, "mean:amount where region = 'eu'") is None  # other rows


# ----- DetectAnomalies --------------------------------------------------------------------------

def test_detectanomalies_columnlength_flags_a_value_far_longer_than_before(wap):
    rules = 'Rules = [ DetectAnomalies "ColumnLength" "carrier" ]'
    for i in range(3):
        assert wap.run(rows(5, 100 * i), checks=rules)[0] == 0
    code, report = wap.run(rows(5, 900, carrier="A" * 40), checks=rules)
    r = report.checks[0]
    assert code == 3 and [x["metric"] for x in r["rules"]] == ["min_length:carrier", "max_length:carrier"]
    assert all(not x["passed"] for x in r["rules"])


def test_detectanomalies_columnvalues_flags_a_maximum_outlier(wap):
    rules = 'Rules = [ DetectAnomalies "ColumnValues" "amount" ]'
    for i, amount in enumerate([10.0, 11.0, 10.5]):
        assert wap.run(rows(5, 100 * i, amount=amount), checks=rules)[0] == 0
    batch = rows(5, 900, amount=10.0)
    batch[0]["amount"] = 9999.0
    code, report = wap.run(batch, checks=rules)
    [low, high] = report.checks[0]["rules"]
    assert code == 3 and low["passed"] and not high["passed"] and high["observed"] == 9999.0


def test_detectanomalies_customsql_watches_the_query_value(wap):
    rules = 'Rules = [ DetectAnomalies "CustomSql" "select sum(amount) from primary" ]'
    for i, n in enumerate([10, 11, 10]):
        code, report = wap.run(rows(n, 100 * i), checks=rules)
        assert code == 0, report.checks
    code, report = wap.run(rows(60, 900), checks=rules)
    r = report.checks[0]
    assert code == 3 and r["observed"] == 60.0 and r["metric"].startswith("sql:")


def test_columnvalues_analyzer_records_the_minimum_and_maximum(wap, spark):
    code, report = wap.run(rows(3, 1, amount=2.5), checks='Analyzers = [ ColumnValues "id" ]')
    metrics = spark.table(f"local.{wap.ns}.orders_wap_runs").first()["metrics"]
    assert code == 0 and metrics["min:id"] == 1 and metrics["max:id"] == 3


# ----- file rule tags ---------------------------------------------------------------------------

def test_recentfiles_judges_only_the_newest_files(wap):
    source = folder(wap, rows(2), rows(2, 10))
    age(os.path.join(source, "part0.csv"), 5)
    stale = wap.run(source, checks="Rules = [ FileFreshness > (now() - 1 days) ]")
    assert stale[0] == 3
    code, report = wap.run(source, checks="Rules = [ FileFreshness > (now() - 1 days) with recentFiles = 1 ]")
    assert code == 0 and report.checks[0]["failing_rows"] == 0, report.checks


def test_uriregex_judges_only_the_files_whose_path_it_finds(wap):
    source = folder(wap, rows(1), rows(300, 10), names=["small.csv", "big.csv"])
    assert wap.run(source, checks="Rules = [ FileSize < 100 B ]")[0] == 3
    code, report = wap.run(source, checks='Rules = [ FileSize < 100 B with uriRegex = "small\\\\.csv$" ]')
    assert code == 0 and report.checks[0]["observed"] == 1.0, report.checks


def test_filterorder_applies_the_regex_before_recentfiles(wap):
    source = folder(wap, rows(1), rows(300, 10), names=["small.csv", "big.csv"])
    age(os.path.join(source, "small.csv"), 2)  # big.csv is the newest file
    regex_last = 'Rules = [ FileSize < 100 B with recentFiles = 1 with uriRegex = "small" ]'
    regex_first = (regex_last[:-2] + ' with filterOrder in ["uriRegex", "recentFiles"] ]')
    code, report = wap.run(source, checks=regex_last)
    assert code == 3 and "no files" in report.checks[0]["detail"]
    code, report = wap.run(source, checks=regex_first)
    assert code == 0, report.checks


def test_filterorder_written_with_equals_as_aws_pages_write_it(wap):
    source = folder(wap, rows(1), rows(300, 10), names=["small.csv", "big.csv"])
    age(os.path.join(source, "small.csv"), 2)  # big.csv is the newest file
    rules = ('Rules = [ FileSize < 100 B with recentFiles = 1 with uriRegex = "small" '
             'with filterOrder = ["uriRegex", "recentFiles"] ]')
    code, report = wap.run(source, checks=rules)
    assert code == 0, report.checks


@pytest.mark.parametrize("fail_fast, code", [("true", 3), ("false", 0)])
def test_failfast_fails_on_any_failing_file_whatever_the_threshold(wap, fail_fast, code):
    source = folder(wap, rows(1), rows(1, 10), rows(300, 20), names=["a.csv", "b.csv", "big.csv"])
    rules = f'Rules = [ FileSize < 100 B with threshold > 0.5 with failFast = "{fail_fast}" ]'
    got, report = wap.run(source, checks=rules)
    assert got == code and report.checks[0]["failing_rows"] == 1, report.checks


def test_matchfilename_requires_the_same_name_as_well_as_the_same_content(wap):
    source = folder(wap, rows(2), rows(2, 10))
    archive = str(wap.tmp / "archive")
    shutil.copytree(source, archive)
    os.rename(os.path.join(archive, "part0.csv"), os.path.join(archive, "renamed.csv"))
    code, report = wap.run(source, checks=f'Rules = [ FileMatch "{source}/" "{archive}/" '
                                          'with matchFileName = "true" ]')
    assert code == 3 and report.checks[0]["failing_rows"] == 2


def test_a_file_rules_folder_reached_again_by_a_link_is_listed_once(wap):
    """A `latest` link to a dated folder beside it: its files are the rule's once, not twice."""
    source = folder(wap, rows(2), rows(2, 10))
    archive = str(wap.tmp / "archive")
    shutil.copytree(source, os.path.join(archive, "2024-06-01"))
    os.symlink(os.path.join(archive, "2024-06-01"), os.path.join(archive, "latest"))
    code, report = wap.run(source, checks=f'Rules = [ FileMatch "{source}/" "{archive}/" ]')
    assert code == 0, report.checks


def test_a_named_pipe_in_a_file_rules_folder_fails_the_rule_instead_of_hanging(wap):
    source = folder(wap, rows(2))
    other = wap.tmp / "other"
    os.makedirs(other)
    write_csv(other / "a.csv", rows(2))
    os.mkfifo(other / "b.csv")
    code, report = wap.run(source, checks=f'Rules = [ FileUniqueness "{other}/" > 0.5 ]')
    r = report.checks[0]
    assert code == 3 and "b.csv is not a regular file" in r["detail"], r


def test_json_file_rules_take_the_selection_keys(wap):
    source = folder(wap, rows(1), rows(300, 10), names=["small.csv", "big.csv"])
    code, report = wap.run(source, checks=[{"check": "file_size", "max": 100, "uri_regex": "small"}])
    assert code == 0, report.checks


TAG_ERRORS = [
    ("Rules = [ FileSize < 1 MB with recentFiles = 0 ]", "recentFiles = a whole number of files >= 1"),
    ('Rules = [ FileSize < 1 MB with uriRegex = "(" ]', "uriRegex is not a regular expression"),
    ('Rules = [ FileSize < 1 MB with filterOrder in ["uriRegex"] ]', 'filterOrder in ["recentFiles", "uriRegex"]'),
    ('Rules = [ FileMatch in ["ab"] with matchFileName = "true" ]', "matchFileName goes with two paths"),
    ('Rules = [ FileMatch "a/" "b/" with matchFileName = "yes" ]', 'matchFileName = "true" or "false"'),
    ('Rules = [ DetectAnomalies "CustomSql" ]', 'DetectAnomalies "CustomSql" takes one quoted SQL statement'),
    ('Rules = [ FileSize < 1 MB with filterOrder in ["uriRegex", NULL] ]', 'filterOrder in ["recentFiles", "uriRegex"]'),
    ('Rules = [ FileSize < 1 MB with recentFiles = "\u00b2" ]', "recentFiles = a whole number"),
    ("Rules = [ RowCount > percentile(last(3), avg(last(2))) ]", "percentile() takes a list and a fraction"),
    ('Rules = [ FileSize < 1 MB with failFast = "soon" ]', 'failFast = "true" or "false"'),
    ("Rules = [ RowCount > abs(last(2)) ]", "abs() takes a number"),
    ("Rules = [ RowCount > 5 / abs(0) ]", "division by zero"),
    ('Rules = [ FileSize < 1 MB with threshold > 7 with failFast = "true" ]', "a threshold is a number from 0 to 1"),
    ("Rules = [ RowCount > last(2) ]", "expected a number, found a list"),
]


@pytest.mark.parametrize("rules,message", TAG_ERRORS)
def test_bad_tags_exit_2_naming_the_rule_position(wap, rules, message):
    code, report = wap.run(rows(2), checks=rules)
    assert code == 2 and "DQDL line 1" in report.error and message in report.error and not wap.exists()


def test_detectanomalies_columnvalues_on_a_string_column_exits_2(wap):
    code, report = wap.run(rows(2), checks='Rules = [ DetectAnomalies "ColumnValues" "carrier" ]')
    assert code == 2 and "needs a numeric column" in report.error and not wap.exists()


def test_dynamic_completeness_reads_the_null_fraction_analyzers_recorded(wap):
    for i in range(2):
        code, _ = wap.run(rows(10, 100 * i), checks='Rules = [ RowCount > 0 ] Analyzers = [ Completeness "carrier" ]')
        assert code == 0
    worse = rows(10, 900)
    for r in worse[:5]:
        r["carrier"] = None
    code, report = wap.run(worse, checks='Rules = [ Completeness "carrier" >= avg(last(3)) - 0.1 ]')
    r = report.checks[0]
    assert code == 3 and r["history"] == 2 and r["expected"] == ">= 0.9", r


JSON_ERRORS = [
    ({"check": "file_size", "max": 10, "filter_order": [1, "uri_regex"]}, "filter_order must list"),
    ({"check": "file_size", "condition": {"op": "<", "values": ["avg(last(3))"]}}, "not dynamic"),
    ({"check": "anomaly", "metric": "sql", "query": "select 1", "where": "id > 1"}, "where does not apply to metric sql"),
    ({"check": "file_match", "checksums": ["ab"], "match_file_name": True}, "match_file_name goes with compare_path"),
]


@pytest.mark.parametrize("spec,message", JSON_ERRORS)
def test_bad_json_file_and_anomaly_specs_exit_2(wap, spec, message):
    code, report = wap.run(rows(2), checks=[spec])
    assert code == 2 and message in report.error and not wap.exists()


def test_columnvalues_compares_with_a_time_of_today(wap):
    from datetime import datetime, timezone
    today = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    batch = [{"id": 1, "ts": f"{today} 08:00:00"}, {"id": 2, "ts": f"{today} 10:00:00"},
             {"id": 3, "ts": f"{today} 22:00:00"}]
    code, report = wap.run(batch, checks='Rules = [ ColumnValues "ts" between "9:30 AM" and "21:45" ]')
    r = report.checks[0]
    assert code == 3 and r["failing_rows"] == 2, r
