"""Secrets (the Slack webhook URL, reader credentials in --source_options, a password in a URL)
never appear in what a run shows: its output, JSON report, HTML page, ledger row, alerts or rerun
command. Each shows <redacted> instead."""
import glob
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

import wap_etl

WEBHOOK_SECRET, PASSWORD = "SECRET_TOKEN_123", "hunter2-secret"
BAD = [{"id": 1, "amount": 5.0}, {"id": 2, "amount": -1.0}]
POSITIVE = [{"check": "between", "column": "amount", "min": 0}]


class FailingWebhook:
    """A webhook endpoint that answers 500 with a reason naming the path, as some proxies do, so
    the failed alert's warning would carry the secret."""

    def __init__(self):
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers["Content-Length"]))
                self.send_response(500, f"no webhook at {self.path}")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hooks/{WEBHOOK_SECRET}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def webhook():
    server = FailingWebhook()
    yield server
    server.close()


def assert_no_secret(where, text, secrets=(WEBHOOK_SECRET, PASSWORD)):
    for secret in secrets:
        assert secret not in text, f"{secret} in the {where}"


def ledger_text(spark, wap):
    return "\n".join(str(r.asDict(recursive=True)) for r in spark.table(f"{wap.sql}_wap_runs").collect())


def test_secrets_never_appear_in_output_report_page_ledger_or_rerun_command(wap, spark, webhook):
    job = wap.cli(BAD, checks=POSITIVE, source_options={"password": PASSWORD, "header": "true"},
                  extra=[f"--slack_webhook_url={webhook.url}"])
    output, _ = job.communicate(timeout=600)
    assert job.returncode == 3, output
    [warning] = [line for line in output.splitlines() if "Slack alert failed" in line]
    assert warning.endswith("HTTP Error 500: no webhook at /<redacted>")
    assert_no_secret("output", output)
    [path] = glob.glob(os.path.join(wap.reports, "*", "*.json"))
    with open(path, encoding="utf-8") as f:
        text = f.read()
    report = json.loads(text)
    assert_no_secret("JSON report", text)
    rerun = report["rerun_command"]
    assert "--slack_webhook_url=<redacted>" in rerun and '"password": "<redacted>"' in rerun
    assert '"header": "true"' in rerun, "other reader options stay readable"
    with open(path.replace(".json", ".html"), encoding="utf-8") as f:  # written beside it
        page = f.read()
    assert_no_secret("HTML page", page)
    assert "--slack_webhook_url=&lt;redacted&gt;" in page
    assert report["run_id"] in ledger_text(spark, wap)
    assert_no_secret("run ledger", ledger_text(spark, wap))


def test_the_rerun_command_never_shows_a_one_token_slack_webhook(wap):
    code, report = wap.run(BAD, checks=POSITIVE, alert_on="published",
                           extra=["--slack_webhook_url=https://hooks.slack.example/T0/B0/secret"])
    assert code == 3
    assert "secret" not in report.rerun_command
    assert "--slack_webhook_url=<redacted>" in report.rerun_command


def test_an_error_naming_a_secret_is_scrubbed_from_log_report_and_ledger(wap, spark, monkeypatch, caplog):
    assert wap.run(BAD[:1], checks=POSITIVE)[0] == 0  # the ledger exists: the refused run is recorded

    def transform_leaking(df):
        raise ValueError(f"login refused for password {PASSWORD}")

    monkeypatch.setattr(wap_etl, "transform", transform_leaking)
    code, report = wap.run(BAD, checks=POSITIVE, source_options={"aws_secret_access_key": PASSWORD})
    assert code == 2 and report.error == "transform: raised ValueError: login refused for password <redacted>"
    assert_no_secret("log", caplog.text)
    assert "password <redacted>" in caplog.text
    assert_no_secret("run ledger", ledger_text(spark, wap))
    assert report.error in ledger_text(spark, wap)


SECRET_OPTIONS = {
    "fs.s3a.secret.key": "s3a-secret", "fs.s3a.access.key": "s3a-access", "aws_secret_access_key": "aws-secret",
    "aws_session_token": "aws-session", "fs.azure.sas.c.acct.blob.core.windows.net": "sv=2024&sig=abc",
    "fs.azure.account.key.acct.dfs.core.windows.net": "azure-key", "password": "pw-1", "user_passwd": "pw-2",
    "credentials": "cred-1", "apiKey": "api-1"}
PLAIN_OPTIONS = {"header": "true", "sep": ";", "multiLine": "false", "keyColumn": "id"}


def test_secret_looking_reader_options_are_secrets_and_others_stay_readable(tmp_path):
    path = tmp_path / "in.csv"
    path.write_text("id\n1\n")
    argv = ["--source_path", str(path), "--table", "shop.orders", "--warehouse", "s3://user:url-pw@bucket/w",
            "--catalog_type", "glue", "--source_options", json.dumps({**SECRET_OPTIONS, **PLAIN_OPTIONS}),
            "--slack_webhook_url", "https://hooks.slack.example/T0/B0/two-tokens"]
    p = wap_etl.parse_params(argv)
    secrets = [*SECRET_OPTIONS.values(), "url-pw", "https://hooks.slack.example/T0/B0/two-tokens",
               "T0/B0/two-tokens"]
    assert sorted(p.secrets) == sorted(secrets)
    rerun = wap_etl.rerun_command(p, argv)
    assert_no_secret("rerun command", rerun, secrets)
    options = json.loads(wap_etl.shlex.split(rerun)[argv.index("--source_options") + 3])
    assert options == {**{k: "<redacted>" for k in SECRET_OPTIONS}, **PLAIN_OPTIONS}
    assert "s3://user:<redacted>@bucket/w" in rerun


def test_secret_reader_options_are_not_part_of_the_config_fingerprint(tmp_path):
    from conftest import write_csv
    source = write_csv(tmp_path / "in" / "orders.csv", [{"id": 1}])
    fingerprints = set()
    for password in ("first-password", "rotated-password"):
        p = wap_etl.parse_params(["--source_path", source, "--table", "shop.orders",
                                  "--source_options", wap_etl.json.dumps({"password": password})])
        fingerprints.add(wap_etl.fingerprint_config(p, wap_etl.parse_checks(p.checks)))
    assert len(fingerprints) == 1, "rotating a key neither leaks into the fingerprint nor stops a resume"


def test_a_secret_inside_the_batch_id_is_not_scrubbed_from_the_ledger(wap, spark):
    code, report = wap.run([{"id": 1, "amount": 1.0}], checks=[], batch_id="day-abc123",
                           source_options={"password": "abc123"})
    assert code == 0 and report.batch_id == "day-abc123"
    row, = spark.table(f"{wap.sql}_wap_runs").collect()
    assert row["batch_id"] == "day-abc123", "identities are never rewritten"

