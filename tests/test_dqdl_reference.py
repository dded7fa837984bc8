"""DQDL reference-dataset rules through the real job: RowCountMatch, SchemaMatch, AggregateMatch and
DatasetMatch compare the batch with main of another table of the catalog, named in the rule
(namespace.table) or by an alias of --reference_tables. A missing table or an unknown alias is bad
input before anything is written."""
import pytest

import wap_etl
from conftest import CATALOG
from wap_etl import parse_dqdl

ROWS = [{"id": i, "amount": float(i), "name": f"n{i}"} for i in range(1, 11)]  # sum(amount) = 55
SCHEMA = "id int, amount double, name string"  # as the job reads ROWS from CSV


def reference(spark, wap, name, rows, schema=SCHEMA):
    """A reference table in the test's namespace; returns namespace.table."""
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.{wap.ns}")
    spark.createDataFrame(rows, schema).writeTo(f"{CATALOG}.{wap.ns}.{name}").using("iceberg").create()
    return f"{wap.ns}.{name}"


def run(wap, rules, **params):
    code, report = wap.run(ROWS, checks=f"Rules = [ {rules} ]", **params)
    return code, (report.checks[0] if report.checks else None), report


# ----- RowCountMatch ------------------------------------------------------------------------------

def test_rowcountmatch_passes_when_the_batch_has_the_reference_row_count(wap, spark):
    ref = reference(spark, wap, "ref", [(i, 0.0, "x") for i in range(10)])
    code, result, _ = run(wap, 'RowCountMatch "ref" >= 0.9', reference_tables={"ref": ref})
    assert code == 0 and result["passed"] and result["observed"] == 1.0
    assert wap.ids() == list(range(1, 11))


def test_rowcountmatch_fails_when_the_batch_is_a_tenth_of_the_reference(wap, spark):
    ref = reference(spark, wap, "ref", [(i, 0.0, "x") for i in range(100)])
    code, result, _ = run(wap, 'RowCountMatch "ref" >= 0.9', reference_tables={"ref": ref})
    assert code == 3 and not result["passed"] and result["observed"] == 0.1
    assert result["detail"] == "0.1 is outside [0.9..-"


def test_rowcountmatch_takes_a_table_named_in_the_rule(wap, spark):
    ref = reference(spark, wap, "ref", [(i, 0.0, "x") for i in range(20)])
    code, result, _ = run(wap, f'RowCountMatch "{ref}" = 0.5')
    assert code == 0 and result["observed"] == 0.5


def test_rowcountmatch_records_its_metric_for_dynamic_rules(wap, spark):
    ref = reference(spark, wap, "ref", [(i, 0.0, "x") for i in range(10)])
    code, result, _ = run(wap, 'RowCountMatch "ref" > 0', reference_tables={"ref": ref})
    assert code == 0 and result["metric"] == f"row_count_match:{ref}"
    code, report = wap.run(ROWS[:5], checks='Rules = [ RowCountMatch "ref" >= avg(last(1)) * 0.9 ]',
                           reference_tables={"ref": ref})
    assert code == 3 and report.checks[0]["observed"] == 0.5 and report.checks[0]["history"] == 1


# ----- SchemaMatch --------------------------------------------------------------------------------

def test_schemamatch_passes_when_names_and_types_are_the_same_in_any_order(wap, spark):
    ref = reference(spark, wap, "ref", [], "name string, id int, amount double")
    code, result, _ = run(wap, 'SchemaMatch "ref" = 1.0', reference_tables={"ref": ref})
    assert code == 0 and result["observed"] == 1.0


def test_schemamatch_fails_with_the_share_of_columns_matching_in_name_and_type(wap, spark):
    # id matches; amount differs in type; name is only in the batch, extra only in the reference
    ref = reference(spark, wap, "ref", [], "id int, amount string, extra string")
    code, result, _ = run(wap, 'SchemaMatch "ref" = 1.0', reference_tables={"ref": ref})
    assert code == 3 and result["observed"] == 0.25


# ----- AggregateMatch -----------------------------------------------------------------------------

def test_aggregatematch_passes_when_the_sums_agree(wap, spark):
    ref = reference(spark, wap, "ref", [(1, 50.0, "x"), (2, 5.0, "y")], "id int, total double, name string")
    code, result, _ = run(wap, 'AggregateMatch "sum(amount)" "sum(ref.total)" >= 0.95',
                          reference_tables={"ref": ref})
    assert code == 0 and result["observed"] == 1.0


