"""Reports, alerts, metrics and events: real boto3 against moto, real HTTP against a local server.
A side channel that fails never changes the run's outcome."""
import json
import threading
import time
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, HTTPServer

import boto3
import pytest

import wap_etl

ROWS = [{"id": 1, "amount": 5.0}, {"id": 2, "amount": 6.0}]
BAD = [{"id": 3, "amount": -1.0}]
POSITIVE = [{"check": "between", "column": "amount", "min": 0}]


def queue_for(sqs, name):
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return url, arn


def receive(sqs, url):
    messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get("Messages", [])
    return [json.loads(m["Body"]) for m in messages]


class SlackServer:
    """A local stand-in for Slack's webhook endpoint that records what it receives."""

    def __init__(self):
        received = self.received = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hooks/T000/B000"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def slack():
    server = SlackServer()
    yield server
    server.close()


def test_report_is_written_to_s3(wap, aws):
    boto3.client("s3").create_bucket(Bucket="reports")
    code, report = wap.run(ROWS, checks=POSITIVE, batch_id="s3b", report_path="s3://reports/wap/")
    assert code == 0
    body = boto3.client("s3").get_object(Bucket="reports", Key=f"wap/local.{wap.table}/s3b.json")["Body"]
    written = json.loads(body.read())
    assert written["status"] == "published" and written["rows_written"] == 2
    assert written["main_snapshot_after"] == report.main_snapshot_after


def test_checks_are_read_from_s3(wap, aws):
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="wap-config")
    s3.put_object(Bucket="wap-config", Key="checks.json", Body=json.dumps(POSITIVE).encode())
    code, report = wap.run(BAD, checks="s3://wap-config/checks.json")
    assert code == 3 and report.checks[0]["name"] == "between_amount"


def test_failed_audit_publishes_an_sns_alert_with_attributes(wap, aws):
    sns, sqs = boto3.client("sns"), boto3.client("sqs")
    topic = sns.create_topic(Name="wap-alerts")["TopicArn"]
    url, arn = queue_for(sqs, "alerts")
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn)
    code, report = wap.run(BAD, checks=POSITIVE, sns_topic_arn=topic)
    assert code == 3
    [envelope] = receive(sqs, url)
    assert envelope["Subject"].startswith("wap_etl audit_failed")
    assert "between_amount (between): 1 failing rows" in envelope["Message"]
    assert report.inspect_sql in envelope["Message"] and report.branch in envelope["Message"]
    attrs = envelope["MessageAttributes"]
    assert attrs["status"]["Value"] == "audit_failed" and attrs["table"]["Value"] == f"local.{wap.table}"


def test_published_run_sends_no_alert_unless_asked(wap, aws):
    sns, sqs = boto3.client("sns"), boto3.client("sqs")
    topic = sns.create_topic(Name="wap-alerts")["TopicArn"]
    url, arn = queue_for(sqs, "alerts")
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn)
    assert wap.run(ROWS, checks=POSITIVE, sns_topic_arn=topic)[0] == 0
    assert receive(sqs, url) == []
    assert wap.run([{"id": 7, "amount": 1.0}], checks=POSITIVE, sns_topic_arn=topic,
                   alert_on="published,audit_failed")[0] == 0
    [envelope] = receive(sqs, url)
    assert envelope["MessageAttributes"]["status"]["Value"] == "published"


def test_failed_audit_posts_to_slack(wap, slack):
    code, report = wap.run(BAD, checks=POSITIVE, slack_webhook_url=slack.url)
    assert code == 3
    [payload] = slack.received
    assert "audit_failed" in payload["text"] and "between_amount" in payload["text"]
    assert report.inspect_sql in payload["text"]


def test_alerts_name_the_labels_of_failed_checks(wap, aws, slack):
    sns, sqs = boto3.client("sns"), boto3.client("sqs")
    topic = sns.create_topic(Name="wap-alerts")["TopicArn"]
    url, arn = queue_for(sqs, "alerts")
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn)
    labelled = [dict(POSITIVE[0], labels={"team": "billing", "severity": "high"})]
    code, _ = wap.run(BAD, checks=labelled, sns_topic_arn=topic, slack_webhook_url=slack.url)
    assert code == 3
    [envelope] = receive(sqs, url)
    [payload] = slack.received
    line = "between_amount (between): 1 failing rows [labels: severity=high, team=billing]"
    assert line in envelope["Message"] and line in payload["text"]


