#!/usr/bin/env bash
# The demo: two daily batches of orders into a local Iceberg table, audited by the CHECKS in
# wap_etl.py. Day 1 is clean and is published. Day 2 has a negative amount, a missing order id, a
# repeated order and an unknown status: its audit fails, main stays as it was, and the audit
# branch is kept for inspection.
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
WH=demo/warehouse
REPORTS=demo/reports
rm -rf "$WH" "$REPORTS"
export WAP_SPARK_MASTER=${WAP_SPARK_MASTER:-local[2]}
job() { "$PY" wap_etl.py --catalog demo --warehouse "$WH" --report_path "$REPORTS" --table shop.orders "$@"; }

echo "=== day 1: a clean batch"
job --source_path demo/orders_2024-06-01.csv --batch_id 2024-06-01
echo "exit code $? (0: published)"

echo "=== day 2: a bad batch"
job --source_path demo/orders_2024-06-02.csv --batch_id 2024-06-02
day2=$?
echo "exit code $day2 (3: audit failed, nothing published)"

echo "=== the table afterwards: main still holds day 1 only; day 2 waits on its audit branch"
job --status
[ "$day2" -eq 3 ]
