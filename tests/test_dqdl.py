"""DQDL rulesets: each supported rule maps to the check DQDL's documented semantics describe, and
every error names its line and column (pure parsing, no Spark); then rulesets through the job."""
import re

import pytest

import wap_etl
from wap_etl import parse_dqdl


def one(rule):
    """The single check of a one-rule ruleset, without its name and action."""
    checks = parse_dqdl(f"Rules = [ {rule} ]")
    assert len(checks) == 1
    check = dict(checks[0])
    assert check.pop("name") == " ".join(rule.split()) == check.pop("dqdl")
    assert check.pop("action") == "fail"
    return check


def by_type(column, text, floats, exact):
    """A ColumnValues comparison with numbers: a text column's values read as doubles, a float
    column's with the numbers as its floats, any other column's compared exactly (Spark folds the
    typeof away)."""
    return f"CASE WHEN typeof({column}) = 'string' THEN {text} WHEN typeof({column}) = 'float' THEN {floats} ELSE {exact} END"


def error(text):
    with pytest.raises(wap_etl.WapError) as info:
        parse_dqdl(text)
    assert info.value.code == 2
    message = str(info.value)
    assert message.startswith("--checks: ")
    return message[len("--checks: "):]


# ----- rule types ---------------------------------------------------------------------------

def test_is_complete():
    assert one('IsComplete "order_id"') == {"check": "not_null", "column": "order_id"}


def test_completeness_at_least_is_not_null_with_tolerance():
    assert one('Completeness "email" >= 0.95') == {
        "check": "not_null", "column": "email", "max_failing_fraction": 0.05}
    assert one('Completeness "email" = 1.0') == {"check": "not_null", "column": "email"}


def test_completeness_other_bounds_become_null_fraction():
    assert one('Completeness "email" > 0.95') == {
        "check": "stat", "column": "email", "stat": "null_fraction",
        "max": 0.05, "max_exclusive": True}
    assert one('Completeness "email" between 0.5 and 0.8') == {
        "check": "stat", "column": "email", "stat": "null_fraction",
        "min": 0.2, "max": 0.5, "min_exclusive": True, "max_exclusive": True}
    assert one('Completeness "email" <= 0.1') == {
        "check": "stat", "column": "email", "stat": "null_fraction", "min": 0.9}


def test_is_unique_one_and_several_columns():
    assert one('IsUnique "email"') == {"check": "unique", "columns": ["email"]}
    assert one('IsUnique "vendorid" "tpep_pickup_datetime"') == {
        "check": "unique", "columns": ["vendorid", "tpep_pickup_datetime"]}


def test_uniqueness_is_a_stat():
    assert one('Uniqueness "id" > 0.99') == {
        "check": "stat", "column": "id", "stat": "unique_fraction",
        "min": 0.99, "min_exclusive": True}


def test_is_primary_key_with_bare_and_quoted_names():
    assert one('IsPrimaryKey colA "col B"') == {"check": "primary_key", "columns": ["colA", "col B"]}


def test_column_values_in():
    assert one('ColumnValues "status" in ["new", "paid"]') == {
        "check": "accepted_values", "column": "status", "values": ["new", "paid"], "allow_null": False}
    assert one('ColumnValues "n" in [1, 2, 3.5, NULL]') == {
        "check": "accepted_values", "column": "n", "values": [1, 2, 3.5, None], "allow_null": False}
    # EMPTY tests the value as text (a date or a number is never EMPTY)
    assert one('ColumnValues "c" in ["a", EMPTY]') == {
        "check": "expression", "expr": "coalesce(`c` IS NOT NULL AND ((`c` IN ('a') OR CAST(`c` AS STRING) = '')), false)"}


def test_column_values_in_with_whitespaces_only_is_an_expression():
    assert one('ColumnValues "Country" in ["US", NULL, WHITESPACES_ONLY]') == {
        "check": "expression",
        "expr": "coalesce((`Country` IN ('US') OR `Country` IS NULL OR `Country` RLIKE '^\\\\s+$'), false)"}


def test_column_values_not_in():
    assert one('ColumnValues "age" not in [21, 22]') == {
        "check": "expression", "expr": "coalesce(`age` IS NULL OR (" + by_type(
            "`age`", "CAST(`age` AS DOUBLE) NOT IN (21D, 22D)", "`age` NOT IN (21.0D, 22.0D)",
            "`age` NOT IN (21L, 22L)") + "), false)"}
    # an explicit NULL in the list makes NULL rows fail (per the DQDL docs)
    assert one('ColumnValues "age" not in [21, NULL]') == {
        "check": "expression", "expr": "coalesce(" + by_type(
            "`age`", "CAST(`age` AS DOUBLE) IS NOT NULL AND CAST(`age` AS DOUBLE) NOT IN (21D)",
            "`age` IS NOT NULL AND `age` NOT IN (21.0D)", "`age` IS NOT NULL AND `age` NOT IN (21L)") + ", false)"}