def test_aggregatematch_fails_when_the_batch_sums_to_half_the_reference(wap, spark):
    ref = reference(spark, wap, "ref", [(1, 110.0, "x")], "id int, total double, name string")
    code, result, _ = run(wap, 'AggregateMatch "sum(amount)" "sum(ref.total)" >= 0.95',
                          reference_tables={"ref": ref})
    assert code == 3 and result["observed"] == 0.5


def test_aggregatematch_compares_an_average_with_a_table_named_in_the_rule(wap, spark):
    ref = reference(spark, wap, "ref", [(1, 11.0, "x")], "id int, total double, name string")
    code, result, _ = run(wap, f'AggregateMatch "avg({ref}.total)" "avg(amount)" = 2.0')
    assert code == 0 and result["observed"] == 2.0


def test_aggregatematch_refuses_a_text_column(wap, spark):
    code, _, report = run(wap, 'AggregateMatch "sum(name)" "sum(amount)" > 0')
    assert code == 2 and "sum(name) needs a numeric column" in report.error and not wap.exists()


# ----- DatasetMatch -------------------------------------------------------------------------------

def same_rows_but(changed):
    """The batch's rows as a reference keyed by ref_id, with `changed` ids renamed."""
    return [(r["id"], r["amount"], r["name"] + ("!" if r["id"] in changed else "")) for r in ROWS]


def test_datasetmatch_fails_when_a_fifth_of_the_rows_differ_in_a_column(wap, spark):
    ref = reference(spark, wap, "ref", same_rows_but({3, 7}), "ref_id int, amount double, name string")
    code, result, _ = run(wap, 'DatasetMatch "ref" "id->ref_id" >= 0.9', reference_tables={"ref": ref})
    assert code == 3 and result["observed"] == 0.8


def test_datasetmatch_passes_when_the_batch_equals_the_reference(wap, spark):
    ref = reference(spark, wap, "ref", same_rows_but(set()), "ref_id int, amount double, name string")
    code, result, _ = run(wap, 'DatasetMatch "ref" "id->ref_id" >= 0.9', reference_tables={"ref": ref})
    assert code == 0 and result["observed"] == 1.0


def test_datasetmatch_compares_only_the_match_columns_given(wap, spark):
    ref = reference(spark, wap, "ref", same_rows_but({3, 7}), "ref_id int, total double, name string")
    code, result, _ = run(wap, 'DatasetMatch "ref" "id->ref_id" "amount->total" >= 0.9',
                          reference_tables={"ref": ref})
    assert code == 0 and result["observed"] == 1.0


def test_datasetmatch_rows_whose_key_is_not_in_the_reference_do_not_match(wap, spark):
    ref = reference(spark, wap, "ref", same_rows_but(set())[:5], "ref_id int, amount double, name string")
    code, result, _ = run(wap, 'DatasetMatch "ref" "id->ref_id" > 0.6', reference_tables={"ref": ref})
    assert code == 3 and result["observed"] == 0.5


def test_datasetmatch_needs_the_other_columns_in_the_reference(wap, spark):
    ref = reference(spark, wap, "ref", [], "ref_id int, amount double")
    code, _, report = run(wap, 'DatasetMatch "ref" "id->ref_id" >= 0.9', reference_tables={"ref": ref})
    assert code == 2 and "has no column 'name'" in report.error and not wap.exists()


# ----- references ---------------------------------------------------------------------------------

def test_missing_reference_table_exits_2_before_anything_is_written(wap, spark):
    code, _, report = run(wap, 'RowCountMatch "ref" >= 0.9', reference_tables={"ref": f"{wap.ns}.nope"})
    assert code == 2
    assert report.error == (f"check 'RowCountMatch \"ref\" >= 0.9': reference 'ref' "
                            f"({CATALOG}.{wap.ns}.nope) does not exist")
    assert not wap.exists() and not spark.catalog.tableExists(f"{wap.sql}_wap_runs")


def test_missing_reference_leaves_an_existing_table_without_a_branch(wap, spark):
    assert run(wap, "RowCount > 0")[0] == 0
    before = wap.refs()
    code, _, report = run(wap, f'SchemaMatch "{wap.ns}.nope" = 1.0')
    assert code == 2 and "does not exist" in report.error and wap.refs() == before


