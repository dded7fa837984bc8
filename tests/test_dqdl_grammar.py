"""The DQDL reference grammar (awslabs/dqdl DataQualityDefinitionLanguage.g4), production by
production: every form it defines parses to checks, and forms it does not define are refused with
the line and column of the first wrong token. Parsing runs no Spark: rulesets can be checked
before any run (`parse_dqdl`)."""
import pytest

import wap_etl

# production -> rules it defines (each inside one ruleset with $vals and $col declared)
VALID = {
    "atomicNumber": ['RowCount > 5', 'Mean "x" > -5', 'Sum "x" > 1234', 'Mean "x" > 0.5', 'Mean "x" > -0.5'],
    "number (arithmetic, parentheses, functionCall)": ['RowCount > (avg(last(3)) + 1) * 2',
                                                       'RowCount > max(last(2)) / 2 - 1'],
    "numberBasedCondition": ['RowCount between 1 and 9', 'RowCount not between 1 and 9', 'RowCount >= 1',
                             'RowCount < 9', 'RowCount <= 9', 'RowCount = 5', 'RowCount != 5',
                             'RowCount in [1, 2, 3]', 'RowCount not in [1, 2]', 'RowCount != 10.0',
                             'RowCount in [10.0, 20]'],
    "stringBasedCondition": ['ColumnValues "s" = "a"', 'ColumnValues "s" != "a"', 'ColumnValues "s" in ["a", "b"]',
                             'ColumnValues "s" not in ["a"]', 'ColumnValues "s" matches "[a-z]+"',
                             'ColumnValues "s" not matches "[0-9]"', 'ColumnValues "s" = NULL',
                             'ColumnValues "s" in ["a", NULL, EMPTY, WHITESPACES_ONLY]', 'ColumnValues "s" != EMPTY',
                             'ColumnValues "s" in $vals'],
    "dateBasedCondition": ['ColumnValues "d" > "2024-01-01"', 'ColumnValues "d" between "2024-01-01" and now()',
                           'ColumnValues "d" <= (now() - 3 days)', 'ColumnValues "d" >= (now() + 2 hours)',
                           'ColumnValues "d" in ["2024-01-01", "2024-01-02"]',
                           'ColumnValues "d" not between (now() - 10 minutes) and now()',
                           'FileFreshness > "9:30 PM"', 'FileFreshness between "9:30 AM" and "21:45"'],
    "durationBasedCondition": ['DataFreshness "d" <= 24 hours', 'DataFreshness "d" between 1 days and 3 days',
                               'DataFreshness "d" < 45 minutes'],
    "sizeBasedCondition": ['FileSize < 10 MB', 'FileSize between 1 KB and 2 GB', 'FileSize >= 1 B',
                           'FileSize not in [1 TB]', 'FileSize "S3://bucket/key" < 10 MB',
                           'FileSize > 2', 'FileSize in [3, 4]'],
    "whereClause": ['IsComplete "a" where "b > 1"'],
    "labels": ['IsComplete "a" labels = ["k" = "v", "k2" = "v2"]'],  # [] parses, but Glue refuses it as we do
    "tagWithCondition": ['ColumnValues "s" in ["a"] with threshold > 0.5',
                         'FileSize < 1 MB with recentFiles = 2 with uriRegex = "x"',
                         'FileUniqueness > 0.5 with filterOrder in ["uriRegex", "recentFiles"]'],
    "dqRule (condition, where, labels, tags in order)": [
        'ColumnValues "s" in ["a"] where "b > 1" labels = ["k" = "v"] with threshold >= 0.9'],
    "parameterWithConnectorWord": ['ColumnCorrelation "a" and "b" > 0.5', 'ColumnCorrelation "a" of "b" > 0.5'],
    "topLevelRule": ['(IsComplete "a") and (IsComplete "b")',
                     '(IsComplete "a") or ((IsComplete "b") and (RowCount > 1))',
                     '(IsComplete "a") labels = ["k" = "v"]', 'IsComplete "a" and IsComplete "b"',
                     'IsComplete "a" or IsComplete "b"'],
    "variableDereference": ['IsComplete $col'],
}
CASES = [(production, rule) for production, rules in VALID.items() for rule in rules]