def test_column_values_equal_and_not_equal():
    assert one('ColumnValues "c" = "A"') == {
        "check": "accepted_values", "column": "c", "values": ["A"], "allow_null": False}
    assert one('ColumnValues "c" != "A"') == {"check": "expression", "expr": "coalesce(`c` IS NULL OR (`c` <> 'A'), false)"}
    assert one('ColumnValues "c" ! = 5') == {"check": "expression", "expr": "coalesce(`c` IS NULL OR ("
                                                + by_type("`c`", "CAST(`c` AS DOUBLE) <> 5D", "`c` <> 5.0D", "`c` <> 5L") + "), false)"}
    assert one('ColumnValues "c" != NULL') == {"check": "not_null", "column": "c"}
    assert one('ColumnValues "c" = NULL') == {"check": "expression", "expr": "coalesce(`c` IS NULL, false)"}
    assert one('ColumnValues "c" = EMPTY') == {
        "check": "expression", "expr": "coalesce(`c` IS NOT NULL AND (CAST(`c` AS STRING) = ''), false)"}


def test_column_values_between_is_exclusive():
    assert one('ColumnValues "Customer_ID" between 1 and 2000') == {
        "check": "between", "column": "Customer_ID", "min": 1, "max": 2000,
        "min_exclusive": True, "max_exclusive": True, "allow_null": False}
    assert one('ColumnValues "d" between "2022-06-01" and "2022-06-30"') == {
        "check": "between", "column": "d", "min": "2022-06-01", "max": "2022-06-30",
        "min_exclusive": True, "max_exclusive": True, "allow_null": False}


def test_column_values_comparisons_strict_and_inclusive():
    nulls_fail = {"check": "between", "column": "x", "allow_null": False}
    assert one('ColumnValues "x" > 0') == dict(nulls_fail, min=0, min_exclusive=True)
    assert one('ColumnValues "x" >= -1.5') == dict(nulls_fail, min=-1.5)
    assert one('ColumnValues "x" < 10') == dict(nulls_fail, max=10, max_exclusive=True)
    assert one('ColumnValues "x" <= 10') == dict(nulls_fail, max=10)
    assert one('ColumnValues "d" >= "2024-01-01"') == dict(nulls_fail, column="d", min="2024-01-01")


def test_column_values_not_between():
    assert one('ColumnValues "x" not between 1 and 5') == {
        "check": "expression", "expr": "coalesce(`x` IS NOT NULL AND (" + by_type(
            "`x`", "(CAST(`x` AS DOUBLE) <= 1D OR CAST(`x` AS DOUBLE) >= 5D)", "(`x` <= 1.0D OR `x` >= 5.0D)",
            "(`x` <= 1L OR `x` >= 5L)") + "), false)"}


def test_column_values_dates_relative_to_now():
    assert one('ColumnValues "Load_Date" > (now() - 3 days)') == {
        "check": "expression",
        "expr": "coalesce(`Load_Date` IS NOT NULL AND (`Load_Date` > (current_timestamp() - INTERVAL 3 DAYS)), false)"}
    assert one('ColumnValues "t" between (now() - 3 hours) and now()') == {
        "check": "expression",
        "expr": "coalesce(`t` IS NOT NULL AND (`t` > (current_timestamp() - INTERVAL 3 HOURS) AND "
                "`t` < current_timestamp()), false)"}


def test_column_values_matches_is_anchored():
    assert one('ColumnValues "First_Name" matches "[a-zA-Z]*"') == {
        "check": "regex", "column": "First_Name", "pattern": r"^(?:[a-zA-Z]*)\z", "allow_null": False}
    # backslashes belong to the regex: DQDL passes the pattern through as written; a pattern
    # that is already anchored keeps its ^, and ends at \z, the value's end (Java's $ also
    # matches before a final line break)
    assert one(r'ColumnValues "zip" matches "^\d{5}$"')["pattern"] == r"^\d{5}\z"
    assert one('ColumnValues "c" matches "^a|b$"')["pattern"] == r"^(?:^a|b$)\z"
    assert one(r'ColumnValues "zip" matches "\d{5}"') == {
        "check": "regex", "column": "zip", "pattern": r"^(?:\d{5})\z", "allow_null": False}
    assert one(r'ColumnValues "zip" not matches "\d{5}"') == {
        "check": "expression", "expr": r"coalesce(`zip` IS NOT NULL AND (NOT (`zip` RLIKE '^(?:\\d{5})\\z')), false)"}


def test_column_values_ignore_case_compares_lower_case():
    assert one('ColumnValues "c" in ["B", "a", NULL] with ignoreCase = "true"') == {
        "check": "expression", "expr": "coalesce((lower(`c`) IN ('b', 'a') OR lower(`c`) IS NULL), false)"}
    assert one('ColumnValues "c" != "Lost" with ignoreCase = "true"') == {
        "check": "expression", "expr": "coalesce(`c` IS NULL OR (lower(`c`) <> 'lost'), false)"}
    assert one('ColumnValues "c" matches "[a-z]+" with ignoreCase = "true"') == {
        "check": "regex", "column": "c", "pattern": r"(?iu)^(?:[a-z]+)\z", "allow_null": False}
    assert one('ColumnValues "c" = "A" with ignoreCase = "false"')["check"] == "accepted_values"


@pytest.mark.parametrize("rule, message", [
    ('ColumnValues "c" > 3 with ignoreCase = "true"', "ignoreCase goes with =, !=, in"),
    ('ColumnValues "c" = "a" with ignoreCase = "yes"', 'ignoreCase = "true" or "false"'),
    ('ColumnValues "c" in [1, 2] with ignoreCase = "true"', "ignoreCase compares strings"),
    ('IsComplete "c" with ignoreCase = "true"', "'with' is not supported for IsComplete"),
])
def test_ignore_case_misuse_is_refused(rule, message):
    assert message in error(f"Rules = [ {rule} ]")


