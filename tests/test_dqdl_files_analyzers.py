"""DQDL file rules (FileFreshness, FileSize, FileUniqueness, FileMatch) on the batch's source files,
DetectAnomalies on the run ledger, the Analyzers block (recorded metrics, no verdict) and the
Metadata / DataSources sections: each through the real job."""
import hashlib
import os
import shutil
import time

import pytest

import wap_etl
from conftest import write_csv

ROWS = [{"id": i, "carrier": "AA" if i % 2 else None, "amount": float(i), "status": "paid"}
        for i in range(1, 11)]
DAY = 86400


def results(report):
    return {r["name"]: r for r in report.checks}


def folder(wap, *contents, name="src"):
    """A source folder of CSV files, one per list of rows."""
    path = wap.tmp / name
    for i, rows in enumerate(contents):
        write_csv(path / f"part{i}.csv", rows)
    return str(path)


def age(path, days):
    """Set a file's modification time `days` ago."""
    then = time.time() - days * DAY
    os.utime(path, (then, then))


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def ledger_metrics(spark, wap):
    rows = spark.table(f"local.{wap.ns}.orders_wap_runs").orderBy("started_at").collect()
    return [r["metrics"] for r in rows]


# ----- FileFreshness ----------------------------------------------------------------------------

def test_filefreshness_passes_when_every_source_file_is_newer_than_the_limit(wap):
    code, report = wap.run(ROWS, checks="Rules = [ FileFreshness > (now() - 24 hours) ]")
    assert code == 0, report.checks


def test_filefreshness_fails_when_a_source_file_is_older_than_the_limit(wap):
    path = wap.csv(ROWS)
    age(path, 3)
    code, report = wap.run(path, checks="Rules = [ FileFreshness > (now() - 2 days) ]")
    r = report.checks[0]
    assert code == 3 and r["passed"] is False and r["sample"][0]["file"].endswith(os.path.basename(path))
    assert not wap.ids(), "an audit failure publishes nothing"


def test_filefreshness_threshold_passes_when_enough_files_are_fresh(wap):
    source = folder(wap, ROWS[:5], ROWS[5:])
    age(os.path.join(source, "part0.csv"), 5)
    code, report = wap.run(source, checks="Rules = [ FileFreshness > (now() - 1 days) with threshold > 0.4 ]")
    assert code == 0 and report.checks[0]["observed"] == 0.5, report.checks


def test_filefreshness_between_takes_its_window_either_way_round(wap):
    # Glue's own example writes the later time first: between now() and (now() - 45 minutes)
    path = wap.csv(ROWS)
    code, report = wap.run(path, checks="Rules = [ FileFreshness between now() and (now() - 45 minutes), "
                                        "FileFreshness between (now() - 45 minutes) and now() ]")
    assert code == 0 and [r["passed"] for r in report.checks] == [True, True], report.checks


def test_filefreshness_compares_with_a_date(wap):
    path = wap.csv(ROWS)
    age(path, 400)
    code, report = wap.run(path, checks='Rules = [ FileFreshness >= "2000-01-01", '
                                        f'FileFreshness > "{time.strftime("%Y-%m-%d", time.gmtime())}" ]')
    outcome = [r["passed"] for r in report.checks]
    assert code == 3 and outcome == [True, False]


def test_filefreshness_reads_a_time_of_day_in_its_time_zone_and_a_date_in_utc(wap):
    from datetime import datetime, timezone
    from zoneinfo import ZoneInfo
    noon = lambda zone: datetime.now(zone).replace(hour=12, minute=0, second=0, microsecond=0).timestamp()
    tokyo, utc = noon(ZoneInfo("Asia/Tokyo")), noon(timezone.utc)  # today's noon there and in UTC
    path = wap.csv(ROWS)
    between = (tokyo + utc) / 2  # after one noon, before the other: 9 or 15 hours apart
    os.utime(path, (between, between))
    code, report = wap.run(path, checks='Rules = [ FileFreshness > "12:00" with timeZone = "Asia/Tokyo", '
                                        'FileFreshness > "12:00" ]')
    assert code == 3 and [r["passed"] for r in report.checks] == [between > tokyo, between > utc]
    # a date stays UTC midnight, whatever the zone, as Glue reads it; offsets are zones as in Java
    tz = {name: wap_etl.time_zone(name) for name in ("Asia/Tokyo", "UTC+3", "-02:30", "posix/Asia/Tokyo")}
    assert wap_etl.file_time("2024-01-01", 0, tz["Asia/Tokyo"]) == datetime(2024, 1, 1, tzinfo=timezone.utc).timestamp()
    assert wap_etl.file_time("9:30 AM", 0, tz["UTC+3"]) == 6.5 * 3600 and wap_etl.file_time("23:00", 0, tz["-02:30"]) == 5400  # 1969-12-31 there
    assert tz["posix/Asia/Tokyo"] is None


