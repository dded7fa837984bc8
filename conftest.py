"""Shared fixtures: one local SparkSession with Iceberg for the whole run, a namespace per test."""
import contextlib
import csv
import glob
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wap_etl  # noqa: E402

CATALOG = "local"
# Long soak runs (a real standalone cluster, four concurrent writers, every benchmark mode, the
# proof property test at full length) run with WAP_SOAK=1; the default suite keeps one of each
# kind of race and crash, so it stays near 15 minutes on two cores.
SOAK = os.environ.get("WAP_SOAK") == "1"
soak = pytest.mark.skipif(not SOAK, reason="a long soak run: set WAP_SOAK=1")
ROOT = os.path.dirname(os.path.abspath(__file__))
_counter = itertools.count()
# The processes tests start (the CLI, crashes, races) each run a JVM for seconds: compiled by C1
# alone it spends far less CPU compiling, and on two cores these tests take ~23% less time. The
# shared session, alive for the whole suite, keeps the JVM's defaults (C1 alone: ~70% slower).
CHILD_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"
CHILD_SUBMIT_ARGS = f"--driver-java-options '{CHILD_JAVA_OPTIONS}' pyspark-shell"
os.environ.setdefault("PYSPARK_SUBMIT_ARGS", CHILD_SUBMIT_ARGS)


def share_child_classes():
    """Start every child JVM from a class-data archive that one small run of the job wrote.

    Loading and verifying Spark's, Iceberg's and Parquet's classes is most of a child's start;
    mapped from a JVM archive instead (Java's dynamic CDS) a child starts ~3 s sooner, and the
    suite spawns over a hundred. The archive is kept in the temp directory for later runs; the
    JVM checks it against its own version and class path and quietly ignores one that does not
    match, so at worst a child starts as it would have. Only tests' children use it."""
    global CHILD_SUBMIT_ARGS
    import hashlib
    import pyspark
    import tempfile
    if os.environ.get("PYSPARK_SUBMIT_ARGS") != CHILD_SUBMIT_ARGS or re.search(r"\s", tempfile.gettempdir()):
        return  # the caller chose its own child options; or a path the options cannot quote
    jars = sorted(glob.glob(os.path.join(os.path.dirname(pyspark.__file__), "jars", "*.jar")))
    jars.append(wap_etl.find_iceberg_jar() or "")
    key = hashlib.sha256(repr([(j, os.path.getmtime(j) if j else 0) for j in jars]
                              + [os.environ.get("JAVA_HOME"), shutil.which("java"), sys.version]).encode())
    archive = os.path.join(tempfile.gettempdir(), f"wap_etl_tests_{key.hexdigest()[:16]}.jsa")
    if not os.path.exists(archive):
        if os.path.exists(archive + ".failed") or not write_class_archive(archive):
            return
    CHILD_SUBMIT_ARGS = (f"--driver-java-options '{CHILD_JAVA_OPTIONS} -XX:SharedArchiveFile={archive} "
                         "-Xlog:cds*=off' pyspark-shell")
    os.environ["PYSPARK_SUBMIT_ARGS"] = CHILD_SUBMIT_ARGS