def test_numbers_and_strings_together_are_refused():
    assert "column 28: compare with numbers or with strings, not both" in error('Rules = [ ColumnValues "a" in [1, "x"] ]')
    assert "compare with numbers or with strings" in error('Rules = [ ColumnValues "a" between "2024-01-01" and 5 ]')


def test_a_rule_the_check_spec_refuses_names_its_position():
    assert error('Rules = [\n  RowCount > 0,\n  CustomSql "   " = 0 ]') == "DQDL line 3, column 3: query must be a SQL query"


def test_column_exists():
    assert one('ColumnExists "load_dt"') == {"check": "column_exists", "column": "load_dt"}


def test_column_data_type_is_castability():
    assert one('ColumnDataType "colA" = "INTEGER"') == {
        "check": "expression", "expr": "`colA` IS NULL OR try_cast(`colA` AS int) IS NOT NULL"}
    assert one('ColumnDataType "colA" = "Long" with threshold >= 0.9') == {
        "check": "expression", "expr": "`colA` IS NULL OR try_cast(`colA` AS bigint) IS NOT NULL",
        "max_failing_fraction": 0.1}
    assert one('ColumnDataType "c" in ["DATE", "Timestamp"]') == {
        "check": "expression",
        "expr": "`c` IS NULL OR try_cast(`c` AS date) IS NOT NULL "
                "OR try_cast(`c` AS timestamp) IS NOT NULL"}
    assert one('ColumnDataType "c" = "decimal(18, 2)"')["expr"].endswith("AS decimal(18,2)) IS NOT NULL")


def test_column_length_counts_null_as_zero():
    assert one('ColumnLength "Postal_Code" = 5') == {
        "check": "expression", "expr": "coalesce(length(`Postal_Code`), 0) = 5L"}
    assert one('ColumnLength "c" between 2 and 10') == {
        "check": "expression",
        "expr": "coalesce(length(`c`), 0) > 2L AND coalesce(length(`c`), 0) < 10L"}
    assert one('ColumnLength "c" >= 100')["expr"] == "coalesce(length(`c`), 0) >= 100L"


def test_row_count_strict_bounds_become_whole_numbers():
    assert one("RowCount > 100") == {"check": "row_count", "min": 101}
    assert one("RowCount >= 100") == {"check": "row_count", "min": 100}
    assert one("RowCount < 100") == {"check": "row_count", "max": 99}
    assert one("RowCount <= 99.5") == {"check": "row_count", "max": 99}
    assert one("RowCount between 10 and 20") == {"check": "row_count", "min": 11, "max": 19}
    assert one("RowCount = 5") == {"check": "row_count", "min": 5, "max": 5}
    assert one("RowCount > -1") == {"check": "row_count", "min": 0}


@pytest.mark.parametrize("rule,stat", [("Mean", "mean"), ("Sum", "sum"),
                                       ("StandardDeviation", "stddev_pop"),
                                       ("DistinctValuesCount", "distinct_count")])
def test_aggregate_statistics(rule, stat):
    assert one(f'{rule} "x" between 10 and 20') == {
        "check": "stat", "column": "x", "stat": stat, "min": 10, "max": 20,
        "min_exclusive": True, "max_exclusive": True}
    assert one(f'{rule} "x" = 3') == {"check": "stat", "column": "x", "stat": stat, "min": 3, "max": 3}
    assert one(f'{rule} "x" >= 3') == {"check": "stat", "column": "x", "stat": stat, "min": 3}
    assert one(f'{rule} "x" < 3') == {
        "check": "stat", "column": "x", "stat": stat, "max": 3, "max_exclusive": True}


def test_custom_sql_primary_becomes_batch():
    rule = ('CustomSql "select count(*) from primary p join Primary_codes c on p.primary = c.id '
            'where p.note <> \'primary\' and `primary` > 0" > 0')
    assert one(rule) == {
        "check": "sql",
        "query": "select count(*) from {batch} p join Primary_codes c on p.primary = c.id "
                 "where p.note <> 'primary' and `primary` > 0",
        "min": 0, "min_exclusive": True}
    assert one('CustomSql "SELECT COUNT(*) FROM PRIMARY" between 10 and 20')["query"] == \
        "SELECT COUNT(*) FROM {batch}"


def test_custom_sql_with_escaped_quotes():
    assert one(r'CustomSql "select count(*) from primary where s = \"x\"" = 0')["query"] == \
        'select count(*) from {batch} where s = "x"'


def test_custom_sql_without_a_condition_is_row_level():
    assert one('CustomSql "select id from primary where a > 1"') == {
        "check": "sql_rows", "query": "select id from {batch} where a > 1"}
    assert one('CustomSql "select id from primary where a > 1" with threshold >= 0.9') == {
        "check": "sql_rows", "query": "select id from {batch} where a > 1", "max_failing_fraction": 0.1}


