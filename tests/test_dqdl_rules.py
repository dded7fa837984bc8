"""DQDL as Glue Data Quality users write it, through the real job: conditions on metrics (!=, not
between, in, not in), thresholds with any comparator, labels, variables; and the JSON form of a
condition the rules compile to."""
import pytest

import wap_etl
from wap_etl import parse_dqdl

HUNDRED = [{"id": i, "status": "paid" if i % 3 else "new", "c": None if i % 10 < 3 else i}
           for i in range(100)]  # 66 paid, 34 new; completeness of c: 0.7


def run(wap, rules):
    return run_rows(wap, HUNDRED, rules)


def run_rows(wap, rows, rules):
    code, report = wap.run(rows, checks=rules)
    return code, {r["name"]: r for r in report.checks}


def error(text):
    with pytest.raises(wap_etl.WapError) as info:
        parse_dqdl(text)
    assert info.value.code == 2
    return str(info.value)


def test_rowcount_not_equal_fails_on_100_rows(wap):
    code, results = run(wap, "Rules = [ RowCount != 100, RowCount != 99 ]")
    assert code == 3
    assert results["RowCount != 100"]["passed"] is False
    assert results["RowCount != 100"]["detail"] == "100 rows, expected != 100"
    assert results["RowCount != 99"]["passed"] is True


def test_completeness_not_between_fails_inside_the_range(wap):
    code, results = run(wap, 'Rules = [ Completeness "c" not between 0.5 and 0.8, '
                             'Completeness "c" not between 0.8 and 0.9 ]')
    assert code == 3
    assert results['Completeness "c" not between 0.5 and 0.8']["passed"] is False
    assert results['Completeness "c" not between 0.8 and 0.9']["passed"] is True


def test_statistic_in_and_not_in_a_list(wap):
    code, results = run(wap, 'Rules = [ DistinctValuesCount "status" in [2, 3], '
                             'DistinctValuesCount "status" not in [2], Sum "id" != 4950 ]')
    assert code == 3
    assert results['DistinctValuesCount "status" in [2, 3]']["passed"] is True
    assert results['DistinctValuesCount "status" not in [2]']["passed"] is False
    assert results['Sum "id" != 4950']["passed"] is False


def test_threshold_at_most_fails_when_more_rows_pass(wap):
    code, results = run(wap, 'Rules = [ ColumnValues "status" in ["paid"] with threshold <= 0.4, '
                             'ColumnValues "status" in ["paid"] with threshold between 0.6 and 0.7 ]')
    assert code == 3
    low = results['ColumnValues "status" in ["paid"] with threshold <= 0.4']
    assert low["passed"] is False and low["failing_rows"] == 34
    assert "0.66 of the rows passed, expected <= 0.4" in low["detail"]
    assert results['ColumnValues "status" in ["paid"] with threshold between 0.6 and 0.7']["passed"]


def test_threshold_greater_than_is_strict_and_equal_is_exact(wap):
    code, results = run(wap, 'Rules = [ ColumnValues "id" < 50 with threshold > 0.5, '
                             'ColumnValues "id" < 50 with threshold >= 0.5, '
                             'ColumnValues "status" in ["paid"] with threshold = 0.66 ]')
    assert code == 3
    assert results['ColumnValues "id" < 50 with threshold > 0.5']["passed"] is False
    assert results['ColumnValues "id" < 50 with threshold >= 0.5']["passed"] is True
    assert results['ColumnValues "status" in ["paid"] with threshold = 0.66']["passed"] is True


def test_column_data_type_not_equal_fails_values_that_cast(wap):
    rows = [{"id": 1, "code": "12"}, {"id": 2, "code": "ab"}, {"id": 3, "code": "2024-01-31"}, {"id": 4, "code": None}]
    code, report = wap.run(rows, checks='Rules = [ ColumnDataType "code" != "INTEGER", '
                                        'ColumnDataType "code" not in ["INTEGER", "DATE"] ]')
    assert code == 3
    assert [r["failing_rows"] for r in report.checks] == [1, 2]  # NULL passes, as with =


