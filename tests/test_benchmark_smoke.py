"""The benchmark at a tiny size, so it keeps working; real numbers come from running it by hand."""
import json
import os
import sys

import wap_etl

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "benchmark"))
import bench_wap  # noqa: E402
from conftest import soak


@soak
def test_benchmark_runs_and_reports_every_measure(tmp_path, spark, monkeypatch):
    monkeypatch.setattr(wap_etl, "transform", wap_etl.transform)  # the bench swaps it per batch
    out, chart = tmp_path / "r.json", tmp_path / "c.png"
    results = bench_wap.main(["--rows", "3000", "--repeats", "1", "--scaling_rows", "500",
                              "--work", str(tmp_path / "work"), "--json", str(out), "--chart", str(chart)])
    assert json.loads(out.read_text()) == json.loads(json.dumps(results))
    assert results["columns"] >= 15 and results["checks"] >= 8
    assert results["wap_over_plain"] > 0 and results["audit_10x_over_1x"] > 0
    assert results["audit_spark_jobs"] >= 1
    assert len(results["audit_profile_seconds"]) == 3
    assert set(results["scaling"]) == {"1x", "10x"}
    assert chart.stat().st_size > 1000


@soak
def test_benchmark_sweep_measures_every_point(tmp_path, spark, monkeypatch):
    monkeypatch.setattr(wap_etl, "transform", wap_etl.transform)
    out, chart = tmp_path / "s.json", tmp_path / "s.png"
    results = bench_wap.main(["--sweep", "2000", "--repeats", "1", "--work", str(tmp_path / "work"),
                              "--json", str(out), "--chart", str(chart)])
    points = {(p["checks"], p["variant"]): p for p in results["sweep"]}
    assert set(points) == {(0, "branch"), (4, "branch"), (8, "branch"), (16, "branch"),
                           (8, "write"), (9, "failing")}
    assert all(p["wap_over_plain"] > 0 and p["audit_seconds"]["median"] >= 0 for p in points.values())
    assert points[(8, "write")]["decided_by"] != points[(8, "branch")]["decided_by"]
    assert chart.stat().st_size > 1000


def steady(tmp_path, monkeypatch, *args):
    """The benchmark's steady state at 10 rows; its JSON holds what it returned."""
    monkeypatch.setattr(wap_etl, "transform", wap_etl.transform)
    out = tmp_path / "steady.json"
    results = bench_wap.main(["--steady", "10", *args, "--work", str(tmp_path / "work"), "--json", str(out)])
    assert json.loads(out.read_text()) == json.loads(json.dumps(results))
    return results


def test_benchmark_steady_state_sets_wap_and_plain_side_by_side(tmp_path, spark, monkeypatch):
    results = steady(tmp_path, monkeypatch, "--ledger_runs", "40", "--repeats", "2")
    points = {p["ledger_runs"]: p for p in results["steady"]}
    assert set(points) == {1, 41}  # the warm-up run's ledger, then 40 earlier runs besides
    for p in points.values():
        assert p["rows"] == 10 and p["wap_over_plain"] > 0
        wap, plain = p["wap"], p["plain"]
        assert set(wap["steps"]) == set(wap_etl.RUN_STEPS + wap_etl.SIDE_STEPS + (wap_etl.OTHER_STEP,))
        assert set(plain["steps"]) == {"read", "write", wap_etl.OTHER_STEP}
        assert all(len(s["runs"]) == 2 for s in list(wap["steps"].values()) + [wap["seconds"]])
        assert plain["iceberg_commits"] == {"read": 0, "write": 1, wap_etl.OTHER_STEP: 0}
        assert plain["spark_jobs"]["write"] >= 1
        assert (wap["iceberg_commits"]["publish"], wap["iceberg_commits"]["ledger"]) == (1, 1)
        assert wap["spark_jobs"]["audit"] >= 1


@soak
def test_benchmark_steady_state_in_fresh_processes_times_each_run_from_outside(tmp_path, spark, monkeypatch):
    results = steady(tmp_path, monkeypatch, "--fresh_processes", "true", "--repeats", "1")
    [p] = results["steady"]
    wap, plain = p["wap"], p["plain"]
    assert p["fresh_processes"] and p["rows"] == 10
    # each side's wall time is the whole process: more than the steps it reports
    assert wap["seconds"]["median"] > sum(s["median"] for s in wap["steps"].values())
    assert plain["seconds"]["median"] > sum(s["median"] for s in plain["steps"].values())
    assert (wap["iceberg_commits"]["publish"], wap["iceberg_commits"]["ledger"]) == (1, 1)
    assert plain["iceberg_commits"]["write"] == 1


def test_benchmark_flights_measures_issue_24s_case_in_pairs(tmp_path, spark, monkeypatch):
    """A new table per run from a CSV read with inferSchema, the 8 checks, pairs of plain and WAP."""
    monkeypatch.setattr(wap_etl, "transform", wap_etl.transform)
    out = tmp_path / "flights.json"
    results = bench_wap.main(["--flights", "3000", "--repeats", "2", "--work", str(tmp_path / "work"),
                              "--json", str(out)])
    assert json.loads(out.read_text()) == json.loads(json.dumps(results))
    p = results["flights"]
    assert p["rows"] == 3000 and p["checks"] == 8 and len(p["pair_ratios"]) == 2
    assert len(p["wap"]["seconds"]["runs"]) == len(p["plain"]["seconds"]["runs"]) == 2
    assert set(p["decided_by"]) == {c.get("name") or wap_etl.parse_checks([c])[0].name
                                    for c in bench_wap.FLIGHTS_CHECKS}
    assert p["wap"]["iceberg_commits"]["publish"] == 1