def test_detect_anomalies_takes_its_rule_bare_after_of_as_the_grammar_does():
    for bare, quoted in [('DetectAnomalies of RowCount', 'DetectAnomalies "RowCount"'),
                         ('DetectAnomalies of Completeness of "c"', 'DetectAnomalies "Completeness" "c"'),
                         ('DetectAnomalies of ColumnCorrelation of "a" and "b"',
                          'DetectAnomalies "ColumnCorrelation" "a" "b"')]:
        assert one(bare) == one(quoted)
    assert "expected ',' or ']'" in error('Rules = [ IsComplete "a" RowCount > 0 ]')  # a missing comma still


def test_referential_integrity():
    assert one('ReferentialIntegrity "zipcode" "reference.zipcode" >= 0.9') == {
        "check": "relationship", "columns": ["zipcode"], "to_table": "reference",
        "to_columns": ["zipcode"], "max_failing_fraction": 0.1}
    assert one('ReferentialIntegrity "city,state" "geo.cities.{ref_city, ref_state}" = 1.0') == {
        "check": "relationship", "columns": ["city", "state"], "to_table": "geo.cities",
        "to_columns": ["ref_city", "ref_state"]}


def test_referential_integrity_takes_any_condition_on_the_share_found_exactly():
    share = lambda rule: one(f'ReferentialIntegrity "a" "ns.t.b" {rule}')["threshold"]
    assert share("> 0.98") == {"op": ">", "values": [0.98]}  # strict, as in Glue: 0.98 fails
    assert share("= 0.99") == {"op": "=", "values": [0.99]}
    assert share("between 0.4 and 0.6") == {"op": "between", "values": [0.4, 0.6]}
    assert share("not in [0.5, 1.0]") == {"op": "not in", "values": [0.5, 1.0]}
    assert "share from 0 to 1" in error('Rules = [ ReferentialIntegrity "a" "ns.t.b" < 1.5 ]')


def test_data_freshness_is_per_row():
    assert one('DataFreshness "Order_Date" <= 24 hours') == {
        "check": "expression",
        "expr": "coalesce(`Order_Date` IS NOT NULL AND (`Order_Date` >= current_timestamp() - INTERVAL 24 HOURS), false)"}
    assert one('DataFreshness "t" < 90 minutes')["expr"] == \
        "coalesce(`t` IS NOT NULL AND (`t` > current_timestamp() - INTERVAL 90 MINUTES), false)"
    assert one('DataFreshness "t" > 3 days')["expr"] == \
        "coalesce(`t` IS NOT NULL AND (`t` < current_timestamp() - INTERVAL 3 DAYS), false)"
    assert one('DataFreshness "t" between 2 days and 5 days')["expr"] == (
        "coalesce(`t` IS NOT NULL AND (`t` < current_timestamp() - INTERVAL 2 DAYS "
        "AND `t` > current_timestamp() - INTERVAL 5 DAYS), false)")


def test_numbers_keep_every_digit():
    # exactly, beside any column but a text one (whose values are read as doubles)
    assert one('ColumnValues "x" not in [1000, 2000]')["expr"] == "coalesce(`x` IS NULL OR (" + by_type(
        "`x`", "CAST(`x` AS DOUBLE) NOT IN (1000D, 2000D)", "`x` NOT IN (1000.0D, 2000.0D)",
        "`x` NOT IN (1000L, 2000L)") + "), false)"
    assert one('ColumnValues "x" != 19.99')["expr"] == "coalesce(`x` IS NULL OR (" + by_type(
        "`x`", "CAST(`x` AS DOUBLE) <> 19.99D", "`x` <> 19.989999771118164D", "`x` <> 19.99") + "), false)"
    assert one('ColumnLength "x" <= 1000')["expr"] == "coalesce(length(`x`), 0) <= 1000L"
    assert one('ColumnValues "x" not between 0.5 and 1234.5678')["expr"] == \
        "coalesce(`x` IS NOT NULL AND (" + by_type("`x`", "(CAST(`x` AS DOUBLE) <= 0.5D OR CAST(`x` AS DOUBLE) >= 1234.5678D)",
                                                   "(`x` <= 0.5D OR `x` >= 1234.5678100585938D)",
                                                   "(`x` <= 0.5 OR `x` >= 1234.5678)") + "), false)"


def test_a_rule_written_twice_gets_a_name_of_its_own():
    checks = parse_dqdl('Rules = [ RowCount > 0, RowCount > 0 ]')
    assert [c["name"] for c in checks] == ["RowCount > 0", "RowCount > 0 (2)"]


# ----- clauses, layout, quoting ---------------------------------------------------------------

def test_where_clause_passes_through():
    assert one('IsComplete "a" where "b > 10"') == {"check": "not_null", "column": "a", "where": "b > 10"}
    assert one('RowCount > 0 where "country = \\"NL\\""') == {
        "check": "row_count", "min": 1, "where": 'country = "NL"'}
    assert one('Mean "x" > 1 where "y IS NOT NULL"')["where"] == "y IS NOT NULL"


