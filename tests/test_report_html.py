"""The HTML pages: a page per run beside its JSON report and a status page, charted from the run
ledger; checked with an HTML parser and rendered in a real headless Chromium."""
import json
import os
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser

import boto3
from moto import mock_aws

import wap_etl

CHECKS = [{"check": "not_null", "column": "id"}, {"check": "between", "column": "amount", "min": 0},
          {"check": "accepted_values", "column": "status", "values": ["new", "paid"], "action": "warn"},
          {"check": "row_count", "min": 1}]
XSS = "<script>alert(1)</script>"


class Collect(HTMLParser):
    """Collects tables (rows of cell texts), rects with their classes, text and tag names."""

    def __init__(self):
        super().__init__()
        self.tables, self.rects, self.tags, self.texts = [], [], [], []
        self._cell = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append(tag)
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "rect":
            self.rects.append(a)

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self.tables[-1][-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data):
        self.texts.append(data)
        if self._cell is not None:
            self._cell.append(data)

    def cells(self):
        return [c for t in self.tables for row in t for c in row]

    def bars(self, marked=None):
        return [r for r in self.rects if "bar" in (r.get("class") or "").split()
                and (marked is None or ("marked" in r["class"].split()) == marked)]


def parse(page):
    p = Collect()
    p.feed(page)
    p.close()
    return p


def page_of(report):
    with open(report.html_report, encoding="utf-8") as f:
        return f.read()


def good(day):
    return [{"id": day * 10 + i, "amount": float(i), "status": "new"} for i in range(1, 3 + day)]


def run_days(wap, days=3):
    for day in range(days):
        assert wap.run(good(day), checks=CHECKS, batch_id=f"day{day}")[0] == 0
    bad = [{"id": 100, "amount": -1.0, "status": "new"}, {"id": None, "amount": 2.0, "status": XSS}]
    code, report = wap.run(bad, checks=CHECKS, batch_id="bad_day")
    assert code == 3
    return report


def test_failed_run_page_shows_every_check_counts_samples_and_inspect_sql(wap):
    report = run_days(wap)
    assert report.html_report == os.path.join(wap.reports, f"local.{wap.table}", "bad_day.html")
    page = parse(page_of(report))
    cells = page.cells()
    text = " ".join(page.texts)
    assert "Audit failed" in text and report.run_id in text and "bad_day" in text
    rows = {row[0]: row for t in page.tables for row in t if row and row[0] in {c["name"] for c in report.checks}}
    assert set(rows) == {"not_null_id", "between_amount", "accepted_values_status", "row_count"}
    assert rows["not_null_id"][3:5] == ["FAIL", "1"] and rows["between_amount"][3:5] == ["FAIL", "1"]
    assert rows["accepted_values_status"][3:5] == ["WARN", "1"] and rows["row_count"][3] == "PASS"
    assert "100" in cells and "-1.0" in cells, "the failing row is shown as a sample"
    assert report.inspect_sql in text and report.rerun_command in text
    assert XSS in cells, "sample values are shown as text"


def test_run_page_shows_each_checks_labels(wap):
    checks = [dict(CHECKS[0], labels={"team": "orders", "tier": "gold"}), CHECKS[3]]
    code, report = wap.run(good(0), checks=checks, batch_id="labelled")
    assert code == 0
    page = parse(page_of(report))
    [head] = [t[0] for t in page.tables if t and "Check" in t[0]]
    rows = {row[0]: dict(zip(head, row)) for t in page.tables for row in t[1:] if row}
    assert rows["not_null_id"]["Labels"] == "team=orders, tier=gold"
    assert rows["row_count"]["Labels"] == "-"


def test_page_loads_nothing_from_the_network_and_runs_no_script(wap):
    raw = page_of(run_days(wap, days=1))
    for forbidden in ("<script", "http://", "https://", "src=", "<link", "@import", "url("):
        assert forbidden not in raw, forbidden
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in raw


def charts(raw):
    """Each inline SVG chart of a page, parsed on its own."""
    return [parse(part[:part.index("</svg>")]) for part in raw.split("<svg")[1:]]