# ----- FileSize ---------------------------------------------------------------------------------

def test_filesize_passes_when_every_source_file_is_within_the_limit(wap):
    code, report = wap.run(ROWS, checks="Rules = [ FileSize < 1 MB, FileSize > 10 B ]")
    assert code == 0, report.checks


def test_filesize_fails_when_a_source_file_exceeds_the_limit(wap):
    source = folder(wap, ROWS[:1], ROWS * 20)
    code, report = wap.run(source, checks="Rules = [ FileSize <= 1 KB ]")
    r = report.checks[0]
    assert code == 3 and r["failing_rows"] == 1 and r["sample"][0]["file"].endswith("part1.csv")
    assert r["sample"][0]["size"] > 1024


def test_filesize_with_a_datapath_judges_only_the_batch_files_under_it(wap):
    source = folder(wap, ROWS[:1], ROWS * 20)
    code, report = wap.run(source, checks=f'Rules = [ FileSize "{source}/part0.csv" <= 1 KB ]')
    assert code == 0 and report.checks[0]["failing_rows"] == 0, report.checks


def test_file_rule_on_a_path_with_no_files_fails_saying_so(wap):
    missing = wap.tmp / "nowhere"
    code, report = wap.run(ROWS, checks=f'Rules = [ FileSize "{missing}/" > 1 B ]')
    r = report.checks[0]
    assert code == 3 and "no files at" in r["detail"]


# ----- FileUniqueness ---------------------------------------------------------------------------

def test_fileuniqueness_fails_when_two_source_files_have_the_same_content(wap):
    source = folder(wap, ROWS[:5], ROWS[5:], ROWS[:5])
    code, report = wap.run(source, checks="Rules = [ FileUniqueness = 1.0 ]")
    r = report.checks[0]
    assert code == 3 and r["observed"] == pytest.approx(1 / 3, abs=1e-6)
    assert sorted(os.path.basename(s["file"]) for s in r["sample"]) == ["part0.csv", "part2.csv"]


def test_fileuniqueness_passes_when_every_source_file_differs(wap):
    source = folder(wap, ROWS[:5], ROWS[5:])
    code, report = wap.run(source, checks="Rules = [ FileUniqueness = 1.0 ]")
    assert code == 0 and report.checks[0]["observed"] == 1.0


def test_fileuniqueness_tells_files_of_equal_size_by_content(wap):
    source = folder(wap, [{"id": 1}], [{"id": 2}])
    code, report = wap.run(source, checks="Rules = [ FileUniqueness = 1.0 ]")
    assert code == 0, report.checks


# ----- FileMatch --------------------------------------------------------------------------------

def test_filematch_passes_when_the_file_checksum_is_listed(wap):
    path = wap.csv(ROWS)
    code, report = wap.run(path, checks=f'Rules = [ FileMatch in ["{"0" * 64}", "{sha256(path)}"] ]')
    assert code == 0, report.checks


def test_filematch_fails_when_no_listed_checksum_matches(wap):
    path = wap.csv(ROWS)
    code, report = wap.run(path, checks=f'Rules = [ FileMatch "{path}" in ["{"0" * 64}"] ]')
    r = report.checks[0]
    assert code == 3 and r["sample"][0]["SHA-256"] == sha256(path)


def test_filematch_uses_the_hash_algorithm_given(wap):
    path = wap.csv(ROWS)
    with open(path, "rb") as f:
        md5 = hashlib.md5(f.read()).hexdigest()
    code, report = wap.run(path, checks=f'Rules = [ FileMatch in ["{md5}"] with hashAlgorithm = "MD5" ]')
    assert code == 0, report.checks