def test_thresholds():
    assert one('ColumnValues "c" in ["A","B"] with threshold >= 0.98') == {
        "check": "accepted_values", "column": "c", "values": ["A", "B"], "allow_null": False,
        "max_failing_fraction": 0.02}
    # a strict > t stays strict: exactly t passing fails, as in Glue
    assert one('ColumnValues "x" > 0 with threshold > 0.9')["threshold"] == {"op": ">", "values": [0.9]}
    assert "max_failing_fraction" not in one('ColumnValues "x" > 0 with threshold = 1.0')
    assert one('ColumnValues "c" in [10,20] where "colB is NOT NULL" with threshold > 0.5') == {
        "check": "accepted_values", "column": "c", "values": [10, 20], "allow_null": False,
        "where": "colB is NOT NULL", "threshold": {"op": ">", "values": [0.5]}}


def test_comments_blank_lines_and_names():
    text = """
    # quality rules for orders
    Rules = [   # opening

        IsComplete "order_id",    # must be there


        ColumnValues "amount"     # trailing comment inside a rule
            between 0 and 100,
        # a comment between rules
        RowCount > 0
    ]
    # the end
    """
    checks = parse_dqdl(text)
    assert [c["name"] for c in checks] == [
        'IsComplete "order_id"', 'ColumnValues "amount" between 0 and 100', "RowCount > 0"]
    assert all(c["action"] == "fail" for c in checks)
    assert list(checks[0]) == ["name", "check", "column", "action", "dqdl"]


def test_strings_inside_names_keep_their_spaces():
    assert parse_dqdl('Rules=[ColumnValues   "a  b" in ["x  y"]]')[0]["name"] == \
        'ColumnValues "a  b" in ["x  y"]'


def test_empty_ruleset_and_parentheses():
    assert error("Rules = [ ]") == "DQDL line 1, column 11: a ruleset needs at least one rule"
    assert parse_dqdl('Rules = [ (IsComplete "a") ]')[0]["check"] == "not_null"
    assert parse_dqdl('Rules = [ ((RowCount > 0)) ]')[0]["min"] == 1


def test_of_connector():
    assert one("Completeness of col_1 >= 0.5") == {
        "check": "not_null", "column": "col_1", "max_failing_fraction": 0.5}


def test_odd_column_names_are_quoted():
    assert one('ColumnValues "order id" != "x"')["expr"] == "coalesce(`order id` IS NULL OR (`order id` <> 'x'), false)"
    assert one('ColumnValues "a`b" != 1')["expr"] == "coalesce(`a``b` IS NULL OR (" + by_type(
        "`a``b`", "CAST(`a``b` AS DOUBLE) <> 1D", "`a``b` <> 1.0D", "`a``b` <> 1L") + "), false)"
    assert one('ColumnValues "it\\"s" = 1') == {"check": "accepted_values", "column": 'it"s', "values": [1],
                                                "allow_null": False}
    assert one('ColumnLength "x.y-z" > 1')["expr"] == "coalesce(length(`x.y-z`), 0) > 1L"


def test_sql_injection_in_names_and_values_stays_quoted():
    check = one('ColumnValues "x` = 1 OR `y" != "a\' OR \'1\'=\'1"')
    assert check["expr"] == "coalesce(`x`` = 1 OR ``y` IS NULL OR (`x`` = 1 OR ``y` <> 'a\\' OR \\'1\\'=\\'1'), false)"
    # a value ending in a backslash cannot escape its closing quote
    assert one('ColumnValues "c" != "a\\\\"')["expr"] == "coalesce(`c` IS NULL OR (`c` <> 'a\\\\'), false)"
    check = one('DataFreshness "t`) OR (1=1" <= 1 days')
    assert check["expr"].startswith("coalesce(`t``) OR (1=1` IS NOT NULL AND (`t``) OR (1=1` >= ")
    # the quoted identifier is one token: removing it leaves no stray backtick or quote
    assert "`" not in re.sub(r"`(?:``|[^`])*`", "", check["expr"])


# ----- errors ---------------------------------------------------------------------------------

def test_unsupported_rule_type():
    message = error('Rules = [\n  IsComplete "a",\n    Completenes "a" > 0.5\n]')
    assert message.startswith("DQDL line 3, column 5: rule type 'Completenes' is not supported; "
                              "supported: AggregateMatch, ColumnCorrelation, ColumnCount")


REFERENCE_RULE_TYPES = {  # awslabs/dqdl rules-config.json's rule types that apply to a table
    "AggregateMatch", "ColumnCorrelation", "ColumnCount", "ColumnDataType", "ColumnExists",
    "ColumnLength", "ColumnNamesMatchPattern", "ColumnValues", "Completeness", "CustomSql",
    "DataFreshness", "DatasetMatch", "DistinctValuesCount", "Entropy", "IsComplete", "IsPrimaryKey",
    "IsUnique", "Mean", "ReferentialIntegrity", "RowCount", "RowCountMatch", "StandardDeviation",
    "Sum", "SchemaMatch", "Uniqueness", "UniqueValueRatio", "Variance", "DetectAnomalies",
    "FileFreshness", "FileMatch", "FileUniqueness", "FileSize"}


def test_every_rule_type_of_the_reference_grammar_is_supported():
    assert REFERENCE_RULE_TYPES <= set(wap_etl.RULES)


def test_missing_bracket():
    assert error('Rules = [\n  IsComplete "a"\n') == \
        "DQDL line 3, column 1: expected ',' or ']' but found end of input"
    assert error('Rules = IsComplete "a" ]') == \
        "DQDL line 1, column 9: expected '[' but found 'IsComplete'"