def test_page_charts_the_last_runs_with_this_run_marked(wap):
    rows_chart, failing_chart = charts(page_of(run_days(wap, days=3)))
    assert len(rows_chart.bars()) == 4, "rows per published batch: three days, and this run"
    assert len(rows_chart.bars(marked=True)) == 1
    assert len(failing_chart.bars(marked=True)) >= 2, "this run's failing rows per check"
    assert len(failing_chart.bars()) > len(failing_chart.bars(marked=True))


def test_status_page_lists_main_open_branches_and_last_runs(wap, tmp_path):
    report = run_days(wap, days=2)
    out = tmp_path / "status.html"
    code, _ = wap_etl.run(["--status", "--table", wap.table, "--catalog", "local", "--html", str(out)])
    assert code == 0
    page = parse(out.read_text())
    cells = page.cells()
    assert report.branch in cells and "bad_day" in cells and "day0" in cells and "day1" in cells
    assert "Audit failed" in cells and "Published" in cells
    assert len(page.bars()) >= 2


def test_html_without_status_is_refused(wap):
    code, report = wap.run(good(0), checks=CHECKS, html="x.html")
    assert code == 2 and "--html" in report.error


def test_alert_names_the_html_report_on_s3(wap, monkeypatch):
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(key, value)
    with mock_aws():
        boto3.client("s3").create_bucket(Bucket="reports")
        sqs = boto3.client("sqs")
        url = sqs.create_queue(QueueName="alerts")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        topic = boto3.client("sns").create_topic(Name="wap")["TopicArn"]
        boto3.client("sns").subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn)
        code, report = wap.run([{"id": 1, "amount": -1.0, "status": "new"}], checks=CHECKS, batch_id="b7",
                               report_path="s3://reports/wap", sns_topic_arn=topic)
        assert code == 3
        location = f"s3://reports/wap/local.{wap.table}/b7.html"
        assert report.html_report == location
        body = boto3.client("s3").get_object(Bucket="reports", Key=location[len("s3://reports/"):])["Body"].read()
        assert b"Audit failed" in body
        message = json.loads(sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)["Messages"][0]["Body"])["Message"]
        assert f"Report: {location}" in message


def png_pixels(path):
    """Decode an 8-bit RGB/RGBA non-interlaced PNG with zlib; returns a set of (r, g, b)."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, head = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + n]
        head = struct.unpack(">IIBBBBB", chunk) if kind == b"IHDR" else head
        idat += chunk if kind == b"IDAT" else b""
        pos += 12 + n
    w, h, depth, ctype, _, _, interlace = head
    assert depth == 8 and ctype in (2, 6) and not interlace
    bpp = 3 if ctype == 2 else 4
    raw, stride, prev, colours = zlib.decompress(idat), w * bpp, bytearray(w * bpp), set()
    for y in range(h):
        ftype, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride) if ftype else ():
            a, b = line[i - bpp] if i >= bpp else 0, prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if ftype == 1:
                line[i] = (line[i] + a) & 255
            elif ftype == 2:
                line[i] = (line[i] + b) & 255
            elif ftype == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            else:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        colours.update(zip(line[0::bpp], line[1::bpp], line[2::bpp]))
        prev = line
    return colours


def hex_rgb(h):
    return tuple(int(h[i:i + 2], 16) for i in (1, 3, 5))


def test_failed_run_page_renders_in_headless_chromium_with_its_charts(wap, tmp_path):
    exe = shutil.which("chromium")
    assert exe, "Debian's chromium is needed (.ci/run installs it)"
    page = run_days(wap, days=4).html_report
    png = tmp_path / "page.png"
    subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1200,1800",
                    f"--screenshot={png}", f"file://{page}"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120, check=True)
    colours = png_pixels(png)
    assert len(colours) > 200, "the page is not blank"
    for colour in (wap_etl.PALETTE[0], wap_etl.PALETTE[1], wap_etl.MARK_BG, "#ffebe9"):
        assert hex_rgb(colour) in colours, f"{colour} (bars, a second series, this run, the banner)"
