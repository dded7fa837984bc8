"""A tour of hostile input: each case exits with its code, a one-line error naming the parameter,
check or file, and writes nothing (no table, branch, column, quarantine or ledger)."""
import contextlib
import json
import os
import shutil
from datetime import datetime

import pytest

import wap_etl
from conftest import session_conf

GOOD = [{"id": 1, "amount": 5.0}, {"id": 2, "amount": 6.0}]
NOT_NULL = [{"check": "not_null", "column": "id"}]
DATED = "id,d,ts\n1,2024-06-05,2024-06-05 10:00:00\n"


def write(path, text, mode="w"):
    os.makedirs(os.path.dirname(str(path)), exist_ok=True)
    with open(path, mode) as f:
        f.write(text)
    return str(path)


def parquet(spark, path, rows, schema):
    spark.createDataFrame(rows, schema).coalesce(1).write.mode("overwrite").parquet(str(path))
    return next(str(path / n) for n in os.listdir(path) if n.endswith(".parquet"))


def clashing_parquet(spark, tmp):
    folder = tmp / "pq"
    os.makedirs(folder)
    os.rename(parquet(spark, tmp / "p1", [(1,)], "id int"), folder / "a.parquet")
    os.rename(parquet(spark, tmp / "p2", [("x",)], "id string"), folder / "b.parquet")
    return str(folder)