def test_missing_comma():
    assert error('Rules = [\n  IsComplete "a"\n  IsUnique "b"\n]') == \
        "DQDL line 3, column 3: expected ',' or ']' but found 'IsUnique'"


def test_bad_number():
    assert error('Rules = [\n  RowCount > 1.2.3\n]') == "DQDL line 2, column 14: bad number '1.2.3'"
    assert error('Rules = [ Mean "x" > 12abc ]') == "DQDL line 1, column 22: bad number '12abc'"


def test_unterminated_string():
    message = error('Rules = [\n  IsComplete "order_id,\n  IsUnique "b"\n]')
    assert message.startswith("DQDL line 3, column 14: unterminated string")
    message = error('Rules = [ IsComplete "a" where "x > 1 ]')
    assert message.startswith("DQDL line 1, column 32: unterminated string '\"x > 1 ]'")


ERRORS = [  # ruleset, the start of the error naming where it is wrong
    ('Rules = [ (IsComplete "a") and (IsUnique "a" ]',
     "DQDL line 1, column 46: expected ')' but found ']'"),
    ('Rules = [ IsComplete "a" > 1 ]',
     "DQDL line 1, column 26: IsComplete takes no condition"),
    ("Rules = [ Mean > 1 ]",
     "DQDL line 1, column 11: Mean takes one column, got 0"),
    ('Rules = [ RowCount > avg(10) ]',
     "DQDL line 1, column 22: avg() takes a list: last(k)"),
    ('Rules = [ RowCount matches "5" ]',
     "DQDL line 1, column 20: 'matches' is not supported for RowCount"),
    ('Rules = [ RowCount between 5 and 6 ]',
     "DQDL line 1, column 20: this RowCount condition can never pass"),
    ('Rules = [ ColumnExists "a" where "x > 1" ]',
     "DQDL line 1, column 28: 'where' is not supported for ColumnExists"),
    ('Rules = [ Mean "x" > 1 with threshold > 0.5 ]',
     "DQDL line 1, column 24: 'with' is not supported for Mean"),
    ('Rules = [ FileSize < 1 MB with matchFileName = "true" ]',
     "DQDL line 1, column 32: FileSize has no option 'matchFileName' (it takes recentFiles, uriRegex, "
     "filterOrder, failFast, threshold)"),
    ('Rules = [ ColumnValues "x" > 1 with threshold < 1.5 ]',
     "DQDL line 1, column 49: a threshold is a number from 0 to 1"),
    ('Rules = [ ColumnValues "x" > "abc" ]',
     'DQDL line 1, column 30: compare with a number, a date "YYYY-MM-DD", a time "9:30 AM" or now()'),
    ('Rules = [ CustomSql "select id from primary" > 0 with threshold > 0.5 ]',
     "DQDL line 1, column 65: CustomSql takes a condition or (row-level) a threshold, not both"),
    ('Rules = [ IsComplete "a" labels = ["k" = "v", "k" = "w"] ]',
     'DQDL line 1, column 47: label "k" given twice'),
    ('Rules = [ IsComplete "a" labels = ["k" = ""] ]',
     "DQDL line 1, column 42: a label's value has 1 to 256 characters"),
    ('Rules = [ IsComplete "a" labels = [] ]',
     'DQDL line 1, column 36: labels = [] holds no label'),
    ('DefaultLabels = [' + ", ".join(f'"k{i}" = "v"' for i in range(10)) + '] Rules = [ IsComplete "a" labels = ["x" = "y"] ]',
     "DQDL line 1, column 172: at most 10 labels a rule (DefaultLabels included)"),
    ('Rules = [ FileFreshness > "9:30 AM" with timeZone = "Mars/Olympus_Mons" ]',
     'DQDL line 1, column 51: timeZone = "an IANA time zone"'),
    ('Rules = [ ColumnDataType "c" = "UUID" ]',
     'DQDL line 1, column 32: unknown type "UUID"'),
    ('Rules = [ DataFreshness "t" <= 24 ]',
     "DQDL line 1, column 32: expected a duration such as 24 hours"),
    ('Rules = [ ColumnValues "x" > $limit ]',
     "DQDL line 1, column 30: variable $limit is not defined"),
    ('Rules = [ ColumnValues "x" = "a" + 1 ]',
     "DQDL line 1, column 34: arithmetic is on numbers only"),
    ('Metadata = {} Rules = [ RowCount > 0 ]',
     "DQDL line 1, column 13: expected a quoted key in Metadata, found '}'"),
    ('IsComplete "a"',
     "DQDL line 1, column 1: a ruleset starts"),
    ('Rules = [ RowCount > 0 ] Analyzers = [ ] Rules = [ RowCount > 1 ]',
     "DQDL line 1, column 42: unexpected 'Rules' after the closing ']'"),
    ('Rules = [ RowCount > 0 ] ~',
     "DQDL line 1, column 26: unexpected character '~'"),
    ('Rules = [ RowCount > ' + "9" * 400 + '.5 ]',
     "DQDL line 1, column 22: number out of range"),
    ('Rules = [ ColumnValues "x" between 1 and ' + "9" * 20 + ' ]',
     "DQDL line 1, column 42: number out of range"),
    ('Rules = [ ColumnValues "t" > (now() - 200000 days) ]',
     "DQDL line 1, column 37: expected (now() + or - a whole number of days, hours or minutes, at most"),
]


