"""Each check type passes on good data and fails on bad data; tolerances; NULL semantics; actions."""
import pytest

ROWS = [
    {"id": 1, "email": "a@x.com", "amount": 5.0, "status": "new", "ts": "2024-01-01 00:00:00"},
    {"id": 2, "email": "b@x.com", "amount": 50.0, "status": "paid", "ts": "2024-01-02 00:00:00"},
    {"id": 3, "email": None, "amount": None, "status": None, "ts": None},
]
BAD_ROW = {"id": 3, "email": "not-an-email", "amount": -1.0, "status": "lost", "ts": "2024-01-03 00:00:00"}

# check spec, passes on ROWS, fails once BAD_ROW is added (failing rows expected)
CASES = {
    "not_null": ({"check": "not_null", "column": "id"}, None),
    "unique": ({"check": "unique", "columns": ["id"]}, 2),
    "between": ({"check": "between", "column": "amount", "min": 0, "max": 100}, 1),
    "accepted_values": ({"check": "accepted_values", "column": "status", "values": ["new", "paid"]}, 1),
    "regex": ({"check": "regex", "column": "email", "pattern": "^[^@]+@[^@]+$"}, 1),
    "expression": ({"check": "expression", "expr": "amount >= 0 OR status = 'new'"}, 1),
    "row_count": ({"check": "row_count", "min": 1, "max": 3}, None),
}


@pytest.mark.parametrize("kind", CASES)
def test_check_passes_on_good_rows(wap, kind):
    spec, _ = CASES[kind]
    code, report = wap.run(ROWS, checks=[spec])
    assert code == 0, report.error
    assert report.checks[0]["passed"] is True and report.checks[0]["check"] == kind


@pytest.mark.parametrize("kind", CASES)
def test_check_fails_on_bad_rows(wap, kind):
    spec, failing = CASES[kind]
    rows = ROWS + [BAD_ROW]
    if kind == "not_null":
        rows = ROWS + [{"id": None, "email": "c@x.com"}]
        failing = 1
    code, report = wap.run(rows, checks=[spec])
    assert code == 3 and report.status == "audit_failed"
    assert report.checks[0]["passed"] is False
    if failing is not None:
        assert report.checks[0]["failing_rows"] == failing
    assert "main" not in wap.refs()


def test_nulls_pass_every_check_but_not_null(wap):
    nulls = [{"id": 1, "email": None, "amount": None, "status": None},
             {"id": None, "email": None, "amount": None, "status": None}]
    checks = [CASES[k][0] for k in ("between", "accepted_values", "regex", "expression")]
    checks += [{"check": "unique", "columns": ["id", "status"]},
               {"check": "not_null", "column": "email", "action": "warn"}]
    code, report = wap.run(nulls, checks=checks)
    assert code == 0
    assert [c["passed"] for c in report.checks] == [True] * 5 + [False]
    assert report.checks[-1]["failing_rows"] == 2


def test_warn_never_blocks_publish(wap):
    rows = ROWS + [BAD_ROW]
    code, report = wap.run(rows, checks=[dict(CASES["between"][0], action="warn")])
    assert code == 0 and report.status == "published"
    assert report.checks[0]["passed"] is False and report.checks[0]["failing_rows"] == 1
    assert report.checks[0]["sample"][0]["amount"] == -1.0
    assert len(wap.ids()) == 4


def test_max_failing_rows_tolerates_up_to_the_limit(wap):
    rows = ROWS + [BAD_ROW, dict(BAD_ROW, id=4)]
    spec = dict(CASES["between"][0], max_failing_rows=2)
    assert wap.run(rows, checks=[spec])[0] == 0
    rows2 = [dict(r, id=r["id"] + 10) for r in rows] + [dict(BAD_ROW, id=20)]
    code, report = wap.run(rows2, checks=[dict(spec, max_failing_rows=2)])
    assert code == 3 and report.checks[0]["failing_rows"] == 3


def test_max_failing_fraction_tolerates_up_to_the_fraction(wap):
    rows = ROWS + [BAD_ROW]  # 1 of 4 rows fails: 0.25
    code, report = wap.run(rows, checks=[dict(CASES["between"][0], max_failing_fraction=0.25)])
    assert code == 0 and report.checks[0]["failing_fraction"] == 0.25
    code, report = wap.run([dict(r, id=(r["id"] or 0) + 10) for r in rows],
                           checks=[dict(CASES["between"][0], max_failing_fraction=0.2)])
    assert code == 3


def test_unique_fails_when_a_batch_key_already_exists_on_main(wap):
    assert wap.run(ROWS, checks=[CASES["unique"][0]])[0] == 0
    code, report = wap.run([{"id": 9, "email": "z@x.com"}, {"id": 2, "email": "again@x.com"}],
                           checks=[CASES["unique"][0]])
    assert code == 3
    assert report.checks[0]["failing_rows"] == 1
    assert report.checks[0]["sample"] == [{"id": 2, "count": 1, "on_main": True}]


def test_row_checks_audit_only_the_rows_this_batch_added(wap):
    # bad rows published under a warning must not fail a later, clean batch
    warn = dict(CASES["between"][0], action="warn")
    assert wap.run(ROWS + [BAD_ROW], checks=[warn])[0] == 0
    code, report = wap.run([{"id": 10, "email": "k@x.com", "amount": 1.0, "status": "new"}],
                           checks=[CASES["between"][0], {"check": "row_count", "max": 1}])
    assert code == 0, report.checks
    assert report.rows_written == 1