def test_metrics_are_put_to_cloudwatch(wap, aws):
    code, report = wap.run(ROWS + BAD, checks=[dict(POSITIVE[0], action="warn"),
                                               {"check": "row_count", "min": 1}],
                           cloudwatch_namespace="WAP/Test")
    assert code == 0
    cw = boto3.client("cloudwatch")
    now = datetime.now(timezone.utc)
    table = f"local.{wap.table}"

    def value(name):
        points = cw.get_metric_statistics(
            Namespace="WAP/Test", MetricName=name, Dimensions=[{"Name": "Table", "Value": table}],
            StartTime=now - timedelta(minutes=10), EndTime=now + timedelta(minutes=10),
            Period=60, Statistics=["Maximum"])["Datapoints"]
        assert points, name
        return points[0]["Maximum"]

    assert value("RowsWritten") == 3 and value("Published") == 1
    assert value("ChecksFailed") == 0 and value("RowsDropped") == 0
    assert value("AuditSeconds") == pytest.approx(report.timings["audit"], abs=0.01)


def test_publish_sends_an_eventbridge_event(wap, aws):
    events, sqs = boto3.client("events"), boto3.client("sqs")
    events.create_event_bus(Name="data")
    url, arn = queue_for(sqs, "downstream")
    events.put_rule(Name="wap", EventBusName="data", EventPattern=json.dumps({"source": ["wap_etl"]}))
    events.put_targets(Rule="wap", EventBusName="data", Targets=[{"Id": "q", "Arn": arn}])
    code, report = wap.run(ROWS, checks=POSITIVE, batch_id="ev1", event_bus_name="data")
    assert code == 0
    [event] = receive(sqs, url)
    assert event["detail-type"] == "WAP Published" and event["source"] == "wap_etl"
    ours = {k: event["detail"][k] for k in ("table", "batch_id", "snapshot_id", "rows")}
    assert ours == {"table": f"local.{wap.table}", "batch_id": "ev1",
                    "snapshot_id": report.main_snapshot_after, "rows": 2}


def test_side_channels_are_sent_at_the_same_time(wap, aws):
    """Slack's stand-in answers only once CloudWatch holds the run's metrics, waiting at most 8 s
    (the job's Slack post gives up at 10): sent one after the other, CloudWatch would come only
    after Slack's answer, and the handler would find nothing."""
    seen = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            cw, waited = boto3.client("cloudwatch"), time.monotonic() + 8
            while not cw.list_metrics(Namespace="WAP/Together")["Metrics"] and time.monotonic() < waited:
                time.sleep(0.1)
            seen.append(bool(cw.list_metrics(Namespace="WAP/Together")["Metrics"]))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        code, _ = wap.run(BAD, checks=POSITIVE, cloudwatch_namespace="WAP/Together",
                          slack_webhook_url=f"http://127.0.0.1:{server.server_port}/hooks/T/B")
    finally:
        server.shutdown()
        server.server_close()
    assert code == 3 and seen == [True]


@pytest.mark.parametrize("channel", ["report_bucket", "sns_topic", "slack_port", "event_bus"])
def test_failing_side_channel_does_not_change_the_outcome(wap, aws, channel, caplog):
    closed = HTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    port = closed.server_port
    closed.server_close()
    params = {"report_bucket": {"report_path": "s3://no-such-bucket/x"},
              "sns_topic": {"sns_topic_arn": "arn:aws:sns:us-east-1:123456789012:missing",
                            "alert_on": "published"},
              "slack_port": {"slack_webhook_url": f"http://127.0.0.1:{port}/hook", "alert_on": "published"},
              "event_bus": {"event_bus_name": "missing-bus"}}[channel]
    code, report = wap.run(ROWS, checks=POSITIVE, **params)
    assert code == 0 and report.status == "published" and wap.ids() == [1, 2]
    assert "failed (the run's outcome stands)" in caplog.text
    code, report = wap.run(BAD, checks=POSITIVE, **params)
    assert code == 3 and wap.ids() == [1, 2]


def test_status_lists_main_open_branches_and_last_runs(wap, capsys):
    assert wap.run(ROWS, checks=POSITIVE, batch_id="day1")[0] == 0
    assert wap.run(BAD, checks=POSITIVE, batch_id="day2")[0] == 3
    capsys.readouterr()
    code, _ = wap_etl.run(["--status", "--table", wap.table, "--catalog", "local",
                           "--report_path", wap.reports])
    out = capsys.readouterr().out
    assert code == 0
    assert "main: snapshot" in out and "3 rows" not in out and "2 rows" in out
    assert "open audit branches: 1" in out and "audit_day2" in out and "rows staged 1" in out
    assert "day2  audit_failed  failed: between_amount" in out and "day1  published" in out


def test_bad_alert_parameters_exit_2(wap):
    assert wap.run(ROWS, checks=[], alert_on="sometimes")[0] == 2
    assert wap.run(ROWS, checks=[], slack_webhook_url="ftp://x")[0] == 2
    assert not wap.exists()
