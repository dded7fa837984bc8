"""Check outcomes in AWS Glue Data Quality's result shape: in the JSON report, the run ledger and
the EventBridge event (real boto3 against moto), so tools and rules written for Glue DQ read ours."""
import json
import os

import boto3

import wap_etl

ROWS = [{"id": 1, "amount": 5.0}, {"id": 2, "amount": 6.0}, {"id": None, "amount": -1.0}]
DQDL = '''DefaultLabels = ["team" = "orders"]
Rules = [
    RowCount > 0,
    Completeness "id" >= 0.5,
    ColumnValues "amount" > 0 labels = ["severity" = "high"]
]'''


def report_file(wap, report):
    with open(os.path.join(wap.reports, report.table, f"{report.batch_id}.json"), encoding="utf-8") as f:
        return json.load(f)


def ledger_rows(wap):
    return [r.asDict(recursive=True) for r in wap.spark.table(f"{wap.sql}_wap_runs").collect()]


def test_report_carries_glue_dq_rule_results(wap):
    code, report = wap.run(ROWS, checks=DQDL, batch_id="g1")
    assert code == 3
    glue = report_file(wap, report)["glue_dq"]
    assert glue["ResultId"] == report.run_id and glue["RulesetName"] == f"local.{wap.table}"
    assert glue["Score"] == round(2 / 3, 6)
    assert glue["StartedOn"] == report.started_at and glue["CompletedOn"] == report.finished_at
    rows, complete, positive = glue["RuleResults"]
    assert rows == {"Name": "RowCount > 0", "Description": "RowCount > 0", "Result": "PASS",
                    "EvaluationMessage": None, "EvaluatedMetrics": {"Dataset.*.RowCount": 3.0},
                    "EvaluatedRule": "RowCount > 0", "Labels": {"team": "orders"}}
    assert complete["Description"] == 'Completeness "id" >= 0.5' and complete["Result"] == "PASS"
    assert complete["EvaluatedMetrics"] == {"Column.id.Completeness": 2 / 3}
    assert positive["Description"] == 'ColumnValues "amount" > 0 labels = ["severity" = "high"]'
    assert positive["Result"] == "FAIL"
    assert positive["EvaluationMessage"] == "1 failing rows"
    assert positive["EvaluatedMetrics"] == {"Column.amount.ColumnValues.Compliance": 2 / 3}
    assert positive["Labels"] == {"team": "orders", "severity": "high"}


def test_json_check_is_described_as_its_dqdl_or_else_its_json(wap):
    checks = [{"check": "not_null", "column": "id", "action": "warn"},
              {"check": "between", "column": "amount", "min": -5, "max": 10},
              {"check": "between", "column": "amount", "min": 0, "where": "id IS NOT NULL"}]
    code, report = wap.run(ROWS, checks=checks)
    assert code == 0
    complete, bounded, where = [r["Description"] for r in report.glue_dq["RuleResults"]]
    assert complete == 'IsComplete "id"'
    assert bounded == ('(ColumnValues "amount" >= -5 where "`amount` IS NOT NULL") AND '
                       '(ColumnValues "amount" <= 10 where "`amount` IS NOT NULL")')
    assert json.loads(where) == {"check": "between", "column": "amount", "min": 0, "where": "id IS NOT NULL"}


def test_rule_text_rendered_for_a_json_check_means_the_same_in_dqdl(wap):
    checks = [{"check": "between", "column": "amount", "min": -5, "max": 10}]
    code, report = wap.run([{"id": 1, "amount": 11.0}], checks=checks, batch_id="json")
    [rule] = report.glue_dq["RuleResults"]
    assert code == 3 and rule["Result"] == "FAIL"
    dqdl = f"Rules = [ {rule['Description']} ]"
    for batch, rows, verdict in (("fails", [{"id": 2, "amount": 11.0}], "FAIL"),
                                 ("nulls_pass", [{"id": 3, "amount": None}, {"id": 4, "amount": 10.0}], "PASS")):
        [again] = wap.run(rows, checks=dqdl, batch_id=batch)[1].glue_dq["RuleResults"]
        assert again["Result"] == verdict, batch


def test_ledger_row_carries_glue_rule_results_and_labels(wap):
    code, report = wap.run(ROWS, checks=DQDL, batch_id="g2")
    assert code == 3
    [row] = ledger_rows(wap)
    assert row["score"] == report.glue_dq["Score"]
    assert [r["Result"] for r in row["rule_results"]] == ["PASS", "PASS", "FAIL"]
    assert row["rule_results"][2]["Labels"] == {"team": "orders", "severity": "high"}
    assert row["rule_results"][0]["EvaluatedMetrics"] == {"Dataset.*.RowCount": 3.0}


def test_ledger_created_without_glue_columns_gains_them_and_keeps_its_rows(wap):
    old_columns = wap_etl.LEDGER_COLUMNS.split(", score double")[0]
    ref = wap_etl.TableRef("local", wap.ns, "orders_wap_runs")
    wap.spark.sql(f"CREATE NAMESPACE IF NOT EXISTS local.{wap.ns}")
    wap_etl.create_table(wap.spark, ref, old_columns)
    assert "rule_results" not in wap.spark.table(ref.sql).columns
    assert wap.run(ROWS[:2], checks=DQDL, batch_id="old")[0] == 0
    newer = wap.csv([{"id": 9, "amount": 1.0}])
    assert wap.run(newer, checks=DQDL, batch_id="newer")[0] == 0
    rows = sorted(ledger_rows(wap), key=lambda r: r["batch_id"])
    assert [r["batch_id"] for r in rows] == ["newer", "old"] and all(r["score"] == 1.0 for r in rows)
    assert wap.run(newer, checks=DQDL, batch_id="newer")[1].status == "already_published"