def test_unknown_alias_exits_2_naming_the_rule_and_the_alias(wap):
    code, _, report = run(wap, 'AggregateMatch "sum(amount)" "sum(other.total)" > 0',
                          reference_tables={"ref": f"{wap.ns}.ref"})
    assert code == 2 and not wap.exists()
    assert report.error.startswith("check 'AggregateMatch \"sum(amount)\" \"sum(other.total)\" > 0': "
                                   "unknown reference alias 'other' (--reference_tables maps ref)")


def test_referentialintegrity_takes_an_alias(wap, spark):
    ref = reference(spark, wap, "ref", [(i, 0.0, "x") for i in range(1, 6)])
    code, result, _ = run(wap, 'ReferentialIntegrity "id" "ref.id" >= 0.5', reference_tables={"ref": ref})
    assert code == 0 and result["failing_rows"] == 5


def test_referentialintegrity_greater_than_is_strict(wap, spark):
    ref = reference(spark, wap, "ref", [(i, 0.0, "x") for i in range(1, 6)])  # half the batch's ids
    code, result, _ = run(wap, 'ReferentialIntegrity "id" "ref.id" > 0.5', reference_tables={"ref": ref})
    assert code == 3 and result["failing_rows"] == 5
    assert result["detail"] == "0.5 of the rows passed, expected > 0.5" and not wap.ids()
    code, result, _ = run(wap, 'ReferentialIntegrity "id" "ref.id" between 0.4 and 0.6', reference_tables={"ref": ref})
    assert code == 0 and result["passed"]


def test_referentialintegrity_with_a_dynamic_value_compares_the_share_with_its_history(wap, spark):
    """AWS's example, `> avg(last(10))`: the share of rows with a match is the rule's metric; with
    no history yet the rule passes (as any dynamic rule does), however few rows match."""
    ref = reference(spark, wap, "ref", [(i, 0.0, "x") for i in range(1, 6)])
    rules = 'Rules = [ ReferentialIntegrity "id" "ref.id" >= avg(last(10)) ]'
    code, report = wap.run(ROWS, checks=rules, reference_tables={"ref": ref})
    assert code == 0 and report.checks[0]["observed"] == 0.5, report.checks
    later = [dict(r, id=r["id"] + 10) for r in ROWS]  # ids 11..20: none in the reference
    code, report = wap.run(later, checks=rules, reference_tables={"ref": ref})
    r = report.checks[0]
    assert code == 3 and r["observed"] == 0.0 and r["expected"] == ">= 0.5" and r["history"] == 1, r
    assert wap.ids() == list(range(1, 11))


def test_a_relationship_condition_takes_shares_or_values_over_the_history():
    spec = {"check": "relationship", "column": "id", "to_table": "ns.ref", "condition": {"op": ">=", "values": ["0.5 + 0.6"]}}
    with pytest.raises(wap_etl.WapError, match="shares from 0 to 1 or values over the history"):
        wap_etl.parse_check(spec, 0)
    with pytest.raises(wap_etl.WapError, match="ReferentialIntegrity compares with a share from 0 to 1"):
        parse_dqdl('Rules = [ ReferentialIntegrity "id" "ns.ref.id" >= 0.5 + 0.6 ]')


def test_referentialintegrity_as_an_analyzer_records_the_share_without_a_verdict(wap, spark):
    ref = reference(spark, wap, "ref", [(i, 0.0, "x") for i in range(1, 6)])
    code, report = wap.run(ROWS, checks='Rules = [ RowCount > 0 ] Analyzers = [ ReferentialIntegrity "id" "ref.id" ]',
                           reference_tables={"ref": ref})
    [recorded] = [r for r in report.checks if r["action"] == "record"]
    assert code == 0 and recorded["observed"] == 0.5 and recorded["passed"], recorded
    [metrics] = [r["metrics"] for r in spark.table(f"{CATALOG}.{wap.ns}.orders_wap_runs").collect()]
    assert metrics[f"relationship:{ref}:id=id"] == 0.5