def test_row_level_custom_sql_fails_the_rows_its_query_leaves_out(wap):
    code, results = run(wap, 'Rules = [ CustomSql "select id, status from primary where status = \'paid\'", '
                             'CustomSql "select id from primary where id >= 10" with threshold > 0.9 ]')
    assert code == 3
    paid = results['CustomSql "select id, status from primary where status = \'paid\'"']
    assert paid["passed"] is False and paid["failing_rows"] == 34
    assert all(row["status"] == "new" for row in paid["sample"])
    assert results['CustomSql "select id from primary where id >= 10" with threshold > 0.9']["passed"] is False
    code, results = run(wap, 'Rules = [ CustomSql "select id from primary where id >= 10" with threshold >= 0.9 ]')
    assert code == 0 and wap.exists()


def test_row_level_custom_sql_fails_when_its_query_returns_rows_the_batch_lacks(wap):
    code, results = run(wap, 'Rules = [ CustomSql "select id from primary union all select 1000" ]')
    result = results['CustomSql "select id from primary union all select 1000"']
    assert code == 3 and result["failing_rows"] == 0 and result["passed"] is False
    assert result["detail"] == "the query returned 1 row the batch does not hold"


@pytest.mark.parametrize("query,message", [
    ("select count(*) from primary", "a row-level query returns columns of the batch"),
    ("select id, id from primary", "a row-level query returns columns of the batch"),
    ("select id + 1 as nope from primary", "a row-level query returns columns of the batch"),
    ("select map(\'k\', status) as status from primary", "the query's rows cannot be paired with the batch's")])
def test_row_level_custom_sql_that_cannot_pair_with_the_batch_exits_2_before_writing(wap, query, message):
    code, report = wap.run(HUNDRED, checks=f'Rules = [ CustomSql "{query}" ]')
    assert code == 2 and message in report.error, report.error
    assert not wap.exists()


def test_json_threshold_outside_0_to_1_or_beside_a_tolerance_exits_2(wap):
    for extra, message in [({"threshold": {"op": ">", "values": [3]}}, "a threshold takes numbers from 0 to 1"),
                           ({"threshold": {"op": ">", "values": [0.5]}, "max_failing_rows": 3},
                            "give a threshold or max_failing_rows/max_failing_fraction, not both")]:
        code, report = wap.run(HUNDRED, checks=[{"check": "not_null", "column": "c", **extra}])
        assert code == 2 and message in report.error and not wap.exists()


def test_variables_and_labels_reach_the_report(wap):
    rules = '''allowed = ["new", "paid"]
    column = "status"
    DefaultLabels = ["team" = "orders"]
    Rules = [
        ColumnValues $column in $allowed labels = ["severity" = "high"],
        (RowCount > 0) labels = ["team" = "core"]
    ]'''
    code, report = wap.run(HUNDRED, checks=rules)
    assert code == 0
    assert [r["labels"] for r in report.checks] == [
        {"team": "orders", "severity": "high"}, {"team": "core"}]
    assert wap.exists()


def test_an_escaped_single_quote_in_a_value_is_a_quote_as_in_glue(wap):
    """Glue's parser reads "don\\'t" and "don't" as one value (in a list, a variable too)."""
    rows = [{"id": 1, "note": "don't"}, {"id": 2, "note": "x"}]
    rules = r'''v = ["don\'t", "x"]
Rules = [ ColumnValues "note" in ["don\'t", "x"], ColumnValues "note" in $v, ColumnValues "note" != "don\'t" ]'''
    code, report = wap.run(rows, checks=rules)
    passed = [r["passed"] for r in report.checks]
    assert code == 3 and passed == [True, True, False], report.checks


def test_variable_list_refuses_a_value_outside_it(wap):
    code, results = run(wap, 'only = ["new"]\nRules = [ ColumnValues "status" in $only ]')
    assert code == 3 and results['ColumnValues "status" in $only']["failing_rows"] == 66


def test_json_condition_on_row_count(wap):
    code, report = wap.run(HUNDRED, checks=[{"check": "row_count", "condition": {"op": "not in", "values": [100, 200]}}])
    assert code == 3 and report.checks[0]["detail"] == "100 rows, expected not in [100, 200]"