# Each case: (source or a function of (wap, spark, tmp) giving it, params, text the error names).
CASES = {
    "zero-byte file": (lambda w, s, t: write(t / "empty.csv", ""), {}, ["--source_path", "empty.csv"]),
    "empty folder": (lambda w, s, t: (os.makedirs(t / "none"), str(t / "none"))[1],
                     {"source_format": "csv"}, ["--source_path"]),
    "folder of mixed files": (lambda w, s, t: (write(t / "m" / "a.csv", "id\n1\n"),
                                               write(t / "m" / "b.json", '{"id": 1}\n'), str(t / "m"))[2],
                              {}, ["--source_format", ".csv", ".json"]),
    "folder without data files": (lambda w, s, t: (write(t / "txt" / "a.txt", "id\n1\n"), str(t / "txt"))[1],
                                  {}, ["--source_format", ".txt"]),
    "named pipe as the source": (lambda w, s, t: (os.mkfifo(t / "pipe.csv"), str(t / "pipe.csv"))[1],
                                 {}, ["--source_path", "pipe.csv", "not a regular file"]),
    "named pipe in the source folder": (lambda w, s, t: (write(t / "p" / "a.csv", "id\n1\n"),
                                                         os.mkfifo(t / "p" / "b.csv"), str(t / "p"))[2],
                                        {}, ["--source_path", "b.csv", "not a regular file"]),
    "named pipe given as a file: URI": (lambda w, s, t: (os.mkfifo(t / "pipe.csv"), f"file://{t}/pipe.csv")[1],
                                        {}, ["--source_path", "pipe.csv", "not a regular file"]),
    "named pipe under a linked folder": (lambda w, s, t: (write(t / "p" / "a.csv", "id\n1\n"), os.makedirs(t / "q"),
                                                          os.mkfifo(t / "q" / "b.csv"), os.symlink(t / "q", t / "p" / "q"),
                                                          str(t / "p"))[4],
                                         {}, ["--source_path", "b.csv", "not a regular file"]),
    "folder holding only a dangling link": (lambda w, s, t: (os.makedirs(t / "d"), os.symlink(t / "gone.csv", t / "d" / "a.csv"),
                                                             f"file:{t}/d")[2],
                                            {}, ["--source_path", "holds no data files"]),
    "named pipe named as Spark reads a partition": (lambda w, s, t: (write(t / "p" / "a.csv", "id\n1\n"),
                                                                     os.mkfifo(t / "p" / "_k=1.csv"), str(t / "p"))[2],
                                                    {}, ["--source_path", "_k=1.csv", "not a regular file"]),
    "named pipe reached by .. after a link": (lambda w, s, t: (os.makedirs(t / "d" / "src"), os.makedirs(t / "d" / "deep"),
                                                               os.mkfifo(t / "d" / "src" / "x.csv"),
                                                               write(t / "d" / "x.csv", "id\n1\n"),
                                                               os.symlink(t / "d" / "deep", t / "d" / "src" / "link"),
                                                               f"{t}/d/src/link/../x.csv")[5],
                                              {}, ["--source_path", "src/x.csv", "not a regular file"]),
    "folder linked back up": (lambda w, s, t: (write(t / "up" / "a.csv", "id\n1\n"), os.symlink(".", t / "up" / "x"),
                                               str(t / "up"))[2],
                              {}, ["--source_path", "through a link"]),
    "local glob": (lambda w, s, t: (write(t / "g" / "a.csv", "id\n1\n"), f"file://{t}/g/*.csv")[1],
                   {}, ["--source_path", "glob"]),
    "file URI of another host": (None, {"source_path": "file://host/data/a.csv"}, ["--source_path", "file:///path"]),
    "path of another host": (None, {"source_path": "//host/data/a.csv"}, ["--source_path", "names a host"]),
    "broken JSON-lines record": (lambda w, s, t: write(t / "bad.json", '{"id": 1}\n{"id": 2, "amount"\n{"id": 3}\n'),
                                 {}, ["--source_path", "bad.json", "line 2"]),
    "parquet files with clashing schemas": (lambda w, s, t: clashing_parquet(s, t), {"checks": []},
                                            ["--source_path", "clashing schemas"]),
    "duplicate column names": (lambda w, s, t: write(t / "dup.csv", "id,amount,ID\n1,2.0,3\n"), {},
                               ["duplicate", "id"]),
    "column name with a dot": (lambda w, s, t: write(t / "dot.csv", "id,a.b\n1,2\n"), {}, ["'a.b'"]),
    "column name with a backtick": (lambda w, s, t: write(t / "tick.csv", "id,a`b\n1,2\n"), {}, ["'a`b'"]),
    "regex on a struct column": (lambda w, s, t: write(t / "nested.json", '{"id": 1, "s": {"a": 1}}\n'),
                                 {"checks": [{"check": "not_null", "column": "id"},
                                             {"check": "regex", "column": "s", "pattern": "^x$"}]},
                                 ["check 'regex_s'", "cannot apply to column 's'"]),
    "unique on a map column": (lambda w, s, t: parquet(s, t / "m", [(1, {"a": 1})], "id int, m map<string,int>"),
                               {"checks": [{"check": "unique", "columns": ["id", "m"]}]},
                               ["check 'unique_id_m'", "'m'", "no map"]),
    "checks not a JSON list": (None, {"checks": '"not_null"'}, ["--checks", "list"]),
    "checks object without a list": (None, {"checks": '{"check": "not_null", "column": "id"}'}, ["--checks"]),
    "checks JSON syntax error": (None, {"checks": '[\n  {"check": "not_null",, "column": "id"}\n]'},
                                 ["--checks", "line 2 column"]),
    "checks file missing": (None, {"checks": "/no/such/checks.json"}, ["--checks"]),
    "unknown parameter": (None, {"colour": "blue"}, ["--colour"]),
    "table with three parts": (None, {"table": "a.b.c"}, ["--table"]),
    "table with a catalog prefix": (None, {"table": "local.shop.orders"}, ["--table", "--catalog"]),
    "runs table with three parts": (None, {"runs_table": "a.b.c"}, ["--runs_table"]),
    "bad --source_files": (None, {"source_files": "some"}, ["--source_files"]),
    "new files with a fixed batch id": (None, {"source_files": "new", "batch_id": "b1"}, ["--batch_id"]),
    "glob with new files": (lambda w, s, t: "s3://bucket/in/*/", {"source_files": "new", "source_format": "csv"},
                            ["--source_path", "glob"]),
    "new files of an unlisted scheme without a format": (lambda w, s, t: "s3a://bucket/in/", {"source_files": "new"},
                                                         ["--source_format"]),
    "runs table that is the table": (lambda w, s, t: w.csv(GOOD), {"runs_table": "NS.orders_quarantine"},
                                     ["--runs_table"]),
    "batch id too long": (None, {"batch_id": "b" * 200}, ["--batch_id"]),
    "negative retries": (None, {"max_publish_retries": "-1"}, ["--max_publish_retries"]),
    "retries without end": (None, {"max_publish_retries": "1000000000"}, ["--max_publish_retries", "from 0 to 100"]),
    "between bound of the wrong type": (None, {"checks": [{"check": "between", "column": "id", "min": "one"}]},
                                        ["check 'between_id'"]),
    "between bound with an offset on a timestamp_ntz column": (
        lambda w, s, t: parquet(s, t / "ntz", [(1, datetime(2024, 6, 1, 10))], "id int, ts timestamp_ntz"),
        {"checks": [{"check": "between", "column": "ts", "max": "2024-06-01T12:00:00+05:00"}]},
        ["check 'between_ts'", "without an offset"]),
    "accepted value with an offset on a timestamp_ntz column": (
        lambda w, s, t: parquet(s, t / "ntz", [(1, datetime(2024, 6, 1, 10))], "id int, ts timestamp_ntz"),
        {"checks": [{"check": "accepted_values", "column": "ts", "values": ["2024-06-01T10:00:00Z"]}]},
        ["check 'accepted_values_ts'", "without an offset"]),
    "accepted value of the wrong type": (None, {"checks": [{"check": "accepted_values", "column": "id",
                                                            "values": [1, "x"]}]}, ["check 'accepted_values_id'"]),
    "between bound beyond a 64-bit number": (None, {"checks": [{"check": "between", "column": "id", "max": 10 ** 400}]},
                                             ["check #1", "between", "max must be"]),
    "accepted value beyond a 64-bit number": (None, {"checks": [{"check": "accepted_values", "column": "id",
                                                                 "values": [1, 2 ** 64]}]},
                                              ["check #1", "accepted_values", "values must be"]),
    "volume lookback beyond the ledger's reach": (None, {"checks": [{"check": "volume", "min_ratio": 0.1,
                                                                      "lookback": 2 ** 31}]},
                                                  ["check #1", "lookback must be"]),
    "branch retention beyond a century": (None, {"branch_retention_days": str(10 ** 19)},
                                          ["--branch_retention_days", "36500"]),
    "check name used twice": (None, {"checks": [dict(NOT_NULL[0], name="n"), dict(NOT_NULL[0], name="n")]},
                              ["check 'n'"]),
    "merge key with NULLs": (lambda w, s, t: w.csv([{"id": None, "amount": 1.0}, {"id": 2, "amount": 2.0}]),
                             {"mode": "merge", "merge_keys": "id"}, ["--merge_keys", "'id'", "1 row"]),
    "hadoop catalog on S3": (None, {"catalog": "s3cat", "catalog_type": "hadoop", "warehouse": "s3://b/w"},
                             ["--catalog_type"]),
    "hadoop catalog on S3 spelled in capitals": (None, {"catalog": "s3cat", "catalog_type": "hadoop",
                                                         "warehouse": "S3://b/w"}, ["--catalog_type"]),
    "delete condition on a name both sides have": (None, {"mode": "merge", "merge_keys": "id",
                                                          "delete_condition": "amount > 5"},
                                                   ["--delete_condition", "amount"]),
    "partition column given twice": (None, {"partition_by": "id,ID"}, ["--partition_by", "twice"]),
    "partition column of a struct": (lambda w, s, t: write(t / "nested.json", '{"id": 1, "s": {"a": 1}}\n'),
                                     {"partition_by": "s", "checks": NOT_NULL}, ["--partition_by", "'s'"]),
    "reader option path": (None, {"source_options": {"path": "/elsewhere"}}, ["--source_options", "path"]),
    "reader option not a scalar": (None, {"source_options": {"header": {"x": 1}}}, ["--source_options", "header"]),
    "SNS topic that is no ARN": (None, {"sns_topic_arn": "not-an-arn"}, ["--sns_topic_arn"]),
    "Slack URL without a host": (None, {"slack_webhook_url": "http://"}, ["--slack_webhook_url"]),
    "check type not a string": (None, {"checks": [{"check": ["not_null"], "column": "id"}]},
                                ["check #1", "unknown check type"]),
    "condition op not a string": (None, {"checks": [{"check": "row_count", "condition": {"op": [">"], "values": [1]}}]},
                                  ["check #1", "condition must be"]),
    "file rule path with one slash": (None, {"checks": [{"check": "file_size", "path": "s3:/b/x", "max": 3}]},
                                      ["check #1", "path must be"]),
    "dynamic value that does not parse": (None, {"checks": [{"check": "row_count", "name": "daily", "condition":
                                                             {"op": ">", "values": ["avg(last(3)"]}}]},
                                          ['check #1 ("daily")', "column 12"]),
    "dynamic index past its list": (None, {"checks": "Rules = [ RowCount > index(last(3), 3) ]"},
                                    ["DQDL line 1, column 22", "index()"]),
    "dynamic division by zero": (None, {"checks": "Rules = [ RowCount > avg(last(3)) / (2 - 2) ]"},
                                 ["DQDL line 1", "division by zero"]),
    "expression comparing with a date that is none": (
        lambda w, s, t: write(t / "dated.csv", DATED), {"checks": [{"check": "expression", "expr": "d <> '2024-02-30'"}]},
        ["check 'expression'", "'2024-02-30' is not a date"]),
    "where comparing with a time that is none": (
        lambda w, s, t: write(t / "dated.csv", DATED),
        {"checks": [{"check": "not_null", "column": "id", "where": "ts > '2024-06-05 25:00:00'"}]},
        ["check 'not_null_id'", "'2024-06-05 25:00:00' is not a timestamp"]),
    "subquery comparing with a date that is none": (
        lambda w, s, t: write(t / "dated.csv", DATED),
        {"checks": [{"check": "expression", "expr": "d IN (SELECT x FROM VALUES (DATE'2024-01-01') AS v(x) "
                                                    "WHERE x <> '2024-02-30')"}]},
        ["check 'expression'", "'2024-02-30' is not a date"]),
    "correlated subquery comparing with a date that is none": (
        lambda w, s, t: write(t / "dated.csv", DATED),
        {"checks": [{"check": "expression", "expr": "d <> (SELECT max(x) FROM VALUES (DATE'2024-01-01') AS v(x) "
                                                    "WHERE x <> d AND x <> '2024-02-30')"}]},
        ["check 'expression'", "'2024-02-30' is not a date"]),
    "expression comparing a number with a string that is none": (
        None, {"checks": [{"check": "expression", "expr": "amount <> 'n/a'"}]}, ["check 'expression'", "'n/a' is not a number"]),
    "DQDL value that is no time of its column": (
        lambda w, s, t: write(t / "dated.csv", DATED), {"checks": 'Rules = [ ColumnValues "d" not in ["2024-02-30"] ]'},
        ["ColumnValues", "'2024-02-30' is not a date"]),
    "rules nested too deep": (None, {"checks": "Rules = [ " + "(" * 50 + "RowCount > 0" + ")" * 50 + " ]"},
                              ["DQDL line 1", "nested more than"]),
}


