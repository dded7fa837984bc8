"""A real Spark standalone cluster from the pyspark package: a master and two workers on 127.0.0.1,
executors in their own JVMs, as on Glue. The job must not rely on sharing a process with them."""
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from conftest import soak

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def master_state(ui_port):
    """The standalone master's own JSON view (workers, applications), or {} while it starts."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as answer:
            return json.loads(answer.read())
    except OSError:
        return {}


def wait_for(condition, what, timeout=120):
    deadline = time.time() + timeout
    while not condition():
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """(master URL, master UI port) of a master and two 1-core workers; stopped afterwards."""
    import pyspark
    home = os.path.dirname(pyspark.__file__)
    spark_class = os.path.join(home, "bin", "spark-class")
    logs = tmp_path_factory.mktemp("cluster")
    env = dict(os.environ, SPARK_HOME=home, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable)
    port, ui = free_port(), free_port()

    def start(name, *args):
        return subprocess.Popen([spark_class, *args], stdout=open(logs / f"{name}.log", "w"),
                                stderr=subprocess.STDOUT, env=env)

    procs = [start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                   "--port", str(port), "--webui-port", str(ui))]
    try:
        wait_for(lambda: master_state(ui), "the master")
        procs += [start(f"worker{i}", "org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}",
                        "--host", "127.0.0.1", "--cores", "1", "--memory", "1g",
                        "--webui-port", str(free_port()), "--work-dir", str(logs / f"work{i}"))
                  for i in range(2)]
        wait_for(lambda: master_state(ui).get("aliveworkers") == 2, "two workers")
        yield f"spark://127.0.0.1:{port}", ui
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


def run_job(master, warehouse, source, *args):
    """Exit code, report and log of one run of the job as its own process, on the cluster."""
    env = dict(os.environ, WAP_SPARK_MASTER=master, PYSPARK_PYTHON=sys.executable)
    done = subprocess.run([sys.executable, os.path.join(ROOT, "wap_etl.py"), "--source_path", source,
                           "--table", "shop.orders", "--catalog", "local", "--warehouse", warehouse,
                           *args], capture_output=True, text=True, env=env, timeout=600)
    line = [x for x in done.stderr.splitlines() if "WAP_REPORT " in x]
    assert line, done.stderr[-4000:]
    return done.returncode, json.loads(line[-1].split("WAP_REPORT ", 1)[1]), done.stderr


@soak
def test_job_runs_end_to_end_on_a_standalone_cluster(cluster, spark, tmp_path):
    master, ui = cluster
    warehouse = str(tmp_path / "warehouse")
    day1, day2 = tmp_path / "day1.csv", tmp_path / "day2.csv"
    day1.write_text("id,amount,status\n1,5.0,new\n2,6.0,paid\n3,-7.0,paid\n")
    day2.write_text("id,amount,status\n4,8.0,new\n5,6.0,lost\n1,1.0,new\n")
    checks = [{"check": "not_null", "column": "id"}, {"check": "unique", "columns": ["id"]},
              {"check": "between", "column": "amount", "min": 0, "action": "drop"},
              {"check": "accepted_values", "column": "status", "values": ["new", "paid"]}]
    code, report, err = run_job(master, warehouse, str(day1), "--checks", json.dumps(checks))
    assert code == 0 and report["status"] == "published" and report["rows_dropped"] == 1, err[-3000:]
    code, report, err = run_job(master, warehouse, str(day2), "--checks", json.dumps(checks))
    assert code == 3 and report["status"] == "audit_failed", err[-3000:]
    failing = {c["name"]: c["failing_rows"] for c in report["checks"]}
    assert failing["accepted_values_status"] == 1 and failing["unique_id"] == 1

    apps = master_state(ui).get("completedapps", [])
    assert len(apps) == 2 and all(a["cores"] == 2 for a in apps), "each run used both workers' executors"
    spark.conf.set("spark.sql.catalog.cluster_wh", "org.apache.iceberg.spark.SparkCatalog")
    spark.conf.set("spark.sql.catalog.cluster_wh.type", "hadoop")
    spark.conf.set("spark.sql.catalog.cluster_wh.warehouse", warehouse)
    spark.conf.set("spark.sql.catalog.cluster_wh.cache-enabled", "false")
    assert sorted(r[0] for r in spark.table("cluster_wh.shop.orders").select("id").collect()) == [1, 2]
    assert [r[0] for r in spark.table("cluster_wh.shop.orders_quarantine").select("id").collect()] == [3]
    statuses = sorted(r[0] for r in spark.table("cluster_wh.shop.orders_wap_runs").select("status").collect())
    assert statuses == ["audit_failed", "published"]