def test_json_condition_and_bounds_together_exit_2_before_writing(wap):
    code, report = wap.run(HUNDRED, checks=[{"check": "row_count", "min": 1,
                                             "condition": {"op": "!=", "values": [5]}}])
    assert code == 2 and "give a condition or min/max, not both" in report.error
    assert not wap.exists()


def test_json_threshold_only_on_row_checks(wap):
    code, report = wap.run(HUNDRED, checks=[{"check": "row_count", "min": 1,
                                             "threshold": {"op": "<", "values": [0.5]}}])
    assert code == 2 and "threshold applies to not_null, " in report.error


# ----- parsing: no run --------------------------------------------------------------------------

def test_empty_ruleset_is_an_error_as_in_glue():
    assert error("Rules = [\n]").endswith("DQDL line 2, column 1: a ruleset needs at least one rule")


def test_undefined_variable_names_its_position():
    assert "line 1, column 36: variable $nope is not defined" in error(
        'Rules = [ ColumnValues "status" in $nope ]')


def test_variable_list_as_a_single_value_is_refused():
    assert "column 35: a list variable goes after 'in'" in error(
        'v = ["a"]\nRules = [ ColumnValues "status" = $v ]')


def test_label_must_be_quoted_key_and_value():
    assert 'line 1, column 35: a label is "key" = "value"' in error(
        'Rules = [ RowCount > 0 labels = [ team = "x" ] ]')


def test_label_lengths_count_as_java_counts_them():
    # an emoji is one code point but two UTF-16 units, as Glue's Java String.length() counts
    parse_dqdl('Rules = [ RowCount > 0 labels = [ "%s" = "x" ] ]' % ("\U0001F600" * 64))
    assert "a label's key has 1 to 128 characters" in error(
        'Rules = [ RowCount > 0 labels = [ "%s" = "x" ] ]' % ("\U0001F600" * 65))


def test_a_variable_using_another_variable_is_refused_as_in_glue():
    assert "line 2, column 9: a variable's value cannot use another variable (outer)" in error(
        'inner = "x"\nouter = "where $inner"\nRules = [ CustomSql $outer ]')
    assert "line 1, column 11: a variable's value cannot use another variable (v)" in error(
        'v = ["a", "$x.y"]\nRules = [ ColumnValues "c" in $v ]')


def test_a_variable_name_starting_with_an_underscore_is_refused_as_in_glue():
    assert "line 1, column 1: a variable's name cannot start with '_'" in error('_v = "a"\nRules = [ IsComplete $_v ]')


def test_variable_as_a_column_parameter():
    checks = parse_dqdl('col = "order id"\nRules = [ IsComplete $col ]')
    assert checks[0]["column"] == "order id" and checks[0]["name"] == "IsComplete $col"


def test_not_equal_in_and_not_between_compile_to_conditions():
    assert parse_dqdl("Rules = [ RowCount != 100 ]")[0]["condition"] == {"op": "!=", "values": [100]}
    assert parse_dqdl('Rules = [ Mean "x" not between 1 and 2 ]')[0]["condition"] == {
        "op": "not between", "values": [1, 2]}
    assert parse_dqdl('Rules = [ CustomSql "select 1" in [1, 2] ]')[0]["condition"] == {
        "op": "in", "values": [1, 2]}


# ----- rule types that are metrics of the staged rows ---------------------------------------------

STATS_ROWS = [{"id": i, "x": x, "y": 2 * x, "z": 5 - x, "s": s}
              for i, (x, s) in enumerate(zip([1, 2, 3, 4], ["a", "a", "b", "c"]))]
METRIC_RULES = {  # rule: passes
    'Variance "x" = 1.25': True,  # population variance, as Glue's StandardDeviation
    'Variance "x" > 2': False,
    'Entropy "s" between 1.039 and 1.040': True,  # -(.5 ln .5 + 2 x .25 ln .25) = 1.0397
    'UniqueValueRatio "s" between 0.66 and 0.67': True,  # b, c once of a, b, c
    "ColumnCount = 5": True,
    "ColumnCount != 5": False,
    'ColumnCorrelation "x" "y" > 0.99': True,
    'ColumnCorrelation "x" "z" > 0': False,
    'Uniqueness "s" "x" = 1.0': True,
    'Uniqueness "s" > 0.5': False,  # b and c of four rows
    'ColumnNamesMatchPattern "[a-z]+"': True,
    'ColumnNamesMatchPattern "[xyz]"': False,
}