def transform_raising(df):
    raise ValueError("lookup table is missing")


def transform_dropping_everything(df):
    return df.select()


def transform_returning_a_list(df):
    return [1, 2]


TRANSFORMS = {
    "transform that raises": (transform_raising, ["transform", "ValueError", "lookup table is missing"]),
    "transform that drops every column": (transform_dropping_everything, ["transform", "no columns"]),
    "transform that returns no DataFrame": (transform_returning_a_list, ["transform", "list"]),
}


def assert_refused(wap, spark, code, report, named):
    assert code == 2, report.error
    assert "\n" not in report.error
    for text in named:
        assert text in report.error, f"{text!r} not in {report.error!r}"
    for suffix in ("", "_quarantine", "_wap_runs"):
        assert not spark.catalog.tableExists(f"{wap.sql}{suffix}"), f"{wap.sql}{suffix} was created"
    assert wap.wap_branch_conf() is None


@pytest.mark.parametrize("case", CASES)
def test_hostile_input_exits_2_and_writes_nothing(wap, spark, tmp_path, case):
    make, params, named = CASES[case]
    source = make(wap, spark, tmp_path) if make else wap.csv(GOOD)
    params = {k: v.replace("NS.", f"{wap.ns}.") if isinstance(v, str) else v  # this test's namespace
              for k, v in dict({"checks": NOT_NULL}, **params).items()}
    extra = {k: params.pop(k) for k in list(params) if k not in wap_etl.PARAMS}
    argv = wap.args(source, **params) + [a for k, v in extra.items() for a in (f"--{k}", v)]
    code, report = wap_etl.run(argv)
    assert_refused(wap, spark, code, report, named)


