"""--dry_run: for CI of rulesets and job parameters. Every parameter, check (JSON or DQDL) and table
is checked against the table and a sample of the source; the plan is printed; nothing is written
(no table, no column, no branch, no ledger row, no report); exit 0, or 2 naming the first problem."""
import os

ROWS = [{"id": 1, "amount": 5.0}, {"id": 2, "amount": 7.5}]
UNIQUE = [{"check": "unique", "columns": ["id"]}]


def table_state(spark, wap):
    """Everything a run could change: snapshots, refs, schema, properties."""
    snapshots = [r[0] for r in spark.sql(f"SELECT snapshot_id FROM {wap.sql}.snapshots").collect()]
    props = {r[0]: r[1] for r in spark.sql(f"SHOW TBLPROPERTIES {wap.sql}").collect()}
    return snapshots, wap.refs(), spark.table(wap.sql).schema.simpleString(), props


def test_dry_run_of_a_new_table_creates_nothing(wap, spark, capsys):
    code, _ = wap.run(ROWS, checks=UNIQUE, dry_run="true", partition_by="id")
    assert code == 0
    out = capsys.readouterr().out
    assert "dry run: nothing was written" in out and f"create table local.{wap.table} partitioned by id" in out
    assert "id int" in out and "unique (fail)" in out
    assert not wap.exists()
    assert not spark.catalog.tableExists(f"{wap.sql}_wap_runs")
    assert not os.path.exists(wap.reports)
    assert wap.ns not in [r[0] for r in spark.sql("SHOW NAMESPACES IN local").collect()]


def test_dry_run_on_an_existing_table_changes_nothing(wap, spark, capsys):
    assert wap.run(ROWS, checks=UNIQUE)[0] == 0
    spark.sql(f"ALTER TABLE {wap.sql} SET TBLPROPERTIES ('write.wap.enabled'='false')")
    before = table_state(spark, wap)
    runs = spark.table(f"{wap.sql}_wap_runs").count()
    code, _ = wap.run([{"id": 3, "amount": 1.0, "note": "x"}], checks=UNIQUE, dry_run="true",
                      schema_evolution="add_columns")
    assert code == 0
    out = capsys.readouterr().out
    assert "add columns note string" in out and "set write.wap.enabled=true" in out
    assert table_state(spark, wap) == before
    assert spark.table(f"{wap.sql}_wap_runs").count() == runs


def test_dry_run_names_a_check_on_a_missing_column_and_exits_2(wap, spark):
    code, report = wap.run(ROWS, checks=[{"check": "not_null", "column": "amonut"}], dry_run="true")
    assert code == 2 and "unknown column 'amonut'" in report.error
    assert not wap.exists() and not spark.catalog.tableExists(f"{wap.sql}_wap_runs")


def test_dry_run_of_a_dqdl_ruleset_names_the_bad_rule(wap, tmp_path):
    ruleset = tmp_path / "rules.dqdl"
    ruleset.write_text('Rules = [\n  IsComplete "id",\n  ColumnValues "amount" >< 0\n]\n')
    code, report = wap.run(ROWS, checks=str(ruleset), dry_run="true")
    assert code == 2 and "line 3" in report.error
    assert not wap.exists()


def test_dry_run_resolves_the_tables_checks_read(wap, spark):
    relation = [{"check": "relationship", "columns": ["id"], "to_table": f"{wap.ns}.customers",
                 "to_columns": ["id"]}]
    code, report = wap.run(ROWS, checks=relation, dry_run="true")
    assert code == 2 and f"{wap.ns}.customers does not exist" in report.error
    assert not wap.exists()


def test_dry_run_reads_only_the_first_file_of_a_folder(wap, tmp_path, capsys):
    folder = tmp_path / "batch"
    folder.mkdir()
    (folder / "a.csv").write_text("id,amount\n1,5.0\n")
    with open(folder / "b.csv.gz", "wb") as f:  # not gzip at all: reading it would fail the run
        f.write(b"this is not gzip data" * 100)
    code, _ = wap.run(str(folder), checks=UNIQUE, dry_run="true", source_format="csv")
    assert code == 0
    assert "read 2 csv file(s)" in capsys.readouterr().out
    code, _ = wap.run(str(folder), checks=UNIQUE, source_format="csv")
    assert code != 0, "a real run reads the second file and fails on it"


def test_dry_run_checks_merge_keys_against_the_batch(wap):
    code, report = wap.run(ROWS, checks=UNIQUE, dry_run="true", mode="merge", merge_keys="key")
    assert code == 2 and "--merge_keys: unknown column 'key'" in report.error
    assert not wap.exists()


def test_dry_run_with_cleanup_is_refused(wap):
    code, report = wap.run(ROWS, dry_run="true", cleanup_branches_older_than_days="1")
    assert code == 2 and "--dry_run" in report.error


def test_dry_run_from_the_command_line_prints_the_plan_and_exits_0(wap):
    proc = wap.cli(ROWS, checks=UNIQUE, dry_run="true")
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out
    assert "dry run: nothing was written" in out and "publish it to main" in out
    assert not wap.exists()