def test_metric_rule_types_through_the_job(wap):
    code, report = wap.run(STATS_ROWS, checks="Rules = [\n" + ",\n".join(METRIC_RULES) + "\n]")
    results = {r["name"]: r for r in report.checks}
    assert code == 3
    assert {name: results[name]["passed"] for name in METRIC_RULES} == METRIC_RULES
    assert results['Entropy "s" between 1.039 and 1.040']["observed"] == pytest.approx(1.0397, abs=1e-4)
    assert results["ColumnCount = 5"]["observed"] == 5
    assert results['ColumnNamesMatchPattern "[xyz]"']["detail"] == "not matching: id, s"
    assert report.metrics["entropy:s"] == pytest.approx(1.0397, abs=1e-4)
    assert report.metrics["unique_fraction:s,x"] == 1.0


def test_uniqueness_and_entropy_leave_rows_without_a_value_out_as_deequ_does(wap):
    rows = [{"id": i, "s": s, "t": t} for i, (s, t) in
            enumerate([("a", "x"), ("b", None), ("c", None), (None, "x"), (None, None)])]
    code, report = wap.run(rows, checks='Rules = [ Uniqueness "s" = 1.0, Uniqueness "s" "t" = 1.0, '
                                        'Entropy "s" between 1.0986 and 1.0987 ]')  # ln 3
    assert code == 0, [(r["name"], r["observed"]) for r in report.checks]


def test_json_stat_over_two_columns_and_a_where(wap):
    code, report = wap.run(STATS_ROWS, checks=[
        {"check": "stat", "stat": "correlation", "columns": ["x", "z"], "where": "s = 'a'", "max": -0.99},
        {"check": "stat", "stat": "unique_fraction", "columns": ["s", "x"], "condition": {"op": "=", "values": [1]}}])
    assert code == 0 and [r["observed"] for r in report.checks] == [pytest.approx(-1.0), 1.0]


def test_correlation_of_a_string_column_exits_2_naming_it(wap):
    code, report = wap.run(STATS_ROWS, checks='Rules = [ ColumnCorrelation "x" "s" > 0 ]')
    assert code == 2 and "correlation needs a numeric column; 's' is string" in report.error
    assert not wap.exists()


def test_correlation_takes_two_columns():
    assert "line 1, column 11: ColumnCorrelation takes 2 columns, got 3" in error(
        'Rules = [ ColumnCorrelation "a" "b" "c" > 0 ]')
    assert "column 23: ColumnCount takes no column" in error('Rules = [ ColumnCount "a" > 0 ]')


# ----- composite rules ------------------------------------------------------------------------------

def test_composite_or_passes_when_one_side_passes_and_and_fails_when_one_fails(wap):
    rules = '''Rules = [
        (ColumnCount = 5) OR (RowCount > 100),
        (ColumnCount = 5) AND (RowCount > 100),
        (RowCount > 100) or ((Mean "x" > 2) and (IsComplete "s"))
    ]'''
    code, report = wap.run(STATS_ROWS, checks=rules)
    results = {r["name"]: r for r in report.checks}
    assert code == 3 and len(report.checks) == 3
    assert results["(ColumnCount = 5) OR (RowCount > 100)"]["passed"] is True
    both = results["(ColumnCount = 5) AND (RowCount > 100)"]
    assert both["passed"] is False and both["detail"] == "failed: (RowCount > 100)"
    assert [r["passed"] for r in both["rules"]] == [True, False]
    nested = results['(RowCount > 100) or ((Mean "x" > 2) and (IsComplete "s"))']
    assert nested["passed"] is True
    assert [r["passed"] for r in nested["rules"][1]["rules"]] == [True, True]


def test_composite_and_without_parentheses_binds_tighter_than_or():
    check = parse_dqdl('Rules = [ RowCount > 0 or IsComplete "a" and IsComplete "b" ]')[0]
    assert check["op"] == "or" and check["rules"][1]["op"] == "and"
    assert [r["name"] for r in check["rules"][1]["rules"]] == ['IsComplete "a"', 'IsComplete "b"']