def test_filematch_of_two_folders_passes_when_their_contents_match(wap):
    source = folder(wap, ROWS[:5], ROWS[5:])
    archive = str(wap.tmp / "archive")
    shutil.copytree(source, archive)
    os.rename(os.path.join(archive, "part0.csv"), os.path.join(archive, "renamed.csv"))
    code, report = wap.run(source, checks=f'Rules = [ FileMatch "{source}/" "{archive}/" ]')
    assert code == 0, report.checks


def test_filematch_of_two_folders_fails_when_a_file_differs(wap):
    source = folder(wap, ROWS[:5], ROWS[5:])
    archive = folder(wap, ROWS[:5], ROWS[6:], name="archive")
    code, report = wap.run(source, checks=f'Rules = [ FileMatch "{source}/" "{archive}/" ]')
    r = report.checks[0]
    assert code == 3 and r["failing_rows"] == 2
    assert sorted(os.path.relpath(s["file"], wap.tmp.as_uri()) for s in r["sample"]) == \
        ["archive/part1.csv", "src/part1.csv"]


def test_filematch_compare_path_holding_the_batch_files_compares_all_its_files(wap):
    landing = wap.tmp / "landing"
    source = folder(wap, ROWS[:5], ROWS[5:], name="landing/day1")
    write_csv(landing / "stray.csv", ROWS[:1])
    code, report = wap.run(source, checks=f'Rules = [ FileMatch "{source}/" "{landing}/" ]')
    r = report.checks[0]
    assert code == 3 and r["failing_rows"] == 1 and r["sample"][0]["file"].endswith("landing/stray.csv")


# ----- file rules on S3 (moto) ------------------------------------------------------------------

@pytest.fixture
def bucket(aws):
    import boto3
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="landing")
    return s3


def test_filesize_on_an_s3_datapath_reads_the_object_sizes(wap, bucket):
    bucket.put_object(Bucket="landing", Key="in/a.csv", Body=b"id\n1\n")
    bucket.put_object(Bucket="landing", Key="in/b.csv", Body=b"id\n" + b"2\n" * 2000)
    bucket.put_object(Bucket="landing", Key="in/_SUCCESS", Body=b"")
    code, report = wap.run(ROWS, checks='Rules = [ FileSize "s3://landing/in/" < 1 KB ]')
    r = report.checks[0]
    assert code == 3 and r["failing_rows"] == 1 and r["sample"][0]["file"] == "s3://landing/in/b.csv"
    assert r["observed"] == 0.5, "the hidden _SUCCESS marker is not a file of the folder"


def test_fileuniqueness_on_s3_finds_objects_of_the_same_content(wap, bucket):
    for key, body in (("in/a.csv", b"id\n1\n"), ("in/b.csv", b"id\n1\n"), ("in/c.csv", b"id\n3\n")):
        bucket.put_object(Bucket="landing", Key=key, Body=body)
    code, report = wap.run(ROWS, checks='Rules = [ FileUniqueness "s3://landing/in/" > 0.5 ]')
    r = report.checks[0]
    assert code == 3 and r["observed"] == pytest.approx(1 / 3, abs=1e-6)


def test_file_rules_read_a_batch_of_s3_files_by_their_listing(bucket):
    bucket.put_object(Bucket="landing", Key="in/a.csv", Body=b"id\n1\n")
    bucket.put_object(Bucket="landing", Key="in/b.csv", Body=b"id\n1\n")
    audit = wap_etl.Audit(None, None, None, None, None, {"rows": 0}, None,
                          files=dict.fromkeys(["s3://landing/in/a.csv", "s3://landing/in/b.csv"]))
    [fresh, unique] = wap_etl.parse_checks(wap_etl.parse_dqdl(
        "Rules = [ FileFreshness > (now() - 1 hours), FileUniqueness > 0.5 ]"))
    assert wap_etl.KINDS["file_freshness"].judge(audit, fresh)["passed"] is True
    assert wap_etl.KINDS["file_uniqueness"].judge(audit, unique)["observed"] == 0.0


def pinned_audit(paths):
    """An audit of a batch identified (listed, ETags taken) now."""
    files = wap_etl.identify_input(None, paths)
    return wap_etl.Audit(None, None, None, None, None, {"rows": 0}, None,
                         files=files.pins)