@pytest.mark.parametrize("text,message", ERRORS)
def test_errors_name_their_line_and_column(text, message):
    assert error(text).startswith(message)


# ----- rulesets through the job -------------------------------------------------------------------

ROWS = [
    {"id": 1, "carrier": "AA", "amount": 10.0, "status": "paid", "zip": "12345"},
    {"id": 2, "carrier": "UA", "amount": 20.0, "status": "paid", "zip": "54321"},
    {"id": 3, "carrier": "AA", "amount": 30.0, "status": "new", "zip": "11111"},
]

RULESET = """# orders
Rules = [
    IsComplete "id",
    IsPrimaryKey "id",
    Uniqueness "id" > 0.99,
    ColumnValues "status" in ["new", "paid"],
    ColumnValues "amount" between 0 and 100,
    ColumnValues "amount" > 15 where "status = 'new'",
    ColumnValues "zip" matches "[0-9]{5}",
    ColumnLength "zip" = 5,
    ColumnExists "carrier",
    ColumnDataType "zip" = "INTEGER",
    RowCount between 2 and 4,
    Mean "amount" between 19 and 21,
    Sum "amount" = 60,
    StandardDeviation "amount" < 20,
    DistinctValuesCount "carrier" = 2,
    Completeness "carrier" >= 0.9,
    CustomSql "SELECT count(*) FROM primary WHERE amount < 0" = 0,
    ReferentialIntegrity "carrier" "{ns}.carriers.code" = 1.0
]
"""


@pytest.fixture
def carriers(wap, spark):
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS local.{wap.ns}")
    spark.sql(f"CREATE TABLE local.{wap.ns}.carriers (code string) USING iceberg")
    spark.sql(f"INSERT INTO local.{wap.ns}.carriers VALUES ('AA'), ('UA')")


def ruleset_file(wap, text):
    path = wap.tmp / "rules.dqdl"
    path.write_text(text.replace("{ns}", wap.ns))
    return str(path)


def test_ruleset_file_passes_and_names_each_check_by_its_rule(wap, carriers):
    code, report = wap.run(ROWS, checks=ruleset_file(wap, RULESET))
    assert code == 0, [c for c in report.checks if not c["passed"]]
    assert len(report.checks) == 18
    assert report.checks[4]["name"] == 'ColumnValues "amount" between 0 and 100'
    assert wap.ids() == [1, 2, 3]


def test_standard_deviation_is_glues_population_one(wap):
    rows = [{"id": i, "c": v} for i, v in enumerate([0, 20, 40])]  # Glue's example: 16.33
    code, report = wap.run(rows, checks='Rules = [ StandardDeviation "c" between 16.32 and 16.34 ]')
    assert code == 0 and round(report.checks[0]["observed"], 2) == 16.33


def test_ruleset_text_failing_rule_fails_the_audit(wap, carriers):
    rows = ROWS + [{"id": 4, "carrier": "ZZ", "amount": 99.0, "status": "new", "zip": "1234"}]
    code, report = wap.run(rows, checks=RULESET.replace("{ns}", wap.ns))
    failed = {c["name"] for c in report.checks if not c["passed"]}
    assert code == 3 and "main" not in wap.refs()
    assert {'ColumnValues "zip" matches "[0-9]{5}"', 'ColumnLength "zip" = 5',
            f'ReferentialIntegrity "carrier" "{wap.ns}.carriers.code" = 1.0'} <= failed


def test_dqdl_column_values_fail_null_rows(wap):
    rows = ROWS + [{"id": 4, "carrier": "AA", "amount": None, "status": None, "zip": "22222"}]
    rules = 'Rules = [ ColumnValues "amount" > 0, ColumnValues "status" in ["new", "paid"], ' \
            'ColumnValues "status" != "lost" ]'
    code, report = wap.run(rows, checks=rules)
    assert code == 3
    assert [c["failing_rows"] for c in report.checks] == [1, 1, 0]


def test_dqdl_ignore_case_accepts_any_case_and_still_fails_others(wap):
    rows = ROWS + [{"id": 4, "carrier": "aa", "amount": 5.0, "status": "PAID", "zip": "22222"},
                   {"id": 5, "carrier": "Ua", "amount": 5.0, "status": "lost", "zip": "33333"}]
    rules = 'Rules = [ ColumnValues "status" in ["paid", "New"] with ignoreCase = "true", ' \
            'ColumnValues "carrier" = "aa" with ignoreCase = "true" ]'
    code, report = wap.run(rows, checks=rules)
    assert code == 3 and "main" not in wap.refs()
    assert [c["failing_rows"] for c in report.checks] == [1, 2]