def test_composite_of_a_row_rule_fails_on_its_failing_rows(wap):
    code, report = wap.run(STATS_ROWS, checks='Rules = [ (ColumnValues "s" in ["a"]) and (RowCount = 4) ]')
    assert code == 3
    assert report.checks[0]["rules"][0]["failing_rows"] == 2 and report.checks[0]["rules"][1]["passed"]


# ----- dynamic rules over the run ledger ---------------------------------------------------------

def rows(n, start):
    return [{"id": start + i, "x": float(i % 4)} for i in range(n)]


def test_rowcount_below_80_percent_of_the_last_average_fails(wap):
    rule = "Rules = [ RowCount > avg(last(10)) * 0.8 ]"
    code, report = wap.run(rows(10, 0), checks=rule)  # no history yet: passes
    assert code == 0 and report.checks[0]["history"] == 0 and report.checks[0]["expected"] is None
    assert wap.run(rows(20, 100), checks=rule)[0] == 0  # 20 > 0.8 x 10
    code, report = wap.run(rows(11, 200), checks=rule)  # 11 <= 0.8 x avg(10, 20) = 12
    r = report.checks[0]
    assert code == 3 and r["history"] == 2 and r["expected"] == "> 12"
    assert r["detail"] == "11 rows, expected > 12"
    assert wap.run(rows(13, 300), checks=rule)[0] == 0  # the failed run is not history


def test_dynamic_statistic_between_the_last_runs_min_and_max(wap):
    rule = 'Rules = [ Sum "x" between min(last(2)) - 1 and max(last(2)) + 1 ]'
    assert wap.run(rows(4, 0), checks=rule)[0] == 0  # sum 6
    code, report = wap.run(rows(8, 100), checks=rule)  # sum 12, outside (5, 7): fails on one run
    assert code == 3 and report.checks[0]["history"] == 1
    code, report = wap.run(rows(7, 200), checks=rule)  # sum 9: within (6 - 1, 6 + 1)? no
    assert code == 3 and report.checks[0]["expected"] == "between 5 and 7"
    assert wap.run(rows(5, 300), checks=rule)[0] == 0  # sum 6


def test_dynamic_values_in_a_json_condition(wap):
    check = {"check": "stat", "column": "x", "stat": "sum", "condition": {"op": "<=", "values": ["index(last(1), 0)"]}}
    assert wap.run(rows(8, 0), checks=[check])[0] == 0
    assert wap.run(rows(4, 100), checks=[check])[0] == 0  # 6 <= 12
    assert wap.run(rows(8, 200), checks=[check])[0] == 3  # 12 > 6


def test_dynamic_rule_errors_name_their_position():
    assert "column 22: avg() takes a list: last(k)" in error("Rules = [ RowCount > avg(3) ]")
    assert "column 22: expected a number, found a list" in error("Rules = [ RowCount > last(3) ]")
    assert "column 22: unknown function foo(); known: last, avg" in error("Rules = [ RowCount > foo(1) ]")


def test_numbers_compare_with_a_text_column_as_numbers(wap, monkeypatch):
    """Glue reads a rule's numbers as doubles: a text column's "0.5" lies between 0 and 1 and
    "0.0" is 0 (Spark alone would read "0.5" as the whole number 0 beside 0, or compare "0.0" with
    0 as text in a list)."""
    monkeypatch.setattr(wap_etl, "transform",
                        lambda df: df.selectExpr("id", "CAST(rate AS STRING) AS rate", "CAST(qty AS STRING) AS qty"))
    rows = [{"id": 1, "rate": 0.5, "qty": 0.0}, {"id": 2, "rate": 5.5, "qty": 2.5}]
    code, results = run_rows(wap, rows, 'Rules = [ ColumnValues "rate" not between 0 and 1, '
                             'ColumnValues "qty" not in [0, 1], ColumnValues "rate" != 0, '
                             'ColumnValues "rate" not between 0.1 and 0.2, ColumnValues "qty" != 2 ]')
    assert code == 3
    assert wap.spark.table(wap.sql).schema["rate"].dataType.simpleString() == "string"
    failing = {name: r["failing_rows"] for name, r in results.items()}
    assert failing == {'ColumnValues "rate" not between 0 and 1': 1, 'ColumnValues "qty" not in [0, 1]': 1,
                       'ColumnValues "rate" != 0': 0, 'ColumnValues "rate" not between 0.1 and 0.2': 0,
                       'ColumnValues "qty" != 2': 0}