@pytest.mark.parametrize("production,rule", CASES, ids=[f"{p}: {r}" for p, r in CASES])
def test_every_form_of_the_reference_grammar_parses(production, rule):
    checks = wap_etl.parse_checks(wap_etl.parse_dqdl(f'vals = ["a"]\ncol = "a"\nRules = [ {rule} ]'))
    assert len(checks) == 1 and checks[0].dqdl


DOCUMENTS = [
    'Metadata = { "Version": "1.0" }\nDataSources = { "Primary": "p", "AdditionalDataSources": ["r"] }\n'
    'vals = ["a", "b"]\ncol = "a"\nDefaultLabels = ["t" = "x"]\n'
    'Rules = [ ColumnValues "s" in $vals, IsComplete $col ]\nAnalyzers = [ RowCount, Completeness "a" ]',
    'Rules = [ ]\nAnalyzers = [ RowCount ]',
    'Analyzers = [ RowCount ]',
    '# a comment\nRules = [\n    RowCount > 0,  # another\n\n    IsComplete "a"\n]\n',
]


@pytest.mark.parametrize("text", DOCUMENTS)
def test_every_document_shape_of_the_grammar_parses(text):
    assert wap_etl.parse_checks(wap_etl.parse_dqdl(text))


# forms the grammar does not define -> (line, column) of the first wrong token
INVALID = [
    ('Rules = [ RowCount > ]', "1, column 22"),
    ('Rules = [ RowCount between 1 ]', "1, column 30"),
    ('Rules = [ ColumnValues "s" matches abc ]', "1, column 36"),
    ('Rules = [ IsComplete "a" labels = ["k"] ]', "1, column 39"),
    ('Rules = [ IsComplete "a" where b > 1 ]', "1, column 32"),
    ('Rules = [ IsComplete "a" IsComplete "b" ]', "1, column 26"),
    ('Rules = [ IsComplete "a", ]', "1, column 27"),
    ('Rules = [ FileSize < 10 XB ]', "1, column 25"),
    ('Rules = [ DataFreshness "d" <= 24 weeks ]', "1, column 32"),
    ('Metadata = { "Version": ["1.0" }\nRules = [ RowCount > 0 ]', "1, column 25"),
    ('Rules = [ (IsComplete "a" ]', "1, column 27"),
    ('Rules = IsComplete "a"', "1, column 9"),
    ('Rules = [ RowCount > 1 2 ]', "1, column 24"),
    ('Rules = [ ColumnValues "d" > (now() * 3 days) ]', "1, column 37"),
    ('Rules = [ RowCount > 0 ]\nRules = [ RowCount > 1 ]', "2, column 1"),
    ('Analyzers = [ RowCount ]\nRules = [ RowCount > 0 ]', "2, column 1"),
    ('Rules = [ RowCount > 0 ]\nDefaultLabels = ["a" = "b"]', "2, column 1"),
    ('Rules = [ IsComplete $x ]', "1, column 22"),
    ('Rules = [ RowCount > 0 ] Analyzers = [ RowCount > 0 ]', "1, column 49"),
    ('Rules = [ IsComplete "a" labels = ["k" = "v"] where "b > 1" ]', "1, column 47"),
    ('Rules = [ RowCount >> 0 ]', "1, column 21"),
    ('Rules = [\n]', "2, column 1"),
    ('Rules = [ ]\nAnalyzers = [ ]', "2, column 15"),
]


@pytest.mark.parametrize("text,where", INVALID)
def test_forms_the_grammar_does_not_define_are_refused_at_their_position(text, where):
    with pytest.raises(wap_etl.WapError) as e:
        wap_etl.parse_checks(wap_etl.parse_dqdl(text))
    assert e.value.code == wap_etl.EXIT_BAD_INPUT and f"DQDL line {where}:" in str(e.value)


def test_labels_given_twice_are_refused_as_such():
    with pytest.raises(wap_etl.WapError) as e:
        wap_etl.parse_dqdl('Rules = [ IsComplete "a" labels = ["j" = "w"] labels = ["k" = "v"] ]')
    assert "DQDL line 1, column 47: 'labels' given twice" in str(e.value)