def test_file_rules_fail_when_an_s3_batch_file_is_replaced_after_the_batch_read_it(bucket):
    bucket.put_object(Bucket="landing", Key="in/a.csv", Body=b"id\n1\n")
    audit = pinned_audit(["s3://landing/in/a.csv"])
    listed = hashlib.sha256(b"id\n1\n").hexdigest()
    [match] = wap_etl.parse_checks(wap_etl.parse_dqdl(f'Rules = [ FileMatch in ["{listed}"] ]'))
    assert wap_etl.KINDS["file_match"].judge(audit, match)["passed"] is True
    bucket.put_object(Bucket="landing", Key="in/a.csv", Body=b"id\n2\n")
    r = wap_etl.KINDS["file_match"].judge(audit, match)
    assert r["passed"] is False and "replaced after the batch read it" in r["detail"]


def test_an_s3_folder_marker_is_no_file_of_the_folder(bucket):
    bucket.put_object(Bucket="landing", Key="in/", Body=b"")
    bucket.put_object(Bucket="landing", Key="in/a.csv", Body=b"id\n1\n")
    assert [f.path for f in wap_etl.files_at("s3://landing/in/")] == ["s3://landing/in/a.csv"]


def test_file_checksum_of_an_s3_object_is_read_only_at_the_etag_it_was_listed_with(bucket):
    bucket.put_object(Bucket="landing", Key="in/a.csv", Body=b"id\n1\n")
    [listed] = wap_etl.files_at("s3://landing/in/")
    assert listed.digest() == hashlib.sha256(b"id\n1\n").hexdigest()
    bucket.put_object(Bucket="landing", Key="in/a.csv", Body=b"id\n2\n")
    with pytest.raises(wap_etl.FileRuleError, match="replaced after it was listed"):
        listed.digest()


def many_objects(bucket, n=12):
    """n small objects of distinct contents under s3://landing/in/, by path."""
    bodies = {f"s3://landing/in/{i:02}.csv": b"id\n%d\n" % i for i in range(n)}
    for path, body in bodies.items():
        bucket.put_object(Bucket="landing", Key=path[len("s3://landing/"):], Body=body)
    return bodies


def file_match_judged(bodies, rule, on_get):
    """FileMatch `rule` judged on the objects (identified first), `on_get(key)` called as boto3
    sends each GET of them."""
    import boto3
    audit = pinned_audit(list(bodies))
    [match] = wap_etl.parse_checks(wap_etl.parse_dqdl(f"Rules = [ {rule} ]"))

    def hook(params, **kwargs):
        on_get(params["Key"])
    events = boto3._get_default_session().events
    events.register("provide-client-params.s3.GetObject", hook)
    try:
        return wap_etl.KINDS["file_match"].judge(audit, match)
    finally:
        events.unregister("provide-client-params.s3.GetObject", hook)


def test_file_checksums_of_many_s3_objects_are_read_side_by_side(bucket):
    import threading
    bodies = many_objects(bucket)
    lock, reading, most = threading.Lock(), [0], [0]

    def held(key):  # each GET waits a little, so reads that overlap are seen overlapping
        with lock:
            reading[0] += 1
            most[0] = max(most[0], reading[0])
        time.sleep(0.05)
        with lock:
            reading[0] -= 1
    listed = ", ".join(f'"{hashlib.sha256(b).hexdigest()}"' for b in list(bodies.values())[:-1])
    r = file_match_judged(bodies, f"FileMatch in [{listed}]", held)
    assert r["failing_rows"] == 1 and [s["file"] for s in r["sample"]] == [list(bodies)[-1]]
    assert most[0] > 1, "the objects were read one after another"


def test_file_checksums_read_side_by_side_fail_on_the_first_replaced_file_in_order(bucket):
    bodies = many_objects(bucket)
    first, later = list(bodies)[4], list(bodies)[9]

    def replaced_as_read(key):  # both replaced as they are fetched; the later one fails first
        if f"s3://landing/{key}" in (first, later):
            bucket.put_object(Bucket="landing", Key=key, Body=b"id\nnew\n")
            time.sleep(0.3 if f"s3://landing/{key}" == first else 0)
    r = file_match_judged(bodies, 'FileMatch in ["0"]', replaced_as_read)
    assert r["passed"] is False and f"{first} was replaced after it was listed" in r["detail"]