def test_numbers_compare_with_a_decimal_column_exactly(wap, monkeypatch):
    """Only a text column's values are read as doubles: a decimal's 0.999999999999999999 is not 1."""
    monkeypatch.setattr(wap_etl, "transform", lambda df: df.selectExpr(
        "id", "CAST(IF(id = 1, '0.999999999999999999', '1') AS DECIMAL(38,18)) AS d"))
    code, results = run_rows(wap, [{"id": 1}, {"id": 2}], 'Rules = [ ColumnValues "d" not between 0 and 1, '
                             'ColumnValues "d" != 1, ColumnValues "d" not in [1, 2], '
                             'ColumnValues "d" not in [0.999999999999999999, 1] ]')
    assert code == 3
    failing = {name: r["failing_rows"] for name, r in results.items()}
    assert failing == {'ColumnValues "d" not between 0 and 1': 1, 'ColumnValues "d" != 1': 1,
                       'ColumnValues "d" not in [1, 2]': 1, 'ColumnValues "d" not in [0.999999999999999999, 1]': 2}


def test_empty_on_a_date_column_is_compared_as_text(wap, monkeypatch):
    """A date is never EMPTY: != EMPTY passes every date, not in [a date, EMPTY] fails only that date."""
    monkeypatch.setattr(wap_etl, "transform", lambda df: df.selectExpr("id", "date_add(DATE'2024-01-01', id) AS d"))
    code, results = run_rows(wap, [{"id": 0}, {"id": 1}], 'Rules = [ ColumnValues "d" != EMPTY, '
                             'ColumnValues "d" not in ["2024-01-01", EMPTY], ColumnValues "d" in ["2024-01-02", EMPTY] ]')
    assert code == 3
    failing = {name: r["failing_rows"] for name, r in results.items()}
    assert failing == {'ColumnValues "d" != EMPTY': 0, 'ColumnValues "d" not in ["2024-01-01", EMPTY]': 1,
                       'ColumnValues "d" in ["2024-01-02", EMPTY]': 1}


def test_matches_closes_an_open_quote_before_the_anchor(wap, monkeypatch):
    r"""An open \Q quotes to the pattern's end: it must not swallow the anchor that makes the match whole."""
    monkeypatch.setattr(wap_etl, "transform", lambda df: df.selectExpr("id", "IF(id = 1, 'price$', 'price$x') AS p"))
    code, results = run_rows(wap, [{"id": 1}, {"id": 2}], r'Rules = [ ColumnValues "p" matches "^\Qprice$", '
                             r'ColumnValues "p" matches "\Qprice$", ColumnValues "p" not matches "\Qprice$" ]')
    assert code == 3
    assert {name: r["failing_rows"] for name, r in results.items()} == {
        r'ColumnValues "p" matches "^\Qprice$"': 1, r'ColumnValues "p" matches "\Qprice$"': 1,
        r'ColumnValues "p" not matches "\Qprice$"': 1}


def test_a_pattern_with_the_comments_flag_is_refused():
    """A (?x) comment could swallow the anchor: refused, whatever the flag's scope."""
    for rule in ('ColumnValues "c" matches "(?x) abc # letters"', 'ColumnValues "c" not matches "(?x: [a-z]+ )@x"',
                 'ColumnValues "c" matches "(?ix)abc" with ignoreCase = "true"'):
        assert "comments" in error(f"Rules = [ {rule} ]")


DECIMALS = "CAST(IF(id = 1, '0.999999999999999999', '1') AS DECIMAL(38,18)) AS d"