def test_values_a_comparison_cannot_decide_fail_the_row(wap):
    # 'abc' > 5 on a string column is NULL in Spark: the row fails, as Glue's would, in every form
    from datetime import datetime, timedelta
    fresh = (datetime.utcnow() - timedelta(hours=1)).strftime("%Y-%m-%d %H:%M:%S")
    rows = [{"id": i, "qty": q, "ts": t} for i, (q, t) in
            enumerate([("7.9", fresh), ("abc", "garbage"), ("3000000000", fresh)])]
    rules = 'Rules = [ ColumnValues "qty" > 7, ColumnValues "qty" != 3, ' \
            'ColumnValues "ts" > (now() - 3 days), DataFreshness "ts" <= 24 hours ]'
    code, report = wap.run(rows, checks=rules)
    assert code == 3 and "main" not in wap.refs()
    assert [c["failing_rows"] for c in report.checks] == [1, 1, 1, 1]
    # text compared with a number is read as a number: 7.9 > 7, and past int's range too
    code, report = wap.run(rows, checks=[{"check": "between", "column": "qty", "min": 7, "max": 4000000000}])
    assert code == 3 and report.checks[0]["failing_rows"] == 1 and report.checks[0]["sample"][0]["qty"] == "abc"


def test_dqdl_threshold_tolerates_a_share_of_rows(wap):
    rules = 'Rules = [ ColumnValues "status" in ["paid"] with threshold >= 0.6 ]'
    code, report = wap.run(ROWS, checks=rules)
    assert code == 0 and report.checks[0]["failing_rows"] == 1


def test_unsupported_rule_exits_2_naming_it_and_its_position(wap):
    code, report = wap.run(ROWS, checks='Rules = [\n  IsComplete "id",\n  Completenes "id" > 0.5\n]')
    assert code == 2 and "line 3, column 3" in report.error and "'Completenes'" in report.error
    assert not wap.exists()


def test_dqdl_syntax_error_exits_2_before_writing(wap):
    code, report = wap.run(ROWS, checks='Rules = [ IsComplete "id" IsUnique "id" ]')
    assert code == 2 and "line 1, column 27" in report.error and not wap.exists()


# ----- suggested checks ---------------------------------------------------------------------------

SUGGEST_ROWS = [{"id": i, "carrier": "AA" if i % 3 else "UA", "amount": round(i * 41.37, 2),
                 "status": ["new", "paid", None][i % 3], "zip": f"{10000 + i}"} for i in range(1, 31)]


def suggest(wap, capsys, rows, fmt="json"):
    capsys.readouterr()
    code, _ = wap.run(rows, suggest_checks="true", suggest_format=fmt)
    assert code == 0
    return capsys.readouterr().out


def test_suggest_checks_prints_checks_that_pass_and_writes_nothing(wap, capsys):
    checks = wap_etl.json.loads(suggest(wap, capsys, SUGGEST_ROWS))
    assert not wap.exists() and not wap.spark.catalog.tableExists(f"local.{wap.ns}.orders_wap_runs")
    kinds = {(c["check"], c.get("column") or tuple(c.get("columns", ()))) for c in checks}
    assert {("row_count", ()), ("not_null", "id"), ("unique", ("id",)), ("accepted_values", "carrier"),
            ("accepted_values", "status"), ("between", "amount"), ("stat", "status")} <= kinds
    code, report = wap.run(SUGGEST_ROWS, checks=checks)
    assert code == 0 and len(report.checks) == len(checks)


def test_suggested_checks_catch_a_batch_that_differs(wap, capsys):
    checks = suggest(wap, capsys, SUGGEST_ROWS)
    bad = SUGGEST_ROWS + [{"id": 99, "carrier": "ZZ", "amount": 1e6, "status": "lost", "zip": "1"}]
    code, report = wap.run(bad, checks=checks)
    failed = {c["name"] for c in report.checks if not c["passed"]}
    assert code == 3 and {"accepted_values_carrier", "accepted_values_status", "between_amount"} <= failed


def test_suggest_format_dqdl_prints_a_ruleset_that_passes(wap, capsys):
    text = suggest(wap, capsys, SUGGEST_ROWS, "dqdl")
    assert text.startswith("Rules = [")
    code, report = wap.run(SUGGEST_ROWS, checks=text)
    assert code == 0, [c for c in report.checks if not c["passed"]]
    assert 'IsUnique "id"' in {c["name"] for c in report.checks}


@pytest.mark.parametrize("fmt", ["json", "dqdl"])
def test_suggested_bounds_of_a_decimal_column_hold_its_own_values(wap, capsys, monkeypatch, fmt):
    """A decimal's 0.299999999999999999 is no double: the suggested bounds lie outside it, not at 0.3."""
    monkeypatch.setattr(wap_etl, "transform", lambda df: df.selectExpr(
        "id", "CAST(IF(id = 1, '0.299999999999999999', '1234567890.123456789100000001') AS DECIMAL(38,18)) AS d"))
    checks = suggest(wap, capsys, [{"id": 1}, {"id": 2}], fmt)
    code, report = wap.run([{"id": 1}, {"id": 2}], checks=checks)
    assert code == 0, [c for c in report.checks if not c["passed"]]


def test_a_suggested_bound_past_a_long_reads_back_as_a_number():
    text = wap_etl.to_dqdl([{"check": "between", "column": "d", "min": -9.3e18, "max": 1.2345678901234568e+28}])
    low, high = parse_dqdl(text)
    assert (low["min"], high["max"]) == (-9.3e18, 1.2345678901234568e+28), text


def test_suggest_checks_refuses_a_malformed_json_record_as_a_run_would(wap, tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"id": 1}\n{"id": 2, "amount"\n{"id": 3}\n')
    code, report = wap.run(str(path), suggest_checks="true")
    assert code == 2 and "bad.json line 2" in report.error and "malformed JSON" in report.error
    assert not wap.exists()