def test_file_rules_fail_when_a_local_batch_file_changes_after_the_batch_read_it(tmp_path):
    path = tmp_path / "a.csv"
    path.write_bytes(b"id\n1\n")
    audit = pinned_audit([f"file://{path}"])
    listed, rewritten = hashlib.sha256(b"id\n1\n").hexdigest(), hashlib.sha256(b"id\n2\n").hexdigest()
    [match] = wap_etl.parse_checks(wap_etl.parse_dqdl(f'Rules = [ FileMatch in ["{listed}", "{rewritten}"] ]'))
    assert wap_etl.KINDS["file_match"].judge(audit, match)["passed"] is True
    path.write_bytes(b"id\n2\n")  # same size, a checksum the rule lists: judged only as the batch read it
    r = wap_etl.KINDS["file_match"].judge(audit, match)
    assert r["passed"] is False and "changed after the batch read it" in r["detail"]


def test_file_checksum_of_a_local_file_is_read_only_as_it_was_listed(tmp_path):
    (tmp_path / "in").mkdir()
    path = tmp_path / "in" / "a.csv"
    path.write_bytes(b"id\n1\n")
    [listed] = wap_etl.files_at(f"file://{tmp_path}/in")
    assert listed.digest() == hashlib.sha256(b"id\n1\n").hexdigest()
    path.write_bytes(b"id\n2\n")
    with pytest.raises(wap_etl.FileRuleError, match="changed after it was listed"):
        listed.digest()


# ----- DetectAnomalies --------------------------------------------------------------------------

def batch(n, start=0):
    return [{"id": start + i, "carrier": "AA", "amount": 1.0, "status": "paid"} for i in range(n)]


def test_detectanomalies_rowcount_flags_an_outlier_after_enough_history(wap):
    rules = 'Rules = [ DetectAnomalies "RowCount" ]'
    for i, n in enumerate([100, 110, 90, 105]):
        assert wap.run(batch(n, 1000 * i), checks=rules)[0] == 0
    code, report = wap.run(batch(400, 9000), checks=rules)
    assert code == 3 and "deviations" in report.checks[0]["detail"]


def test_detectanomalies_passes_until_there_is_enough_history(wap):
    rules = 'Rules = [ DetectAnomalies "RowCount" ]'
    for i, n in enumerate([10, 500]):
        code, report = wap.run(batch(n, 1000 * i), checks=rules)
        assert code == 0 and report.checks[0]["history"] == i


def test_detectanomalies_completeness_watches_the_null_fraction_history(wap, spark):
    rules = 'Rules = [ DetectAnomalies "Completeness" "carrier" ]'
    for i in range(3):
        rows = batch(4, 100 * i)
        rows[0]["carrier"] = None
        assert wap.run(rows, checks=rules)[0] == 0
    code, report = wap.run([dict(r, carrier=None) for r in batch(4, 900)], checks=rules)
    assert code == 3 and report.checks[0]["metric"] == "null_fraction:carrier"


# ----- Analyzers --------------------------------------------------------------------------------

def test_analyzers_are_recorded_in_the_ledger_metrics(wap, spark):
    code, report = wap.run(ROWS, checks='Rules = [ RowCount > 0 ] Analyzers = [ RowCount, '
                                        'Completeness "carrier", ColumnCorrelation "id" "amount" ]')
    [metrics] = ledger_metrics(spark, wap)
    assert code == 0
    assert metrics["row_count"] == 10 and metrics["null_fraction:carrier"] == 0.5
    assert metrics["correlation:id,amount"] == pytest.approx(1.0)


def test_analyzers_never_fail_the_run(wap):
    code, report = wap.run(ROWS, checks='Analyzers = [ CustomSql "select avg(amount) from primary where id < 0" ]')
    [r] = report.checks
    assert code == 0 and report.status == "published"
    assert r["passed"] and r["action"] == "record" and r["detail"] == "the query returned NULL"