def test_bounds_compare_with_a_decimal_column_by_the_digits_written(wap, monkeypatch):
    """A bound of 18 decimals is no double: 1 is above 0.999999999999999999 (JSON checks and DQDL alike)."""
    monkeypatch.setattr(wap_etl, "transform", lambda df: df.selectExpr("id", DECIMALS))
    code, report = wap.run([{"id": 1}, {"id": 2}], checks='[{"check": "between", "column": "d", "max": 0.999999999999999999}, '
                           '{"check": "accepted_values", "column": "d", "values": [0.999999999999999999], "name": "in"}]')
    assert code == 3
    assert [r["failing_rows"] for r in report.checks] == [1, 1]
    code, results = run_rows(wap, [{"id": 1}, {"id": 2}], 'Rules = [ ColumnValues "d" <= 0.999999999999999999, '
                             'ColumnValues "d" = 0.999999999999999999, ColumnValues "d" between 0 and 0.999999999999999999 ]')
    assert code == 3
    assert {name: r["failing_rows"] for name, r in results.items()} == {
        'ColumnValues "d" <= 0.999999999999999999': 1, 'ColumnValues "d" = 0.999999999999999999': 1,
        'ColumnValues "d" between 0 and 0.999999999999999999': 2}


def test_accepted_decimals_too_wide_for_one_type_still_fail_other_values(wap, monkeypatch):
    """Spark compares an IN list as one type: values that fit the column one by one but not all
    together must not turn the test into NULL (a row passing unseen)."""
    monkeypatch.setattr(wap_etl, "transform", lambda df: df.selectExpr("id", "CAST(id * 5 AS DECIMAL(10,2)) AS d"))
    code, report = wap.run([{"id": 1}, {"id": 2}], checks='[{"check": "accepted_values", "column": "d", '
                           '"values": [5, 99999999999.5, 0.1234567890123456789012345678]}]')
    assert code == 3 and report.checks[0]["failing_rows"] == 1


def test_a_small_whole_number_in_the_list_keeps_the_decimals_exact(wap, monkeypatch):
    """1 is an int literal (10 digits): beside decimal(38,19) the list still holds every digit."""
    monkeypatch.setattr(wap_etl, "transform", lambda df: df.selectExpr(
        "id", "CAST(IF(id = 1, '0.5000000000000000001', '1') AS DECIMAL(38,19)) AS d"))
    code, report = wap.run([{"id": 1}, {"id": 2}], checks='[{"check": "accepted_values", "column": "d", "values": [1, 0.5]}]')
    assert code == 3 and report.checks[0]["failing_rows"] == 1


def test_a_whole_bound_too_wide_for_a_decimal_column_compares_as_a_double(wap, monkeypatch):
    """10^18 beside decimal(38,20): their common type keeps 18 whole digits, so the literal would
    be NULL and every row would fail; it is compared as a double, as the metadata proof reads it."""
    monkeypatch.setattr(wap_etl, "transform", lambda df: df.selectExpr("id", "CAST(id AS DECIMAL(38,20)) AS d"))
    code, report = wap.run([{"id": 1}, {"id": 2}], checks='[{"check": "between", "column": "d", "max": 1000000000000000000}, '
                           '{"check": "accepted_values", "column": "d", "values": [1, 2, 1000000000000000000]}]')
    assert code == 0, report.checks


def test_a_decimal_bound_proven_from_file_bounds_agrees_with_the_scan(wap, monkeypatch):
    """The files' bounds decide a decimal bound by its digits, as the scan does: at most
    0.999999999999999999 is proven, and 1 against it is found."""
    monkeypatch.setattr(wap_etl, "SMALL_BATCH_ROWS", 0)  # a large batch's audit: metadata first
    monkeypatch.setattr(wap_etl, "transform", lambda df: df.selectExpr("id", DECIMALS))
    check = '[{"check": "between", "column": "d", "max": 0.999999999999999999}]'
    code, report = wap.run([{"id": 1}], checks=check)
    assert code == 0, report.error
    assert report.checks[0]["decided_by"] == "metadata" and report.checks[0]["failing_rows"] == 0
    code, report = wap.run([{"id": 2}], checks=check)
    assert code == 3 and report.checks[0]["failing_rows"] == 1 and report.checks[0]["decided_by"] != "metadata"


def test_numbers_beside_empty_are_refused():
    assert "never EMPTY" in error('Rules = [ ColumnValues "n" not in [5, EMPTY] ]')