@pytest.mark.parametrize("conf", [{"type": "HADOOP"}, {"catalog-impl": "org.apache.iceberg.hadoop.HadoopCatalog"}])
def test_a_hadoop_catalog_on_s3_set_up_in_the_sessions_conf_is_refused(wap, spark, conf):
    """Iceberg reads a catalog's type in any case, and takes its class as catalog-impl: either way
    a hadoop catalog on S3 (renames, no atomic commit) is refused before anything is written."""
    prefix = "spark.sql.catalog.s3conf"
    settings = {prefix: "org.apache.iceberg.spark.SparkCatalog", f"{prefix}.warehouse": "s3://bucket/w",
                **{f"{prefix}.{k}": v for k, v in conf.items()}}
    with session_conf(spark, settings):
        code, report = wap.run(GOOD, catalog="s3conf", checks=NOT_NULL)
    assert code == 2 and "hadoop catalog on s3://bucket/w" in report.error, report.error
    assert wap.wap_branch_conf() is None


def test_strings_spark_reads_as_the_column_or_compares_as_text_are_accepted(wap):
    rows = [{"id": 1, "d": "2024-06-05", "s": "2024-02-30", "amount": 1.5}]
    code, report = wap.run(rows, checks=[{"check": "expression", "expr": e} for e in (
        "s <> '2024-02-30x'", "d IN ('2024-06-05', 'x')", "d > '2024-06-01'", "amount <> 'NaN'",
        "d > ' 2024-06-01'")])
    assert code == 0, report.error