def test_allstatistics_of_allcolumns_profiles_every_column(wap, spark):
    code, report = wap.run(ROWS, checks='Analyzers = [ AllStatistics of AllColumns ]')
    [metrics] = ledger_metrics(spark, wap)
    assert code == 0 and metrics["row_count"] == 10
    assert {c: metrics[f"null_fraction:{c}"] for c in ("id", "carrier", "amount", "status")} == {
        "id": 0.0, "carrier": 0.5, "amount": 0.0, "status": 0.0}
    assert metrics["max:id"] == 10 and metrics["max_length:status"] == 4
    assert 'AllStatistics of AllColumns: carrier: null_fraction' in {r["name"] for r in report.checks}


def test_allstatistics_records_the_metrics_glue_documents_by_column_type(wap, spark):
    code, _ = wap.run(ROWS, checks='Analyzers = [ AllStatistics "amount", AllStatistics "carrier" ]')
    [metrics] = ledger_metrics(spark, wap)
    assert code == 0
    assert {k: metrics[k] for k in ("row_count", "null_fraction:amount", "unique_fraction:amount",
                                    "min:amount", "max:amount")} == {
        "row_count": 10, "null_fraction:amount": 0.0, "unique_fraction:amount": 1.0,
        "min:amount": 1.0, "max:amount": 10.0}
    assert metrics["min_length:carrier"] == 2 and metrics["max_length:carrier"] == 2
    assert "min:carrier" not in metrics, "a string column has lengths, not a minimum"


def test_json_record_action_measures_a_metric_without_a_verdict(wap, spark):
    checks = [{"check": "stat", "stat": "max", "column": "amount", "action": "record"},
              {"check": "row_count", "action": "record", "where": "amount > 5"}]
    code, report = wap.run(ROWS, checks=checks)
    [metrics] = ledger_metrics(spark, wap)
    assert code == 0 and metrics["max:amount"] == 10.0 and metrics["row_count where amount > 5"] == 5


def test_a_recorded_metric_with_a_condition_exits_2(wap):
    code, report = wap.run(ROWS, checks=[{"check": "stat", "stat": "max", "column": "amount",
                                          "action": "record", "max": 3}])
    assert code == 2 and "a recorded metric takes no condition" in report.error and not wap.exists()


# ----- Metadata, DataSources and grammar errors --------------------------------------------------

def test_metadata_and_datasources_sections_are_accepted(wap):
    rules = ('Metadata = { "Version": "1.0" }\n'
             'DataSources = { "Primary": "orders", "AdditionalDataSources": [ "reference" ] }\n'
             'Rules = [ RowCount = 10 ]')
    code, report = wap.run(ROWS, checks=rules)
    assert code == 0 and [r["name"] for r in report.checks] == ["RowCount = 10"]


GRAMMAR_ERRORS = [
    ('Metadata = { "Version": "2.0" }\nRules = [ RowCount > 0 ]',
     "DQDL line 1, column 14: Metadata Version '2.0' is not supported"),
    ('DataSources = { "Owner": "me" }\nRules = [ RowCount > 0 ]',
     'DQDL line 1, column 17: DataSources key "Owner" is not supported'),
    ('Rules = [ RowCount > 0 ]\nAnalyzers = [ IsComplete "id" ]',
     "DQDL line 2, column 15: 'IsComplete' is not supported as an analyzer"),
    ('Rules = [\n  FileSize < 10.5 ]', "DQDL line 2, column 14: expected a size such as 10 MB"),
    ('Rules = [ FileMatch in ["not-hex"] ]', "DQDL line 1, column 25: a checksum is a quoted hex digest"),
    ('Rules = [ FileFreshness > "yesterday" ]', "DQDL line 1, column 27: compare with now()"),
    ('Rules = [ DetectAnomalies "Mean" ]', 'DQDL line 1, column 11: DetectAnomalies "Mean" takes 1 column'),
    ('Rules = [ FileSize < 1 MB where "id > 1" ]', "DQDL line 1, column 27: 'where' is not supported for FileSize"),
]


@pytest.mark.parametrize("rules,message", GRAMMAR_ERRORS)
def test_grammar_errors_exit_2_with_line_and_column(wap, rules, message):
    code, report = wap.run(ROWS, checks=rules)
    assert code == 2 and message in report.error and not wap.exists()