def write_class_archive(archive, timeout=600):
    """One run of the job on three rows in a JVM that writes the classes it loaded to `archive` as
    it exits (after its Python parent has: hence waiting for the whole process group). False, and
    a `.failed` mark so later sessions do not try again, if it fails or outlasts `timeout`."""
    import signal
    import tempfile
    work, dump = tempfile.mkdtemp(prefix="wap_etl_cds_"), f"{archive}.{os.getpid()}"
    args = ["--source_path", write_csv(os.path.join(work, "in.csv"), ORDERS), "--table", "cds.orders",
            "--catalog", CATALOG, "--warehouse", work, "--report_path", work, "--checks", json.dumps(
                [{"check": "not_null", "column": "id"}, {"check": "unique", "columns": ["id"]},
                 {"check": "between", "column": "amount", "min": 0}])]
    env = dict(os.environ, WAP_SPARK_MASTER="local[1]", PYSPARK_SUBMIT_ARGS=(
        f"--driver-java-options '{CHILD_JAVA_OPTIONS} -XX:ArchiveClassesAtExit={dump} -Xlog:cds*=off' pyspark-shell"))
    job = subprocess.Popen([sys.executable, os.path.join(ROOT, "wap_etl.py")] + args, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline, alive = time.monotonic() + timeout, True
    try:
        while alive and time.monotonic() < deadline:
            job.poll()
            try:
                os.killpg(job.pid, 0)
            except ProcessLookupError:
                alive = False
            except OSError:
                break
            time.sleep(0.2)
        if alive:
            try:
                os.killpg(job.pid, signal.SIGKILL)
            except OSError:
                pass
            job.wait()
        ok = not alive and job.returncode == 0 and os.path.exists(dump)
        if ok:
            os.replace(dump, archive)
            # other class paths' archives (older venvs'), ~160 MB each, go once a day old (a JVM
            # that maps one keeps its pages)
            for old in glob.glob(os.path.join(os.path.dirname(archive), "wap_etl_tests_*.jsa*")):
                try:
                    if old != archive and os.path.getmtime(old) < time.time() - 86400:
                        os.remove(old)
                except OSError:
                    pass
        else:
            open(archive + ".failed", "w").close()
        return ok
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if os.path.exists(dump):
            os.remove(dump)


@pytest.fixture(scope="session")
def warehouse(tmp_path_factory):
    return str(tmp_path_factory.mktemp("warehouse"))


@pytest.fixture(scope="session")
def spark(warehouse):
    from pyspark.sql import SparkSession
    jar = wap_etl.find_iceberg_jar()
    assert jar, "snowpark-connect-deps-iceberg is not installed; pip install -r requirements-dev.txt"
    share_child_classes()
    children = (os.environ.pop("PYSPARK_SUBMIT_ARGS")  # not for this long-lived JVM
                if os.environ.get("PYSPARK_SUBMIT_ARGS") == CHILD_SUBMIT_ARGS else None)
    builder = (
        SparkSession.builder.master("local[2]").appName("wap_etl_tests")
        .config("spark.jars", jar)
        .config("spark.sql.extensions", wap_etl.ICEBERG_EXTENSIONS)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.session.timeZone", "UTC")
        .config(f"spark.sql.catalog.{CATALOG}", "org.apache.iceberg.spark.SparkCatalog")
        .config(f"spark.sql.catalog.{CATALOG}.type", "hadoop")
        .config(f"spark.sql.catalog.{CATALOG}.warehouse", warehouse)
        .config(f"spark.sql.catalog.{CATALOG}.cache-enabled", "false")
    )
    try:
        session = builder.getOrCreate()
    finally:
        if children is not None:
            os.environ["PYSPARK_SUBMIT_ARGS"] = children
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def records_read(spark, action, group="measured"):
    """Run action(); return (its result, the records its Spark jobs read from files), from Spark's
    own status store (what the UI shows as a stage's input)."""
    group = f"{group}-{next(_counter)}"  # the tracker remembers a group's jobs for the whole session
    sc = spark.sparkContext
    sc.setJobGroup(group, group)
    try:
        result = action()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    sc._jsc.sc().listenerBus().waitUntilEmpty()
    store, tracker, stages = sc._jsc.sc().statusStore(), sc.statusTracker(), set()
    for job in tracker.getJobIdsForGroup(group):
        stages.update(tracker.getJobInfo(job).stageIds)
    read = 0
    for stage in stages:
        data = store.lastStageAttempt(stage)
        if data.status().toString() == "COMPLETE":
            read += data.inputRecords()
    return result, read


@contextlib.contextmanager
def session_conf(spark, settings):
    """The shared session with `settings` for the block, then as it was before (set or unset)."""
    before = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            spark.conf.unset(key) if value is None else spark.conf.set(key, value)


def wait_paused(gate, step, proc, timeout=300):
    """Wait until the run's process is held at `step`."""
    deadline = time.time() + timeout
    while not any(n.endswith("." + step) and not n.startswith("go") for n in os.listdir(gate)):
        assert proc.poll() is None and time.time() < deadline, proc.stdout.read()[-3000:]
        time.sleep(0.2)


def age_table(spark, ref, days):
    """Make a table as it would be had it been written `days` ago: every commit time in its
    metadata (snapshots, snapshot log, metadata log) moved back by `days`, committed as the next
    metadata version. Iceberg and the job then read those times as they would a real old table's:
    snapshot expiry ages refs by the real clock against them (RemoveSnapshots: now - head's
    timestampMillis > max-ref-age), and commit times cannot be set any other way."""
    jvm = spark.sparkContext._jvm
    ops = wap_etl.iceberg_table(spark, ref).operations()
    base = ops.refresh()
    metadata = json.loads(jvm.org.apache.iceberg.TableMetadataParser.toJson(base))
    shift = int(days * 86_400_000)
    metadata["last-updated-ms"] -= shift
    for entry in metadata.get("snapshots", []) + metadata.get("snapshot-log", []) + metadata.get("metadata-log", []):
        entry["timestamp-ms"] -= shift
    ops.commit(base, jvm.org.apache.iceberg.TableMetadataParser.fromJson(json.dumps(metadata)))


def write_csv(path, rows, columns=None):
    """Write dict rows as a CSV file with a header; None becomes an empty field."""
    columns = columns or list(rows[0].keys())
    os.makedirs(os.path.dirname(str(path)), exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(columns)
        for r in rows:
            w.writerow(["" if r.get(c) is None else r.get(c) for c in columns])
    return str(path)


class Wap:
    """Runs the job against one test's own namespace and reads the table back."""

    def __init__(self, spark, warehouse, namespace, tmp_path):
        self.spark, self.warehouse, self.ns, self.tmp = spark, warehouse, namespace, tmp_path
        self.table = f"{namespace}.orders"
        self.reports = str(tmp_path / "reports")
        self._files = itertools.count()

    @property
    def sql(self):
        return f"{CATALOG}.{self.table}"

    def csv(self, rows, columns=None, name=None):
        name = name or f"batch{next(self._files)}.csv"
        return write_csv(self.tmp / "in" / name, rows, columns)

    def args(self, source, extra=(), **params):
        """The job's argv: `--name value` for each param, then `extra` tokens as they are."""
        params.setdefault("table", self.table)
        params.setdefault("catalog", CATALOG)
        params.setdefault("warehouse", self.warehouse)
        params.setdefault("report_path", self.reports)
        argv = ["--source_path", source]
        for k, v in params.items():
            if v is not None:
                argv += [f"--{k}", v if isinstance(v, str) else wap_etl.json.dumps(v)]
        return argv + list(extra)

    def run(self, source, **params):
        """(exit code, report) of one in-process run; `source` is a path or a list of dict rows."""
        if isinstance(source, list):
            source = self.csv(source)
        return wap_etl.run(self.args(source, **params))

    def cli(self, source, env=None, **params):
        """Run the job as its own process, as Glue or a scheduler would."""
        if isinstance(source, list):
            source = self.csv(source)
        full_env = dict(os.environ, WAP_SPARK_MASTER="local[1]", **(env or {}))
        return subprocess.Popen([sys.executable, os.path.join(ROOT, "wap_etl.py")] + self.args(source, **params),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=full_env)

    def refs(self):
        if not self.exists():
            return {}
        return {r[0]: r[1] for r in self.spark.sql(f"SELECT name, snapshot_id FROM {self.sql}.refs").collect()}

    def exists(self):
        return self.spark.catalog.tableExists(self.sql)

    def rows(self, ref=None, order="id"):
        """Rows of main (or of a branch) as dicts, sorted."""
        df = self.spark.read.format("iceberg")
        if ref:
            df = df.option("branch", ref)
        return [r.asDict() for r in df.load(self.sql).orderBy(order).collect()]

    def ids(self, ref=None):
        return [r["id"] for r in self.rows(ref)]

    def wap_branch_conf(self):
        return self.spark.conf.get("spark.wap.branch", None)


@pytest.fixture
def ns(request):
    """A namespace of this test's own, so tests never see each other's tables."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", request.node.name)[:60]
    return f"t{next(_counter)}_{name}"


@pytest.fixture
def wap(spark, warehouse, ns, tmp_path):
    return Wap(spark, warehouse, ns, tmp_path)


@pytest.fixture
def aws(monkeypatch):
    """boto3 against moto in this process: no credentials or endpoint of the machine's."""
    from moto import mock_aws
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_SESSION_TOKEN": "testing", "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        yield


ORDERS = [
    {"id": 1, "customer": "ann", "amount": 10.5, "status": "new"},
    {"id": 2, "customer": "bob", "amount": 20.0, "status": "paid"},
    {"id": 3, "customer": "cid", "amount": 7.25, "status": "paid"},
]


@pytest.fixture
def orders():
    return [dict(r) for r in ORDERS]