def test_a_string_a_view_the_condition_reads_casts_to_null_is_not_the_checks_to_answer_for(wap, spark):
    spark.sql(f"CREATE OR REPLACE TEMP VIEW {wap.ns}_dim AS SELECT id, CAST('n/a' AS INT) AS code "
              "FROM VALUES (1), (2) AS v(id)")
    code, report = wap.run([{"id": 1, "amount": 1.0}], checks=[
        {"check": "expression", "expr": f"id IN (SELECT id FROM {wap.ns}_dim)"}])
    assert code == 0, report.error


@pytest.mark.parametrize("case", TRANSFORMS)
def test_broken_transform_exits_2_with_its_message(wap, spark, monkeypatch, case):
    function, named = TRANSFORMS[case]
    monkeypatch.setattr(wap_etl, "transform", function)
    code, report = wap.run(GOOD, checks=NOT_NULL)
    assert_refused(wap, spark, code, report, named)


def test_malformed_csv_row_names_the_file_and_line(wap, spark):
    assert wap.run(GOOD, checks=NOT_NULL)[0] == 0
    refs = wap.refs()
    path = write(wap.tmp / "in" / "day2.csv", "id,amount\n3,1.0\nseven,2.0\n4,3.0\n")
    code, report = wap.run(path, checks=NOT_NULL)
    assert code == 2 and "\n" not in report.error
    assert "day2.csv" in report.error and "line 3" in report.error and "seven" in report.error
    assert wap.refs() == refs and wap.ids() == [1, 2]


@pytest.mark.parametrize("columns", [["order id", "amount"], ["größe", "amount"], ["select", "from"]])
def test_awkward_but_legal_column_names_are_published(wap, spark, columns):
    rows = [{columns[0]: 1, columns[1]: 2.0}, {columns[0]: 2, columns[1]: 3.0}]
    checks = [{"check": "not_null", "column": columns[0]}, {"check": "unique", "columns": [columns[0]]},
              {"check": "between", "column": columns[1], "min": 0}]
    code, report = wap.run(rows, checks=checks)
    assert code == 0 and report.status == "published", report.error
    assert spark.table(wap.sql).columns == columns
    assert sorted(r[0] for r in spark.table(wap.sql).collect()) == [1, 2]


# Nested field names reach the table's DDL when --schema_evolution add_columns adds a struct column.
DDL_IN_A_NAME = "a:int>, injected string, z struct<q"
NESTED = {  # a JSON record whose nested name is refused, and the column path the error names
    "DDL in a struct field": ({"s": {DDL_IN_A_NAME: 1}}, f"'s.{DDL_IN_A_NAME}'"),
    "struct in a struct": ({"s": {"t": {"x>y": 1}}}, "'s.t.x>y'"),
    "struct in an array": ({"items": [{"sku,qty": 1}]}, "'items.element.sku,qty'"),
    "array in a struct in an array": ({"o": [{"lines": [{"a.b": 1}]}]}, "'o.element.lines.element.a.b'"),
    "backtick in a field": ({"s": {"a`b": 1}}, "'s.a`b'"),
    "fields differing in case": ({"s": {"k": 1, "K": 2}}, "duplicate column names"),
}


