"""The benchmark at a tiny size, so it keeps working; real numbers come from running it by hand."""
import json
import os
import sys

import wap_etl

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "benchmark"))
import bench_wap  # noqa: E402


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
