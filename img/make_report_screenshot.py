"""Makes img/report_failed_run.png: six clean daily batches, then one that fails its audit; the
failed run's HTML page rendered by headless Chromium. Run with the project's venv python."""
import csv
import os
import random
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import wap_etl  # noqa: E402

CHECKS = [{"check": "not_null", "column": "order_id"}, {"check": "unique", "columns": ["order_id"]},
          {"check": "between", "column": "amount", "min": 0},
          {"check": "accepted_values", "column": "status", "values": ["new", "paid", "shipped"]},
          {"check": "regex", "column": "email", "pattern": "^[^@]+@[^@]+$", "action": "warn"},
          {"check": "row_count", "min": 1}]


def day(folder, n, first_id, bad=False):
    rng = random.Random(first_id)
    path = os.path.join(folder, f"orders_{first_id}.csv")
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["order_id", "email", "amount", "status"])
        for i in range(n):
            w.writerow([first_id + i, f"c{i}@shop.example", round(rng.uniform(5, 200), 2),
                        rng.choice(["new", "paid", "shipped"])])
        if bad:
            w.writerows([[first_id, "dup@shop.example", 12.5, "new"], ["", "no-id@shop.example", 3.0, "paid"],
                         [first_id + n + 1, "not-an-email", -40.0, "lost"]])
    return path


def main():
    work = tempfile.mkdtemp()
    base = ["--table", "shop.orders", "--catalog", "demo", "--warehouse", os.path.join(work, "wh"),
            "--report_path", os.path.join(work, "reports"), "--checks", wap_etl.json.dumps(CHECKS)]
    for d, n in enumerate([120, 135, 128, 150, 142, 160]):
        code, _ = wap_etl.run(base + ["--source_path", day(work, n, 1000 * (d + 1)), "--batch_id", f"2024-06-0{d + 1}"])
        assert code == 0
    code, report = wap_etl.run(base + ["--source_path", day(work, 140, 7000, bad=True), "--batch_id", "2024-06-07"])
    assert code == 3, report.error
    png = os.path.join(HERE, "report_failed_run.png")
    subprocess.run([shutil.which("chromium"), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking", "--disable-component-update",
                    "--disable-sync", f"--user-data-dir={os.path.join(work, 'profile')}",
                    "--window-size=1200,1960", f"--screenshot={png}", f"file://{report.html_report}"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    shutil.rmtree(work)
    print(png)


if __name__ == "__main__":
    main()