def json_file(path, *records):
    return write(path, "".join(json.dumps(r) + "\n" for r in records))


def table_state(spark, wap):
    return wap.refs(), spark.table(wap.sql).schema.json()


@pytest.mark.parametrize("case", NESTED)
def test_hostile_nested_field_name_exits_2_and_leaves_main_unchanged(wap, spark, case):
    record, path = NESTED[case]
    assert wap.run(json_file(wap.tmp / "day1.json", {"id": 1}), checks=NOT_NULL)[0] == 0
    before = table_state(spark, wap)
    code, report = wap.run(json_file(wap.tmp / "day2.json", dict({"id": 2}, **record)), checks=NOT_NULL,
                           schema_evolution="add_columns")
    assert code == 2 and "\n" not in report.error, report.error
    assert "--source_path" in report.error and path in report.error, report.error
    assert table_state(spark, wap) == before, "main's snapshot and schema are untouched"
    assert spark.table(wap.sql).columns == ["id"] and wap.ids() == [1]


def test_map_of_structs_with_a_hostile_field_name_exits_2(wap, spark):
    assert wap.run(json_file(wap.tmp / "day1.json", {"id": 1}), checks=NOT_NULL)[0] == 0
    before = table_state(spark, wap)
    source = parquet(spark, wap.tmp / "map", [(2, {"k": (1,)})],
                     f"id long, m map<string, struct<`{DDL_IN_A_NAME}`: int>>")
    code, report = wap.run(source, checks=NOT_NULL, schema_evolution="add_columns")
    assert code == 2 and f"'m.value.{DDL_IN_A_NAME}'" in report.error, report.error
    assert table_state(spark, wap) == before


def test_nested_struct_with_awkward_legal_names_is_added_as_a_column(wap, spark):
    assert wap.run(json_file(wap.tmp / "day1.json", {"id": 1}), checks=NOT_NULL)[0] == 0
    record = {"id": 2, "s": {"order id": 7, "größe": "xl", "select": {"deep name": True}},
              "items": [{"item id": 5}, {"item id": 6}]}
    code, report = wap.run(json_file(wap.tmp / "day2.json", record), checks=NOT_NULL,
                           schema_evolution="add_columns")
    assert code == 0 and report.status == "published", report.error
    assert spark.table(wap.sql).columns == ["id", "items", "s"]  # JSON columns come sorted
    [old, new] = wap.rows()
    assert old["s"] is None and old["items"] is None
    assert new["s"].asDict(recursive=True) == record["s"]
    assert [i["item id"] for i in new["items"]] == [5, 6]


def test_add_columns_quotes_nested_names_so_none_can_inject(wap, spark):
    """Even a name the input checks would refuse is one field name in the DDL, never DDL."""
    from pyspark.sql import types as T
    assert wap.run(json_file(wap.tmp / "day1.json", {"id": 1}), checks=NOT_NULL)[0] == 0
    t = wap_etl.TableRef("local", wap.ns, "orders")
    column = T.StructField("s", T.StructType([T.StructField(DDL_IN_A_NAME, T.LongType())]))
    wap_etl.add_columns(spark, t, [column])
    schema = spark.table(wap.sql).schema
    assert schema.names == ["id", "s"] and schema["s"].dataType.names == [DDL_IN_A_NAME]


def test_a_link_that_cannot_be_followed_is_skipped_as_hadoop_lists_the_folder(tmp_path):
    """A looping or dangling link is no file to read (Hadoop's listing skips it); the folder's other
    files are all listed: a pipe among them is still found."""
    names = [f"f{i:02}.csv" for i in range(20)]
    for name in names:
        write(tmp_path / "in" / name, "id\n1\n")
    os.symlink("loop.csv", tmp_path / "in" / "loop.csv")
    os.symlink(tmp_path / "gone.json", tmp_path / "in" / "gone.json")
    assert sorted(wap_etl.local_source_names("in", str(tmp_path / "in"))) == names
    os.mkfifo(tmp_path / "in" / "pipe.csv")
    with pytest.raises(wap_etl.WapError, match="pipe.csv' is not a regular file"):
        wap_etl.local_source_names("in", str(tmp_path / "in"))