def test_matches_is_a_whole_value_match_without_a_final_line_break(wap, monkeypatch):
    r"""Java's $ also matches before a final line break: "12345\n" is not five digits."""
    monkeypatch.setattr(wap_etl, "transform", lambda df: df.selectExpr(
        "id", "concat(CAST(zip AS STRING), IF(id = 2, '\\n', '')) AS zip"))
    rows = [{"id": 1, "zip": 12345}, {"id": 2, "zip": 12345}]
    code, results = run_rows(wap, rows, r'Rules = [ ColumnValues "zip" matches "[0-9]{5}", '
                             r'ColumnValues "zip" matches "^[0-9]{5}$", ColumnValues "zip" not matches "[0-9]{5}", '
                             r'ColumnValues "zip" in ["12345"] ]')
    assert code == 3
    failing = {name: r["failing_rows"] for name, r in results.items()}
    assert failing == {'ColumnValues "zip" matches "[0-9]{5}"': 1, 'ColumnValues "zip" matches "^[0-9]{5}$"': 1,
                       'ColumnValues "zip" not matches "[0-9]{5}"': 1, 'ColumnValues "zip" in ["12345"]': 1}


def test_a_window_written_with_its_ends_reversed_is_the_same_window(wap):
    """Glue writes a window either way round (its own example: between now() and (now() - 45
    minutes)); reversed, a not between must not pass every value, nor a between fail every one."""
    from datetime import datetime, timedelta, timezone
    now = datetime.now(timezone.utc)
    stamp = lambda ago: (now - ago).strftime("%Y-%m-%dT%H:%M:%SZ")  # noqa: E731
    rows = [{"id": 1, "x": 5, "ts": stamp(timedelta(minutes=10))},
            {"id": 2, "x": 50, "ts": stamp(timedelta(hours=5))}]
    pairs = [('ColumnValues "ts" not between now() and (now() - 45 minutes)',
              'ColumnValues "ts" not between (now() - 45 minutes) and now()'),
             ('ColumnValues "ts" between now() and (now() - 45 minutes)',
              'ColumnValues "ts" between (now() - 45 minutes) and now()'),
             ('DataFreshness "ts" not between 24 hours and 2 hours', 'DataFreshness "ts" not between 2 hours and 24 hours'),
             ('ColumnValues "x" not between 10 and 1', 'ColumnValues "x" not between 1 and 10'),
             ('ColumnValues "x" between 10 and 1', 'ColumnValues "x" between 1 and 10'),
             ('ColumnValues "ts" not between "2999-01-01" and now()', 'ColumnValues "ts" not between now() and "2999-01-01"'),
             ("RowCount not between 10 and 1", "RowCount not between 1 and 10")]
    code, results = run_rows(wap, rows, "Rules = [ " + ", ".join(r for pair in pairs for r in pair) + " ]")
    assert code == 3
    for reversed_, written in pairs:
        got, want = results[reversed_], results[written]
        assert (got["passed"], got.get("failing_rows")) == (want["passed"], want.get("failing_rows")), (got, want)
    assert [results[p[0]]["passed"] for p in pairs] == [False, False, False, False, False, True, False]
    assert [results[p[0]].get("failing_rows") for p in pairs[:5]] == [1, 1, 1, 1, 1]


def test_a_json_condition_takes_between_ends_either_way_round(wap):
    code, report = wap.run([{"id": 1}, {"id": 2}], checks=[
        {"check": "row_count", "name": "reversed", "condition": {"op": "not between", "values": [10, 1]}}])
    assert code == 3 and not report.checks[0]["passed"], report.checks


@pytest.mark.parametrize("rule", ['ColumnValues "ts" not between "21:45" and "6:00 AM"',
                                  'FileFreshness between "9:30 PM" and "9:30 AM"'])
def test_two_times_of_day_with_the_later_first_are_refused_for_the_window_may_cross_midnight(rule):
    assert "is later than" in error(f"Rules = [ {rule} ]")


def test_a_date_that_does_not_exist_is_refused_where_it_bounds_values():
    assert '"2024-02-30" is not a date' in error('Rules = [ ColumnValues "d" not between "2024-02-30" and now() ]')