def test_reference_alias_may_hold_a_hyphen_as_in_glue(wap, spark):
    ref = reference(spark, wap, "ref", [(i, 0.0, "x") for i in range(10)])
    code, result, _ = run(wap, 'RowCountMatch "ref-1" >= 0.9', reference_tables={"ref-1": ref})
    assert code == 0 and result["observed"] == 1.0


def test_reference_rules_as_analyzers_record_their_values_without_a_verdict(wap, spark):
    ref = reference(spark, wap, "ref", [(i, 0.0, "x") for i in range(100)])
    code, report = wap.run(ROWS, checks='Rules = [ RowCount > 0 ] Analyzers = [ RowCountMatch "ref", '
                                        'AggregateMatch "sum(amount)" "sum(ref.id)" ]', reference_tables={"ref": ref})
    assert code == 0 and wap.ids() == list(range(1, 11))
    recorded = {r["name"]: r for r in report.checks if r["action"] == "record"}
    assert recorded['RowCountMatch "ref"']["observed"] == 0.1 and recorded['RowCountMatch "ref"']["passed"]
    assert recorded['AggregateMatch "sum(amount)" "sum(ref.id)"']["observed"] == 55 / 4950
    [metrics] = [r["metrics"] for r in spark.table(f"{CATALOG}.{wap.ns}.orders_wap_runs").collect()]
    assert metrics[f"row_count_match:{ref}"] == 0.1


def test_reference_tables_must_map_aliases_to_namespace_tables(wap):
    code, _, report = run(wap, 'RowCountMatch "ref" > 0', reference_tables={"ref": "nope"})
    assert code == 2 and report.error.startswith("--reference_tables: ref: expected namespace.table")


def test_dry_run_resolves_references(wap):
    code, _, report = run(wap, 'DatasetMatch "ref" "id" > 0.5', reference_tables={"ref": f"{wap.ns}.nope"},
                          dry_run="true")
    assert code == 2 and f"{wap.ns}.nope) does not exist" in report.error and not wap.exists()


# ----- the JSON form ------------------------------------------------------------------------------

def test_datasetmatch_compiles_glue_mappings_to_column_lists():
    check, = parse_dqdl('Rules = [ DatasetMatch "ref" "id->ref_id,part" "a->b" >= 0.9 ]')
    assert {k: check[k] for k in ("reference", "columns", "to_columns", "match_columns", "to_match_columns")} == {
        "reference": "ref", "columns": ["id", "part"], "to_columns": ["ref_id", "part"],
        "match_columns": ["a"], "to_match_columns": ["b"]}


def test_json_aggregate_match_with_a_condition(wap, spark):
    ref = reference(spark, wap, "ref", [(1, 110.0, "x")], "id int, total double, name string")
    check = {"check": "aggregate_match", "name": "half", "aggregates": ["sum(amount)", "sum(ref.total)"],
             "condition": {"op": "between", "values": [0.4, 0.6]}}
    code, report = wap.run(ROWS, checks=[check], reference_tables={"ref": ref})
    assert code == 0 and report.checks[0]["observed"] == 0.5


def test_json_dataset_match_pairs_match_columns(wap, spark):
    ref = reference(spark, wap, "ref", same_rows_but({3}), "ref_id int, total double, label string")
    check = {"check": "dataset_match", "reference": ref, "columns": ["id"], "to_columns": ["ref_id"],
             "match_columns": ["amount", "name"], "to_match_columns": ["total", "label"], "min": 0.95}
    code, report = wap.run(ROWS, checks=[check])
    assert code == 3 and report.checks[0]["observed"] == 0.9


@pytest.mark.parametrize("rule", ['ReferentialIntegrity "code" "ref.id" = 1.0',
                                  'DatasetMatch "ref" "id->id" "code->id" >= 0.5'])
def test_text_compared_with_a_number_of_the_reference_exits_2_before_anything_is_written(wap, spark, rule):
    """Spark would compare them through a cast of the text: "1.9" equals an int 1."""
    ref = reference(spark, wap, "ref", [(1, 0.0, "x"), (2, 0.0, "y")])
    rows = [{"id": 1, "code": "1.9"}, {"id": 2, "code": "n/a"}]  # a text column
    code, report = wap.run(rows, checks=f"Rules = [ {rule} ]", reference_tables={"ref": ref})
    assert code == 2 and "'code' is string but" in report.error and "cast one of them" in report.error, report.error
    assert not wap.exists()