def test_a_linked_folder_is_listed_as_spark_reads_it(tmp_path):
    """Links are followed into folders, as Hadoop lists them; what Spark skips is skipped."""
    write(tmp_path / "in" / "a.csv", "id\n1\n")
    write(tmp_path / "in" / "_SUCCESS", "")
    write(tmp_path / "in" / "b.csv._COPYING_", "id\n")
    write(tmp_path / "other" / "b.csv", "id\n2\n")
    os.symlink(tmp_path / "other", tmp_path / "in" / "k=1")
    assert sorted(wap_etl.local_source_names("in", str(tmp_path / "in"))) == ["a.csv", "b.csv"]


def test_a_folder_linked_twice_is_refused(tmp_path):
    """Two links to one folder: Spark would list (and --source_files new read) its files twice."""
    write(tmp_path / "in" / "a.csv", "id\n1\n")
    write(tmp_path / "other" / "b.csv", "id\n2\n")
    os.symlink(tmp_path / "other", tmp_path / "in" / "k=1")
    os.symlink(tmp_path / "other", tmp_path / "in" / "k=2")
    with pytest.raises(wap_etl.WapError, match="again, through a link") as refused:
        wap_etl.local_source_names("in", str(tmp_path / "in"))
    assert refused.value.code == wap_etl.EXIT_BAD_INPUT


def test_a_dangling_link_of_another_kind_in_the_source_folder_is_not_read(wap, spark):
    """The format is inferred from the files the read will open: a dangling .json link beside the
    CSV files neither makes the folder mixed nor stops the run."""
    folder = wap.tmp / "drop"
    write(folder / "a.csv", "id,amount\n1,5.0\n2,6.0\n")
    os.symlink(wap.tmp / "gone.json", folder / "old.json")
    assert wap.run(f"file://{folder}", checks=NOT_NULL)[0] == 0
    assert spark.table(wap.sql).count() == 2


def test_a_parquet_folder_with_summary_files_is_read_as_parquet(wap, spark, tmp_path):
    """_metadata and _common_metadata are listed (Spark lists them) but say nothing of the format."""
    folder = tmp_path / "pq"
    os.makedirs(folder)
    os.rename(parquet(spark, tmp_path / "p1", [(1, 5.0)], "id long, amount double"), folder / "part-0.parquet")
    for name in ("_metadata", "_common_metadata"):  # a footer of the folder's schema, as summary files hold
        shutil.copy(folder / "part-0.parquet", folder / name)
    code, report = wap.run(str(folder), checks=NOT_NULL)
    assert code == 0 and report.rows_written == 1, report.error


@pytest.mark.parametrize("reverse", [False, True], ids=["links_listed_first", "links_listed_last"])
def test_a_folder_reached_again_through_links_is_listed_under_its_own_path(tmp_path, monkeypatch, reverse):
    """Listed once (a file rule's folder), its files keep the path without links, whatever order
    the directory lists the links and the folder in (both orders forced here)."""
    write(tmp_path / "in" / "real" / "x.csv", "id\n1\n")
    for name in ("0link", "zlink"):
        os.symlink(tmp_path / "in" / "real", tmp_path / "in" / name)
    scandir = os.scandir

    @contextlib.contextmanager
    def ordered(path):
        with scandir(path) as entries:
            yield iter(sorted(entries, key=lambda e: e.name, reverse=reverse))
    monkeypatch.setattr(os, "scandir", ordered)
    paths = [e.path for e in wap_etl.local_data_files(str(tmp_path / "in"), once=True)]
    assert paths == [str(tmp_path / "in" / "real" / "x.csv")]


def test_a_partition_file_counts_in_the_format_and_a_summary_file_does_not():
    with pytest.raises(wap_etl.WapError, match="found .csv, .json"):
        wap_etl.infer_format("in", ["a.csv", "_k=1.json"])
    assert wap_etl.infer_format("in", ["a.parquet", "_metadata", "_common_metadata"]) == "parquet"


def test_three_slashes_are_a_local_path_as_hadoop_reads_them():
    assert wap_etl.local_source("///data/a.csv") == "/data/a.csv"