def test_published_event_matches_a_rule_written_for_glue_dq_results(wap, aws):
    events, sqs = boto3.client("events"), boto3.client("sqs")
    events.create_event_bus(Name="dq")
    url = sqs.create_queue(QueueName="dq-failed")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    glue_rule = {"source": ["wap_etl"], "detail": {"state": ["FAILED"], "rulesetNames": [f"local.{wap.table}"]}}
    events.put_rule(Name="dq-failed", EventBusName="dq", EventPattern=json.dumps(glue_rule))
    events.put_targets(Rule="dq-failed", EventBusName="dq", Targets=[{"Id": "q", "Arn": arn}])
    checks = [{"check": "row_count", "min": 1},
              {"check": "not_null", "column": "id", "action": "warn", "labels": {"owner": "ann"}}]
    code, report = wap.run(ROWS, checks=checks, event_bus_name="dq")
    assert code == 0 and report.status == "published"
    [message] = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)["Messages"]
    detail = json.loads(message["Body"])["detail"]
    assert detail["resultId"] == report.run_id and detail["score"] == 0.5
    assert (detail["numRulesSucceeded"], detail["numRulesFailed"], detail["numRulesSkipped"]) == (1, 1, 0)
    assert detail["context"]["tableName"] == "orders" and detail["context"]["databaseName"] == wap.ns
    assert detail["ruleResults"] == report.glue_dq["RuleResults"]
    assert detail["ruleResults"][1]["Labels"] == {"owner": "ann"}
    assert detail["batch_id"] == report.batch_id and detail["snapshot_id"] == report.main_snapshot_after


def test_failed_audit_sends_an_event_a_glue_failed_rule_matches(wap, aws):
    events, sqs = boto3.client("events"), boto3.client("sqs")
    events.create_event_bus(Name="dq")
    url = sqs.create_queue(QueueName="dq-failed")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    glue_rule = {"source": ["wap_etl"], "detail": {"state": ["FAILED"]}}
    events.put_rule(Name="dq-failed", EventBusName="dq", EventPattern=json.dumps(glue_rule))
    events.put_targets(Rule="dq-failed", EventBusName="dq", Targets=[{"Id": "q", "Arn": arn}])
    code, report = wap.run(ROWS, checks=[{"check": "row_count", "min": 1000}], event_bus_name="dq")
    assert code == 3 and report.status == "audit_failed"
    [message] = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)["Messages"]
    body = json.loads(message["Body"])
    assert body["detail-type"] == "WAP Audit Failed"
    assert body["detail"]["numRulesFailed"] == 1 and body["detail"]["branch"] == report.branch
    assert body["detail"]["staged_snapshot"] == report.staged_snapshot


def test_rule_results_list_the_check_the_job_adds_for_a_merge(wap):
    code, report = wap.run([{"id": 1, "amount": 5.0}, {"id": 2, "amount": 6.0}], checks="Rules = [ RowCount > 5 ]",
                           mode="merge", merge_keys="id")
    names = [r["Name"] for r in report.glue_dq["RuleResults"]]
    [added] = [r for r in report.glue_dq["RuleResults"] if r["Name"] == "unique_merge_keys"]
    assert code == 3 and names == ["RowCount > 5", "unique_merge_keys"]
    assert added["Result"] == "PASS" and added["Description"] == 'IsUnique "id"'
    assert report.glue_dq["Score"] == 0.5


def test_analyzers_are_analyzer_results_outside_the_score(wap):
    code, report = wap.run(ROWS, checks='Rules = [ RowCount > 5 ] Analyzers = [ AllStatistics "amount" ]')
    glue = report.glue_dq
    assert code == 3 and [r["Name"] for r in glue["RuleResults"]] == ["RowCount > 5"] and glue["Score"] == 0.0
    analyzers = {a["Name"]: a for a in glue["AnalyzerResults"]}
    assert set(analyzers) == {f'AllStatistics "amount": {s}' for s in
                              ("row_count", "null_fraction", "unique_fraction", "min", "max")}
    assert analyzers['AllStatistics "amount": max']["EvaluatedMetrics"] == {"Column.amount.Maximum": 6.0}
    assert analyzers['AllStatistics "amount": row_count']["EvaluatedMetrics"] == {"Dataset.*.RowCount": 3.0}


def test_an_event_too_large_for_eventbridge_keeps_the_failed_rule_results():
    rule = {"Name": "x" * 200, "Description": "d" * 300, "EvaluatedMetrics": {}, "Labels": {}}
    rules = [dict(rule, Result="PASS", Name=f"{i}") for i in range(2000)] + [dict(rule, Result="FAIL")]
    detail = json.loads(wap_etl.fitted_detail({"state": "FAILED", "ruleResults": rules}))
    assert len(json.dumps(detail).encode()) <= wap_etl.EVENT_MAX_BYTES
    assert [r["Result"] for r in detail["ruleResults"]] == ["FAIL"] and detail["ruleResultsOmitted"] == 2000
    small = json.loads(wap_etl.fitted_detail({"state": "SUCCEEDED", "ruleResults": rules[:3]}))
    assert small["ruleResults"] == rules[:3] and "ruleResultsOmitted" not in small
