"""wap_etl: Write-Audit-Publish for Apache Iceberg tables, in one PySpark file.

Reads a batch, applies `transform`, stages it on an Iceberg audit branch of this run's own, audits
the staged rows with declarative checks and, only if every blocking check passes, swaps `main` to
exactly the audited snapshot (a compare-and-swap), so each batch reaches `main` once. Runs
unchanged as an AWS Glue 5.0 job, with `spark-submit`, and with plain `python`.

    python wap_etl.py --source_path data/orders.csv --table shop.orders

Exit codes: 0 success, 1 unexpected error, 2 bad parameters or check spec (nothing written),
3 audit failed (main untouched, branch kept for inspection).

Sections, in the order a run goes through them:
    Your checks and transform   CHECKS, transform
    Parameters                  every --name, validated before anything runs
    Checks                      the check spec, validated
    Checks from DQDL            Glue Data Quality rulesets as check specs, and back
    Session                     a SparkSession with Iceberg and the catalog
    Read                        the batch, its input and config fingerprints
    Table state and ledger      refs, main's history, the run ledger table
    Write                       stage on this run's private branch, then the guard
    Audit                       every check against the staged snapshot
    Publish                     the decision and the compare-and-swap of main
    Report                      the run report, the ledger row
    Alerts                      SNS, Slack, CloudWatch, EventBridge
    Status                      --status, branch clean-up, --suggest_checks
    Main                        the one retry loop: write, audit, publish
"""

# =================================================================================================
# Edit here: your checks and your transform.
# =================================================================================================

# Each check: a type, the columns it looks at, and an action: "fail" blocks publish, "warn" only
# reports, "drop" quarantines the offending rows before the write. `--checks` replaces this list.
CHECKS = [
    {"check": "not_null", "column": "order_id"},
    {"check": "unique", "columns": ["order_id"]},
    {"check": "between", "column": "amount", "min": 0},
    {"check": "accepted_values", "column": "status", "values": ["new", "paid", "shipped"]},
    {"check": "row_count", "min": 1},
]


def transform(df):
    """Your business logic: DataFrame in, DataFrame out. Runs before the audit, so checks see its output."""
    return df


# =================================================================================================
# The job. Nothing below needs editing for everyday use.
# =================================================================================================

import functools
import hashlib
import html
import inspect
import json
import logging
import math
import os
import random
import re
import shlex
import statistics
import struct
import sys
import threading
import time
import uuid
from collections import Counter, namedtuple
from contextlib import closing, contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from enum import Enum

log = logging.getLogger("wap_etl")

EXIT_OK, EXIT_ERROR, EXIT_BAD_INPUT, EXIT_AUDIT_FAILED = 0, 1, 2, 3
ICEBERG_MAVEN = "org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.7.1"
ICEBERG_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
BRANCH_PREFIX = "audit_"
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
ALIAS = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,127}$")  # a reference alias ("ref-1", as Glue's); never SQL
BATCH_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:+=@-]{0,127}$")
# What every snapshot a run commits carries in its summary: who wrote it, from what, and how.
BATCH_PROPERTY = "wap.batch_id"
RUN_PROPERTY = "wap.run_id"
FINGERPRINT_PROPERTY = "wap.input_fingerprint"
CONFIG_PROPERTY = "wap.config_fingerprint"
FILES_PROPERTY = "wap.input_files"  # the files it consumed (normalized paths)
FILE_IDS_PROPERTY = "wap.input_file_ids"  # their identities: path, size and content
# A table property that the publish's own compare-and-swap sets: the last publish, in the very
# commit that made it. It outlives the snapshot's expiry until the ledger holds the publish.
PUBLISH_PROPERTY = "wap.last_publish"
# Its twin for a batch every row of which was quarantined: set by that consumption's own
# compare-and-swap (main unmoved), kept apart so that a publish never overwrites it unrecorded.
WHOLE_QUARANTINE_PROPERTY = "wap.last_quarantine"
QUARANTINE_PROPERTY = "wap.quarantine_run_id"  # the run whose quarantined rows go with the snapshot
QUARANTINED_PROPERTY = "wap.quarantined_rows"  # how many rows of the quarantine go with it
SOURCE_SNAPSHOT_PROPERTY = "source-snapshot-id"  # Iceberg's own: what a rebased snapshot re-commits
SOURCE_FORMATS = ("csv", "json", "parquet")
MODES = ("append", "overwrite_partitions", "merge")


class Status(str, Enum):
    """How a run ended; the value is what the report, the ledger and alerts say."""
    PUBLISHED = "published"
    ALREADY_PUBLISHED = "already_published"
    STAGED = "staged"
    NOTHING_TO_PUBLISH = "nothing_to_publish"
    QUARANTINED = "quarantined"  # every row dropped by a check: the input is consumed, main unchanged
    AUDIT_FAILED = "audit_failed"
    ERROR = "error"

    def __str__(self):
        return self.value


STATUSES = tuple(s.value for s in Status)
SOURCE_EXTENSIONS = {".csv": "csv", ".tsv": "csv", ".json": "json", ".jsonl": "json",
                     ".ndjson": "json", ".parquet": "parquet"}


class WapError(Exception):
    """A run-ending condition with its exit code: 2 for bad input, 1 for everything else."""

    def __init__(self, message, code=EXIT_ERROR):
        super().__init__(message)
        self.code = code


def bad_input(message):
    return WapError(message, EXIT_BAD_INPUT)


# =================================================================================================
# Parameters
# =================================================================================================

# name: (default, help). Glue passes every parameter as `--name value`; so does the local CLI.
PARAMS = {
    "source_path": (None, "file or folder to read: local path or s3:// URI (required)"),
    "source_format": (None, "csv | json | parquet; default: from the path's extension"),
    "source_options": ("{}", "JSON object of Spark reader options"),
    "source_schema": ("auto", "auto | infer | table: CSV column types from the existing table "
                              "(auto: when it exists) or inferred by Spark"),
    "source_files": ("all", "all | new: read only the files under --source_path that no published "
                            "run of this table consumed (from the run ledger)"),
    "table": (None, "target table as namespace.table (required)"),
    "runs_table": (None, "run ledger table as namespace.table; default <namespace>.<table>_wap_runs"),
    "catalog": ("glue_catalog", "Spark catalog name"),
    "catalog_type": (None, "glue | hadoop; default glue on Glue, hadoop elsewhere"),
    "warehouse": (None, "warehouse location; default ./warehouse for hadoop"),
    "checks": (None, "checks as JSON text or a path to a JSON file; default: CHECKS in this file"),
    "reference_tables": ("{}", "JSON object of alias -> namespace.table: the reference datasets that "
                               "DQDL RowCountMatch, SchemaMatch, AggregateMatch and DatasetMatch rules "
                               "name (main of a table in --catalog)"),
    "batch_id": (None, "the batch's identity; default: a fingerprint of table and input files"),
    "mode": ("append", "append | overwrite_partitions | merge"),
    "merge_keys": (None, "merge: comma-separated key columns to upsert by"),
    "delete_condition": (None, "merge: SQL condition on source rows (alias s) that deletes the match"),
    "schema_evolution": ("fail", "fail | add_columns: what to do with columns the table lacks"),
    "audit_source": ("branch", "branch: row checks scan the staged snapshot | write: observe them "
                               "during the write, matched against the snapshot's record count"),
    "publish": ("true", "false: stage and audit only, keep the branch"),
    "report_path": (None, "folder or s3:// prefix for the JSON run reports"),
    "sns_topic_arn": (None, "SNS topic to alert when a run ends in one of --alert_on"),
    "slack_webhook_url": (None, "Slack incoming-webhook URL to alert the same way"),
    "alert_on": ("audit_failed,error,quarantined", "comma-separated statuses that send an alert"),
    "cloudwatch_namespace": (None, "CloudWatch namespace for the run's metrics"),
    "event_bus_name": (None, "EventBridge bus that gets a 'WAP Published' event on publish"),
    "partition_by": (None, "comma-separated partition columns, used when the table is created"),
    "iceberg_jar": (None, "path to the Iceberg Spark runtime jar (local runs only)"),
    "branch_retention_days": ("7", "days a kept audit branch stays before the table's next run drops it"),
    "max_publish_retries": ("5", "times to rebase and retry when another run moved main first"),
    "cleanup_branches_older_than_days": (None, "drop audit branches older than N days, then exit"),
    "status": ("false", "true: print the table's main snapshot, open audit branches and last runs"),
    "html": (None, "with --status: also write the status page as HTML to this file (local or s3://)"),
    "suggest_checks": ("false", "true: profile the batch (after transform) and print checks that pass "
                                "on it; writes nothing"),
    "suggest_format": ("json", "json | dqdl: how --suggest_checks prints the checks"),
    "dry_run": ("false", "true: check every parameter, check and table against a sample of the source "
                         "and print what the run would do; writes nothing (for CI)"),
}
BOOLEAN_PARAMS = {"publish", "status", "suggest_checks", "dry_run"}


@dataclass
class Params:
    source_path: str
    table: str
    namespace: str
    table_name: str
    catalog: str
    catalog_type: str
    warehouse: str
    source_format: str
    source_options: dict
    source_schema: str
    source_files: str
    runs_namespace: str
    runs_name: str
    checks: list
    batch_id: str
    mode: str
    merge_keys: list
    delete_condition: str
    schema_evolution: str
    audit_source: str
    publish: bool
    report_path: str
    partition_by: list
    sns_topic_arn: str
    slack_webhook_url: str
    alert_on: list
    cloudwatch_namespace: str
    event_bus_name: str
    iceberg_jar: str
    branch_retention_days: int
    max_publish_retries: int = 5
    cleanup_days: float = None
    status: bool = False
    html: str = None
    suggest_checks: bool = False
    suggest_format: str = "json"
    dry_run: bool = False
    on_glue: bool = False
    glue_args: dict = field(default_factory=dict, repr=False)
    secrets: tuple = field(default=(), repr=False)  # values no output may show (find_secrets)
    reference_tables: dict = field(default_factory=dict)  # alias -> namespace.table


def on_glue(argv):
    """Glue always passes --JOB_NAME; a laptop with the awsglue package installed does not."""
    if "--JOB_NAME" not in argv:
        return False
    try:
        import awsglue.utils  # noqa: F401
    except ImportError:
        return False
    return True


# Glue passes its own job arguments beside ours (docs.aws.amazon.com/glue/latest/dg/
# aws-glue-programming-etl-glue-arguments.html): --UPPER_CASE or --with-hyphens, some without a
# value (--enable-metrics), and one whose value starts with -- itself (pip's --upgrade).
GLUE_DASHED_VALUES = ("--python-modules-installer-option",)
GLUE_LOWER_CASE_ARGS = ("--conf",)  # Glue's only argument spelled like ours
WORKFLOW_ARGS = ("WORKFLOW_NAME", "WORKFLOW_RUN_ID")  # given when a Glue workflow runs the job
# Lake Formation fine-grained access control reads only: no writes, no Spark session extensions
# (docs.aws.amazon.com/glue/latest/dg/security-lf-enable-considerations.html).
LF_FINE_GRAINED = "--enable-lakeformation-fine-grained-access"


def split_glue_argv(argv):
    """Glue's argv read left to right: ([(our name, value)], {Glue key: value or None}). Our
    --name takes the next word (a bare boolean means true); a Glue key takes it unless it is a key."""
    ours, glue, i = [], {}, 0
    while i < len(argv):
        key, value = argv[i], argv[i + 1] if i + 1 < len(argv) else None
        takes = value is not None and (not value.startswith("--") or key in GLUE_DASHED_VALUES)
        if key.startswith("--") and key[2:] in PARAMS:
            if not takes and key[2:] not in BOOLEAN_PARAMS:
                raise bad_input(f"{key}: expected a value")
            ours.append((key[2:], value if takes else "true"))
        elif key.startswith("--"):
            meant = key[2:].split("=", 1)[0].lower().replace("-", "_")
            if meant in PARAMS:  # Glue's parser would drop it silently
                raise bad_input(f"{key.split('=', 1)[0]}: write it as --{meant} with its value as a "
                                "separate argument (Glue's parser ignores any other spelling)")
            glue[key] = value if takes else None
        else:
            takes = False  # a stray word: Glue passes none
        i += 2 if takes else 1
    return ours, glue


def check_glue_args(glue):
    """Refuse what Glue's parser would drop silently (a misspelled parameter of ours) and a job
    set up for Lake Formation fine-grained access, under which this job cannot write."""
    unknown = sorted(k for k in glue if re.fullmatch(r"--[a-z][a-z0-9_]*", k)
                     and k not in GLUE_LOWER_CASE_ARGS)
    if unknown:
        raise bad_input(f"{unknown[0]}: unknown parameter (known: {', '.join('--' + n for n in PARAMS)})")
    if LF_FINE_GRAINED in glue and str(glue[LF_FINE_GRAINED]).strip().lower() != "false":
        raise bad_input(f"{LF_FINE_GRAINED}: Lake Formation fine-grained access control lets a Glue "
                        "5.0 job read only (no writes through Lake Formation permissions, no Spark session "
                        "extensions), and this job writes the table, its branches and its ledger with "
                        "Iceberg's extensions; run it with IAM or Lake Formation full-table access (README)")


def read_glue_args(argv):
    """Our parameters and Glue's run arguments through Glue's own parser, handed each argument as
    one `--key=value` word so that no value (--upgrade, a --conf list) is taken for a key."""
    from awsglue.utils import GlueArgumentError, getResolvedOptions
    ours, glue = split_glue_argv(argv)
    check_glue_args(glue)
    words = [f"--{n}={v}" for n, v in ours] + [k if v is None else f"{k}={v}" for k, v in glue.items()]
    wanted = sorted({n for n, _ in ours}) + ["JOB_NAME"] + [n for n in WORKFLOW_ARGS if f"--{n}" in glue]
    try:  # JOB_ID, JOB_RUN_ID, --TempDir and the bookmark options Glue's parser always reads
        resolved = getResolvedOptions(["wap_etl.py"] + words, wanted)
    except GlueArgumentError as e:
        raise bad_input(f"job arguments: {e}") from None
    return {n: resolved.get(n, default) for n, (default, _) in PARAMS.items()}, resolved


def read_raw_args(argv):
    """Parse `--name value` pairs with Glue's own parser on Glue, argparse elsewhere."""
    if on_glue(argv):
        raw, resolved = read_glue_args(argv)
        return raw, True, resolved
    import argparse

    class Parser(argparse.ArgumentParser):
        def error(self, message):
            raise bad_input(message)

    parser = Parser(prog="wap_etl.py", description=__doc__.split("\n")[0], allow_abbrev=False)
    for name, (default, help_text) in PARAMS.items():
        if name in BOOLEAN_PARAMS:
            parser.add_argument(f"--{name}", default=default, nargs="?", const="true", help=help_text)
        else:
            parser.add_argument(f"--{name}", default=default, help=help_text)
    return vars(parser.parse_args(list(argv))), False, {}


def parse_bool(name, value):
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise bad_input(f"--{name}: expected true or false, got {value!r}")


def parse_number(name, value, kind, minimum, maximum=None):
    try:
        number = kind(value)
        if (not number >= minimum or (maximum is not None and number > maximum)
                or (kind is float and not math.isfinite(number))):
            raise ValueError
    except (TypeError, ValueError):
        what = "a whole number" if kind is int else "a number"
        limits = f"from {minimum} to {maximum}" if maximum is not None else f">= {minimum}"
        raise bad_input(f"--{name}: expected {what} {limits}, got {value!r}") from None
    return number


def parse_json_param(name, text, kind):
    try:
        value = json.loads(text, parse_float=Written)
    except ValueError as e:
        raise bad_input(f"--{name}: not valid JSON ({e})") from None
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds):
        names = " or ".join({"dict": "object"}.get(k.__name__, k.__name__) for k in kinds)
        got = "float" if isinstance(value, Written) else type(value).__name__
        raise bad_input(f"--{name}: expected a JSON {names}, got {got}")
    return value


def check_identifier(what, name):
    if not isinstance(name, str) or not IDENTIFIER.match(name):
        raise bad_input(f"{what}: {name!r} is not a valid identifier (letters, digits, _; "
                        "must not start with a digit)")
    return name


def check_alias(what, name):
    if not isinstance(name, str) or not ALIAS.match(name):
        raise bad_input(f"{what}: {name!r} is not a valid alias (letters, digits, _ and -; "
                        "must start with a letter or _)")
    return name


def parse_table_name(name, value):
    """namespace.table, both plain identifiers: the catalog comes from --catalog.
    `name` is a parameter (`--name`) or, with a space in it, a check's label."""
    what = name if " " in name else f"--{name}"
    parts = str(value).split(".")
    if len(parts) != 2:
        raise bad_input(f"{what}: expected namespace.table, got {value!r}"
                        + (" (the catalog goes in --catalog)" if len(parts) == 3 else ""))
    return check_identifier(what, parts[0]), check_identifier(what, parts[1])


# The Glue Data Catalog's names as Iceberg 1.7.1's GlueCatalog checks them before any call
# (IcebergToGlueConverter: ^[a-z0-9_]{1,252}$ for a database, ^[a-z0-9_]{1,255}$ for a table).
GLUE_NAME_LIMITS = {"database": 252, "table": 255}


def check_glue_name(what, namespace, name):
    """Refuse up front a name Glue would refuse in the middle of the write (`Shop.Orders`)."""
    for kind, value in (("database", namespace), ("table", name)):
        limit = GLUE_NAME_LIMITS[kind]
        if not re.fullmatch(r"[a-z0-9_]+", value) or len(value) > limit:
            hint = f"; use {value.lower()!r}" if re.fullmatch(r"[a-z0-9_]+", value.lower()) else ""
            raise bad_input(f"{what}: {kind} name {value!r} is not allowed in the Glue Data Catalog "
                            f"(1-{limit} lower-case letters, digits and _){hint}")


def check_glue_tables(namespace, table_name, runs_namespace, runs_name, runs_given):
    """Every table a run writes to a Glue catalog: the target, its quarantine and its ledger."""
    runs_what = "--runs_table" if runs_given else "--table (its run ledger, see --runs_table)"
    for what, ns, name in (("--table", namespace, table_name),
                           ("--table (its quarantine table)", namespace, f"{table_name}_quarantine"),
                           (runs_what, runs_namespace, runs_name)):
        check_glue_name(what, ns, name)


def check_glue_references(p, specs, checks):
    """The tables checks read (a relationship's to_table, a reference) live in the same Glue catalog."""
    if p.catalog_type != "glue":
        return
    for i, (spec, c) in enumerate(zip(specs, checks)):
        for table in tables_read(c):
            what = "to_table" if c.check == "relationship" else "reference"
            check_glue_name(f"check #{i + 1} ({json.dumps(spec.get('name') or c.check)}): {what}",
                            *table.split("."))


def parse_reference_tables(text):
    """--reference_tables: alias -> namespace.table. An alias has no dot, so a rule's reference is
    an alias or a table name, never both."""
    aliases = parse_json_param("reference_tables", text, dict)
    for alias, table in aliases.items():
        check_alias("--reference_tables: alias", alias)
        if not isinstance(table, str):
            raise bad_input(f"--reference_tables: {alias!r} must map to namespace.table, got {json.dumps(table)}")
        aliases[alias] = ".".join(parse_table_name(f"--reference_tables: {alias}", table))
    return aliases


def split_s3(uri):
    """s3://bucket/some/key -> ("bucket", "some/key")."""
    bucket, _, key = uri[len("s3://"):].partition("/")
    return bucket, key


def read_text(location):
    """Text of a local file or an s3:// object."""
    if location.startswith("s3://"):
        import boto3
        bucket, key = split_s3(location)
        return boto3.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read().decode("utf-8")
    with open(location, encoding="utf-8") as f:
        return f.read()


# a Glue Data Quality ruleset: its Rules (or Analyzers) section, after comments, sections,
# variables or DefaultLabels
DQDL_RULES = re.compile(r"(?:^|\s)(?:Rules|Analyzers)\s*=\s*\[")


def load_checks_param(value):
    """--checks is JSON or a DQDL ruleset, as text, a local path or an s3:// URI; the in-file
    CHECKS otherwise."""
    if value is None:
        return [dict(c) for c in CHECKS]
    text = value.strip()

    def dqdl(text):
        return not text.startswith(("[", "{", '"')) and DQDL_RULES.search(text)
    if not text.startswith(("[", "{", '"')) and not dqdl(text):
        try:
            text = read_text(text)
        except (OSError, Exception) as e:  # noqa: B014 - boto3 errors have no common base here
            raise bad_input(f"--checks: cannot read {value!r} ({e})") from None
    if dqdl(text):
        return parse_dqdl(text)
    checks = parse_json_param("checks", text, (list, dict))
    if isinstance(checks, dict):
        checks = checks.get("checks")
        if not isinstance(checks, list):
            raise bad_input("--checks: expected a JSON list of checks (or {\"checks\": [...]})")
    return checks


COMPRESSION_SUFFIXES = (".gz", ".bz2", ".zst", ".lz4", ".snappy", ".deflate")
MAX_LISTED_FILES = 10_000


def infer_format(path, names=None, new=False):
    """The reader, from the path's extension or, for a folder (local or s3://), from its files
    (`names`, when already listed): they must all be of one known kind. An empty folder of files
    that arrive (`new`) has no format yet, and nothing to read: csv stands in."""
    if extension_of(path) in SOURCE_EXTENSIONS:
        names = [path]
    listed = names is not None or path.startswith("s3://")  # (list_folder lists no other scheme)
    names = list_folder(path) if names is None else names
    if new and listed and not names:
        return "csv"
    extensions = sorted({extension_of(n) for n in names if not summary_file(n.rsplit("/", 1)[-1])})
    formats = {SOURCE_EXTENSIONS.get(e) for e in extensions}
    if len(formats) == 1 and None not in formats:
        return formats.pop()
    found = ", ".join(e or "(none)" if e.isprintable() else repr(e) for e in extensions) if extensions else "no files"
    raise bad_input(f"--source_format: cannot infer it from {path!r} (found {found}); "
                    "pass csv, json or parquet")


def extension_of(name):
    """'.csv' for part-0.csv.gz; '' when there is none."""
    base = name.rstrip("/").rsplit("/", 1)[-1].lower()
    for suffix in COMPRESSION_SUFFIXES:
        if base.endswith(suffix) and base.count(".") > 1:
            base = base[:-len(suffix)]
            break
    return os.path.splitext(base)[1]


def list_folder(path):
    """Names of the data files under an s3:// prefix (up to MAX_LISTED_FILES), but those Spark's
    listing skips (is_hidden); a local folder's are listed by local_source_names."""
    names = []
    if path.startswith("s3://"):
        import boto3
        bucket, prefix = split_s3(path)
        prefix = prefix.rstrip("/") + "/" if prefix else ""
        try:
            pages = boto3.client("s3").get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
            for page in pages:
                for obj in page.get("Contents", []):
                    if obj["Key"].endswith(("/", "_$folder$")):  # folder markers of the S3 console and Hadoop
                        continue
                    if not is_hidden(obj["Key"][len(prefix):]):
                        names.append(obj["Key"])
                if len(names) >= MAX_LISTED_FILES:
                    break
        except Exception as e:  # botocore's: no such bucket, access denied, no credentials, ...
            code = (getattr(e, "response", None) or {}).get("Error", {}).get("Code") or type(e).__name__
            bad = code in ("NoSuchBucket", "InvalidBucketName", "ParamValidationError")  # the path's fault
            raise WapError(f"--source_path: cannot list {path}: {' '.join(str(e).split())[:500]}",
                           EXIT_BAD_INPUT if bad else EXIT_ERROR) from None
    return names


def summary_file(name):
    """Parquet's _metadata and _common_metadata: listed, as Spark lists them, but no data file (and
    no sign of the format). A name with = is a partition's."""
    return name.startswith("_") and "=" not in name


def is_hidden(relative):
    """Whether Spark's file listing skips a path (relative to the folder read), as its
    shouldFilterOutPathName does at each level: a name starting with . or with _ (but a partition
    folder's _k=v, and _metadata and _common_metadata), or a copy in progress (*._COPYING_)."""
    return any(part.startswith(".") or part.endswith("._COPYING_")
               or summary_file(part) and not part.startswith(("_metadata", "_common_metadata"))
               for part in relative.split("/") if part)


GLOB_CHARACTERS = set("{}[]*?\\")  # Spark reads a path holding any of these as a Hadoop glob


def local_source(path):
    """The local path a --source_path names, normalised as Hadoop's Path normalises it (.., //, a
    trailing /): a plain path, or file:/path or file:///path; None for anything remote. A local
    glob is refused: what Spark would read is what it matches, which no check here would see."""
    if path.startswith("file:"):
        local = path[len("file:"):]
        local = local[2:] if local.startswith("///") else local
        if not local.startswith("/") or local.startswith("//"):  # file:, file://host/p, file:relative
            raise bad_input(f"--source_path: {path!r} is no local file URI; expected file:///path")
    elif "://" in path:
        return None
    elif path.startswith("//") and not path.startswith("///"):  # Hadoop reads //host/p as a host's
        raise bad_input(f"--source_path: {path!r} names a host; a local path starts with one /")
    else:
        local = path
    glob = sorted(GLOB_CHARACTERS & set(local))
    if glob:
        raise bad_input(f"--source_path: {path!r} holds {' '.join(glob)}, which Spark would read as a glob "
                        "pattern; name a local file or folder (s3:// paths may be globs)")
    return os.path.normpath(local)


class LinkedAgain(OSError):
    """A local folder reached again through a link: Hadoop's listing, which Spark's read and
    --source_files new use, would list its files again under other paths (by a link back up,
    without end)."""


def local_data_files(folder, once=False):
    """The files under a local folder as Hadoop lists them for Spark's read (os.DirEntry: a file's
    type is known without a stat): links followed, a link that cannot be followed (dangling,
    looping) skipped, what Spark skips (is_hidden) skipped. A folder reached twice raises
    LinkedAgain (`once`: is listed once, under its path without links: folders reached through a
    link are walked last, whatever order the directory lists them in); an unreadable one raises,
    as Hadoop's listing would."""
    folders, linked, seen = [folder], [], {}
    while folders or linked:
        through_link = not folders
        here = (folders or linked).pop()
        try:
            inode = os.stat(here)
            with os.scandir(here) as entries:
                listed = list(entries)
        except FileNotFoundError:  # gone since its folder was listed
            continue
        first = seen.setdefault((inode.st_dev, inode.st_ino), here)
        if first != here and once:
            continue
        if first != here:
            raise LinkedAgain(f"{here!r} is {first!r} again, through a link (Spark would list its files twice, "
                              "or without end)")
        for entry in listed:
            if is_hidden(entry.name):
                continue
            if is_type(entry.is_dir):
                (linked if through_link or is_type(entry.is_symlink) else folders).append(entry.path)
            elif not is_type(entry.is_symlink) or is_type(entry.stat):
                yield entry


def is_type(test):
    """A DirEntry's is_dir, is_file, is_symlink or stat, False where it fails (a link that loops
    or dangles, no access, gone meanwhile)."""
    try:
        return test()
    except OSError:
        return False


def local_source_names(source_path, path, new=False):
    """Check a local source before anything runs (exit 2): it exists, holds data (or, `new`: a
    folder of files that arrive, may be empty today), is listed as Spark would list it, and
    nothing the read would open is a named pipe, socket or device (the read would never end).
    The names of its files, listed once, for the format's inference."""
    try:
        if not os.path.isdir(path):
            if os.stat(path).st_size == 0 and os.path.isfile(path):
                raise bad_input(f"--source_path: {source_path!r} is empty (0 bytes)")
            special, names = path if special_file(path) else None, None
        else:
            entries = list(local_data_files(path))
            if not entries and not new:
                raise bad_input(f"--source_path: folder {source_path!r} holds no data files")
            names = [e.name for e in entries]  # a regular file's entry needs no stat:
            special = next((e.path for e in entries if not is_type(e.is_file) and special_file(e.path)), None)
    except FileNotFoundError:
        raise bad_input(f"--source_path: {source_path!r} does not exist") from None
    except OSError as e:  # an unreadable folder, a folder listed twice
        raise bad_input(f"--source_path: {' '.join(str(e).split())}") from None
    if special:
        raise bad_input(f"--source_path: {special!r} is not a regular file (a named pipe, socket or "
                        "device would never end the read)")
    return names


def special_file(path):
    """Whether the local file at `path` is a named pipe, socket or device."""
    from stat import S_ISBLK, S_ISCHR, S_ISFIFO, S_ISSOCK
    try:
        mode = os.stat(path).st_mode
    except OSError:  # gone since the listing: the read says what it finds
        return False
    return S_ISFIFO(mode) or S_ISSOCK(mode) or S_ISCHR(mode) or S_ISBLK(mode)


HADOOP_CATALOG = "org.apache.iceberg.hadoop.HadoopCatalog"


def check_catalog_is_safe(catalog, catalog_type, warehouse, impl=None):
    """A hadoop catalog (its type in any case, as Iceberg reads it, or its class as catalog-impl)
    commits by renaming a file, which S3 cannot do atomically: concurrent runs could lose each
    other's commits, and exactly-once rests on atomic commits."""
    hadoop = str(catalog_type or "").lower() == "hadoop" or str(impl or "") == HADOOP_CATALOG
    if hadoop and str(warehouse or "").lower().startswith(("s3://", "s3a://", "s3n://")):
        raise bad_input(f"--catalog_type: catalog {catalog!r} is a hadoop catalog on {warehouse}, which "
                        "has no atomic commit (concurrent runs could lose commits); use "
                        "--catalog_type glue")


SECRET_PARAMS = ("slack_webhook_url",)  # parameters whose whole value is a secret
# --source_options keys whose values are secrets: passwords, tokens, credentials, access and secret
# keys (fs.s3a.secret.key, aws_secret_access_key, fs.azure.account.key.*, fs.azure.sas.*)
SECRET_OPTION = re.compile(r"secret|passw(or)?d|pwd|token|credential|"
                           r"(access|account|api|private|signing|encryption)[._-]?key|(^|[._-])sas([._-]|$)", re.I)
URL_PASSWORD = re.compile(r"://[^/@\s:]*:([^/@\s]+)@")  # the password in scheme://user:password@host


def argv_secrets(argv):
    """Secrets anywhere in the command line, Glue's own run arguments included: URL passwords (an
    --index-url with a token) and the values of secret-looking settings (key=value, as in --conf)."""
    values = [m for v in argv for m in URL_PASSWORD.findall(v)]
    for text in argv:
        for key, value in re.findall(r"([\w.-]+)=([^\s,;]+)", text):
            if SECRET_OPTION.search(key):
                values.append(value)
    return values


def find_secrets(raw, source_options, argv=()):
    """The run's secret values, longest first, for scrub(): secret parameters (and, of a URL, what
    follows the host, which an HTTP error may quote alone), the values of secret-looking reader
    options, and any password written into a URL."""
    values = [raw[name] for name in SECRET_PARAMS if raw[name]]
    values += [v.split("://", 1)[-1].partition("/")[2] for v in values]
    values += [str(v) for k, v in source_options.items() if SECRET_OPTION.search(k)]
    values += [m for v in raw.values() if isinstance(v, str) for m in URL_PASSWORD.findall(v)]
    values += argv_secrets(argv)
    return tuple(sorted({v for v in values if v}, key=len, reverse=True))


def parse_params(argv):
    """Validate every parameter up front: bad input must fail before anything is written."""
    raw, glue, glue_args = read_raw_args(argv)
    status = parse_bool("status", raw["status"])
    cleanup_days = None
    if raw["cleanup_branches_older_than_days"] is not None:
        cleanup_days = parse_number("cleanup_branches_older_than_days",
                                    raw["cleanup_branches_older_than_days"], float, 0)
    status = status or cleanup_days is not None  # table-only modes: no source is read
    for name in ("table",) if status else ("source_path", "table"):
        if not raw.get(name) or not str(raw[name]).strip():
            raise bad_input(f"--{name}: required")
    source_path = (raw["source_path"] or "").strip()
    new = str(raw["source_files"] or "").strip().lower() == "new"
    local = None if status else local_source(source_path)
    names = None if local is None else local_source_names(source_path, local, new)
    namespace, table_name = parse_table_name("table", raw["table"])
    runs_namespace, runs_name = (parse_table_name("runs_table", raw["runs_table"]) if raw["runs_table"]
                                 else (namespace, f"{table_name}_wap_runs"))
    source_files = (raw["source_files"] or "all").lower()
    if source_files not in ("all", "new"):
        raise bad_input(f"--source_files: expected all or new, got {source_files!r}")
    if source_files == "new" and "://" in source_path and GLOB_CHARACTERS & set(source_path):
        raise bad_input("--source_path: not a glob with --source_files new, which lists the files under "
                        "one folder or prefix")
    if source_files == "new" and raw["batch_id"]:
        raise bad_input("--batch_id: not with --source_files new, where each run's batch is its new "
                        "files (the batch id is their fingerprint)")
    if runs_namespace == namespace and runs_name in (table_name, f"{table_name}_quarantine"):
        raise bad_input(f"--runs_table: {runs_namespace}.{runs_name} is the table or its quarantine")
    catalog = check_identifier("--catalog", raw["catalog"])
    catalog_type = raw["catalog_type"] or ("glue" if glue else "hadoop")
    if catalog_type not in ("glue", "hadoop"):
        raise bad_input(f"--catalog_type: expected glue or hadoop, got {catalog_type!r}")
    if catalog_type == "glue":
        check_glue_tables(namespace, table_name, runs_namespace, runs_name, bool(raw["runs_table"]))
    # on Glue a hadoop catalog's default ./warehouse would be on the driver, gone with the run
    warehouse = raw["warehouse"] or ("./warehouse" if catalog_type == "hadoop" and not glue else None)
    check_catalog_is_safe(catalog, catalog_type, warehouse)
    if catalog_type == "hadoop" and warehouse and "://" not in warehouse:
        warehouse = os.path.abspath(warehouse)
    source_format = (raw["source_format"] or ("csv" if status else infer_format(source_path, names, new))).lower()
    if source_format not in SOURCE_FORMATS:
        raise bad_input(f"--source_format: expected one of {', '.join(SOURCE_FORMATS)}, "
                        f"got {source_format!r}")
    source_options = parse_json_param("source_options", raw["source_options"] or "{}", dict)
    for key, value in source_options.items():
        if key.lower() == "path":  # Spark refuses a load with both
            raise bad_input("--source_options: no 'path' option: the source is --source_path")
        if not isinstance(value, (str, int, float, bool)):
            raise bad_input(f"--source_options: option {key!r} must be a string, number or boolean")
    reference_tables = parse_reference_tables(raw["reference_tables"] or "{}")
    source_schema = (raw["source_schema"] or "auto").lower()
    if source_schema not in ("auto", "infer", "table"):
        raise bad_input(f"--source_schema: expected auto, infer or table, got {source_schema!r}")
    batch_id = raw["batch_id"]
    if batch_id is not None and not BATCH_ID.match(batch_id):
        raise bad_input(f"--batch_id: {batch_id!r} is not allowed (1-128 of letters, digits and "
                        "_ . : + = @ -, starting with a letter or digit)")
    partition_by = [c.strip() for c in (raw["partition_by"] or "").split(",") if c.strip()]
    twice = [c for c, n in Counter(c.lower() for c in partition_by).items() if n > 1]
    if twice:
        raise bad_input(f"--partition_by: column {twice[0]!r} given twice")
    mode = (raw["mode"] or "append").lower()
    if mode not in MODES:
        raise bad_input(f"--mode: expected one of {', '.join(MODES)}, got {mode!r}")
    merge_keys = [c.strip() for c in (raw["merge_keys"] or "").split(",") if c.strip()]
    if mode == "merge" and not merge_keys:
        raise bad_input("--merge_keys: required with --mode merge")
    if mode != "merge" and (merge_keys or raw["delete_condition"]):
        raise bad_input("--merge_keys/--delete_condition: only with --mode merge")
    alert_on = [x.strip() for x in (raw["alert_on"] or "").split(",") if x.strip()]
    unknown = sorted(set(alert_on) - set(STATUSES))
    if unknown:
        raise bad_input(f"--alert_on: unknown status {', '.join(unknown)}; known: {', '.join(STATUSES)}")
    slack = raw["slack_webhook_url"]
    if slack and not re.match(r"^https?://[^/\s?#]+", slack):
        raise bad_input("--slack_webhook_url: expected an http(s):// URL")
    if raw["sns_topic_arn"] and not re.fullmatch(r"arn:aws[\w-]*:sns:[\w-]+:\d{12}:[\w.-]+", raw["sns_topic_arn"]):
        raise bad_input("--sns_topic_arn: expected an SNS topic ARN, arn:aws:sns:<region>:<account>:<topic>")
    audit_source = (raw["audit_source"] or "branch").lower()
    if audit_source not in ("branch", "write"):
        raise bad_input(f"--audit_source: expected branch or write, got {audit_source!r}")
    schema_evolution = (raw["schema_evolution"] or "fail").lower()
    if schema_evolution not in ("fail", "add_columns"):
        raise bad_input(f"--schema_evolution: expected fail or add_columns, got {schema_evolution!r}")
    retention = parse_number("branch_retention_days", raw["branch_retention_days"], int, 1, 36500)
    retries = parse_number("max_publish_retries", raw["max_publish_retries"], int, 0, 100)
    suggest_format = (raw["suggest_format"] or "json").lower()
    if suggest_format not in ("json", "dqdl"):
        raise bad_input(f"--suggest_format: expected json or dqdl, got {suggest_format!r}")
    if parse_bool("dry_run", raw["dry_run"]) and (status or parse_bool("suggest_checks", raw["suggest_checks"])):
        raise bad_input("--dry_run: only for a run (--status, --cleanup_branches_older_than_days and "
                        "--suggest_checks write no data anyway, or act at once)")
    if raw["html"] and not status:
        raise bad_input("--html: only with --status (a run writes its page beside --report_path)")
    return Params(
        source_path=source_path, table=f"{namespace}.{table_name}", namespace=namespace,
        table_name=table_name, catalog=catalog, catalog_type=catalog_type, warehouse=warehouse,
        source_format=source_format, source_options=source_options, source_schema=source_schema,
        source_files=source_files, runs_namespace=runs_namespace, runs_name=runs_name,
        checks=load_checks_param(raw["checks"]), batch_id=batch_id, mode=mode,
        merge_keys=merge_keys, delete_condition=raw["delete_condition"],
        schema_evolution=schema_evolution, audit_source=audit_source,
        publish=parse_bool("publish", raw["publish"]), report_path=raw["report_path"],
        partition_by=partition_by, iceberg_jar=raw["iceberg_jar"],
        sns_topic_arn=raw["sns_topic_arn"], slack_webhook_url=slack, alert_on=alert_on,
        cloudwatch_namespace=raw["cloudwatch_namespace"], event_bus_name=raw["event_bus_name"],
        branch_retention_days=retention, max_publish_retries=retries, cleanup_days=cleanup_days,
        status=status and cleanup_days is None, html=raw["html"],
        suggest_checks=parse_bool("suggest_checks", raw["suggest_checks"]), suggest_format=suggest_format,
        dry_run=parse_bool("dry_run", raw["dry_run"]), on_glue=glue, glue_args=glue_args, secrets=find_secrets(raw, source_options, argv),
        reference_tables=reference_tables)


# =================================================================================================
# Checks: the spec, validated before anything runs
# =================================================================================================

# The kinds of check, each a metric and a condition on it, live in one table, KINDS (in the Audit
# section, beside how each is measured): their parameters, what they read besides the staged rows,
# and whether they decide per row (those are evaluated together in one aggregation and can `drop`).
COMMON_PARAMS = {"check", "name", "action", "max_failing_rows", "max_failing_fraction", "where",
                 "threshold", "labels", "dqdl"}
# "record" measures a metric for the ledger (its history) with no verdict: it never fails or warns.
RECORD = "record"
ACTIONS = ("fail", "warn", "drop", RECORD)


@dataclass(frozen=True)
class Stat:
    """A statistic (a metric of a column's values): `aggregate(F, value, number, check)`, its
    aggregate in the shared pass over the values in scope (as they are, and as doubles), then
    `final(that value, rows in scope)`; or, `grouped`, read off one grouping of the column's
    values (groups, rows in scope), shared by every grouped statistic of the same columns. It
    takes `columns` columns (0: the table's, "1+": one or more), of a type it `needs`, and an
    `approximate` one says so in the report. Adding a statistic is one entry of STATS."""
    aggregate: object = None
    final: object = None
    grouped: object = None
    columns: object = 1
    needs: str = None  # "numeric", "string"
    approximate: bool = False


def null_count(F, value, number, c):
    return F.sum((in_scope(c) & col(c.column).isNull()).cast("long"))


def share(n, rows):
    return (n or 0) / rows if rows else None


STATS = {
    "mean": Stat(lambda F, v, n, c: F.avg(n), needs="numeric"),
    "stddev": Stat(lambda F, v, n, c: F.stddev_samp(n), needs="numeric"),
    "stddev_pop": Stat(lambda F, v, n, c: F.stddev_pop(n), needs="numeric"),
    "sum": Stat(lambda F, v, n, c: F.sum(v), needs="numeric"),
    "min": Stat(lambda F, v, n, c: F.min(v), needs="numeric"),
    "max": Stat(lambda F, v, n, c: F.max(v), needs="numeric"),
    "median": Stat(lambda F, v, n, c: F.percentile_approx(n, 0.5, PERCENTILE_ACCURACY), needs="numeric",
                   approximate=True),
    "quantile": Stat(lambda F, v, n, c: F.percentile_approx(n, c.q, PERCENTILE_ACCURACY), needs="numeric",
                     approximate=True),
    "distinct_count": Stat(grouped=lambda g, rows: g["values"], columns="1+"),
    "null_fraction": Stat(null_count, final=share),
    "completeness": Stat(null_count, final=lambda n, rows: None if share(n, rows) is None else 1 - share(n, rows)),
    "min_length": Stat(lambda F, v, n, c: F.min(F.length(v)), needs="string"),
    "max_length": Stat(lambda F, v, n, c: F.max(F.length(v)), needs="string"),
    "unique_fraction": Stat(grouped=lambda g, rows: share(g["once"], g["rows"]), columns="1+"),
    "variance": Stat(lambda F, v, n, c: F.var_pop(n), needs="numeric"),  # population, as Glue's StandardDeviation
    "entropy": Stat(grouped=lambda g, rows: g["entropy"], columns="1+"),
    "unique_value_ratio": Stat(grouped=lambda g, rows: share(g["once"], g["values"]), columns="1+"),
    "correlation": Stat(lambda F, v, n, c: F.corr(n, (F.when(in_scope(c), col(c.columns[1])) if c.where
                                                      else col(c.columns[1])).cast("double")),
                        columns=2, needs="numeric"),
    "column_count": Stat(columns=0),  # the staged rows' columns, counted by the audit
}
NO_STAT = Stat(columns=0)  # what a check without a column statistic has (an anomaly's row_count or sql)


def stat_of(c):
    return STATS.get(c.stat, NO_STAT)


# A condition on a measured value (DQDL's model): between is exclusive, as DQDL's is; the
# values are numbers (two for between, a list for in).
COMPARATORS = {"=": lambda x, v: x == v[0], "!=": lambda x, v: x != v[0],
               ">": lambda x, v: x > v[0], ">=": lambda x, v: x >= v[0],
               "<": lambda x, v: x < v[0], "<=": lambda x, v: x <= v[0],
               "between": lambda x, v: min(v) < x < max(v),  # the ends either way round (_in_order)
               "not between": lambda x, v: not min(v) < x < max(v),
               "in": lambda x, v: x in v, "not in": lambda x, v: x not in v}


@dataclass
class Condition:
    """`op` over `values`, e.g. != [100], not between [0.5, 0.8], in [1, 2]. A value may be
    dynamic: an expression over the metric's history (a tree from parse_dynamic), evaluated by
    the audit against the run ledger before the condition is tested."""
    op: str
    values: list

    @property
    def dynamic(self):
        return any(isinstance(v, tuple) for v in self.values)

    def holds(self, x):
        return not (isinstance(x, float) and math.isnan(x)) and COMPARATORS[self.op](x, self.values)

    def __str__(self):
        v = [f"{x:g}" if isinstance(x, float) else str(x) for x in self.values]
        return (f"{self.op} {v[0]} and {v[1]}" if "between" in self.op else
                f"{self.op} [{', '.join(v)}]" if self.op.endswith("in") else f"{self.op} {v[0]}")


def wrong_arity(value):
    """Why a condition's op has too many or too few values (between: two, in: any, else one)."""
    arity = 2 if "between" in value["op"] else None if value["op"].endswith("in") else 1
    if arity and len(value["values"]) != arity:
        return f"{value['op']} takes {arity} value{'s' if arity > 1 else ''}"
    return None


def condition_shaped(value, valid):
    """True if a JSON condition is {"op": a comparator, "values": a non-empty list of valid values}."""
    return (isinstance(value, dict) and set(value) == {"op", "values"} and isinstance(value["op"], str)
            and value["op"] in COMPARATORS and isinstance(value["values"], list) and value["values"]
            and all(valid(v) for v in value["values"]))


def parse_condition(value, what):
    """A condition from its JSON form {"op": "!=", "values": [100]}, or a message saying why not."""
    if not condition_shaped(value, lambda v: is_literal_number(v) or isinstance(v, str)):
        return None, (f"{what} must be {{\"op\": one of {', '.join(COMPARATORS)}, "
                      "\"values\": [numbers or dynamic values such as \"avg(last(10)) * 0.8\"]}")
    if wrong_arity(value):
        return None, f"{what} {wrong_arity(value)}"
    try:
        values = [parse_dynamic(v) if isinstance(v, str) else v for v in value["values"]]
    except DqdlError as e:
        return None, f"{what}: a value, at column {e.col}: {e.reason}"
    values = [v[1] if isinstance(v, tuple) and v[0] == "num" else v for v in values]
    return Condition(value["op"], values), None


@dataclass
class Check:
    """One declarative expectation: a name, what to test, and what to do when it fails."""
    name: str
    check: str
    action: str = "fail"
    column: str = None
    columns: list = None
    min: object = None
    max: object = None
    min_exclusive: bool = False
    max_exclusive: bool = False
    allow_null: bool = True  # between, accepted_values, regex: NULL passes unless false
    values: list = None
    pattern: str = None
    expr: str = None
    where: str = None  # the check applies to the rows meeting this condition only
    max_age_hours: float = None
    min_ratio: float = None
    max_ratio: float = None
    lookback: int = 5
    schema: dict = None
    stat: str = None  # stat, anomaly: which statistic ("row_count" for an anomaly on rows)
    q: float = None
    to_table: str = None
    to_columns: list = None
    query: str = None
    metric: str = None  # anomaly: the ledger key of its metric
    min_history: int = 3
    max_deviations: float = 3.0
    max_failing_rows: int = None
    max_failing_fraction: float = None
    condition: Condition = None  # row_count, stat, sql: instead of min/max
    threshold: Condition = None  # row checks: on the share of rows that pass
    labels: dict = None  # carried into the report as given
    dqdl: str = None  # the DQDL rule text it was read from, for Glue-shaped results
    op: str = None  # composite: "and" or "or" over its `rules`
    rules: list = None  # composite: its checks, each audited over the whole batch
    reference: str = None  # a reference dataset as written: an --reference_tables alias or namespace.table
    aggregates: list = None  # aggregate_match: its two Aggregates, the ratio's numerator first
    match_columns: list = None  # dataset_match: the batch's columns compared (default: all but the keys)
    to_match_columns: list = None  # dataset_match: the reference's, paired with match_columns
    path: str = None  # file rules: the files at or under this location (else the batch's own)
    compare_path: str = None  # file_match: the files whose contents must match these
    algorithm: str = None  # file_match: the checksums' hash algorithm
    select: "FileSelection" = None  # file rules: which of the files they read (newest, path regex)
    match_file_name: bool = False  # file_match with compare_path: files paired by name, not content only
    on_share: bool = False  # relationship with a condition (or recorded): judged on the share of rows with a match
    time_zone: str = None  # file_freshness: the zone its times of day are in (default UTC; dates stay UTC)
    reads_tables: bool = False  # its row condition (expr, where) holds a subquery: found at validation

    @property
    def row_level(self):
        return self.check in ROW_CHECKS

    @property
    def keyed(self):
        return self.check in ("unique", "primary_key")

    @property
    def reads_state(self):
        """Its verdict depends on more than the staged rows: on main, another table or the ledger
        (its kind's reads, a subquery in its condition, or a dynamic condition's history), or a
        composite's rule does."""
        return any(KINDS[c.check].reads is not None or c.reads_tables or c.reads_metrics
                   for c in leaf_checks([self]))

    @property
    def reads_history(self):
        """Its verdict compares the batch with earlier publishes the run ledger records (`volume`,
        or metrics: reads_metrics), or a composite's rule does."""
        return any(KINDS[c.check].reads == LEDGER_READS or c.reads_metrics for c in leaf_checks([self]))

    @property
    def history_depth(self):
        """The most published runs its verdict reads from the ledger (0: none), a composite's
        rules' included: how far back a run's bounded read of the ledger must reach."""
        depth = 0
        for c in leaf_checks([self]):
            if KINDS[c.check].reads == LEDGER_READS:
                depth = max(depth, c.lookback)
            if c.condition is not None and c.condition.dynamic:
                depth = max([depth] + [history_runs(v) for v in c.condition.values if isinstance(v, tuple)])
        return depth

    @property
    def reads_metrics(self):
        """Its verdict compares the batch with metrics the ledger recorded for earlier publishes:
        an anomaly, or a dynamic condition (`> avg(last(10))`), or a composite's rule does."""
        return any(c.check == "anomaly" or (c.condition is not None and c.condition.dynamic)
                   for c in leaf_checks([self]))

    @property
    def measures(self):
        """stat and anomaly checks compute a statistic of the batch in the row pass (not a count of
        rows or columns, not one grouped)."""
        return self.check in ("stat", "anomaly") and stat_of(self).aggregate is not None


def is_number(value):
    """A finite number (not a bool); Python compares any int exactly."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return isinstance(value, int) or math.isfinite(value)


class Written(float):
    """A number with a fraction, as a float that keeps the digits it was written with (a check's
    bound beside a decimal column compares by them: 0.999999999999999999 is no double)."""

    def __new__(cls, text):
        number = super().__new__(cls, text)
        number.text = str(text)
        return number


MAX_LOOKBACK = 10_000  # published runs a volume or anomaly check compares with


def is_literal_number(value):
    """A number Spark can hold as a literal: a finite float, or an int within a 64-bit long."""
    return is_number(value) and (not isinstance(value, int) or -2 ** 63 <= value < 2 ** 63)


def is_count(value, minimum=0):
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def is_share(value):
    return is_number(value) and 0 <= value <= 1


def is_bool(value):
    return isinstance(value, bool)


def is_text(value):
    return isinstance(value, str) and bool(value.strip())


@dataclass
class Spec:
    """One check's JSON while it is parsed: `need` raises the one-line error naming the check."""
    spec: dict
    label: str
    check: Check = None

    def need(self, ok, message):
        if not ok:
            raise bad_input(f"{self.label}: {message}")

    def names(self, key, one_key):
        cols = self.spec.get(key, [self.spec[one_key]] if one_key in self.spec else None)
        self.need(isinstance(cols, list) and cols and all(isinstance(x, str) and x for x in cols),
                  f"{key} must be a non-empty list of column names")
        return cols

    def bounds(self, kinds_ok, what, dynamic=True):
        """min/max (exclusive where asked), or a condition; none for a metric only recorded.
        `dynamic`: whether the values may be dynamic (a metric with a history in the ledger)."""
        spec, c = self.spec, self.check
        if c.action == RECORD:
            self.need(not (BOUNDS | {"condition"}) & spec.keys(), "a recorded metric takes no condition, min or max")
            return
        if "condition" in spec:
            self.need(not {"min", "max", "min_exclusive", "max_exclusive"} & spec.keys(),
                      "give a condition or min/max, not both")
            c.condition, message = parse_condition(spec["condition"], "condition")
            self.need(c.condition is not None, message)
            self.need(all(kinds_ok(v) for v in c.condition.values if not isinstance(v, tuple)),
                      f"condition values must be {what}")
            self.need(dynamic or not c.condition.dynamic, f"condition values must be {what}, not dynamic")
            return
        self.need("min" in spec or "max" in spec, "needs min and/or max")
        for bound in ("min", "max"):
            if bound in spec:
                self.need(kinds_ok(spec[bound]), f"{bound} must be {what}")
                setattr(c, bound, spec[bound])
        for flag in ("min_exclusive", "max_exclusive"):
            self.take(flag, is_bool, "true or false")

    def lookback(self, default):
        value = self.spec.get("lookback", default)
        self.need(is_count(value, 1) and value <= MAX_LOOKBACK,
                  f"lookback must be a whole number from 1 to {MAX_LOOKBACK}")
        return value

    def take(self, key, ok, what):
        """spec[key] onto the check, if given: `ok(value)`, or the error "<key> must be <what>"."""
        if key in self.spec:
            self.need(ok(self.spec[key]), f"{key} must be {what}")
            setattr(self.check, key, self.spec[key])

    def text(self, key, what):
        self.need(isinstance(self.spec[key], str) and self.spec[key].strip(), f"{key} must be {what}")
        return self.spec[key]


# ----- each kind's own parameters (KINDS names the parser of each) ----------------------------------

def parse_column_only(s):
    """not_null, column_exists: the column is all (read by the common part)."""


def parse_keys(s):
    s.check.columns = s.names("columns", "column")


def parse_between(s):
    s.bounds(lambda v: is_literal_number(v) or isinstance(v, str), "a number (within a 64-bit long) or string")


def parse_row_count(s):
    s.bounds(is_count, "a whole number >= 0")


def parse_accepted_values(s):
    values = s.spec["values"]
    s.need(isinstance(values, list) and values
           and all(v is None or isinstance(v, (str, bool)) or is_literal_number(v) for v in values),
           "values must be a non-empty list of strings, numbers or booleans")
    s.check.values = values


def parse_pattern(s):
    s.take("pattern", lambda v: isinstance(v, str) and v, "a string")


def parse_expression(s):
    s.check.expr = s.text("expr", "a SQL condition")


def parse_schema(s):
    columns = s.spec["columns"]
    s.need(isinstance(columns, dict) and columns
           and all(isinstance(k, str) and isinstance(v, str) for k, v in columns.items()),
           "columns must be an object of column name -> Spark SQL type")
    s.check.schema = columns


def parse_freshness(s):
    s.take("max_age_hours", lambda v: is_number(v) and v > 0, "a number > 0")


def parse_volume(s):
    s.need("min_ratio" in s.spec or "max_ratio" in s.spec, "needs min_ratio and/or max_ratio")
    for key in ("min_ratio", "max_ratio"):
        s.take(key, lambda v: is_number(v) and v >= 0, "a number >= 0")
    s.check.lookback = s.lookback(5)


def parse_relationship(s):
    c, spec = s.check, s.spec
    c.columns = s.names("columns", "column")
    c.to_columns = s.names("to_columns", "to_column") if {"to_columns", "to_column"} & spec.keys() \
        else list(c.columns)
    s.need(len(c.to_columns) == len(c.columns), "to_columns must pair with columns one to one")
    s.need(isinstance(spec["to_table"], str), "to_table must be namespace.table or an alias")
    name = reference_name(s, "to_table", spec["to_table"])  # an alias, as Glue's "reference.col"
    c.to_table, c.reference = (name, None) if "." in name else (None, name)
    if "condition" in spec or c.action == RECORD:  # on the share of rows with a match (DQDL's value)
        s.need(not {"threshold", "max_failing_rows", "max_failing_fraction"} & spec.keys(),
               "give a condition (on the share of rows with a match) or a threshold, not both")
        s.bounds(lambda v: is_number(v) and 0 <= v <= 1, "shares from 0 to 1")
        s.need(c.condition is None or all(_reads_history(v) for v in c.condition.values if isinstance(v, tuple)),
               "condition values must be shares from 0 to 1 or values over the history (avg(last(10)))")
        c.on_share = True  # a condition left without a value for want of history passes, as a stat's does


@dataclass
class Aggregate:
    """One side of an aggregate_match: sum or avg of a column of the batch, or of a reference
    (`reference` as written, `table` the namespace.table it resolves to)."""
    func: str
    column: str
    reference: str = None
    table: str = None

    def __str__(self):
        return f"{self.func}({self.reference + '.' if self.reference else ''}{self.column})"


AGGREGATE = re.compile(r"(?i)(sum|avg)\(\s*(?:([^.()]+(?:\.[^.()]+)?)\.)?([^.()]+?)\s*\)")


def reference_name(s, what, name):
    """An alias or namespace.table, as a rule writes it; resolved later."""
    if "." in name:
        return ".".join(parse_table_name(f"{s.label}: {what}", name))
    return check_alias(f"{s.label}: {what}", name)


def parse_reference(s):
    """row_count_match, schema_match: the reference and a condition on the share."""
    s.check.reference = reference_name(s, "reference", s.text("reference", "an alias or namespace.table"))
    s.bounds(is_number, "a number")


def parse_aggregate_match(s):
    aggregates = s.spec["aggregates"]
    s.need(isinstance(aggregates, list) and len(aggregates) == 2 and all(isinstance(x, str) for x in aggregates),
           'aggregates must be two expressions such as ["sum(amount)", "sum(ref.total)"]')
    s.check.aggregates = [parse_aggregate(s, text) for text in aggregates]
    s.bounds(is_number, "a number")


def parse_aggregate(s, text):
    m = AGGREGATE.fullmatch(text.strip())
    s.need(m, f"cannot read aggregate {text!r}: expected sum(column) or avg(column), the column "
              "qualified by a reference (alias.column, namespace.table.column) if it is not the batch's")
    reference = reference_name(s, "aggregate reference", m[2].strip()) if m[2] else None
    return Aggregate(m[1].lower(), m[3].strip(), reference)


def parse_dataset_match(s):
    """The key columns pair the batch's rows with the reference's; the match columns compare them."""
    c, spec = s.check, s.spec
    c.reference = reference_name(s, "reference", s.text("reference", "an alias or namespace.table"))
    c.columns = s.names("columns", "columns")
    c.to_columns = s.names("to_columns", "to_columns") if "to_columns" in spec else list(c.columns)
    s.need(len(c.to_columns) == len(c.columns), "to_columns must pair with columns one to one")
    if "match_columns" in spec:
        c.match_columns = s.names("match_columns", "match_columns")
        c.to_match_columns = (s.names("to_match_columns", "to_match_columns") if "to_match_columns" in spec
                              else list(c.match_columns))
        s.need(len(c.to_match_columns) == len(c.match_columns), "to_match_columns must pair with match_columns")
    s.need("to_match_columns" not in spec or "match_columns" in spec, "to_match_columns goes with match_columns")
    s.bounds(is_number, "a number")


def resolve_references(checks, aliases):
    """Each reference a check names, as namespace.table: an alias from --reference_tables, or the
    table named. An unknown alias is bad input before anything runs."""
    for c in leaf_checks(checks):
        if c.reference:
            c.to_table = resolve_reference(c, c.reference, aliases)
        for agg in c.aggregates or ():
            if agg.reference:
                agg.table = resolve_reference(c, agg.reference, aliases)


def resolve_reference(c, name, aliases):
    if "." in name:
        return name
    if name not in aliases:
        known = ", ".join(sorted(aliases)) or "none"
        raise bad_input(f"check {c.name!r}: unknown reference alias {name!r} (--reference_tables "
                        f"maps {known}); name a table as namespace.table or map the alias")
    return aliases[name]


def tables_read(c):
    """namespace.table of every other table a check (or a composite's rules) reads."""
    if c.rules:
        return [t for r in c.rules for t in tables_read(r)]
    return [c.to_table] if c.to_table else [a.table for a in c.aggregates or () if a.table]


def parse_anomaly(s):
    c = s.check
    c.metric = s.spec["metric"]
    stat, _, column = str(c.metric).partition(":")
    s.need(isinstance(c.metric, str) and (c.metric in ("row_count", "column_count", "sql") or stat in STATS and column),
           f"metric must be row_count, column_count, sql (with query) or <stat>:<column> with a stat of "
           f"{', '.join(STATS)}")
    s.need(not (column and STATS.get(stat, NO_STAT).columns == 0), f"metric {stat} takes no column")
    s.need((c.metric == "sql") == ("query" in s.spec), "query goes with metric sql, and only with it")
    if c.metric == "sql":
        c.query = s.text("query", "a SQL query")
        s.need(not c.where, "where does not apply to metric sql: put the condition in the query")
    c.stat, c.column = (stat, column) if column else (c.metric, None)
    if stat_of(c).columns == 2:  # correlation:a,b
        c.columns = column.split(",")
        s.need(len(c.columns) == 2 and all(c.columns), f"metric {c.stat} names two columns: {c.stat}:a,b")
        c.column = c.columns[0]
    s.need(c.stat != "quantile", "metric: use median (quantile needs q)")
    c.lookback = s.lookback(10)
    s.take("min_history", lambda v: is_count(v, 1), "a whole number >= 1")
    s.take("max_deviations", lambda v: is_number(v) and v > 0, "a number > 0")


def parse_composite(s):
    s.need(s.spec["op"] in ("and", "or"), "op must be and or or")
    s.need(isinstance(s.spec["rules"], list) and len(s.spec["rules"]) >= 2, "rules must list two or more checks")
    s.check.op, s.check.rules = s.spec["op"], [parse_check(r, i) for i, r in enumerate(s.spec["rules"])]
    s.need(all(r.action == "fail" for r in s.check.rules), "the rules of a composite take no action")


def parse_sql(s):
    s.bounds(is_number, "a number")
    s.check.query = s.text("query", "a SQL query")


def parse_sql_rows(s):
    """query: the batch's rows that pass, as the columns of {batch} it returns."""
    s.check.query = s.text("query", "a SQL query")


def parse_stat(s):
    c, spec = s.check, s.spec
    s.bounds(is_number, "a number")
    c.stat = spec["stat"]
    s.need(isinstance(c.stat, str) and c.stat in STATS,
           f"stat must be one of {', '.join(STATS)}, got {c.stat!r}")
    arity = STATS[c.stat].columns
    s.need(not ({"column", "columns"} <= spec.keys()), "give column or columns, not both")
    if arity == 0:
        s.need(not {"column", "columns"} & spec.keys(), f"{c.stat} takes no column")
    elif "columns" in spec:
        c.columns = s.names("columns", "column")
        s.need(arity == "1+" or len(c.columns) == arity, f"{c.stat} takes {arity} columns")
        c.column = c.columns[0]
    else:
        s.need(arity in (1, "1+"), f"{c.stat} takes {arity} columns")
        s.need("column" in spec, "missing parameter column")
    s.need((c.stat == "quantile") == ("q" in spec), "q (0..1) goes with stat quantile, and only with it")
    s.take("q", is_share, "a number from 0 to 1")


def parse_profile(s):
    """profile: the column's statistics, recorded only (DQDL's AllStatistics)."""
    s.need(s.check.action == RECORD, "a profile is recorded only: action record")


# ----- file rules: the batch's source files, or those at a location ---------------------------------

# The rules judged file by file: a threshold is on the share of files that pass.
PER_FILE_KINDS = ("file_freshness", "file_size")
HASH_ALGORITHMS = {"MD5": "md5", "SHA-1": "sha1", "SHA-256": "sha256"}
SIZE_UNITS = {"B": 1, "KB": 1024, "MB": 1024 ** 2, "GB": 1024 ** 3, "TB": 1024 ** 4}
TIME_UNITS = {"minutes": 60, "hours": 3600, "days": 86400}
# now(), now() - 24 hours, 2024-01-31, 2024-01-31 10:00[:00], 21:45, 9:30 PM (UTC)
_NOW = re.compile(r"now\(\)(?:\s*([+-])\s*(\d+)\s*(minutes|hours|days))?")
_TIME_OF_DAY = re.compile(r"(\d{1,2}):(\d{2})(?:\s*([AaPp][Mm]))?")


def location(path):
    """A location as the batch's files are spelled (normalize_path); a local one made absolute.
    Another scheme stays as written (s3:/bucket with one slash too), for the caller to refuse."""
    if path[:5].lower() == "s3://":  # a scheme is case-insensitive (Glue's own examples: "S3://...")
        path = "s3://" + path[5:]
    if "://" not in path and not path.startswith("file:") and not re.match(r"[A-Za-z][\w+.-]*:/", path):
        path = "file://" + os.path.abspath(path) + ("/" if path.endswith("/") else "")
    return normalize_path(path)


def parse_file_path(s, key="path"):
    """path (optional): a file or folder, local or s3:// (the file rules read no other); and which
    of its files: recent_files (the newest n), uri_regex (paths it finds), filter_order."""
    if key in s.spec:
        path = location(s.text(key, "a file or folder path"))
        s.need(path.startswith(("file:", "s3://")), f"{key} must be a local path or s3://bucket/key")
        setattr(s.check, key, path)
    if key != "path" or not FILE_SELECTION & s.spec.keys():
        return
    recent, regex = s.spec.get("recent_files"), s.spec.get("uri_regex")
    order = s.spec.get("filter_order", list(FILE_SELECTION_ORDER))
    s.need(recent is None or is_count(recent, 1), "recent_files must be a whole number >= 1")
    s.need(regex is None or isinstance(regex, str) and regex, "uri_regex must be a regular expression")
    try:
        re.compile(regex or "")
    except re.error as e:
        s.need(False, f"uri_regex {regex!r} is not a regular expression ({e})")
    s.need(isinstance(order, list) and all(isinstance(x, str) for x in order)
           and sorted(order) == sorted(FILE_SELECTION_ORDER),
           f"filter_order must list {' and '.join(FILE_SELECTION_ORDER)}, in the order to apply them")
    s.check.select = FileSelection(recent, regex, tuple(order))


FILE_SELECTION_ORDER = ("recent_files", "uri_regex")  # Glue's default order
FILE_SELECTION = {"recent_files", "uri_regex", "filter_order"}


@dataclass(frozen=True)
class FileSelection:
    """Which of a location's files a file rule reads: the `recent` newest, those whose path
    `uri_regex` finds (re.search), applied in `order`."""
    recent: int = None
    uri_regex: str = None
    order: tuple = FILE_SELECTION_ORDER

    def apply(self, files):
        for step in self.order:
            if step == "recent_files" and self.recent is not None:
                files = sorted(files, key=lambda f: (-f.modified, f.path))[:self.recent]
            elif step == "uri_regex" and self.uri_regex is not None:
                files = [f for f in files if re.search(self.uri_regex, f.path)]
        return files


def file_time(text, now, zone=None):
    """Epoch seconds of a time value, or None if it is not one; a time of day is today's in `zone`,
    a tzinfo (default UTC)."""
    zone = zone or timezone.utc
    text = text.strip()
    m = _NOW.fullmatch(text)
    if m:
        offset = int(m[2]) * TIME_UNITS[m[3]] if m[1] else 0
        return now - offset if m[1] == "-" else now + offset
    m = _TIME_OF_DAY.fullmatch(text)
    if m:
        hour, minute = int(m[1]), int(m[2])
        if m[3]:
            if not 1 <= hour <= 12:
                return None
            hour = hour % 12 + (12 if m[3].lower() == "pm" else 0)
        if hour > 23 or minute > 59:
            return None
        return datetime.fromtimestamp(now, zone).replace(hour=hour, minute=minute, second=0, microsecond=0).timestamp()
    if not _DATETIME.fullmatch(text):
        return None
    try:  # a date is UTC whatever the zone, as in Glue
        return datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp()
    except ValueError:
        return None


def parse_file_freshness(s):
    """condition: {"op", "values": [times]}: each file's modification time against them."""
    parse_file_path(s)
    value = s.spec["condition"]
    s.need(condition_shaped(value, lambda v: isinstance(v, str) and file_time(v, 0) is not None),
           "condition must be {\"op\": one of " + ", ".join(COMPARATORS) + ", \"values\": [times: "
           "\"now()\", \"now() - 24 hours\", \"2024-01-31\", \"2024-01-31 10:00\", \"21:45\", \"9:30 PM\"]}")
    s.need(not wrong_arity(value), f"condition {wrong_arity(value)}")
    s.check.condition = Condition(value["op"], list(value["values"]))
    if "time_zone" in s.spec:
        zone = s.spec["time_zone"]
        s.need(isinstance(zone, str) and time_zone(zone) is not None, "time_zone must be an IANA zone such as "
               f"\"America/New_York\" or an offset such as \"+05:30\", got {json.dumps(zone)}")
        s.check.time_zone = s.spec["time_zone"]


def time_zone(name):
    """The tzinfo of a zone as Java's ZoneId reads it (Glue's): an IANA region ("America/New_York",
    from the system's tz database) or a fixed offset ("+05:30", "UTC+3", "GMT-02:00"); None if none."""
    from zoneinfo import ZoneInfo
    m = re.fullmatch(r"(?:UTC|GMT|UT)?([+-])(\d{1,2})(?::?(\d{2}))?|(Z|UTC|GMT|UT)", name)
    if m:
        if m[4]:
            return timezone.utc
        offset = timedelta(hours=int(m[2]), minutes=int(m[3] or 0))
        return timezone(-offset if m[1] == "-" else offset) if offset <= timedelta(hours=18) else None
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)+|[A-Z][A-Za-z0-9]*", name) \
            or name.split("/")[0] in ("posix", "right"):  # copies of the database Java does not know
        return None
    try:
        return ZoneInfo(name)
    except (KeyError, ValueError, OSError):  # ZoneInfoNotFoundError is a KeyError
        return None


def parse_file_size(s):
    """min/max or a condition in bytes, on each file's size."""
    parse_file_path(s)
    s.bounds(is_count, "a whole number of bytes >= 0", dynamic=False)


def parse_file_uniqueness(s):
    """The share of files whose content no other file has: min/max or a condition (default: all)."""
    parse_file_path(s)
    if not (BOUNDS | {"condition"}) & s.spec.keys():
        s.check.min = 1
        return
    s.bounds(is_number, "a number")


def parse_file_match(s):
    """checksums (with algorithm, SHA-256 by default), or compare_path: files of the same contents."""
    c = s.check
    parse_file_path(s)
    s.need(("checksums" in s.spec) != ("compare_path" in s.spec), "give checksums or compare_path")
    if "compare_path" in s.spec:
        s.need("algorithm" not in s.spec, "algorithm goes with checksums")
        parse_file_path(s, "compare_path")
        s.take("match_file_name", is_bool, "true or false")
        return
    s.need("match_file_name" not in s.spec, "match_file_name goes with compare_path")
    sums = s.spec["checksums"]
    s.need(isinstance(sums, list) and sums and all(isinstance(x, str) and re.fullmatch(r"[0-9A-Fa-f]+", x)
                                                   for x in sums), "checksums must be a list of hex digests")
    c.values = [x.lower() for x in sums]
    c.algorithm = s.spec.get("algorithm", "SHA-256")
    s.need(isinstance(c.algorithm, str) and c.algorithm in HASH_ALGORITHMS,
           f"algorithm must be one of {', '.join(HASH_ALGORITHMS)}")


def parse_check(spec, index):
    """Turn one JSON object into a Check, or say precisely what is wrong with it: the parameters
    every check takes here, its kind's own in its parser."""
    if not isinstance(spec, dict):
        raise bad_input(f"check #{index + 1}: expected a JSON object, got {json.dumps(spec)}")
    kind = spec.get("check")
    s = Spec(spec, f"check #{index + 1} ({json.dumps(spec.get('name') or kind)})")
    if not isinstance(kind, str) or kind not in KINDS:
        raise bad_input(f"{s.label}: unknown check type {kind!r}; known: {', '.join(KINDS)}")
    try:
        return parse_kind(s, kind)
    except (TypeError, AttributeError) as e:  # a value of a type no parser expects there
        raise bad_input(f"{s.label}: a parameter has the wrong type ({first_line(e)})") from None
    except RecursionError:
        raise bad_input(f"{s.label}: nested more than Python can follow") from None


def parse_kind(s, kind):
    """The check of a known kind: the parameters every check takes, then its kind's own."""
    spec = s.spec
    required, optional = KINDS[kind].params
    missing = sorted(required - spec.keys())
    s.need(not missing, f"missing parameter {', '.join(missing)}")
    unknown = sorted(spec.keys() - required - optional - COMMON_PARAMS)
    s.need(not unknown, f"unknown parameter {', '.join(unknown)}")
    need = s.need
    action = spec.get("action", "fail")
    need(action in ACTIONS, f"action must be one of {', '.join(ACTIONS)}, got {action!r}")
    need(action != "drop" or kind in ROW_CHECKS,
         f"action drop needs a row-level check ({', '.join(ROW_CHECKS)}), not {kind}")
    need(action != RECORD or KINDS[kind].records,
         f"action record needs a metric ({', '.join(k for k in KINDS if KINDS[k].records)}), not {kind}")
    c = s.check = Check(name="", check=kind, action=action)
    need("where" not in spec or KINDS[kind].where, f"where does not apply to {kind}")
    s.take("where", is_text, "a SQL condition")
    if kind not in ("unique", "primary_key", "relationship"):
        s.take("column", lambda v: isinstance(v, str) and v, "a column name")
    s.take("allow_null", is_bool, "true or false")
    KINDS[kind].parse(s)
    if "threshold" in spec:
        need(kind in THRESHOLD_KINDS, f"threshold applies to {', '.join(THRESHOLD_KINDS)}")
        c.threshold, message = parse_condition(spec["threshold"], "threshold")
        need(c.threshold is not None, message)
        need(not c.threshold.dynamic and all(0 <= v <= 1 for v in c.threshold.values),
             "a threshold takes numbers from 0 to 1 (the share of rows that pass)")
        need(not {"max_failing_rows", "max_failing_fraction"} & spec.keys(),
             "give a threshold or max_failing_rows/max_failing_fraction, not both")
    if "labels" in spec:
        need(isinstance(spec["labels"], dict)
             and all(isinstance(k, str) and isinstance(v, str) for k, v in spec["labels"].items()),
             "labels must be an object of string -> string")
        c.labels = dict(spec["labels"])
    s.take("dqdl", is_text, "DQDL rule text")
    s.take("max_failing_rows", is_count, "a whole number >= 0")
    s.take("max_failing_fraction", is_share, "a number from 0 to 1")
    name = spec.get("name")
    if name is not None:
        need(isinstance(name, str) and name.strip(), "name must be a non-empty string")
        c.name = name
    else:
        target = c.metric or c.column or "_".join(c.columns or [])
        c.name = f"{kind}_{target}" if target else kind
        if kind == "stat":
            c.name = "_".join([c.stat] + (c.columns or [c.column] if c.column else []))
    return c


def parse_checks(specs):
    """All checks of the run; names are made unique so the report can key on them."""
    checks = [parse_check(s, i) for i, s in enumerate(specs)]
    given = {s["name"] for s in specs if isinstance(s, dict) and isinstance(s.get("name"), str)}
    taken = set()
    for c, spec in zip(checks, specs):
        if c.name in taken:
            if "name" in spec:
                raise bad_input(f"check {c.name!r}: name used twice")
            c.name = unused_name(c.name, taken | given)
        taken.add(c.name)
        name_rules(c)
    return checks


def unused_name(base, taken):
    """base_2, base_3, ...: the first that no check has (nor is given to one)."""
    n = 2
    while f"{base}_{n}" in taken:
        n += 1
    return f"{base}_{n}"


def require_unique_names(checks):
    """Every check the audit keys its results on has a name of its own, after profiles expand and
    a merge adds its key check: one check's result can never stand for another's."""
    seen = set()
    for c in leaf_checks(checks) + [c for c in checks if c.rules]:
        if c.name in seen:
            raise bad_input(f"check {c.name!r}: name used twice (after profiles and composites are expanded)")
        seen.add(c.name)


def name_rules(c):
    """A composite's rules are named under it (#1, #1.2, ...), so every name is the run's own."""
    for i, r in enumerate(c.rules or [], 1):
        r.name = f"{c.name} #{i}: {r.name}"
        name_rules(r)


def leaf_checks(checks):
    """The checks that measure something: composites replaced by their rules, at any depth."""
    return [leaf for c in checks for leaf in (leaf_checks(c.rules) if c.rules else [c])]


def quote(identifier):
    """Quote an identifier for Spark SQL; backticks inside are doubled."""
    return "`" + identifier.replace("`", "``") + "`"


def col(name):
    from pyspark.sql import functions as F
    return F.col(quote(name))


def validate_checks_against(spark, checks, df, t):
    """Checks that name missing columns or tables, bad regexes, unparsable SQL or unknown types
    fail now, before anything is written: what every check names here, then what its kind needs
    (Kind.validate), then its query."""
    v = Validation(spark, df, t, {f.name.lower(): f.dataType for f in df.schema.fields})
    checks[:] = expand_profiles(checks, df)
    require_unique_names(checks)
    for c in leaf_checks(checks):
        label = f"check {c.name!r}"
        named = [] if c.check == "column_exists" else ([c.column] if c.column else []) + (c.columns or [])
        for name in named:
            if name.lower() not in v.types:
                raise bad_input(f"{label}: unknown column {name!r}; columns: {', '.join(df.columns)}")
        if c.where:
            c.reads_tables = check_condition(spark, df, f"{label}: where", c.where)
        if KINDS[c.check].validate:
            KINDS[c.check].validate(v, c, label)
        if c.query:
            valid_query(spark, c, label, df, t)
    try:
        if v.conditions:
            df.select(*[failing_rows_condition(c) for c, _ in v.conditions]).schema
    except Exception:
        for c, label in v.conditions:  # which one
            try:
                df.select(failing_rows_condition(c)).schema
            except Exception as e:
                raise bad_input(f"{label}: cannot apply to column {c.column!r}: "
                                f"{first_line(e)}") from None
        raise


def valid_query(spark, c, label, df, t):
    """A check's query, as it will run against the batch `df` (and a row-level one paired with it)."""
    main = spark.table(t.sql) if table_exists(spark, t) else df.limit(0)
    try:
        table = main.unionByName(df, allowMissingColumns=True)
    except Exception:  # types the table plan refuses: that error comes next, exit 2
        table = main
    with sql_views(spark, df, table, main) as views:
        returned = sql_query(spark, c, label, views, df.columns)
        if c.check == "sql_rows":
            try:
                [x.schema for x in unreturned_rows(df, returned)]
            except Exception as e:  # a map column cannot be compared, say
                raise bad_input(f"{label}: the query's rows cannot be paired with the batch's: {first_line(e)}") from None


def fit_staged_bounds(checks, staged):
    """Every between's and accepted_values' literals fitted to its column as staged (fit_bounds):
    `staged`, the batch as it will be staged (or the staged rows)."""
    from pyspark.sql import types as T
    types = {f.name.lower(): f.dataType for f in staged.schema.fields}
    fitted = [c for c in leaf_checks(checks) if c.check in ("between", "accepted_values")
              and not getattr(c, "fitted", False)]  # once: fitting a fitted float moves it
    for c in fitted:
        dtype = types[c.column.lower()]
        if isinstance(dtype, (T.ByteType, T.ShortType)):  # as Iceberg stores it (a new table or column)
            dtype = T.IntegerType()
        fit_bounds(c, dtype, f"check {c.name!r}")
        c.fitted = True  # (its literals are of the kinds validate_checks_against analysed: no second analysis)


def validate_staged_queries(spark, checks, plan, t):
    """A merge carries columns only its --delete_condition reads, which the staged rows (a query's
    {batch} at the audit, where a drop check reading a table is counted again) lack: its queries
    and those drop checks are validated again without them. Bounds are fitted to the staged types."""
    fit_staged_bounds(checks, plan.df)
    staged = plan.df.select(*[col(n) for n in plan.columns])
    if len(staged.columns) < len(plan.df.columns):
        for c in leaf_checks(checks):
            if c.query:
                valid_query(spark, c, f"check {c.name!r}", staged, t)
            if resplit(c):
                try:
                    staged.select(failing_rows_condition(c)).schema
                except Exception as e:
                    raise bad_input(f"check {c.name!r}: a drop check whose condition holds a subquery is "
                                    "counted again on the staged rows, which lack the columns only "
                                    f"--delete_condition reads ({first_line(e)})") from None


@dataclass
class Validation:
    """What checks are validated against: the batch (its columns' types by lower-case name) and
    the table; row conditions are gathered to be analysed together (one plan, not one a check)."""
    spark: object
    df: object
    t: object
    types: dict
    conditions: list = field(default_factory=list)

    def dtype(self, c):
        return self.types[c.column.lower()]


# ----- what each kind of check needs of the batch (KINDS names the validator of each) -----------

def valid_pattern(v, c, label):
    try:
        java(v.spark.sparkContext._jvm, "java.util.regex.Pattern").compile(c.pattern)
    except Exception as e:
        raise bad_input(f"{label}: invalid regex {c.pattern!r} ({first_line(e)})") from None


def valid_regex(v, c, label):
    valid_pattern(v, c, label)
    v.conditions.append((c, label))


def valid_bounds(v, c, label):
    """Bounds and values of the column's kind; how Spark compares them is fitted to the column's
    type as staged (fit_bounds, once the table's types are known)."""
    check_bound_types(c, label, v.dtype(c))
    v.conditions.append((c, label))


def fit_bounds(c, dtype, label):
    """A between's bounds and an accepted_values' values as Spark must compare them with the
    column as staged, the table's type (the batch's is cast to it), which the audit reads."""
    from pyspark.sql import types as T
    if c.check == "between" and isinstance(dtype, T.StringType):  # text read as a number: as a double
        c.min, c.max = (float(x) if is_number(x) and abs(x) < 2 ** 53 else x  # (an int bound casts it to int;
                        for x in (c.min, c.max))                              # a larger one stays exact, as a bigint)
    if isinstance(dtype, T.TimestampNTZType):  # Spark's cast to it drops an offset: an instant compared as a wall time
        zoned = [x for x in ([c.min, c.max] if c.check == "between" else c.values)
                 if isinstance(x, str) and ISO_TIMESTAMP.match(x) and ISO_TIMESTAMP.match(x)[4]]
        if zoned:
            raise bad_input(f"{label}: {json.dumps(zoned[0])} is not an ISO timestamp without an offset, as "
                            f"column {c.column!r} (timestamp_ntz, a wall-clock time) needs")
    if c.check == "between" and isinstance(dtype, (T.TimestampType, T.TimestampNTZType)):
        c.min, c.max = (spark_timestamp_text(x) for x in (c.min, c.max))
    if isinstance(dtype, T.DecimalType):  # each bound is compared alone; a list, as one type
        if c.check == "between":
            c.min, c.max = (decimal_literals(dtype, [x])[0] for x in (c.min, c.max))
        else:
            c.values = decimal_literals(dtype, c.values)
    if isinstance(dtype, T.FloatType):  # 0.1 means the float 0.1, a little above the double 0.1
        if c.check == "between":
            c.min, c.max = (as_float32(x) for x in (c.min, c.max))
        else:
            c.values = [as_float32(x) for x in c.values]
    if c.check == "accepted_values" and isinstance(dtype, (T.IntegralType, T.FloatType)):
        # a value the column's type cannot hold equals none of its values (and Spark, leaving it
        # out of the IN, could push an empty IN into the scan, which fails)
        c.values = [x for x in c.values if not is_number(x) or type_holds(dtype, x)]
    if c.check == "accepted_values" and isinstance(dtype, (T.TimestampType, T.TimestampNTZType, T.DateType)):
        # Spark's IN compares a time with a string as text ("2024-01-01 00:00:00" is not
        # "2024-01-01"): the values are cast to the column's type instead (not part of the spec)
        c.values_as = dtype.simpleString()


def type_holds(dtype, x):
    """Whether an integral or float column's type can hold the number x exactly."""
    from pyspark.sql import types as T
    if isinstance(dtype, T.FloatType):
        return float32_of(x) == x
    bits = {T.ByteType: 8, T.ShortType: 16, T.IntegerType: 32, T.LongType: 64}[type(dtype)]
    exact = written_decimal(x)
    return exact == exact.to_integral_value() and -2 ** (bits - 1) <= exact < 2 ** (bits - 1)


def as_float32(x):
    """A number bound or value beside a float column, as a double Spark compares the column with
    exactly (it widens the column to double): the float whose shortest decimal form it is written
    as (0.1 equals the column's 0.1, a little above the double 0.1), or else the midpoint of the
    two floats around it, which every float compares with as with the number itself (Spark would
    round a whole number beside a float column to a float, 16777217 to 16777216, and a double
    may round onto a float; 1000000.05 is no float's form: 1000000.0625 is 1000000.06's)."""
    f = float32_of(x)
    if f is None:
        return x
    shortest = next(t for t in (f"{f:.{p}g}" for p in range(1, 10)) if float32_of(float(t)) == f)
    exact = written_decimal(x)
    if Decimal(shortest) == exact or Decimal(f) == exact:
        return f
    return (f + float32_step(f, 1 if Decimal(f) < exact else -1)) / 2  # exact: a float's 24 bits and one more


def float32_step(f, step):
    """The float next to the float f, up (step 1) or down (-1); past the largest, 2^128 (so a
    number between it and 2^128, which Python packs as the largest float, is not taken for it)."""
    bits = struct.unpack("<i", struct.pack("<f", f))[0]
    if f == 0:
        bits = 1 if step > 0 else -2 ** 31 + 1  # the smallest subnormals, either side of zero
    else:
        bits += step if f > 0 else -step
    out = struct.unpack("<f", struct.pack("<i", bits))[0]
    return out if math.isfinite(out) else math.copysign(2.0 ** 128, f)  # past the largest: as if one more


def written_decimal(x):
    """A number as the decimal it was written as (a DQDL number keeps its text; else its repr)."""
    return Decimal(getattr(x, "text", None) or repr(x)) if isinstance(x, float) else Decimal(x)


def float32_of(x):
    """The float nearest the number x, as a double; None for no number or none in range."""
    if not is_number(x):
        return None
    try:
        f = struct.unpack("<f", struct.pack("<f", x))[0]
    except OverflowError:
        return None
    return f if math.isfinite(f) else None


def decimal_literals(dtype, values):
    """Fractions beside a decimal column as the decimals they were written as: Spark would compare
    the column as a double (1.000000000000000001 is not above a bound of 1.0 there). Only where
    Spark's common type of the column and all of them holds every one; else doubles, whole
    numbers too (a value that does not fit the common type would compare as NULL: 10^18 beside
    decimal(38,20), whose common type keeps 18 whole digits)."""
    exact = [written_decimal(x) if isinstance(x, float) and math.isfinite(x) else x
             for x in values]
    exact = [Decimal(int(x)) if isinstance(x, Decimal) and x.as_tuple().exponent > 0 else x
             for x in exact]  # 1E+2 as 100: Spark takes no negative scale
    whole, scale = dtype.precision - dtype.scale, dtype.scale
    for x in exact:
        if isinstance(x, Decimal):
            _, digits, exponent = x.as_tuple()
            whole, scale = max(whole, len(digits) + exponent), max(scale, -exponent)
        elif is_number(x):  # a whole number: an int, decimal(10,0), or a bigint, decimal(20,0)
            whole = max(whole, 10 if -2 ** 31 <= x < 2 ** 31 else 20)
    # (a whole number a double cannot hold stays as it is: its rounding could pass a value past it)
    return exact if whole + scale <= 38 else [float(x) if is_number(x) and float(x) == x else x for x in values]


def not_accepted(F, c):
    """An accepted_values check's violation (NULL for a NULL value); with no value its column can
    hold left, every value."""
    values = accepted_literals(F, c)
    return ~col(c.column).isin(values) if values else F.lit(True)


def accepted_literals(F, c):
    """An accepted_values check's values as Spark compares them with its column."""
    values = [v for v in c.values if v is not None]
    kind = getattr(c, "values_as", None)
    return [F.lit(spark_timestamp_text(v)).cast(kind) for v in values] if kind else values


def spark_timestamp_text(value):
    """An ISO timestamp bound in a form Spark's cast reads: it reads no zone after a date alone or
    after hours and minutes ("2024-03-10 12:00Z" casts to NULL, and every comparison with it would
    be NULL), so those get their time and seconds written out; anything else as it is."""
    m = re.fullmatch(r"(\d{4}-\d{2}-\d{2})(?:([ T])(\d{2}:\d{2})(:\d{2}(?:\.\d{1,6})?)?)?(Z|[+-]\d{2}:\d{2})",
                     value) if isinstance(value, str) else None
    if m is None:
        return value
    return f"{m[1]}{m[2] or ' '}{m[3] or '00:00'}{m[4] or ':00'}{m[5]}"


def valid_keys(v, c, label):
    """A key is compared and ordered: no map in it (Spark can do neither)."""
    from pyspark.sql import types as T

    def holds_map(t):
        return (isinstance(t, T.MapType) or isinstance(t, T.ArrayType) and holds_map(t.elementType)
                or isinstance(t, T.StructType) and any(holds_map(f.dataType) for f in t.fields))
    for name in c.columns:
        dtype = v.types[name.lower()]
        if holds_map(dtype):
            raise bad_input(f"{label}: column {name!r} is {dtype.simpleString()}: a key holds no map "
                            "(Spark cannot compare maps)")


def valid_expression(v, c, label):
    c.reads_tables = check_condition(v.spark, v.df, f"{label}: expression", c.expr) or c.reads_tables


def valid_schema(v, c, label):
    for type_text in c.schema.values():
        spark_type_string(v.spark, label, type_text)


def valid_freshness(v, c, label):
    from pyspark.sql import types as T
    dtype = v.dtype(c)
    if not isinstance(dtype, (T.DateType, T.TimestampType, T.TimestampNTZType)):
        raise bad_input(f"{label}: column {c.column!r} is {dtype.simpleString()}, "
                        "freshness needs a date or timestamp")


def valid_stat(v, c, label):
    """A statistic (a stat check's, or the one an anomaly check follows) of columns it applies to."""
    from pyspark.sql import types as T
    stat = stat_of(c)
    for name in (c.columns or [c.column]) if stat.needs == "numeric" else ():
        dtype = v.types[name.lower()]
        if not isinstance(dtype, T.NumericType):
            raise bad_input(f"{label}: {c.stat} needs a numeric column; {name!r} is {dtype.simpleString()}")
    dtype = v.dtype(c) if c.column else None
    if stat.grouped and "map<" in dtype.simpleString():
        raise bad_input(f"{label}: {c.stat} cannot group a map column ({c.column!r} is "
                        f"{dtype.simpleString()})")
    if stat.needs == "string" and not isinstance(dtype, T.StringType):
        raise bad_input(f"{label}: {c.stat} needs a string column; {c.column!r} is "
                        f"{dtype.simpleString()}")


# A profile (DQDL's AllStatistics): the metrics Glue documents for it, by the column's type.
PROFILE_STATS = ("null_fraction", "unique_fraction")
PROFILE_TYPED_STATS = (("NumericType", ("min", "max")), ("StringType", ("min_length", "max_length")))


def expand_profiles(checks, df):
    """Each profile as the recorded checks it stands for: the row count and its column's (column
    "*": every column's) statistics, which depend on the column's type (known only now, from the
    batch's schema)."""
    from pyspark.sql import types as T
    out = []
    for c in checks:
        if c.check != "profile":
            out.append(c)
            continue
        out.append(replace(c, check="row_count", column=None, name=f"{c.name}: row_count"))
        every = c.column == "*"
        fields = df.schema.fields if every else [f for f in df.schema.fields if f.name.lower() == c.column.lower()]
        for f in fields or [None]:  # an unknown column: named as it is, refused next
            typed = [stats for kind, stats in PROFILE_TYPED_STATS if f and isinstance(f.dataType, getattr(T, kind))]
            column = f.name if every else c.column
            out += [replace(c, check="stat", stat=stat, column=column,
                            name=f"{c.name}: {column}: {stat}" if every else f"{c.name}: {stat}")
                    for stat in PROFILE_STATS + (typed[0] if typed else ())]
    return out


def valid_relationship(v, c, label):
    """The referenced table must exist in the catalog, with the columns, comparable to the batch's."""
    spark, df, t = v.spark, v.df, v.t
    alias = f" ({c.reference!r} in --reference_tables)" if c.reference else ""
    target = existing_table(spark, t, c.to_table, f"{label}: to_table {t.catalog}.{c.to_table}{alias} does not exist")
    require_columns(f"{label}: {c.to_table}", target, c.to_columns)
    require_comparable(label, df, c.columns, target, c.to_table, c.to_columns)
    try:
        missing_references(df, target, c).schema
    except Exception as e:
        raise bad_input(f"{label}: cannot compare {c.columns} with {c.to_table}{c.to_columns}: "
                        f"{first_line(e)}") from None


def existing_table(spark, t, table, missing):
    """main of namespace.table in the target's catalog; bad input (`missing`) if there is none."""
    ns, name = table.split(".")
    ref = TableRef(t.catalog, ns, name)
    if not table_exists(spark, ref):
        raise bad_input(missing)
    return spark.table(ref.sql)


def require_comparable(label, df, columns, target, table, to_columns):
    """Columns paired by Spark's = must both be text or neither: beside a number, a date or a
    boolean, Spark casts the text to it, so "1.9" equals an int 1 and "2024-06-30 x" a date."""
    from pyspark.sql import types as T
    for a, b in zip(columns, to_columns):
        x, y = (d.select(col(n)).schema[0].dataType for d, n in ((df, a), (target, b)))
        if isinstance(x, T.StringType) != isinstance(y, T.StringType):
            raise bad_input(f"{label}: {a!r} is {x.simpleString()} but {table}.{b!r} is {y.simpleString()}, "
                            "compared by Spark through a cast of the text (\"1.9\" equals 1 as an int): "
                            "cast one of them in transform")


def require_columns(what, df, names):
    have = {x.lower() for x in df.columns}
    for name in names:
        if name.lower() not in have:
            raise bad_input(f"{what} has no column {name!r}; columns: {', '.join(df.columns)}")


def valid_reference(v, c, label):
    """The reference tables a check names exist, with the columns it compares: numeric ones for
    an aggregate. A dataset_match without match columns compares all of the batch's but its keys."""
    from pyspark.sql import types as T
    spark, df, t = v.spark, v.df, v.t

    def reference(written, table):
        return existing_table(spark, t, table, f"{label}: reference {written!r} ({t.catalog}.{table}) does not exist")
    for agg in c.aggregates or ():
        source = reference(agg.reference, agg.table) if agg.table else df
        require_columns(f"{label}: {agg.table or 'the batch'}", source, [agg.column])
        dtype = source.select(col(agg.column)).schema[0].dataType
        if not isinstance(dtype, T.NumericType):
            raise bad_input(f"{label}: {agg} needs a numeric column; {agg.column!r} is {dtype.simpleString()}")
    if c.aggregates:
        return
    target = reference(c.reference, c.to_table)
    if c.check != "dataset_match":
        return
    if c.match_columns is None:  # fixed now: the batch's columns, not the table's it is staged in
        keys = {k.lower() for k in c.columns}
        c.match_columns = c.to_match_columns = [x for x in df.columns if x.lower() not in keys]
    require_columns(f"{label}: the batch", df, c.match_columns)
    require_columns(f"{label}: {c.to_table}", target, c.to_columns + c.to_match_columns)
    require_comparable(label, df, c.columns + c.match_columns, target, c.to_table, c.to_columns + c.to_match_columns)
    try:
        matching_rows(df, target, c).schema
    except Exception as e:
        raise bad_input(f"{label}: cannot compare the batch with {c.to_table}: {first_line(e)}") from None


JOB_VIEW = re.compile(r"wap_[0-9a-f]{12}_(batch|table|main)")  # sql_views' names


@contextmanager
def sql_views(spark, batch, table, main):
    """Temporary views for a `sql` check's {batch}, {table} and {main}, dropped afterwards."""
    prefix = f"wap_{uuid.uuid4().hex[:12]}"
    views = {}
    for key, df in (("batch", batch), ("table", table), ("main", main)):
        views[key] = f"{prefix}_{key}"
        df.createOrReplaceTempView(views[key])
    try:
        yield views
    finally:
        for view in views.values():
            spark.catalog.dropTempView(view)


# writes a directory, runs a program, calls any Java method, names a function only at analysis
UNSAFE_NODES = ("InsertIntoDir", "ScriptTransformation", "CallMethodViaReflection",
                "ExpressionWithUnresolvedIdentifier")
UNSAFE_FUNCTIONS = ("reflect", "java_method")


# Spark internals reached by reflection: the plan classes and a DataFrame's analysed plan. Glue runs
# AWS's own Spark build, so each use has a safe way out if they differ: a condition or query that
# cannot be proven read-only is refused (exit 2, naming it), and a metric that cannot be narrowed
# to its columns scans them all.
CATALYST = "org.apache.spark.sql.catalyst"
COMMAND_MODE = "org.apache.spark.sql.execution.CommandExecutionMode$"  # SKIP: analyse, run nothing


def analyzed_plan(df):
    """Spark's analysed plan of a DataFrame (analysis runs nothing)."""
    return df._jdf.queryExecution().analyzed()


@functools.lru_cache(maxsize=16)
def jvm_class(jvm, name):
    """A Java class by its full name, looked up once per JVM (each lookup is a reflective round trip)."""
    return jvm.java.lang.Class.forName(name)


@functools.lru_cache(maxsize=64)
def java(jvm, name):
    """A Java class by its full name, for its constructors and static methods, found once per JVM:
    each step of jvm.org.apache.iceberg... is a round trip of its own."""
    return functools.reduce(getattr, name.split("."), jvm)


def java_items(jmap):
    """A Java map's (key, value) pairs, its keys fetched in one call: a py4j iterator ends in a
    Java exception, which pyspark's handler inspects with ~70 round trips, and an array costs two
    per element. String keys only (table refs, summaries); a key holding NUL is walked by index."""
    from pyspark import SparkContext
    keys = jmap.keySet()
    names = java(SparkContext._jvm, "java.lang.String").join("\0", keys).split("\0")
    if len(names) != jmap.size():  # a NUL in a key, or no key at all
        array = keys.toArray()
        names = [array[i] for i in range(len(array))]
    for name in names:
        yield name, jmap.get(name)


NodeKind = namedtuple("NodeKind", "name plan write subquery leaf")
_NODE_KINDS = {}  # (CATALYST, a node class's full name) -> its NodeKind


def node_kind(spark, node):
    """What a plan or expression node is, by its class (asked of the JVM once per class: a tree
    walk then costs about three round trips a node instead of eight)."""
    cls = node.getClass()
    key = (CATALYST, cls.getName())
    if key not in _NODE_KINDS:
        def of(name):
            return jvm_class(spark._jvm, f"{CATALYST}.{name}").isAssignableFrom(cls)
        _NODE_KINDS[key] = NodeKind(cls.getSimpleName(), of("plans.logical.LogicalPlan"),
                                    of("plans.logical.Command") or of("plans.logical.ParsedStatement"),
                                    of("expressions.SubqueryExpression"), of("trees.LeafLike"))
    return _NODE_KINDS[key]


def plan_nodes(spark, tree, views=True):
    """Every node of a parsed or analysed plan or expression, with its NodeKind, at any depth:
    children, a plan's expressions, subqueries' plans and CTE bodies, and (`views`) the bodies of
    the views it reads. A temporary view of this job's own ({batch}, ...) is not entered: it is not
    the user's SQL."""
    stack = [tree]
    while stack:
        node = stack.pop()
        kind = node_kind(spark, node)
        yield node, kind
        if kind.name == "View" and (not views or node.isTempView() and
                                    JOB_VIEW.fullmatch(str(node.desc().identifier().table()))):
            continue
        nested = ([] if kind.leaf else [node.children()]) + ([node.expressions()] if kind.plan else [])
        for seq in nested:
            stack += [seq.apply(i) for i in range(seq.size())]
        if kind.subquery:
            stack.append(node.plan())
        if kind.name == "UnresolvedWith":  # the CTE bodies are neither children nor expressions
            ctes = node.cteRelations()
            stack += [ctes.apply(i)._2() for i in range(ctes.size())]


def unsafe_part(spark, tree):
    """What in a parsed or analysed plan or expression would do more than read: a command or a
    statement (INSERT, DROP, CALL, ...), a directory write, a script, or a reflective call, at any
    depth (CTE bodies and subqueries included); None for a plain query or condition. Callers check
    the analysed plan too, where window definitions and IDENTIFIER() names are resolved."""
    for node, kind in plan_nodes(spark, tree):
        if kind.name in UNSAFE_NODES or kind.write:
            return kind.name
        if kind.name == "UnresolvedFunction" and str(node.nameParts().last()).lower() in UNSAFE_FUNCTIONS:
            return f"{node.nameParts().last()}()"
    return None


def check_condition(spark, df, what, text):
    """Bad input unless `text` is a row condition over df: boolean, no aggregate or window
    function, and only reading (checked on the analysed expression, where every function call
    and subquery is resolved; analysis runs nothing). True if it holds a subquery: it reads a
    table (or view) besides the row."""
    from pyspark.sql import functions as F, types as T
    try:
        df.where(F.expr(text)).schema  # refuses aggregates and window functions
        probe = df.select(F.expr(text).alias("x"))
        dtype = probe.schema["x"].dataType
    except Exception as e:
        raise bad_input(f"{what} does not parse as a row condition: {first_line(e)}") from None
    try:
        condition = analyzed_plan(probe).expressions().apply(0)
        unsafe = unsafe_part(spark, condition)
    except Exception as e:
        raise bad_input(f"{what}: cannot be proven read-only on this Spark build, so it is refused "
                        f"({first_line(e)})") from None
    if unsafe:
        raise bad_input(f"{what} may only read (it holds {unsafe})")
    if not isinstance(dtype, T.BooleanType):
        raise bad_input(f"{what} must be a condition (boolean), got {dtype.simpleString()}")
    unread = unreadable_literal(spark, condition)
    if unread is not None:
        raise bad_input(f"{what}: {unread[0]!r} is not a {unread[1]} (Spark reads it as NULL, so every "
                        "comparison with it would be NULL)")
    return bool(java(spark._jvm, f"{CATALYST}.expressions.SubqueryExpression").hasSubquery(condition))


def unreadable_literal(spark, expression):
    """(text, kind) of a string constant the analysed expression casts to a number, a boolean, a
    date or a time that Spark cannot read as one ("2024-02-30", "12:00Z", "n/a" against an int
    column), or None. Such a cast is NULL, and so is every comparison with it: a check would pass
    (or, from DQDL, fail) every row, whatever they hold. None too where Spark's internals are not
    what this knows (another Spark build): not checked."""
    try:
        return _unreadable_literal(spark, expression)
    except Exception as e:
        log.info("string constants not checked against their casts on this Spark build (%s)", first_line(e))
        return None


LITERAL_KINDS = {"date": "date", "timestamp": "timestamp", "timestamp_ntz": "timestamp", "boolean": "boolean",
                 **{t: "number" for t in ("byte", "short", "integer", "long", "float", "double")}}


def _unreadable_literal(spark, expression):
    try:  # one round trip for the usual case: no cast and no subquery (`sql()`: every argument,
        # untruncated, but a subquery's as `exists(<outer columns>)`, `scalarsubquery(...)`, ...)
        if not re.search(r"cast\(|(query|exists)\(", str(expression.sql()).lower()):
            return None
    except Exception:  # an expression without SQL text: walk it
        pass
    # the condition's own text and its subqueries', not the bodies of views it reads: a string
    # there is not the user's to change
    for node, kind in plan_nodes(spark, expression, views=False):
        if kind.name == "Cast" and node.child().foldable() and node.child().dataType().typeName() == "string":
            target = str(node.dataType().typeName())
            try:
                text, value = node.child().eval(None), node.eval(None)
            except Exception:  # a cast Spark refuses to evaluate here (ANSI mode): not this one's kind
                continue
            if (target in LITERAL_KINDS or target.startswith("decimal")) and text is not None and value is None:
                return str(text), LITERAL_KINDS.get(target, "number")
    return None


def sql_query(spark, c, label, views, columns):
    """The check's query with its placeholders bound; only a query that returns one number (for
    sql_rows: columns of the batch, `columns`) is accepted, and nothing that is not a query is ever
    run (the parser is asked first)."""
    from pyspark.sql import types as T
    text = c.query
    for key, view in views.items():
        text = text.replace("{" + key + "}", quote(view))
    try:
        plan = spark._jsparkSession.sessionState().sqlParser().parsePlan(text)  # parsing runs nothing
    except Exception as e:
        raise bad_input(f"{label}: query does not parse: {first_line(e)}") from None
    def prove_read_only(tree):
        unsafe = internal_proof(label, lambda: unsafe_part(spark, tree))
        if unsafe:
            raise bad_input(f"{label}: query is not a read-only SQL query (it holds {unsafe})")

    prove_read_only(plan)
    # Analysed before spark.sql, which runs a command at once: INSERT INTO IDENTIFIER('t') ...
    # parses as a plan with an unresolved name and becomes the write only in analysis.
    skip = internal_proof(label, lambda: getattr(java(spark.sparkContext._jvm, COMMAND_MODE), "MODULE$").SKIP())
    try:
        analyzed = spark._jsparkSession.sessionState().executePlan(plan, skip).analyzed()
    except Exception as e:
        raise bad_input(f"{label}: query does not run: {first_line(e)}") from None
    prove_read_only(analyzed)  # IDENTIFIER() names, WINDOWs, catalog views' bodies
    try:
        df = spark.sql(text)
        fields = df.schema.fields
    except Exception as e:
        raise bad_input(f"{label}: query does not run: {first_line(e)}") from None
    # and the plan that will run, analysed anew by spark.sql: an IDENTIFIER() name can resolve
    # differently at each analysis (current_timestamp() in it), and a catalog view can be replaced
    analyzed = internal_proof(label, lambda: analyzed_plan(df))
    prove_read_only(analyzed)
    if c.check == "sql_rows":
        known = {x.lower() for x in columns}
        names = [f.name.lower() for f in fields]
        if not fields or len(set(names)) < len(names) or not set(names) <= known:
            raise bad_input(f"{label}: a row-level query returns columns of the batch (primary), each "
                            "once, by which its rows are the batch's; returns " + ", ".join(f.name for f in fields))
        return df
    if len(fields) != 1 or not isinstance(fields[0].dataType, T.NumericType):
        raise bad_input(f"{label}: query must return one number, returns columns "
                        + ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in fields))
    if not internal_proof(label, lambda: one_row(analyzed)):
        raise bad_input(f"{label}: query must return one row: an aggregate without GROUP BY or "
                        "HAVING (SELECT count(*) FROM ...), or scalar subqueries")
    return df


def internal_proof(label, prove):
    """A proof about a query made on Spark's internals; if they are not what this file knows (another
    Spark build), the query is refused: bad input naming the check, never a Java trace."""
    try:
        return prove()
    except Exception as e:
        raise bad_input(f"{label}: query cannot be proven a read-only one-number query on this Spark "
                        f"build, so it is refused ({first_line(e)})") from None


def one_row(plan):
    """True if an analyzed plan returns exactly one row whatever the data: a global aggregate or
    a projection of no table, under projections and aliases only."""
    while True:
        name = plan.getClass().getSimpleName()
        if name == "Aggregate":
            return plan.groupingExpressions().isEmpty()
        if name == "OneRowRelation":
            return True
        if name not in ("Project", "SubqueryAlias", "WithCTE"):
            return False
        plan = plan.plan() if name == "WithCTE" else plan.child()


def check_bound_types(c, label, dtype):
    """Bounds and accepted values must be of the column's kind: a string bound on a number column
    makes every comparison NULL, and the check would silently pass every row."""
    from datetime import date
    from pyspark.sql import types as T
    values = [v for v in ([c.min, c.max] if c.check == "between" else c.values) if v is not None]
    if isinstance(dtype, T.NumericType):
        kind, ok = "a number", lambda v: is_number(v) or isinstance(v, Decimal)
    elif isinstance(dtype, T.DateType):
        kind, ok = "an ISO date (YYYY-MM-DD)", lambda v: (isinstance(v, str) and ISO_DATE.match(v)
                                                         and parses(date.fromisoformat, v))
    elif isinstance(dtype, (T.TimestampType, T.TimestampNTZType)):
        kind, ok = "an ISO timestamp", lambda v: (isinstance(v, str) and ISO_TIMESTAMP.match(v)
                                                 and parses(datetime.fromisoformat, v))
    elif isinstance(dtype, T.BooleanType):
        kind, ok = "true or false", lambda v: isinstance(v, bool)
    else:
        return
    for v in values:
        if not ok(v):
            raise bad_input(f"{label}: {json.dumps(v)} is not {kind}, as column {c.column!r} "
                            f"({dtype.simpleString()}) needs")


ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")  # the forms Spark's casts read too
ISO_TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?)?(Z|[+-]\d{2}:\d{2})?$")


def parses(parse, text):
    try:
        parse(text)
        return True
    except ValueError:
        return False


def spark_type_string(spark, label, type_text):
    """Normalise a Spark SQL type name ('integer', 'INT') to its simple string ('int')."""
    try:
        return java(spark.sparkContext._jvm, "org.apache.spark.sql.types.DataType").fromDDL(
            type_text).simpleString()
    except Exception:
        raise bad_input(f"{label}: unknown Spark SQL type {type_text!r}") from None


def first_line(error):
    """A one-line cause: for JVM errors, the innermost Java exception rather than py4j's wrapper."""
    cause = getattr(error, "java_exception", None)
    if cause is not None:
        try:
            for _ in range(64):  # Java lets two exceptions be each other's cause: never loop on them
                if cause.getCause() is None or cause.getCause() == cause:
                    break
                cause = cause.getCause()
            text = str(cause.toString())
        except Exception:
            text = str(error)
    else:
        text = str(getattr(error, "desc", None) or error)
    text = text.strip()
    return text.splitlines()[0][:500] if text else type(error).__name__


# =================================================================================================
# Checks from DQDL: AWS Glue Data Quality rulesets, read by a tokenizer and a recursive descent
# =================================================================================================
#
# Semantics follow the DQDL reference (docs.aws.amazon.com/glue/latest/dg/dqdl.html and its rule
# type pages); each rule becomes one check spec, named by its text.

_Token = namedtuple("Token", "kind text value start end line col")
_Cond = namedtuple("Cond", "op args tok")     # op: "=", "!=", ">", ..., "between", "not in", ...
_Val = namedtuple("Val", "kind value tok")    # kind: num str null empty blank now dur size
_Rule = namedtuple("Rule", "tok params cond where threshold tags record", defaults=({}, False))  # record: an analyzer

_TOKEN = re.compile(r"""
    (?P<space>\s+) | (?P<comment>\#[^\n]*)
  | (?P<string>"(?:\\[\s\S]|[^"\\])*")        # DQDL escapes inside strings: \" and \\
  | (?P<number>\d[\w.]*)                     # validated below, so 1.2.3 is an error, not two tokens
  | (?P<word>[A-Za-z_][\w.]*)
  | (?P<op>>=|<=|!=|[=<>!\[\](){},:+\-*/$])
""", re.VERBOSE)


class DqdlError(WapError):
    """Bad DQDL: the position in the text (line, column) and why."""

    def __init__(self, tok, reason):
        super().__init__(f"--checks: DQDL line {tok.line}, column {tok.col}: {reason}", EXIT_BAD_INPUT)
        self.col, self.reason = tok.col, reason


def _operand_string(tok):
    """A quoted value compared with the data: \\' is a quote there too, as in Glue's parser (a
    statement or a where clause keeps it: Spark SQL reads it)."""
    return re.sub(r'\\(["\\\'])', r"\1", tok.text[1:-1])


def _error(tok, message):
    """Bad input naming the rule's position in the ruleset."""
    return DqdlError(tok, message)


MAX_DEPTH = 40  # parentheses nested in a ruleset; a value's tokens at most MAX_DEPTH * 5


def _tokenize(text):
    """Tokens with their line and column (for errors); spaces and # comments are dropped."""
    tokens, pos = [], 0

    def token(kind, start, end, value=None):
        return _Token(kind, text[start:end], value, start, end, text.count("\n", 0, start) + 1,
                     start - text.rfind("\n", 0, start))
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            bad = token("error", pos, pos + 1)
            raise _error(bad, f"unterminated string {text[pos:pos + 30]!r}" if text[pos] == '"'
                         else f"unexpected character {text[pos]!r}")
        kind, raw = m.lastgroup, m.group()
        if kind == "number":
            if not re.fullmatch(r"\d+(\.\d+)?", raw):
                raise _error(token(kind, pos, m.end()), f"bad number {raw!r}")
            value = Written(raw) if "." in raw else int(raw)
            if not is_literal_number(value):
                raise _error(token(kind, pos, m.end()), f"number out of range {raw[:24]!r}")
            tokens.append(token(kind, pos, m.end(), value))
        elif kind == "string":   # value unescaped; .text keeps the raw form for regex patterns
            tokens.append(token(kind, pos, m.end(), re.sub(r'\\(["\\])', r"\1", raw[1:-1])))
        elif kind in ("word", "op"):
            tokens.append(token(kind, pos, m.end()))
        pos = m.end()
    tokens.append(token("end", len(text), len(text)))
    return tokens


_SECTIONS = ("Metadata", "DataSources", "Analyzers")
_KEYWORDS = {"between", "not", "in", "matches", "with", "where", "and", "or", "of", "null", "empty",
             "whitespaces_only", "now", "labels"}
MAX_NOW_OFFSET = 100_000  # (now() - N days): N beyond this overflows Spark's timestamps in hours
_UNITS = {"minute": "MINUTES", "minutes": "MINUTES", "hour": "HOURS", "hours": "HOURS",
          "day": "DAYS", "days": "DAYS"}
_NOW_SQL = re.compile(r"\(?current_timestamp\(\)(?: ([+-]) INTERVAL (\d+) (\w+)\))?")


def _in_order(low, high):
    """between's two ends, the lower first whichever came first: a window is the same either way
    round (Glue's own FileFreshness example: between now() and (now() - 45 minutes)), and
    reversed, a between would fail every value and a not between pass every one. Ends of one kind
    known here are ordered here (numbers, durations, sizes, dates, now() offsets; two times of day
    the later first are refused: the window the rule means may cross midnight);
    others when evaluated: a metric's dynamic ends by COMPARATORS, a row test's by least/greatest."""
    k, j = _order_key(low), _order_key(high)
    if k and j and k[0] == j[0] and k[1] > j[1]:
        if k[0] == "time of day":  # meant across midnight? a window of today's times cannot be
            raise _error(low.tok, f"{json.dumps(low.value)} is later than {json.dumps(high.value)}: times of day are today's, "
                                  "so write the earlier first (a window across midnight: two rules joined by OR)")
        return [high, low]
    return [low, high]


def _same_order(a, b):
    """Whether two ends are ordered by their text alone (see _in_order)."""
    k, j = _order_key(a), _order_key(b)
    return bool(k and j and k[0] == j[0])


def _order_key(a):
    """(kind, value) of an end ordered by its text alone, or None."""
    if a.kind in ("num", "size"):
        return "number", a.value
    if a.kind == "dur":
        return "duration", a.value[0] * TIME_UNITS[a.value[1].lower()]
    m = _NOW_SQL.fullmatch(a.value) if a.kind == "now" else None
    if m:
        return "now", (-1 if m[1] == "-" else 1) * int(m[2] or 0) * TIME_UNITS.get((m[3] or "").lower(), 0)
    if a.kind == "str" and _DATETIME.fullmatch(a.value):
        try:
            return "datetime", datetime.fromisoformat(a.value)
        except ValueError:  # not a date (Spark's cast makes it NULL: every row fails)
            return None
    if a.kind == "str" and _TIME_OF_DAY.fullmatch(a.value.strip()) and file_time(a.value, 0) is not None:
        return "time of day", file_time(a.value, 0)
    return None


class _Parser:
    """Recursive descent over DQDL: Rules = [ rule, ... ], each rule becoming one check."""

    def __init__(self, text):
        self.tokens = _tokenize(text)
        self.i = 0
        self.variables = {}       # name = "value" or [values], before the rules; used as $name
        self.default_labels = {}  # DefaultLabels = [...]: every rule's, unless it sets the key

    def within_depth(self, parse):
        """parse(), refused with the position reached if its nesting (composites in parentheses,
        parenthesised values) is deeper than MAX_DEPTH: each level is a few frames of this
        recursive parser, and of everything that walks a check later."""
        depth = 0
        for tok in self.tokens:
            depth += (tok.text == "(") - (tok.text == ")") if tok.kind == "op" else 0
            if depth > MAX_DEPTH:
                raise _error(tok, f"parentheses nested more than {MAX_DEPTH} deep")
        try:
            return parse()
        except RecursionError:  # a long value the parser's own walks could not follow
            raise _error(self.peek(), "nested more deeply than the parser can follow") from None

    def peek(self, ahead=0):
        return self.tokens[min(self.i + ahead, len(self.tokens) - 1)]

    def take(self):
        tok = self.peek()
        self.i = min(self.i + 1, len(self.tokens) - 1)
        return tok

    def at(self, *texts, ahead=0):
        tok = self.peek(ahead)
        return tok.kind in ("word", "op") and tok.text.lower() in texts

    def expect(self, text):
        tok = self.take()
        if tok.kind not in ("word", "op") or tok.text.lower() != text.lower():
            raise _error(tok, f"expected '{text}' but found {_describe(tok)}")
        return tok

    def separated(self, item):
        """item, item, ...: one or more, between commas."""
        items = [item()]
        while self.at(","):
            self.take()
            items.append(item())
        return items

    def ruleset(self):
        """The grammar's document: Metadata? DataSources? variables DefaultLabels? then Rules,
        Analyzers or both."""
        for section in _SECTIONS[:2]:
            if self.peek().text == section:
                self.section(section)
        while (self.peek().kind == "word" and self.peek().text not in ("Rules", "DefaultLabels")
               and self.peek().text not in _SECTIONS and self.at("=", ahead=1)):
            self.variable()
        if self.peek().text == "DefaultLabels":
            self.take()
            self.default_labels = self.labels()
        first = self.peek()
        if first.text not in ("Rules", "Analyzers"):
            raise _error(first, "a ruleset starts with Metadata, DataSources, variables, DefaultLabels, "
                                f"'Rules = [' or 'Analyzers = [', found {_describe(first)}")
        checks = self.rules() if first.text == "Rules" else []
        if not checks and first.text == "Rules" and self.peek().text != "Analyzers":
            raise _error(self.tokens[self.i - 1], "a ruleset needs at least one rule")
        if self.peek().text == "Analyzers":
            checks += self.analyzers()
            if not checks:
                raise _error(self.tokens[self.i - 1], "a ruleset needs at least one rule or analyzer")
        if self.peek().kind != "end":
            raise _error(self.peek(), f"unexpected {_describe(self.peek())} after the closing ']'")
        seen = {}
        for check in checks:  # a rule written twice is checked twice, under names of its own
            seen[check["name"]] = seen.get(check["name"], 0) + 1
            if seen[check["name"]] > 1:
                check["name"] += f" ({seen[check['name']]})"
        return checks

    def rules(self):
        """Rules = [ rule, ... ], empty only before Analyzers (checked by the caller)."""
        return self.bracketed("Rules", self.top_rule)

    def analyzers(self):
        """Analyzers = [ analyzer, ... ]: metrics recorded in the ledger, never a verdict."""
        return [check for group in self.bracketed("Analyzers", self.analyzer) for check in group]

    def bracketed(self, name, item):
        """name = [ item, ... ] or name = [ ] (the caller refuses a ruleset that checks nothing)."""
        self.expect(name)
        self.expect("=")
        self.expect("[")
        if self.at("]"):
            self.take()
            return []
        items = self.separated(item)
        tok = self.take()
        if tok.text != "]":
            raise _error(tok, f"expected ',' or ']' but found {_describe(tok)}")
        return items

    def analyzer(self):
        """One analyzer (a rule type and its parameters, no condition): its recorded checks."""
        start, tok = self.i, self.take()
        if tok.kind != "word" or tok.text not in ANALYZERS:
            raise _error(tok, f"{_describe(tok)} is not supported as an analyzer; "
                              f"supported: {', '.join(ANALYZERS)}")
        params = []
        while _is_param(self.peek()) or self.at("of", "and") and _is_param(self.peek(1)):
            if self.at("of", "and"):
                self.take()
            params.append(self.take())
        name = self.text(start)
        return [{"name": name + (f" ({spec.pop('part')})" if "part" in spec else ""), **spec, "action": RECORD}
                for spec in RULE_TYPES[tok.text].analyzer(_Rule(tok, params, None, None, None, record=True))]

    def section(self, name):
        """Metadata = { "Version": "1.0" } or DataSources = { "Primary": "...", ... }: a
        dictionary of strings and string lists, as the grammar has it. The batch is always the
        primary source, so DataSources changes nothing; only Metadata's Version 1.0 is known."""
        self.expect(name)
        self.expect("=")
        self.expect("{")
        pairs = {}
        while True:
            key = self.take()
            if key.kind != "string":
                raise _error(key, f"expected a quoted key in {name}, found {_describe(key)}")
            if key.value not in _SECTION_KEYS[name]:
                raise _error(key, f"{name} key {key.text} is not supported; supported: "
                                  f"{', '.join(_SECTION_KEYS[name])}")
            self.expect(":")
            pairs[key.value] = self.section_value(key.value == "AdditionalDataSources")
            if not self.at(","):
                break
            self.take()
        self.expect("}")
        if name == "Metadata" and pairs.get("Version", "1.0") != "1.0":
            raise _error(key, f"Metadata Version {pairs['Version']!r} is not supported; use \"1.0\"")
        return pairs

    def section_value(self, is_list):
        """A quoted string, or [ "a", "b" ] where the key takes a list."""
        tok = self.take()
        if is_list and tok.text == "[":
            values = self.separated(lambda: self.section_value(False))
            self.expect("]")
            return values
        if tok.kind != "string" or is_list:
            raise _error(tok, f"expected {'[ quoted strings ]' if is_list else 'a quoted string'}, "
                              f"found {_describe(tok)}")
        return tok.value

    def variable(self):
        """name = "value" | [ "a", "b", NULL, EMPTY, WHITESPACES_ONLY ]"""
        name = self.take()
        self.expect("=")
        if name.text.startswith("_"):  # as Glue's parser refuses it
            raise _error(name, f"a variable's name cannot start with '_': {name.text}")
        if name.text in self.variables:
            raise _error(name, f"variable {name.text} is defined twice")
        if self.at("["):
            self.take()
            values = self.separated(self.string_value)
            self.expect("]")
        else:
            values = self.string_value()
        for v in values if isinstance(values, list) else [values]:
            if v.kind == "str" and _VARIABLE_USE.search(v.value):  # Glue's parser refuses these too
                raise _error(v.tok, f"a variable's value cannot use another variable ({name.text})")
        self.variables[name.text] = values

    def string_value(self):
        tok = self.take()
        word = tok.text.lower() if tok.kind == "word" else None
        if tok.kind == "string":
            return _Val("str", tok.value, tok)
        if word in ("null", "empty", "whitespaces_only"):
            return _Val({"null": "null", "empty": "empty"}.get(word, "blank"), None, tok)
        raise _error(tok, f"expected a quoted string, NULL, EMPTY or WHITESPACES_ONLY, "
                          f"found {_describe(tok)}")

    def dereference(self, operand=False):
        """$name: the variable's value(s), each carrying the position of this use; `operand`:
        compared with the data (see _operand_string)."""
        dollar, name = self.take(), self.take()
        if name.kind != "word" or name.text not in self.variables:
            raise _error(dollar, f"variable ${name.text} is not defined")

        def use(v):
            return v._replace(tok=dollar, value=_operand_string(v.tok) if operand and v.kind == "str" else v.value)
        value = self.variables[name.text]
        return [use(v) for v in value] if isinstance(value, list) else use(value)

    def labels(self, base=None):
        """= [ "key" = "value", ... ] over `base` (DefaultLabels, or a rule's own), with Glue's
        limits: 1 to 10 labels, unique non-empty keys of up to 128 characters, values of up to 256."""
        self.expect("=")
        start = self.expect("[")
        labels, base = {}, dict(base or {})
        if self.at("]"):
            raise _error(self.peek(), 'labels = [] holds no label; write "key" = "value"')
        while not self.at("]"):
            if labels:
                self.expect(",")
            key = self.take()
            self.expect("=")
            value = self.take()
            for tok, most in ((key, 128), (value, 256)):
                if tok.kind != "string":
                    raise _error(tok, f"a label is \"key\" = \"value\", found {_describe(tok)}")
                if not tok.value or len(tok.value.encode("utf-16-le")) // 2 > most:  # Java's length
                    raise _error(tok, f"a label's {'key' if tok is key else 'value'} has 1 to {most} characters")
            if key.value in labels:
                raise _error(key, f"label {key.text} given twice")
            labels[key.value] = value.value
        self.take()
        if len(self.default_labels) + len(labels) > 10:  # counted as Glue counts them, an override too
            raise _error(start, "at most 10 labels a rule (DefaultLabels included)")
        return {**base, **labels}

    def top_rule(self):
        """One rule, named by its source text (whitespace and comments between tokens made one
        space)."""
        start = self.i
        body = self.composite()
        body.pop("name", None)
        check = {"name": self.text(start), **body, "action": "fail", "dqdl": self.text(start)}
        try:  # what the check spec refuses (a bad table name, an aggregate it cannot read), here with its position
            parse_check(dict(check), 0)
        except WapError as e:
            label = f"check #1 ({json.dumps(check['name'])}): "
            raise _error(self.tokens[start], str(e)[len(label):] if str(e).startswith(label) else str(e)) from None
        return check

    def text(self, start):
        """The source text from token `start` to here."""
        text = ""
        for prev, tok in zip([None] + self.tokens[start:self.i], self.tokens[start:self.i]):
            text += (" " if prev is not None and tok.start > prev.end else "") + tok.text
        return text

    def composite(self, op="or"):
        """(A) OR (B), (A) AND (B), nested; AND binds tighter, as in the reference grammar. Each
        side is its own check over the whole batch; the composite combines their outcomes."""
        parts = [self.composite("and") if op == "or" else self.term()]
        while self.at(op):
            self.take()
            parts.append(self.composite("and") if op == "or" else self.term())
        return parts[0] if len(parts) == 1 else {"check": "composite", "op": op, "rules": parts}

    def term(self):
        start = self.i
        if not self.at("("):
            body = self.rule()
        else:
            self.take()
            body = self.composite()
            self.expect(")")
            if self.at("labels"):
                self.take()
                body["labels"] = self.labels({**self.default_labels, **body.get("labels", {})})
        body["name"] = self.text(start)
        return body

    def rule(self):
        tok = self.take()
        if tok.kind != "word":
            raise _error(tok, f"expected a rule type but found {_describe(tok)}")
        if tok.text not in RULES:
            raise _error(tok, f"rule type {tok.text!r} is not supported; supported: {', '.join(RULES)}")
        kind = RULE_TYPES[tok.text]
        params = []
        while True:   # parameters: "quoted" or bare names or $variables, optionally after 'of'/'and'
            # DetectAnomalies of RowCount: a rule type, bare, as its first parameter
            rule_name = lambda ahead: (tok.text == "DetectAnomalies" and not params
                                       and self.peek(ahead).kind == "word" and self.peek(ahead).text in RULES)
            if self.at("of", "and") and (_is_param(self.peek(1)) or self.at("$", ahead=1) or rule_name(1)):
                self.take()
            if rule_name(0):
                params.append(self.take())
                continue
            if self.at("$"):
                val = self.dereference()
                if isinstance(val, list) or val.kind != "str":
                    raise _error(val.tok if not isinstance(val, list) else val[0].tok,
                                 "a parameter variable holds one quoted string")
                params.append(val.tok._replace(kind="string", value=val.value))
                continue
            if not _is_param(self.peek()):
                break
            params.append(self.take())
        cond = self.condition() if self.at("=", "!=", "!", ">", ">=", "<", "<=", "between",
                                           "not", "in", "matches") else None
        where = threshold = labels = None
        tags = {}
        order = ("where", "labels", "with")  # the grammar's: condition? where? labels? with*
        last = -1
        while self.at(*order):
            word = self.take()
            if order.index(word.text.lower()) < last:
                raise _error(word, f"'{word.text}' goes before '{order[last]}': a rule is "
                                   "<rule> <condition> where ... labels = [...] with ...")
            last = order.index(word.text.lower())
            if word.text.lower() == "labels":
                if labels is not None:
                    raise _error(word, "'labels' given twice")
                labels = self.labels(self.default_labels)
                continue
            if word.text.lower() == "with" and self.peek().text in kind.tags:
                if self.peek().text in tags:
                    raise _error(self.peek(), f"'with {self.peek().text}' given twice")
                tag = self.take()
                tags[tag.text] = self.condition(list_after_equals=tag.text == "filterOrder")
                continue
            allowed = kind.where if word.text.lower() == "where" else kind.threshold
            if word.text.lower() == "with" and self.peek().text.lower() != "threshold" and kind.tags:
                options = ", ".join(kind.tags + (("threshold",) if allowed else ()))
                raise _error(self.peek(), f"{tok.text} has no option {self.peek().text!r} (it takes {options})")
            if not allowed:
                raise _error(word, f"'{word.text}' is not supported for {tok.text}")
            if word.text.lower() == "where" and where is None:
                where = self.take()
                if where.kind != "string" or not where.value.strip():
                    raise _error(where, "'where' needs a quoted, non-empty Spark SQL condition")
            elif word.text.lower() == "with" and threshold is None:
                self.expect("threshold")
                threshold = self.condition()
            else:
                raise _error(word, f"'{word.text}' given twice")
        rule = _Rule(tok, params, cond, where, threshold, tags)
        check = kind.to_check(rule)
        if where is not None:
            check["where"] = where.value
        if threshold is not None:  # failFast = "true": Glue fails on the first failing file, so no share
            shares = _threshold(rule)
            check.update({} if tags.get("failFast") and _flag(rule, "failFast") else shares)
        labels = self.default_labels if labels is None else labels
        if labels:
            check["labels"] = labels
        return check

    def condition(self, list_after_equals=False):
        """A comparator and its operands; `list_after_equals`: a tag's `= [...]` (AWS's pages
        write filterOrder so; the grammar's form is `in [...]`) is read as `in [...]`."""
        tok = self.take()
        op = tok.text.lower()
        if op == "=" and list_after_equals and self.at("["):
            op = "in"
        if op == "!":              # DQDL lexes != as two tokens, so "! =" is valid too
            self.expect("=")
            op = "!="
        if op == "not":
            nxt = self.take()
            if nxt.text.lower() not in ("between", "in", "matches"):
                raise _error(nxt, f"expected 'between', 'in' or 'matches' after 'not', "
                                  f"found {_describe(nxt)}")
            op = "not " + nxt.text.lower()
        if op in ("between", "not between"):
            low = self.operand()
            self.expect("and")
            args = _in_order(low, self.operand())
        elif op in ("in", "not in") and self.at("$"):
            args = self.dereference(operand=True)
            if not isinstance(args, list):
                args = [args]
        elif op in ("in", "not in"):
            self.expect("[")
            args = self.separated(self.operand)
            self.expect("]")
        elif op in ("matches", "not matches"):
            pattern = self.take()
            if pattern.kind != "string":
                raise _error(pattern, f"expected a quoted regular expression, "
                                      f"found {_describe(pattern)}")
            args = [_Val("str", pattern.text[1:-1], pattern)]   # raw: backslashes are the regex's
        elif op in ("=", "!=", ">", ">=", "<", "<="):
            args = [self.operand()]
        else:
            raise _error(tok, f"expected a condition (=, !=, >, >=, <, <=, between, in, matches) "
                              f"but found {_describe(tok)}")
        return _Cond(op, args, tok)

    def operand(self):
        tok = self.peek()
        duration = tok.kind == "number" and self.peek(1).kind == "word" and self.peek(1).text in _UNITS
        if tok.kind == "number" and self.peek(1).kind == "word" and self.peek(1).text in SIZE_UNITS:
            self.take()
            if not isinstance(tok.value, int):
                raise _error(tok, f"a size needs a whole number, got {tok.text}")
            return _Val("size", tok.value * SIZE_UNITS[self.take().text], tok)
        if (tok.kind == "number" and not duration) or (tok.text == "-" and self.peek(1).kind == "number") \
                or (tok.kind == "word" and self.at("(", ahead=1) and tok.text != "now") \
                or (tok.text == "(" and not self.at("now", ahead=1)):
            expr = self.number()
            return _Val("num", expr[1], tok) if expr[0] == "num" else _Val("dyn", expr, tok)
        tok = self.take()
        word = tok.text.lower() if tok.kind == "word" else None
        if duration:
            if not isinstance(tok.value, int):
                raise _error(tok, f"a duration needs a whole number, got {tok.text}")
            val = _Val("dur", (tok.value, _UNITS[self.take().text]), tok)
        elif tok.kind == "string":
            val = _Val("str", _operand_string(tok), tok)
        elif word in ("null", "empty", "whitespaces_only"):
            val = _Val({"null": "null", "empty": "empty"}.get(word, "blank"), None, tok)
        elif word == "now" and self.at("("):
            self.expect("(")
            self.expect(")")
            val = _Val("now", "current_timestamp()", tok)
        elif tok.text == "(" and self.at("now"):    # (now() - 3 days)
            for text in ("now", "(", ")"):
                self.expect(text)
            sign, amount, unit = self.take(), self.take(), self.take()
            if sign.text not in ("+", "-") or not isinstance(amount.value, int) \
                    or amount.value > MAX_NOW_OFFSET or unit.text not in _UNITS:
                raise _error(sign, "expected (now() + or - a whole number of days, hours "
                                   f"or minutes, at most {MAX_NOW_OFFSET})")
            self.expect(")")
            val = _Val("now", f"(current_timestamp() {sign.text} INTERVAL {amount.value} "
                             f"{_UNITS[unit.text]})", tok)
        elif tok.text == "$":
            self.i -= 1
            val = self.dereference(operand=True)
            if isinstance(val, list):
                raise _error(tok, "a list variable goes after 'in'")
        else:
            raise _error(tok, f"expected a value but found {_describe(tok)}")
        if self.at("+", "-", "*", "/"):
            raise _error(self.peek(), "arithmetic is on numbers only")
        return val

    def number(self, top=True):
        """A number, or a dynamic value over the metric's history: arithmetic (+ - * /, the usual
        precedence) on numbers and functions, avg(last(10)) * 0.8. Returns ("num", value) or a tree
        ("call", name, args) / ("op", op, left, right); checked for kinds here (list or number)."""
        first, start, left = self.i, self.peek(), self.product()
        while self.at("+", "-"):
            op = self.take()
            left = _arith(op, left, self.product())
        left = _as_number(left) if top else left
        if top and _kind_of(left) != "number":
            raise _error(start, "expected a number, found a list (use avg, min, max, ...)")
        if top and self.i - first > MAX_DEPTH * 5:  # evaluated recursively, so kept to a size
            raise _error(start, f"a value of more than {MAX_DEPTH * 5} tokens")
        return left

    def product(self):
        left = self.factor()
        while self.at("*", "/"):
            op = self.take()
            left = _arith(op, left, self.factor())
        return left

    def factor(self):
        tok = self.take()
        if tok.text == "-" and self.peek().kind == "number":
            value = self.take().value
            return "num", Written("-" + value.text) if isinstance(value, Written) else -value
        if tok.kind == "number":
            return "num", tok.value
        if tok.text == "(":
            inner = self.number(top=False)
            self.expect(")")
            return inner
        if tok.kind == "word" and self.at("("):
            if tok.text not in _FUNCTIONS:
                raise _error(tok, f"unknown function {tok.text}(); known: {', '.join(_FUNCTIONS)}")
            self.expect("(")
            if tok.text == "last" and self.at(")"):  # last() is last(1): the latest value
                args = [("num", 1)]
            else:
                args = self.separated(lambda: self.number(top=False))
            self.expect(")")
            wanted = _FUNCTIONS[tok.text][0]
            args = [_as_number(a) if w == "number" else a for a, w in zip(args, wanted)] + args[len(wanted):]
            kinds = [_kind_of(a) for a in args]
            if kinds != _FUNCTIONS[tok.text][0] or (tok.text == "last" and not (
                    args[0][0] == "num" and is_count(args[0][1], 1) and args[0][1] <= MAX_LOOKBACK)) or (
                    tok.text == "percentile" and not (args[1][0] == "num" and 0 <= args[1][1] <= 1)) or (
                    tok.text == "index" and not (args[1][0] == "num" and is_count(args[1][1])
                                                 and args[1][1] < _longest(args[0]))):
                raise _error(tok, f"{tok.text}() takes {_FUNCTIONS[tok.text][2]}")
            return "call", tok.text, args
        raise _error(tok, f"expected a number but found {_describe(tok)}")


# name: (argument kinds, result kind, what it takes). last(k): the metric in the last k publishes
# of this table, newest first; the others reduce such a list to a number.
_FUNCTIONS = {"last": (["number"], "list", f"a whole number of runs from 1 to {MAX_LOOKBACK}"),
              "avg": (["list"], "number", "a list: last(k)"),
              "median": (["list"], "number", "a list: last(k)"),
              "abs": (["number"], "number", "a number: abs(index(last(2), 0) - index(last(2), 1))"),
              "min": (["list"], "number", "a list: last(k)"),
              "max": (["list"], "number", "a list: last(k)"),
              "sum": (["list"], "number", "a list: last(k)"),
              "std": (["list"], "number", "a list: last(k)"),
              "index": (["list", "number"], "number",
                        "a list and a position in it from 0 to k - 1: index(last(k), 0)"),
              "percentile": (["list", "number"], "number",
                             "a list and a fraction from 0 to 1: percentile(last(k), 0.9)")}


def _kind_of(expr):
    return _FUNCTIONS[expr[1]][1] if expr[0] == "call" else "number"


def _as_number(expr):
    """last(1) (or last()) where a number goes: its one value, index(last(1), 0)."""
    if expr[0] == "call" and expr[1] == "last" and expr[2] == [("num", 1)]:
        return "call", "index", [expr, ("num", 0)]
    return expr


def _reads_history(expr):
    if expr[0] == "call":
        return expr[1] == "last" or any(_reads_history(a) for a in expr[2])
    return expr[0] == "op" and (_reads_history(expr[2]) or _reads_history(expr[3]))


def history_runs(expr):
    """How many published runs a dynamic value reads: its longest last(k)."""
    if expr[0] == "call":
        own = expr[2][0][1] if expr[1] == "last" else 0
        return max([own] + [history_runs(a) for a in expr[2]])
    return max(history_runs(expr[2]), history_runs(expr[3])) if expr[0] == "op" else 0


def _longest(expr):
    """How many values a list can hold at most: last(k)'s k."""
    return expr[2][0][1] if expr[0] == "call" and expr[1] == "last" else 0


def _arith(op, left, right):
    left, right = _as_number(left), _as_number(right)
    if _kind_of(left) != "number" or _kind_of(right) != "number":
        raise _error(op, f"'{op.text}' needs numbers on both sides, not a list")
    if op.text == "/" and not _reads_history(right) and evaluate_dynamic(right, []) in (0, None):
        raise _error(op, "division by zero")
    return "op", op.text, left, right


_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2}


def dynamic_text(expr, outer=0):
    """A dynamic value as DQDL text (so a check spec stays JSON), with the parentheses the
    precedence needs and no more (its nesting is what its parse is held to)."""
    if expr[0] == "num":
        return dqdl_number(expr[1])
    if expr[0] == "call" and expr[2][1:] == [("num", 0)] and _as_number(expr[2][0]) == expr:
        return dynamic_text(expr[2][0])  # last(1) as a number: as written (parsed back the same)
    if expr[0] == "call":
        return f"{expr[1]}({', '.join(dynamic_text(a) for a in expr[2])})"
    rank = _PRECEDENCE[expr[1]]  # left-associative: a right operand of the same rank keeps its parentheses
    text = f"{dynamic_text(expr[2], rank)} {expr[1]} {dynamic_text(expr[3], rank + 1)}"
    return f"({text})" if rank < outer else text


def parse_dynamic(text):
    """A dynamic value from its text, as a condition in JSON gives it ("avg(last(10)) * 0.8")."""
    parser = _Parser(text)
    expr = parser.within_depth(parser.number)
    if parser.peek().kind != "end":
        raise _error(parser.peek(), f"unexpected {_describe(parser.peek())}")
    return expr


def evaluate_dynamic(expr, history):
    """The value of a dynamic expression; `history`: the metric's published values, newest
    first. last(k) with fewer than k runs uses those there are; None if a value needs a run
    there is none of (an empty history, an index past it) or divides by zero."""
    if expr[0] == "num":
        return expr[1]
    if expr[0] == "op":
        a, b = evaluate_dynamic(expr[2], history), evaluate_dynamic(expr[3], history)
        if a is None or b is None or (expr[1] == "/" and b == 0):
            return None
        return {"+": a + b, "-": a - b, "*": a * b, "/": a / b if b else None}[expr[1]]
    args = [evaluate_dynamic(a, history) for a in expr[2]]
    name = expr[1]
    if name == "last":
        return history[:args[0]]
    if name == "abs":
        return None if args[0] is None else abs(args[0])
    values = args[0]
    if not values:
        return None
    if name == "index":
        return values[args[1]] if isinstance(args[1], int) and 0 <= args[1] < len(values) else None
    if name == "percentile":  # linear between the two nearest ranks, as Spark's percentile
        if args[1] is None or not 0 <= args[1] <= 1:
            return None
        ranked, at = sorted(values), args[1] * (len(values) - 1)
        low = math.floor(at)
        return ranked[low] + (ranked[min(low + 1, len(ranked) - 1)] - ranked[low]) * (at - low)
    return {"avg": statistics.fmean, "median": statistics.median, "min": min, "max": max, "sum": math.fsum,
            "std": statistics.pstdev}[name](values)


def _is_param(tok):
    return tok.kind == "string" or (tok.kind == "word" and tok.text.lower() not in _KEYWORDS
                                    and tok.text not in RULES)  # a rule type: a missing comma before it


def _describe(tok):
    return "end of input" if tok.kind == "end" else repr(tok.text[:40])


def parse_dqdl(text):
    """The checks of a DQDL ruleset ("Rules = [ ... ]"), one per rule, named by its text."""
    parser = _Parser(text)
    return parser.within_depth(parser.ruleset)


# ----- from rules to checks -------------------------------------------------------------------

def _lit(value):
    """A Spark SQL string literal. Spark unescapes backslashes in literals and reads 'a''b' as
    two adjacent literals ('ab'), so quotes are escaped with a backslash, not doubled."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def dqdl_number(value):
    """A number as text without exponent (DQDL has none; Spark reads either)."""
    if not is_number(value):
        raise ValueError(f"not a finite number: {value!r}")
    if isinstance(value, Written) and re.fullmatch(r"-?\d+(\.\d+)?", value.text):
        return value.text  # the digits as written
    if isinstance(value, int):
        return str(value)
    text = format(Decimal(repr(value)), "f")
    return text if "." in text else text + ".0"  # 1.2e+28 read back as a fraction, not a (too long) int


def _complement(x):
    return round(1 - x, 12)


def _expr(sql):
    return {"check": "expression", "expr": sql}


def _columns(rule, one=True):
    names = [p.value if p.kind == "string" else p.text for p in rule.params]
    if (one and len(names) != 1) or not names or not all(names):
        raise _error(rule.tok, f"{rule.tok.text} takes {'one column' if one else 'column names'}, "
                               f"got {len(names)}")
    return names[0] if one else names


def _condition(rule, allowed=None):
    if rule.cond is None:
        raise _error(rule.tok, f"{rule.tok.text} needs a condition, e.g. > 0")
    if allowed and rule.cond.op not in allowed:
        raise _error(rule.cond.tok, f"'{rule.cond.op}' is not supported for {rule.tok.text}; "
                                    f"use {', '.join(allowed)}")
    return rule.cond


def _no_condition(rule):
    if rule.cond is not None:
        raise _error(rule.cond.tok, f"{rule.tok.text} takes no condition")


_VARIABLE_USE = re.compile(r"\$[a-zA-Z_][a-zA-Z0-9_.]*")
_RANGE_OPS = ("=", ">", ">=", "<", "<=", "between")
_CONDITION_OPS = ("!=", "not between", "in", "not in")  # a condition on the metric, not a range


def _bounds(rule, complement=False):
    """min/max of a numeric condition; DQDL's between is exclusive (awslabs/dqdl
    NumberBasedCondition: metric > low && metric < high), so both ends get *_exclusive. !=, not
    between, in and not in become a condition on the metric. `complement`: the condition is on
    1 - the metric (Completeness as the null fraction). An analyzer has none."""
    if rule.record:
        return {}
    cond = _condition(rule, _RANGE_OPS + _CONDITION_OPS)
    for a in cond.args:
        if a.kind not in ("num", "dyn"):
            raise _error(a.tok, f"expected a number, found {_describe(a.tok)}")
    if any(a.kind == "dyn" for a in cond.args):
        return {"condition": {"op": cond.op, "values": [dynamic_text(a.value) if a.kind == "dyn" else a.value
                                                        for a in cond.args]}}
    values = [a.value for a in cond.args]
    if cond.op in _CONDITION_OPS:
        if complement:
            values = sorted(_complement(v) for v in values)
        return {"condition": {"op": cond.op, "values": values}}
    return _range(cond.op, values)


def _range(op, values):
    v = values[0]
    return {"=": {"min": v, "max": v}, ">": {"min": v, "min_exclusive": True}, ">=": {"min": v},
            "<": {"max": v, "max_exclusive": True}, "<=": {"max": v},
            "between": {"min": v, "max": values[-1], "min_exclusive": True,
                        "max_exclusive": True}}[op]


def _threshold(rule, cond=None):
    """'with threshold >= t' (the share of rows that pass) as max_failing_fraction = 1 - t; any
    other comparator, a strict '>' too, is a condition on that share."""
    cond = cond or rule.threshold
    for t in cond.args:
        if t.kind != "num" or not 0 <= t.value <= 1:
            raise _error(t.tok, "a threshold is a number from 0 to 1")
    t = cond.args[0]
    if cond.op == ">=" or (cond.op == "=" and t.value == 1):
        return {} if t.value >= 1 else {"max_failing_fraction": _complement(t.value)}
    return {"threshold": {"op": cond.op, "values": [a.value for a in cond.args]}}


def _plain(check, one=True):
    """IsComplete, IsUnique, IsPrimaryKey, ColumnExists: a check of the rule's column(s), no condition."""
    def rule_to_check(rule):
        _no_condition(rule)
        return {"check": check, "column" if one else "columns": _columns(rule, one)}
    return rule_to_check


def _completeness(rule):
    # Completeness = non-NULL rows / rows, so ">= t" is exactly not_null failing at most 1 - t
    # of the rows; any other condition bounds null_fraction = 1 - completeness instead, and a
    # dynamic one is on the completeness itself (its history is of completeness).
    column = _columns(rule)
    if rule.cond is not None and any(a.kind == "dyn" for a in rule.cond.args):
        return _stat(column, "completeness", _bounds(rule))
    b = _bounds(rule, complement=True)
    if "condition" in b:
        return _stat(column, "null_fraction", b)
    if set(b) == {"min"} or b == {"min": 1, "max": 1}:
        check = {"check": "not_null", "column": column}
        if b["min"] < 1:
            check["max_failing_fraction"] = _complement(b["min"])
        return check
    flipped = {}
    for old, new in (("max", "min"), ("min", "max")):
        if old in b:
            flipped[new] = _complement(b[old])
            if b.get(old + "_exclusive"):
                flipped[new + "_exclusive"] = True
    return _stat(column, "null_fraction", flipped)


def _column_names_match_pattern(rule):
    _no_condition(rule)
    if len(rule.params) != 1 or rule.params[0].kind != "string":
        raise _error(rule.tok, "ColumnNamesMatchPattern takes one quoted regular expression")
    return {"check": "column_names", "pattern": rule.params[0].text[1:-1]}  # raw: the regex's


_TYPES = {"boolean": "boolean", "date": "date", "timestamp": "timestamp", "integer": "int",
          "int": "int", "double": "double", "float": "float", "long": "bigint", "bigint": "bigint",
          "short": "smallint", "smallint": "smallint", "byte": "tinyint", "tinyint": "tinyint",
          "string": "string", "decimal": "decimal(38,18)"}


def _column_data_type(rule):
    # Documented as "the values can be cast in Apache Spark to the type" (a string column of
    # digits passes = "INTEGER"), with a threshold: a per-row test, not the declared schema type.
    column, cond = _columns(rule), _condition(rule, ("=", "in", "!=", "not in"))
    types = []
    for a in cond.args:
        name = a.value.strip().lower() if a.kind == "str" else ""
        m = re.fullmatch(r"decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)", name)
        if name not in _TYPES and not m:
            raise _error(a.tok, f"unknown type {a.tok.text}; known: {', '.join(sorted(_TYPES))}")
        types.append(f"decimal({m[1]},{m[2]})" if m else _TYPES[name])
    c = quote(column)
    casts = [f"try_cast({c} AS {t}) IS NOT NULL" for t in types]
    if cond.op in ("!=", "not in"):  # castable to none of them
        return _expr(f"{c} IS NULL OR NOT ({' OR '.join(casts)})")
    return _expr(" OR ".join([f"{c} IS NULL"] + casts))


_DATETIME = re.compile(r"\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?")
_ORDERED = (">", ">=", "<", "<=", "between", "not between")


def _column_values(rule):
    # DQDL fails NULL rows in every ColumnValues rule but != and not in (unless NULL is listed).
    column, cond = _columns(rule), _condition(rule)
    op, args = cond.op, cond.args
    if _flag(rule, "ignoreCase"):
        return _column_values_any_case(column, cond)
    ordered = op not in ("between", "not between") or _same_order(*args)  # else least/greatest at the audit
    if op in _ORDERED:
        args = [_time_of_day(a) for a in args]
        for a in args:
            if not (a.kind in ("num", "now") or a.kind == "str" and _DATETIME.fullmatch(a.value)):
                raise _error(a.tok, "compare with a number, a date \"YYYY-MM-DD\", a time \"9:30 AM\" or now()")
            if a.kind == "str" and not parses(datetime.fromisoformat, a.value):  # Spark's cast: NULL
                raise _error(a.tok, f"{a.tok.text} is not a date")
    kinds = {a.kind for a in args}
    if {"num", "str"} <= kinds:  # the grammar's values (and lists) are numbers or strings
        raise _error(cond.tok, "compare with numbers or with strings, not both")
    if "num" in kinds and kinds & {"empty", "blank"}:  # Spark would compare the list as text
        raise _error(cond.tok, "a number is never EMPTY or WHITESPACES_ONLY: list numbers and NULL")
    if op == "matches":
        return {"check": "regex", "column": column, "pattern": _whole(args[0]), "allow_null": False}
    if op in ("=", "in") and kinds <= {"num", "str", "null"} and kinds - {"null"}:  # EMPTY: as text, below
        return {"check": "accepted_values", "column": column, "allow_null": False,
                "values": [None if a.kind == "null" else a.value for a in args]}
    if op == "!=" and kinds == {"null"}:
        return {"check": "not_null", "column": column}
    if op in _RANGE_OPS and kinds <= {"num", "str"}:
        return {"check": "between", "column": column, "allow_null": False,
                **_range(op, [a.value for a in args])}
    c = quote(column)
    sql = _sql_condition(c, op, args, ordered)
    if "num" in kinds and kinds <= {"num", "null"}:
        # a text column's values are read as doubles, as `between` reads them: Spark alone would
        # read "0.5" beside a whole number as one (0), and list "0.0" beside 0 as text. Any other
        # column keeps the exact comparison (a double would round a decimal's digits); Spark
        # folds typeof away, so one branch is left of the plan
        by_type = {"string": _sql_condition(f"CAST({c} AS DOUBLE)", op, [
            a._replace(kind="double") if a.kind == "num" else a for a in args], ordered)}
        by_type["float"] = _sql_condition(c, op, [a._replace(kind="double", value=as_float32(a.value))  # as fit_bounds
                                                  if a.kind == "num" else a for a in args], ordered)
        sql = ("CASE " + " ".join(f"WHEN typeof({c}) = '{t}' THEN {s}" for t, s in by_type.items())
               + f" ELSE {sql} END")
    return _row_outcome(column, op, sql, "null" in kinds)


def _row_outcome(column, op, sql, null_listed=False):
    """A ColumnValues-style row test as DQDL decides a row: NULL fails every rule but != and not
    in (unless NULL is listed), and a value the test cannot decide fails ('abc' > 5 on a string
    column, or a date string that does not cast: Spark's comparison is NULL, Glue's row fails)."""
    c = quote(column)
    if not null_listed:
        sql = f"{c} IS NULL OR ({sql})" if op in ("!=", "not in") else f"{c} IS NOT NULL AND ({sql})"
    return _expr(f"coalesce({sql}, false)")  # the shape ROW_OUTCOME reads back for the bounds


def _column_values_any_case(column, cond):
    # with ignoreCase = "true" (awslabs/dqdl lower-cases the operands): the value's lower case
    # against the lower-cased strings, or the pattern matched case-insensitively.
    if cond.op not in ("=", "!=", "in", "not in", "matches", "not matches"):
        raise _error(cond.tok, "ignoreCase goes with =, !=, in, not in, matches and not matches")
    if any(a.kind == "num" for a in cond.args):
        raise _error(cond.tok, "ignoreCase compares strings; a number has no case")
    pattern = "(?iu)" + _whole(cond.args[0]) if "matches" in cond.op else None
    if cond.op == "matches":
        return {"check": "regex", "column": column, "pattern": pattern, "allow_null": False}
    if cond.op == "not matches":
        sql = f"NOT ({quote(column)} RLIKE {_lit(pattern)})"
    else:
        args = [a._replace(value=a.value.lower()) if a.kind == "str" else a for a in cond.args]
        sql = _sql_condition(f"lower({quote(column)})", cond.op, args)
    return _row_outcome(column, cond.op, sql, any(a.kind == "null" for a in cond.args))


def _time_of_day(a):
    """A time of today ("9:30 AM", "21:45"; UTC) as a timestamp, in SQL evaluated at the audit
    (midnight UTC from the epoch seconds, whatever the session's time zone); other values as they are."""
    if a.kind != "str" or not _TIME_OF_DAY.fullmatch(a.value.strip()):
        return a
    seconds = file_time(a.value, 0)  # after midnight of day 0: the time's own seconds
    if seconds is None:
        raise _error(a.tok, f"{a.tok.text} is not a time of day")
    return _Val("now", f"timestamp_seconds(floor(unix_seconds(current_timestamp()) / 86400) * 86400 + "
                       f"{int(seconds)})", a.tok)


def _anchored(pattern):
    """True if the pattern can only match whole values (a conservative test)."""
    return (pattern.startswith("^") and pattern.endswith("$") and not pattern.endswith("\\$")
            and "|" not in pattern and "\\Q" not in pattern)


def _quote_left_open(pattern):
    """Whether a \\Q quote is still open at the pattern's end (Java quotes to the end), read as
    Java reads it: an escaped character is skipped, \\E ends a quote."""
    i, quoting = 0, False
    while i < len(pattern):
        if quoting:
            quoting, i = (False, i + 2) if pattern.startswith("\\E", i) else (True, i + 1)
        else:
            quoting, i = (pattern.startswith("\\Q", i), i + 2) if pattern[i] == "\\" else (False, i + 1)
    return quoting


def _whole(val):
    """The pattern as a whole-value match. Not spelled out in the docs, but their example (matches
    "[a-zA-Z]*") only makes sense so; Spark's RLIKE accepts partial matches, so it is anchored, at
    \\z: Java's $ also matches before a final line break ("12345\\n" would match [0-9]{5}). An
    open \\Q is closed first (it would quote the anchor); a comments flag, whose # comment could
    swallow the anchor, is refused."""
    pattern = val.value
    if re.search(r"(?<!\\)(?:\\\\)*\(\?[a-wyzA-Z]*x", pattern):
        raise _error(val.tok, "the x (comments) flag is not supported in a pattern")
    if _anchored(pattern):
        return pattern[:-1] + r"\z"
    close = "\\E" if _quote_left_open(pattern) else ""
    return f"^(?:{pattern}{close})\\z"


_BLANK = _lit(r"^\s+$")   # WHITESPACES_ONLY: one or more whitespace characters


def _sql_condition(lhs, op, args, ordered=True):
    """A Spark SQL condition for lhs <op> args, with DQDL's NULL/EMPTY/WHITESPACES_ONLY; between's
    ends as given if `ordered`, else the lower of them first at the audit."""
    values = [_sql_value(a) for a in args if a.kind not in ("null", "empty", "blank")]
    if not ordered and len(values) == 2:  # a date beside now() or a time of day: as a time
        ends = ", ".join(f"CAST({v} AS TIMESTAMP)" if a.kind == "str" else v for a, v in zip(args, values))
        values = [f"least({ends})", f"greatest({ends})"]
    null = any(a.kind == "null" for a in args)
    # EMPTY and WHITESPACES_ONLY test the value as text: a date column beside '' would read it as
    # a date (NULL), and that NULL would fail every row of a != or not in
    kinds = {a.kind for a in args}
    blanks = ([f"CAST({lhs} AS STRING) = ''"] if "empty" in kinds else []) + (
        [f"{lhs} RLIKE {_BLANK}"] if "blank" in kinds else [])
    # Spark's IN compares a date or time column with a string as text ("2024-01-01 00:00:00" is
    # not "2024-01-01"), where = and <> cast the string to the column's type: dates are listed so
    dated = any(a.kind == "str" and _DATETIME.fullmatch(a.value) for a in args)
    among = (f"({' OR '.join(f'{lhs} = {v}' for v in values)})" if dated else f"{lhs} IN ({', '.join(values)})")
    if op == "=" and values:
        return f"{lhs} = {values[0]}"
    if op in ("=", "in"):
        parts = ([among] if values else []) + ([f"{lhs} IS NULL"] if null else []) + blanks
        return parts[0] if len(parts) == 1 else "(" + " OR ".join(parts) + ")"
    if op == "!=" and values:
        return f"{lhs} <> {values[0]}"
    if op in ("!=", "not in"):
        return " AND ".join(([f"{lhs} IS NOT NULL"] if null else [])
                            + ([f"NOT {among}" if dated else f"{lhs} NOT IN ({', '.join(values)})"] if values else [])
                            + [f"NOT ({b})" for b in blanks])
    if op == "not matches":
        return f"NOT ({lhs} RLIKE {_lit(_whole(args[0]))})"
    if len(values) != len(args):
        raise _error(args[0].tok, f"NULL, EMPTY and WHITESPACES_ONLY cannot be used with {op}")
    if op == "between":
        return f"{lhs} > {values[0]} AND {lhs} < {values[1]}"
    if op == "not between":
        return f"({lhs} <= {values[0]} OR {lhs} >= {values[1]})"
    return f"{lhs} {op} {values[0]}"


def _sql_value(val):
    if val.kind == "num":  # a whole number as a bigint: text beside an int reads as an int, NULL past 2^31;
        # a fraction as the decimal it was written as (a decimal column compares every digit), up
        # to 18 decimals and 20 whole digits: beside a decimal(38,18) or bigint column, a wider one
        # would not fit Spark's common type (NULL: a failed row)
        written = getattr(val.value, "text", "")
        if isinstance(val.value, int):
            return dqdl_number(val.value) + "L"
        return written if re.fullmatch(r"-?\d{1,20}(\.\d{1,18})?", written) else dqdl_number(float(val.value))
    if val.kind == "double":  # beside a text column read as a double
        return dqdl_number(val.value) + "D"
    if val.kind == "str":  # (EMPTY and WHITESPACES_ONLY are tests of their own: _sql_condition)
        return _lit(val.value)
    if val.kind == "now":
        return val.value
    raise _error(val.tok, f"{_describe(val.tok)} cannot be used here")


def _column_length(rule):
    # Each row's length; the docs say NULL counts as length 0 (so > 4 fails it, < 6 passes it).
    column, cond = _columns(rule), _condition(rule)
    for a in cond.args:
        if a.kind != "num":
            raise _error(a.tok, f"expected a number, found {_describe(a.tok)}")
    return _expr(_sql_condition(f"coalesce(length({quote(column)}), 0)", cond.op, cond.args))


def _row_count(rule):
    if rule.params:
        raise _error(rule.params[0], "RowCount takes no column")
    b, check = _bounds(rule), {"check": "row_count"}
    if "condition" in b:
        for a in rule.cond.args:
            if a.kind != "dyn" and not (is_number(a.value) and a.value >= 0 and a.value == int(a.value)):
                raise _error(a.tok, "RowCount compares with whole numbers >= 0 here")
        b["condition"]["values"] = [int(v) if isinstance(v, float) else v for v in b["condition"]["values"]]
        return {**check, **b}
    if "min" in b:   # whole rows: > 9.5 and > 9 both mean >= 10
        low = math.floor(b["min"]) + 1 if b.get("min_exclusive") else math.ceil(b["min"])
        check["min"] = max(0, low)
    if "max" in b:
        check["max"] = math.ceil(b["max"]) - 1 if b.get("max_exclusive") else math.floor(b["max"])
    if "max" in check and check["max"] < check.get("min", 0):
        raise _error(rule.cond.tok, "this RowCount condition can never pass")
    return check


def _stat(column, stat, bounds):
    """A stat check of one column, or of several (a list)."""
    columns = {"columns": column} if isinstance(column, list) and len(column) > 1 else \
        {"column": column[0] if isinstance(column, list) else column}
    return {"check": "stat", **columns, "stat": stat, **bounds}


def _stat_columns(rule, columns):
    """The columns a statistic's rule names: `columns` of them (1, 2, ...; None: one or more), or
    none for 0 (a statistic of the table): then None."""
    if columns == 0:
        if rule.params:
            raise _error(rule.params[0], f"{rule.tok.text} takes no column")
        return None
    names = _columns(rule, one=columns == 1)
    if columns not in (1, None) and len(names) != columns:
        raise _error(rule.tok, f"{rule.tok.text} takes {columns} columns, got {len(names)}")
    return names


def _stat_rule(stat, columns=1):
    """A rule that is a statistic of `columns` columns (0: of the table, None: one or more)."""
    def rule_to_check(rule):
        names = _stat_columns(rule, columns)
        return {"check": "stat", "stat": stat, **_bounds(rule)} if names is None else _stat(names, stat, _bounds(rule))
    return rule_to_check


_QUOTED_SQL = re.compile(r"'(?:\\[\s\S]|[^'\\])*'|\"(?:\\[\s\S]|[^\"\\])*\"|`(?:``|[^`])*`")


def _batch_alias(sql):
    """DQDL's `primary` (the dataset under test) becomes {batch}, outside quotes and backticks."""
    out, pos = [], 0
    for m in list(_QUOTED_SQL.finditer(sql)) + [None]:
        end = m.start() if m else len(sql)
        out.append(re.sub(r"(?i)(?<![.\w])primary\b", "{batch}", sql[pos:end]))
        if m:
            out.append(m.group())
            pos = m.end()
    return "".join(out)


def _custom_sql(rule):
    # With a condition: on the one number the query returns. Without: the row-level form, the
    # rows the query returns pass (with threshold: on their share).
    query, = _strings(rule, "one quoted SQL statement", 1)
    if rule.cond is None:
        return {"check": "sql_rows", "query": _batch_alias(query)}
    if rule.threshold is not None:
        raise _error(rule.threshold.tok, "CustomSql takes a condition or (row-level) a threshold, not both")
    return {"check": "sql", "query": _batch_alias(query), **_bounds(rule)}


def _referential_integrity(rule):
    # The value is the share of primary rows found in the reference ("alias.col" or
    # "alias.{a,b}"): a condition on the share of rows that pass, as a threshold is.
    if len(rule.params) != 2 or any(p.kind != "string" for p in rule.params):
        raise _error(rule.tok, 'ReferentialIntegrity takes "cols" "table.col" or "table.{a,b}"')
    cols = [c.strip() for c in rule.params[0].value.split(",")]
    ref = rule.params[1].value.strip()
    m = re.fullmatch(r"(.+)\.\{([^{}]*)\}", ref)
    table, _, col = ref.rpartition(".")
    if m:
        table, col = m[1], m[2]
    ref_cols = [c.strip() for c in col.split(",")]
    if not table or not all(cols + ref_cols) or len(cols) != len(ref_cols):
        raise _error(rule.params[1], f"cannot pair {rule.params[0].text} with {rule.params[1].text}")
    _reference(rule.params[1], table)
    check = {"check": "relationship", "columns": cols, "to_table": table, "to_columns": ref_cols}
    cond = None if rule.record else _condition(rule)
    for a in [] if cond is None else cond.args:
        if not (a.kind == "num" and 0 <= a.value <= 1 or a.kind == "dyn" and _reads_history(a.value)):
            raise _error(a.tok, "ReferentialIntegrity compares with a share from 0 to 1")
    if cond is None or any(a.kind == "dyn" for a in cond.args):  # the share as a metric (its history)
        return {**check, **_bounds(rule)}
    return {**check, **_threshold(rule, cond)}


def _data_freshness(rule):
    # Documented per row: the age (now - value) of every row must satisfy the condition and NULL
    # rows fail ("80.00 % of rows passed"). wap_etl's freshness check only looks at the newest
    # value, so this becomes a row expression: age <= 24 hours  <=>  col >= now - 24 hours.
    column, cond = _columns(rule), _condition(rule, ("<=", "<", ">=", ">", "between", "not between"))
    for a in cond.args:
        if a.kind != "dur":
            raise _error(a.tok, "expected a duration such as 24 hours")
    c = quote(column)
    lim = [f"current_timestamp() - INTERVAL {a.value[0]} {a.value[1]}" for a in cond.args]
    flip = {"<=": ">=", "<": ">", ">=": "<=", ">": "<"}
    sql = (f"{c} {flip[cond.op]} {lim[0]}" if cond.op in flip else
           f"{c} < {lim[0]} AND {c} > {lim[1]}" if cond.op == "between" else
           f"({c} >= {lim[0]} OR {c} <= {lim[1]})")
    return _row_outcome(column, cond.op, sql)


def _strings(rule, usage, low, high=None):
    """The rule's parameters, `low` to `high` quoted strings."""
    if not low <= len(rule.params) <= (high or low) or any(p.kind != "string" for p in rule.params):
        raise _error(rule.tok, f"{rule.tok.text} takes {usage}")
    return [p.value for p in rule.params]


def _reference(tok, name):
    """A reference dataset as a rule names it, checked at its place: namespace.table or an alias."""
    if "." not in name and not ALIAS.match(name):
        raise _error(tok, f"{name!r} is neither namespace.table nor an alias (letters, digits, _ and -, "
                          "starting with a letter or _)")
    return name


def _reference_rule(check):
    """RowCountMatch, SchemaMatch: a condition on the batch's share of a reference."""
    def rule_to_check(rule):
        reference, = _strings(rule, '"reference" (an alias or namespace.table)', 1)
        return {"check": check, "reference": _reference(rule.params[0], reference), **_bounds(rule)}
    return rule_to_check


def _aggregate_match(rule):
    return {"check": "aggregate_match", "aggregates": _strings(rule, 'two aggregates, e.g. "sum(amount)" '
                                                                    '"sum(reference.total)"', 2),
            **_bounds(rule)}


def _mappings(tok):
    """Column mappings "a->ref_a,b": (batch columns, reference columns)."""
    pairs = [part.split("->") for part in tok.value.split(",")]
    if not all(len(p) <= 2 and all(x.strip() for x in p) for p in pairs):
        raise _error(tok, f'cannot read column mappings {tok.text}; expected "a", "a->b" or "a->b,c"')
    return [p[0].strip() for p in pairs], [p[-1].strip() for p in pairs]


def _dataset_match(rule):
    # Glue's share of the batch's rows equal to the reference row of their key; see README.
    _strings(rule, '"reference" "keys" and optionally "match columns", e.g. "ref" "id->ref_id" "a,b->c"', 2, 3)
    columns, to_columns = _mappings(rule.params[1])
    check = {"check": "dataset_match", "reference": _reference(rule.params[0], rule.params[0].value), "columns": columns,
             "to_columns": to_columns}
    if len(rule.params) == 3:
        check["match_columns"], check["to_match_columns"] = _mappings(rule.params[2])
    return {**check, **_bounds(rule)}


def _file_paths(rule, most=1):
    """A file rule's DataPath parameters (quoted); none: the batch's own source files."""
    if len(rule.params) > most or any(p.kind != "string" for p in rule.params):
        raise _error(rule.tok, f"{rule.tok.text} takes {'one or two quoted paths' if most > 1 else 'one quoted path'} "
                               "or none (the batch's source files)")
    return [p.value for p in rule.params]


def _path(paths):
    return {"path": paths[0]} if paths else {}


_SELECTION_TAGS = {"recentFiles": "recent_files", "uriRegex": "uri_regex"}


def _source(rule, paths):
    """A file rule's location and its file selection tags: with recentFiles = 3, with uriRegex =
    "\\.csv$", with filterOrder in ["uriRegex", "recentFiles"] (the grammar's list form)."""
    spec = _path(paths)
    for name, cond in rule.tags.items():
        value = cond.args[0]
        if name == "recentFiles":
            n = value.value if value.kind == "num" else int(value.value) if value.kind == "str" \
                and re.fullmatch(r"[0-9]+", value.value) else None
            if cond.op != "=" or not is_count(n, 1):
                raise _error(cond.tok, "recentFiles = a whole number of files >= 1")
            spec["recent_files"] = n
        elif name == "uriRegex":
            if cond.op != "=" or value.kind != "str" or not value.value:
                raise _error(cond.tok, 'uriRegex = "a regular expression"')
            try:
                re.compile(value.value)
            except re.error as e:
                raise _error(value.tok, f"uriRegex is not a regular expression ({e})") from None
            spec["uri_regex"] = value.value
        elif name == "filterOrder":
            order = [a.value for a in cond.args]
            if cond.op != "in" or not all(isinstance(x, str) for x in order) or sorted(order) != sorted(_SELECTION_TAGS):
                raise _error(cond.tok, 'filterOrder in ["recentFiles", "uriRegex"], in the order to apply them')
            spec["filter_order"] = [_SELECTION_TAGS[x] for x in order]
        elif name == "failFast":  # the first failing file fails the rule: every file must pass
            _flag(rule, name)
        elif name == "timeZone":
            if cond.op != "=" or value.kind != "str" or time_zone(value.value) is None:
                raise _error(cond.tok, 'timeZone = "an IANA time zone", e.g. "America/New_York"')
            spec["time_zone"] = value.value
    return spec


def _now_text(sql):
    """now() as a time value's text, from the SQL the operand parser made of it."""
    m = re.fullmatch(r"\(?current_timestamp\(\)(?: ([+-]) INTERVAL (\d+) (\w+)\))?", sql)
    return "now()" + (f" {m[1]} {m[2]} {m[3].lower()}" if m[1] else "")


def _file_freshness(rule):
    # Each file's last modification time against the times; a threshold is on the share of files.
    cond = _condition(rule)
    values = []
    for a in cond.args:
        text = _now_text(a.value) if a.kind == "now" else a.value if a.kind == "str" else None
        if text is None or file_time(text, 0) is None:
            raise _error(a.tok, 'compare with now(), (now() - 24 hours), a date "YYYY-MM-DD" or a time "21:45"')
        values.append(text)
    return {"check": "file_freshness", **_source(rule, _file_paths(rule)), "condition": {"op": cond.op, "values": values}}


def _file_size(rule):
    # Each file's size in bytes (1 KB = 1024 B); a threshold is on the share of files.
    cond = _condition(rule, _RANGE_OPS + _CONDITION_OPS)
    for a in cond.args:  # a bare whole number is bytes, as in Glue
        if not (a.kind == "size" or a.kind == "num" and is_count(a.value)):
            raise _error(a.tok, "expected a size such as 10 MB (units: B, KB, MB, GB, TB), or bytes")
    values = [a.value for a in cond.args]
    bounds = {"condition": {"op": cond.op, "values": values}} if cond.op in _CONDITION_OPS else _range(cond.op, values)
    return {"check": "file_size", **_source(rule, _file_paths(rule)), **bounds}


def _file_uniqueness(rule):
    # The share of files whose content no other file of the set has.
    return {"check": "file_uniqueness", **_source(rule, _file_paths(rule)), **_bounds(rule)}


def _flag(rule, name):
    """A rule's `with <name> = "true"` (or "false") tag; absent: False."""
    cond = rule.tags.get(name)
    if cond is None:
        return False
    value = cond.args[0]
    if cond.op != "=" or value.kind != "str" or value.value.lower() not in ("true", "false"):
        raise _error(cond.tok, f'{name} = "true" or "false"')
    return value.value.lower() == "true"


def _file_match(rule):
    # Two paths: the same contents on both sides. One or none: every file's checksum in the list.
    paths = _file_paths(rule, most=2)
    algorithm, by_name = rule.tags.get("hashAlgorithm"), rule.tags.get("matchFileName")
    if len(paths) == 2:
        _no_condition(rule)
        if algorithm:
            raise _error(algorithm.tok, "hashAlgorithm goes with checksums")
        spec = {"check": "file_match", **_source(rule, paths[:1]), "compare_path": paths[1]}
        if by_name:
            spec["match_file_name"] = _flag(rule, "matchFileName")
        return spec
    if by_name:
        raise _error(by_name.tok, "matchFileName goes with two paths")
    cond = _condition(rule, ("in",))
    for a in cond.args:
        if a.kind != "str" or not re.fullmatch(r"[0-9A-Fa-f]+", a.value):
            raise _error(a.tok, "a checksum is a quoted hex digest")
    spec = {"check": "file_match", **_source(rule, paths), "checksums": [a.value for a in cond.args]}
    if algorithm:
        value = algorithm.args[0]
        if algorithm.op != "=" or value.kind != "str" or value.value not in HASH_ALGORITHMS:
            raise _error(algorithm.tok, f"hashAlgorithm = one of {', '.join(HASH_ALGORITHMS)}")
        spec["algorithm"] = value.value
    return spec


def _detect_anomalies(rule):
    # The metric against its history in the run ledger (the anomaly check); Completeness as the
    # null fraction, whose distance from the median is the same. Two metrics: both (a composite).
    _no_condition(rule)
    names = [p.value if p.kind == "string" else p.text for p in rule.params]
    if names and names[0].lower() == "customsql":
        if len(rule.params) != 2 or rule.params[1].kind != "string":
            raise _error(rule.tok, 'DetectAnomalies "CustomSql" takes one quoted SQL statement')
        return {"check": "anomaly", "metric": "sql", "query": _batch_alias(names[1])}
    watched = [name for name, kind in RULE_TYPES.items() if kind.metric and kind.detected]
    if not names or names[0] not in watched:
        raise _error(rule.params[0] if rule.params else rule.tok,
                     f"DetectAnomalies takes a rule name: {', '.join(watched)}, CustomSql")
    stats, arity = RULE_TYPES[names[0]].metric
    arity = 1 if arity is None else arity
    if len(names) - 1 != arity or not all(names[1:]):
        raise _error(rule.tok, f"DetectAnomalies \"{names[0]}\" takes {arity} column name(s)")
    checks = [{"check": "anomaly", "metric": f"{stat}:{','.join(names[1:])}" if arity else stat}
              for stat in ((stats,) if isinstance(stats, str) else stats)]
    return checks[0] if len(checks) == 1 else {"check": "composite", "op": "and", "rules": checks}


@dataclass(frozen=True)
class RuleType:
    """One DQDL rule type, as awslabs/dqdl's rules-config.json lists it: `to_check` makes its check
    spec from a _Rule (None: an analyzer only); whether it takes `where` and `with threshold`, and
    its other `with` tags. `metric`: the statistic (or pair of them, as Glue has ColumnValues' and
    ColumnLength's) it measures and how many columns it names (0: the table's, None: one or more),
    which an Analyzers block records and, if `detected`, DetectAnomalies watches; an Analyzers block
    records `recorded(rule)` instead where given, or with `records_rule` the value its rule compares."""
    to_check: object = None
    where: bool = False
    threshold: bool = False
    tags: tuple = ()
    metric: tuple = None
    detected: bool = True
    recorded: object = None
    records_rule: bool = False

    def analyzer(self, rule):
        """The checks an Analyzers block records for this rule type (action record)."""
        if self.recorded is not None or self.records_rule:
            return self.recorded(rule) if self.recorded is not None else [self.to_check(rule)]
        stat, columns = self.metric
        names = _stat_columns(rule, columns)
        if names is None:
            return [{"check": "row_count"} if stat == "row_count" else {"check": "stat", "stat": stat}]
        if isinstance(stat, tuple):
            return [{**_stat(names, one, {}), "part": one} for one in stat]
        return [_stat(names, stat, {})]

    @property
    def analyzed(self):
        return self.metric is not None or self.recorded is not None or self.records_rule


def _stat_type(stat, columns=1, detected=True):
    """A rule type that is a statistic of `columns` columns, bounded by its condition."""
    return RuleType(_stat_rule(stat, columns), where=columns != 0, metric=(stat, columns), detected=detected)


_FILE_TAGS = ("recentFiles", "uriRegex", "filterOrder")
RULE_TYPES = {
    "IsComplete": RuleType(_plain("not_null"), where=True),
    "Completeness": RuleType(_completeness, where=True, metric=("null_fraction", 1)),
    "IsUnique": RuleType(_plain("unique", one=False), where=True),
    # Uniqueness = rows whose value occurs exactly once / rows with a value, as Deequ (which Glue DQ
    # builds on) counts them: a ratio with its own denominator, so a stat, not unique with a tolerance
    "Uniqueness": _stat_type("unique_fraction", None),
    "IsPrimaryKey": RuleType(_plain("primary_key", one=False), where=True),
    "ColumnExists": RuleType(_plain("column_exists")),
    "ColumnDataType": RuleType(_column_data_type, where=True, threshold=True),
    "ColumnValues": RuleType(_column_values, where=True, threshold=True, tags=("ignoreCase",),
                             metric=(("min", "max"), 1)),
    "ColumnLength": RuleType(_column_length, where=True, metric=(("min_length", "max_length"), 1)),
    "RowCount": RuleType(_row_count, where=True, metric=("row_count", 0)),
    "Mean": _stat_type("mean"), "Sum": _stat_type("sum"), "StandardDeviation": _stat_type("stddev_pop"),
    "DistinctValuesCount": _stat_type("distinct_count", None),
    "CustomSql": RuleType(_custom_sql, threshold=True, recorded=lambda rule: [
        {"check": "sql", "query": _batch_alias(*_strings(rule, "one quoted SQL statement", 1))}]),
    "Variance": _stat_type("variance", detected=False), "Entropy": _stat_type("entropy"),
    "UniqueValueRatio": _stat_type("unique_value_ratio"),
    "ColumnCount": _stat_type("column_count", 0), "ColumnCorrelation": _stat_type("correlation", 2),
    "ColumnNamesMatchPattern": RuleType(_column_names_match_pattern),
    "ReferentialIntegrity": RuleType(_referential_integrity, records_rule=True),
    "DataFreshness": RuleType(_data_freshness, where=True),
    "RowCountMatch": RuleType(_reference_rule("row_count_match"), records_rule=True),
    "SchemaMatch": RuleType(_reference_rule("schema_match"), records_rule=True),
    "AggregateMatch": RuleType(_aggregate_match, records_rule=True),
    "DatasetMatch": RuleType(_dataset_match, records_rule=True),
    "FileFreshness": RuleType(_file_freshness, threshold=True, tags=_FILE_TAGS + ("timeZone", "failFast")),
    "FileSize": RuleType(_file_size, threshold=True, tags=_FILE_TAGS + ("failFast",)),
    "FileUniqueness": RuleType(_file_uniqueness, tags=_FILE_TAGS),
    "FileMatch": RuleType(_file_match, tags=("hashAlgorithm", "matchFileName") + _FILE_TAGS),
    "DetectAnomalies": RuleType(_detect_anomalies),
    "AllStatistics": RuleType(recorded=lambda rule: [
        {"check": "profile", "column": "*" if _columns(rule) == "AllColumns" else _columns(rule)}]),
}
RULES = tuple(sorted(name for name, kind in RULE_TYPES.items() if kind.to_check))
ANALYZERS = tuple(sorted(name for name, kind in RULE_TYPES.items() if kind.analyzed))
_SECTION_KEYS = {"Metadata": ("Version",), "DataSources": ("Primary", "AdditionalDataSources")}


def dqdl_string(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def dqdl_value(value):
    return "NULL" if value is None else dqdl_string(value) if isinstance(value, str) else dqdl_number(value)


def to_dqdl(specs):
    """Suggested checks as a DQDL ruleset that means the same: ColumnValues rules fail NULL rows
    in DQDL, so NULL is listed, or the rule is limited to non-NULL rows, where the column has any."""
    rules = []
    for s in specs:
        column = dqdl_string(s.get("column") or "")
        non_null = f' where {dqdl_string(quote(s["column"]) + " IS NOT NULL")}' if s.get("column") else ""
        if s["check"] == "row_count":  # DQDL's between excludes its ends
            rules.append(f"RowCount between {s['min'] - 1} and {s['max'] + 1}")
        elif s["check"] == "not_null":
            rules.append(f"IsComplete {column}")
        elif s["check"] == "unique":
            rules.append("IsUnique " + " ".join(dqdl_string(c) for c in s["columns"]))
        elif s["check"] == "accepted_values":
            rules.append(f"ColumnValues {column} in [{', '.join(dqdl_value(v) for v in s['values'])}]")
        elif s["check"] == "between":
            rules += [f"ColumnValues {column} >= {dqdl_value(s['min'])}{non_null}",
                      f"ColumnValues {column} <= {dqdl_value(s['max'])}{non_null}"]
        elif s["check"] == "stat" and s["stat"] == "null_fraction":
            rules.append(f"Completeness {column} >= {dqdl_number(_complement(s['max']))}")
        else:
            raise ValueError(f"no DQDL for {s}")
    return "Rules = [\n    " + ",\n    ".join(rules) + "\n]\n"


# =================================================================================================
# Session
# =================================================================================================

def find_iceberg_jar(explicit=None):
    """The Iceberg runtime jar: --iceberg_jar, $ICEBERG_SPARK_RUNTIME_JAR, then the PyPI package."""
    for candidate in (explicit, os.environ.get("ICEBERG_SPARK_RUNTIME_JAR")):
        if candidate:
            if not os.path.isfile(candidate):
                raise bad_input(f"--iceberg_jar: {candidate!r} is not a file")
            return candidate
    try:
        import snowpark_connect_deps_iceberg
    except ImportError:
        return None
    folder = os.path.join(os.path.dirname(snowpark_connect_deps_iceberg.__file__), "jars")
    jars = sorted(n for n in os.listdir(folder)
                  if n.startswith("iceberg-spark-runtime-3.5_2.12-") and n.endswith(".jar"))
    return os.path.join(folder, jars[-1]) if jars else None


def iceberg_jar_conf(explicit=None):
    """The Spark setting that puts Iceberg on the classpath: a local jar, else Maven."""
    jar = find_iceberg_jar(explicit)
    return ("spark.jars", jar) if jar else ("spark.jars.packages", ICEBERG_MAVEN)


def catalog_conf(p):
    """Spark settings that define the catalog: Glue Data Catalog + S3, or a local Hadoop folder."""
    prefix = f"spark.sql.catalog.{p.catalog}"
    conf = {prefix: "org.apache.iceberg.spark.SparkCatalog"}
    if p.catalog_type == "glue":
        conf[f"{prefix}.catalog-impl"] = "org.apache.iceberg.aws.glue.GlueCatalog"
        conf[f"{prefix}.io-impl"] = "org.apache.iceberg.aws.s3.S3FileIO"
        # Every commit is a Glue UpdateTable, several per run: archiving each replaced version
        # would use up Glue's quota of table versions. Iceberg 1.7.1's default too; said here.
        conf[f"{prefix}.glue.skip-archive"] = "true"
    else:
        conf[f"{prefix}.type"] = "hadoop"
    if p.warehouse:
        conf[f"{prefix}.warehouse"] = p.warehouse
    # Concurrent runs must see each other's commits, not a cached table.
    conf[f"{prefix}.cache-enabled"] = "false"
    return conf


def create_session(p):
    """Reuse the active session (Glue, tests, notebooks) or build a local one with Iceberg."""
    from pyspark.sql import SparkSession
    glue_job = None
    if p.on_glue:
        from awsglue.context import GlueContext
        from awsglue.job import Job
        from pyspark import SparkContext
        glue_context = GlueContext(SparkContext.getOrCreate())
        spark = glue_context.spark_session
        glue_job = Job(glue_context)
        glue_job.init(p.glue_args.get("JOB_NAME", "wap_etl"), p.glue_args)
    else:
        spark = SparkSession.getActiveSession()
        if spark is None:
            builder = SparkSession.builder.appName("wap_etl").config(
                "spark.sql.extensions", ICEBERG_EXTENSIONS)
            if not os.environ.get("PYSPARK_GATEWAY_PORT"):  # not launched by spark-submit
                builder = builder.master(os.environ.get("WAP_SPARK_MASTER", "local[*]"))
            builder = builder.config(*iceberg_jar_conf(p.iceberg_jar))
            spark = builder.config("spark.ui.showConsoleProgress", "false").getOrCreate()
            spark.sparkContext.setLogLevel("WARN")
    from py4j.java_gateway import JavaClass
    if not isinstance(spark.sparkContext._jvm.org.apache.iceberg.spark.SparkCatalog, JavaClass):
        raise bad_input("session: the Iceberg Spark runtime is not on the classpath; with "
                        "spark-submit pass --jars <iceberg-spark-runtime jar> (see README) or "
                        f"--packages {ICEBERG_MAVEN}")
    if ICEBERG_EXTENSIONS not in (spark.conf.get("spark.sql.extensions", "") or ""):
        raise bad_input("session: spark.sql.extensions must include " + ICEBERG_EXTENSIONS
                        + " (on Glue: --datalake-formats iceberg and --conf, see README)")
    prefix = f"spark.sql.catalog.{p.catalog}"
    if not spark.conf.get(prefix, None):
        if not p.warehouse:  # (on Glue, a hadoop catalog's default ./warehouse would be on the driver)
            raise bad_input(f"--warehouse: required for a {p.catalog_type} catalog"
                            + (" (an s3:// prefix)" if p.catalog_type == "glue" else " on Glue; use --catalog_type glue"))
        for key, value in catalog_conf(p).items():
            spark.conf.set(key, value)
    check_catalog_is_safe(p.catalog, spark.conf.get(f"{prefix}.type", None),
                          spark.conf.get(f"{prefix}.warehouse", None), spark.conf.get(f"{prefix}.catalog-impl", None))
    # Every Iceberg read of the run (the audit's, a sql check's named tables) computes MIN/MAX from
    # rows: file bounds leave NaN out, so a double column holding NaN would report its largest number
    spark.conf.set("spark.sql.iceberg.aggregate-push-down.enabled", "false")
    pin_statics(spark.sparkContext._jvm)
    if catalog_caches(spark, p.catalog):
        log.warning("catalog %s caches tables, but the guard and exactly-once need fresh metadata: "
                    "set %s.cache-enabled=false (on Glue: in --conf)", p.catalog, prefix)
    return spark, glue_job


PINNED = ("functions", "PythonUtils", "PythonSQLUtils",  # the static methods behind F.*, select...
          "py4j")  # py4j.reflection.TypeUtil: pyspark asks it a dozen times about every Java exception


class Pinned:
    """A Java package or class whose members are each found once. py4j asks the JVM what
    `jvm.functions` is, then what its `col` is, on every access: three round trips for each
    F.col(...), and five for each of the dozen questions pyspark asks about a Java exception."""

    def __init__(self, target):
        self._target = target

    def __getattr__(self, name):  # methods and classes only: a static field's value would be kept
        value = getattr(self._target, name)
        if not name.startswith("_"):
            if type(value).__name__ in ("JavaPackage", "JavaClass"):
                value = Pinned(value)
            setattr(self, name, value)
        return value

    def __call__(self, *args):  # a class's constructor
        return self._target(*args)


def pin_statics(jvm):
    """Point pyspark's lookups of the classes it calls most at Pinned ones (once per JVM view)."""
    for name in PINNED:
        try:
            if not isinstance(jvm.__dict__.get(name), Pinned):
                setattr(jvm, name, Pinned(getattr(jvm, name)))
        except Exception as e:  # another pyspark build: looked up the usual way, as before
            log.info("%s not pinned: %s", name, first_line(e))


# =================================================================================================
# Read
# =================================================================================================

def read_source(spark, p, table_schema=None, paths=None):
    """Read the batch with the user's reader options (CSV: header and type inference by default).

    CSV into an existing table reads with the table's column types: one pass instead of two, the
    same types every batch (a header-only file would otherwise infer strings), and FAILFAST, so
    a malformed value fails the run instead of becoming NULL.
    """
    options = {"csv": {"header": "true", "inferSchema": "true"},
               "parquet": {"mergeSchema": "true"}}.get(p.source_format, {})
    options.update({k: str(v) for k, v in p.source_options.items()})
    use_table = (p.source_format == "csv" and table_schema is not None
                 and options.get("header", "false").lower() == "true"
                 and "inferSchema" not in p.source_options
                 and p.source_schema in ("auto", "table"))
    if paths is None or paths == [p.source_path]:
        paths = p.source_path
    else:  # --source_files new: literal files under the folder, partition folders (k=v) kept
        if extension_of(p.source_path) == "":
            options.setdefault("basePath", p.source_path)
        paths = [re.sub(r"([\\\[\]{}*?])", r"\\\1", f) for f in paths]
    if p.source_schema == "table" and table_schema is None:
        log.info("--source_schema table: the table does not exist yet, so types are inferred")
    try:
        reader = spark.read.format(p.source_format)
        if use_table:
            header = (csv_header_in_driver(spark, options, paths)
                      or reader.options(**{**options, "inferSchema": "false"}).load(paths).columns)
            types = {f.name.lower(): f.dataType for f in table_schema.fields}
            from pyspark.sql import types as T
            schema = T.StructType([T.StructField(name, types.get(name.lower(), T.StringType()))
                                   for name in header])
            options = {**options, "inferSchema": "false", "mode": "FAILFAST", "enforceSchema": "false"}
            return reader.options(**options).schema(schema).load(paths)
        return reader.options(**options).load(paths)
    except Exception as e:
        message = first_line(e)
        if "PATH_NOT_FOUND" in message or "Path does not exist" in message:
            raise bad_input(f"--source_path: {message}") from None
        if "COLUMN_ALREADY_EXISTS" in message:  # JSON keys that differ only in case, at any depth
            raise bad_input(f"--source_path: duplicate column names ({message})") from None
        if "UNABLE_TO_INFER_SCHEMA" in message:
            raise bad_input(f"--source_path: no readable {p.source_format} data ({message})") from None
        if "CANNOT_MERGE" in message or "Failed to merge" in message:
            raise bad_input(f"--source_path: the parquet files under {p.source_path!r} have clashing "
                            f"schemas ({message})") from None
        raise


# Reader options that change how a CSV header line is found or split: with any of them, Spark
# reads the header itself
CSV_HEADER_OPTIONS = {"quote", "escape", "comment", "encoding", "charset", "multiline", "linesep",
                      "ignoreleadingwhitespace", "ignoretrailingwhitespace", "unescapedquotehandling",
                      "chartoescapequoteescaping", "samplingratio"}


def csv_header_in_driver(spark, options, paths):
    """A CSV header's column names read in the driver (the first non-empty line of the first file
    by name, through Hadoop's file system and codecs, so any file Spark reads) instead of by a
    Spark job: a daily batch's read then runs no job before its write. Only a plain header (no
    quotes, escapes, blank or repeated names, byte-order mark, or option that changes the
    parsing); else None, and Spark reads it. Either way Spark checks every file's header against
    these names as it reads (enforceSchema false), so a misread header fails the run as bad
    input, never loads shifted columns."""
    given = {k.lower(): v for k, v in options.items()}  # Spark's options ignore case
    if CSV_HEADER_OPTIONS & given.keys() or any("." in k for k in given):  # fs.*, io.*: Hadoop's own
        return None
    sep = given.get("sep", given.get("delimiter", ","))
    try:
        # a reader of its own: a DataFrameReader keeps the schema it is given
        probe = spark.read.format("csv").options(**options).schema("_wap_probe string").load(paths)  # lists only
        files = probe.inputFiles()  # URIs, escaped: Path(URI) opens exactly that file
        if not files or len(sep) != 1 or probe.columns != ["_wap_probe"]:  # partition folders: Spark's
            return None
        jvm = spark.sparkContext._jvm
        path = java(jvm, "org.apache.hadoop.fs.Path")(java(jvm, "java.net.URI")(min(files)))  # any one: each file's is checked
        conf = spark._jsparkSession.sessionState().newHadoopConf()  # with the session's settings, as a read
        stream = path.getFileSystem(conf).open(path)
        try:
            codec = java(jvm, "org.apache.hadoop.io.compress.CompressionCodecFactory")(conf).getCodec(path)
            if codec is not None:  # file.csv.gz: read as Spark reads it
                stream = codec.createInputStream(stream)
            lines = java(jvm, "java.io.BufferedReader")(java(jvm, "java.io.InputStreamReader")(stream, "UTF-8"))
            line = lines.readLine()
            while line == "":  # Spark skips empty lines before it
                line = lines.readLine()
        finally:
            stream.close()
    except Exception as e:  # unreadable here: Spark reads it, and reports what is wrong
        log.info("CSV header not read in the driver (%s)", first_line(e))
        return None
    if line is None or not line.strip() or any(ch in '"\\\ufeff' or ch < " " and ch != sep for ch in line):
        return None  # quotes, escapes, a byte-order mark, control characters, a blank line: Spark's
    names = line.split(sep)
    lowered = [n.lower() for n in names]
    if given.get("nullvalue", "") in names or len(set(lowered)) != len(lowered):  # Spark renames these: _c0, name1
        return None
    return names


UNSAFE_NAME_CHARACTERS = ".`<>:,"  # column references split on . and `; type strings on < > : ,


def check_columns(df, what, raw_header=None):
    """Column names Iceberg, Glue and SQL engines all carry, at every depth (fields of structs, in
    arrays and maps too): no duplicates (in any case), no control characters nor any of
    UNSAFE_NAME_CHARACTERS. `raw_header`: a CSV header line as written, since Spark renames its
    duplicates to <name><position>."""
    for path, names in struct_names(df.schema):
        written = raw_header if raw_header and not path else names
        lowered = [n.lower() for n in written]
        dupes = sorted({n for n in lowered if lowered.count(n) > 1})
        if dupes:
            inside = f" in {'.'.join(path)!r}" if path else ""
            raise bad_input(f"{what}: duplicate column name {', '.join(dupes)}{inside} "
                            f"(columns: {', '.join(written)})")
        for name in names:
            if any(ch in UNSAFE_NAME_CHARACTERS or ord(ch) < 32 for ch in name):
                raise bad_input(f"{what}: column {'.'.join(path + (name,))!r} has one of "
                                f"{UNSAFE_NAME_CHARACTERS} or a control character, which Iceberg "
                                "tables and SQL engines do not handle well; rename it")


def struct_names(dtype, path=()):
    """(path, field names) of every struct in a type: itself, and those nested in structs, arrays
    (path element `element`) and maps (`key`, `value`)."""
    from pyspark.sql import types as T
    if isinstance(dtype, T.StructType):
        yield path, dtype.names
        for f in dtype.fields:
            yield from struct_names(f.dataType, path + (f.name,))
    elif isinstance(dtype, T.ArrayType):
        yield from struct_names(dtype.elementType, path + ("element",))
    elif isinstance(dtype, T.MapType):
        yield from struct_names(dtype.keyType, path + ("key",))
        yield from struct_names(dtype.valueType, path + ("value",))


def csv_header(spark, p, source, paths):
    """The first file's header line as written, read only when Spark's column names look like
    its renaming of duplicates (two or more names ending in their own position)."""
    import csv as csv_module
    options = {k.lower(): str(v) for k, v in p.source_options.items()}
    if p.source_format != "csv" or options.get("header", "true").lower() != "true":
        return None
    renamed = [n[:-len(str(i))].lower() for i, n in enumerate(source.columns)
               if n.endswith(str(i)) and n != str(i)]
    if len(renamed) == len(set(renamed)):
        return None
    line = spark.read.text(paths).first()
    if line is None:
        return None
    return next(csv_module.reader([line[0]], delimiter=options.get("sep", options.get("delimiter", ","))))


def check_source_records(spark, p, source):
    """JSON records Spark could not parse surface as a _corrupt_record column: name the first."""
    from pyspark.sql import functions as F
    if p.source_format != "json" or "_corrupt_record" not in source.columns:
        return
    # cached: Spark refuses a query of raw JSON that looks at the corrupt-record column alone
    first = (source.withColumn("_wap_file", F.input_file_name()).cache()
             .filter(F.col("_corrupt_record").isNotNull()).first())
    raise bad_input(f"--source_path: {record_location(first['_wap_file'], first['_corrupt_record'])}: "
                    f"malformed JSON record {first['_corrupt_record'][:120]!r}")


def record_location(file, record):
    """'<file> line N' for a local file whose line N is the record, else the file."""
    local = file[len("file:"):].lstrip("/") if file.startswith("file:") else None
    if local is not None:
        try:
            with open("/" + local, encoding="utf-8", errors="replace") as f:
                for number, line in enumerate(f, 1):
                    if line.rstrip("\r\n") == record.rstrip("\r\n"):
                        return f"{file} line {number}"
        except OSError:
            pass
    return file


def explain_read_failure(spark, p, source, paths, error):
    """A write that failed on a malformed CSV row becomes bad input naming the file, line and
    row (CSV into an existing table is read FAILFAST), as does a file whose header differs from
    the others' (checked as Spark reads each file); anything else is returned unchanged."""
    from pyspark.sql import functions as F, types as T
    text = str(error)
    if p.source_format == "csv" and ("CSV header does not conform to the schema" in text
                                     or "Number of column in CSV header is not equal" in text):
        file, names = re.search(r"CSV file: (\S+)", text), re.search(r"Expected: (.+?) but found: (.+)", text)
        return bad_input(f"--source_path: {file[1] if file else 'a file'}: its CSV header does not match the "
                         "batch's columns (files of one batch need one header)"
                         + (f": expected {names[1]!r}, found {names[2]!r}" if names else ""))
    if p.source_format != "csv" or not ("MALFORMED_RECORD" in text or "Malformed records" in text):
        return error
    reader = spark.read.format("csv").options(
        **{k: str(v) for k, v in p.source_options.items()}, header="true", mode="PERMISSIVE",
        columnNameOfCorruptRecord="_wap_corrupt")
    try:
        schema = T.StructType(source.schema.fields + [T.StructField("_wap_corrupt", T.StringType())])
        bad = (reader.schema(schema).load(paths).withColumn("_wap_file", F.input_file_name()).cache()
               .filter(F.col("_wap_corrupt").isNotNull()).first())
    except Exception:
        bad = None
    if bad is None:
        return bad_input(f"--source_path: a malformed CSV row ({first_line(error)})")
    return bad_input(f"--source_path: {record_location(bad['_wap_file'], bad['_wap_corrupt'])}: "
                     f"malformed CSV row {bad['_wap_corrupt'][:120]!r} (its values do not fit the "
                     "table's column types)")


def list_source_files(spark, path):
    """The data files under --source_path, as Spark's readers see them (names starting with _ or .
    are skipped at any depth), listed through Hadoop's file system: local, s3:// on Glue."""
    jvm = spark.sparkContext._jvm
    root = java(jvm, "org.apache.hadoop.fs.Path")(path)
    fs = root.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    root_text = fs.makeQualified(root).toString().rstrip("/")
    from py4j.protocol import Py4JJavaError
    files = []
    try:
        found = fs.listFiles(root, True)
        while found.hasNext():
            name = found.next().getPath().toString()
            relative = name[len(root_text):].strip("/").split("/") if name.startswith(root_text) else [name]
            if not is_hidden("/".join(relative)):
                # the form Spark's inputFiles() reports, so both modes record the same paths
                files.append("file://" + name[5:] if name.startswith("file:/") and name[6:7] != "/" else name)
    except Py4JJavaError as e:  # an S3 prefix with no object left (the files were archived): none is new
        if not java(jvm, "java.lang.Class").forName("java.io.FileNotFoundException").isInstance(e.java_exception):
            raise
        return []
    return sorted(files)


def select_source_files(spark, p, t, ledger, history, record=True):
    """What to read: --source_path as given, or (--source_files new) the files under it that no
    publish still on main consumed (nor a run that quarantined every row), by main's ancestry and
    the ledger. A rolled-back publish's files are new again. `record`: a run (not a dry run)
    records at once what main holds of this job's that no record names (see record_unrecorded)."""
    if p.source_files == "all":
        return [p.source_path]
    marks = consumed_publishes(spark, t, ledger, history)
    consumed = {f for m in marks for f in m.input_files}
    files = list_source_files(spark, p.source_path)
    if record:
        record_unrecorded(ledger, marks, {normalize_path(f) for f in files})
    return [f for f in files if normalize_path(f) not in consumed]


def record_unrecorded(ledger, marks, files):
    """This job's snapshots on main that no record names (published by hand, or written without
    an audit) go into the ledger now, not at the next publish: expiry must never make their input
    loadable again. The run that finds one written without an audit, of any of these files, fails
    naming it; later runs leave its files out (they are consumed) with a warning, so the rest of
    the folder still loads."""
    found = [m for m in ledger.unrecorded if not m.recorded and set(m.input_files) & files]
    if ledger.unrecorded:
        side_effect("run ledger", lambda: ledger.complete(ledger.unrecorded))
    if found:
        raise UnauditedOnMain(unaudited_message(found[0]), found[0])
    for m in marks:
        if not m.recorded and set(m.input_files) & files:
            log.warning("%s; its files are left out", unaudited_message(m))


def record_found(ledger):
    """This job's snapshots the run found on main that no record names go into the ledger at once,
    whatever the run does next: a batch published by hand (fast_forward of a kept branch) is then
    remembered once its snapshot expires, though no publish of this job came first to record it.
    (A batch quarantined whole is named by its table property until the next such commit, which
    records it first.)"""
    found = [m for m in ledger.unrecorded if m.snapshot_id is not None]
    if found:
        side_effect("run ledger", lambda: ledger.complete(found))


def input_files(df):
    """The files a DataFrame reads, spelled as Hadoop lists them (Spark's inputFiles() are
    URL-encoded: a space is %20), so both --source_files modes record one path per file."""
    from urllib.parse import unquote
    return [unquote(f) for f in df.inputFiles()]


def normalize_path(path):
    """One spelling per file, whichever alias reached it: s3a:// and s3n:// are s3://, and a local
    file is file:///path."""
    for scheme in ("s3a://", "s3n://"):
        if path.startswith(scheme):
            return "s3://" + path[len(scheme):]
    if path.startswith("file:") and not path.startswith("file:///"):
        return "file:///" + path[len("file:"):].lstrip("/")
    return path


@dataclass
class InputFiles:
    """What a batch reads: its files (normalized paths), an identity per file (path, size and
    content) and the fingerprint of them all, which names the batch when --batch_id does not."""
    paths: list
    ids: list
    fingerprint: str
    stamps: dict = field(default_factory=dict)  # path -> (size, version): what replacing it changes
    pins: dict = field(default_factory=dict)  # path -> what a file rule requires of it (file_pin)


def identify_input(spark, paths, source=None):
    """Each file's identity from its path, size and content: S3's ETag, a SHA-1 of a local file's
    bytes, else (other file systems) its modification time. Content rather than time, so an
    identical re-upload is the same input; no catalog alias, so one table is one table. Each file
    is also stamped (file_stamp), so a change before Spark reads it is caught (check_input_unchanged).
    Off S3 (where client-side encryption lists other lengths) its size must also be the length
    Spark listed for the read of `source`: Spark reads a file that far and no further. Local
    files are hashed side by side (reading and hashing release the GIL); each one's outcome,
    error included, is taken in path order, as one after another would give it."""
    from concurrent.futures import ThreadPoolExecutor
    paths = sorted({normalize_path(f) for f in paths})
    s3 = s3_etags([f for f in paths if f.startswith("s3://")])
    listed = spark_listed_sizes(source) if source is not None and len(s3) < len(paths) else {}
    lines, stamps = [], {}
    local = [path for path in paths if path.startswith("file:///")]
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    pool = ThreadPoolExecutor(max(1, min(len(local), cores, 8)))
    hashed = {}
    try:
        for path in local:
            try:
                hashed[path] = pool.submit(local_identity, spark, path, s3)
            except RuntimeError:  # no thread to be had: this one and the rest are hashed in turn
                break
        for path in paths:
            if path.startswith("file:///"):
                stamps[path], size, tag = (hashed[path].result() if path in hashed
                                           else local_identity(spark, path, s3))
            else:  # S3's ETag, or Hadoop's length and modification time: the stamp itself
                stamps[path] = file_stamp(spark, path, s3)
                if stamps[path] is None:
                    raise changed_input(path)  # listed for the read, gone now
                size, tag = stamps[path][:2]
            if not path.startswith("s3://") and path in listed and listed[path] != size:
                raise changed_input(path)  # Spark would read it only as far as its listed length
            lines.append(f"{path}\t{size}\t{tag}")
    finally:  # on an error, the files not yet begun are not hashed for nothing
        pool.shutdown(wait=False, cancel_futures=True)
    digest = hashlib.sha256("".join(line + "\n" for line in lines).encode()).hexdigest()
    return InputFiles(paths, [hashlib.sha256(line.encode()).hexdigest()[:16] for line in lines], digest,
                      stamps, {path: file_pin(path, stamps[path], s3) for path in paths})


def local_identity(spark, path, s3):
    """(stamp, size, SHA-1 tag) of a local file, stamped before and after its bytes are hashed."""
    stamp = file_stamp(spark, path, s3)
    if stamp is None:
        raise changed_input(path)  # listed for the read, gone now
    try:
        size, tag = local_or_hadoop_identity(spark, path)
    except FileNotFoundError:
        raise changed_input(path) from None  # gone since its stamp
    if file_stamp(spark, path, s3) != stamp:
        raise changed_input(path)  # hashed while it changed: which content is unknown
    return stamp, size, tag


def file_pin(path, stamp, s3):
    """What a file rule requires of a batch file it reads, so it judges the bytes the batch read:
    an S3 object's ETag as listed, a local file's stamp; None elsewhere (file rules read neither)."""
    return stamp[1] if path in s3 else stamp if path.startswith("file:///") else None


def file_stamp(spark, path, s3):
    """(size, version, ...) of a file, which replacing it changes: S3's size and ETag (from the
    listing `s3`), a local file's size, modification time and inode, else Hadoop's length and
    modification time; None if it is gone. Other errors are raised, never taken for a change."""
    if path in s3:
        return s3[path]
    if path.startswith("s3://"):  # not in the listing: gone, or readable only as Hadoop sees it
        try:
            return local_or_hadoop_identity(spark, path)
        except Exception:
            return None
    if path.startswith("file:///"):
        try:
            return local_stamp(os.stat(local_path(path)))
        except FileNotFoundError:
            return None
    try:
        return local_or_hadoop_identity(spark, path)
    except Exception as e:
        if "FileNotFoundException" in str(e):
            return None
        raise


def local_stamp(info):
    """A local file's (size, modification and change times in ns, inode) from its os.stat: what
    a change, a rewrite in place or a replacement by rename alters. The change time also moves
    when a copy sets the modification time back (cp -p, touch -r); both are only as fine as the
    file system's clock."""
    return info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino


def changed_input(path):
    return WapError(f"--source_path: {path} changed while this run read it; nothing was published. "
                    "Rerun to load the files as they are now")


def check_input_unchanged(spark, t, batch, report):
    """The batch's files are still those it was identified by: else the rows Spark staged (and
    audited) may be another file's than the batch's identity names, and a later run would load
    that content again as new input. Nothing is published; the run's branch is dropped, and so
    are the rows it quarantined (discard_own_quarantine)."""
    changed = changed_files(spark, batch)
    if changed:
        drop_branch(spark, t, batch.branch)
        discard_own_quarantine(spark, t, batch, report)
        raise changed_input(changed[0])


def changed_files(spark, batch):
    """The batch's files whose stamp is not the one they were identified with."""
    s3 = s3_etags([f for f in batch.input_stamps if f.startswith("s3://")])
    return [path for path, stamp in batch.input_stamps.items() if file_stamp(spark, path, s3) != stamp]


def discard_own_quarantine(spark, t, batch, report):
    """A run that will not publish drops the rows it quarantined: once its files changed, or
    another run published the batch, nothing else would ever tidy them away. Unless another run
    took up its snapshot (resume: the same input, or a file whose stamp moved, a chmod say, on the
    same bytes) and may publish it, or did, rebased or not, with these rows: then they stay, as
    that run's. Called once the run's own branch is gone: kept_by_its_run relies on that order."""
    if not quarantined_here(report, batch):
        return
    started_ms = int(datetime.fromisoformat(report.started_at).timestamp() * 1000)
    side_effect("quarantine clean-up", lambda: None if quarantine_taken_up(spark, t, batch.run_id, started_ms)
                else discard_quarantine(spark, t, batch, report))


def quarantine_owner(summary):
    """The run whose quarantined rows go with a staged snapshot (its summary): the run that staged
    it, or the one a run that took it up and rebased it names."""
    return summary.get(QUARANTINE_PROPERTY) or summary.get(RUN_PROPERTY) or ""


def quarantined_here(report, batch):
    """True if this run itself put rows in the quarantine (not a run whose snapshot it resumed)."""
    return bool(report.quarantine_table) and batch.quarantine_run == batch.run_id


def quarantine_taken_up(spark, t, run_id, since_ms):
    """True if a snapshot made since `since_ms` on any ref of the table (main included, the run's
    own branch dropped) carries `run_id`'s quarantined rows: the run's own snapshot, or one rebased
    from it, that another run resumed (and perhaps published)."""
    table, seen = iceberg_table(spark, t), set()
    for _, ref in java_items(table.refs()):
        snapshot = table.snapshot(ref.snapshotId())
        while (snapshot is not None and snapshot.snapshotId() not in seen
               and snapshot.timestampMillis() >= since_ms - CLOCK_SKEW_MS):  # another host's clock
            seen.add(snapshot.snapshotId())
            summary = snapshot.summary()
            if run_id in (summary.get(QUARANTINE_PROPERTY), summary.get(RUN_PROPERTY)):
                return True
            parent = snapshot.parentId()
            snapshot = table.snapshot(parent) if parent is not None else None
    return False


LISTED_SIZES_MAX_FILES = 1000  # past this many files, reading Spark's listing costs too many JVM calls


def spark_listed_sizes(df):
    """{path: length} of the files Spark listed for a file source read, as input_files spells
    them; {} where the plan is no plain file scan, or lists too many files."""
    from urllib.parse import unquote
    sizes = {}
    try:
        leaves = df._jdf.queryExecution().analyzed().collectLeaves()
        for i in range(leaves.size()):
            leaf = leaves.apply(i)
            if leaf.getClass().getSimpleName() != "LogicalRelation":
                continue
            relation = leaf.relation()
            if relation.getClass().getSimpleName() != "HadoopFsRelation":
                continue
            files = relation.location().allFiles()
            if files.size() > LISTED_SIZES_MAX_FILES:
                return {}
            statuses = files.iterator()  # not apply(j): a Stream or List is walked from its head
            while statuses.hasNext():
                status = statuses.next()
                sizes[normalize_path(unquote(status.getPath().toUri().toString()))] = status.getLen()
    except Exception as e:  # another plan shape: only the recheck after the audit then
        log.info("Spark's listing of the batch not read (%s)", first_line(e))
    return sizes


def s3_etags(paths):
    """{s3 path: (size, ETag)}."""
    return {path: (obj["Size"], obj["ETag"].strip('"')) for path, obj in s3_objects(paths).items()}


def s3_objects(paths):
    """{s3 path: its listing entry (Size, ETag, LastModified)}, from one listing per folder (one
    object: its own key)."""
    found = {}
    if not paths:
        return found
    import boto3
    client = boto3.client("s3")
    by_folder = {}
    for path in paths:
        bucket, key = split_s3(path)
        by_folder.setdefault((bucket, key[:key.rfind("/") + 1]), []).append(key)
    for (bucket, folder), keys in by_folder.items():
        prefix = folder if len(keys) > 1 else keys[0]
        wanted = set(keys)
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix,
                                                                      Delimiter="/"):
            for obj in page.get("Contents", []):
                if obj["Key"] in wanted:
                    found[f"s3://{bucket}/{obj['Key']}"] = obj
    return found


def local_or_hadoop_identity(spark, path):
    """(size, content tag) of a local file (SHA-1 of its bytes) or, elsewhere, (size, mtime)."""
    if path.startswith("file:///"):
        return os.path.getsize(local_path(path)), "sha1:" + file_digest(path, "sha1")
    jvm = spark.sparkContext._jvm
    jpath = java(jvm, "org.apache.hadoop.fs.Path")(path)
    status = jpath.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()).getFileStatus(jpath)
    return status.getLen(), f"mtime:{status.getModificationTime()}"


def local_path(path):
    """The local path of a file:/// URI (Spark hands out URIs: a space may be %20)."""
    local = path[len("file://"):]
    if not os.path.exists(local):
        from urllib.parse import unquote
        local = unquote(local)
    return local


def file_digest(path, algorithm="sha256", pin=None, s3=None, stop=None):
    """A hex digest of a local or S3 file's bytes, streamed in blocks; with a `pin` (file_pin),
    only of the bytes the batch read: a file replaced or changed before or while it is read is
    an error, never another content's digest. `s3`: the S3 client to read with, else a new one;
    `stop`: an Event that ends the read early (an error)."""
    digest = hashlib.new(algorithm, usedforsecurity=False)
    with open_bytes(path, pin, s3) as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            if stop is not None and stop.is_set():
                raise FileRuleError(f"{path}: its read was stopped")
            digest.update(block)
        if pin is not None and not path.startswith("s3://"):
            require_pin(path, pin, os.fstat(f.fileno()))  # written to while it was read
    return digest.hexdigest()


def open_bytes(path, pin=None, s3=None):
    """A local or S3 file's bytes as a stream, closed by `with`; only as the batch read it when
    pinned: an S3 object if its ETag is still the pin (S3 checks it: If-Match), a local file if its
    stamp is."""
    if path.startswith("s3://"):
        import boto3
        bucket, key = split_s3(path)
        match = {"IfMatch": f'"{pin}"'} if pin else {}
        try:
            return closing((s3 or boto3.client("s3")).get_object(Bucket=bucket, Key=key, **match)["Body"])
        except Exception as e:
            if getattr(e, "response", {}).get("Error", {}).get("Code") == "PreconditionFailed":
                raise FileRuleError(f"{path} was replaced after it was listed (ETag {pin})") from None
            raise
    f = open(local_path(path), "rb")
    if pin is not None:
        try:
            require_pin(path, pin, os.fstat(f.fileno()))
        except FileRuleError:
            f.close()
            raise
    return f


def require_pin(path, pin, info, since="after it was listed"):
    """A local file a file rule reads must still have the stamp it was identified or listed with."""
    if local_stamp(info) != tuple(pin):
        raise FileRuleError(f"{path} was replaced or changed {since}")


def fingerprint_config(p, checks):
    """Everything that decides which rows a run publishes, besides the input: a rerun whose checks,
    transform, mode, keys, reader or schema handling changed must stage afresh, never resume."""
    try:  # the transform and everything it may call in this file
        transform_code = inspect.getsource(transform) + inspect.getsource(sys.modules[__name__])
    except (OSError, TypeError):  # no source file (a notebook, a pickled function): its bytecode
        code = transform.__code__
        transform_code = code.co_code.hex() + repr(code.co_consts) + repr(code.co_names)
    config = {"checks": [asdict(c) for c in checks], "transform": transform_code, "mode": p.mode,
              "merge_keys": p.merge_keys, "delete_condition": p.delete_condition,
              "source_format": p.source_format,  # secret reader options decide no rows
              "source_options": {k: v for k, v in p.source_options.items() if not SECRET_OPTION.search(k)},
              "source_schema": p.source_schema, "source_files": p.source_files,
              "schema_evolution": p.schema_evolution, "partition_by": p.partition_by}
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()


@dataclass
class Batch:
    """This run's identity: written into every snapshot it commits, so the guard, the publish
    decision, resume and the ledger can tell its snapshots from everyone else's."""
    batch_id: str
    run_id: str
    input_fingerprint: str
    config_fingerprint: str
    input_files: list
    track_files: bool = False  # --source_files new: a file is consumed by its path
    input_stamps: dict = field(default_factory=dict)  # path -> (size, version) when identified
    input_pins: dict = field(default_factory=dict)  # path -> what a file rule requires of it (file_pin)
    columns: list = field(default_factory=list)  # the columns the batch carries (merge updates these)
    quarantine_run: str = None  # the run whose quarantined rows go with the staged snapshot
    quarantined: int = None  # how many: a run taking the snapshot up finds them all, or stages afresh
    kept: int = None  # how many rows this run's drop checks kept (set with its own quarantine)
    file_ids: list = field(default_factory=list)  # one identity (path, size, content) per input file
    explicit_id: bool = False  # --batch_id named the batch (else it is the input's fingerprint)
    dropped_rows: object = None  # this run's rows its drop checks failed, tagged (split_dropped)

    def __post_init__(self):
        self.quarantine_run = self.quarantine_run or self.run_id

    @property
    def branch(self):
        return run_branch(self.batch_id, self.run_id)

    def snapshot_properties(self):
        """Whatever the mode, a snapshot says which files it consumed: main's history alone then
        tells what was loaded, even before (or without) the ledger row."""
        properties = {BATCH_PROPERTY: self.batch_id, RUN_PROPERTY: self.run_id,
                      FINGERPRINT_PROPERTY: self.input_fingerprint,
                      CONFIG_PROPERTY: self.config_fingerprint,
                      FILES_PROPERTY: json.dumps(self.input_files),
                      FILE_IDS_PROPERTY: json.dumps(self.file_ids)}
        if self.quarantine_run != self.run_id:
            properties[QUARANTINE_PROPERTY] = self.quarantine_run
        if self.quarantined is not None:
            properties[QUARANTINED_PROPERTY] = str(self.quarantined)
        return properties


def run_branch(batch_id, run_id):
    """audit_<batch_id>_<short run id>: readable, and written by that run only."""
    return f"{branch_prefix(batch_id)}{run_id[:8]}"


def branch_prefix(batch_id):
    """audit_<batch_id>_, with characters a branch should not carry replaced and a hash kept."""
    safe = re.sub(r"[^A-Za-z0-9_-]", "_", batch_id)
    if safe != batch_id:
        safe += "_" + hashlib.sha1(batch_id.encode()).hexdigest()[:8]
    return f"{BRANCH_PREFIX}{safe}_"


# =================================================================================================
# Table state and ledger: read from Iceberg metadata and the run ledger, never from memory
# =================================================================================================

@dataclass
class TableRef:
    catalog: str
    namespace: str
    name: str

    @property
    def sql(self):
        return f"{quote(self.catalog)}.{quote(self.namespace)}.{quote(self.name)}"

    @property
    def ident(self):
        """'namespace.table'; procedures get it catalog-qualified, or a namespace that shares
        a catalog's name would be read as that catalog."""
        return f"{self.namespace}.{self.name}"

    def meta(self, table):
        return f"{self.sql}.{quote(table)}"


def table_exists(spark, t):
    return spark.catalog.tableExists(f"{t.catalog}.{t.namespace}.{t.name}")


# Metadata is read through Iceberg's Table API: fresh from the catalog each time, and no Spark job.

def refs(spark, t):
    """{ref name: snapshot id} for every branch and tag."""
    return {str(name): ref.snapshotId() for name, ref in java_items(iceberg_table(spark, t).refs())}


def ref_id(table, name):
    """The snapshot id a branch points at, or None if there is no such branch (yet)."""
    ref = table.refs().get(name)
    return ref.snapshotId() if ref is not None else None


@dataclass
class SnapshotInfo:
    """One snapshot as a run stages, resumes or rebases on it. `last_publish`: the table's last
    publish (its Mark and time) as the batch was staged on it, for the history checks."""
    snapshot_id: int
    parent_id: int | None  # None for a table's first snapshot
    summary: dict
    last_publish: tuple = None
    schema_id: int = None  # the table's schema as the batch's files were written (None: the snapshot's)


def snapshot_info(spark, t, snapshot_id, table=None):
    """Parent and summary of one snapshot, or None."""
    snapshot = (table or iceberg_table(spark, t)).snapshot(snapshot_id)
    if snapshot is None:
        return None
    s = snapshot_fields(snapshot)
    return SnapshotInfo(s["snapshot-id"], s.get("parent-snapshot-id"), s["summary"])


@functools.lru_cache(maxsize=4)
def snapshot_parser(jvm):
    return java(jvm, "org.apache.iceberg.SnapshotParser")


def snapshot_fields(snapshot):
    """A snapshot's id, parent, time and summary (without its operation) as Iceberg writes them
    into table metadata, in one call to the JVM rather than three per summary entry: a run reads
    every snapshot of main's ancestry, so this is what keeps a long history cheap."""
    from pyspark import SparkContext
    fields = json.loads(snapshot_parser(SparkContext._jvm).toJson(snapshot))
    if "summary" in fields:
        fields["summary"].pop("operation", None)
    else:  # Iceberg writes a summary only with an operation; one written elsewhere may lack it
        summary = snapshot.summary()
        fields["summary"] = {str(k): str(v) for k, v in (java_items(summary) if summary is not None else [])}
    return fields


@dataclass
class Mark:
    """What this job wrote into one snapshot's summary (nothing, for other writers' snapshots), or
    what the ledger or the table's last-publish property remembers of a publish whose snapshot
    expired."""
    snapshot_id: int
    parent_id: int
    timestamp_ms: int
    batch_id: str = None
    run_id: str = None
    input_files: tuple = ()
    summary: dict = None  # the whole summary, kept for this job's own snapshots only
    file_ids: tuple = ()
    input_fingerprint: str = None
    status: str = "published"  # a ledger publish, or "quarantined": every row dropped, files consumed
    source_id: int = None  # a cherry-picked or rebased copy: the snapshot it re-commits
    recorded: bool = True  # False: this job's snapshot on main with no publish record (unaudited)


def read_mark(snapshot):
    s = snapshot_fields(snapshot)
    summary = s["summary"]
    batch_id = summary.get(BATCH_PROPERTY)
    mark = Mark(s["snapshot-id"], s.get("parent-snapshot-id"), s["timestamp-ms"], batch_id)
    source = summary.get(SOURCE_SNAPSHOT_PROPERTY)
    mark.source_id = int(source) if source and str(source).lstrip("-").isdigit() else None
    if batch_id is not None:
        mark.summary = summary
        mark.run_id = mark.summary.get(RUN_PROPERTY)
        mark.input_files = tuple(normalize_path(f) for f in json.loads(mark.summary.get(FILES_PROPERTY, "[]")))
        mark.file_ids = tuple(json.loads(mark.summary.get(FILE_IDS_PROPERTY, "[]")))
        mark.input_fingerprint = mark.summary.get(FINGERPRINT_PROPERTY)
    return mark


@dataclass
class Ancestry:
    """main's ancestry, newest first: from the table metadata, carried past expired snapshots by
    this job's own records of them (the ledger, the last-publish property), since a snapshot's
    parent never changes. `whole`: it reaches main's first snapshot, so what is not in it was never
    on main (or was rolled back)."""
    marks: list
    whole: bool
    end: int = None  # where a walk that is not whole stopped: an expired ancestor, still on main

    def __post_init__(self):
        self.ids = {m.snapshot_id for m in self.marks}

    def holds(self, publish, parents=None):
        """True if the publish is on main; False if provably not (rolled back): the ancestry reaches
        its parent (even the expired ancestor it stops at), or its start, without it, or its parent
        is provably not on main either (a rollback of several publishes in a row; `parents`: the
        Parents known). Not provable either way (the ancestry ends before its parent): on main,
        since a duplicate is worse than a reload."""
        if publish.snapshot_id in self.ids:
            return True
        return not (self.whole or self.left_behind(publish.parent_id, parents or Parents(None, [])))

    def left_behind(self, parent, parents):
        """True if a snapshot off the walk whose parent is `parent` cannot be on main: the walk
        passes `parent` (or stops at it) through another child, or `parent` is off the walk too
        and, by its own parent, cannot be on main. (An ancestor beyond where the walk stopped
        never leads back to the walk: its parents are older still.) Each snapshot's answer is kept
        in `parents` (for this ancestry): a long chain of records is followed once, not once each."""
        chain, seen, verdict = [], set(), False
        while parent is not None and parent not in seen:
            if parent in parents.left:
                verdict = parents.left[parent]
                break
            if parent in self.ids or parent == self.end:
                verdict = True
                break
            chain.append(parent)
            seen.add(parent)
            parent = parents.of(parent)
        parents.left.update(dict.fromkeys(chain, verdict))
        return verdict


class Parents:
    """Snapshots' parents as this job recorded them (`records`: Marks of its consuming runs) or as
    the table's metadata holds them (asked once per snapshot; None: neither knows it), and which
    of them one ancestry found left behind (Ancestry.left_behind)."""

    def __init__(self, metadata, records):
        self.metadata, self.left = metadata, {}
        self.known = {m.snapshot_id: m.parent_id for m in records if m.snapshot_id is not None}

    def of(self, snapshot_id):
        if snapshot_id not in self.known:
            snapshot = self.metadata.snapshot(snapshot_id) if self.metadata is not None else None
            self.known[snapshot_id] = None if snapshot is None else snapshot.parentId()
        return self.known[snapshot_id]


class History:
    """main's ancestry as this job marked it. Snapshots never change, so each is read from the
    metadata once per run; later walks (after main moved) only read the new ones."""

    def __init__(self):
        self.marks = {}

    def walk(self, metadata, head, known=None):
        """Marks from `head` back as far as the metadata (or `known`: {snapshot id: Mark} of
        expired publishes) reaches, newest first. `metadata`: a Table or TableMetadata, so a walk
        can use the very metadata a commit is based on."""
        return self.ancestry(metadata, head, known).marks

    def ancestry(self, metadata, head, known=None):
        marks, snapshot_id, seen = [], head, set()
        while snapshot_id is not None and snapshot_id not in seen:
            seen.add(snapshot_id)
            mark = self.marks.get(snapshot_id)
            if mark is None:
                snapshot = metadata.snapshot(snapshot_id)
                if snapshot is not None:
                    mark = self.marks[snapshot_id] = read_mark(snapshot)
                elif known and snapshot_id in known:
                    mark = known[snapshot_id]
                else:
                    return Ancestry(marks, whole=False, end=snapshot_id)
            marks.append(mark)
            snapshot_id = mark.parent_id
        return Ancestry(marks, whole=snapshot_id is None)


# Each check's outcome as Glue Data Quality's RuleResults entries (see glue_dq_result)
GLUE_RULE_RESULTS = ("array<struct<Name: string, Description: string, EvaluationMessage: string, "
                     "Result: string, EvaluatedMetrics: map<string, double>, EvaluatedRule: string, "
                     "Labels: map<string, string>>>")
# The run ledger: one row per run, so exactly-once, `volume`, `--status` and reports outlive
# snapshot expiry. Users query it like any Iceberg table (Athena, Spark).
LEDGER_COLUMNS = (
    "table_name string, run_id string, batch_id string, status string, exit_code int, mode string, "
    "branch string, "
    "main_snapshot_before bigint, main_snapshot_after bigint, staged_snapshot bigint, "
    "rows_written bigint, rows_dropped bigint, rows_inserted bigint, rows_updated bigint, "
    "rows_deleted bigint, checks array<struct<name: string, check: string, action: string, "
    "passed: boolean, failing_rows: bigint, observed: string>>, metrics map<string, double>, "
    "timings map<string, double>, input_fingerprint string, config_fingerprint string, "
    "input_files array<string>, started_at timestamp, finished_at timestamp, error string, "
    "table_uuid string, input_file_ids array<string>, score double, rule_results " + GLUE_RULE_RESULTS)
# Added since the first ledgers: a run adds them to an older ledger before its first write.
# The ledger's own upkeep (Ledger.maintain): compact at this many data files; expire its snapshots
# older than an hour (no run reads a plan that old), keeping the newest, once it has this many.
LEDGER_MAX_FILES = 64
LEDGER_MAX_SNAPSHOTS = 128
LEDGER_KEEP_SNAPSHOTS = 16
LEDGER_SNAPSHOT_AGE_S = 3600
LEDGER_ADDED_COLUMNS = {"table_uuid": "string", "input_file_ids": "array<string>", "score": "double",
                        "rule_results": GLUE_RULE_RESULTS}
# Statuses whose input is on main or deliberately dropped: a publish, every row quarantined, or a
# write that reached main without an audit (recorded so that expiry cannot make it loadable again)
CONSUMED = ("published", "quarantined", "unaudited")


def audit_passed(row):
    """A ledger row's run staged and audited its batch with every blocking check passing: it ended
    staged or published, or failed after a whole audit that passed (its checks are recorded, none
    blocking failed)."""
    return (row["status"] in ("staged", "published", "already_published")
            or (row["status"] == "error" and bool(row["checks"])
                and not any(c["action"] == "fail" and not c["passed"] for c in row["checks"])))


def ledger_json(value):
    """json.dumps' `default` for ledger rows: a datetime as UTC wall time (read with timeZone UTC,
    so it is the same instant as `timestamp` and the same wall time as `timestamp_ntz`); anything
    else unknown is an error naming its type, never a guess."""
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(timezone.utc).replace(tzinfo=None).isoformat()
    raise TypeError(f"a ledger row holds a {type(value).__name__} ({value!r:.60}), which has no "
                    "JSON form here (datetimes must carry their zone)")


# From this many rows in the ledger a run reads only the rows its decisions need (LedgerScope), in
# two small Spark jobs, not every row this table consumed: below it, the one whole read costs less.
LEDGER_BOUNDED_FROM = 20_000


@dataclass
class LedgerScope:
    """What a run asks of the ledger's consumed rows: those of its batch (its id, its files'
    identities), those the table's metadata names, and its history checks' newest `depth` publishes."""
    batch_id: str
    file_ids: tuple
    depth: int

    def matches(self, mark):
        return mark.batch_id == self.batch_id or bool(set(mark.file_ids) & set(self.file_ids))

    def names(self, summary):
        """True if a snapshot's summary is this batch's (its id, or one of its files); one whose
        file identities cannot be read counts as the batch's, so the walk must place it."""
        if summary.get(BATCH_PROPERTY) == self.batch_id:
            return True
        try:
            return bool(set(json.loads(summary.get(FILE_IDS_PROPERTY, "[]"))) & set(self.file_ids))
        except (ValueError, TypeError):
            return True


def bounded_from():
    """LEDGER_BOUNDED_FROM, or WAP_LEDGER_BOUNDED_FROM (tests: 0, every run's read bounded)."""
    return int(os.environ.get("WAP_LEDGER_BOUNDED_FROM", LEDGER_BOUNDED_FROM))


@dataclass
class BoundedRead:
    """A bounded read's newest publishes: the runs of the newest `limit` published rows (all of
    their rows were read), the oldest of those rows' finish (micros), and whether there were more;
    and the snapshots of the batch the table's metadata held then ({snapshot id: parent id})."""
    newest: set
    cutoff: int
    cut: bool
    batch_snapshots: dict


class Prefetch:
    """A read run on a thread of its own (with the starting thread's Spark job group); `rows`
    after join() returns its result or raises its error."""

    def __init__(self, read):
        from pyspark import InheritableThread
        self._rows, self._error, self._read = None, None, threading.Event()
        self._thread = InheritableThread(target=self._run, args=(read,), daemon=True)
        self._thread.start()

    def _run(self, read):
        try:
            self._rows = read()
        except BaseException as e:  # handed to the reader
            self._error = e
        finally:
            self._read.set()

    def join(self):
        while not self._read.wait(0.5):
            if not self._thread.is_alive():  # died before its read began (no JVM thread for it):
                return  # no rows, no error, so the reader reads them itself

    @property
    def rows(self):
        if self._error is not None:
            raise self._error
        return self._rows


class Ledger:
    """The run ledger table `<namespace>.<table>_wap_runs` (or --runs_table). A table's rows are
    found by the table's identity (Iceberg's table uuid), whatever catalog alias reached it."""

    def __init__(self, spark, ref, table, table_uuid=None, metrics=True):
        self.spark, self.ref, self.table = spark, ref, table  # `table`: catalog.namespace.name
        self.table_uuid = table_uuid
        self.metrics = metrics  # whether the consumed rows carry their metrics (Check.reads_metrics)
        self._published = None
        self._index = None  # RecordIndex of the consumed rows as read (index())
        self._newest = None  # the consumed rows, newest finished first (recent)
        self._consumed = None
        self._prefetch = None  # a background read of the consumed rows (prefetch), or None
        self._read_at = None  # the ledger's snapshot id the consumed rows were read at (or after)
        self.target = None  # the TableRef of the ledger's table, for a bounded read (scope)
        self.scoped = False  # whether a run will give a scope (for the prefetch to wait for)
        self.walked = {}  # {snapshot id: Mark} the run's walks of main read (History.marks)
        self.scope = None  # LedgerScope: this run's, once its batch is known; None: read every row
        self.bounded = None  # BoundedRead: the rows read are the scope's alone; None: every row
        self._whole = False  # a bounded read did not decide as the whole would: every row from now
        self.rows_read = 0  # rows its reads of the consumed rows returned, in all
        self._uuid = None  # the ledger table's uuid, as first loaded: the same table to the end
        self._dropped = False  # found dropped (dropped()): never taken for "no ledger yet" after
        self._caught_up = None  # the last consumption read again for (catch_up)
        self._columns = None
        self.unrecorded = []  # this job's snapshots on main that no record names, as last decided
        self.copied = set()  # snapshots main holds a copy of (a rebase's, an operator's cherry-pick)
        self.gone = set()  # runs whose publish main no longer holds (rolled back), as last decided
        self._gone_for = None  # (main's snapshot id,) it was decided for; None: the rows read since
        self._decide_gone = None  # decides `gone` again (decided_gone)

    @classmethod
    def of(cls, spark, p, checks=None):
        """The ledger of the job's table; for a run of `checks`, read as they need it."""
        ledger = cls(spark, TableRef(p.catalog, p.runs_namespace, p.runs_name), f"{p.catalog}.{p.table}",
                     metrics=checks is None or any(c.reads_metrics for c in checks))
        ledger.target = TableRef(p.catalog, p.namespace, p.table_name)
        ledger.scoped = p.source_files == "all"  # a run's scope will come (--source_files new: none)
        return ledger

    def identify(self, table_uuid):
        """The table exists now: find its rows by its uuid."""
        if table_uuid != self.table_uuid:
            self.table_uuid = table_uuid
            self.forget()

    def columns(self):
        if self._columns is None:
            self._columns = self.read_columns()
        return self._columns

    def read_columns(self):
        return {f.name.lower() for f in self.spark.table(self.ref.sql).schema.fields}

    def runs(self, columns=None, df=None):
        """This table's rows (of `df`, the ledger as loaded, if given): a ledger may be shared by
        several tables (--runs_table). Rows from before table uuids were recorded are this
        table's if they carry its name."""
        from pyspark.sql import functions as F
        df = self.spark.table(self.ref.sql) if df is None else df
        by_name = F.col("table_name") == self.table
        if self.table_uuid is None or "table_uuid" not in (columns or self.columns()):
            return df.filter(by_name)
        return df.filter((F.col("table_uuid") == self.table_uuid)
                         | (F.col("table_uuid").isNull() & by_name))

    def exists(self):
        return table_exists(self.spark, self.ref)

    def consumed(self):
        """This table's rows of runs that consumed their input (published, every row quarantined,
        or written unaudited), read once per run in one Spark job: they answer exactly-once and
        the history checks (`recent` publishes) alike."""
        if self._consumed is None:
            read = None
            if self._prefetch is not None:
                pending, self._prefetch = self._prefetch, None
                pending.join()
                read = pending.rows  # a failed read raises here, as if it had run here
            if read is None:
                read = self.read_consumed()
            self._consumed, columns, self._read_at, self.bounded = read
            self.rows_read += len(self._consumed)
            self._columns = columns or self._columns  # the closing append's check: one load fewer
        return self._consumed

    def read_consumed(self):
        """The read itself, as (rows, the ledger's columns or None, the ledger's snapshot id as the
        read began, its BoundedRead or None): it caches nothing, since a prefetch may run it on
        another thread."""
        if self.absent():
            return [], None, None, None
        from pyspark.sql import functions as F
        # the rows hold at least what this snapshot does (iceberg_table refreshes a caching
        # catalog's table, which the read then finds); a read at exactly it would take its schema,
        # which lacks the columns added since
        read_at = self.head()
        ledger = self.spark.table(self.ref.sql)  # one load, for its columns and its rows
        columns = {f.name.lower() for f in ledger.schema.fields}
        ids = "input_file_ids" in columns
        rows = self.runs(columns, ledger).filter(F_in("status", CONSUMED))
        bounded = None
        if self.scope is not None and not self._whole and self.target is not None:
            total = self.size(self.head_table())
            if total is not None and total >= bounded_from() and table_exists(self.spark, self.target):
                bounded, rows = self.narrow(rows, iceberg_table(self.spark, self.target), ids)
        # finished_at as micros since the epoch: only sorted, never shown, and a timestamp column
        # would make PySpark convert every field of every row (a third of a long ledger's read).
        # The metrics only for checks that compare with them: a run's dozen map entries, times
        # every run, are half of a long ledger's read.
        rows = (rows.select("run_id", "batch_id", "status", "main_snapshot_before", "main_snapshot_after",
                            "input_files", "input_fingerprint", F.unix_micros("finished_at").alias("finished_at"),
                            "rows_written", *(["metrics"] if self.metrics else []),
                            *(["input_file_ids"] if ids else [])).collect())
        # as dicts: a Row finds a field by name by searching its field list, which over a long
        # ledger's rows, each read a dozen times, cost more than the read itself
        return [r.asDict() for r in rows], columns, read_at, bounded

    def head(self):
        """The ledger table's current snapshot id (None: no row yet). A ledger dropped while the
        run uses it ends the run: what the table consumed is no longer on record to decide by."""
        return ref_id(self.head_table(), "main")

    def head_table(self):
        try:
            table = iceberg_table(self.spark, self.ref)
        except Exception:
            if self.exists():
                raise
            raise self.dropped() from None
        self.same_table(table)
        return table

    @staticmethod
    def size(head):
        """The rows the ledger (`head`: its Table) holds, by its snapshot summary (None: unknown)."""
        main = ref_id(head, "main")
        total = head.snapshot(main).summary().get("total-records") if main is not None else None
        return int(total) if total is not None else None

    def narrow(self, rows, metadata, with_ids):
        """(BoundedRead, the rows a run's decisions read): its batch's (by id or file identity, if
        the ledger has `input_file_ids`), every row the table's metadata names (the run of any
        snapshot it holds, a row recording any of its snapshots, the last-publish and
        last-quarantine properties' runs) or that of a snapshot the run's walks of main read (it
        may have expired since), and every row of the runs of the newest published rows its
        history checks read (a few times their depth, for rows of one run and rolled-back runs).
        Whether they decide as every row would is checked where they are used
        (bounded_read_decides, newest_published); if not, the run reads every row."""
        from pyspark.sql import functions as F
        scope, newest, cutoff, cut = self.scope, set(), None, False
        snapshots = metadata_snapshots(self.spark, metadata)
        if scope.depth:
            limit = 3 * scope.depth + 16
            top = (rows.filter(F.col("status") == str(Status.PUBLISHED))
                   .select("run_id", F.unix_micros("finished_at").alias("finished_at"))
                   .orderBy(F.col("finished_at").desc_nulls_last()).limit(limit).collect())
            newest, cut = {r["run_id"] for r in top}, len(top) == limit
            cutoff = top[-1]["finished_at"] if top else None
        runs = {s["summary"].get(RUN_PROPERTY) for s in snapshots} | {m.run_id for m in self.walked.values()}
        runs |= {m.run_id for m in (last_publish(metadata), last_quarantine(metadata)) if m is not None}
        snapshot_ids = {s["snapshot-id"] for s in snapshots} | set(self.walked)
        runs = sorted(r for r in runs | newest if r is not None)
        wanted = F.col("batch_id") == scope.batch_id
        if with_ids and scope.file_ids:
            wanted = wanted | F.arrays_overlap("input_file_ids", F.array(*[F.lit(i) for i in scope.file_ids]))
        if runs:
            wanted = wanted | F.col("run_id").isin(runs)
        if snapshot_ids:
            wanted = wanted | F.col("main_snapshot_after").isin(sorted(snapshot_ids))
        batch = {s["snapshot-id"]: s.get("parent-snapshot-id") for s in snapshots
                 if scope.names(s["summary"])}
        fault_point("ledger_read")
        return BoundedRead(newest, cutoff, cut, batch), rows.filter(wanted)

    def read_whole(self):
        """A bounded read did not decide as every row would: every row, from now on in this run."""
        log.info("run ledger: the rows of this run's scope do not decide it: reading every row")
        self._whole = True
        self.forget()

    def absent(self):
        """True if there is no ledger (yet). One this run loaded (or found dropped) and is gone now
        ends the run: its rows are what the table consumed, not "none"."""
        if self.exists():
            return False
        if self._dropped or self._uuid is not None:  # head() sets the uuid before any read
            raise self.dropped()
        return True

    def same_table(self, table):
        """The ledger table is the one this run first loaded: one dropped and made again since (by
        a run that started after the drop) holds none of the rows this run read."""
        uuid = str(table.uuid().toString())
        if self._uuid is None:
            self._uuid = uuid
        elif uuid != self._uuid:
            raise self.dropped()

    def dropped(self):
        """The error that ends a run whose ledger was dropped while it used it. Nor does the run
        make a new ledger for its own row, which would take the name the old one is restored under
        (Iceberg's register_table keeps its uuid: the restored ledger is the same table)."""
        self._dropped = True
        return WapError(f"run ledger: {self.ref.sql} was dropped while this run used it; the run stops "
                        "rather than decide what the table consumed without it. Restore it (Iceberg's "
                        "register_table) or rerun to start a new one")

    def recorded_since_read(self):
        """True unless the ledger is still at the snapshot it was at as the rows were read: one
        catalog look-up, where reading the rows again is a Spark job."""
        return self._consumed is None or self._read_at is None or self.head() != self._read_at

    def prefetch(self):
        """Start the consumed rows' read in the background, while the batch is read and validated
        in the driver: the read is a Spark job of its own, and a run reading them a second earlier
        is no different from a slower run (every publish is still a compare-and-swap of main,
        rechecked against a fresh read after a rebase). Its job counts in the starting step."""
        from pyspark import SparkContext
        from py4j.clientserver import ClientServer
        if self._consumed is None and self._prefetch is None and isinstance(SparkContext._gateway, ClientServer):
            try:  # pinned threads only: elsewhere a thread's Spark job group is not its own
                self._prefetch = Prefetch(self.read_early)
            except Exception as e:  # no thread to be had: read it when needed
                log.info("ledger read in the background not started (%s)", first_line(e))

    def read_early(self):
        """The prefetch's read: every row, unless the ledger is large enough for the run's bounded
        read once its batch is known (None: the reader reads then)."""
        if self.scoped and not self.absent() and (self.size(self.head_table()) or 0) >= bounded_from():
            return None
        return self.read_consumed()

    def published(self):
        """Every run the ledger records as having consumed its input (published, or every row
        quarantined), as Marks, read once per run."""
        if self._published is None:
            published, seen = [], set()  # kept only once whole: a read that fails is not "none"
            for r in self.consumed():  # a run's own row and a row completed for it by another run
                if r["run_id"] not in seen:
                    seen.add(r["run_id"])
                    quarantined = r["status"] == "quarantined"  # main_snapshot_after: main as it was
                    published.append(Mark(
                        None if quarantined else r["main_snapshot_after"],
                        None if quarantined else r["main_snapshot_before"], 0, r["batch_id"],
                        r["run_id"], tuple(map(normalize_path, r["input_files"] or ())),
                        file_ids=tuple(r.get("input_file_ids") or ()),  # none in older ledgers
                        input_fingerprint=r["input_fingerprint"], status=r["status"],
                        recorded=r["status"] != "unaudited"))
            self._published = published
        return self._published

    def index(self):
        """The look-ups every decision makes of the consumed rows, built once per read: over a
        long ledger, building them again at each decision cost more than the decision."""
        if self._index is None:
            self._index = RecordIndex.of(self.published())
        return self._index

    def audited(self, snapshot_ids):
        """Which of these snapshots a run of this table staged and audited with every blocking
        check passing (audit_passed)."""
        if not snapshot_ids or self.absent():
            return set()
        from pyspark.sql import functions as F
        rows = (self.runs().filter(F.col("staged_snapshot").isin([int(i) for i in snapshot_ids]))
                .select("staged_snapshot", "status", "checks").collect())
        return {r["staged_snapshot"] for r in rows if audit_passed(r)}

    def known(self, metadata=None):
        """{snapshot id: Mark} of every publish this job recorded: the ledger's, and the table's
        last-publish property (set by the publish's own commit), to carry main's ancestry past
        expired snapshots."""
        known = self.index().publishes  # shared: callers only read it
        last = last_publish(metadata) if metadata is not None else None
        if last is not None and last.snapshot_id not in known:
            known = {**known, last.snapshot_id: last}
        return known

    def catch_up(self, last):
        """Read the ledger again if the table's last batch quarantined whole (`last`, from its
        property) is not among the rows read: it came after them, and so may others of which the
        property no longer speaks (each was recorded before the next overwrote it). Once per mark."""
        if (last is not None and last.run_id != self._caught_up
                and last.run_id not in self.index().runs):
            self._caught_up = last.run_id
            self.forget()

    def forget(self):
        self._published = self._index = self._newest = self._consumed = self._prefetch = None
        self._gone_for = self.bounded = None

    def decided_gone(self, gone, main, again):
        """The runs whose publish `main` (main's snapshot id) does not hold, of the rows read now;
        `again` decides them once more, over the rows as read then."""
        self.gone, self._gone_for, self._decide_gone = gone, (main,), again

    def gone_holds(self, main):
        """True if `gone` was decided for this main, and for the rows as read now."""
        return self._gone_for == (main,)

    def newest_published(self, limit):
        """(the newest `limit` publishes main holds, whether they are those of every row): a
        bounded read's are its newest runs' (every row of them read), exact if there are no older
        publishes or each one taken finished after every publish it did not read."""
        if self._newest is None:  # sorted once per read, however many checks ask
            self._newest = sorted(self.consumed(), key=finished_first, reverse=True)
        bounded, newest = self.bounded, {}
        for r in self._newest:
            if (r["status"] == str(Status.PUBLISHED) and r["run_id"] not in self.gone
                    and (bounded is None or r["run_id"] in bounded.newest)):
                # a run's own row over one another run completed for it (no metrics), even if later
                if r["run_id"] not in newest or r.get("metrics") and not newest[r["run_id"]].get("metrics"):
                    newest[r["run_id"]] = r
        top = sorted(newest.values(), key=finished_first, reverse=True)[:limit]
        if bounded is None:
            return top, True

        def later(r):  # finished after what the newest runs' read saw: recorded between the reads
            return (not bounded.cut or bounded.cutoff is None
                    or r["finished_at"] is not None and r["finished_at"] > bounded.cutoff)
        if any(r["status"] == str(Status.PUBLISHED) and r["run_id"] not in bounded.newest and later(r)
               for r in self._newest):
            return top, False
        return top, not bounded.cut or (
            len(top) == limit and bounded.cutoff is not None
            and all(r["finished_at"] is not None and r["finished_at"] > bounded.cutoff for r in top))

    def recent(self, limit, status=None):
        """The newest runs (one row per run id), newest first. Publishes come from the rows read
        once per run, less those main no longer holds (rolled back: their rows never reached the
        table's consumers, and a rerun of the batch is not to be compared with itself); any other
        status is read from the table."""
        if status is Status.PUBLISHED:
            top, exact = self.newest_published(limit)
            if not exact:  # a bounded read's newest runs may not be the newest: every row
                self.read_whole()
                if self._decide_gone is not None:
                    self._decide_gone()
                    if self._gone_for is None:  # (the table is gone): no history to compare with
                        raise WapError(f"{self.target.sql if self.target else 'the table'}: gone while "
                                       "the run compared with its earlier publishes")
                top, exact = self.newest_published(limit)
            return top
        if not self.exists():
            return []
        from pyspark.sql import Window, functions as F
        df = self.runs()
        if status is not None:
            df = df.filter(F.col("status") == str(status))
        # the newest rows, a few per run at most (its own, one completed for it): one job, no shuffle
        rows = df.orderBy(F.col("finished_at").desc_nulls_last()).limit(3 * limit).collect()
        newest = {}
        for r in rows:
            newest.setdefault(r["run_id"], r)
        if len(newest) >= limit or len(rows) < 3 * limit:
            return list(newest.values())[:limit]
        newest = Window.partitionBy("run_id").orderBy(F.col("finished_at").desc_nulls_last())
        return (df.withColumn("_n", F.row_number().over(newest)).filter("_n = 1").drop("_n")
                .orderBy(F.col("finished_at").desc_nulls_last()).limit(limit).collect())

    def record(self, rows):
        """Append rows; creates the ledger on first use (concurrent creators are fine), and adds
        the columns newer runs write to an older ledger."""
        if not rows:
            return
        if self.absent():
            create_table(self.spark, self.ref, LEDGER_COLUMNS, retries=20)
        elif any(k not in self.columns() for k in LEDGER_ADDED_COLUMNS):
            # the columns as they are now (they may have been read at the run's start), each added
            # on its own: a run of another version may have added some of them meanwhile
            present = self.read_columns()
            for k in [k for k in LEDGER_ADDED_COLUMNS if k not in present]:
                try:
                    change_branch(self.spark, f"ALTER TABLE {self.ref.sql} ADD COLUMNS ({quote(k)} "
                                  f"{LEDGER_ADDED_COLUMNS[k]})")
                except Exception as e:  # another run added it first
                    if "already exists" not in str(e).lower():
                        raise
            self._columns = None
        try:
            written = self.append_in_driver(rows)
        except WapError:
            raise
        except Exception as e:  # Spark writes them (an error there is the run's); after a commit of
            # unknown outcome they may be there twice, which readers take as one run
            log.warning("run ledger: the rows were not written in the driver (%s); Spark writes them",
                        first_line(e))
            written = False
        if not written:
            self.frame(rows).writeTo(self.ref.sql).append()
        self.forget()

    def append_in_driver(self, rows):
        """Append the rows as one data file written by Iceberg's own generic writer in the driver,
        in one append commit: what Spark's write of them makes, without a Spark job (~0.1 s of
        every run's closing step, more where a job means executors). Columns are matched by name
        whatever their case, as Spark's write matches them. False, with nothing written to the
        table, for a partitioned ledger, a key the ledger has no column for, or a value Iceberg's
        single-value JSON has no form for (NaN, infinities, a NULL in a map, a datetime for a
        column without a zone): Spark writes those rows, and refuses what it refuses."""
        jvm = self.spark.sparkContext._jvm
        table = iceberg_table(self.spark, self.ref)
        self.same_table(table)
        schema, spec = table.schema(), table.spec()
        row_type = schema_json(jvm, schema)
        stamps = {f["name"].lower(): f["name"] for f in row_type["fields"] if f["type"] == "timestamptz"}
        try:
            if any(len({k.lower() for k in row}) < len(row) for row in rows):
                raise NotRepresentable("two keys for one column")
            texts = [json.dumps(single_value({k: v for k, v in row.items() if k.lower() not in stamps}, row_type),
                                allow_nan=False) for row in rows]
            micros = [{stamps[k.lower()]: epoch_micros(v) for k, v in row.items()
                       if k.lower() in stamps and v is not None} for row in rows]
        except (NotRepresentable, ValueError, OverflowError) as e:  # ValueError: NaN or an infinity
            log.info("run ledger: a row has no single-value JSON (%s); Spark writes it", first_line(e))
            return False
        if not spec.isUnpartitioned():
            return False
        util, parser = java(jvm, "org.apache.iceberg.util.DateTimeUtil"), java(jvm, "org.apache.iceberg.SingleValueParser")
        file_format = java(jvm, "org.apache.iceberg.FileFormat").fromString(
            table.properties().getOrDefault("write.format.default", "parquet"))
        location = table.locationProvider().newDataLocation(file_format.addExtension(f"ledger-{uuid.uuid4()}"))
        committing = False
        try:
            appender = (java(jvm, "org.apache.iceberg.data.GenericAppenderFactory")(schema, spec)
                        .setAll(table.properties()).newAppender(table.io().newOutputFile(location), file_format))
            try:
                for text, stamp in zip(texts, micros):
                    record = parser.fromJson(schema.asStruct(), text)
                    for name, value in stamp.items():  # the generic writer takes java.time values
                        record.setField(name, util.timestamptzFromMicros(value))
                    appender.add(record)
            finally:
                appender.close()
            data_file = (java(jvm, "org.apache.iceberg.DataFiles").builder(spec).withPath(location)
                         .withFormat(file_format).withFileSizeInBytes(appender.length())
                         .withMetrics(appender.metrics()).build())
            append = table.newAppend().appendFile(data_file)
            committing = True
            append.commit()
        except Exception as e:
            # the file goes only if no commit can name it: none was made, or Iceberg says it failed
            # (as Iceberg cleans up after its own commits); after any other error it may be live
            if not committing or java_instance(e, "org.apache.iceberg.exceptions.CleanableFailure"):
                try:
                    table.io().deleteFile(location)
                except Exception:
                    pass
            raise
        return True

    def frame(self, rows):
        """Rows as a one-partition DataFrame built in the JVM from their JSON text: no Python
        serialization round trip and no empty partitions, measurably cheaper than createDataFrame
        for the one row a run appends. FAILFAST: a value that does not fit its column is an error,
        never a null. NaN and infinities travel as JSON's NaN/Infinity, which Spark reads back."""
        from pyspark.sql import functions as F
        text = json.dumps(rows, default=ledger_json)
        return (self.spark.range(1, numPartitions=1)
                .select(F.explode(F.from_json(F.lit(text), f"array<struct<{LEDGER_COLUMNS}>>",
                                              {"mode": "FAILFAST", "timeZone": "UTC"})).alias("r"))
                .select("r.*"))

    def maintain(self):
        """Keep reading the ledger cheap however many runs it holds: one run appends one small
        file and one snapshot, so past a limit the small files are compacted into one (the same
        rows: nothing the exactly-once protocol reads is lost) and old snapshots are expired (the
        ledger's own history of commits, not of runs). Both are Iceberg's Spark procedures; a
        concurrent run's append commits alongside, and a run that loses a race only logs it."""
        table = iceberg_table(self.spark, self.ref)
        current = table.currentSnapshot()
        if current is None:
            return
        files = int(current.summary().get("total-data-files") or 0)
        call, name = f"CALL {quote(self.ref.catalog)}.system", _lit(self.ref.sql)  # catalog-qualified
        if files >= LEDGER_MAX_FILES:
            self.spark.sql(f"{call}.rewrite_data_files(table => {name}, "
                           "options => map('min-input-files', '2'))").collect()
            fault_point("ledger_upkeep")
        table.refresh()  # the compaction's own commit counts too
        if table.operations().current().snapshots().size() >= LEDGER_MAX_SNAPSHOTS:
            older = datetime.fromtimestamp(time.time() - LEDGER_SNAPSHOT_AGE_S, timezone.utc)
            self.spark.sql(f"{call}.expire_snapshots(table => {name}, "
                           f"older_than => TIMESTAMP '{older.strftime('%Y-%m-%d %H:%M:%S')}+00:00', "
                           f"retain_last => {LEDGER_KEEP_SNAPSHOTS})").collect()

    def complete(self, marks):
        """Record publishes that reached main but not the ledger (the publishing run died, or its
        ledger write failed), at once and from what main remembers of them. Idempotent: a run that
        also records itself leaves two rows of one run, and readers take one per run."""
        def missing():
            runs, snapshots = self.index().runs, self.index().snapshots
            return [m for m in marks if m.batch_id is not None and m.run_id not in runs
                    and (m.snapshot_id is None or m.snapshot_id not in snapshots)]
        if missing():
            self.forget()  # another run may have recorded them since this run read the ledger
        found = missing()
        if found:
            log.warning("run ledger: recording %d consumption(s) missing from %s.%s: %s", len(found),
                        self.ref.catalog, self.ref.ident, ", ".join(f"{m.batch_id} ({m.run_id})" for m in found))
            self.record([ledger_row_of_mark(m, self.table, self.table_uuid) for m in found])


def schema_json(jvm, schema):
    """An Iceberg schema as Iceberg's own JSON of it, parsed: one JVM call for every field's id,
    name and type, nested ones included."""
    return json.loads(java(jvm, "org.apache.iceberg.SchemaParser").toJson(schema))


class NotRepresentable(Exception):
    """A value Iceberg's single-value JSON has no form for here."""


def single_value(value, kind):
    """A value as Iceberg's single-value JSON (SingleValueParser) of its type `kind`, in the
    schema's JSON form: structs keyed by field id, maps as their keys and values. A datetime
    (the caller sets those itself) or a type the ledger does not use raises NotRepresentable."""
    if value is None:
        return None
    if isinstance(kind, dict) and kind["type"] == "struct" and isinstance(value, dict):
        fields = {f["name"].lower(): f for f in kind["fields"]}  # by name, as Spark's write resolves it
        if len({name.lower() for name in value}) < len(value):
            raise NotRepresentable("two keys for one field")  # Spark's write decides between them
        out = {}
        for name, v in value.items():
            f = fields.get(name.lower())
            if f is None:  # no such field: Spark's write's to refuse
                raise NotRepresentable(f"no field {name!r}")
            if v is not None:
                out[str(f["id"])] = single_value(v, f["type"])
        return out
    if isinstance(kind, dict) and kind["type"] == "list" and isinstance(value, (list, tuple)):
        return [single_value(v, kind["element"]) for v in value]
    if isinstance(kind, dict) and kind["type"] == "map" and isinstance(value, dict):
        if any(v is None for v in value.values()):  # the parser's maps hold no NULL
            raise NotRepresentable("a NULL in a map")
        return {"keys": [single_value(k, kind["key"]) for k in value],
                "values": [single_value(v, kind["value"]) for v in value.values()]}
    if (kind == "string" and isinstance(value, str)) or (kind == "boolean" and type(value) is bool) \
            or (kind in ("int", "long") and type(value) is int):
        return value
    if kind in ("float", "double") and type(value) in (int, float):
        return float(value)
    raise NotRepresentable(f"a {type(value).__name__} as {kind}")


def java_instance(error, name):
    """True if a failed JVM call's Java exception is an instance of the class `name`."""
    from py4j.java_gateway import is_instance_of
    from pyspark import SparkContext
    java_error = getattr(error, "java_exception", None)
    try:
        return java_error is not None and is_instance_of(SparkContext._gateway, java_error, name)
    except Exception:
        return False


def epoch_micros(value):
    """A zoned datetime as microseconds since the epoch; a naive one is refused, as ledger_json
    refuses it."""
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise NotRepresentable(f"{value!r:.40} is not a zoned datetime")
    return (value - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(microseconds=1)


@dataclass
class RecordIndex:
    """The ledger's consumption records (Ledger.published()) as the sets and maps the decisions
    look them up in."""
    runs: set  # every record's run id
    snapshots: set  # every record's snapshot id
    published_runs: set  # the run ids of publishes
    publishes: dict  # {snapshot id: Mark} of every publish (Ledger.known adds the property's)
    audited_runs: set  # the run ids of records that are not `unaudited`
    audited: dict  # {snapshot id: recorded as audited} of every record but whole quarantines

    @classmethod
    def of(cls, marks):
        publishes = {m.snapshot_id: m for m in marks if m.status == "published" and m.snapshot_id is not None}
        audited = {m.snapshot_id: m.status != "unaudited" for m in marks if m.status != "quarantined"}
        audited.update(dict.fromkeys(publishes, True))
        return cls({m.run_id for m in marks}, {m.snapshot_id for m in marks},
                   {m.run_id for m in marks if m.status == "published"}, publishes,
                   {m.run_id for m in marks if m.status != "unaudited"}, audited)


def finished_first(row):
    """Sort key of consumed rows (finished_at in micros): newest finished first (reversed),
    unfinished ones last."""
    return row["finished_at"] is not None, row["finished_at"] or 0


def F_in(column, values):
    from pyspark.sql import functions as F
    return F.col(column).isin(list(values))


def last_publish(metadata):
    """The table's last-publish property as a Mark, or None."""
    return property_mark(metadata, PUBLISH_PROPERTY)


def newest_publish(table):
    """(the table's last publish as a Mark, when main last moved to it in ms by main's snapshot log
    (a rollback to it counts as a move), or None once the log no longer says: main moved far past
    it, or its snapshot expired), or None."""
    mark = last_publish(table)
    if mark is None:
        return None
    log_ = table.history()  # oldest first: the publish is among the newest entries if at all
    for i in range(log_.size() - 1, max(-1, log_.size() - 1 - PUBLISH_LOG_LOOKBACK), -1):
        entry = log_.get(i)
        if entry.snapshotId() == mark.snapshot_id:
            return mark, entry.timestampMillis()
    return mark, None


PUBLISH_LOG_LOOKBACK = 20  # main's snapshot-log entries newest_publish reads back


def last_quarantine(metadata):
    """The table's last consumption of a batch every row of which was quarantined, as a Mark (no
    snapshot), or None."""
    return property_mark(metadata, WHOLE_QUARANTINE_PROPERTY)


def property_mark(metadata, key):
    properties = metadata.properties() if hasattr(metadata, "properties") else {}
    text = properties.get(key)
    if not text:
        return None
    quarantined = key == WHOLE_QUARANTINE_PROPERTY
    try:
        d = json.loads(str(text))
        return Mark(None if quarantined else int(d["snapshot_id"]), d.get("parent_id"),
                    int(d.get("timestamp_ms") or 0), d["batch_id"], d["run_id"],
                    tuple(d.get("input_files") or ()), file_ids=tuple(d.get("file_ids") or ()),
                    input_fingerprint=d.get("input_fingerprint"),
                    status="quarantined" if quarantined else "published")
    except (ValueError, KeyError, TypeError):
        log.warning("table property %s is not this job's: ignored", key)
        return None


def ledger_row_of_mark(mark, table, table_uuid=None):
    """A published run's row, rebuilt from what main remembers of it: its snapshot's summary, or
    the last-publish property. It finished when it reached main, as far as anyone can tell."""
    s = mark.summary or {}
    now = datetime.now(timezone.utc)  # after any error row of the run that staged it
    at = datetime.fromtimestamp(mark.timestamp_ms / 1000, timezone.utc) if mark.timestamp_ms else now
    if mark.run_id is None:  # a copy recorded as a run of its own: when it reached main, not now
        now = at
    status = "unaudited" if not mark.recorded else mark.status  # published, or every row quarantined
    return {"table_name": table, "run_id": mark.run_id or f"snapshot-{mark.snapshot_id}",
            "batch_id": mark.batch_id, "status": status,
            "exit_code": EXIT_OK if mark.recorded else EXIT_ERROR,
            "mode": None, "branch": None, "main_snapshot_before": mark.parent_id,
            "main_snapshot_after": mark.snapshot_id, "staged_snapshot": mark.snapshot_id,
            "rows_written": int(s.get("added-records", 0)), "rows_dropped": None,
            "rows_inserted": int(s.get("added-records", 0)), "rows_updated": None,
            "rows_deleted": int(s.get("deleted-records", 0)), "checks": [], "metrics": {}, "timings": {},
            "input_fingerprint": mark.input_fingerprint, "config_fingerprint": s.get(CONFIG_PROPERTY),
            "input_files": list(mark.input_files), "started_at": at, "finished_at": now,
            "error": ("recorded by a later run: the run that consumed the batch did not record this snapshot" if mark.recorded
                      else "on main without an audit (write.wap.enabled was off?): recorded by a later run"),
            "table_uuid": table_uuid, "input_file_ids": list(mark.file_ids)}


def create_table(spark, ref, columns_ddl, partition_by=(), wap=False, retries=None, any_schema=False):
    """CREATE TABLE IF NOT EXISTS (format v2), tolerating a concurrent run that created it first."""
    partitioned = f"PARTITIONED BY ({', '.join(quote(c) for c in partition_by)}) " if partition_by else ""
    properties = {"format-version": "2", "write.wap.enabled": "true" if wap else None,
                  "commit.retry.num-retries": str(int(retries)) if retries else None,
                  "write.spark.accept-any-schema": "true" if any_schema else None}
    properties = ", ".join(f"'{k}'='{v}'" for k, v in properties.items() if v is not None)
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {quote(ref.catalog)}.{quote(ref.namespace)}")
    try:
        spark.sql(f"CREATE TABLE IF NOT EXISTS {ref.sql} ({columns_ddl}) USING iceberg {partitioned}"
                  f"TBLPROPERTIES ({properties})")
    except Exception as e:
        if "already exists" not in str(e).lower():
            raise


UNPARTITIONED_OVERWRITE = ("--mode overwrite_partitions: the table is not partitioned, so it would "
                           "replace the whole table; use --partition_by when creating it")


@dataclass
class TablePlan:
    """What the table needs before this batch can be written. Decided, with every refusal, before
    anything is written: bad input leaves no table, column or property behind."""
    df: object  # the batch lined up with the table's columns
    columns: list  # the table's columns once the plan is carried out
    create: bool = False
    add_columns: list = field(default_factory=list)  # StructFields, for --schema_evolution add_columns
    enable_wap: bool = False


def plan_table(spark, p, t, df):
    """Check the batch against the table (or the table it will create) and line it up, as the
    table is now: after the batch's read and identification, which may take a while."""
    from pyspark.sql import types as T
    table = table_if_exists(spark, t)
    if table is None:
        lower = {x.lower() for x in df.columns}
        types = {f.name.lower(): f.dataType for f in df.schema.fields}
        for c in p.partition_by:
            if c.lower() not in lower:
                raise bad_input(f"--partition_by: unknown column {c!r}; columns: {', '.join(df.columns)}")
            if isinstance(types[c.lower()], (T.StructType, T.MapType, T.ArrayType)):
                raise bad_input(f"--partition_by: column {c!r} is a {types[c.lower()].typeName()}; a "
                                "partition column holds one value per row")
        if p.mode == "overwrite_partitions" and not p.partition_by:
            raise bad_input(UNPARTITIONED_OVERWRITE)
        return TablePlan(df=df, columns=list(df.columns), create=True)
    refusal = overwrite_refusal(spark, p, t, table, df)
    if refusal:
        raise bad_input(refusal)
    schema = table_schema(spark, table)
    known = {f.name.lower() for f in schema.fields}
    extra = [f for f in df.schema.fields if f.name.lower() not in known]
    add = extra if p.schema_evolution == "add_columns" else []
    # merge may carry source-only columns (a CDC op code) that only --delete_condition reads
    keep = [f.name for f in extra if mentions(p.delete_condition, f.name)] \
        if p.mode == "merge" and p.delete_condition and not add else []
    extra = [f for f in extra if f.name not in keep]
    if extra and not add:
        raise bad_input(f"schema: the batch has columns the table lacks: "
                        f"{', '.join(f.name for f in extra)} (--schema_evolution add_columns adds them)")
    target = T.StructType(schema.fields + [T.StructField(f.name, f.dataType, True) for f in add])
    return TablePlan(df=align_to_schema(df, target, keep), columns=target.fieldNames(), add_columns=add,
                     enable_wap=not wap_enabled(table))


def wap_enabled(table):
    """write.wap.enabled as Iceberg reads it (Boolean.parseBoolean): without it Iceberg ignores
    spark.wap.branch and writes to main."""
    return str(table.properties().get("write.wap.enabled") or "").lower() == "true"


TIME_UNITS_OF = {"year": "YEAR", "month": "MONTH", "day": "DAY", "hour": "HOUR"}  # Iceberg transform -> date_trunc


def overwrite_refusal(spark, p, t, table, df):
    """Why --mode overwrite_partitions would not replace exactly the batch's partitions, or None: a
    table with no partition field (or only void ones, a v1 table's dropped fields) would be replaced
    whole, and rows of the batch's partitions in files written under an earlier partition spec would
    stay beside the batch's (Iceberg replaces a partition's files of the current spec only)."""
    if p.mode != "overwrite_partitions":
        return None
    spec, snapshot = table.spec(), table.currentSnapshot()
    if all(str(f.transform().toString()) == "void" for f in spec.fields()):
        return UNPARTITIONED_OVERWRITE
    if table.specs().size() > 1 and snapshot is not None and any(
            m.partitionSpecId() != spec.specId() and (m.hasAddedFiles() or m.hasExistingFiles())
            for m in snapshot.dataManifests(table.io())) and older_files_overlap(spark, t, table, df):
        return ("--mode overwrite_partitions: main holds files written under an earlier partition spec "
                f"(before spec {spec.specId()}) that may hold rows of the batch's partitions, which "
                "Iceberg's overwrite would keep beside the batch's; rewrite those under the current spec "
                "first (CALL <catalog>.system.rewrite_data_files with a `where` on those partitions and "
                "options map('rewrite-all', 'true')), or use --mode merge")
    return None


def older_files_overlap(spark, t, table, df):
    """True if a live data file of an earlier partition spec may hold a row of the batch's
    partitions: its column bounds meet, for every identity or time partition field of the current
    spec, the batch's range of that column widened to whole partitions (and a day more each side,
    an hour for `hour`: Iceberg's units are UTC's, date_trunc's the session's); a field of another
    transform, or a column the batch leaves NULL or NaN or a file without bounds, meets anything.
    One Spark job: the batch's ranges joined to the files metadata table, all in Spark's types."""
    from pyspark.sql import functions as F, types as T
    schema, columns = table.schema(), {c.lower(): c for c in df.columns}
    types = {f.name.lower(): f.dataType for f in df.schema.fields}
    ranges = []  # (column in the table, unit or None, column in the batch)
    for part in table.spec().fields():
        transform, name = str(part.transform().toString()), str(schema.findColumnName(part.sourceId()))
        if (transform == "identity" or transform in TIME_UNITS_OF) and "." not in name and name.lower() in columns:
            ranges.append((name, TIME_UNITS_OF.get(transform), columns[name.lower()]))
    if not ranges:
        return True
    aggs, meets = [], F.lit(True)
    for k, (name, unit, column) in enumerate(ranges):
        c, slack = col(column), F.expr("INTERVAL 1 HOUR" if unit == "HOUR" else "INTERVAL 1 DAY")
        low, high = (F.min(c), F.max(c)) if unit is None else (
            F.date_trunc(unit, F.min(c)) - slack, F.date_trunc(unit, F.max(c)) + F.expr(f"INTERVAL 1 {unit}") + slack)
        floating = isinstance(types[column.lower()], (T.FloatType, T.DoubleType))
        odd = c.isNull() | (F.isnan(c) if floating else F.lit(False))  # Iceberg's bounds leave NaN out
        aggs += [low.alias(f"lo{k}"), high.alias(f"hi{k}"), F.max(odd.cast("int")).alias(f"odd{k}")]
        lower = F.col("readable_metrics").getField(name).getField("lower_bound")
        upper = F.col("readable_metrics").getField(name).getField("upper_bound")
        if unit is not None:
            lower, upper = lower.cast("timestamp"), upper.cast("timestamp")
        below = lower < F.col(f"hi{k}") if unit else lower <= F.col(f"hi{k}")
        meets = meets & ((F.col(f"odd{k}") == 1) | F.col(f"lo{k}").isNull()
                         | ((lower.isNull() | below) & (upper.isNull() | (upper >= F.col(f"lo{k}")))))
    files = spark.table(f"{t.sql}.files").where(f"content = 0 AND spec_id <> {table.spec().specId()}")
    return bool(files.crossJoin(df.agg(*aggs)).where(meets).limit(1).collect())


def mentions(condition, column):
    """True if a SQL condition names the column (as a word, or quoted, in any case)."""
    return bool(re.search(r"(?<![\w`])`?" + re.escape(column) + r"`?(?![\w`])", condition or "", re.I))


def prepare_table(spark, p, t, plan):
    """Carry out the plan: the run's first writes."""
    if plan.create:
        create_table(spark, t, ddl_of(spark, plan.df.schema), p.partition_by, wap=True)
        log.info("created table %s.%s", t.catalog, t.ident)
    elif plan.enable_wap:
        # With write.wap.enabled off, Iceberg silently ignores spark.wap.branch and the rows land on
        # main. So it is set here and never unset: a run that turned it off could make a concurrent
        # run's "staged" write go straight to main.
        spark.sql(f"ALTER TABLE {t.sql} SET TBLPROPERTIES ('write.wap.enabled'='true')")
    if plan.add_columns:
        add_columns(spark, t, plan.add_columns)


def add_columns(spark, t, fields):
    """Iceberg schemas are table-wide: the new columns appear (empty) on main right away."""
    spark.sql(f"ALTER TABLE {t.sql} ADD COLUMNS ("
              + ", ".join(f"{quote(f.name)} {jvm_type(spark, f.dataType).sql()}" for f in fields) + ")")
    log.info("added columns %s to %s.%s", ", ".join(f.name for f in fields), t.catalog, t.ident)


def ddl_of(spark, schema):
    """A Spark schema as column DDL, names quoted."""
    return jvm_type(spark, schema).toDDL()


def jvm_type(spark, dtype):
    """Spark's JVM DataType of a Python one: its DDL (sql(), toDDL()) quotes field names at every
    depth, where simpleString() writes them raw into the type string."""
    return java(spark.sparkContext._jvm, "org.apache.spark.sql.types.DataType").fromJson(dtype.json())


def table_if_exists(spark, t):
    """The table freshly loaded (iceberg_table), or None if it does not exist."""
    return iceberg_table(spark, t) if table_exists(spark, t) else None


def iceberg_table(spark, t):
    """The org.apache.iceberg.Table behind a Spark table, for what SQL does not offer: fresh from
    the catalog. A catalog without a cache (the job's own) loads it afresh anyway; a caching one
    may hand back a table another run has since changed, so that one is refreshed (on Glue each
    is a GetTable call, a dozen a run)."""
    table = java(spark.sparkContext._jvm, "org.apache.iceberg.spark.Spark3Util").loadIcebergTable(
        spark._jsparkSession, f"{t.catalog}.{t.ident}")
    if catalog_caches(spark, t.catalog):
        table.refresh()
    return table


def catalog_caches(spark, catalog):
    """True if the catalog hands out cached tables, as Iceberg's SparkCatalog does unless its
    cache is off. Asked of the catalog itself (a call in the JVM, no catalog round trip): it reads
    its settings once, when first used, so a setting changed later does not count."""
    try:
        iceberg = java(spark.sparkContext._jvm, "org.apache.iceberg.spark.Spark3Util").loadIcebergCatalog(
            spark._jsparkSession, catalog)
    except Exception:  # no Iceberg catalog behind it that can be asked: assume it caches
        return True
    return iceberg.getClass().getName() == "org.apache.iceberg.CachingCatalog"


def table_schema(spark, table):
    """The Spark schema of an Iceberg table in hand, as spark.table() gives it (Iceberg's
    SparkTable.schema is this conversion), without loading the table again."""
    from pyspark.sql.types import _parse_datatype_json_string
    converted = java(spark.sparkContext._jvm, "org.apache.iceberg.spark.SparkSchemaUtil").convert(table.schema())
    return _parse_datatype_json_string(converted.json())


def align_to_schema(df, schema, keep=()):
    """Line the batch up with the table's columns; refuse what would lose or corrupt data.
    `keep`: batch columns to carry along although the table lacks them."""
    from pyspark.sql import functions as F
    by_lower = {f.name.lower(): f for f in df.schema.fields}
    columns = []
    for target in schema.fields:
        source = by_lower.get(target.name.lower())
        if source is None:
            if not target.nullable:
                raise bad_input(f"schema: the batch lacks required column {target.name!r}")
            columns.append(F.lit(None).cast(target.dataType).alias(target.name))
            continue
        if not can_widen(source.dataType, target.dataType):
            raise bad_input(f"schema: column {target.name!r} is {source.dataType.simpleString()} "
                            f"in the batch but {target.dataType.simpleString()} in the table")
        expr = col(source.name)
        if source.dataType != target.dataType:
            expr = expr.cast(target.dataType)
        columns.append(expr.alias(target.name))
    return df.select(*columns, *[col(name) for name in keep])


def can_widen(source, target):
    """Only casts that never lose a value: same type, or a wider number."""
    from pyspark.sql import types as T
    if source == target or isinstance(source, T.NullType) or fits_nested(source, target):
        return True
    ints = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
    rank = {T.ByteType: 0, T.ShortType: 1, T.IntegerType: 2, T.LongType: 3}
    if isinstance(source, ints) and isinstance(target, ints):
        return rank[type(source)] <= rank[type(target)]
    if isinstance(source, (T.ByteType, T.ShortType, T.IntegerType, T.FloatType)) \
            and isinstance(target, T.DoubleType):
        return True
    if isinstance(target, T.DecimalType) and isinstance(source, (T.DecimalType, *ints)):  # room for every digit
        whole, scale = ((source.precision - source.scale, source.scale) if isinstance(source, T.DecimalType)
                        else ({T.ByteType: 3, T.ShortType: 5, T.IntegerType: 10, T.LongType: 19}[type(source)], 0))
        return target.precision - target.scale >= whole and target.scale >= scale
    if isinstance(source, T.DateType) and isinstance(target, (T.TimestampType, T.TimestampNTZType)):
        return True
    if isinstance(source, T.TimestampNTZType) and isinstance(target, T.TimestampType):
        return True
    return False


def fits_nested(source, target):
    """A struct, array or map of the same shape whose parts hold NULLs only where the table's may:
    a part the batch declares non-NULL (a struct built from literals) goes into a nullable one."""
    from pyspark.sql import types as T
    if isinstance(source, T.StructType) and isinstance(target, T.StructType):
        return len(source.fields) == len(target.fields) and all(
            a.name == b.name and (b.nullable or not a.nullable) and (a.dataType == b.dataType or fits_nested(a.dataType, b.dataType))
            for a, b in zip(source.fields, target.fields))
    if isinstance(source, T.ArrayType) and isinstance(target, T.ArrayType):
        return (target.containsNull or not source.containsNull) and (
            source.elementType == target.elementType or fits_nested(source.elementType, target.elementType))
    if isinstance(source, T.MapType) and isinstance(target, T.MapType):
        return (target.valueContainsNull or not source.valueContainsNull) and all(
            a == b or fits_nested(a, b) for a, b in ((source.keyType, target.keyType), (source.valueType, target.valueType)))
    return False


# =================================================================================================
# Write: stage the batch on this run's audit branch
# =================================================================================================

def split_dropped(spark, checks, df):
    """Tag each row with the drop checks it fails; bad rows go to quarantine, not to the table.
    Returns (good, bad, the tagged rows, cached for this run: unpersist them as it ends, or a
    later run in the same driver would read this run's split of the same plan)."""
    from pyspark.sql import functions as F
    drops = [c for c in checks if c.action == "drop"]
    if not drops:
        return df, None, None
    failed = F.filter(F.array(*[F.when(failing_rows_condition(c), F.lit(c.name)) for c in drops]),
                      lambda x: x.isNotNull())
    tagged = df.withColumn("_wap_failed_checks", failed).persist()
    good = tagged.filter(F.size("_wap_failed_checks") == 0).drop("_wap_failed_checks")
    bad = tagged.filter(F.size("_wap_failed_checks") > 0)
    return good, bad, tagged


def quarantine_ref(t):
    return TableRef(t.catalog, t.namespace, f"{t.name}_quarantine")


def write_quarantine(spark, t, bad, batch):
    """Put this run's dropped rows in <table>_quarantine, tagged with batch and run, in one commit.
    Returns (rows, {check: rows}, quarantine table name)."""
    from pyspark.sql import functions as F
    q = quarantine_ref(t)
    rows = (bad.withColumn("_wap_batch_id", F.lit(batch.batch_id))
            .withColumn("_wap_run_id", F.lit(batch.run_id))
            .withColumn("_wap_quarantined_at", F.current_timestamp()))
    rows = rows.select(*[c for c in rows.columns if c != "_wap_failed_checks"], "_wap_failed_checks")
    counts = {r["name"]: r["n"] for r in bad.select(F.explode("_wap_failed_checks").alias("name"))
              .groupBy("name").agg(F.count("*").alias("n")).collect()}
    total = bad.count()
    if not table_exists(spark, q):
        create_table(spark, q, ddl_of(spark, rows.schema), ["_wap_batch_id"], any_schema=True)
    else:
        spark.sql(f"ALTER TABLE {q.sql} SET TBLPROPERTIES ('write.spark.accept-any-schema'='true')")
        have = {f.name.lower(): f.name for f in spark.table(q.sql).schema.fields}
        ours = {c.lower(): c for c in rows.columns}  # the quarantine's order first, new columns last
        rows = rows.select(*[col(ours[n]) for n in have if n in ours],
                           *[col(c) for c in rows.columns if c.lower() not in have])
    if total:  # merge-schema: the quarantine evolves with the table, whatever the ALTER
        (rows.writeTo(q.sql).option("merge-schema", "true")
         .option(f"snapshot-property.{BATCH_PROPERTY}", batch.batch_id).append())
    return total, counts, f"{q.catalog}.{q.ident}"


def quarantined_by(spark, t, batch_id, run_id):
    """(rows, {check: rows}) a run put in the quarantine: for a run that resumes its snapshot."""
    from pyspark.sql import functions as F
    q = quarantine_ref(t)
    if not table_exists(spark, q):
        return 0, {}
    mine = spark.table(q.sql).filter((F.col("_wap_batch_id") == batch_id) & (F.col("_wap_run_id") == run_id))
    counts = {r["name"]: r["n"] for r in mine.select(F.explode("_wap_failed_checks").alias("name"))
              .groupBy("name").agg(F.count("*").alias("n")).collect()}
    return mine.count(), counts


def discard_quarantine(spark, t, batch, report, run_id=None):
    """A run that will not publish its batch (another run did, or its files changed): its own
    quarantined rows go (or `run_id`'s, a run whose snapshot it took up), and its report and
    ledger row no longer count or point to them."""
    q = quarantine_ref(t)
    if table_exists(spark, q):
        spark.sql(f"DELETE FROM {q.sql} WHERE `_wap_batch_id` = {_lit(batch.batch_id)} "
                  f"AND `_wap_run_id` = {_lit(run_id or batch.run_id)}")
        if report.rows_dropped:
            log.info("the %s rows this run quarantined were discarded", report.rows_dropped)
    report.rows_dropped, report.quarantine_table = 0, None


def tidy_quarantine(spark, t, report, batch):
    """Once the batch is consumed, its quarantine holds its consumer's rows alone, no failed or
    superseded attempt's: the compare-and-swap that consumed it (a publish, or the commit of a
    batch every row of which was quarantined) put it after every other run of the batch. Rows of
    runs that predate run ids go too. A side effect: a failed tidy-up leaves rows behind, never
    changes the outcome."""
    def tidy():
        q = quarantine_ref(t)
        others = (f"`_wap_batch_id` = {_lit(batch.batch_id)} AND "
                  f"(`_wap_run_id` IS NULL OR `_wap_run_id` <> {_lit(batch.quarantine_run)})")
        # a consumer that quarantined nothing (no drop check) deletes only if there is something to
        # delete: an earlier attempt's rows, which it published
        if table_exists(spark, q) and (report.quarantine_table or spark.table(q.sql).where(others).take(1)):
            spark.sql(f"DELETE FROM {q.sql} WHERE {others}")
    side_effect("quarantine tidy-up", tidy)


def write_branch(spark, p, t, df, batch, aggs=None, spec_id=None):
    """Write the batch to this run's branch in the run's mode. Every snapshot it commits carries
    the run's identity. With `aggs`, the row checks' aggregates are observed on the rows as they
    are written (append and overwrite_partitions): the Observation is returned. An overwrite of
    the batch's partitions writes by `spec_id`, the partition spec refuse_changed_table approved:
    Iceberg replaces the partitions of the files' spec, and a spec changed in between would have
    it replace the whole table (unpartitioned) or none of the old files (another spec)."""
    from pyspark.sql import Observation
    properties = batch.snapshot_properties()
    observation = None
    spark.conf.set("spark.wap.branch", batch.branch)
    try:
        if p.mode == "merge":
            merge_into(spark, p, t, df, properties, batch.columns)
        else:
            if aggs:
                observation = Observation("wap_write")
                df = df.observe(observation, *aggs)
            writer = df.writeTo(t.sql)
            for key, value in properties.items():
                writer = writer.option(f"snapshot-property.{key}", value)
            if spec_id is not None and p.mode == "overwrite_partitions":
                writer = writer.option("output-spec-id", str(spec_id))
            writer.append() if p.mode == "append" else writer.overwritePartitions()
    finally:
        spark.conf.unset("spark.wap.branch")
    return observation


def observed_metrics(summary, observation):
    """The metrics observed during the write, if they provably describe the staged rows: their
    row count must equal the records the snapshot added (`summary`: the staged snapshot's).
    Otherwise None: the audit scans. The wait is bounded: a lost listener event must not hang
    the job."""
    if observation is None:
        return None
    metrics = observation_result(observation)
    if metrics is None or str(metrics.get("rows")) != summary.get("added-records", "0"):
        log.warning("observed %s rows but the snapshot added %s; auditing by scanning the branch",
                    (metrics or {}).get("rows"), summary.get("added-records"))
        return None
    return metrics


OBSERVATION_TIMEOUT_SECONDS = 60


def observation_result(observation, timeout=OBSERVATION_TIMEOUT_SECONDS):
    """Observation.get waits forever for a listener event; wait at most `timeout` seconds."""
    result = {}
    waiter = threading.Thread(target=lambda: result.setdefault("metrics", observation.get), daemon=True)
    waiter.start()
    waiter.join(timeout)
    if "metrics" not in result:
        log.warning("observed metrics did not arrive within %d s", timeout)
        return None
    return result["metrics"]


def merge_into(spark, p, t, df, properties, carried):
    """Upsert by the merge keys; matched rows that meet --delete_condition are deleted instead.
    Updates set only the columns the batch carries (`carried`): a column the batch lacks keeps its
    values on main, and is NULL for inserted rows. A NULL condition is not a delete."""
    view = f"wap_batch_{uuid.uuid4().hex}"
    df.createOrReplaceTempView(view)
    table_columns = [f.name for f in spark.table(t.sql).schema.fields]
    carried = {c.lower() for c in carried}
    on = " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in p.merge_keys)
    assignments = ", ".join(f"t.{quote(c)} = s.{quote(c)}" for c in table_columns if c.lower() in carried)
    names = ", ".join(quote(c) for c in table_columns)
    values = ", ".join(f"s.{quote(c)}" for c in table_columns)
    # on lines of its own: a trailing -- comment in it ends with its line, as where it was checked
    delete = f"coalesce((\n{p.delete_condition}\n), false)" if p.delete_condition else None
    sql = (f"MERGE INTO {t.sql} AS t USING {view} AS s ON {on} "
           + (f"WHEN MATCHED AND ({delete}) THEN DELETE " if delete else "")
           + f"WHEN MATCHED THEN UPDATE SET {assignments} "
           + (f"WHEN NOT MATCHED AND NOT ({delete}) " if delete else "WHEN NOT MATCHED ")
           + f"THEN INSERT ({names}) VALUES ({values})")
    try:
        with_commit_properties(spark, properties, lambda: spark.sql(sql))
    finally:
        spark.catalog.dropTempView(view)


def with_commit_properties(spark, properties, action):
    """Run a SQL write so its snapshot carries `properties` (SQL has no write options):
    Iceberg's CommitMetadata sets them for commits made inside the callback."""
    from pyspark.java_gateway import ensure_callback_server_started

    class Callback:
        error = None

        def call(self):
            try:
                action()
            except Exception as e:  # re-raised in Python, with its own traceback
                Callback.error = e
            return None

        class Java:
            implements = ["java.util.concurrent.Callable"]

    sc = spark.sparkContext
    ensure_callback_server_started(sc._gateway)
    jmap = java(sc._jvm, "java.util.HashMap")()
    for key, value in properties.items():
        jmap.put(key, value)
    java(sc._jvm, "org.apache.iceberg.spark.CommitMetadata").withCommitProperties(
        jmap, Callback(), jvm_class(sc._jvm, "java.lang.RuntimeException"))
    if Callback.error is not None:
        raise Callback.error


def check_merge_columns(spark, p, df, plan):
    """The merge keys are columns of the batch and the delete condition reads it (alias s), as
    MERGE reads it: beside the table (t), where a name both have is ambiguous unless qualified."""
    from pyspark.sql import functions as F
    lower = {c.lower() for c in df.columns}
    for k in p.merge_keys:
        if k.lower() not in lower:
            raise bad_input(f"--merge_keys: unknown column {k!r}; columns: {', '.join(df.columns)}")
    if p.delete_condition:
        check_condition(spark, df.alias("s"), "--delete_condition", p.delete_condition)
        table = spark.range(0).select(*[F.lit(None).cast("string").alias(c) for c in plan.columns])
        check_condition(spark, df.alias("s").crossJoin(table.alias("t")), "--delete_condition",
                        p.delete_condition)


def check_merge_batch(spark, p, df, plan):
    """A MERGE whose source repeats a key is undefined: refuse the batch before writing."""
    from pyspark.sql import functions as F
    check_merge_columns(spark, p, df, plan)
    nulls = df.agg(*[F.sum(col(k).isNull().cast("long")).alias(f"n{i}")
                     for i, k in enumerate(p.merge_keys)]).first()
    for i, k in enumerate(p.merge_keys):
        if nulls[f"n{i}"]:
            n = nulls[f"n{i}"]
            raise bad_input(f"--merge_keys: key column {k!r} is NULL in {n} row{'s' if n != 1 else ''}; "
                            "a NULL key never matches, so MERGE would insert it again on every run")
    dupes = (df.groupBy(*[col(k) for k in p.merge_keys]).count().filter("count > 1").limit(5).collect())
    if dupes:
        shown = "; ".join(", ".join(f"{k}={r[i]!r}" for i, k in enumerate(p.merge_keys)) for r in dupes)
        raise bad_input(f"--merge_keys: the batch repeats keys ({shown}); a MERGE needs one source "
                        "row per key")


def merge_counts(spark, p, t, df, parent):
    """Rows the merge will insert, update and delete: batch keys against main's keys."""
    from pyspark.sql import functions as F
    if parent is None:
        deleted = F.coalesce(F.expr(p.delete_condition), F.lit(False)) if p.delete_condition else F.lit(False)
        row = df.alias("s").agg(F.sum((~deleted).cast("long")).alias("ins")).first()
        return {"rows_inserted": row["ins"] or 0, "rows_updated": 0, "rows_deleted": 0}
    keys = [f"k{i}" for i in range(len(p.merge_keys))]
    existing = (read_snapshot(spark, t, parent)
                .select(*[col(k).alias(n) for k, n in zip(p.merge_keys, keys)])
                .withColumn("_on_main", F.lit(True)))
    deleted = F.expr(p.delete_condition) if p.delete_condition else F.lit(False)
    batch = df.alias("s").select(*[col(k).alias(n) for k, n in zip(p.merge_keys, keys)],
                                 F.coalesce(deleted, F.lit(False)).alias("_delete"))
    on_main = F.coalesce(F.col("_on_main"), F.lit(False))
    row = batch.join(existing, keys, "left").agg(
        F.sum((~on_main & ~F.col("_delete")).cast("long")).alias("ins"),
        F.sum((on_main & ~F.col("_delete")).cast("long")).alias("upd"),
        F.sum((on_main & F.col("_delete")).cast("long")).alias("del")).first()
    return {"rows_inserted": row["ins"] or 0, "rows_updated": row["upd"] or 0,
            "rows_deleted": row["del"] or 0}


CLOCK_SKEW_MS = 60_000  # how far Iceberg lets a commit's time go back from the one before it
# Iceberg's refusal of a commit timed more than that before the table's last (TableMetadata, 1.7.1)
CLOCK_BEHIND = re.compile(r"Invalid update timestamp \d+: before (last snapshot log entry|the latest metadata log entry)")
CLOCK_HINT = (" (this driver's clock is more than a minute behind the last commit's, made by a machine "
              "whose clock is ahead: sync the clocks (NTP), or rerun once this clock has passed it)")


def guard(spark, t, batch, since_ms, branch_made=True):
    """After every write: this run's snapshot must be the head of this run's branch.

    Anything else committed to main meanwhile (another batch's publish, a compaction) is someone
    else's legitimate work, decided at publish. Only this run's own snapshot on main means WAP was
    off and the rows went straight to main: that is undone by compare-and-swap, and the run fails.
    Returns the staged snapshot's snapshot_info."""
    table = iceberg_table(spark, t)
    head = table.refs().get(batch.branch)
    info = snapshot_info(spark, t, head.snapshotId(), table) if head is not None else None
    if info and info.summary.get(RUN_PROPERTY) == batch.run_id:
        return info
    main = table.refs().get("main")
    ours = None
    for mark in History().walk(table, main.snapshotId() if main else None):  # newest first
        if mark.run_id == batch.run_id:
            ours = mark
            break
        if mark.timestamp_ms < since_ms - CLOCK_SKEW_MS:  # older than this run: not ours
            break
    if ours is not None and head is None and branch_made:
        raise BranchGone(ours)  # published by another run, or WAP was off: the caller proves which
    if ours is not None:
        write_reached_main(spark, t, batch, ours)
    raise WapError(f"guard: branch {batch.branch} does not end in a snapshot of this run "
                   f"({batch.run_id}); not publishing")


class UnauditedOnMain(WapError):
    """A snapshot of this job is on main with no audit behind it (write.wap.enabled was off). The
    run that finds it records it in the ledger at once: expiry must never make its batch loadable
    again (main still holds the rows)."""

    def __init__(self, message, mark):
        super().__init__(message)
        self.mark = mark


class InputTaken(WapError):
    """Another run consumed this batch's input (or its id) while this run staged it: it can never
    be published, so the run drops its branch and the rows it quarantined, and fails (rerun)."""


class BranchGone(Exception):
    """The guard found this run's snapshot on main and this run's branch gone."""

    def __init__(self, mark):
        super().__init__(f"snapshot {mark.snapshot_id}")
        self.mark = mark


def write_reached_main(spark, t, batch, ours):
    """This run's write went straight to main (write.wap.enabled was off, so Iceberg ignored the
    branch): take it off again if main's head is still that snapshot, and fail the run."""
    if undo_write_to_main(spark, t, batch.run_id):
        raise WapError(f"guard: this run's write reached main as snapshot {ours.snapshot_id} (was "
                       "write.wap.enabled turned off?); it was taken off main again; not publishing")
    raise UnauditedOnMain(f"guard: this run's write reached main as snapshot {ours.snapshot_id} (was "
                          "write.wap.enabled turned off?); main has moved on since, so it was NOT "
                          "undone: check main; not publishing", replace(ours, recorded=False))


def settle_branch_gone(run, ours):
    """This run's branch is gone while its snapshot is on main. Legitimate only if another run of
    the batch resumed that snapshot and published it: its compare-and-swap then named itself in
    the table's last-publish property, or the ledger records it. Otherwise the write reached main
    unaudited: undone, exit 1."""
    table = iceberg_table(run.spark, run.t)
    run.ledger.forget()
    publishers = [m for m in [last_publish(table)] + run.ledger.published()
                  if m is not None and m.snapshot_id == ours.snapshot_id and m.status == "published"
                  and m.run_id != run.batch.run_id]
    if not publishers:
        write_reached_main(run.spark, run.t, run.batch, ours)
    run.report.rows_written = int((ours.summary or {}).get("added-records", 0))
    return settle_already_published(run, publishers[0], ref_id(table, "main"))


def undo_write_to_main(spark, t, run_id):
    """Put main back to the parent of this run's snapshot, only if main's head is that snapshot:
    a compare-and-swap on the table metadata, so no one else's commit is ever taken off main."""
    jvm = spark.sparkContext._jvm
    ops = iceberg_table(spark, t).operations()
    for _ in range(5):  # another change of the table metadata (not of main) only means: try again
        base = ops.refresh()
        head = base.ref("main")
        snapshot = base.snapshot(head.snapshotId()) if head is not None else None
        if snapshot is None or snapshot.summary().get(RUN_PROPERTY) != run_id:
            log.error("guard: main's head is not this run's snapshot; main is left as it is")
            return False
        builder = java(jvm, "org.apache.iceberg.TableMetadata").buildFrom(base)
        parent = snapshot.parentId()
        builder = builder.setBranchSnapshot(parent, "main") if parent is not None else builder.removeRef("main")
        try:
            with commit_conflicts():
                ops.commit(base, builder.build())
        except CommitConflict:
            continue
        log.error("guard: this run's write reached main; main is back at snapshot %s", parent)
        return True
    return False


BRANCH_COMMIT_ATTEMPTS = 10


def change_branch(spark, sql):
    """Run a branch DDL statement. Iceberg does not retry a branch change that lost to another
    commit (other runs create and drop their branches at the same moments): retry it here."""
    for attempt in range(1, BRANCH_COMMIT_ATTEMPTS + 1):
        try:
            with commit_conflicts():
                return spark.sql(sql)
        except CommitConflict as e:
            if attempt == BRANCH_COMMIT_ATTEMPTS:
                raise WapError(f"branch change lost to other commits {attempt} times ({e}): {sql}") from None
            time.sleep(random.uniform(0.05, 0.3) * attempt)


DAY_MS = 86_400_000


NO_AGE_LIMIT_DAYS = 1_000_000  # a branch's own retention that snapshot expiry never reaches


def create_branch(spark, t, branch, head, made=False):
    """A branch at `head` (an Iceberg Snapshot; `made`: a snapshot id, the branch's head already,
    as the first write to an empty table makes it) that snapshot expiry never removes: its own
    retention, which overrides the table's history.expire.max-ref-age-ms, outlasts any table.
    The job's runs drop a kept one once it is --branch_retention_days old (drop_aged_branches).
    A branch that expiry removes in the same pass as it expires snapshots makes Iceberg's Java
    expiry (1.7.1, before 1.10) clean files up by the wrong branch's history once main is left
    alone, deleting files main still reads."""
    change_branch(spark, f"ALTER TABLE {t.sql} {'REPLACE' if made else 'CREATE'} BRANCH {quote(branch)} "
                         f"AS OF VERSION {int(head if made else head.snapshotId())} RETAIN {NO_AGE_LIMIT_DAYS} DAYS")


def drop_branch(spark, t, branch):
    change_branch(spark, f"ALTER TABLE {t.sql} DROP BRANCH IF EXISTS {quote(branch)}")


# =================================================================================================
# Audit: what file metrics prove first, then every other check in one pass over the staged rows
# =================================================================================================

def in_scope(c):
    """True for the rows a check applies to: those meeting its `where`, or all."""
    from pyspark.sql import functions as F
    return F.coalesce(F.expr(c.where), F.lit(False)) if c.where else F.lit(True)


def rows_in_scope(df, c):
    return df.filter(in_scope(c)) if c.where else df


def value_in_scope(c):
    """The check's column, NULL on the rows its `where` leaves out (aggregates skip NULLs)."""
    from pyspark.sql import functions as F
    return F.when(in_scope(c), col(c.column)) if c.where else col(c.column)


def failing_rows_condition(c):
    """True where a row the check applies to violates it. NULL passes every row check except
    not_null, and between, accepted_values and regex with allow_null false."""
    from pyspark.sql import functions as F
    condition = F.coalesce(KINDS[c.check].fails(c), F.lit(False))
    if c.check != "not_null" and not c.allow_null and None not in (c.values or ()):
        condition = condition | col(c.column).isNull()
    return in_scope(c) & condition if c.where else condition


def undecided_fails(F, c, violation):
    """A value a between or accepted_values cannot decide fails ('abc' against a number bound of a
    string column, or a literal its common type with the column cannot hold: Spark's comparison is
    NULL); a NULL value stays NULL, for allow_null to decide."""
    return F.when(col(c.column).isNotNull(), F.coalesce(violation, F.lit(True)))


def outside_range(c):
    """A between check's violation; NULL for a NULL value."""
    from pyspark.sql import functions as F
    parts = []
    if c.min is not None:
        parts.append(col(c.column) <= F.lit(c.min) if c.min_exclusive else col(c.column) < F.lit(c.min))
    if c.max is not None:
        parts.append(col(c.column) >= F.lit(c.max) if c.max_exclusive else col(c.column) > F.lit(c.max))
    return parts[0] if len(parts) == 1 else parts[0] | parts[1]


def read_snapshot(spark, t, snapshot_id):
    return spark.read.format("iceberg").option("snapshot-id", snapshot_id).load(f"{t.catalog}.{t.ident}")


MIN_SPLIT_BYTES = 1 << 20
ADAPTIVE_SPLIT_BYTES = 16 << 20  # Iceberg's split size for a scan smaller than 200 such splits
OPEN_FILE_COST = 4 << 20  # read.split.open-file-cost: what Iceberg counts a small file as


def scan_split_size(spark, summary):
    """Bytes per task for a scan of the files a snapshot added (`summary`: its summary), so they
    are read on every core: Iceberg packs up to 16 MB into one task, so a batch of a few dozen MB
    was scanned by one task on one core of two. None where Iceberg's own sizing already gives
    every core a task (or there is nothing to size)."""
    size = int((summary or {}).get("added-files-size") or 0)
    files = int((summary or {}).get("added-data-files") or 0)
    cores = max(1, spark.sparkContext.defaultParallelism)
    if not size or size >= ADAPTIVE_SPLIT_BYTES * cores:
        return None
    return min(ADAPTIVE_SPLIT_BYTES, max(MIN_SPLIT_BYTES, -(-(size + files * OPEN_FILE_COST) // cores)))


def read_staged(spark, t, staged, parent, mode="append", batch=None, p=None, summary=None):
    """The rows this batch staged, as read back from the branch snapshot:
    append: an incremental read from main's snapshot to the branch head;
    overwrite_partitions: the rows of the data files the snapshot added (the replaced partitions);
    merge: the staged rows whose keys the batch inserted or updated.
    `summary`: the staged snapshot's, which sizes the read's tasks to the cluster (append)."""
    from pyspark.sql import functions as F
    if mode == "append":
        reader, split = spark.read.format("iceberg"), scan_split_size(spark, summary)
        reader = reader.option("split-size", split) if split else reader
        reader = (reader.option("snapshot-id", staged) if parent is None  # the table is the batch
                  else reader.option("start-snapshot-id", parent).option("end-snapshot-id", staged))
        return reader.load(f"{t.catalog}.{t.ident}")
    if mode == "overwrite_partitions":
        return files_rows(spark, t, staged, staged)
    rows = read_snapshot(spark, t, staged)
    kept = batch.alias("s")
    if p.delete_condition:
        kept = kept.filter(~F.coalesce(F.expr(p.delete_condition), F.lit(False)))
    types = rows.select(*[col(k) for k in p.merge_keys]).schema.fields
    keys = kept.select(*[col(k).cast(f.dataType).alias(f.name) for k, f in zip(p.merge_keys, types)])
    names = [f.name for f in types]
    wanted = keys.unionByName(merged_keys(spark, t, staged, parent, names, summary or {})).distinct()
    wanted = wanted.toDF(*[f"_wap_key{i}" for i in range(len(names))])  # NULL keys match too (a
    on = [col(n).eqNullSafe(F.col(f"_wap_key{i}")) for i, n in enumerate(names)]  # merge inserts them)
    return rows.join(wanted, functools.reduce(lambda x, y: x & y, on), "left_semi")


def merged_keys(spark, t, staged, parent, keys, summary):
    """The keys of the rows a staged merge wrote, read from the snapshot: Iceberg's changelog of
    it (the rows of the files it added, INSERT, and removed, DELETE, read by the table's schema),
    less the rows a copy-on-write merge carried over unchanged (removed and added alike). The
    batch evaluated again for the audit may differ from the one merged (a transform reading the
    clock or a table, another run's resumed snapshot): no row it wrote goes unaudited. Computed
    once (a local checkpoint): the audit reads the staged rows more than once."""
    from pyspark.sql import functions as F
    if parent is None:  # the first merge into an empty table: every row is the merge's
        return read_snapshot(spark, t, staged).select(*[col(k) for k in keys])

    def written(changes):
        data = [c for c in changes.columns if c not in CHANGELOG_COLUMNS]
        micros = {"timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX",
                  "timestampNTZFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSS"}
        row = F.xxhash64(F.to_json(F.struct(*[col(c) for c in data]), micros)).alias("_wap_row")
        # INSERT counts +1, DELETE -1, so a row carried over nets to 0 (a filter on _change_type
        # would be pushed into the changelog's scan, which cannot evaluate it)
        sign = F.when(F.col("_change_type") == "INSERT", 1).otherwise(-1)
        net = changes.groupBy(*[col(k) for k in keys], row).agg(F.sum(sign).alias("_wap_net"))
        return net.filter("_wap_net <> 0").select(*[col(k) for k in keys]).localCheckpoint()
    try:
        return written(spark.read.format("iceberg").option("start-snapshot-id", parent)
                       .option("end-snapshot-id", staged).load(f"{t.catalog}.{t.ident}.changes"))
    except Exception as e:  # the table has delete files (any live one), which 1.7.1's changelog refuses
        if "Delete files are currently not supported" not in str(e):
            raise
    table = iceberg_table(spark, t)
    if int(summary.get("added-delete-files", 0)) or table.snapshot(staged).schemaId() != table.snapshot(parent).schemaId():
        # merge-on-read: the files it added hold its rows alone; or rows of two schemas: all audited
        return files_rows(spark, t, staged, staged).select(*[col(k) for k in keys]).localCheckpoint()
    return written(files_rows(spark, t, staged, staged).withColumn("_change_type", F.lit("INSERT")).unionByName(
        files_rows(spark, t, parent, staged, 2).withColumn("_change_type", F.lit("DELETE"))))


CHANGELOG_COLUMNS = ("_change_type", "_change_ordinal", "_commit_snapshot_id")


def files_rows(spark, t, snapshot_id, listed_by, status=1):
    """The rows, as of `snapshot_id`, of the data files snapshot `listed_by` added (status 1) or
    removed (2)."""
    from pyspark.sql import functions as F
    files = file_entries(spark, t, listed_by, status).select(F.col("data_file.file_path").alias("_file"))
    return (read_snapshot(spark, t, snapshot_id).select("*", "_file")
            .join(F.broadcast(files), "_file", "left_semi").drop("_file"))


def file_entries(spark, t, snapshot_id, status=1):
    """The `entries` metadata table's rows of the data files a snapshot added (status 1, its
    manifests'), or removed (status 2)."""
    from pyspark.sql import functions as F
    return (spark.read.format("iceberg").option("snapshot-id", snapshot_id).load(f"{t.catalog}.{t.ident}.entries")
            .filter((F.col("status") == status) & (F.col("snapshot_id") == snapshot_id)
                    & (F.col("data_file.content") == 0)))


def check_result(c, failing_rows, total_rows, observed=None, sample=None, detail=None):
    fraction = (failing_rows / total_rows) if (failing_rows is not None and total_rows) else 0.0
    if failing_rows is None:
        passed = detail is None
    else:
        passed = True
        if c.max_failing_rows is not None or c.max_failing_fraction is None:
            passed = failing_rows <= (c.max_failing_rows or 0)
        if c.max_failing_fraction is not None:
            passed = passed and fraction <= c.max_failing_fraction
        if c.threshold is not None:  # the share of rows that pass, under the condition
            share = (total_rows - failing_rows) / total_rows if total_rows else 1.0  # 66/100 is 0.66; 1 - 0.34 is not
            passed = c.threshold.holds(share)
            if not passed:
                detail = f"{share:.6g} of the rows passed, expected {c.threshold}"
    result = {"name": c.name, "check": c.check, "action": c.action, "passed": passed,
              "failing_rows": failing_rows, "failing_fraction": round(fraction, 6),
              "max_failing_rows": c.max_failing_rows, "max_failing_fraction": c.max_failing_fraction,
              "observed": observed, "detail": detail, "sample": sample or []}
    if failing_rows is not None:
        result["checked_rows"] = total_rows  # the share that passed, exactly, for Glue's metrics
    if c.labels:
        result["labels"] = c.labels
    return result


def metric_name(what, *identity):
    """A metric's column in the shared pass, named by what it measures (never by the check), so
    checks that need the same metric share one aggregate."""
    return f"{what}_{hashlib.sha1(repr(identity).encode()).hexdigest()[:12]}"


def scope_metric(c):
    return metric_name("in", c.where)


def fail_metric(c):
    """A row check's metric: how many rows in scope fail it."""
    return metric_name("fail", c.check, c.column, c.min, c.max, c.min_exclusive, c.max_exclusive,
                       c.allow_null, c.values, c.pattern, c.expr, c.where)


def stat_metric(c):
    stat = "null_fraction" if c.stat == "completeness" else c.stat  # one count of NULLs for both
    return metric_name("stat", stat, c.q, c.columns or [c.column], c.where)


def key_bound(c, j, side):
    return metric_name(side, c.columns[j])


def row_metrics(checks):
    """The aggregates every check needs, each once: evaluated together, in one pass."""
    from pyspark.sql import functions as F
    aggs = {"rows": F.count(F.lit(1))}
    for c in leaf_checks(checks):
        if c.where:  # the rows the check applies to: its failing fraction is of these
            aggs[scope_metric(c)] = F.sum(in_scope(c).cast("long"))
        if c.action != "drop" or resplit(c):
            aggs.update(KINDS[c.check].needs(c))
    return [agg.alias(name) for name, agg in aggs.items()]


def own_quarantine(batch):
    """This run's tagged quarantined rows, if the staged snapshot's quarantine is its own."""
    return batch.dropped_rows if batch.quarantine_run == batch.run_id else None


def resplit_stale(a, c):
    """What a resplit drop check finds changed since the split: staged rows that meet it now (in
    the shared pass), and rows of this run's quarantine it dropped that no longer do (one job);
    "" if nothing."""
    from pyspark.sql import functions as F
    kept, back = a.row[fail_metric(c)], 0
    if a.quarantined is not None:
        back = a.quarantined.filter(F.array_contains("_wap_failed_checks", c.name)
                                    & ~failing_rows_condition(c)).count()
    return "; ".join(([f"{kept} staged rows meet it"] if kept else [])
                     + ([f"{back} rows it quarantined no longer do"] if back else []))


def resplit(c):
    """A drop check whose condition reads a table (a subquery: `id NOT IN (SELECT id FROM <this
    table>)`): the batch was split against that table as it was, and it may have changed by the
    audit (main moved between the split and the stage, or before a rebase). Its staged rows are
    counted again: any that meet it now fail the audit, and a rerun splits the batch afresh."""
    return c.action == "drop" and c.reads_tables


PERCENTILE_ACCURACY = 10_000  # median, quantile: within 1/10,000 of the rows' rank
DISTINCT_RSD = 0.01  # --suggest_checks' profile: HyperLogLog++ relative standard deviation


def metric_key(c):
    """The run ledger's key for a check's statistic, so anomaly checks find its history."""
    if KINDS[c.check].reads == OTHER_TABLE:
        return match_metric_key(c)
    if c.check == "file_uniqueness":  # the files it reads: the location and which of its files
        chosen = "" if c.select is None else ":" + hashlib.sha1(repr(c.select).encode()).hexdigest()[:12]
        return f"file_uniqueness:{c.path or 'batch'}{chosen}"
    stat = f"quantile({c.q})" if c.stat == "quantile" else c.stat
    if c.check == "row_count" or c.query:
        stat = "row_count" if c.check == "row_count" else f"sql:{hashlib.sha1(c.query.encode()).hexdigest()[:12]}"
    key = (stat if c.check == "row_count" or c.query or c.stat in ("row_count", "column_count") else
           f"{stat}:{','.join(key_name(x) for x in c.columns or [c.column])}")
    return f"{key} where {c.where}" if c.where else key


def key_name(name):
    """A column or table name in a metric key: lower case, quoted if it holds a character or word
    the key itself uses (columns "a,b" and "a", "b" must not share a history, nor a column
    "x where y > 0" (or "x where") with column x under `where: y > 0` (or `where: where - y > 0`))."""
    plain = re.fullmatch(r"[^,=:`]+", name) and not re.search(r"\swhere(\s|$)", name, re.I)
    return name.lower() if plain else quote(name.lower())


def match_metric_key(c):
    """A comparison with reference tables (a relationship's too), keyed by the tables (not their
    aliases) and columns: aggregate_match:sum(amount)/sum(ns.t.total), dataset_match:ns.t:id=ref_id:a=b,
    relationship:ns.t:id=ref_id."""
    if c.check == "aggregate_match":
        return "aggregate_match:" + "/".join(str(replace(agg, reference=agg.table)).lower() for agg in c.aggregates)
    pairs = [zip(c.columns, c.to_columns), zip(c.match_columns or ["*"], c.to_match_columns or ["*"])] \
        if c.check == "dataset_match" else [zip(c.columns, c.to_columns)] if c.check == "relationship" else []
    key = ":".join([c.check, c.to_table or c.reference] + [",".join(f"{key_name(x)}={key_name(y)}" for x, y in p)
                                                            for p in pairs])
    return f"{key} where {c.where}" if c.where else key  # a relationship's rows in scope


def measure(a, c):
    """The value of a stat or anomaly check's statistic, from the one-pass metrics (the grouped
    ones from one grouping per column set and scope, shared); None when there are no values."""
    in_rows = a.in_rows(c)
    if c.stat == "row_count":
        return float(in_rows)
    if c.stat == "sql":
        return sql_value(a, c)[0]
    if c.stat == "column_count":
        return len(a.batch_fields())
    stat = STATS[c.stat]
    if stat.grouped:
        return stat.grouped(a.grouped(c), in_rows)
    value = a.row[stat_metric(c)]
    if stat.final:
        return stat.final(value, in_rows)
    return None if value is None else value if isinstance(value, int) else float(value)


def value_groups(df, c):
    """As Deequ's (its FrequencyBasedAnalyzer): the groups of the rows in scope that hold a value
    in any of the columns, rows with none left out of the counts and the shares alike: how many
    groups, how many hold one row, how many rows they hold, and their entropy (-sum p ln p, p = n /
    rows: ln rows - sum(n ln n) / rows). One job."""
    from pyspark.sql import functions as F
    keys = [col(x) for x in c.columns or [c.column]]
    n = F.col("_wap_n")
    g = (rows_in_scope(df, c)
         .filter(functools.reduce(lambda x, y: x | y, [k.isNotNull() for k in keys]))
         .groupBy(*keys).agg(F.count(F.lit(1)).alias("_wap_n")).select("_wap_n")
         .agg(F.count(F.lit(1)).alias("values"), F.sum((n == 1).cast("long")).alias("once"),
              F.sum(n).alias("rows"), F.sum(n * F.log(n)).alias("nlogn"))
         .first())
    rows = g["rows"] or 0
    return {"values": g["values"], "once": g["once"], "rows": rows,
            "entropy": max(math.log(rows) - g["nlogn"] / rows, 0.0) if rows else None}


def outside_bounds(c, value):
    """Why a measured value breaks the check's min/max (exclusive where asked), or None. NaN is
    outside every range."""
    if math.isnan(value):
        return "the value is NaN"
    if c.condition is not None:
        return None if c.condition.holds(value) else f"{value:g} is not {c.condition}"
    low = c.min is not None and (value <= c.min if c.min_exclusive else value < c.min)
    high = c.max is not None and (value >= c.max if c.max_exclusive else value > c.max)
    if not (low or high):
        return None
    lo = "-" if c.min is None else f"{'(' if c.min_exclusive else '['}{c.min}"
    hi = "-" if c.max is None else f"{c.max}{')' if c.max_exclusive else ']'}"
    return f"{value:g} is outside {lo}..{hi}"


def audit_stat(a, c):
    """The statistic within min/max, or under its condition."""
    return judged(a, c, measure(a, c), "no values")


def measured_as(c, result):
    """The result, keyed for the ledger's history of its metric."""
    result["metric"] = metric_key(c)
    if stat_of(c).approximate:
        result["approximate"] = True
    return result


def ledger_metric(row, key):
    """A metric of a ledger row; the row count also from rows written (rows from before metrics)."""
    metrics = row["metrics"] or {}
    value = metrics.get(key)
    if value is None:  # keys written before column names were lower-cased (a `where` never was)
        value = next((v for k, v in metrics.items() if same_metric(k, key)), None)
    return float(row["rows_written"]) if value is None and key == "row_count" and row["rows_written"] \
        else value


def same_metric(recorded, key):
    """A key as an older run wrote it: the same, but for the case of its column names. Not a
    file rule's: its path was never lower-cased, and s3://b/Data/ is another place than s3://b/data/."""
    if key.startswith("file_uniqueness:"):
        return False
    (what, where), (own, own_where) = (k.partition(" where ")[::2] for k in (recorded, key))
    return what.lower() == own.lower() and where == own_where


def history_value(row, c, key):
    """A check's metric in a ledger row; a completeness also from the null fraction that the
    Completeness analyzer and DetectAnomalies record."""
    value = ledger_metric(row, key)
    if value is None and c.stat == "completeness":
        nulls = ledger_metric(row, "null_fraction:" + key.partition(":")[2])
        value = None if nulls is None else 1 - nulls
    return value


MAD_SCALE = 1.4826  # MAD x this estimates the standard deviation of normally distributed values


def audit_anomaly(a, c):
    """The statistic against the same metric of the last published runs: the distance from the
    history's median in units of its scaled median absolute deviation (robust). Zero spread means
    any change is an anomaly; too little history passes."""
    value, in_rows, key = measure(a, c), a.in_rows(c), metric_key(c)
    history = [x for x in (ledger_metric(r, key) for r in a.ledger.recent(c.lookback, Status.PUBLISHED))
               if x is not None]
    if value is None:
        return measured_as(c, check_result(c, None, in_rows, observed=None, detail="no values"))
    if len(history) < c.min_history:
        result = check_result(c, None, in_rows, observed=value)
        result["history"] = len(history)
        return measured_as(c, result)
    median = statistics.median(history)
    spread = MAD_SCALE * statistics.median([abs(x - median) for x in history])
    low, high = median - c.max_deviations * spread, median + c.max_deviations * spread
    anomalous = not (low <= value <= high) if spread else not math.isclose(value, median, rel_tol=1e-9,
                                                                            abs_tol=1e-12)
    detail = None
    if anomalous:
        detail = (f"{value:g} is {abs(value - median) / spread:.1f} deviations from the median "
                  f"{median:g} of the last {len(history)} publishes (limit {c.max_deviations})"
                  if spread else f"{value:g} differs from {median:g}, the value of all "
                                 f"{len(history)} recent publishes")
    result = check_result(c, None, in_rows, observed=value, detail=detail)
    result["expected"] = [round(low, 6), round(high, 6)]
    result["history"] = len(history)
    return measured_as(c, result)


def missing_references(df, target, c):
    """The rows of df whose (non-NULL) key has no match in the target table."""
    from pyspark.sql import functions as F
    keys = target.select(*[col(k).alias(f"_wap_to{i}") for i, k in enumerate(c.to_columns)]).distinct()
    present = F.lit(True)
    match = F.lit(True)
    for i, k in enumerate(c.columns):
        present = present & col(k).isNotNull()
        match = match & (col(k) == F.col(f"_wap_to{i}"))
    return df.filter(present).join(keys, match, "left_anti")


def audit_relationship(a, c):
    """Every non-NULL key of the batch must exist on the referenced table's main, or, with a
    condition, the share of rows that have a match must meet it. The share is its metric."""
    missing = missing_references(rows_in_scope(a.staged_df, c), a.reference(c.to_table), c)
    failing, rows = missing.count(), a.in_rows(c)
    result = check_result(c, failing, rows)
    if rows:
        result["observed"] = (rows - failing) / rows
    if c.on_share:
        detail = outside_bounds(c, result["observed"]) if rows and c.condition is not None else None
        result.update(passed=detail is None, detail=detail)
    if failing:
        result["sample"] = sample_rows(missing)
    return measured_as(c, result)


def judged(a, c, value, missing):
    """A measured value (a statistic, a query's, a ratio or share) under the check's condition,
    recorded as its metric; `missing` says why there is no value."""
    detail = missing if value is None else outside_bounds(c, value)
    return measured_as(c, check_result(c, None, a.total, observed=value, detail=detail))


def audit_row_count_match(a, c):
    """The batch's rows over the reference's."""
    reference = a.reference(c.to_table).count()
    return judged(a, c, a.total / reference if reference else None, f"{c.to_table} has no rows")


def column_types(fields):
    return {f.name: f.dataType.simpleString() for f in fields}


def audit_schema_match(a, c):
    """The share of the columns of either side that the other has with the same name and type
    (Glue's: identical names and types, in any order). 1.0: the same schema."""
    ours, theirs = column_types(a.batch_fields()), column_types(a.reference(c.to_table).schema.fields)
    names = ours.keys() | theirs.keys()
    return judged(a, c, sum(ours.get(n) == theirs.get(n) for n in names) / len(names), None)


def aggregate_of(agg):
    from pyspark.sql import functions as F
    return {"sum": F.sum, "avg": F.avg}[agg.func](col(agg.column))


def aggregate_metric(agg):
    return metric_name("agg", agg.func, agg.column)


def batch_aggregates(c):
    """aggregate_match: its aggregates of the batch, in the shared pass."""
    return {aggregate_metric(agg): aggregate_of(agg) for agg in c.aggregates if not agg.table}


def audit_aggregate_match(a, c):
    """The first aggregate over the second: the batch's from the shared pass, a reference's from
    its main."""
    values = [a.reference(agg.table).agg(aggregate_of(agg)).first()[0] if agg.table
              else a.row[aggregate_metric(agg)] for agg in c.aggregates]
    missing = next((f"{agg} has no values" for agg, v in zip(c.aggregates, values) if v is None), None)
    if missing is None and values[1] == 0:
        missing = f"{c.aggregates[1]} is 0"
    return judged(a, c, None if missing else float(values[0]) / float(values[1]), missing)


def matching_rows(df, reference, c):
    """dataset_match: the rows of df with a reference row of the same key (a NULL key matches
    nothing) whose match columns are equal, NULL equal to NULL."""
    from pyspark.sql import functions as F
    pairs = list(zip(c.columns, c.to_columns)) + list(zip(c.match_columns, c.to_match_columns))
    theirs = reference.select(*[col(r).alias(f"_wap_ref{i}") for i, (_, r) in enumerate(pairs)])
    keys = len(c.columns)
    same = [col(ours) == F.col(f"_wap_ref{i}") if i < keys else col(ours).eqNullSafe(F.col(f"_wap_ref{i}"))
            for i, (ours, _) in enumerate(pairs)]
    return df.join(theirs, functools.reduce(lambda x, y: x & y, same), "left_semi")


def audit_dataset_match(a, c):
    """The share of the batch's rows that match a reference row."""
    matched = matching_rows(a.staged_df, a.reference(c.to_table), c).count()
    return judged(a, c, matched / a.total if a.total else None, "the batch has no rows")


def audit_sql(a, c):
    """The query's value within min/max or under its condition."""
    return judged(a, c, *sql_value(a, c))


def query_views(a):
    """The views a query reads: {batch}, {table} (as it would be published), {main} (before this run)."""
    table = a.whole_table if a.whole_table is not None else read_snapshot(a.spark, a.t, a.staged_id)
    main = read_snapshot(a.spark, a.t, a.parent) if a.parent is not None else table.limit(0)
    return sql_views(a.spark, a.staged_df, table, main)


def sql_value(a, c):
    """(the value of the query, why there is none)."""
    with query_views(a) as views:
        rows = sql_query(a.spark, c, f"check {c.name!r}", views, a.staged_df.columns).take(2)
    if len(rows) != 1:
        return None, f"the query returned {len(rows)} rows, expected one"
    return (None, "the query returned NULL") if rows[0][0] is None else (float(rows[0][0]), None)


def audit_sql_rows(a, c):
    """Glue's row-level CustomSql: the batch's rows the query returns pass and the others fail,
    paired on the columns it returns (NULL equal to NULL)."""
    with query_views(a) as views:
        returned = sql_query(a.spark, c, f"check {c.name!r}", views, a.staged_df.columns)
        missing, strays = unreturned_rows(a.staged_df, returned)
        failing = missing.count()
        result = check_result(c, failing, a.total)
        if failing:
            result["sample"] = sample_rows(missing)
        strays = strays.count()
    if strays:  # as in Glue, which fails a rule whose query returns rows the dataset does not hold
        result.update(passed=False, detail=f"the query returned {strays} row{'s' if strays != 1 else ''} "
                                           "the batch does not hold")
    return result


def unreturned_rows(df, returned):
    """(df's rows the query did not return, the query's distinct rows that are none of df's),
    paired on the columns it returns, NULL equal to NULL."""
    from pyspark.sql import functions as F
    tag = f"_wap_q{uuid.uuid4().hex[:8]}_"
    theirs = returned.select(*[col(n).alias(f"{tag}{i}") for i, n in enumerate(returned.columns)]).distinct()
    same = functools.reduce(lambda x, y: x & y, [col(n).eqNullSafe(F.col(f"{tag}{i}"))
                                                 for i, n in enumerate(returned.columns)])
    return df.join(theirs, same, "left_anti"), theirs.join(df, same, "left_anti")


def plain(value):
    """A metric as a Python value, or None where py4j hands back a Java object (then no pruning)."""
    return value if isinstance(value, (int, float, str)) else None


PROVABLE = ("not_null", "between", "freshness", "accepted_values")  # decided from file metrics when they suffice
PLAIN_LITERAL = re.compile(r"[A-Za-z0-9 _\-,:;/@#%&=~'\"!<>`]+")  # no regex metacharacter


def accepted(c):
    """The values a check accepts, if it is a list of them: an accepted_values, or a regex that
    is a whole-value alternation of literals (`^(EWR|JFK|LGA)$`, or DQDL's `^(?:EWR|JFK)\\z`). The
    regex's list only proves a pass: Java's `$` also matches before a final line break, so a value
    outside it may match."""
    if c.check == "accepted_values":
        return c.values
    m = (re.fullmatch(r"\^\((?:\?:)?([^()]*)\)(?:\$|\\z)|\^([^()|]*)(?:\$|\\z)", c.pattern or "")
         if c.check == "regex" else None)
    parts = (m[1] if m[1] is not None else m[2]).split("|") if m else []
    return parts if parts and all(PLAIN_LITERAL.fullmatch(x) for x in parts) else None


def provable(c):
    return c.check in PROVABLE or accepted(c) is not None


@dataclass
class Proof:
    """What the staged files' metrics decided: `proven` checks (name -> newest value in epoch
    seconds for freshness, else None), the `total` rows, `keys` (unique check -> key bounds) and
    `null_free`: checks whose column no staged file holds a NULL in."""
    proven: dict = field(default_factory=dict)
    total: int = None
    keys: dict = field(default_factory=dict)
    null_free: set = field(default_factory=set)
    by_row_groups: set = field(default_factory=set)  # of `proven`: by the row groups, not the manifests


def prove_from_metadata(spark, t, table, snapshot_id, summary, checks, unique_checks):
    """Decide what Iceberg's own file metrics can prove, from the manifests of the staged
    snapshot's added files, read in the driver (no data file is read, and no Spark job runs).
    For each check, the violation test the scan would run is applied to every file's lower and
    upper bounds, null and NaN counts: a file that could hold a violating row, or lacks the metric
    (metrics mode none or counts, an all-NULL file, a column past the metrics limit), or a bound
    this cannot place as Spark would compare it, leaves the check to the scan. `table`: the
    table as just loaded, and `summary` the snapshot's. Returns a Proof."""
    if not unique_checks and not any(provable(c) and c.action != "drop" for c in checks):
        return Proof(total=int(summary.get("added-records", 0)))  # the row count is all there is
    columns, files = added_file_metrics(spark, t, table, snapshot_id, summary)
    proof, zone = Proof(total=sum(f.records for f in files)), SessionZone(spark)
    for c in checks:
        column = columns.get((c.column or "").lower())
        if (not files or column is None or not provable(c) or c.action == "drop"
                or (c.where and c.check == "freshness")):  # a where-clause's newest value is not a bound
            continue
        # (a uuid's row-group dictionaries compare as UUIDs, Spark's `isin` as text: no pushdown)
        if accepted(c) is not None and column.type != "uuid" and not any(f.some("nulls", column) for f in files):
            proof.null_free.add(c.name)
        try:
            could_fail = violation_test(c, column, zone)
            if not any(could_fail(f) for f in files):
                proof.proven[c.name] = (zone.seconds(column, max(f.bound(column, "upper") for f in files))
                                        if c.check == "freshness" else None)
        except NotProvable as e:
            log.info("check %r: not decided from the files' metrics (%s); scanned", c.name, e)
    for c in unique_checks:  # the batch's key range, which prunes the look-up on main
        keys = [columns.get(k.lower()) for k in c.columns]
        try:
            ranges = [[[f.bound(k, side) for f in files] for side in ("lower", "upper")] for k in keys if k]
        except NotProvable:  # a uuid key, say: Iceberg orders UUIDs unlike Spark's text of them
            continue
        if files and None not in keys and not any(None in b for r in ranges for b in r):
            proof.keys[c.name] = [(key_value(k, min(lo)), key_value(k, max(hi))) for k, (lo, hi) in zip(keys, ranges)]
    return proof


class NotProvable(Exception):
    """A value the proof cannot place as Spark would compare it: the check is scanned instead."""


@dataclass(frozen=True)
class MetricsColumn:
    """A top-level column of the table's schema as the files' metrics key it: field id and type."""
    id: int
    type: str  # Iceberg's name: int, long, float, double, decimal(9, 2), string, date, timestamptz, ...


@dataclass
class FileMetrics:
    """One added data file's metrics, by field id; bounds in Iceberg's single-value binary form."""
    records: int
    nulls: dict
    nans: dict
    lower: dict
    upper: dict

    def some(self, counts, column):
        """Whether this file may hold a NULL (counts "nulls") or a NaN ("nans") in the column: a
        count it does not record may."""
        n = getattr(self, counts).get(column.id)
        return n is None or n > 0

    def bound(self, column, side):
        """A bound as a Python value that orders as Spark orders the column (strings as UTF-8
        bytes), or None where the file has none (or a NaN one, from an old writer)."""
        raw = getattr(self, side).get(column.id)
        value = None if raw is None else decode_bound(column.type, raw)
        return None if isinstance(value, float) and math.isnan(value) else value


def added_file_metrics(spark, t, table, snapshot_id, summary):
    """({lower-case column name: MetricsColumn}, [FileMetrics]) of the files a snapshot added, read
    from the manifests this snapshot wrote: by Iceberg in the driver, each metrics map handed
    over as Iceberg's own JSON of it (about ten JVM calls a file), or, for a snapshot of more than
    MANY_FILES files, by one Spark job over the `entries` table. Names are resolved in the table's
    current schema, as an incremental read resolves them (a column added since has no metrics in
    these files); if the schema changed since the snapshot was written, nothing is proven."""
    jvm = spark.sparkContext._jvm
    fields = schema_json(jvm, table.schema())["fields"]
    names = Counter(f["name"].lower() for f in fields)
    columns = {f["name"].lower(): MetricsColumn(f["id"], f["type"]) for f in fields
               if isinstance(f["type"], str) and names[f["name"].lower()] == 1}  # nested, ambiguous: scanned
    snapshot = table.snapshot(snapshot_id)
    if not written_in_current_schema(table, snapshot):
        columns = {}  # changed since the write: a read of the snapshot types its columns as written
    if int(summary.get("added-data-files") or 0) > MANY_FILES:
        entries = file_entries(spark, t, snapshot_id).select(
            *[f"data_file.{m}" for m in ("record_count", "null_value_counts", "nan_value_counts", "lower_bounds",
                                         "upper_bounds")])
        return columns, [FileMetrics(r[0], r[1] or {}, r[2] or {}, {k: bytes(v) for k, v in (r[3] or {}).items()},
                                     {k: bytes(v) for k, v in (r[4] or {}).items()}) for r in entries.collect()]
    data_file, to_json = java(jvm, "org.apache.iceberg.DataFile"), java(jvm, "org.apache.iceberg.SingleValueParser").toJson
    maps = [(data_file.NULL_VALUE_COUNTS.type(), "nullValueCounts"), (data_file.NAN_VALUE_COUNTS.type(), "nanValueCounts"),
            (data_file.LOWER_BOUNDS.type(), "lowerBounds"), (data_file.UPPER_BOUNDS.type(), "upperBounds")]
    files, iterator = [], snapshot.addedDataFiles(table.io()).iterator()
    while iterator.hasNext():
        f = iterator.next()
        parsed = [json.loads(to_json(kind, getattr(f, getter)())) or {"keys": [], "values": []}
                  for kind, getter in maps]
        nulls, nans, lower, upper = [dict(zip(m["keys"], m["values"])) for m in parsed]
        files.append(FileMetrics(f.recordCount(), nulls, nans, {k: bytes.fromhex(v) for k, v in lower.items()},
                                 {k: bytes.fromhex(v) for k, v in upper.items()}))
    return columns, files


def written_in_current_schema(table, snapshot):
    """Whether the snapshot was written in the table's schema as it is now (or says nothing else):
    only then do its files' metrics answer for the columns the audit reads."""
    return snapshot.schemaId() is None or snapshot.schemaId() == table.schema().schemaId()


# added files beyond which one Spark job reads their metrics faster than the driver (measured warm:
# 50 files 0.07 s in the driver against 0.22 s by the job, 500 files 0.30 s against 0.16 s)
MANY_FILES = 200


def decode_bound(kind, raw):
    """A bound in Iceberg's single-value binary form (its spec's appendix D) as a Python value:
    numbers little-endian (an int column's may be 4 or 8 bytes after a promotion), a decimal's
    unscaled value big-endian; strings stay UTF-8 bytes. Types this does not order: NotProvable."""
    if kind in ("int", "long", "date", "timestamp", "timestamptz"):
        return int.from_bytes(raw, "little", signed=True)
    if kind in ("float", "double"):
        return struct.unpack("<f" if len(raw) == 4 else "<d", raw)[0]
    if kind == "string":
        if "\ufffd".encode() in raw:  # Iceberg decodes malformed UTF-8 (a Latin-1 export) to U+FFFD,
            raise NotProvable("a string bound holding U+FFFD")  # which Spark orders as other bytes
        return raw
    if kind == "boolean":
        return raw[0] != 0
    scale = re.fullmatch(r"decimal\(\d+,\s*(\d+)\)", kind)
    if scale:
        return Decimal(f"{int.from_bytes(raw, 'big', signed=True)}E-{scale[1]}")  # exact, at any precision
    raise NotProvable(f"no bounds of type {kind}")


NUMBER_KINDS = ("int", "long", "float", "double")
EPOCH_NAIVE = datetime(1970, 1, 1)


def literal_bound(column, value, zone, exclusive=False):
    """A check's literal as the column's bounds hold it, converted as Spark converts it to compare
    with the column (a date's days, a timestamp's microseconds in UTC, a string's UTF-8 bytes)."""
    kind = column.type
    if kind in NUMBER_KINDS or kind.startswith("decimal"):
        if (is_number(value) or isinstance(value, Decimal)) and (not exclusive or spark_compares_exactly(kind, value)):
            return value  # exact: where Spark rounds one side, it rounds monotonically (< may become =)
    elif kind == "string" and isinstance(value, str):
        return value.encode("utf-8")
    elif kind == "boolean" and isinstance(value, bool):
        return value
    elif kind == "date" and isinstance(value, str) and ISO_DATE.match(value) and parses(datetime.fromisoformat, value):
        return (datetime.fromisoformat(value) - EPOCH_NAIVE).days
    elif (kind in ("timestamp", "timestamptz") and isinstance(value, str) and ISO_TIMESTAMP.match(value)
          and parses(datetime.fromisoformat, value.replace("Z", "+00:00"))):
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        if moment.tzinfo is not None and kind == "timestamptz":
            return (moment - datetime(1970, 1, 1, tzinfo=timezone.utc)) // MICROSECOND
        if moment.tzinfo is None:  # a local time: as is for a column without a zone, else the session's
            local = (moment - EPOCH_NAIVE) // MICROSECOND
            return local if kind == "timestamp" else zone.instant(local)
    raise NotProvable(f"{json.dumps(value, default=str)} against a {kind} column")


def spark_compares_exactly(kind, value):
    """Whether Spark compares a column of this kind with this number without rounding either:
    an int with an int, decimal or long column, or one a float or double holds exactly; a float
    with a float, double or int column (a long or decimal column is cast to double); a decimal
    with a decimal column."""
    if isinstance(value, Decimal):
        return kind.startswith("decimal")
    if isinstance(value, int):
        return (kind in ("int", "long") or kind.startswith("decimal")
                or (kind == "double" and float(value) == value)
                or (kind == "float" and struct.unpack("<f", struct.pack("<f", float(value)))[0] == value))
    return kind in ("float", "double", "int")


def violation_test(c, column, zone):
    """file -> whether it could hold a row failing c (True also where a metric it needs is missing)."""
    def nulls(f):
        return f.some("nulls", column)
    if c.check == "not_null":
        return nulls
    if c.check == "freshness":  # the newest value is the largest upper bound (dates and times are exact)
        if column.type not in ("date", "timestamp", "timestamptz"):
            raise NotProvable(f"freshness of a {column.type} column")
        return lambda f: f.bound(column, "upper") is None
    if c.check == "between":
        low = None if c.min is None else literal_bound(column, c.min, zone, c.min_exclusive)
        high = None if c.max is None else literal_bound(column, c.max, zone, c.max_exclusive)

        def outside(f):
            lower, upper = f.bound(column, "lower"), f.bound(column, "upper")
            return ((low is not None and (lower is None or (lower <= low if c.min_exclusive else lower < low)))
                    or (high is not None and (upper is None or (upper >= high if c.max_exclusive else upper > high))))
        return lambda f: ((column.type in ("float", "double") and f.some("nans", column))
                          or (not c.allow_null and nulls(f)) or outside(f))
    values = [v for v in accepted(c) if v is not None]  # accepted_values, or a regex's literals
    nulls_fail = not (c.allow_null or None in accepted(c))
    if column.type == "string" and all(isinstance(v, str) for v in values):
        allowed = {v.encode("utf-8") for v in values}

        def other_values(f):  # a file of one value (a truncated bound never equals the upper) that is allowed
            lower = f.bound(column, "lower")
            return lower is None or lower != f.bound(column, "upper") or lower not in allowed
        return lambda f: (nulls_fail and nulls(f)) or other_values(f)
    if column.type in ("int", "long") and all(type(v) is int for v in values):
        runs = []  # runs of consecutive accepted values: a file within one holds only accepted values
        for v in sorted(set(values)):
            if runs and v == runs[-1][1] + 1:
                runs[-1][1] = v
            else:
                runs.append([v, v])

        def beyond(f):
            lower, upper = f.bound(column, "lower"), f.bound(column, "upper")
            return lower is None or upper is None or not any(lo <= lower and upper <= hi for lo, hi in runs)
        return lambda f: (nulls_fail and nulls(f)) or beyond(f)
    raise NotProvable(f"accepted values of a {column.type} column")


MICROSECOND = timedelta(microseconds=1)


class SessionZone:
    """Spark's session time zone, for what Spark reads as a local time there (a timestamp without
    a zone, a date's midnight): asked of the JVM only when a proof needs it, and converted by
    java.time as Spark converts (a time in a gap moves forward, one in an overlap takes the
    earlier offset)."""

    def __init__(self, spark):
        self.spark, self._zone = spark, None

    def instant(self, local_micros):
        """Microseconds since the epoch of a local date-time in the session's zone."""
        jvm = self.spark.sparkContext._jvm
        if self._zone is None:
            try:
                self._zone = java(jvm, "org.apache.spark.sql.catalyst.util.DateTimeUtils").getZoneId(
                    self.spark.conf.get("spark.sql.session.timeZone"))
            except Exception as e:
                raise NotProvable(f"the session time zone ({first_line(e)})") from None
        seconds, micros = divmod(local_micros, 1_000_000)
        local = java(jvm, "java.time.LocalDateTime").ofEpochSecond(seconds, micros * 1000,
                                                                   java(jvm, "java.time.ZoneOffset").UTC)
        moment = local.atZone(self._zone).toInstant()
        return moment.getEpochSecond() * 1_000_000 + moment.getNano() // 1000

    def seconds(self, column, bound):
        """A date's or timestamp's upper bound as Spark casts it to a timestamp, in epoch seconds."""
        if column.type == "timestamptz":
            return bound / 1_000_000
        return self.instant(bound * 86_400_000_000 if column.type == "date" else bound) / 1_000_000


def key_value(column, bound):
    """A key bound as the look-up on main takes it: numbers, strings and booleans (else None: no pruning)."""
    if column.type == "string":
        return bound.decode("utf-8")
    return bound if column.type in NUMBER_KINDS + ("boolean",) else None


def pushed_violation(c, dtype):
    """An accepted_values check's violation as a filter Iceberg can test against each Parquet row
    group's dictionary (`value NOT IN (...)`), or None."""
    from pyspark.sql import types as T
    if c.where or c.action == "drop" or accepted(c) is None:
        return None
    allowed = [v for v in accepted(c) if v is not None]
    ints = all(type(v) is int for v in allowed)
    # (Iceberg decodes a dictionary's strings with U+FFFD for malformed UTF-8, which Spark compares as bytes)
    if allowed and ((isinstance(dtype, T.StringType) and all(isinstance(v, str) and "\ufffd" not in v for v in allowed))
                    or (isinstance(dtype, T.LongType) and ints)
                    or (isinstance(dtype, T.IntegerType) and ints and all(-2 ** 31 <= v < 2 ** 31 for v in allowed))):
        return ~col(c.column).isin(allowed)  # the literals take the column's type: the filter is pushed
    return None


EXACT_IN_ICEBERG = ("IntegralType", "DecimalType", "DateType", "TimestampType", "TimestampNTZType",
                    "BooleanType")  # Spark and Iceberg order these alike (not NaN, not strings)


def bounds_may_decide(c):
    return c.check == "expression" and not c.where and c.action != "drop"


def violated_expression(spark, staged_df, c, test):
    """An expression check's violation (NOT `test`, its expression or what bounds_tests made of it)
    as (Iceberg's expression, Spark's), if Iceberg can evaluate all of it against file and row-group
    bounds: Spark must translate it to a data source predicate and Iceberg must convert that, over
    columns both order alike. Else None, and the scan decides."""
    from pyspark.sql import functions as F, types as T
    if not bounds_may_decide(c):
        return None
    violation = ~F.expr(test)
    types = {f.name: f.dataType for f in staged_df.schema.fields}
    if not all(isinstance(types[name], tuple(getattr(T, k) for k in EXACT_IN_ICEBERG))
               for name in referenced_columns(staged_df, [violation])):
        return None
    try:  # Spark's and Iceberg's own translators; anything they cannot do is left to the scan.
        # The first Filter down the plan's first children is the violation (what Iceberg did not
        # take itself, such as an identity-partition test, is a weaker filter: never a false proof)
        node = staged_df.filter(violation)._jdf.queryExecution().optimizedPlan()
        while node.nodeName() != "Filter" and node.children().size() > 0:
            node = node.children().apply(0)
        if node.nodeName() != "Filter":
            return None
        jvm = spark.sparkContext._jvm
        strategy = jvm_class(jvm, "org.apache.spark.sql.execution.datasources.v2.DataSourceV2Strategy$"
                             ).getField("MODULE$").get(None)
        predicate = strategy.translateFilterV2(node.condition())
        converted = (java(jvm, "org.apache.iceberg.spark.SparkV2Filters").convert(predicate.get())
                     if predicate.isDefined() else None)
        pushable = converted is not None and bounds_can_rule_out(
            java(jvm, "org.apache.iceberg.expressions.Expressions").rewriteNot(converted))
    except Exception as e:
        log.info("check %r: not decided from bounds (%s); scanned", c.name, first_line(e))
        return None
    return (converted, violation) if pushable else None


# DQDL's row test (_row_outcome): a row whose value the test cannot decide fails
ROW_OUTCOME = re.compile(r"coalesce\((?P<test>(?P<column>`(?:[^`]|``)+`) (?:IS NOT NULL AND|IS NULL OR) "
                         r"\((?P<inner>.*)\)), false\)", re.S)


def bounds_tests(staged_df, checks):
    """{check name: its test as bounds can decide it} for DQDL's row tests that are their own first
    argument: `coalesce(<col> IS NOT NULL AND (<inner>), false)`, where <inner> reads that column
    only and cannot be NULL for a value in it (a number compared with numbers, a time with a time),
    since the column's own NULL is decided before <inner>. Spark's own nullability of each <inner>,
    optimized over the columns declared NOT NULL, says so, in one analysis. Iceberg has no
    coalesce: as written, these tests would always be scanned."""
    from pyspark.sql import functions as F, types as T
    matched = {}
    for c in checks:
        m = ROW_OUTCOME.fullmatch(c.expr) if bounds_may_decide(c) else None
        try:
            if m:
                matched[c.name] = (m, F.expr(m["inner"]))
        except Exception:  # not an expression of its own: the shape matched across parentheses
            pass
    if not matched:
        return {}
    spark = staged_df.sparkSession
    try:
        probe = spark.createDataFrame([], T.StructType([T.StructField(f.name, f.dataType, False)
                                                        for f in staged_df.schema.fields]))
        # each inner, then its column as Spark resolves it (the very attribute, whatever the case)
        execution = probe.select(*[e for m, inner in matched.values() for e in (inner, F.expr(m["column"]))]
                                 )._jdf.queryExecution()
        selected, output = execution.analyzed().projectList(), execution.optimizedPlan().output()
        tests = {}
        for i, (name, (m, _)) in enumerate(matched.items()):
            reads = selected.apply(2 * i).references().toSeq()
            column = selected.apply(2 * i + 1).exprId().id()
            if (not output.apply(2 * i).nullable() and reads.size() == 1
                    and reads.apply(0).exprId().id() == column):
                tests[name] = m["test"]
        return tests
    except Exception as e:
        log.info("DQDL row tests not unwrapped for the bounds (%s); scanned", first_line(e))
        return {}


def added_files_may_hold(table, snapshot_id, summary, expression):
    """Whether a file the snapshot added may hold a row meeting `expression` (Iceberg's), by its
    column bounds, null and NaN counts: Iceberg's own test (InclusiveMetricsEvaluator), the one its
    scan planning prunes files with. False means no such row exists, so the check needs no Spark
    job. True whenever this cannot be told here: more than MANY_FILES files (one job reads them
    faster), a schema id other than the table's (a conservative guard: bounds are keyed by field
    id), or any error."""
    from pyspark import SparkContext
    try:
        snapshot = table.snapshot(snapshot_id)
        if int(summary.get("added-data-files") or 0) > MANY_FILES or not written_in_current_schema(table, snapshot):
            return True
        evaluator = java(SparkContext._jvm, "org.apache.iceberg.expressions.InclusiveMetricsEvaluator")(
            table.schema(), expression, False)  # case-insensitive, as the job's reads bind names
        iterator = snapshot.addedDataFiles(table.io()).iterator()
        while iterator.hasNext():
            if evaluator.eval(iterator.next()):
                return True
        return False
    except Exception as e:
        log.info("expression not tested against the added files' bounds (%s)", first_line(e))
        return True


# added files up to which the driver reads their row groups' statistics and dictionaries itself,
# DRIVER_READERS files at a time (measured warm, local files, one at a time: 2 files 0.02-0.035 s,
# 20 files 0.21-0.35 s; the filtered read's Spark job 0.18 and 0.35 s), and row groups in all
ROW_GROUP_FILES = 32
ROW_GROUP_LIMIT = 256
DRIVER_READERS = 8
ICEBERG_PARQUET = "org.apache.iceberg.parquet."


@functools.lru_cache(maxsize=4)
def parquet_reader(jvm):
    """(open, adapt): Parquet's ParquetFileReader.open as Iceberg's row-group filters take its
    reader, and Iceberg's adapter from a FileIO file to Parquet's. Iceberg's runtime jar relocates
    Parquet, so its package is read off the dictionary filter's own signature; the adapter
    (ParquetIO.file, package-private, the one Iceberg's reader uses) is reached by reflection, so
    the file is read through the table's own FileIO (S3FileIO on Glue)."""
    from pyspark import SparkContext
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()

    def load(name):
        return jvm.java.lang.Class.forName(name, True, loader)
    should_read = next(m for m in load(ICEBERG_PARQUET + "ParquetDictionaryRowGroupFilter").getMethods()
                       if m.getName() == "shouldRead")
    parquet = should_read.getParameterTypes()[0].getName().rsplit(".schema.", 1)[0]
    types = SparkContext._gateway.new_array(jvm.java.lang.Class, 1)
    types[0] = load("org.apache.iceberg.io.InputFile")
    adapt = load(ICEBERG_PARQUET + "ParquetIO").getDeclaredMethod("file", types)
    adapt.setAccessible(True)
    return java(jvm, parquet + ".hadoop.ParquetFileReader").open, adapt


class RowGroupsUntested(Exception):
    """What the driver cannot test row group by row group: the checks go to the filtered read."""


class Budget:
    """A count that threads take from: take(n) is False once more than it held has been taken."""

    def __init__(self, count):
        self.left, self.lock = count, threading.Lock()

    def take(self, n):
        with self.lock:
            self.left -= n
            return self.left >= 0

    def stop(self):
        with self.lock:
            self.left = -1


def row_groups_may_hold(table, snapshot_id, summary, expressions):
    """The names of `expressions` ({name: Iceberg expression, or a NotIn}) that some row group of
    a file the snapshot added may hold a row meeting, by the row group's own statistics and
    dictionaries, tested as Iceberg's reader tests them to skip row groups (ParquetMetricsRowGroupFilter,
    ParquetDictionaryRowGroupFilter, both in 1.7.1): each file's footer and the dictionary pages
    of the columns tested are read in the driver, DRIVER_READERS files at a time, no data page and
    no Spark job. A name not returned has no such row in the batch. Every name whenever this
    cannot be told here: more than ROW_GROUP_FILES files or ROW_GROUP_LIMIT row groups (a Spark
    job reads them in parallel), a file not in Parquet or without field ids, files or rows other
    than the snapshot's summary counts, a schema changed since the write, or any error; a name
    whose filter Iceberg cannot bind (its own error)."""
    from concurrent.futures import ThreadPoolExecutor
    from pyspark import SparkContext
    jvm, names = SparkContext._jvm, set(expressions)
    try:
        snapshot, io = table.snapshot(snapshot_id), table.io()
        if int(summary.get("added-data-files") or 0) > ROW_GROUP_FILES or not written_in_current_schema(table, snapshot):
            return names
        files, iterator = [], snapshot.addedDataFiles(io).iterator()
        while iterator.hasNext():
            f = iterator.next()
            if str(f.format()) != "PARQUET":
                return names
            files.append((f.location(), f.fileSizeInBytes(), f.recordCount()))
        if (len(files) != int(summary.get("added-data-files") or -1)
                or sum(f[2] for f in files) != int(summary.get("added-records") or -1)):
            return names  # the listing is not what the snapshot says it added
        tests, may = {}, set()
        for name, e in expressions.items():
            try:  # case-insensitive, as the job's reads bind names
                if isinstance(e, NotIn):
                    e = java(jvm, "org.apache.iceberg.expressions.Expressions").notIn(e.column, e.values)
                tests[name] = [java(jvm, ICEBERG_PARQUET + kind)(table.schema(), e, False)
                               for kind in ("ParquetMetricsRowGroupFilter", "ParquetDictionaryRowGroupFilter")]
            except Exception as error:
                log.info("check %r: its row groups not tested (%s)", name, first_line(error))
                may.add(name)
        if tests:
            with ThreadPoolExecutor(max(1, min(DRIVER_READERS, len(files)))) as pool:
                budget = Budget(ROW_GROUP_LIMIT)
                for held in pool.map(functools.partial(file_may_hold, jvm, io, tests, budget), files):
                    may |= held
        return may
    except Exception as e:
        log.info("row groups not tested in the driver (%s); read instead", first_line(e))
        return names


def file_may_hold(jvm, io, tests, budget, file):
    """The names of `tests` ({name: [row-group filters]}) that some row group of one Parquet file
    (location, size, records) may hold a row of. Raises RowGroupsUntested for a file without field
    ids, rows other than its manifest entry counts, or more row groups than the `budget` (shared by
    the files read side by side) has left; after any error the budget is spent, so the other
    readers stop before their next file (the filtered read decides anyway)."""
    from pyspark import SparkContext
    if not budget.take(0):
        raise RowGroupsUntested("another file could not be tested")
    try:
        open_file, adapt = parquet_reader(jvm)
        args = SparkContext._gateway.new_array(jvm.java.lang.Object, 1)
        args[0] = io.newInputFile(file[0], file[1])
        may = set()
        with closing(open_file(adapt.invoke(None, args))) as reader:
            file_schema, groups = reader.getFileMetaData().getSchema(), reader.getRowGroups()
            if not budget.take(groups.size()) or not java(jvm, ICEBERG_PARQUET + "ParquetSchemaUtil").hasIds(file_schema):
                raise RowGroupsUntested(f"{file[0]}: too many row groups, or no field ids")
            rows = 0
            for i in range(groups.size()):
                group = groups.get(i)
                rows += group.getRowCount()
                dictionaries = reader.getDictionaryReader(group)
                may |= {name for name, (stats, dictionary) in tests.items() if name not in may
                        and stats.shouldRead(file_schema, group) and dictionary.shouldRead(file_schema, group, dictionaries)}
            if rows != file[2]:
                raise RowGroupsUntested(f"{file[0]}: {rows} rows in its row groups, {file[2]} in its entry")
        return may
    except Exception:
        budget.stop()
        raise


def prove_by_row_groups(table, snapshot_id, summary, candidates, violations, proof):
    """Decide the pushdown's candidates (pushdown_candidates) with no Spark job where the row
    groups' statistics and dictionaries show that no staged row violates them (`violations`:
    {name: its violation, Iceberg's expression or a NotIn}): those are proven in `proof`
    (decided_by: row_groups). Returns the candidates left for the filtered reads."""
    if not violations:
        return candidates
    proven = set(violations) - row_groups_may_hold(table, snapshot_id, summary, violations)
    proof.proven.update(dict.fromkeys(proven))
    proof.by_row_groups |= proven
    return tuple({name: v for name, v in group.items() if name not in proven} for group in candidates)


def bounds_can_rule_out(expression):
    """True if a file's lower and upper bounds can show that no row meets this Iceberg expression:
    a range or equality test can, a `!=`, `NOT IN` or NOT NULL test cannot (Iceberg reads the file)."""
    op = expression.op().toString()
    if op == "AND":
        return bounds_can_rule_out(expression.left()) or bounds_can_rule_out(expression.right())
    if op == "OR":
        return bounds_can_rule_out(expression.left()) and bounds_can_rule_out(expression.right())
    return op in ("FALSE", "IS_NULL", "LT", "LT_EQ", "GT", "GT_EQ", "EQ", "IN", "STARTS_WITH")


NotIn = namedtuple("NotIn", "column values")  # a violation of an accepted list, as Iceberg's notIn


def pushdown_candidates(staged_df, checks, proof, files_may_hold):
    """The checks a filtered read can count for less than a scan, as two {name: violation}
    filters: accepted_values checks the manifests could not decide (a string column of several
    values, say), which Iceberg tests against each Parquet row group's dictionary, and `expression`
    checks Iceberg can evaluate whole, tested against the files' and row groups' bounds. Only
    columns the manifests show without NULLs take part in the first: Iceberg's dictionary test
    gives up on a row group holding a NULL. An expression whose violation no added file's bounds
    admit (`files_may_hold` of Iceberg's form of it is False) is proven here instead, in `proof`:
    the filtered read would plan no file. Also returns each candidate's violation for the row
    groups' test: Iceberg's expression, or a NotIn (the column holds no NULL, so Iceberg's
    `value NOT IN (...)` is Spark's filter exactly; built only if the test runs)."""
    spark = staged_df.sparkSession
    types = {f.name.lower(): f.dataType for f in staged_df.schema.fields}
    by_dictionary, by_bounds, violations = {}, {}, {}
    tests = bounds_tests(staged_df, [c for c in checks if c.name not in proof.proven])
    for c in checks:
        if c.name in proof.proven:
            continue
        if accepted(c) is not None and c.name in proof.null_free:
            v = pushed_violation(c, types.get(c.column.lower()))
            if v is not None:
                by_dictionary[c.name] = v
                violations[c.name] = NotIn(c.column, [x for x in accepted(c) if x is not None])
        elif c.check == "expression":
            violated = violated_expression(spark, staged_df, c, tests.get(c.name, c.expr))
            if violated is not None and not files_may_hold(violated[0]):
                proof.proven[c.name] = None
            elif violated is not None:
                violations[c.name], by_bounds[c.name] = violated
    return (by_dictionary, by_bounds), violations


def prove_by_pushdown(staged_df, checks, candidates):
    """Count each candidate's violations in one filtered read per filter (pushdown_candidates):
    the filter is "any of them is violated", so Iceberg skips every row group whose dictionaries
    (or bounds) hold no violation, and Spark counts each check's in the rows left. A clean batch
    reads no data page (unless a column outgrew its dictionary). Dictionaries and bounds are kept
    apart: one filter is tested against both as a whole, so mixing them would prune less.
    Returns {check name: failing rows}; a regex found failing is left to the scan, for its sample."""
    from pyspark.sql import functions as F
    counts = {}
    for violations in candidates:
        if violations:
            any_violation = functools.reduce(lambda a, b: a | b, violations.values())
            names = {name: f"v{i}" for i, name in enumerate(violations)}
            row = staged_df.filter(any_violation).agg(
                *[F.sum(F.coalesce(v, F.lit(False)).cast("long")).alias(names[name])
                  for name, v in violations.items()]).first()
            counts.update({name: row[names[name]] or 0 for name in violations})
    regexes = {c.name for c in checks if c.check == "regex"}
    return {name: n for name, n in counts.items() if not (n and name in regexes)}  # else: scanned


@dataclass
class Audit:
    """One audit's inputs and the shared pass's answers: what every kind's judge reads."""
    spark: object
    t: object
    staged_df: object  # the staged rows
    parent: int  # main before this run
    ledger: object
    row: dict = None  # the shared pass: metric name -> value ("rows": the staged rows)
    proof: Proof = None  # what the staged files' metrics decided
    whole_table: object = None  # the whole staged snapshot, when the batch replaces or updates rows
    staged_id: int = None  # the staged snapshot: the table a `sql` check's {table} reads
    groups: dict = field(default_factory=dict)  # (columns, where) -> value_groups, computed once
    files: dict = field(default_factory=dict)  # the batch's source files: normalized path -> pin
    dropped: dict = field(default_factory=dict)  # drop checks' quarantined rows, by check name
    rows_dropped: int = 0  # rows the drop checks quarantined, in all
    rows_read: int = None  # rows read from the source, before the drops
    quarantined: object = None  # this run's own quarantined rows, tagged by split_dropped, if it holds them
    batch_columns: list = None  # the columns the batch itself carried (its transform's)

    @property
    def total(self):
        return self.row["rows"]

    def batch_fields(self):
        """The staged columns the batch carried, as staged: the table's other columns are NULL
        for its rows, and a schema check must not take them for the batch's (an upstream column
        gone missing is the drift it is there to catch)."""
        carried = None if self.batch_columns is None else {x.lower() for x in self.batch_columns}
        return [f for f in self.staged_df.schema.fields if carried is None or f.name.lower() in carried]

    def in_rows(self, c):
        """The rows a check applies to."""
        return (self.row.get(scope_metric(c)) or 0) if c.where else self.total

    def reference(self, table):
        """main of another table of the catalog (namespace.table)."""
        ns, name = table.split(".")
        return self.spark.table(TableRef(self.t.catalog, ns, name).sql)

    def grouped(self, c):
        key = (tuple(x.lower() for x in c.columns or [c.column]), c.where)
        if key not in self.groups:
            self.groups[key] = value_groups(self.staged_df, c)
        return self.groups[key]


def audit(a, checks, proof_snapshot=None, metrics=None):
    """Evaluate every check against the staged rows of `a` (an Audit of its inputs; the shared
    pass's answers are filled in): each metric is computed once, in one shared Spark job (or
    proven from the files' metrics), and each check's condition is judged on it.

    `proof_snapshot`: the staged snapshot whose added files are exactly the audited rows (append,
    overwrite_partitions); what their metrics prove is not scanned at all.
    `metrics`, when given, are the row aggregates observed while the write itself ran (already
    matched against the snapshot's record count), so the staged rows need no second scan.
    `a.whole_table` is given when the batch replaces or updates rows: `unique` then looks for
    duplicates across it, since keys on main may be replaced legitimately.
    """
    spark, t, staged_df, ledger = a.spark, a.t, a.staged_df, a.ledger
    composites, checks = checks, leaf_checks(checks)  # a composite's rules are audited as any check
    dynamic = {c.name: with_history(c, ledger) for c in checks if c.condition and c.condition.dynamic}
    checks = [dynamic[c.name][0] if c.name in dynamic else c for c in checks]
    proof, pushed, small = Proof(), {}, False
    if metrics is None and proof_snapshot is not None:
        table = iceberg_table(spark, t)
        summary = snapshot_info(spark, t, proof_snapshot, table).summary
        added = int(summary.get("added-records", 0))
        small = added <= SMALL_BATCH_ROWS
        if small:  # a few rows: one scan of them costs less than proving from their files' metadata
            proof = Proof(total=added)
        else:
            proof = prove_from_metadata(spark, t, table, proof_snapshot, summary, checks,
                                        [c for c in checks if c.check == "unique" and not c.where])
            candidates, violations = pushdown_candidates(staged_df, checks, proof, functools.partial(
                added_files_may_hold, table, proof_snapshot, summary))
            rest = left_to_scan(checks, proof, {n for v in candidates for n in v})
            if added > FOLD_PUSHDOWN_ROWS or len(row_metrics(rest)) == 1:
                candidates = prove_by_row_groups(table, proof_snapshot, summary, candidates, violations, proof)
                pushed = prove_by_pushdown(staged_df, checks, candidates)
    scanned = left_to_scan(checks, proof, pushed)
    aggs = row_metrics(checks if metrics is not None else scanned)
    if small and len(aggs) > 1:  # a scan runs anyway: it gathers the keys too (else one collect does)
        aggs += key_lists(staged_df, checks)
    if metrics is not None:
        row, how = metrics, "write"
    elif proof.total is not None and len(aggs) == 1:  # nothing left that needs a row: no scan
        row, how = {"rows": proof.total}, "metadata"
    else:  # a small append (the incremental read of its own files) in one task: its aggregate
        # needs no exchange, so it is one job, not two. Not overwrite_partitions (whole_table):
        # its staged rows are a join over the whole table's files, which one task would scan alone.
        one_task = small and a.whole_table is None
        row, how = scan_metrics(staged_df.coalesce(1) if one_task else staged_df, aggs), "scan"
    a.row, a.proof = row, proof
    results = {}
    for c in checks:
        if c.action == "drop":  # its offending rows never reached the branch: quarantined
            dropped = a.dropped.get(c.name, 0)  # of the rows read, or of those meeting `where`
            read = dropped + a.in_rows(c) if c.where else a.rows_read or a.total + a.rows_dropped
            limited = c.max_failing_rows is not None or c.max_failing_fraction is not None
            result = dict(check_result(c, dropped if limited else 0, read), decided_by="scan")
            result["failing_rows"] = dropped
            result["failing_fraction"] = round(dropped / read, 6) if read else 0.0
            if resplit(c):  # the tables its condition reads may have changed since the split
                stale = resplit_stale(a, c)
                if stale:
                    result.update(passed=False, detail=f"{stale} against the tables it reads now (they changed "
                                                       "after the batch was split): rerun to split the batch again")
        elif c.name in proof.proven and c.row_level:  # no file (or row group) can hold a failing row
            result = dict(check_result(c, 0, a.total),
                          decided_by="row_groups" if c.name in proof.by_row_groups else "metadata")
        elif c.name in pushed:  # counted in the row groups that could hold a failing row
            result = dict(check_result(c, pushed[c.name], a.total), decided_by="pushdown")
        else:
            result = KINDS[c.check].judge(a, c)
            grouped = stat_of(c).grouped is not None  # its own grouping job, whatever the pass did
            result.setdefault("decided_by", KINDS[c.check].decided_by or ("scan" if grouped else how))
        if c.action == RECORD:  # measured for the ledger's history, never a verdict
            result["passed"] = True
        if c.row_level and c.action != "drop" and result["failing_rows"]:  # a job each: only then
            result["sample"] = sample_rows(staged_df.filter(failing_rows_condition(c)))
        if c.name in dynamic:
            result["history"] = dynamic[c.name][1]
            result["expected"] = None if c.condition is None else str(c.condition)
        results[c.name] = result
    return [combined_result(c, results, a.total) for c in composites], a.total


FOLD_PUSHDOWN_ROWS = 2_000_000  # up to this many staged rows, a scan that runs anyway counts the pushdown's checks too


def left_to_scan(checks, proof, decided):
    """The checks neither the files' metrics nor `decided` (pushdown counts) settle: the scan's."""
    return [c for c in checks if c.name not in proof.proven and c.name not in decided
            and not (c.check == "unique" and c.name in proof.keys)]


def with_history(c, ledger):
    """(the check with its dynamic condition evaluated over the metric's values in this table's
    published runs, how many there were). A value that needs more history than there is (any,
    for avg(last(k)) on a first run) leaves the check without a condition: it passes."""
    runs = max(history_runs(v) for v in c.condition.values if isinstance(v, tuple))
    key = metric_key(c)
    history = [float(x) for x in (history_value(r, c, key) for r in ledger.recent(runs, Status.PUBLISHED))
               if x is not None]
    values = [evaluate_dynamic(v, history) if isinstance(v, tuple) else v for v in c.condition.values]
    condition = None if any(v is None for v in values) else Condition(c.condition.op, values)
    return replace(c, condition=condition), len(history)


def combined_result(c, results, total):
    """A check's result; a composite's from its rules' outcomes (and: all pass, or: any)."""
    if not c.rules:
        return results[c.name]
    rules = [combined_result(r, results, total) for r in c.rules]
    passed = (all if c.op == "and" else any)(r["passed"] for r in rules)
    failed = [r["name"][len(f"{c.name} #{i}: "):] for i, r in enumerate(rules, 1) if not r["passed"]]
    return dict(check_result(c, None, total, detail=None if passed else f"failed: {'; '.join(failed)}"),
                rules=rules, decided_by="rules")


def scan_metrics(df, aggs):
    """Aggregates over a DataFrame in a single Spark job that reads only the columns they use.
    A plain aggregate is compiled into the scan's generated code: measured at 10M rows, half the
    time of observing the same aggregates on a no-op write."""
    df = df.select(*[col(name) for name in referenced_columns(df, aggs)])
    return df.agg(*aggs).first().asDict()


def referenced_columns(df, aggs):
    """The columns of df that the aggregates read, from Spark's analysis of them (no job); all of
    them if Spark's internals cannot say (another Spark build): a wider scan, the same verdicts."""
    try:
        refs = analyzed_plan(df.select(*aggs)).references().toSeq()
        used = {refs.apply(i).name() for i in range(refs.size())}
    except Exception as e:
        log.info("the columns the checks read are not known on this Spark build (%s); scanning all",
                 first_line(e))
        return list(df.columns)
    return [name for name in df.columns if name in used]


def sample_rows(df, n=5):
    """Up to n rows as JSON objects, NULL fields kept (they are often the point)."""
    from pyspark.sql import functions as F
    as_json = F.to_json(F.struct(*[col(c) for c in df.columns]), {"ignoreNullFields": "false"})
    return [json.loads(r[0]) for r in df.limit(n).select(as_json).collect()]


def audit_rows(a, c):
    """A row check: the rows in scope that fail it, within its limits."""
    return check_result(c, a.row[fail_metric(c)] or 0, a.in_rows(c))


def audit_freshness(a, c):
    """The newest value's age: from the files' upper bounds where they prove it, else the pass."""
    proven = c.name in a.proof.proven
    value = a.proof.proven[c.name] if proven else a.row[metric_name("newest", c.column, c.where)]
    hours = None if value is None else round((time.time() - value) / 3600, 3)
    detail = ("no values" if hours is None else
              f"newest value is {hours} h old, limit {c.max_age_hours} h" if hours > c.max_age_hours else None)
    result = check_result(c, None, a.in_rows(c), observed=hours, detail=detail)
    if proven:
        result["decided_by"] = "metadata"
    return result


def audit_row_count(a, c):
    n = a.in_rows(c)
    too_few = c.min is not None and n < c.min
    too_many = c.max is not None and n > c.max
    detail = (f"{n} rows, expected {c.min if c.min is not None else '-'}.."
              f"{c.max if c.max is not None else '-'}" if too_few or too_many else None)
    if c.condition is not None:
        detail = None if c.condition.holds(n) else f"{n} rows, expected {c.condition}"
    return measured_as(c, check_result(c, None, n, observed=n, detail=detail))


def audit_column_names(a, c):
    """Every column name matches the whole pattern (Java's regex, as DQDL's)."""
    odd = [f.name for f in a.batch_fields()
           if not java(a.spark.sparkContext._jvm, "java.util.regex.Pattern").matches(c.pattern, f.name)]
    return check_result(c, None, a.total, observed=odd or None,
                        detail=f"not matching: {', '.join(odd)}" if odd else None)


def audit_column_exists(a, c):
    found = c.column.lower() in {f.name.lower() for f in a.batch_fields()}
    return check_result(c, None, a.total, observed=found, detail=None if found else f"no column {c.column!r}")


def audit_schema(a, c):
    actual = {f.name.lower(): f.dataType.simpleString() for f in a.batch_fields()}
    problems = []
    for name, type_text in c.schema.items():
        expected = spark_type_string(a.spark, f"check {c.name!r}", type_text)
        got = actual.get(name.lower())
        if got is None:
            problems.append(f"{name} missing")
        elif got != expected:
            problems.append(f"{name} is {got}, expected {expected}")
    return check_result(c, None, a.total, observed=actual, detail="; ".join(problems) or None)


def null_key_metric(c):
    return metric_name("nullkey", c.columns, c.where)


def audit_keys(a, c):
    """unique, primary_key: duplicates within the batch, plus batch keys already on main; reads
    only the key columns. A primary_key also fails its rows with a NULL in the key (counted in the
    row pass). The key range, from the files' bounds or the pass, prunes the look-up on main.

    Fast path first: if no key of main falls in the batch's key range and an exact bitmap count
    proves the batch's keys distinct, the check passes without a key shuffle. Otherwise (or if
    the proof fails) the keys are grouped, which counts the offending rows and samples them."""
    from pyspark.sql import functions as F
    bounds = a.proof.keys.get(c.name) or [(plain(a.row[key_bound(c, j, "lo")]), plain(a.row[key_bound(c, j, "hi")]))
                                          for j in range(len(c.columns))]
    null_keys, gathered = a.row.get(null_key_metric(c)) or 0, a.row.get(key_list_metric(c))
    spark, t, parent, whole_table, total = a.spark, a.t, a.parent, a.whole_table, a.in_rows(c)
    keys = [col(k) for k in c.columns]
    not_null = F.lit(True)
    for k in keys:
        not_null = not_null & k.isNotNull()
    scope = rows_in_scope(a.staged_df if whole_table is None else whole_table, c)
    names = [f"k{i}" for i in range(len(keys))]
    batch_keys = scope.select(*[k.alias(n) for k, n in zip(keys, names)]).filter(not_null)
    existing = None
    if parent is not None and whole_table is None:
        table = iceberg_table(spark, t)
        kinds = {name: iceberg_type(table, name) for name in c.columns}
        # floating-point keys are not pruned (bounds leave NaN out, and -0.0 = 0.0 in Spark), nor
        # UUIDs (Spark reads them as text, Iceberg orders them as signed 128-bit numbers), nor a
        # column the table's schema no longer names, nor strings whose bound holds U+FFFD (bytes
        # that are not UTF-8 reach Python as that character, which Spark orders elsewhere)
        prunable = [(name, k, low, high) for name, k, (low, high) in zip(c.columns, keys, bounds)
                    if low is not None and kinds[name] not in (None, "FLOAT", "DOUBLE", "UUID")
                    and "\ufffd" not in f"{low}{high}"]
        ranges = [(name, low, high) for name, _, low, high in prunable
                  if kinds[name] in PLANNED_KEY_TYPES and "." not in name]
        if not ranges or main_may_hold(table, parent, ranges):
            # Only main's files whose key range overlaps the batch's can hold a clash; the range
            # filter lets Iceberg skip the rest by their column bounds.
            existing = rows_in_scope(read_snapshot(spark, t, parent), c)
            for name, k, low, high in prunable:
                existing = existing.filter(k.between(F.lit(low), F.lit(high)))
            existing = existing.select(*[k.alias(n) for k, n in zip(keys, names)])
            if not existing.take(1):
                existing = None
    if existing is None and whole_table is None and (keys_distinct_in_driver(batch_keys, total, gathered)
                                                     or keys_distinct_by_bitmap(batch_keys, bounds, total)):
        return with_null_keys(check_result(c, null_keys, total), scope, not_null, null_keys)
    groups = batch_keys.groupBy(*names).agg(F.count("*").alias("n"))
    if existing is not None:
        groups = groups.join(existing.distinct().withColumn("on_main", F.lit(True)), names, "left")
    else:
        groups = groups.withColumn("on_main", F.lit(False))
    bad = groups.filter((F.col("n") > 1) | F.coalesce(F.col("on_main"), F.lit(False)))
    row = bad.agg(F.sum("n").alias("rows")).first()
    failing = row["rows"] or 0
    result = check_result(c, failing + null_keys, total)
    if failing:
        sample = bad.orderBy(F.col("n").desc()).limit(5).collect()
        result["sample"] = [{**{k: r[f"k{i}"] for i, k in enumerate(c.columns)}, "count": r["n"],
                             "on_main": bool(r["on_main"])} for r in sample]
    return with_null_keys(result, scope, not_null, null_keys)


PLANNED_KEY_TYPES = ("INTEGER", "LONG", "STRING")  # Iceberg types whose bounds Python's values bind to


def iceberg_type(table, name):
    """The Iceberg type (INTEGER, STRING, UUID, ...) of a column of the table as it is now, or None."""
    field = table.schema().caseInsensitiveFindField(name)
    return None if field is None else str(field.type().typeId())


def main_may_hold(table, parent, ranges):
    """False when no file of main (at `parent`) can hold a row with every key column in its range
    [(column, low, high)], by the files' column bounds: Iceberg plans the scan from the manifests
    alone, without the Spark query that would find the same (planning that took ~0.1 s a run).
    True whenever that cannot be told (a name it cannot bind, say): the query decides then."""
    from pyspark import SparkContext
    E = java(SparkContext._jvm, "org.apache.iceberg.expressions.Expressions")
    condition = E.alwaysTrue()
    for name, low, high in ranges:
        condition = getattr(E, "and")(condition, getattr(E, "and")(E.greaterThanOrEqual(name, low),
                                                                  E.lessThanOrEqual(name, high)))
    tasks = None
    try:  # Iceberg binds the filter lazily, as the manifests are read
        tasks = table.newScan().useSnapshot(parent).caseSensitive(False).filter(condition).planFiles()
        iterator = tasks.iterator()
        found = iterator.hasNext()
        iterator.close()  # its manifest readers, before the iterable itself
        return found
    except Exception as e:
        log.info("key range not planned on main (%s)", first_line(e))
        return True
    finally:
        if tasks is not None:
            tasks.close()


def with_null_keys(result, scope, not_null, null_keys):
    """A primary key's rows with a NULL key part, sampled when nothing else is."""
    if null_keys and not result["sample"]:
        result["sample"] = sample_rows(scope.filter(~not_null))
    return result


SMALL_BATCH_KEYS = 10_000  # keys few enough to compare in the driver, in one job with no shuffle
EXACT_KEY_TYPES = ("IntegralType", "StringType", "DateType", "TimestampType", "TimestampNTZType",
                   "DecimalType", "BooleanType")  # equal in Python exactly when equal in Spark


def keys_distinct_in_driver(batch_keys, rows, gathered=None):
    """True if a small batch's keys are provably distinct, compared in the driver: a daily batch
    of a few rows costs one scan instead of a grouping's jobs (none when the shared pass
    `gathered` them). Floating-point keys (NaN, -0.0) are left to Spark. False means "not proven",
    never "duplicate"."""
    from pyspark.sql import types as T
    exact = tuple(getattr(T, k) for k in EXACT_KEY_TYPES)
    if rows > SMALL_BATCH_KEYS or not all(isinstance(f.dataType, exact) for f in batch_keys.schema.fields):
        return False
    try:
        keys = [tuple(r) for r in (batch_keys.collect() if gathered is None else gathered)]
    except ValueError:  # a date or time outside Python's years 1..9999: left to Spark
        return False
    return len(set(keys)) == len(keys)


SMALL_BATCH_ROWS = 10_000  # a staged batch this small is audited in the one scan: no metadata proof, no pushdown
PASS_KEY_TYPES = ("IntegralType", "StringType", "DecimalType", "BooleanType")  # Python holds any value


def key_list_metric(c):
    return metric_name("keys", c.columns, c.where)


def key_lists(df, checks):
    """unique, primary_key on a small batch: the keys in scope without a NULL part, gathered in the
    shared pass, so proving them distinct costs no job of its own."""
    from pyspark.sql import functions as F, types as T
    types = {f.name.lower(): f.dataType for f in df.schema.fields}
    exact = tuple(getattr(T, k) for k in PASS_KEY_TYPES)
    out = []
    for c in leaf_checks(checks):
        if c.keyed and c.action != "drop" and all(isinstance(types.get(k.lower()), exact) for k in c.columns):
            present = functools.reduce(lambda x, y: x & y, [col(k).isNotNull() for k in c.columns]) & in_scope(c)
            out.append(F.collect_list(F.when(present, F.struct(*[col(k) for k in c.columns])))
                       .alias(key_list_metric(c)))
    return out


BITMAP_MAX_SPAN_PER_ROW = 32  # bits of key range per batch row; sparser keys are grouped instead


def keys_distinct_by_bitmap(batch_keys, bounds, rows):
    """True if one integer key is provably distinct: each key sets its bit in a 64-bit word
    (word k >> 6, bit k & 63; bit_or merges them), so the sum of the words' set bits is the exact
    distinct count. A hash aggregate in generated code, and the shuffle moves one word per 64
    keys instead of every key. False means "not proven", never "duplicate"."""
    from pyspark.sql import functions as F, types as T
    fields = batch_keys.schema.fields
    if len(fields) != 1 or not isinstance(fields[0].dataType,
                                          (T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
        return False
    low, high = bounds[0]
    if not isinstance(low, int) or not isinstance(high, int) or not rows:
        return False
    if high - low + 1 > BITMAP_MAX_SPAN_PER_ROW * rows:
        return False
    k = f"CAST({quote(fields[0].name)} AS BIGINT)"
    row = (batch_keys.groupBy(F.expr(f"shiftright({k}, 6)").alias("w"))
           .agg(F.expr(f"bit_count(bit_or(shiftleft(1L, CAST({k} & 63 AS INT))))").alias("d"),
                F.count("*").alias("n"))
           .agg(F.sum("d").alias("distinct"), F.sum("n").alias("rows")).first())
    return row["distinct"] == row["rows"]


def audit_volume(a, c):
    """Batch size against the median of the last published batches, from the run ledger: only
    publishes count, never compaction or other maintenance commits."""
    total = a.total
    history = [r["rows_written"] for r in a.ledger.recent(c.lookback, Status.PUBLISHED)
               if r["rows_written"]]
    if not history:
        return check_result(c, None, total, observed=None)
    median = statistics.median(history)
    ratio = round(total / median, 4)
    low = c.min_ratio is not None and ratio < c.min_ratio
    high = c.max_ratio is not None and ratio > c.max_ratio
    return check_result(c, None, total, observed=ratio,
                        detail=(f"{total} rows is {ratio}x the median {median} of the last "
                                f"{len(history)} publishes") if low or high else None)


# ----- file rules: the batch's source files (or those at a location), local or S3 -----------------

class FileRuleError(Exception):
    """Files a file rule cannot read: its result fails, saying why."""


@dataclass(frozen=True)
class SourceFile:
    """A file a file rule reads: where it is, its size, last modification (epoch seconds) and
    its pin (file_pin): what its bytes must still be as of, for a checksum."""
    path: str
    size: int
    modified: float
    pin: object = None

    def digest(self, algorithm="sha256", s3=None, stop=None):
        return file_digest(self.path, algorithm, self.pin, s3, stop)


def within(path, where):
    """True if the file is the location or under it (a folder)."""
    return path == where or path.startswith(where.rstrip("/") + "/")


def rule_files(a, where, select=None):
    """The files a rule reads: the batch's source files at or under `where` (all of them when it
    is None); when none of them is there, every file at the location itself; then those the
    rule's selection keeps."""
    batch = {f: tag for f, tag in a.files.items() if where is None or within(f, where)}
    files = stat_files(batch) if batch or where is None else files_at(where)
    files = select.apply(files) if select else files
    if not files:
        raise FileRuleError(f"no files at {where or 'the batch source'}"
                            + (" that the rule's recent_files and uri_regex select" if select else ""))
    return files


def stat_files(paths):
    """Size and modification time of named files, {path: its pin (file_pin), or None}: one S3
    listing per folder, os.stat locally. A pinned file must still be as the batch read it."""
    from stat import S_ISREG
    s3 = {path: s3_file(obj, path) for path, obj in s3_objects([p for p in paths if p.startswith("s3://")]).items()}
    out = []
    for path in paths:
        if path in s3:
            if paths[path] not in (None, s3[path].pin):
                raise FileRuleError(f"{path} was replaced after the batch read it (ETag {paths[path]}, "
                                    f"now {s3[path].pin})")
            out.append(s3[path])
        elif path.startswith("file:///"):
            info = os.stat(local_path(path))
            if not S_ISREG(info.st_mode):  # a named pipe's bytes would never end
                raise FileRuleError(f"{path} is not a regular file")
            if paths[path] is not None:
                require_pin(path, paths[path], info, since="after the batch read it")
            out.append(SourceFile(path, info.st_size, info.st_mtime, local_stamp(info)))
        else:
            raise FileRuleError(f"{path} is gone" if path.startswith("s3://") else
                                f"{path}: file rules read local or S3 files only")
    return out


def s3_file(obj, path):
    """A SourceFile from an S3 listing entry."""
    return SourceFile(path, obj["Size"], obj["LastModified"].timestamp(), obj["ETag"].strip('"'))


def files_at(where):
    """Every file at a location (a file, or the files under a folder but hidden ones)."""
    if where.startswith("s3://"):
        import boto3
        bucket, key = split_s3(where)
        prefix = key if not key or key.endswith("/") else key + "/"
        found = []
        for page in boto3.client("s3").get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=key):
            found += [s3_file(o, f"s3://{bucket}/{o['Key']}") for o in page.get("Contents", [])
                      if not o["Key"].endswith("/")  # a folder's marker object is no file of it
                      and (o["Key"] == key or o["Key"].startswith(prefix) and not is_hidden(o["Key"][len(prefix):]))]
        return found
    if not where.startswith("file:///"):
        raise FileRuleError(f"{where}: file rules read local or S3 files only")
    local = local_path(where)
    if os.path.isfile(local):
        return stat_files({where: None})
    found = sorted(entry.path for entry in local_data_files(local, once=True))  # as a read lists it, each file once
    return stat_files(dict.fromkeys(normalize_path("file://" + f) for f in found))


def digests(files, algorithm="sha256"):
    """{path: hex digest} of the files' bytes, DRIVER_READERS files side by side (S3 GETs overlap;
    reading and hashing release the GIL), through one S3 client (a client is safe to share between
    threads, boto3's default session is not). The first error in the files' order is raised, as
    reading them one after another would; the files not yet begun are then not read, and those
    being read stop at their next block."""
    from concurrent.futures import ThreadPoolExecutor
    files = list(files)
    s3 = None
    if any(f.path.startswith("s3://") for f in files):
        import boto3
        s3 = boto3.client("s3")
    stop = threading.Event()
    pool = ThreadPoolExecutor(max(1, min(DRIVER_READERS, len(files))))
    try:
        return dict(zip([f.path for f in files], pool.map(lambda f: f.digest(algorithm, s3, stop), files)))
    finally:
        stop.set()
        pool.shutdown(wait=False, cancel_futures=True)


def content_keys(files):
    """Each file's content as a key equal contents share: its size, and a SHA-256 of its bytes
    only where another file has that size (the only files it can equal)."""
    sizes = Counter(f.size for f in files)
    sums = digests([f for f in files if sizes[f.size] > 1])
    return {f.path: (f.size, sums.get(f.path)) for f in files}


def audit_files(judge):
    """A file rule's judge, given its files; unreadable files fail the rule, saying why."""
    def judged(a, c):
        try:
            return judge(a, c, rule_files(a, c.path, c.select))
        except Exception as e:
            if not isinstance(e, (FileRuleError, OSError)) and not type(e).__module__.startswith("botocore"):
                raise
            return check_result(c, None, 0, detail=f"cannot read the files: {first_line(e)}")
    return judged


def per_file_result(c, files, failing, about):
    """Files judged one by one: the failing ones against the rule's limits (or threshold)."""
    result = check_result(c, len(failing), len(files), observed=round(1 - len(failing) / len(files), 6),
                          sample=[{"file": f.path, **about(f)} for f in failing[:5]])
    if not result["passed"] and not result["detail"]:
        result["detail"] = f"{len(failing)} of {len(files)} files fail"
    return result


def audit_file_freshness(a, c, files):
    """Each file's last modification against the times (now() as of this audit)."""
    now, zone = time.time(), time_zone(c.time_zone) if c.time_zone else None
    times = [file_time(v, now, zone) for v in c.condition.values]
    if "between" in c.condition.op:  # a window either way round (Glue's own example: between now() and (now() - 45 minutes))
        times = sorted(times)
    condition = Condition(c.condition.op, times)
    return per_file_result(c, files, [f for f in files if not condition.holds(f.modified)],
                           lambda f: {"modified": datetime.fromtimestamp(f.modified, timezone.utc).isoformat()})


def audit_file_size(a, c, files):
    return per_file_result(c, files, [f for f in files if outside_bounds(c, f.size)], lambda f: {"size": f.size})


def audit_file_uniqueness(a, c, files):
    """The share of files whose content no other file has, within min/max or the condition."""
    keys = content_keys(files)
    counts = Counter(keys.values())
    duplicates = [f for f in files if counts[keys[f.path]] > 1]
    ratio = round(1 - len(duplicates) / len(files), 6)
    return measured_as(c, check_result(c, None, len(files), observed=ratio, detail=outside_bounds(c, ratio),
                                       sample=[{"file": f.path, "size": f.size} for f in duplicates[:5]]))


def audit_file_match(a, c, files):
    """Every file's checksum in the list, or the same contents (as a multiset) at both paths."""
    if c.compare_path is None:
        algorithm = HASH_ALGORITHMS[c.algorithm]
        sums = digests(files, algorithm)
        return per_file_result(c, files, [f for f in files if sums[f.path] not in c.values],
                               lambda f: {c.algorithm: sums[f.path]})
    # every file there, the batch's or not (the selection is of the rule's own files): a compare
    # path holding the batch's files and others never matches the batch by seeing only its own
    others = files_at(c.compare_path)
    if not others:
        raise FileRuleError(f"no files at {c.compare_path}")
    both = list({f.path: f for f in others + files}.values())  # on both sides: once, pinned as the batch's
    keys = content_keys(both)
    if c.match_file_name:  # the same name with the same contents on both sides
        keys = {path: (path.rsplit("/", 1)[-1], key) for path, key in keys.items()}
    mine, theirs = Counter(keys[f.path] for f in files), Counter(keys[f.path] for f in others)
    unmatched = [f for f in both if mine[keys[f.path]] != theirs[keys[f.path]]]
    return per_file_result(c, both, unmatched, lambda f: {"size": f.size})


# ----- the kinds of check: each a metric, how it is judged, and what it takes --------------------

def count_failing(c):
    """A row check's metric in the shared pass."""
    from pyspark.sql import functions as F
    return {fail_metric(c): F.sum(failing_rows_condition(c).cast("long"))}


def newest_value(c):
    """freshness: epoch seconds of the newest value in scope."""
    from pyspark.sql import functions as F
    return {metric_name("newest", c.column, c.where): F.max(value_in_scope(c).cast("timestamp").cast("double"))}


def key_range(c):
    """unique, primary_key: the key range, so the look-up on main can skip files by their bounds;
    a primary key also counts its rows with a NULL key part."""
    from pyspark.sql import functions as F
    needs = {key_bound(c, j, side): agg(col(k)) for j, k in enumerate(c.columns)
             for side, agg in (("lo", F.min), ("hi", F.max))}
    if c.check == "primary_key":
        null_key = functools.reduce(lambda x, y: x | y, [col(k).isNull() for k in c.columns])
        needs[null_key_metric(c)] = F.sum((in_scope(c) & null_key).cast("long"))
    return needs


def statistic(c):
    """stat, anomaly: a column statistic over the rows in scope (NULLs ignored, as SQL does),
    unless it is counted (rows, columns) or grouped."""
    from pyspark.sql import functions as F
    if not c.measures:
        return {}
    value = value_in_scope(c)
    return {stat_metric(c): STATS[c.stat].aggregate(F, value, value.cast("double"), c)}


def no_metric(c):
    return {}


LEDGER_READS = "the run ledger"  # a Kind's `reads` when it compares with earlier publishes
OTHER_TABLE = "another table"  # ... when it compares with reference tables


@dataclass(frozen=True)
class Kind:
    """A kind of check, whole: `params` (required, optional) beside the common ones, and `parse`
    for their values; `needs(check)`: its metrics in the shared pass, {name: aggregate};
    `fails(check)`: for a row check, the test a failing row meets (its metric counts them);
    `judge(audit, check)`: its result from the metrics in hand; `decided_by`: how that verdict is
    reached when not by the shared pass; `reads`: what it reads besides the staged rows (audited
    again after a rebase), None for nothing; `where`: whether it takes one (batch-wide ones not);
    `records`: whether its metric can be recorded with no verdict (action record)."""
    params: tuple
    parse: object
    judge: object
    needs: object = no_metric
    fails: object = None
    decided_by: str = None
    reads: str = None
    where: bool = True
    validate: object = None
    records: bool = False


def row_kind(params, parse, test, validate=None):
    """A row check: its metric counts the rows in scope that meet `test(F, check)`."""
    def fails(c):
        from pyspark.sql import functions as F
        return test(F, c)
    return Kind(params, parse, audit_rows, count_failing, fails, validate=validate)


BOUNDS = {"min", "max", "min_exclusive", "max_exclusive"}
KEYS = (set(), {"columns", "column"})
MEASURE = BOUNDS | {"condition"}  # a measured value under min/max or a condition
KINDS = {
    "not_null": row_kind(({"column"}, set()), parse_column_only, lambda F, c: col(c.column).isNull()),
    "between": row_kind(({"column"}, BOUNDS | {"allow_null"}), parse_between,
                        lambda F, c: undecided_fails(F, c, outside_range(c)), valid_bounds),
    "accepted_values": row_kind(({"column", "values"}, {"allow_null"}), parse_accepted_values,
                                lambda F, c: undecided_fails(F, c, not_accepted(F, c)),
                                valid_bounds),
    "regex": row_kind(({"column", "pattern"}, {"allow_null"}), parse_pattern,
                      lambda F, c: ~col(c.column).rlike(c.pattern), valid_regex),
    "expression": row_kind(({"expr"}, set()), parse_expression, lambda F, c: ~F.expr(c.expr), valid_expression),
    "unique": Kind(KEYS, parse_keys, audit_keys, key_range, decided_by="scan", reads="main", validate=valid_keys),
    "primary_key": Kind(KEYS, parse_keys, audit_keys, key_range, decided_by="scan", reads="main",
                        validate=valid_keys),
    "row_count": Kind((set(), {"min", "max", "condition"}), parse_row_count, audit_row_count, records=True),
    "schema": Kind(({"columns"}, set()), parse_schema, audit_schema, decided_by="metadata", where=False,
                   validate=valid_schema),
    "column_exists": Kind(({"column"}, set()), parse_column_only, audit_column_exists, decided_by="metadata",
                          where=False),
    "column_names": Kind(({"pattern"}, set()), parse_pattern, audit_column_names, decided_by="metadata",
                         where=False, validate=valid_pattern),
    "freshness": Kind(({"column", "max_age_hours"}, set()), parse_freshness, audit_freshness, newest_value,
                      validate=valid_freshness),
    "volume": Kind((set(), {"min_ratio", "max_ratio", "lookback"}), parse_volume, audit_volume,
                   decided_by="metadata", reads=LEDGER_READS, where=False),
    "stat": Kind(({"stat"}, BOUNDS | {"column", "columns", "q", "condition"}), parse_stat, audit_stat, statistic,
                 validate=valid_stat, records=True),
    "relationship": Kind(({"to_table"}, {"column", "columns", "to_column", "to_columns", "condition"}), parse_relationship,
                         audit_relationship, decided_by="scan", reads=OTHER_TABLE, validate=valid_relationship, records=True),
    "sql": Kind(({"query"}, BOUNDS | {"condition"}), parse_sql, audit_sql, decided_by="scan", reads="main",
                where=False, records=True),
    "sql_rows": Kind(({"query"}, set()), parse_sql_rows, audit_sql_rows, decided_by="scan", reads="main",
                     where=False),
    "anomaly": Kind(({"metric"}, {"lookback", "min_history", "max_deviations", "query"}), parse_anomaly, audit_anomaly,
                    statistic, reads=LEDGER_READS, validate=valid_stat),
    "row_count_match": Kind(({"reference"}, MEASURE), parse_reference, audit_row_count_match,
                            decided_by="scan", reads=OTHER_TABLE, where=False, validate=valid_reference, records=True),
    "schema_match": Kind(({"reference"}, MEASURE), parse_reference, audit_schema_match,
                         decided_by="metadata", reads=OTHER_TABLE, where=False, validate=valid_reference, records=True),
    "aggregate_match": Kind(({"aggregates"}, MEASURE), parse_aggregate_match, audit_aggregate_match,
                            batch_aggregates, reads=OTHER_TABLE, where=False, validate=valid_reference, records=True),
    "dataset_match": Kind(({"reference", "columns"}, MEASURE | {"to_columns", "match_columns", "to_match_columns"}),
                          parse_dataset_match, audit_dataset_match, decided_by="scan", reads=OTHER_TABLE,
                          where=False, validate=valid_reference, records=True),
    # audited through its rules (leaf_checks); it reads what they read
    "composite": Kind(({"op", "rules"}, set()), parse_composite, judge=None, where=False),
    # recorded as the checks it stands for (expand_profiles, once the column's type is known)
    "profile": Kind(({"column"}, set()), parse_profile, judge=None, records=True),
    "file_freshness": Kind(({"condition"}, {"path", "time_zone"} | FILE_SELECTION), parse_file_freshness, audit_files(audit_file_freshness),
                           decided_by="files", where=False),
    "file_size": Kind((set(), BOUNDS | {"condition", "path"} | FILE_SELECTION), parse_file_size, audit_files(audit_file_size),
                      decided_by="files", where=False),
    "file_uniqueness": Kind((set(), BOUNDS | {"condition", "path"} | FILE_SELECTION), parse_file_uniqueness,
                            audit_files(audit_file_uniqueness), decided_by="files", where=False),
    "file_match": Kind((set(), {"path", "checksums", "algorithm", "compare_path", "match_file_name"} | FILE_SELECTION),
                       parse_file_match,
                       audit_files(audit_file_match), decided_by="files", where=False),
}
ROW_CHECKS = tuple(name for name, kind in KINDS.items() if kind.fails)
# a threshold: a condition on the share of rows (or files) that pass
THRESHOLD_KINDS = ROW_CHECKS + ("relationship", "sql_rows") + PER_FILE_KINDS


# =================================================================================================
# Publish
# =================================================================================================

class Move(Enum):
    """What publishing the audited snapshot means, given main as it is now."""
    PUBLISH = "main is still the staged snapshot's parent: swap main to the staged snapshot"
    ALREADY_PUBLISHED = "the batch (or, with --source_files new, its files) is already on main"
    REBASE = "main moved or was rolled back: re-commit the staged files on it (append)"
    RESTAGE = "main moved or was rolled back: stage the batch again on it (other modes)"
    QUARANTINE = ("every row was quarantined: consume the batch by a commit of the last-quarantine "
                  "property alone, main unmoved")
    NOTHING = "the staged snapshot changes nothing on main as it is now, and no row was quarantined"


@dataclass
class Decision:
    move: Move
    main: int                # main's snapshot id when decided
    metadata: object = None  # PUBLISH, QUARANTINE: the TableMetadata decided from, the compare-and-swap's base
    operations: object = None
    published_as: int = None  # ALREADY_PUBLISHED: the snapshot that holds the batch
    found: object = None      # ALREADY_PUBLISHED: that publish's Mark


class CommitConflict(Exception):
    """The table changed between the decision and the commit (or the commit's outcome is unknown):
    decide again from fresh metadata."""


@contextmanager
def commit_conflicts():
    """Iceberg's commit failures, raised as CommitConflict; every other error passes through."""
    from py4j.protocol import Py4JJavaError
    try:
        yield
    except Py4JJavaError as e:
        kind = str(e.java_exception.getClass().getSimpleName())
        if kind in ("CommitFailedException", "CommitStateUnknownException"):
            raise CommitConflict(kind) from None
        raise


def decide_publish(run, staged):
    """The one place that decides how this run publishes, from fresh table metadata.
    `staged`: the audited snapshot's snapshot_info."""
    batch, p = run.batch, run.p
    operations = iceberg_table(run.spark, run.t).operations()
    metadata = operations.refresh()
    main = ref_id(metadata, "main")
    consumed = consumed_publishes(run.spark, run.t, run.ledger, run.history, metadata)
    try:
        on_main = already_on_main(consumed, batch)
    except UnauditedOnMain:
        raise
    except WapError as e:  # a concurrent run loaded this input meanwhile: not bad input any more
        raise InputTaken(f"publish: {e}") from None
    if on_main is not None:
        return Decision(Move.ALREADY_PUBLISHED, main, published_as=on_main.snapshot_id, found=on_main)
    kept_none = batch.quarantine_run == batch.run_id and batch.kept == 0  # this run's own stage
    if changes_nothing(staged) and main != staged.parent_id and any(resplit(c) for c in run.checks):
        return Decision(Move.RESTAGE, main)  # its drops were split against another main: audited on this one
    if changes_nothing(staged) and (main == staged.parent_id or p.mode != "merge" or kept_none):
        # (a merge's deletes may find the rows they delete on a moved main: it stages again,
        # unless it kept no rows, which change nothing on any main)
        return Decision(Move.QUARANTINE if batch.quarantined else Move.NOTHING, main, metadata, operations)
    if main != staged.parent_id and (p.mode != "append" or main is None):
        return Decision(Move.RESTAGE, main)
    if metadata.snapshot(staged.snapshot_id) is None:  # its branch dropped, then expiry: its files may be gone
        raise WapError(f"publish: the audited snapshot {staged.snapshot_id} is gone (branch {batch.branch} "
                       "was dropped and the snapshot expired); nothing was published. Rerun to stage the "
                       "batch again")
    written = staged.schema_id if staged.schema_id is not None else written_schema(metadata, staged)
    if columns_replaced(metadata, written, batch.columns):
        return Decision(Move.RESTAGE, main)  # its files hold a column the table no longer has by that name
    if main == staged.parent_id:
        return Decision(Move.PUBLISH, main, metadata, operations)
    return Decision(Move.REBASE, main)


def written_schema(metadata, staged):
    """The schema a staged snapshot's files were written with, as far as the metadata tells: a
    rebased one's source snapshot's (a resumed rebase), else its own."""
    source = staged.summary.get(SOURCE_SNAPSHOT_PROPERTY)
    snapshot = metadata.snapshot(int(source)) if source and source.isdigit() else None
    return (snapshot or metadata.snapshot(staged.snapshot_id)).schemaId()


def columns_replaced(metadata, written, columns):
    """True if a column the batch wrote under schema `written` was dropped and added again since
    (another field by its name now): main would read the staged files' values of it as NULL, so the
    batch is staged again. Schema changes make no snapshot, so main need not move. A column renamed
    since is the same field (published as it is); one dropped and not added again ends the run."""
    if written is None or written == metadata.currentSchemaId():
        return False
    old, now = metadata.schemasById().get(written), metadata.schema()
    if old is None:  # that schema is gone from the metadata: nothing tells, so the batch is staged again
        return True
    from pyspark import SparkContext
    ids = java(SparkContext._jvm, "org.apache.iceberg.types.TypeUtil")
    for name in columns:
        field = old.caseInsensitiveFindField(name)
        if field is None or all(now.findField(i) is not None for i in ids.getProjectedIds(old.select([field.name()]))):
            continue  # the same field and every field nested in it (renamed or not)
        if now.caseInsensitiveFindField(name) is None:
            raise WapError(f"publish: column {name!r} was dropped from the table after the batch was written; "
                           "nothing was published. Rerun to stage the batch against the table as it is")
        return True
    return False


def consumed_publishes(spark, t, ledger, history, metadata=None, head=None):
    """What this table has consumed: every publish on main's ancestry (as far as the metadata and
    this job's records reach), every recorded publish that ancestry cannot prove gone, and every
    run that quarantined its whole batch. A publish main no longer holds (rolled back) is not
    among them, whether or not its snapshot still exists. `head`: main as a batch was staged on
    it, if not main now."""
    if metadata is None:
        if not table_exists(spark, t):
            return []
        metadata = iceberg_table(spark, t)
    quarantine = last_quarantine(metadata)
    ledger.catch_up(quarantine)
    known, main = ledger.known(metadata), ref_id(metadata, "main") if head is None else head
    ancestry = history.ancestry(metadata, main, known)
    if not ancestry.whole and ledger.recorded_since_read():
        # expiry under way: a publish may have left history since the ledger was read. (Not where
        # nothing was recorded since: a snapshot of another writer's, compaction's, expired from
        # main's ancestry stops every walk, and reading the rows again could not carry it further.)
        ledger.forget()
        known = ledger.known(metadata)
        ancestry = history.ancestry(metadata, main, known)
    oldest = min((m.timestamp_ms for m in ancestry.marks if m.timestamp_ms), default=0)

    def rolled_back(m):  # its snapshot still exists, is newer than main's oldest ancestor, and is not on main
        snapshot = metadata.snapshot(m.snapshot_id) if m.snapshot_id is not None else None
        return snapshot is not None and m.snapshot_id not in ancestry.ids and snapshot.timestampMillis() >= oldest
    chains = {m.snapshot_id: sources(metadata, m) for m in ancestry.marks if m.batch_id is None and m.source_id}
    copied = {m.source_id for m in ancestry.marks if m.source_id is not None}  # an operator's cherry-pick
    copied |= {i for chain in chains.values() for c in chain for i in (c.snapshot_id, c.source_id) if i}  # and what it copied
    ours = [m for m in (own_mark(m, chains.get(m.snapshot_id, ())) for m in ancestry.marks) if m is not None]
    seen = {m.snapshot_id for m in ours}
    unrecorded = classify_unrecorded(ledger, metadata, ours)
    recorded = ledger.published()
    listed = ledger.index().snapshots
    # a copy that its own summary does not link to a recorded publish (a copy of a copy; a pick
    # of a rebased publish's source) is recorded itself, as a run of its own, by the next
    # consuming commit: once the snapshots between expire, nothing else links it to the batch
    runs = ledger.index().published_runs
    unrecorded += [replace(m, run_id=None) for m in ours if m.run_id in runs and m.snapshot_id not in listed
                   and (len(chains.get(m.snapshot_id, ())) > 1
                        or chains.get(m.snapshot_id) and m.source_id not in listed)]
    known = ledger.known(metadata)
    parents = Parents(metadata, recorded + list(known.values()))
    found, off_main = list(ours), []
    for m in recorded + [m for snapshot_id, m in known.items() if snapshot_id not in listed]:
        if m.snapshot_id in seen:  # a copy on main whose source expired is not: its record names the batch
            continue
        if m.status == "quarantined" or m.snapshot_id in copied or (ancestry.holds(m, parents)
                                                                    and not rolled_back(m)):
            found.append(m)
        elif m.status == "published":
            off_main.append(m)
    # gone (no history): off main in this very metadata (a publish newer than the metadata, which a
    # later ledger read may hold, is not); by whichever costs fewer JVM calls, each record's snapshot
    # or the metadata's snapshot ids once (a long ledger of publishes since rolled back, say)
    snapshots = metadata.snapshots() if off_main else None
    if off_main and len(off_main) > snapshots.size():
        present = {snapshots.get(i).snapshotId() for i in range(snapshots.size())}
        off_main = [m for m in off_main if m.snapshot_id in present]
    gone = {m.run_id for m in off_main if rolled_back(m)}
    if ledger.bounded is not None and not ancestry.whole and not bounded_read_decides(
            ledger, metadata, ancestry, copied, recorded + [m for i, m in known.items() if i not in listed],
            oldest):
        ledger.read_whole()
        return consumed_publishes(spark, t, ledger, history, metadata, head)
    if quarantine is not None and quarantine.run_id not in {m.run_id for m in recorded}:
        found.append(quarantine)  # consumed with every row quarantined, not recorded yet: the
        unrecorded.append(quarantine)  # next consuming commit records it, as the property's own
    # the copies in this very metadata (the walk may remember one expired since): a branch at a
    # copy's source may go while the copy protects the source's files from Java's expiry
    ledger.unrecorded = unrecorded
    ledger.decided_gone(gone, main, lambda: consumed_publishes(spark, t, ledger, history, head=main))
    ledger.copied = {m.source_id for m in ancestry.marks
                     if m.source_id is not None and metadata.snapshot(m.snapshot_id) is not None}
    return found


def bounded_read_decides(ledger, metadata, ancestry, copied, records, oldest):
    """True if a bounded read's rows (`records`) decide as every row would. Every row carries
    main's ancestry past its expired snapshots, where the bounded rows may not; both walks agree
    on a snapshot that is on the shorter one, and on one whose parent is (or is where it stopped):
    off main, since a copy of it on main would be on the walk too. Of any other, only every row
    tells whether main holds it, which is asked of the batch's snapshots and records (a rerun of a
    batch published long ago, or rolled back; a write of it that reached main unaudited) and of
    the newest publishes' records (rolled back or not: an expired snapshot never is; one that
    exists and is off main is if it is newer than the walk's `oldest` snapshot)."""
    parents = Parents(metadata, records)

    def off_main(parent):
        return ancestry.left_behind(parent, parents)
    for snapshot_id, parent in ledger.bounded.batch_snapshots.items():
        if snapshot_id not in ancestry.ids and snapshot_id not in copied and not off_main(parent):
            return False
    for m in records:
        if m.status == "quarantined" or m.snapshot_id in ancestry.ids or m.snapshot_id in copied:
            continue
        if ledger.scope.matches(m) and not off_main(m.parent_id):
            return False
        if m.run_id in ledger.bounded.newest and m.snapshot_id is not None:
            snapshot = metadata.snapshot(m.snapshot_id)
            if snapshot is not None and not (off_main(m.parent_id) and snapshot.timestampMillis() >= oldest):
                return False
    return True


def metadata_snapshots(spark, table):
    """Every snapshot a table's metadata holds, as Iceberg's JSON of it (id, parent, summary...):
    one JVM call, where asking each snapshot would be several per snapshot."""
    parser = java(spark.sparkContext._jvm, "org.apache.iceberg.TableMetadataParser")
    snapshots = json.loads(parser.toJson(table.operations().current())).get("snapshots") or []
    return [dict(s, summary=s.get("summary") or {}) for s in snapshots]  # none without an operation


def sources(metadata, mark):
    """The snapshots a copy re-commits, nearest first, as far as they still exist: a cherry-pick
    names only the snapshot it copied, which may itself be a copy (a second repair's pick of the
    first one's), and stops at the first snapshot of this job."""
    chain, seen = [], {mark.snapshot_id}
    while mark.batch_id is None and mark.source_id is not None and mark.source_id not in seen:
        snapshot = metadata.snapshot(mark.source_id)
        if snapshot is None:  # expired: the chain stops here
            break
        seen.add(mark.source_id)
        mark = read_mark(snapshot)
        chain.append(mark)
    return chain


def own_mark(mark, chain):
    """The mark of a snapshot on main if this job wrote it, or if it is an operator's cherry-pick of
    one, or of a copy of one (Iceberg's copy carries only `source-snapshot-id`; `chain`: its
    sources): then the batch and files of the snapshot of this job it goes back to."""
    if mark.batch_id is not None:
        return mark
    copied = (chain or [mark])[-1]
    if copied.batch_id is None:
        return None
    return Mark(mark.snapshot_id, mark.parent_id, mark.timestamp_ms, copied.batch_id, copied.run_id,
                copied.input_files, copied.summary, copied.file_ids, copied.input_fingerprint,
                source_id=copied.snapshot_id)  # the job's snapshot, whose audit the ledger records


def classify_unrecorded(ledger, metadata, marks):
    """This job's snapshots on main that no publish record names (every publish is in the ledger
    or the last-publish property, and the next publish moves the property's into the ledger). Each
    is an audited snapshot published by hand (fast_forward, cherry-pick: the ledger has its run's
    audit of it), or a write that reached main without an audit (write.wap.enabled was off): that
    one gets `recorded` False. Returned so the next publish records them all before main moves on."""
    def records():  # run ids and {snapshot: recorded as audited} of every record
        index, last = ledger.index(), last_publish(metadata) if metadata is not None else None
        if last is None or last.snapshot_id in index.publishes:  # as known() adds it
            return index.audited_runs, index.audited
        return index.audited_runs | {last.run_id}, {**index.audited, last.snapshot_id: True}

    runs, snapshots = records()
    pending = [m for m in marks if m.run_id not in runs and m.snapshot_id not in snapshots]
    if pending:  # the ledger as read at the start may be stale: another run recorded it since
        ledger.forget()
        runs, snapshots = records()
        pending = [m for m in pending if m.run_id not in runs and m.snapshot_id not in snapshots]
    audited = ledger.audited({i for m in pending for i in (m.snapshot_id, m.source_id) if i is not None})
    # no ledger yet (a new --runs_table, a dropped one): no record can say either way, so main's own
    # marks are taken as publishes. Asked only when something is pending: a catalog look-up.
    trusted = bool(pending) and ledger.absent()
    for m in marks:
        if m in pending:
            m.recorded = trusted or m.snapshot_id in audited or m.source_id in audited
        else:
            m.recorded = m.run_id in runs or snapshots.get(m.snapshot_id, True)
    return pending


def unaudited_message(m):
    return (f"main holds snapshot {m.snapshot_id} of batch {m.batch_id} (run {m.run_id}) that no "
            "publish recorded: it was written without an audit (was write.wap.enabled turned off?) "
            "or by an older version whose ledger write failed. Check those rows, roll them back if "
            "unaudited, then rerun")


def already_on_main(consumed, batch):
    """The publish that already loaded this batch (by its id) or every one of its files, or None.
    A batch id names one input: the same id with other input is bad input, naming both; an
    identical re-upload (same paths and content, a new modification time) is the same input.
    Some of the batch's files loaded by another publish: with --source_files new, a concurrent
    run took them (rerun for the rest); otherwise the batch would load them twice (exit 2)."""
    paths = set(batch.input_files)
    by_files = not batch.explicit_id or batch.track_files  # a named batch is its name
    taken, by = set(), None  # this batch's files that publishes loaded, and the newest of those
    for m in consumed:
        if not m.recorded and (m.batch_id == batch.batch_id or set(m.file_ids) & set(batch.file_ids)):
            raise UnauditedOnMain(unaudited_message(m), m)
        if m.batch_id == batch.batch_id:
            if (batch.explicit_id and m.file_ids and m.input_fingerprint
                    and m.input_fingerprint != batch.input_fingerprint):
                raise bad_input(
                    f"--batch_id: batch {batch.batch_id!r} was {consumed_as(m)} by run {m.run_id} from "
                    f"{describe_files(m.input_files)} (input {m.input_fingerprint[:12]}); this run reads "
                    f"{describe_files(batch.input_files)} (input {batch.input_fingerprint[:12]}): a "
                    "batch id names one input, so give this input a new --batch_id")
            return m
        # identities where both sides have them; with --source_files new also by path, as the
        # listing skips them: a file re-uploaded while this run staged it was still loaded once
        if not by_files:
            continue
        ids = set(m.file_ids)
        loaded = ({f for f, i in zip(batch.input_files, batch.file_ids) if i in ids}
                  | (paths & set(m.input_files) if batch.track_files else set()))
        if loaded:
            taken |= loaded
            by = by or m
    if not taken:
        return None
    if taken == paths:
        return by
    if batch.track_files:
        raise WapError(f"--source_files new: {len(taken)} of this run's {len(paths)} files were "
                       f"{consumed_as(by)} by run {by.run_id} meanwhile (e.g. {sorted(taken)[0]}); main is "
                       "unchanged: rerun to load the rest")
    raise bad_input(f"--source_path: {len(taken)} of the batch's {len(paths)} files are already on "
                    f"main (e.g. {sorted(taken)[0]}, loaded by run {by.run_id}); loading them again "
                    "would duplicate their rows (--source_files new loads only the files no publish "
                    "consumed)")


def consumed_as(mark):
    return "quarantined whole" if mark.status == "quarantined" else "published"


def describe_files(files, n=3):
    files = sorted(files)
    return ", ".join(files[:n]) + (f" and {len(files) - n} more" if len(files) > n else "") if files else "(no files)"


def swap_main(spark, batch, decision, staged_id, ledger):
    """Publish: main := the audited snapshot, in one table-metadata commit based on the metadata
    the decision was made from, so it fails if anything changed since (a compare-and-swap). The
    same commit records the publish in the table's last-publish property (so no crash between the
    swap and the ledger row, and no snapshot expiry after it, can forget it), drops this run's
    branch and any branch of the batch at the very snapshot published or at the one it rebased (a
    crashed run's, resumed); other runs' branches, kept for inspection, stay. Before it overwrites the property, the
    publish it names is recorded in the ledger if its run did not: so every publish is always in
    the ledger or in the property, and a snapshot of this job on main in neither had no audit."""
    staged = decision.metadata.snapshot(staged_id)
    commit_consumed(spark, batch, decision, ledger, staged_id, PUBLISH_PROPERTY, {
        "snapshot_id": staged_id, "parent_id": staged.parentId(), "timestamp_ms": staged.timestampMillis()})
    # A catalog whose commit is not atomic across processes (Hadoop's checks the next version, then
    # renames) can let a concurrent commit from the same base replace this one. Main must be this
    # snapshot now; if not, the outcome is unknown and decided again: the batch on main settles it.
    if ref_id(read_back(decision), "main") != staged_id:
        raise CommitConflict("CommitStateUnknownException")


def quarantine_whole(spark, batch, decision, ledger, staged_id):
    """Every row of the batch was quarantined: it is consumed by the same compare-and-swap as a
    publish, of the last-quarantine property alone (main is not moved), so it is ordered against
    every other consumption of the batch: whichever commits second finds the other and settles.
    Read back, as a publish reads main back."""
    commit_consumed(spark, batch, decision, ledger, staged_id, WHOLE_QUARANTINE_PROPERTY,
                    {"snapshot_id": None, "timestamp_ms": int(time.time() * 1000)})
    mark = last_quarantine(read_back(decision))
    if mark is None or mark.run_id != batch.run_id:
        raise CommitConflict("CommitStateUnknownException")


def read_back(decision):
    """The table's metadata just after this run's commit; a failure to read it leaves the commit's
    outcome unknown (decided again), never the run failed after a commit that may have landed."""
    try:
        return decision.operations.refresh()
    except Exception as e:
        log.info("the table could not be read back after the commit (%s)", first_line(e))
        raise CommitConflict("CommitStateUnknownException") from None


def commit_consumed(spark, batch, decision, ledger, staged_id, key, record):
    """The compare-and-swap both consumptions share: the table property `key` set to `record`
    (what the batch consumed, should its snapshot expire unrecorded) and this run's branch dropped;
    if the record names the staged snapshot, main set to it and any branch of the batch there (or
    at the snapshot it rebased) dropped too.
    The consumption the property named before is recorded in the ledger first, if it is not."""
    base = decision.metadata
    previous = property_mark(base, key)
    if previous is not None and previous.snapshot_id is not None:  # each was recorded before the next
        snapshot = base.snapshot(previous.snapshot_id)
        if snapshot is not None:
            previous.summary = snapshot_fields(snapshot)["summary"]
    ledger.complete(list({(m.run_id, m.snapshot_id): m for m in [previous, *ledger.unrecorded]
                          if m is not None}.values()))
    record = {"run_id": batch.run_id, "batch_id": batch.batch_id, **record,
              "input_fingerprint": batch.input_fingerprint, "input_files": batch.input_files,
              "file_ids": batch.file_ids}
    jvm = spark.sparkContext._jvm
    properties = java(jvm, "java.util.HashMap")()
    properties.put(key, json.dumps(record))
    builder = java(jvm, "org.apache.iceberg.TableMetadata").buildFrom(base).setProperties(properties)
    publish = record["snapshot_id"] is not None
    heads = set()  # the batch's snapshots main now holds: the staged one, and the one it rebased
    if publish:
        builder = builder.setBranchSnapshot(staged_id, "main")
        source = base.snapshot(staged_id).summary().get(SOURCE_SNAPSHOT_PROPERTY)
        # (a crashed run's branch left there would outlive main's own copy of its files, and
        # Iceberg's Java expiry, once main is the table's only ref, deletes what an expired
        # snapshot added unless a snapshot it still has names it as its source)
        heads = {staged_id, *([int(source)] if source else [])}
    for name, ref in java_items(base.refs()):
        if name == batch.branch or ref.isBranch() and (
                str(name).startswith(branch_prefix(batch.batch_id)) and ref.snapshotId() in heads
                # a kept branch an operator cherry-picked to main: the same hazard, whatever its batch
                # (its head this job's own snapshot, the branch's one commit above main)
                or str(name).startswith(BRANCH_PREFIX) and ref.snapshotId() in ledger.copied
                and base.snapshot(ref.snapshotId()).summary().get(BATCH_PROPERTY) is not None):
            builder = builder.removeRef(name)
    with commit_conflicts():
        decision.operations.commit(base, builder.build())


def rebase(spark, t, batch, staged, new_main, since_ms):
    """Re-commit the audited data files on top of main as it is now, on this run's branch, in one
    transaction: metadata only, no data rewritten, so the rows are exactly the audited ones. The
    transaction is all or nothing; if the table changed under it, CommitConflict: decide again."""
    table = iceberg_table(spark, t)
    snapshot = table.snapshot(staged.snapshot_id)
    if snapshot is None:  # gone since the decision: the next one says why
        raise CommitConflict("the audited snapshot is gone")
    io = table.io()
    if (snapshot.removedDataFiles(io).iterator().hasNext()
            or snapshot.addedDeleteFiles(io).iterator().hasNext()):
        raise WapError("publish: the staged snapshot removes or deletes rows; only appends can be rebased")
    newest = newest_publish(table)  # main's, as the batch is rebased on it (await_history)
    if not table.refs().containsKey(batch.branch):  # dropped since the decision, by a publish of its batch
        raise CommitConflict("the run's branch is gone")
    txn = table.newTransaction()
    txn.manageSnapshots().replaceBranch(batch.branch, new_main).commit()
    append = txn.newAppend().toBranch(batch.branch)  # groups files by partition spec
    files = snapshot.addedDataFiles(io).iterator()
    while files.hasNext():
        append.appendFile(files.next())
    for key, value in batch.snapshot_properties().items():
        append.set(key, value)
    # The staged snapshot is left behind unreferenced. Name it as this snapshot's source, as a
    # cherry-pick does: Iceberg's snapshot expiry then never deletes the files main now holds.
    original = staged.summary.get(SOURCE_SNAPSHOT_PROPERTY) or str(staged.snapshot_id)
    append.set(SOURCE_SNAPSHOT_PROPERTY, original)
    with commit_conflicts():
        append.commit()
        txn.commitTransaction()
    # the schema the files were written with, not the rebase's (a column replaced meanwhile)
    written = staged.schema_id if staged.schema_id is not None else snapshot.schemaId()
    staged = guard(spark, t, batch, since_ms)
    staged.last_publish, staged.schema_id = newest, written
    return staged


def blocks(result):
    """A check result that stops the publish: failed, and not a warning."""
    return not result["passed"] and result["action"] != "warn"


def blocking_failures(report):
    return [r["name"] for r in report.checks if blocks(r)]


# What a snapshot that changes the table counts in its summary (Iceberg leaves out zero counts).
SNAPSHOT_CHANGES = ("added-data-files", "deleted-data-files", "added-delete-files", "removed-delete-files",
                    "added-records", "deleted-records")


def changes_nothing(staged):
    """The staged snapshot adds and removes no data or delete files and no records: publishing it
    would change nothing. Decided from the snapshot itself, so no mode's row counters (a merge
    that only deletes writes no rows) and no path (staged or resumed) can misjudge it."""
    return not any(int(staged.summary.get(key) or 0) for key in SNAPSHOT_CHANGES)


# =================================================================================================
# Report
# =================================================================================================

# Every second, Spark job and Iceberg commit of a run is in one step of its report. The run's own
# steps, in order; a step that runs again (a publish retry) adds to its totals.
RUN_STEPS = ("session", "read", "validate", "prepare", "write", "audit", "publish")
# The side work once the outcome is settled: the ledger row, the report files, the side channels.
SIDE_STEPS = ("ledger", "report", "alerts")
OTHER_STEP = "other"  # outside every named step: parameters, the moments between steps
JOB_GROUP = "spark.jobGroup.id"  # Spark's local property for a thread's job group


@dataclass
class RunReport:
    status: Status = Status.ERROR
    exit_code: int = None
    table: str = None
    branch: str = None
    batch_id: str = None
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    rows_written: int = 0
    rows_dropped: int = 0
    rows_read: int = None
    main_snapshot_before: int = None
    main_snapshot_after: int = None
    staged_snapshot: int = None
    mode: str = None
    rows_inserted: int = None
    rows_updated: int = None
    rows_deleted: int = None
    rebases: int = 0
    audit_source: str = None
    checks: list = field(default_factory=list)
    timings: dict = field(default_factory=dict)  # step -> seconds; they sum to `seconds`
    spark_jobs: dict = field(default_factory=dict)  # step -> Spark jobs it ran
    iceberg_commits: dict = field(default_factory=dict)  # step -> commits of table, ledger, quarantine
    ledger_rows_read: int = 0  # the consumed rows its ledger reads returned (a long ledger's: its scope's)
    step_windows: dict = field(default_factory=dict)  # step -> [[start, end] epoch ms], per run of it
    seconds: float = None  # from the start to the report file
    inspect_sql: str = None
    quarantine_table: str = None
    error: str = None
    started_at: str = None
    finished_at: str = None
    input_fingerprint: str = None
    config_fingerprint: str = None
    input_files: list = field(default_factory=list)
    input_file_ids: list = field(default_factory=list)  # one identity (path, size, content) per file
    table_uuid: str = None  # the table's identity, whatever catalog alias reached it
    rerun_command: str = None
    html_report: str = None  # where the run's HTML page was written
    metrics: dict = field(default_factory=dict)  # statistics kept in the ledger for anomaly checks
    glue_dq: dict = None  # the checks' outcomes as Glue Data Quality reports them (GlueResult)


def nested_results(results):
    """Results with every composite's rules' results, at any depth."""
    return [x for r in results for x in [r] + nested_results(r.get("rules") or [])]


def run_metrics(report):
    """The statistics the ledger keeps: the row count, and every stat and anomaly check's value
    (a composite's rules' too)."""
    metrics = {"row_count": float(report.rows_written or 0)}
    metrics.update({r["metric"]: float(r["observed"]) for r in nested_results(report.checks)
                    if r.get("metric") and is_number(r.get("observed"))})
    return metrics


# Glue Data Quality's result shape, so tools written for Glue DQ read our outcomes: GetDataQualityResult
# (docs.aws.amazon.com/glue/latest/webapi/API_GetDataQualityResult.html) and its RuleResults entries
# (docs.aws.amazon.com/glue/latest/webapi/API_DataQualityRuleResult.html). Metrics are named as Glue
# names them, <Dataset|Column|Multicolumn>.<* or columns>.<metric>: Dataset.*.RowCount,
# Column.order_id.Completeness.

@dataclass
class GlueRuleResult:
    """One RuleResults entry; field names are Glue's."""
    Name: str
    Description: str  # the rule text: DQDL as written, or the check rendered as DQDL, or its JSON
    Result: str  # PASS or FAIL (a check that cannot run stops the run before the audit: no ERROR)
    EvaluationMessage: str = None  # why it failed
    EvaluatedMetrics: dict = field(default_factory=dict)
    EvaluatedRule: str = None  # the rule with its dynamic values as evaluated
    Labels: dict = field(default_factory=dict)


@dataclass
class GlueResult:
    """A run's checks as one GetDataQualityResult."""
    ResultId: str
    RulesetName: str
    EvaluationContext: str
    Score: float  # the share of rules that passed; None without rules
    StartedOn: str
    CompletedOn: str
    RuleResults: list
    AnalyzerResults: list = field(default_factory=list)  # record checks (analyzers): metrics, no verdict
    JobName: str = None
    JobRunId: str = None


def passing_share(r):
    failing, checked = r.get("failing_rows"), r.get("checked_rows")
    if failing is None:
        return None
    if checked:  # 66 of 100 is 0.66, and 1 failing of 10 M is less than 1.0
        return (checked - failing) / checked
    return 1 - (r.get("failing_fraction") or 0.0)


def observed_number(r):
    return r.get("observed") if is_number(r.get("observed")) else None


def null_complement(r):
    value = observed_number(r)
    return None if value is None else 1 - value


# check kind -> (Glue's metric name, its value from our result); stat and anomaly by their stat
GLUE_METRICS = {
    "not_null": ("Completeness", passing_share), "between": ("ColumnValues.Compliance", passing_share),
    "accepted_values": ("ColumnValues.Compliance", passing_share),
    "regex": ("ColumnValues.Compliance", passing_share),
    "expression": ("ColumnValues.Compliance", passing_share),
    "unique": ("Uniqueness", passing_share), "primary_key": ("Uniqueness", passing_share),
    "relationship": ("ReferentialIntegrity", passing_share), "row_count": ("RowCount", observed_number),
    "sql": ("CustomSQL", observed_number), "sql_rows": ("CustomSQL.Compliance", passing_share), "volume": ("RowCountRatio", observed_number),
    "freshness": ("DataFreshness.AgeHours", observed_number),
}
GLUE_STATS = {"row_count": "RowCount", "mean": "Mean", "sum": "Sum", "stddev_pop": "StandardDeviation",
              "variance": "Variance", "distinct_count": "DistinctValuesCount", "unique_fraction": "Uniqueness",
              "entropy": "Entropy", "unique_value_ratio": "UniqueValueRatio", "min_length": "MinimumLength",
              "max_length": "MaximumLength", "column_count": "ColumnCount", "correlation": "ColumnCorrelation",
              "null_fraction": "Completeness", "completeness": "Completeness", "min": "Minimum", "max": "Maximum"}


def glue_metrics(c, r):
    """A check's metric as Glue names it; a composite's are its rules', as Glue reports a composite."""
    if c.rules:
        return {k: v for rule, result in zip(c.rules, r.get("rules") or [])
                for k, v in glue_metrics(rule, result).items()}
    if c.check in ("stat", "anomaly"):
        name = GLUE_STATS.get(c.stat) or "".join(w.title() for w in c.stat.split("_"))
        value = (null_complement if c.stat == "null_fraction" else observed_number)(r)
    elif c.check in GLUE_METRICS:
        name, read = GLUE_METRICS[c.check]
        value = read(r)
    else:
        return {}
    columns = c.columns or ([c.column] if c.column else [])
    entity = ("Dataset.*" if not columns else f"Column.{columns[0]}" if len(columns) == 1
              else f"Multicolumn.{','.join(columns)}")
    return {} if value is None else {f"{entity}.{name}": float(value)}


# The JSON checks to_dqdl renders with the same meaning: their kind's keys, and nothing else that
# changes what passes (where, tolerances, thresholds have no DQDL there)
DQDL_RENDERED = {"row_count": {"min", "max"}, "not_null": {"column"}, "unique": {"columns"},
                 "accepted_values": {"column", "values", "allow_null"}, "between": {"column", "min", "max"},
                 "stat": {"column", "stat", "max"}}


def rule_text(c, spec):
    """A check's rule as Glue's Description shows it: its DQDL as written; a JSON check as the DQDL
    to_dqdl renders for it (clauses joined with AND); otherwise its JSON."""
    if c.dqdl:
        return c.dqdl
    keys = set(spec) - {"check", "name", "action", "labels"}
    same_nulls = c.check != "accepted_values" or c.allow_null == (None in (c.values or []))
    if keys <= DQDL_RENDERED.get(c.check, set()) and same_nulls:
        try:
            rules = to_dqdl([spec]).splitlines()[1:-1]
        except (ValueError, KeyError, TypeError):  # a shape to_dqdl has no rule for
            rules = []
        rules = [r.strip().rstrip(",") for r in rules]
        if rules:
            return rules[0] if len(rules) == 1 else " AND ".join(f"({r})" for r in rules)
    return json.dumps({k: v for k, v in spec.items() if k != "name"}, sort_keys=True, default=str)


def glue_rule_result(c, spec, r):
    """One check result as a RuleResults entry."""
    description = rule_text(c, spec)
    message = None if r["passed"] else (r.get("detail") or f"{r.get('failing_rows')} failing rows")
    evaluated = (f"{description} [evaluated: {r['expected']}]"
                 if c.condition is not None and c.condition.dynamic and isinstance(r.get("expected"), str)
                 else description)
    return GlueRuleResult(Name=c.name, Description=description, Result="PASS" if r["passed"] else "FAIL",
                          EvaluationMessage=message, EvaluatedMetrics=glue_metrics(c, r),
                          EvaluatedRule=evaluated, Labels=dict(r.get("labels") or {}))


def glue_dq_result(report, p, checks=None):
    """The run's check results in Glue Data Quality's result shape; None before any check ran.
    `checks`: those the run audited (profiles expanded, a merge's own key check added); the specs
    they came from give each its rule text, and a check of the job's own is shown as its JSON.
    Recorded checks (analyzers) are AnalyzerResults, outside the score, as Glue keeps them."""
    if not report.checks or p is None:
        return None
    specs = list(p.checks)
    written = {c.name: spec for c, spec in zip(parse_checks(specs), specs)}
    by_name = {c.name: (c, written.get(c.name) or spec_of(c)) for c in checks or parse_checks(specs)}
    entries = [(r, glue_rule_result(*by_name[r["name"]], r)) for r in report.checks if r["name"] in by_name]
    rules = [asdict(e) for r, e in entries if r["action"] != RECORD]
    analyzers = [{"Name": e.Name, "Description": e.Description, "EvaluationMessage": r.get("detail"),
                  "EvaluatedMetrics": e.EvaluatedMetrics} for r, e in entries if r["action"] == RECORD]
    passed = sum(1 for r in rules if r["Result"] == "PASS")
    return asdict(GlueResult(
        ResultId=report.run_id, RulesetName=report.table, EvaluationContext=report.table,
        Score=round(passed / len(rules), 6) if rules else None, StartedOn=report.started_at,
        CompletedOn=report.finished_at, RuleResults=rules, AnalyzerResults=analyzers,
        JobName=p.glue_args.get("JOB_NAME"), JobRunId=p.glue_args.get("JOB_RUN_ID")))


def spec_of(c):
    """A check as the JSON spec that would make it: its kind's parameters that are set."""
    required, optional = KINDS[c.check].params
    return {"check": c.check, **{k: getattr(c, k) for k in sorted(required | optional)
                                 if getattr(c, k, None) is not None and getattr(c, k) is not False}}


def ledger_row(report):
    """The report as a row of the run ledger."""
    def number(value):
        return None if value is None else int(value)

    checks = [{"name": c["name"], "check": c["check"], "action": c["action"], "passed": c["passed"],
               "failing_rows": number(c["failing_rows"]),
               "observed": None if c.get("observed") is None else json.dumps(c["observed"], default=str)}
              for c in report.checks]
    return {"table_name": report.table, "run_id": report.run_id, "batch_id": report.batch_id,
            "status": str(report.status),
            "exit_code": report.exit_code, "mode": report.mode, "branch": report.branch,
            "main_snapshot_before": report.main_snapshot_before,
            "main_snapshot_after": report.main_snapshot_after,
            "staged_snapshot": report.staged_snapshot, "rows_written": number(report.rows_written),
            "rows_dropped": number(report.rows_dropped), "rows_inserted": number(report.rows_inserted),
            "rows_updated": number(report.rows_updated), "rows_deleted": number(report.rows_deleted),
            "checks": checks, "metrics": {k: float(v) for k, v in report.metrics.items()},
            "timings": {k: float(v) for k, v in report.timings.items()},
            "input_fingerprint": report.input_fingerprint,
            "config_fingerprint": report.config_fingerprint, "input_files": report.input_files,
            "started_at": datetime.fromisoformat(report.started_at) if report.started_at else None,
            "finished_at": datetime.fromisoformat(report.finished_at) if report.finished_at else None,
            "error": report.error, "table_uuid": report.table_uuid, "input_file_ids": report.input_file_ids,
            "score": (report.glue_dq or {}).get("Score"),
            "rule_results": (report.glue_dq or {}).get("RuleResults")}


def record_run(spark, report, p, ledger=None):
    """Append the run to the ledger; returns the ledger written to, or None. Bad input writes
    nothing new: its row is recorded only in a ledger that already exists. `ledger`: what the run
    has read of it already."""
    if spark is None or not spark.conf.get(f"spark.sql.catalog.{p.catalog}", None):
        return None  # the run ended before it had a session with the catalog
    ledger = ledger or Ledger.of(spark, p)
    if report.exit_code == EXIT_BAD_INPUT and not ledger.exists():
        return None
    ledger.record([ledger_row(report)])
    return ledger


def summary_table(report):
    """A few readable lines for the log: one per check."""
    lines = [f"{'check':32} {'type':16} {'action':6} {'result':6} failing_rows"]
    for r in report.checks:
        outcome = "PASS" if r["passed"] else ("WARN" if r["action"] == "warn" else "FAIL")
        failing = "-" if r["failing_rows"] is None else r["failing_rows"]
        lines.append(f"{r['name'][:32]:32} {r['check']:16} {r['action']:6} {outcome:6} {failing}"
                     + (f"  ({r['detail']})" if r.get("detail") else ""))
    return "\n".join(lines)


def put_text(location, body, content_type):
    """Write text to a local file (atomically) or an s3:// object; returns the location."""
    if location.startswith("s3://"):
        bucket, key = split_s3(location)  # bounded waits: a report must not hold the job's end for minutes
        aws_client("s3", attempts=4).put_object(Bucket=bucket, Key=key, Body=body.encode(), ContentType=content_type)
        return location
    os.makedirs(os.path.dirname(os.path.abspath(location)), exist_ok=True)
    tmp = f"{location}.{uuid.uuid4().hex}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(body)
    os.replace(tmp, location)
    return location


def report_location(report, p, extension):
    """<report_path>/<catalog.namespace.table>/<batch_id>.<extension>"""
    return f"{p.report_path.rstrip('/')}/{report.table or 'unknown'}/{report.batch_id or 'no_batch'}{extension}"


def write_html_report(spark, report, p):
    """The run as an HTML page beside its JSON report, with the table's recent runs charted from
    the run ledger."""
    report.html_report = put_text(report_location(report, p, ".html"),
                                  render_run_html(asdict(report), run_history(spark, report, p)), "text/html")


def write_report(report, p):
    """The JSON report. Written once more last, so it holds every step's figures but its own
    write's."""
    return put_text(report_location(report, p, ".json"), json.dumps(asdict(report), indent=2, default=str),
                    "application/json")


def active_session():
    """The run's SparkSession; None if the run ended before it had one. pyspark keeps the session
    it made last: asking the JVM instead costs about ten round trips, and every step asks."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession
    if SparkContext._active_spark_context is None:
        return None
    return getattr(SparkSession, "_activeSession", None) or SparkSession.getActiveSession()


def job_group(report, step):
    """The Spark job group of a run's step: the report counts its jobs, the Spark UI shows them."""
    return f"wap_etl-{report.run_id}-{step}"


def epoch_ms():
    return int(time.time() * 1000)


def close_timings(report):
    """The run's wall time so far, and its seconds outside every named step as `other`: the
    timings sum to `seconds`."""
    report.seconds = round(time.time() - datetime.fromisoformat(report.started_at).timestamp(), 3)
    named = sum(v for k, v in report.timings.items() if k != OTHER_STEP)
    report.timings[OTHER_STEP] = round(max(0.0, report.seconds - named), 3)


def count_spark_jobs(spark, report):
    """The Spark jobs of each step (job groups outlive their jobs in Spark's status tracker)."""
    sc = spark.sparkContext
    try:  # the tracker learns of a job from the listener bus: let it catch up
        sc._jsc.sc().listenerBus().waitUntilEmpty()
    except Exception as e:
        log.info("Spark's listener bus did not drain; job counts may be short: %s", first_line(e))
    tracker = sc._jsc.statusTracker()  # the Java one: its id arrays counted, not copied id by id
    report.spark_jobs = {step: len(tracker.getJobIdsForGroup(job_group(report, step)))
                         for step in report.timings}


def count_iceberg_commits(spark, report, tables):
    """The commits each step made on the tables the run writes, from their metadata logs: each
    commit is a new metadata version stamped when it was made, inside one step's window (or
    between steps: `other`). Counts a concurrent writer's commits in the windows too, and no
    more than a table's metadata log keeps (write.metadata.previous-versions-max, 100)."""
    started = int(datetime.fromisoformat(report.started_at).timestamp() * 1000)
    counts = dict.fromkeys(report.timings, 0)
    for t in tables:
        try:
            metadata = iceberg_table(spark, t).operations().current()
        except Exception:  # not created: no commits
            continue
        stamps, previous = [metadata.lastUpdatedMillis()], metadata.previousFiles()
        for i in reversed(range(previous.size())):  # newest first, to a minute before the run
            if stamps[-1] < started - CLOCK_SKEW_MS:  # (Iceberg lets stamps go back by a minute)
                break
            stamps.append(previous.get(i).timestampMillis())
        for stamp in stamps:
            if stamp >= started:
                step = next((s for s, windows in report.step_windows.items()
                             if any(a <= stamp <= b for a, b in windows)), OTHER_STEP)
                counts[step] = counts.get(step, 0) + 1
    report.iceberg_commits = counts


HISTORY_RUNS = 30


def run_history(spark, report, p):
    """The table's last runs from the ledger, oldest first, this run included."""
    history = []
    try:
        ledger = Ledger.of(spark, p)
        history = [ledger_dict(r) for r in reversed(ledger.recent(HISTORY_RUNS))]
    except Exception as e:  # no session, no ledger yet: the page shows this run alone
        log.info("run history unavailable: %s", first_line(e))
    if report.run_id not in {h["run_id"] for h in history}:
        history = history[-(HISTORY_RUNS - 1):] + [ledger_dict(ledger_row(report))]
    return history


def ledger_dict(row):
    """A ledger row (Row or dict) as plain JSON-able values for the page."""
    d = row.asDict(recursive=True) if hasattr(row, "asDict") else dict(row)
    return {k: (v.isoformat(sep=" ", timespec="seconds") if isinstance(v, datetime) else v)
            for k, v in d.items()}


def rerun_command(p, argv):
    """How to run this batch again, the way it was run."""
    if p.on_glue:  # our parameters and Glue's own job arguments, less those of this one run
        ours, glue = split_glue_argv(redacted(argv, p.secrets))
        arguments = {k: v or "" for k, v in glue.items()
                     if k[2:] not in ("JOB_NAME", "JOB_ID", "JOB_RUN_ID") + WORKFLOW_ARGS}
        arguments.update((f"--{n}", v) for n, v in ours)
        return (f"aws glue start-job-run --job-name {shlex.quote(p.glue_args.get('JOB_NAME', 'wap_etl'))} "
                f"--arguments {shlex.quote(json.dumps(arguments))}")
    return "python wap_etl.py " + shlex.join(redacted(argv, p.secrets))


def redacted(argv, secrets):
    """The arguments with every secret value replaced, whatever its form: `--name value`,
    `--name=value`, or inside --source_options' JSON (other keys stay readable)."""
    return [scrub(a, secrets) for a in argv]


REDACTED = "<redacted>"
# What exactly-once matches on: never scrubbed (a short secret inside one would change the batch)
IDENTITY_FIELDS = ("batch_id", "run_id", "input_files", "input_file_ids", "input_fingerprint",
                   "config_fingerprint", "table_uuid", "status", "table", "branch")


def scrub(text, secrets):
    """The text with each secret value, as written or escaped inside JSON, replaced by REDACTED.
    Text without a secret is returned as it is (a Status stays a Status)."""
    for secret in secrets:
        for form in (secret, json.dumps(secret)[1:-1]):
            if form in text:
                text = text.replace(form, REDACTED)
    return text


def scrubbed(value, secrets):
    """A report value (text, or lists and dicts of them) with the secrets scrubbed at every depth.
    Dict keys are names the job chose (fields, checks, columns) and are kept."""
    if isinstance(value, str):
        return scrub(value, secrets)
    if isinstance(value, list):
        return [scrubbed(v, secrets) for v in value]
    if isinstance(value, dict):
        return {k: scrubbed(v, secrets) for k, v in value.items()}
    return value


class Scrubber(logging.Filter):
    """On the job's logger: scrubs the run's secrets from every record, exception text included,
    before any handler formats it."""

    def __init__(self):
        super().__init__()
        self.secrets = ()

    def filter(self, record):
        if self.secrets:
            record.msg, record.args = scrub(record.getMessage(), self.secrets), ()
            if record.exc_info:
                record.exc_text = scrub(logging.Formatter().formatException(record.exc_info), self.secrets)
                record.exc_info = None
        return True


# The HTML pages: self-contained (inline CSS and SVG, no script, nothing from the network), so
# they open from S3 or a laptop alike. Every value from a report or from data is escaped.

PALETTE = ["#0969da", "#8250df", "#bf3989", "#1a7f37", "#bc4c00", "#0a7ea4", "#9a6700", "#57606a"]
MARK_BG = "#fff8c5"
BANNERS = {  # status -> (banner text, css class)
    "published": ("Published", "ok"), "already_published": ("Already published", "muted"),
    "staged": ("Staged, not published", "warn"), "nothing_to_publish": ("Nothing to publish", "muted"),
    "audit_failed": ("Audit failed", "bad"), "error": ("Error", "bad"),
    "quarantined": ("Every row quarantined", "warn"),
}


def _e(value, empty="-"):
    """Escape anything for HTML text or attributes; None becomes `empty`."""
    return empty if value is None else html.escape(str(value), quote=True)


def _abbr(text, n):
    """Keep the tail: batch ids usually share a prefix and differ at the end."""
    text = str(text)
    return text if len(text) <= n else "\u2026" + text[-(n - 1):]


def _num(v):
    if isinstance(v, float) and not v.is_integer():
        return f"{v:,.3g}"
    return f"{int(v):,}" if isinstance(v, (int, float)) else _e(v)


def _ticks(vmax, integers):
    """Round tick values 0..>=vmax, about four steps (1/2/2.5/5 x 10^k)."""
    if vmax <= 0:
        return [0, 1]
    raw = vmax / 4
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    step = max(step, 1) if integers else step
    return [i * step for i in range(math.ceil(vmax / step - 1e-9) + 1)]


def svg_bar_chart(title, labels, series, marked=None, width=640, height=200):
    """Grouped bar chart as inline SVG; <title> tooltips replace JavaScript hovers."""
    series = [(name, list(vals)) for name, vals in series][:len(PALETTE)]
    per_row = max(1, (width - 60) // 140)
    legend_rows = math.ceil(len(series) / per_row) if len(series) > 1 else 0
    left, right, top, bottom = 48, 12, 42 + 16 * legend_rows, 52
    full_h = height + 16 * legend_rows
    pw, ph = width - left - right, full_h - top - bottom
    out = [f'<svg class="chart" role="img" aria-label="{_e(title)}" viewBox="0 0 {width} {full_h}" '
           f'width="{width}" height="{full_h}"><title>{_e(title)}</title>',
           f'<text x="4" y="16" class="ct">{_e(title)}</text>']
    for i, (name, _) in enumerate(series if legend_rows else []):
        x, y = left + (i % per_row) * 140, 34 + (i // per_row) * 16
        out.append(f'<rect x="{x}" y="{y - 9}" width="10" height="10" rx="2" fill="{PALETTE[i]}"/>'
                   f'<text x="{x + 14}" y="{y}" class="lg">{_e(_abbr(name, 20))}</text>')
    out.append(f'<line x1="{left}" y1="{top + ph}" x2="{left + pw}" y2="{top + ph}" class="ax"/>')
    values = [v for _, vals in series for v in vals if v is not None]
    if not labels or not values:
        msg = "no history yet" if not labels else "no data"
        out.append(f'<text x="{left + pw / 2}" y="{top + ph / 2}" class="empty">{msg}</text></svg>')
        return "".join(out)
    ticks = _ticks(max(values), all(float(v).is_integer() for v in values))
    y_of = lambda v: top + ph - ph * v / ticks[-1]  # noqa: E731
    for t in ticks:
        out.append(f'<line x1="{left}" y1="{y_of(t):.1f}" x2="{left + pw}" y2="{y_of(t):.1f}" class="grid"/>'
                   f'<text x="{left - 6}" y="{y_of(t) + 4:.1f}" class="yt">{_num(t)}</text>')
    gw = pw / len(labels)
    bw = min(gw * 0.78 / len(series), 36)
    pad = (gw - bw * len(series)) / 2
    step = max(1, math.ceil(len(labels) * 24 / pw))  # thin x labels, always keeping the newest
    for i, label in enumerate(labels):
        gx = left + i * gw
        if i == marked:
            out.append(f'<rect x="{gx + pad - 4:.1f}" y="{top}" width="{bw * len(series) + 8:.1f}" height="{ph}" fill="{MARK_BG}" class="mark"/>'
                       f'<text x="{gx + gw / 2:.1f}" y="{top - 4}" class="mk">this run</text>')
        for j, (name, vals) in enumerate(series):
            v = vals[i] if i < len(vals) else None
            if v is None:
                continue
            y = min(y_of(v), top + ph - 1)  # zero still shows as a hairline
            cls, extra = ("bar marked", ' stroke="#1f2328" stroke-width="1.5"') if i == marked else ("bar", "")
            out.append(f'<rect class="{cls}" x="{gx + pad + j * bw:.1f}" y="{y:.1f}" width="{bw:.1f}" '
                       f'height="{top + ph - y:.1f}" fill="{PALETTE[j]}"{extra}>'
                       f'<title>{_e(label)} \u00b7 {_e(name)}: {_num(v)}</title></rect>')
        if (len(labels) - 1 - i) % step == 0 or i == marked:
            x, y = gx + gw / 2, top + ph + 12
            out.append(f'<text x="{x:.1f}" y="{y}" transform="rotate(-40 {x:.1f} {y})" '
                       f'class="xt{" xm" if i == marked else ""}">{_e(_abbr(label, 12))}</text>')
    out.append("</svg>")
    return "".join(out)


def _history_charts(history, current_run_id=None):
    """The two trend charts shared by the run page and the status page."""
    shown = [h for h in history if h.get("status") == "published"
             or (current_run_id is not None and h.get("run_id") == current_run_id)]
    mark = lambda runs: next((i for i, h in enumerate(runs)  # noqa: E731
                              if current_run_id is not None and h.get("run_id") == current_run_id), None)
    rows = svg_bar_chart("Rows per published batch", [h.get("batch_id") for h in shown],
                         [("rows written", [h.get("rows_written") for h in shown])], mark(shown))
    names = []
    for h in history:
        names += [c["name"] for c in h.get("checks") or [] if c.get("name") not in names]
    per_run = [{c.get("name"): c.get("failing_rows") for c in h.get("checks") or []} for h in history]
    fails = svg_bar_chart("Failing rows per check", [h.get("batch_id") for h in history],
                          [(n, [r.get(n) for r in per_run]) for n in names[:len(PALETTE)]], mark(history))
    return f'<section class="charts"><div class="card">{rows}</div><div class="card">{fails}</div></section>'


REPORT_CSS = """
*{box-sizing:border-box}
body{margin:0;background:#f6f8fa;color:#1f2328;font:14px/1.5 -apple-system,BlinkMacSystemFont,"Segoe UI",
 Helvetica,Arial,sans-serif,"Apple Color Emoji","Segoe UI Emoji"}
main{max-width:1140px;margin:0 auto;padding:24px}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 8px}h3{font-size:14px;margin:18px 0 6px}
.banner{border-radius:8px;padding:16px 20px;border:1px solid;border-left-width:6px;background:#fff}
.banner.ok{border-color:#1a7f37;background:#dafbe1}.banner.bad{border-color:#cf222e;background:#ffebe9}
.banner.warn{border-color:#bf8700;background:#fff8c5}.banner.muted{border-color:#8c959f;background:#f6f8fa}
.meta{color:#59636e;font-size:13px}.meta b{color:#1f2328;font-weight:600}
.kv{display:flex;flex-wrap:wrap;gap:8px;margin:14px 0 0;padding:0}
.kv div{background:#fff;border:1px solid #d1d9e0;border-radius:6px;padding:6px 12px}
.kv dt{font-size:12px;color:#59636e}.kv dd{margin:0;font-weight:600;font-variant-numeric:tabular-nums}
.card{background:#fff;border:1px solid #d1d9e0;border-radius:8px;padding:12px;overflow-x:auto}
table{border-collapse:collapse;width:100%;background:#fff;font-size:13px}
th,td{text-align:left;padding:6px 10px;border-bottom:1px solid #d1d9e0;vertical-align:top;overflow-wrap:anywhere}
th{background:#f6f8fa;font-weight:600;white-space:nowrap}tr:last-child td{border-bottom:0}
td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.badge{display:inline-block;border-radius:10px;padding:0 8px;font-size:12px;font-weight:600;color:#fff}
.badge.ok{background:#1a7f37}.badge.bad{background:#cf222e}.badge.warn{background:#9a6700}.badge.muted{background:#6e7781}
.null{color:#8c959f;font-style:italic;font-size:12px}.stale{color:#cf222e;font-weight:600}
code,pre{font:12px/1.45 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
pre{background:#fff;border:1px solid #d1d9e0;border-radius:6px;padding:12px;overflow-x:auto;white-space:pre-wrap}
pre.err{background:#ffebe9;border-color:#ff818266}
.narrow{max-width:560px}
.tbar{display:inline-block;height:8px;background:#54aeff;border-radius:2px;vertical-align:middle}
.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(520px,1fr));gap:16px;margin-top:12px}
svg.chart{max-width:100%;height:auto;font-family:inherit}
.ct{font-size:14px;font-weight:600;fill:#1f2328}.lg,.yt,.xt{font-size:11px;fill:#59636e}
.yt{text-anchor:end}.xt{text-anchor:end}.xm{fill:#1f2328;font-weight:600}
.mk{font-size:11px;text-anchor:middle;fill:#9a6700;font-weight:600}
.grid{stroke:#eaeef2}.ax{stroke:#8c959f}.empty{font-size:13px;fill:#8c959f;text-anchor:middle}
"""


def _page(title, body):
    """Shared HTML shell so both pages look the same."""
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width,initial-scale=1">'
            f'<title>{_e(title)}</title><style>{REPORT_CSS}</style></head><body><main>{body}</main></body></html>\n')


def _table(headers, rows, empty="none", cls=""):
    """rows hold already-escaped HTML cells; a cell given as (html, cls) gets a class."""
    if not rows:
        return f'<p class="meta">{empty}</p>'
    cell = lambda c: f'<td class="{c[1]}">{c[0]}</td>' if isinstance(c, tuple) else f"<td>{c}</td>"  # noqa: E731
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(cell(c) for c in r) + "</tr>" for r in rows)
    return f'<div class="card {cls}" style="padding:0"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _kv(pairs):
    return '<dl class="kv">' + "".join(f"<div><dt>{_e(k)}</dt><dd>{v}</dd></div>" for k, v in pairs) + "</dl>"


def _cell(v):
    """A JSON value as table cell HTML; NULL is styled so it differs from the string 'NULL'."""
    if v is None:
        return '<span class="null">NULL</span>'
    return _e(v if isinstance(v, str) else json.dumps(v, sort_keys=True, default=str))


def _duration(start, end):
    try:
        s = (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()
    except (TypeError, ValueError):
        return "-"
    return f"{s:.1f} s" if s < 60 else f"{int(s // 60)} min {int(s % 60)} s"


def _result(c):
    if c.get("passed"):
        return "PASS", "ok"
    return {"fail": ("FAIL", "bad"), "drop": ("DROP", "warn")}.get(c.get("action"), ("WARN", "warn"))


def _pct(f):
    return "-" if f is None else f"{f * 100:.3g}%"


def render_run_html(report, history):
    """One run: what happened, why (checks + samples), how to follow up, and the trend."""
    r = report
    label, cls = BANNERS.get(r.get("status"), (str(r.get("status")), "muted"))
    body = [f'<div class="banner {cls}"><h1>{_e(label)} \u2014 {_e(r.get("table"))}</h1><div class="meta">'
            f'batch <b>{_e(r.get("batch_id"))}</b> \u00b7 run <b>{_e(r.get("run_id"))}</b> \u00b7 '
            f'branch <b>{_e(r.get("branch"))}</b> \u00b7 mode <b>{_e(r.get("mode"))}</b><br>'
            f'started {_e(r.get("started_at"))} \u00b7 finished {_e(r.get("finished_at"))} \u00b7 '
            f'took <b>{_duration(r.get("started_at"), r.get("finished_at"))}</b></div></div>']
    body.append(_kv([(k, _num(r.get(f))) for k, f in [
        ("rows written", "rows_written"), ("rows dropped", "rows_dropped"), ("inserted", "rows_inserted"),
        ("updated", "rows_updated"), ("deleted", "rows_deleted"), ("rebases", "rebases")]]
        + [("main snapshot", f'{_e(r.get("main_snapshot_before"))} \u2192 {_e(r.get("main_snapshot_after"))}'),
           ("staged snapshot", _e(r.get("staged_snapshot"))), ("audited", _e(r.get("audit_source"))),
           ("quarantine", _e(r.get("quarantine_table")))]))
    if r.get("error"):
        body.append(f'<h2>Error</h2><pre class="err">{_e(r["error"])}</pre>')
    checks = r.get("checks") or []
    rows = []
    for c in checks:
        res, rcls = _result(c)
        tol = " / ".join(t for t in [
            None if c.get("max_failing_rows") is None else f'\u2264 {_num(c["max_failing_rows"])} rows',
            None if c.get("max_failing_fraction") is None else f'\u2264 {_pct(c["max_failing_fraction"])}'] if t)
        obs = c.get("observed")
        rows.append([_e(c.get("name")), _e(c.get("check")), _e(c.get("action")),
                     f'<span class="badge {rcls}">{res}</span>', (_num(c.get("failing_rows")), "n"),
                     (_pct(c.get("failing_fraction")), "n"), tol or "-",
                     f"<code>{_cell(obs)}</code>" if obs is not None else "-",
                     _e(c.get("decided_by")), _e(c.get("detail")), _e(label_text(c) or None)])
    body.append(f"<h2>Checks ({sum(1 for c in checks if c.get('passed'))}/{len(checks)} passed)</h2>")
    body.append(_table(["Check", "Type", "Action", "Result", "Failing rows", "Failing", "Tolerance",
                        "Observed", "Decided by", "Detail", "Labels"], rows, "no checks configured"))
    for c in checks:
        sample = c.get("sample") or []
        if c.get("passed") or not sample:
            continue
        cols = list(dict.fromkeys(k for row in sample for k in row))
        body.append(f'<h3>Sample failing rows \u2014 {_e(c.get("name"))}</h3>')
        body.append(_table(cols, [[_cell(row.get(k)) for k in cols] for row in sample]))
    if r.get("inspect_sql") and r.get("status") in ("audit_failed", "staged"):
        body.append(f'<h2>Inspect the audit branch</h2><pre>{_e(r["inspect_sql"])}</pre>')
    if r.get("rerun_command"):
        body.append(f'<h2>Re-run</h2><pre>{_e(r["rerun_command"])}</pre>')
    timings, jobs, commits = r.get("timings") or {}, r.get("spark_jobs") or {}, r.get("iceberg_commits") or {}
    longest = max([t for t in timings.values() if t] or [1])
    body.append("<h2>Timings</h2>" + _table(["Step", "Seconds", "", "Spark jobs", "Iceberg commits"], [
        [_e(k), ("-" if v is None else f"{v:.1f}", "n"), f'<span class="tbar" style="width:{120 * (v or 0) / longest:.0f}px"></span>',
         (_e(jobs.get(k, "-")), "n"), (_e(commits.get(k, "-")), "n")]
        for k, v in timings.items()], "no timings recorded", "narrow"))
    body.append("<h2>History</h2>" + _history_charts(history, r.get("run_id")))
    return _page(f'{label}: {r.get("table")} batch {r.get("batch_id")}', "".join(body))


def render_status_html(status, history):
    """The table's status page: what main holds, what is waiting in audit branches, recent runs."""
    main = status.get("main")
    body = [f'<div class="banner muted"><h1>{_e(status.get("table"))}</h1>'
            f'<div class="meta">status generated {_e(status.get("generated_at"))}</div></div><h2>main</h2>']
    body.append(_kv([("snapshot", _e(main.get("snapshot_id"))), ("committed", _e(main.get("committed_at"))),
                     ("total records", _num(main.get("total_records"))), ("last batch", _e(main.get("batch_id")))])
                if main else '<p class="meta">main has no snapshot yet</p>')
    body.append("<h2>Open audit branches</h2>" + _table(
        ["Branch", "Snapshot", "Age", "Rows staged", "Batch", "Run"],
        [[_e(b.get("name")), _e(b.get("snapshot_id")),
          (f'{b["age_hours"]:.1f} h' if b.get("age_hours") is not None else "-",
           "n stale" if (b.get("age_hours") or 0) > 24 else "n"),
          (_num(b.get("rows_staged")), "n"), _e(b.get("batch_id")), _e(b.get("run_id"))]
         for b in status.get("branches") or []], "no open audit branches"))
    runs = []
    for h in reversed(history):
        label, cls = BANNERS.get(h.get("status"), (str(h.get("status")), "muted"))
        failed = ", ".join(str(c.get("name")) for c in h.get("checks") or [] if not c.get("passed"))
        runs.append([_e(h.get("finished_at")), _e(h.get("batch_id")), _e(h.get("run_id")),
                     f'<span class="badge {cls}">{_e(label)}</span>', (_num(h.get("rows_written")), "n"),
                     _e(failed or None)])
    body.append("<h2>Last runs</h2>" + _table(
        ["Finished", "Batch", "Run", "Status", "Rows written", "Failed checks"], runs, "no runs recorded"))
    body.append("<h2>History</h2>" + _history_charts(history))
    return _page(f'Status: {status.get("table")}', "".join(body))


def finish(report, p, ledger=None, history=None, checks=None, spark=None):
    """Log the report, then tell the outside world. The data is safe by now: a side channel that
    fails (no permission, endpoint down, timeout) is a warning, never a change of outcome."""
    report.finished_at = datetime.now(timezone.utc).isoformat()
    side_effect("Glue-shaped results", lambda: setattr(report, "glue_dq", glue_dq_result(report, p, checks)))
    if p is not None:  # before anything shows the report: log, ledger, files, alerts
        vars(report).update({k: scrubbed(v, p.secrets) for k, v in vars(report).items()
                             if k not in IDENTITY_FIELDS})
    close_timings(report)
    report.ledger_rows_read = ledger.rows_read if ledger is not None else 0
    log.info("WAP_REPORT %s", json.dumps(asdict(report), default=str))
    if report.checks:
        log.info("audit of %s (%s):\n%s", report.table, report.status, summary_table(report))
    if p is None or p.dry_run:  # a dry run writes nothing, not even its error
        return
    spark = spark or active_session()  # the run's own session, if it made one (the JVM's is per thread)
    with timed(report, "ledger"):  # part of the protocol for a publish: before the exit, always
        written = []
        side_effect("run ledger", lambda: written.append(record_run(spark, report, p, ledger)))
        if written and written[0] is not None:  # the upkeep of the ledger just written to
            side_effect("run ledger upkeep", written[0].maintain)
    files = p.report_path and report.status is not Status.ALREADY_PUBLISHED
    with timed(report, "report"):
        if spark is not None:  # no commit after this
            side_effect("step counts", lambda: count_steps(spark, report, p, ledger))
        if files:  # the JSON now, should the process die later; written again last, complete
            side_effect("report", lambda: write_report(report, p))
            side_effect("HTML report", lambda: write_html_report(spark, report, p))
    alert = report.status in p.alert_on
    channels = [
        ("SNS alert", alert and p.sns_topic_arn, lambda: send_sns(report, p.sns_topic_arn)),
        ("Slack alert", alert and p.slack_webhook_url, lambda: send_slack(report, p.slack_webhook_url)),
        ("CloudWatch metrics", p.cloudwatch_namespace,
         lambda: put_metrics(report, p.cloudwatch_namespace, p.glue_args)),
        ("EventBridge event", report.status in EVENT_TYPES and p.event_bus_name,
         lambda: put_event(report, p.event_bus_name)),
        ("Glue workflow run properties", all(p.glue_args.get(n) for n in WORKFLOW_ARGS),
         lambda: put_workflow_properties(report, p)),
    ]
    with timed(report, "alerts"):
        send_at_once([(name, send) for name, wanted, send in channels if wanted])
    if spark is not None:
        with timed(report, "report"):  # the page's ledger read ran jobs too; no step since committed
            side_effect("step counts", lambda: count_spark_jobs(spark, report))
        report.iceberg_commits = {step: report.iceberg_commits.get(step, 0) for step in report.timings}
    close_timings(report)
    if files:
        side_effect("report", lambda: log.info("report written to %s", write_report(report, p)))
    log.info("WAP_STEPS %s", json.dumps({"seconds": report.seconds, "timings": report.timings,
                                         "spark_jobs": report.spark_jobs,
                                         "iceberg_commits": report.iceberg_commits,
                                         "ledger_rows_read": report.ledger_rows_read}))


def count_steps(spark, report, p, ledger):
    """Spark jobs and Iceberg commits per step so far, on the tables the run writes."""
    t = TableRef(p.catalog, p.namespace, p.table_name)
    tables = [t, (ledger or Ledger.of(spark, p)).ref] + ([quarantine_ref(t)] if report.quarantine_table else [])
    count_spark_jobs(spark, report)
    count_iceberg_commits(spark, report, tables)


# =================================================================================================
# Alerts, metrics and events
# =================================================================================================

def label_text(result):
    """A check result's labels as `key=value, ...`, for alerts and the HTML page."""
    return ", ".join(f"{k}={v}" for k, v in sorted((result.get("labels") or {}).items()))


def alert_text(report):
    """Subject and body of an alert: what failed, by how much, and how to look at it."""
    subject = f"wap_etl {report.status}: {report.table} batch {report.batch_id}"[:99]
    lines = [f"Table: {report.table}", f"Status: {report.status}", f"Batch: {report.batch_id}",
             f"Branch: {report.branch}", f"Rows staged: {report.rows_written}",
             f"Main snapshot: {report.main_snapshot_after or report.main_snapshot_before}"]
    failed = [c for c in report.checks if blocks(c)]
    if failed:
        lines.append("Failed checks:")
        lines += [f"  - {c['name']} ({c['check']}): "
                  + (f"{c['failing_rows']} failing rows" if c["failing_rows"] is not None
                     else c.get("detail") or "failed")
                  + (f" [labels: {label_text(c)}]" if c.get("labels") else "") for c in failed]
    if report.error:
        lines.append(f"Error: {report.error}")
    if report.status is Status.AUDIT_FAILED and report.inspect_sql:
        lines += ["Inspect the staged rows:", f"  {report.inspect_sql}"]
    if report.html_report and report.html_report.startswith("s3://"):
        lines.append(f"Report: {report.html_report}")
    return subject, "\n".join(lines)


ALERT_WAIT_SECONDS = 45  # how long the job waits for its side channels, all together, before it exits


def send_at_once(channels):
    """Send every side channel at the same time, so the slowest, not their sum, delays the exit.
    The wait covers one channel's whole retry budget (aws_client: 2 attempts of at most 5 + 15 s);
    one still unanswered after ALERT_WAIT_SECONDS is left behind with a warning (its thread dies
    with the process, silently: only this thread logs, while the run's log scrubber is on). Each
    makes its own boto3 client: boto3's default session is not safe to share between threads."""
    errors = {}

    def attempt(name, send):
        try:
            send()
        except Exception as e:
            errors[name] = e
    threads = [threading.Thread(target=attempt, args=(name, send), name=f"wap_etl {name}", daemon=True)
               for name, send in channels]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + ALERT_WAIT_SECONDS
    for (name, _), thread in zip(channels, threads):
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            log.warning("%s: no answer within %d s; the job exits without waiting for it", name,
                        ALERT_WAIT_SECONDS)
        elif name in errors:
            warn_failed(name, errors[name])


def aws_client(service, attempts=2):
    """A boto3 client of its own session, with bounded waits: a side channel's endpoint that does
    not answer costs seconds, not boto's default minute per attempt."""
    import boto3
    from botocore.config import Config
    return boto3.session.Session().client(service, config=Config(
        connect_timeout=5, read_timeout=15, retries={"max_attempts": attempts, "mode": "standard"}))


def send_sns(report, topic_arn):
    subject, body = alert_text(report)
    aws_client("sns").publish(
        TopicArn=topic_arn, Subject=subject, Message=body,
        MessageAttributes={"table": {"DataType": "String", "StringValue": report.table or "-"},
                           "status": {"DataType": "String", "StringValue": report.status}})


def send_slack(report, url):
    """Standard-library POST to a Slack incoming webhook, with a timeout."""
    import urllib.request
    subject, body = alert_text(report)
    escape = lambda text: text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")  # noqa: E731
    data = json.dumps({"text": f"*{escape(subject)}*\n```{escape(body)}```"}).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        if response.status >= 300:
            raise RuntimeError(f"Slack answered HTTP {response.status}")


def metric_dimensions(report, glue_args):
    """Table alone, and on Glue also as Glue's own job metrics are cut: JobName with the JobRunId,
    and with JobRunId ALL for alarms across runs (docs.aws.amazon.com/glue/latest/dg/
    monitoring-awsglue-with-cloudwatch-metrics.html)."""
    table = {"Name": "Table", "Value": report.table or "-"}
    job = (glue_args or {}).get("JOB_NAME")
    if not job:
        return [[table]]
    return [[table]] + [[{"Name": "JobName", "Value": job}, {"Name": "JobRunId", "Value": run}, table]
                        for run in (glue_args.get("JOB_RUN_ID") or "-", "ALL")]


def put_metrics(report, namespace, glue_args=None):
    failed = sum(1 for c in report.checks if blocks(c))
    values = [("RowsWritten", report.rows_written or 0, "Count"),
              ("RowsDropped", report.rows_dropped or 0, "Count"),
              ("ChecksFailed", failed, "Count"),
              ("AuditSeconds", report.timings.get("audit", 0.0), "Seconds"),
              ("Published", 1 if report.status is Status.PUBLISHED else 0, "Count")]
    aws_client("cloudwatch").put_metric_data(Namespace=namespace, MetricData=[
        {"MetricName": name, "Dimensions": dims, "Value": float(value), "Unit": unit}
        for dims in metric_dimensions(report, glue_args) for name, value, unit in values])


def workflow_properties(report, p):
    """What the next job of a Glue workflow needs to act on this run, under keys named by the
    table (one workflow may load several): wap_etl.<namespace>.<table>.<field>."""
    on_main = report.status in (Status.PUBLISHED, Status.ALREADY_PUBLISHED)
    fields = {"batch_id": report.batch_id, "run_id": report.run_id, "status": report.status,
              "exit_code": report.exit_code, "staged_snapshot": report.staged_snapshot,
              "published_snapshot": (report.main_snapshot_after if report.status is Status.PUBLISHED
                                     else report.staged_snapshot if on_main else None)}
    return {f"wap_etl.{p.table}.{k}": "" if v is None else str(v) for k, v in fields.items()}


def put_workflow_properties(report, p):
    """PutWorkflowRunProperties on the workflow run that started this job."""
    aws_client("glue").put_workflow_run_properties(
        Name=p.glue_args["WORKFLOW_NAME"], RunId=p.glue_args["WORKFLOW_RUN_ID"],
        RunProperties=workflow_properties(report, p))


def glue_event_detail(report):
    """The detail of Glue Data Quality's "Data Quality Evaluation Results Available" event
    (docs.aws.amazon.com/glue/latest/dg/data-quality-alerts.html), so rules written for it match
    on state, score and the counts; and the rule results themselves, which Glue's event leaves to
    GetDataQualityResult. The counts come in both spellings: the page's sample (resultID,
    rulesSucceeded) and what Glue sends (resultId, numRulesSucceeded)."""
    g = report.glue_dq or {}
    rules = g.get("RuleResults") or []
    failed = sum(1 for r in rules if r["Result"] != "PASS")
    qualified, _, name = (report.table or "").rpartition(".")  # catalog.namespace, table
    context = {"contextType": "GLUE_JOB" if g.get("JobName") else "WAP_ETL", "runId": report.run_id,
               "jobName": g.get("JobName"), "jobId": g.get("JobRunId"), "evaluationContext": report.table,
               "databaseName": qualified.partition(".")[2] or None, "tableName": name or None}
    counts = {"Succeeded": len(rules) - failed, "Failed": failed, "Skipped": 0}
    return {"resultId": report.run_id, "resultID": report.run_id, "context": context,
            "rulesetNames": [g.get("RulesetName") or report.table],
            "state": "FAILED" if failed or report.status is Status.AUDIT_FAILED else "SUCCEEDED",
            "score": g.get("Score"), **{f"numRules{k}": v for k, v in counts.items()},
            **{f"rules{k}": v for k, v in counts.items()}, "ruleResults": rules}


EVENT_MAX_BYTES = 250_000  # EventBridge takes entries up to 256 KB; the rest is the entry's envelope


def fitted_detail(detail):
    """The detail as JSON within EventBridge's size limit: with every rule result if they fit, else
    the failed ones, else none; `ruleResultsOmitted` says how many were left out (the run's report
    and ledger hold them all)."""
    rules = detail.get("ruleResults") or []
    for kept in (rules, [r for r in rules if r["Result"] != "PASS"], []):
        text = json.dumps({**detail, "ruleResults": kept,
                           **({"ruleResultsOmitted": len(rules) - len(kept)} if len(kept) < len(rules) else {})})
        if len(text.encode()) <= EVENT_MAX_BYTES:
            return text
    return text


EVENT_TYPES = {Status.PUBLISHED: "WAP Published", Status.AUDIT_FAILED: "WAP Audit Failed"}


def put_event(report, bus_name):
    """Tell downstream jobs a batch is on main, so they can start; or that its audit failed (the
    rule outcomes in Glue Data Quality's shape, so rules written for Glue's FAILED events fire)."""
    detail = {"table": report.table, "batch_id": report.batch_id,
              "snapshot_id": report.main_snapshot_after, "rows": report.rows_written,
              **({"branch": report.branch, "staged_snapshot": report.staged_snapshot}  # main: unchanged
                 if report.status is Status.AUDIT_FAILED else {}),
              **glue_event_detail(report)}
    answer = aws_client("events").put_events(Entries=[{
        "Source": "wap_etl", "DetailType": EVENT_TYPES[report.status], "Detail": fitted_detail(detail),
        "EventBusName": bus_name}])
    if answer.get("FailedEntryCount"):
        raise RuntimeError(f"EventBridge refused the event: {answer['Entries']}")


def fault_point(step):
    """Test-only hooks, inert unless their environment variable is set. Steps: stage (before
    the branch is made), before_write, write (after the write, before the guard), audit (after
    the audit, before publishing), decided (the publish decided, before its commit), publish,
    resume (a branch of the batch found to take up, before this run's branch is made on it),
    resumed (just after), quarantined (a batch every row of which was quarantined consumed by its
    commit, before the quarantine's tidy-up), ledger_upkeep (after the ledger's compaction
    committed, before its snapshots expire), ledger_read (a bounded ledger read: its newest
    publishes read, its rows not yet).
    WAP_FAULT_AFTER=<step> kills the process right there. WAP_PAUSE_AT=<step>[,<step>...] with
    WAP_PAUSE_DIR=<folder> announces the step (a file <pid>.<step>) and waits until a file `go`
    or `go.<step>` appears there (at most 10 minutes), so a test can line real runs up at a point."""
    if os.environ.get("WAP_FAULT_AFTER") == step:
        log.error("WAP_FAULT_AFTER=%s: killing the process", step)
        logging.shutdown()
        os._exit(137)
    if step in os.environ.get("WAP_PAUSE_AT", "").split(","):
        folder = os.environ["WAP_PAUSE_DIR"]
        open(os.path.join(folder, f"{os.getpid()}.{step}"), "w").close()
        deadline = time.time() + 600
        while (not any(os.path.exists(os.path.join(folder, name)) for name in ("go", f"go.{step}"))
               and time.time() < deadline):
            time.sleep(0.05)


# =================================================================================================
# Status: what is published, what is pending or failed; branch clean-up; suggested checks
# =================================================================================================

def table_status(spark, p):
    """main, the open audit branches and the table's last runs (oldest first), as data."""
    t = TableRef(p.catalog, p.namespace, p.table_name)
    status = {"table": f"{p.catalog}.{p.table}", "exists": table_exists(spark, t), "main": None,
              "branches": [], "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    if status["exists"]:
        current = refs(spark, t)
        snaps = {r["snapshot_id"]: r for r in spark.table(t.meta("snapshots"))
                 .select("snapshot_id", "committed_at", "summary").collect()}
        now = datetime.now()
        main = current.get("main")
        if main is not None:
            s = snaps[main]
            status["main"] = {"snapshot_id": main, "committed_at": f"{s['committed_at']:%Y-%m-%d %H:%M:%S}",
                              "total_records": s["summary"].get("total-records"),
                              "batch_id": s["summary"].get(BATCH_PROPERTY)}
        for name in sorted(n for n in current if n.startswith(BRANCH_PREFIX)):
            s = snaps.get(current[name])
            summary = (s["summary"] or {}) if s else {}
            status["branches"].append({
                "name": name, "snapshot_id": current[name],
                "age_hours": (now - s["committed_at"]).total_seconds() / 3600 if s else None,
                "rows_staged": summary.get("added-records"), "batch_id": summary.get(BATCH_PROPERTY),
                "run_id": summary.get(RUN_PROPERTY)})
    ledger = Ledger.of(spark, p)
    return status, [ledger_dict(r) for r in reversed(ledger.recent(HISTORY_RUNS))]


def show_status(spark, p):
    """Print what is published, what waits in audit branches and how the last runs ended; with
    --html, write the same as a page."""
    status, history = table_status(spark, p)
    lines = [f"table {status['table']}"]
    if not status["exists"]:
        lines.append("  does not exist yet")
    else:
        main = status["main"]
        lines.append("main: no snapshot yet" if main is None else
                     f"main: snapshot {main['snapshot_id']} committed {main['committed_at']}, "
                     f"{main['total_records'] or '?'} rows, last batch {main['batch_id'] or '-'}")
        lines.append(f"open audit branches: {len(status['branches'])}")
        for b in status["branches"]:
            lines.append(f"  {b['name']}  snapshot {b['snapshot_id']}  age {b['age_hours'] or 0:.1f} h  "
                         f"rows staged {b['rows_staged'] or '?'}  batch {b['batch_id'] or '-'}")
        last = list(reversed(history))[:10]
        lines.append(f"last runs: {len(last)}")
        for r in last:
            failed = [c["name"] for c in r["checks"] or [] if not c["passed"]]
            lines.append(f"  {r['finished_at'] or '?'}  run {r['run_id'][:8]}  {r['batch_id']}  {r['status']}"
                         + (f"  failed: {', '.join(failed)}" if failed else ""))
    if p.html:
        lines.append(f"status page written to {put_text(p.html, render_status_html(status, history), 'text/html')}")
    print("\n".join(lines))
    return lines


def cleanup_branches(spark, p):
    """--cleanup_branches_older_than_days: drop_aged_branches with the days asked, and say so."""
    t = TableRef(p.catalog, p.namespace, p.table_name)
    dropped, in_use = [], []
    if table_exists(spark, t):
        table = iceberg_table(spark, t)
        lift_age_limits(table)
        dropped, in_use = drop_aged_branches(spark, p, t, table, p.cleanup_days)
    print(f"dropped {len(dropped)} audit branch(es) older than {p.cleanup_days:g} days from "
          f"{p.catalog}.{p.table}" + "".join(f"\n  {n}" for n in dropped))
    if in_use:
        print(f"kept {len(in_use)} audit branch(es) whose run may still be running (no ledger row yet):"
              + "".join(f"\n  {n}" for n in in_use))
    return dropped


def drop_aged_branches(spark, p, t, table, days, spare=None):
    """Drop the audit branches (this job's `audit_` prefix only, except the branches of batch
    `spare`) that stopped changing more than `days` ago (see branch_last_used); returns (dropped,
    kept because their run may be running). Kept branches never age out by snapshot expiry (see
    create_branch): each run drops other batches' aged ones as it prepares, reading the ledger
    only if some head is that old (a branch stops changing after its head was committed). A
    branch still carrying an earlier version's retention (see lift_age_limits) goes a day before
    snapshot expiry would take it."""
    now_ms, old = time.time() * 1000, []
    spared = spare and re.compile(re.escape(branch_prefix(spare)) + "[0-9a-f]{8}")
    for name, ref in java_items(table.refs()):
        if not (name.startswith(BRANCH_PREFIX) and ref.isBranch()) or spared and spared.fullmatch(name):
            continue
        head, limit = table.snapshot(ref.snapshotId()), days * DAY_MS
        if ref.maxRefAgeMs() is not None and ref.maxRefAgeMs() < NO_AGE_LIMIT_DAYS * DAY_MS:
            limit = max(0, min(limit, ref.maxRefAgeMs() - DAY_MS))
        if head is not None and now_ms - head.timestampMillis() >= limit:
            fields = snapshot_fields(head)
            old.append((name, fields["snapshot-id"], datetime.fromtimestamp(fields["timestamp-ms"] / 1000),
                        fields["summary"], limit))
    if not old:
        return [], []
    ended, dropped, in_use = runs_ended(spark, p, table), [], []
    moved_on = main_moved_on(table)
    for name, head_id, head_at, summary, limit in sorted(old):
        last_used = branch_last_used(name, head_at, summary, ended, moved_on.get(head_id))
        if last_used is None:
            in_use.append(name)
        elif now_ms - last_used.timestamp() * 1000 >= limit:
            drop_branch(spark, t, name)
            dropped.append(name)
    return dropped, in_use


def main_moved_on(table):
    """{snapshot id: the latest a run can have made a branch at it}, from main's snapshot log
    (commits, fast-forwards, rollbacks alike), read in one call. A run makes its branch at main's
    snapshot (to stage) or at a staged snapshot whose parent is main's (to resume it), so for a
    snapshot S that is the later of when main last moved off S and off S's parent. None while
    main holds either. A snapshot the log no longer lists (expiry trims it) left main before the
    log's first entry."""
    from pyspark import SparkContext
    parser = java(SparkContext._jvm, "org.apache.iceberg.TableMetadataParser")
    metadata = json.loads(parser.toJson(table.operations().current()))
    log = metadata.get("snapshot-log", [])
    if not log or metadata.get("current-snapshot-id", -1) in (-1, None):  # (empty: any first snapshot resumes)
        return {}
    left = {entry["snapshot-id"]: after["timestamp-ms"] for entry, after in zip(log, log[1:])}
    left[log[-1]["snapshot-id"]] = None  # main holds it (again, after a rollback to it)

    def off(snapshot):
        """When main left the snapshot's parent; a first snapshot's parent is an empty main."""
        if snapshot.get("parent-snapshot-id") is not None:
            return left.get(snapshot["parent-snapshot-id"], log[0]["timestamp-ms"])
        return next((e["timestamp-ms"] for e in log if e["timestamp-ms"] > snapshot["timestamp-ms"]), None)
    deadlines = {}
    for snapshot in metadata.get("snapshots", []):
        times = [left.get(snapshot["snapshot-id"], log[0]["timestamp-ms"]), off(snapshot)]
        deadlines[snapshot["snapshot-id"]] = None if None in times else max(times)
    return deadlines


def lift_age_limits(table, attempts=3):
    """Branches an earlier version of the job made with a retention of --branch_retention_days
    get create_branch's instead, in a compare-and-swap of fresh metadata (retried, then left to
    the next run): snapshot expiry would remove them (see create_branch)."""
    from pyspark import SparkContext
    ops, limit = table.operations(), NO_AGE_LIMIT_DAYS * DAY_MS
    base = ops.current()
    for _ in range(attempts):
        aged = [(name, ref) for name, ref in java_items(base.refs()) if name.startswith(BRANCH_PREFIX)
                and ref.isBranch() and (ref.maxRefAgeMs() is None or ref.maxRefAgeMs() < limit)]
        if not aged:
            return
        iceberg = java(SparkContext._jvm, "org.apache.iceberg")  # (cached)
        builder = iceberg.TableMetadata.buildFrom(base)
        for name, ref in aged:
            builder.setRef(name, iceberg.SnapshotRef.builderFrom(ref).maxRefAgeMs(limit).build())
        try:
            with commit_conflicts():
                ops.commit(base, builder.build())
            return
        except CommitConflict:
            base = ops.refresh()
    log.info("audit branches' retention not lifted (the table kept changing); the next run will")


def branch_last_used(name, committed_at, summary, ended, moved_on_ms=None):
    """When an audit branch stopped changing. Its head's commit time only if that head is its own
    run's snapshot: a branch just made at an old main, or resuming another run's snapshot, has an
    old head while its run lives. Otherwise when the ledger says its run ended (`ended`: branch ->
    finished_at); None if it does not say: the run may be running. A branch its run wrote is aged
    by that write once the ledger says the run ended (between its write and its ledger row a run is
    alive: auditing, publishing). A branch whose head no run can have made a branch at since
    longer ago than any run lives (`moved_on_ms`: see main_moved_on) was left by a run that died
    before it wrote or recorded anything: aged from then."""
    written_by = summary.get(RUN_PROPERTY)
    own_head = written_by and name == f"{branch_prefix(summary.get(BATCH_PROPERTY, ''))}{written_by[:8]}"
    if own_head and (name in ended or time.time() - committed_at.timestamp() > LIVE_RUN_SECONDS):
        return committed_at  # its run ended, or wrote longer ago than any run lives (it crashed)
    if own_head:
        return None
    if name not in ended and moved_on_ms is not None and time.time() - moved_on_ms / 1000 > LIVE_RUN_SECONDS:
        return datetime.fromtimestamp(moved_on_ms / 1000)
    return ended.get(name)


LIVE_RUN_SECONDS = 7 * 86400  # Glue's longest job timeout is 7 days (10,080 minutes): no run lives longer


def runs_ended(spark, p, table=None):
    """{branch: when its run ended}, from the run ledger (`table`'s rows: its uuid names them): a
    run writes its row, with its exit code, as it ends."""
    from pyspark.sql import functions as F
    ledger = Ledger.of(spark, p)
    if not ledger.exists():
        return {}
    if table is not None:
        ledger.identify(str(table.uuid().toString()))
    rows = (ledger.runs().filter(F.col("branch").isNotNull() & F.col("exit_code").isNotNull())
            .groupBy("branch").agg(F.max("finished_at").alias("finished_at")).collect())
    return {r["branch"]: r["finished_at"] for r in rows if r["finished_at"] is not None}


def dry_run(spark, p, checks):
    """--dry_run: every check a run makes before its first write, against the table, the tables
    the checks read and a sample of the source (its first file: the schema is all that is needed),
    then the plan as text. Writes nothing: no table, no column, no branch, no ledger row."""
    t = TableRef(p.catalog, p.namespace, p.table_name)
    exists, ledger = table_exists(spark, t), Ledger.of(spark, p)
    if exists:
        ledger.identify(str(iceberg_table(spark, t).uuid().toString()))
    paths = select_source_files(spark, p, t, ledger, History(), record=False)
    if not paths:
        return f"dry run: --source_files new: no file under {p.source_path} is new; the run would end nothing_to_publish"
    try:
        files = list_source_files(spark, paths[0]) if paths == [p.source_path] else paths
    except Exception:  # a glob, say: Spark's reader expands it, the listing does not
        files = paths
    sample = files[:1] or paths
    source = read_source(spark, p, spark.table(t.sql).schema if exists else None, sample)
    try:
        check_columns(source, "--source_path", csv_header(spark, p, source, sample))
        df = apply_transform(source)
        validate_checks_against(spark, checks, df, t)
        plan = plan_table(spark, p, t, df)
        validate_staged_queries(spark, checks, plan, t)
    except WapError:
        raise
    except Exception as e:
        raise explain_read_failure(spark, p, source, sample, e) from None
    if p.mode == "merge":
        check_merge_columns(spark, p, df, plan)
    lines = ["dry run: nothing was written. A run would:",
             f"  read {len(files)} {p.source_format} file(s) from {p.source_path} "
             f"(--source_files {p.source_files}); checked against {sample[0]}",
             "  columns after transform: " + ", ".join(f"{f.name} {f.dataType.simpleString()}"
                                                       for f in plan.df.schema.fields)]
    if plan.create:
        lines.append(f"  create table {t.catalog}.{t.ident}" + (f" partitioned by {', '.join(p.partition_by)}"
                                                               if p.partition_by else ""))
    if plan.enable_wap:
        lines.append(f"  set write.wap.enabled=true on {t.catalog}.{t.ident}")
    if plan.add_columns:
        lines.append("  add columns " + ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in plan.add_columns))
    lines.append(f"  stage the batch ({p.mode}) on an audit branch and audit it with {len(checks)} check(s):")
    lines += [f"    {c.name}: {c.check} ({c.action})" + (f" where {c.where}" if c.where else "") for c in checks]
    lines.append("  then publish it to main if every fail check passes" if p.publish
                 else "  then keep the branch (--publish false)")
    lines.append(f"  and record the run in {ledger.table}" + ("" if ledger.exists() else " (created by the first run)"))
    return "\n".join(lines)


def suggest_checks(spark, p):
    """--suggest_checks: profile the batch as the job would read and transform it, and return a
    check list that passes on it (JSON, or DQDL with --suggest_format dqdl). Writes nothing."""
    t = TableRef(p.catalog, p.namespace, p.table_name)
    ledger = Ledger.of(spark, p)
    paths = select_source_files(spark, p, t, ledger, History(), record=False)
    if not paths:
        raise bad_input(f"--source_path: no new file under {p.source_path} to profile")
    source = read_source(spark, p, spark.table(t.sql).schema if table_exists(spark, t) else None, paths)
    try:
        check_source(spark, p, source, paths)
        specs = profile_checks(apply_transform(source))
    except WapError:
        raise
    except Exception as e:
        raise explain_read_failure(spark, p, source, paths, e) from None
    return json.dumps(specs, indent=2) if p.suggest_format == "json" else to_dqdl(specs)


SUGGEST_MAX_VALUES = 10  # columns with at most this many distinct values get accepted_values


def profile_checks(df):
    """Checks that pass on this batch, from one profiling pass (plus, for the few columns that
    look like keys or categories, one exact look-up of their values)."""
    from pyspark.sql import functions as F, types as T
    fields = df.schema.fields
    measurable = (T.NumericType, T.StringType)
    aggs = [F.count(F.lit(1)).alias("rows")]
    for i, f in enumerate(fields):
        aggs += [F.count(col(f.name)).alias(f"n{i}"),
                 F.approx_count_distinct(col(f.name), DISTINCT_RSD).alias(f"d{i}")]
        if isinstance(f.dataType, T.NumericType):
            aggs += [F.min(col(f.name)).alias(f"lo{i}"), F.max(col(f.name)).alias(f"hi{i}")]
    row = scan_metrics(df, aggs)
    rows = row["rows"]
    kinds = (T.StringType, T.ByteType, T.ShortType, T.IntegerType, T.LongType)
    categories = [i for i, f in enumerate(fields) if isinstance(f.dataType, kinds)
                  and 0 < row[f"d{i}"] <= SUGGEST_MAX_VALUES and row[f"n{i}"] >= 2 * row[f"d{i}"]]
    keys = [i for i, f in enumerate(fields) if isinstance(f.dataType, kinds) and rows > 1
            and row[f"n{i}"] == rows and row[f"d{i}"] >= 0.95 * rows]
    exact = {}
    if categories or keys:
        exact = df.agg(*[F.collect_set(col(fields[i].name)).alias(f"v{i}") for i in categories],
                       *[F.countDistinct(col(fields[i].name)).alias(f"k{i}") for i in keys]).first()
    specs = [{"check": "row_count", "min": rows // 2, "max": max(rows * 2, 1)}]
    for i, f in enumerate(fields):
        name, present = f.name, row[f"n{i}"]
        if rows and present == rows:
            specs.append({"check": "not_null", "column": name})
        elif rows:
            nulls = 1 - present / rows
            specs.append({"check": "stat", "column": name, "stat": "null_fraction",
                          "max": min(1.0, math.ceil(nulls * 150) / 100)})
        if i in keys and exact[f"k{i}"] == rows:
            specs.append({"check": "unique", "columns": [name]})
        elif i in categories and len(exact[f"v{i}"]) <= SUGGEST_MAX_VALUES:
            values = sorted(exact[f"v{i}"]) + ([None] if present < rows else [])
            specs.append({"check": "accepted_values", "column": name, "values": values})
        elif isinstance(f.dataType, measurable) and not isinstance(f.dataType, T.StringType):
            low, high = (row[f"lo{i}"], row[f"hi{i}"])
            low, high = (None, None) if low is None else (plain_number(low, -1), plain_number(high, 1))
            if is_number(low) and is_number(high):
                specs.append({"check": "between", "column": name, "min": low, "max": high})
    return specs


def plain_number(value, outward=0):
    """A Spark number as JSON can hold it (decimals as floats), for a lower bound (outward -1) or an
    upper one (+1) the nearest float on that side of it: a decimal column compares by the digits."""
    if isinstance(value, int):
        return value
    number = float(value)
    if isinstance(value, Decimal) and outward and (Decimal(repr(number)) - value) * outward < 0:
        number = math.nextafter(number, math.inf * outward)
    return number


# =================================================================================================
# Main
# =================================================================================================

@dataclass
class Run:
    """One run's state, carried through write, audit and publish as one object: its session,
    parameters, table, checks, report, run ledger and history walk, and (once the input is
    identified) its batch."""
    spark: object
    p: Params
    t: TableRef
    checks: list
    report: RunReport
    ledger: Ledger
    history: History
    batch: Batch = None


@contextmanager
def timed(report, step):
    """Add the seconds a step took to the report, whatever its outcome, and run its Spark jobs in
    the step's job group, so the report counts them. A step that runs again adds to its totals;
    its windows place its Iceberg commits."""
    spark = active_session()
    outer = spark and spark.sparkContext.getLocalProperty(JOB_GROUP)
    if spark is not None:
        spark.sparkContext.setLocalProperty(JOB_GROUP, job_group(report, step))
    start, start_ms = time.perf_counter(), epoch_ms()
    try:
        yield
    finally:
        report.timings[step] = round(report.timings.get(step, 0.0) + time.perf_counter() - start, 3)
        report.step_windows.setdefault(step, []).append([start_ms, epoch_ms()])
        if spark is not None:
            spark.sparkContext.setLocalProperty(JOB_GROUP, outer)


def run(argv=None):
    """Run the job; return (exit code, report). Never raises. Its log never shows a secret."""
    scrubber = Scrubber()
    log.addFilter(scrubber)
    try:
        return run_job(sys.argv[1:] if argv is None else list(argv), scrubber)
    finally:
        log.removeFilter(scrubber)


def run_job(argv, scrubber):
    """The run, its parameters' secrets handed to the log's scrubber as soon as they are known."""
    report = RunReport(started_at=datetime.now(timezone.utc).isoformat())
    p = glue_job = ledger = history = checks = spark = None
    outer_group = False  # no session yet: no job group to restore
    try:
        p = parse_params(argv)
        scrubber.secrets = p.secrets
        report.table, report.mode = f"{p.catalog}.{p.table}", p.mode
        report.rerun_command = rerun_command(p, argv)
        if p.status or p.cleanup_days is not None or p.suggest_checks:
            spark, glue_job = create_session(p)
            if p.status:
                show_status(spark, p)
            elif p.suggest_checks:
                print(suggest_checks(spark, p))
            else:
                cleanup_branches(spark, p)
            return EXIT_OK, None
        checks = parse_checks(p.checks)
        resolve_references(checks, p.reference_tables)
        check_glue_references(p, p.checks, checks)
        if p.dry_run:
            spark, glue_job = create_session(p)
            print(scrub(dry_run(spark, p, checks), p.secrets))
            return EXIT_OK, None
        with timed(report, "session"):
            spark, glue_job = create_session(p)
        outer_group = spark.sparkContext.getLocalProperty(JOB_GROUP)
        spark.sparkContext.setLocalProperty(JOB_GROUP, job_group(report, OTHER_STEP))
        ledger, history = Ledger.of(spark, p, checks), History()
        ledger.walked = history.marks  # a bounded read names what the run's walks of main read
        code = run_batch(Run(spark, p, TableRef(p.catalog, p.namespace, p.table_name), checks, report,
                             ledger, history))
    except WapError as e:
        report.status, report.error, code = Status.ERROR, str(e), e.code
        log.error("wap_etl: error: %s", e)
    except Exception as e:  # anything unexpected: exit 1, with the cause in the report
        report.status, report.error, code = Status.ERROR, f"{type(e).__name__}: {first_line(e)}", EXIT_ERROR
        if CLOCK_BEHIND.search(report.error):
            report.error += CLOCK_HINT
        log.exception("wap_etl: unexpected error")
    finally:
        try:  # the run's own session (the JVM's active one is per thread)
            session = spark or active_session()
            if session is not None:
                session.conf.unset("spark.wap.branch")
        except Exception:
            pass
    report.exit_code = code
    finish(report, p, ledger, history, checks, spark)
    if outer_group is not False:  # the caller's job group, as it was before the run
        spark.sparkContext.setLocalProperty(JOB_GROUP, outer_group)
    if glue_job is not None and code == EXIT_OK:
        glue_job.commit()
    return code, report


def run_batch(run):
    """Read the batch; a read that fails on malformed data, whenever it surfaces, is bad input."""
    spark, p, t, report, ledger = run.spark, run.p, run.t, run.report, run.ledger
    with timed(report, "read"):
        table = table_if_exists(spark, t)  # its uuid and schema
        if table is not None:
            report.table_uuid = str(table.uuid().toString())
            ledger.identify(report.table_uuid)
            ledger.prefetch()  # overlaps the reader and validation below
        paths = select_source_files(spark, p, t, ledger, run.history)
        if not paths:
            log.info("--source_files new: no file under %s is new; nothing to publish", p.source_path)
            report.status = Status.NOTHING_TO_PUBLISH
            return EXIT_OK
        source = read_source(spark, p, table_schema(spark, table) if table is not None else None, paths)
    try:
        return publish_batch(run, source, paths)
    except Exception as e:
        raise explain_read_failure(spark, p, source, paths, e) from None


def publish_batch(run, source, paths):
    """Validate the batch, then write, audit and publish it exactly once. Returns the exit code."""
    spark, p, t, checks, report, ledger = run.spark, run.p, run.t, run.checks, run.report, run.ledger
    with timed(report, "validate"):
        check_source(spark, p, source, paths)
        files = identify_input(spark, paths if p.source_files == "new" else input_files(source), source)
        df = apply_transform(source)
        validate_checks_against(spark, checks, df, t)
        if p.mode == "merge" and not any(c.keyed and not c.where and [x.lower() for x in c.columns]
                                         == [k.lower() for k in p.merge_keys] for c in checks):
            names = {c.name for c in leaf_checks(checks) + checks}
            checks.append(Check(name="unique_merge_keys" if "unique_merge_keys" not in names
                                else unused_name("unique_merge_keys", names), check="unique", columns=p.merge_keys))
        plan = plan_table(spark, p, t, df)
        validate_staged_queries(spark, checks, plan, t)
        good, bad, tagged = split_dropped(spark, checks, plan.df)
        if p.mode == "merge":  # on the rows the drop checks keep: they may drop bad keys
            check_merge_batch(spark, p, good, plan)
    batch = run.batch = Batch(batch_id=p.batch_id or f"fp-{files.fingerprint[:24]}", run_id=report.run_id,
                  input_fingerprint=files.fingerprint, config_fingerprint=fingerprint_config(p, checks),
                  input_files=files.paths, file_ids=files.ids, explicit_id=p.batch_id is not None,
                  track_files=p.source_files == "new", columns=list(df.columns), input_stamps=files.stamps,
                  input_pins=files.pins, dropped_rows=bad)
    report.batch_id, report.branch = batch.batch_id, batch.branch
    if not batch.track_files:  # (--source_files new matches its listing against every row)
        ledger.scope = LedgerScope(batch.batch_id, tuple(batch.file_ids),
                                   max([c.history_depth for c in checks], default=0))
    report.input_fingerprint, report.config_fingerprint = files.fingerprint, batch.config_fingerprint
    report.input_files, report.input_file_ids = batch.input_files, batch.file_ids
    report.inspect_sql = f"SELECT * FROM {t.sql} VERSION AS OF '{batch.branch}'"
    try:
        with timed(report, "prepare"):
            published = None
            if not plan.create:  # before any write: a clash with what main holds is bad input
                table = iceberg_table(spark, t)
                main = ref_id(table, "main")
                published = already_on_main(consumed_publishes(spark, t, ledger, run.history, table), batch)
                record_found(ledger)
                side_effect("audit branch retention", lambda: lift_age_limits(table))
                side_effect("audit branch upkeep",  # (not this batch's: this run may resume one)
                            lambda: drop_aged_branches(spark, p, t, table, p.branch_retention_days,
                                                       batch.batch_id))
            if published is not None:
                report.main_snapshot_before = main
                return settle_already_published(run, published, main)
            prepare_table(spark, p, t, plan)
            if plan.create or plan.enable_wap or plan.add_columns:
                table = iceberg_table(spark, t)
            report.table_uuid = str(table.uuid().toString())
            ledger.identify(report.table_uuid)
            report.main_snapshot_before = main = ref_id(table, "main")
        # (a drop check that reads a table split the batch against it as it is now: not resumed)
        staged = None if any(resplit(c) for c in checks) else resume(spark, p, t, batch, table, main)
        if staged is not None:
            staged.last_publish = newest_publish(table)
        dropped_counts = {}

        def quarantine_own():
            """This run's rows its drop checks failed, in the quarantine as its own: returns the
            count per check."""
            batch.quarantine_run = batch.run_id
            report.rows_dropped, counts, report.quarantine_table = write_quarantine(spark, t, bad, batch)
            batch.kept = good.count()  # from the cache
            report.rows_read, batch.quarantined = report.rows_dropped + batch.kept, report.rows_dropped
            return counts
        if bad is not None and staged is not None:  # resumed: the run that staged it quarantined its rows
            owner = quarantine_owner(staged.summary)
            found, counts = quarantined_by(spark, t, batch.batch_id, owner)
            expected = staged.summary.get(QUARANTINED_PROPERTY)
            if expected is not None and expected != str(found):
                # some are gone (another run's publish of the batch tidied them away, and was then
                # rolled back, say): publishing the snapshot would lose them
                log.info("snapshot %s names %s quarantined rows, %d are left: staging afresh",
                         staged.snapshot_id, expected, found)
                drop_branch(spark, t, batch.branch)
                staged = None
            else:
                batch.quarantine_run, batch.quarantined = owner, found
                report.rows_dropped, dropped_counts = found, counts
                report.quarantine_table = ".".join([t.catalog, quarantine_ref(t).ident])
        if bad is not None and staged is None:
            dropped_counts = quarantine_own()
        try:
            return write_audit_publish(run, good, staged, dropped_counts, quarantine_own)
        except BranchGone as e:
            return settle_branch_gone(run, e.mark)
    except UnauditedOnMain as e:
        side_effect("run ledger", lambda mark=e.mark: ledger.complete([mark]))  # the error names it either way
        raise
    finally:
        if tagged is not None:
            tagged.unpersist()


def check_source(spark, p, source, paths):
    """The batch as read is usable: its column names (and a CSV header) and every record parse."""
    check_columns(source, "--source_path", csv_header(spark, p, source, paths))
    check_source_records(spark, p, source)


def apply_transform(source):
    """The user's transform; what it raises, or a result with no columns, is bad input."""
    from pyspark.sql import DataFrame
    try:
        df = transform(source)
    except Exception as e:
        raise bad_input(f"transform: raised {type(e).__name__}: {first_line(e)}") from None
    if not isinstance(df, DataFrame):
        raise bad_input(f"transform: must return a DataFrame, returned {type(df).__name__}")
    if not df.columns:
        raise bad_input("transform: returned a DataFrame with no columns")
    check_columns(df, "transform")
    return df


MAX_COMMIT_CONFLICTS = 50  # commits lost to unrelated metadata changes; each is retried at once


def write_audit_publish(run, df, staged, dropped_counts, quarantine_own):
    """The one retry loop. Stage (unless resuming), audit, then do what the publish decision says:
    swap main, stop (already published), rebase the audited files on a moved main, or stage again.
    Only main moving counts against --max_publish_retries; a commit that lost to some other
    metadata change (another run's branch, say) is simply decided and tried again.
    Returns the exit code."""
    spark, p, t, report, batch, ledger = run.spark, run.p, run.t, run.report, run.batch, run.ledger
    audited, unknown_commit = False, False
    moves = conflicts = 0
    while True:
        metrics = None
        if staged is None:
            staged, metrics = stage(run, df)
            audited = False
        if not audited:
            audit_staged(run, df, staged, dropped_counts, metrics)
            audited = True
            fault_point("audit")
            if blocking_failures(report):  # its branch kept, as staged: nothing is published anyway
                return failed_unless_published(run, staged)
            check_input_unchanged(spark, t, batch, report)  # what was staged and audited is the batch's input
            if changes_nothing(staged) and not ((report.rows_dropped or p.mode == "merge") and p.publish):
                # no rows, or --publish false: consumes nothing, and leaves other runs' rows alone
                # (a merge's deletes are decided on main as it is at the publish)
                return nothing_to_publish(run, staged.parent_id)
            if not p.publish:
                report.status, report.main_snapshot_after = Status.STAGED, staged.parent_id
                log.info("audit passed; --publish false, so branch %s is kept:\n  %s", batch.branch,
                         report.inspect_sql)
                return EXIT_OK
        with timed(report, "publish"):
            try:
                decision = decide_publish(run, staged)
            except InputTaken:
                abandon_batch(run)
                raise
            # a commit of unknown outcome that the decision does not find on main failed after all
            unknown_commit = unknown_commit and decision.move is Move.ALREADY_PUBLISHED
            fault_point("decided")
            try:
                if decision.move is Move.PUBLISH:
                    swap_main(spark, batch, decision, staged.snapshot_id, ledger)
                    fault_point("publish")
                    tidy_quarantine(spark, t, report, batch)
                    report.status, report.main_snapshot_after = Status.PUBLISHED, staged.snapshot_id
                    log.info("published batch %s to %s (snapshot %s)", batch.batch_id, report.table,
                             staged.snapshot_id)
                    return EXIT_OK
                if decision.move is Move.NOTHING:
                    return nothing_to_publish(run, decision.main)
                if decision.move is Move.ALREADY_PUBLISHED:
                    return settle_already_published(run, decision.found, decision.main, staged, unknown_commit)
                if decision.move is Move.QUARANTINE:
                    if batch.quarantine_run != batch.run_id:
                        # a taken-up snapshot's rows are its run's, which may still discard them once
                        # this run's branch is gone (or, killed, never tidy them): this run consumes
                        # the batch with its own, the same rows by the same checks, and removes those
                        expected, its_drops = batch.quarantined, dropped_counts
                        dropped_counts = quarantine_own()
                        if report.rows_dropped != expected or dropped_counts != its_drops or batch.kept:
                            # its own drop checks disagree with that snapshot's, which the verdicts
                            # judged (a check on the clock, a transform that is not deterministic),
                            # or it keeps rows, which may change what that snapshot's did not: it
                            # stages what it keeps, and its drops are judged
                            log.info("this run's drop checks drop %d rows and keep %d, the taken-up "
                                     "snapshot's drop %s and change nothing: staging afresh",
                                     report.rows_dropped, batch.kept, expected)
                            staged = None
                            continue
                    # its input counts as consumed, so neither a rerun nor --source_files new reads
                    # and quarantines it again
                    quarantine_whole(spark, batch, decision, ledger, staged.snapshot_id)
                    fault_point("quarantined")
                    tidy_quarantine(spark, t, report, batch)
                    report.status, report.main_snapshot_after = Status.QUARANTINED, decision.main
                    log.warning("every row of batch %s was quarantined; nothing to publish", batch.batch_id)
                    return EXIT_OK
                if moves == p.max_publish_retries:
                    raise WapError(f"publish: main kept moving; gave up after {moves} retries. The "
                                   f"audited batch is kept on branch {batch.branch}")
                moves += 1
                report.rebases += 1
                time.sleep(min(30.0, 0.5 * 2 ** (moves - 1)) * random.uniform(0.5, 1.5))
                if decision.move is Move.REBASE:
                    log.info("main moved to %s while this batch was staged: rebasing the audited "
                             "files on it (retry %d)", decision.main, moves)
                    staged = rebase(spark, t, batch, staged, decision.main, int(time.time() * 1000))
                    report.staged_snapshot, report.main_snapshot_before = staged.snapshot_id, decision.main
                    recheck_state(run, staged)
                    if blocking_failures(report):
                        return failed_unless_published(run, staged)
                else:
                    log.info("%s while this batch was staged: staging it again (retry %d)",
                             f"main moved to {decision.main}" if decision.main != staged.parent_id
                             else "the table's schema changed", moves)
                    staged = None
                    if batch.quarantine_run != batch.run_id:
                        # the taken-up snapshot's dropped rows are its run's, kept for it by this
                        # run's branch alone, which the new stage drops first: that run may
                        # discard them then, so this run quarantines its own
                        dropped_counts = quarantine_own()
            except CommitConflict as e:
                unknown_commit = unknown_commit or str(e) == "CommitStateUnknownException"
                conflicts += 1
                if conflicts > MAX_COMMIT_CONFLICTS:
                    raise WapError(f"publish: {conflicts} commits in a row lost to other changes of "
                                   f"the table; the audited batch is kept on branch {batch.branch}") from None
                log.info("the table changed under the commit (%s); deciding again", e)
                time.sleep(random.uniform(0.05, 0.25) * min(conflicts, 8))


def abandon_batch(run):
    """Another run consumed this batch's input meanwhile: nothing is left to inspect or publish,
    so no branch and no stray quarantined rows stay behind."""
    spark, t, report, batch = run.spark, run.t, run.report, run.batch
    try:
        drop_branch(spark, t, batch.branch)
    except Exception as e:  # kept, and with it the rows it quarantined
        warn_failed("branch clean-up", e)
        return
    discard_own_quarantine(spark, t, batch, report)
    if batch.quarantine_run != batch.run_id and report.quarantine_table:
        # a taken-up snapshot's rows: no run can ever consume this batch now
        side_effect("quarantine clean-up", lambda: discard_quarantine(spark, t, batch, report, batch.quarantine_run))


def nothing_to_publish(run, main):
    """The staged snapshot would change nothing: the run consumes nothing (a rerun may load the
    batch again) and drops its branch; `main`: main's snapshot, unmoved."""
    report = run.report
    report.status, report.main_snapshot_after = Status.NOTHING_TO_PUBLISH, main
    drop_branch(run.spark, run.t, run.batch.branch)
    log.log(logging.WARNING if report.rows_dropped else logging.INFO, "the batch %s; nothing to publish",
            "was quarantined whole" if report.rows_dropped else "changes nothing on main")
    return EXIT_OK


def side_effect(what, action):
    """Work after the publish that must never change its outcome: logged if it fails."""
    try:
        action()
    except Exception as e:
        warn_failed(what, e)


def warn_failed(what, error):
    log.warning("%s failed (the run's outcome stands): %s", what, first_line(error))


def settle_already_published(run, found, main, staged=None, unknown_commit=False):
    """The batch is on main (or its rows were all quarantined by the run that consumed it). If this
    run's own commit had an unknown outcome and main holds this run's snapshot (or the table's
    last-quarantine property names this run's consumption), it was this run's; otherwise another run
    consumed it, and if the ledger lacks that, this run records it (the consuming run died after
    its commit). This run's branch and quarantined rows go."""
    spark, t, report, batch = run.spark, run.t, run.report, run.batch
    quarantined = found.status == "quarantined"  # consumed with every row quarantined: no snapshot
    if found.snapshot_id is not None:
        report.staged_snapshot = found.snapshot_id
    if staged is not None and unknown_commit and (
            found.run_id == batch.run_id if quarantined else found.snapshot_id == staged.snapshot_id
            and getattr(last_publish(iceberg_table(spark, t)), "run_id", None) == batch.run_id):
        # (the snapshot is this run's; the commit that published it, if its run is the one the
        # last-publish property names: another run that took the snapshot up may have)
        report.status = Status.QUARANTINED if quarantined else Status.PUBLISHED  # this run's own commit
        report.main_snapshot_after = main if quarantined else found.snapshot_id
        tidy_quarantine(spark, t, report, batch)
        return EXIT_OK
    report.status, report.main_snapshot_after = Status.ALREADY_PUBLISHED, main
    if staged is not None and found.snapshot_id == staged.snapshot_id:
        log.info("batch %s: another run published this run's staged snapshot %s", batch.batch_id,
                 found.snapshot_id)  # its quarantined rows went with it; its publisher records it
        side_effect("branch clean-up",  # made after that publish, if this run resumed the snapshot
                    lambda: drop_branch(spark, t, batch.branch))
        return EXIT_OK
    side_effect("run ledger", lambda: run.ledger.complete([found]))
    if staged is not None:
        side_effect("branch clean-up", lambda: drop_branch(spark, t, batch.branch))
        discard_own_quarantine(spark, t, batch, report)  # another run may have published it, rebased
    log.info("batch %s was %s by run %s (snapshot %s); main is untouched by this run", batch.batch_id,
             consumed_as(found), found.run_id, found.snapshot_id)
    return EXIT_OK


def raise_if_input_changed(spark, t, batch, report, error):
    """A write that failed on what it read (a header or a row that does not fit) because a source
    file changed under the run fails as that change, not as bad input in the file; the write's
    own error is logged, whatever it was."""
    try:
        changed = changed_files(spark, batch)
    except Exception as e:  # the recheck itself failed: the write's own error stands
        log.info("source files not rechecked after the failed write (%s)", first_line(e))
        return
    if changed:
        log.warning("the write failed (%s), and %s changed while the run read it", first_line(error), changed[0])
        discard_own_quarantine(spark, t, batch, report)
        raise changed_input(changed[0]) from error


def stage(run, df):
    """Write the batch to a branch of this run's own, made at main as it is now; the guard proves
    the write landed there. Returns the staged snapshot_info and the metrics observed on the write."""
    spark, p, t, report, batch = run.spark, run.p, run.t, run.report, run.batch
    with timed(report, "write"):
        fault_point("stage")
        table = iceberg_table(spark, t)
        if ref_id(table, batch.branch) is not None:  # a restage replaces this run's own earlier attempt
            drop_branch(spark, t, batch.branch)
            table = iceberg_table(spark, t)
        refuse_changed_table(spark, t, table, p, df)
        written = table.schema().schemaId()  # the schema the write resolves the batch's columns by
        spec_id = table.spec().specId()  # the spec an overwrite of partitions writes by
        main = ref_id(table, "main")
        newest = newest_publish(table)  # main's, as this batch is staged on it (history_behind)
        if main is not None:  # on an empty table the write itself creates the branch
            create_branch(spark, t, batch.branch, table.snapshot(main))
        since_ms = int(time.time() * 1000)
        fault_point("before_write")
        # observed in the write unless a condition holds a subquery (Spark observes none): then scanned
        observe = p.audit_source == "write" and not any(c.reads_tables for c in leaf_checks(run.checks))
        aggs = row_metrics(run.checks) if observe else None
        try:
            observation = write_branch(spark, p, t, df, batch, aggs, spec_id)
        except Exception as e:
            drop_branch(spark, t, batch.branch)  # it holds nothing of this run's: don't leave it
            raise_if_input_changed(spark, t, batch, report, e)
            raise
        fault_point("write")
        staged = guard(spark, t, batch, since_ms, branch_made=main is not None)
        staged.last_publish, staged.schema_id = newest, written
        if main is None:  # the write made the branch: it gets the retention create_branch gives
            side_effect("audit branch retention",  # (else the next run's lift_age_limits gives it)
                        lambda: create_branch(spark, t, batch.branch, staged.snapshot_id, made=True))
    return staged, observed_metrics(staged.summary, observation)


def refuse_changed_table(spark, t, table, p, df):
    """What the plan made sure of at validation, as the table is just before the write: someone
    may have changed it since. Without write.wap.enabled Iceberg writes to main (the guard could
    then only try to take the rows off again), and an unpartitioned table would be replaced whole
    by an overwrite of the batch's partitions."""
    if not wap_enabled(table):
        raise WapError(f"write: write.wap.enabled is not true on {t.sql} (turned off, or the table "
                       "made elsewhere, during this run); without it the rows would go straight to "
                       "main. Nothing written to the table or a branch; a rerun sets it again")
    refusal = overwrite_refusal(spark, p, t, table, df)
    if refusal == UNPARTITIONED_OVERWRITE:
        raise WapError(f"write: {t.sql} was made unpartitioned during this run; --mode "
                       "overwrite_partitions would no longer replace only the batch's partitions. "
                       "Nothing written to the table or a branch")
    if refusal:
        raise WapError(f"write: {t.sql}'s partition spec changed during this run. {refusal}. Nothing "
                       "written to the table or a branch")


def audit_staged(run, batch_df, staged, dropped_counts, metrics):
    """Every check against exactly the snapshot that will be published."""
    spark, p, t, checks, report, ledger = run.spark, run.p, run.t, run.checks, run.report, run.ledger
    restaged, report.checks = bool(report.checks), []  # an earlier attempt's verdicts never stand
    report.staged_snapshot, report.main_snapshot_before = staged.snapshot_id, staged.parent_id
    with timed(report, "audit"):
        if restaged or history_behind(checks, staged, ledger):
            ledger.forget()  # main moved: it may hold publishes the history checks' rows lack
            await_history(checks, staged, ledger)
        leave_out_rolled_back(spark, t, checks, ledger, run.history, staged.parent_id)
        staged_df = read_staged(spark, t, staged.snapshot_id, staged.parent_id, p.mode,
                                batch_df, p, staged.summary)
        whole = read_snapshot(spark, t, staged.snapshot_id) if p.mode != "append" else None
        a = Audit(spark, t, staged_df, staged.parent_id, ledger, whole_table=whole, staged_id=staged.snapshot_id,
                  files=run.batch.input_pins, dropped=dropped_counts or {}, rows_dropped=report.rows_dropped or 0,
                  rows_read=report.rows_read, quarantined=own_quarantine(run.batch), batch_columns=run.batch.columns)
        report.checks, report.rows_written = audit(a, checks, staged.snapshot_id if p.mode != "merge" else None,
                                                   metrics)
        report.metrics = run_metrics(report)
        report.audit_source = "write" if metrics is not None else "branch"
        if p.mode == "merge":  # staged by this run or resumed: the batch against the staged parent
            counts = merge_counts(spark, p, t, batch_df, staged.parent_id)
            report.rows_inserted, report.rows_updated, report.rows_deleted = (
                counts["rows_inserted"], counts["rows_updated"], counts["rows_deleted"])
        else:
            report.rows_inserted = int(staged.summary.get("added-records", 0))
            report.rows_deleted = int(staged.summary.get("deleted-records", 0))


HISTORY_WAIT_SECONDS = 30  # how long after a publish its run's ledger row is waited for


def await_history(checks, staged, ledger):
    """The ledger's rows hold the table's last publish (as the batch was staged or rebased) once
    its run records it, just after its commit: a blocking history check waits for that row
    (re-reading the ledger each second) until HISTORY_WAIT_SECONDS after that commit, rather than
    compare without it. So a run that died before its row costs a wait only while it is fresh. A
    first publish creates the ledger with its row: until then the rows read are none."""
    if not any(c.reads_history and c.action not in ("warn", RECORD) for c in checks):
        return
    last, published_ms = unrecorded_publish(staged, ledger) or (None, None)
    if published_ms is None:
        return
    deadline = min(time.time(), published_ms / 1000) + HISTORY_WAIT_SECONDS  # its clock may be ahead
    while unrecorded_publish(staged, ledger) is not None:
        if time.time() >= deadline:
            log.warning("run %s published snapshot %s but has not recorded it in the run ledger: the "
                        "checks that compare with earlier publishes do so without it", last.run_id,
                        last.snapshot_id)
            return
        time.sleep(1)
        ledger.forget()


def measured_alone(c, result):
    """True if a rule's value is the batch's own, a statistic of its rows' values or a fact of its
    source files, and only its dynamic condition reads state: that value holds after a rebase."""
    own = c.check == "file_uniqueness" or c.check == "stat" and stat_of(c).columns != 0
    return own and c.reads_metrics and not c.reads_tables and is_number(result.get("observed"))


def rejudged(c, result, ledger):
    """A rule's result with its dynamic condition evaluated again, over the history as it is now."""
    checked, history = with_history(c, ledger)
    detail = outside_bounds(checked, result["observed"])
    return dict(result, passed=detail is None or c.action == RECORD, detail=detail, history=history,
                expected=None if checked.condition is None else str(checked.condition))


def leave_out_rolled_back(spark, t, checks, ledger, history, main):
    """History checks compare with the publishes `main` (the staged snapshot's parent) holds: which
    recorded publishes it no longer holds (rolled back) is decided again if that was decided for
    another main (a rollback, or its undo, since) or before the ledger's rows were read again (they
    may hold a publish made and rolled back since). Not at all in a run where neither happened."""
    if not any(c.reads_history for c in checks) or ledger.gone_holds(main):
        return
    if main is None:  # an empty main holds no publish (a first run's; a table replaced): no look-up
        ledger.decided_gone(set(ledger.index().published_runs), None,
                            lambda: leave_out_rolled_back(spark, t, checks, ledger, history, None))
    else:
        consumed_publishes(spark, t, ledger, history, head=main)


def history_behind(checks, staged, ledger):
    """True if a check compares with earlier publishes and the ledger's rows (read as this run
    began) lack the table's last publish as the batch was staged: another run published and
    recorded it meanwhile. So the rows are read again only then."""
    return any(c.reads_history for c in checks) and unrecorded_publish(staged, ledger) is not None


def unrecorded_publish(staged, ledger):
    """The table's last publish as the batch was staged or rebased on it, (its Mark, when main
    moved to it), if the ledger's rows lack its run; else None. Read off the table property the
    stage loaded (it outlives the maintenance commits main may have had since): no look-up."""
    last = staged.last_publish
    return None if last is None or last[0].run_id in ledger.index().runs else last


def recheck_state(run, staged):
    """After a rebase the rows are the audited ones, but main around them (and what else a check
    reads: another table, the ledger's history) changed: every rule that reads more than the rows
    is judged again. One that measures the batch alone under a dynamic condition keeps its value
    (rejudged); the others that read state run again, on the same batch. A composite's other rules
    keep their verdicts: their rows and files are the audited ones (a source file replaced since
    could not be read again as the batch read it)."""
    spark, t, report, ledger = run.spark, run.t, run.report, run.ledger
    recheck = [c for c in run.checks if c.reads_state and (c.action != "drop" or resplit(c))]
    ledger.forget()  # the history checks read the ledger as it is now
    if recheck:
        await_history(recheck, staged, ledger)
        leave_out_rolled_back(spark, t, recheck, ledger, run.history, staged.parent_id)
        verdicts, report.checks = report.checks, []  # none stands for the rebased snapshot until rechecked
        earlier = {r["name"]: r for r in nested_results(verdicts)}
        stale = [c for c in leaf_checks(recheck) if c.reads_state]
        kept = {c.name: rejudged(c, earlier[c.name], ledger) for c in stale if measured_alone(c, earlier[c.name])}
        stale = [c for c in stale if c.name not in kept]
        results, total = [], report.rows_written
        if stale:
            staged_df = read_staged(spark, t, staged.snapshot_id, staged.parent_id, summary=staged.summary)
            dropped = {r["name"]: r["failing_rows"] for r in nested_results(verdicts) if r["action"] == "drop"}
            results, total = audit(Audit(spark, t, staged_df, staged.parent_id, ledger, staged_id=staged.snapshot_id,
                                         files=run.batch.input_pins, dropped=dropped,
                                         rows_dropped=report.rows_dropped or 0, rows_read=report.rows_read,
                                         quarantined=own_quarantine(run.batch), batch_columns=run.batch.columns),
                                   stale, staged.snapshot_id)
        rules = {**earlier, **kept, **{r["name"]: r for r in results}}
        by_name = {c.name: combined_result(c, rules, total) for c in recheck}
        report.checks = [by_name.get(r["name"], r) for r in verdicts]
        report.metrics = run_metrics(report)


def failed_unless_published(run, staged):
    """A failed audit, unless another run published the batch after this run's check before the
    write (this run's `unique` then fails on the batch's own rows, say): that publish settles this
    run as it would have settled it before the write, whatever its checks, with a warning naming
    the checks that failed."""
    try:
        decision = decide_publish(run, staged)
    except UnauditedOnMain:
        raise
    except Exception as e:  # the audit's verdict stands
        log.info("whether the batch reached main meanwhile is unknown (%s)", first_line(e))
        return audit_failed(run.report)
    if decision.move is Move.ALREADY_PUBLISHED:
        found = decision.found
        log.warning("the audit failed (%s), but run %s published this batch meanwhile (snapshot %s): "
                    "those checks failed against the batch as main holds it now",
                    ", ".join(blocking_failures(run.report)), found.run_id, found.snapshot_id)
        return settle_already_published(run, found, decision.main, staged)
    return audit_failed(run.report)


def audit_failed(report):
    report.status = Status.AUDIT_FAILED
    report.main_snapshot_after = report.main_snapshot_before
    log.error("audit failed (%s): main is unchanged; branch %s kept. Inspect it with:\n  %s",
              ", ".join(blocking_failures(report)), report.branch, report.inspect_sql)
    return EXIT_AUDIT_FAILED


def resume(spark, p, t, batch, table, main):
    """An earlier run of this batch (one that crashed) staged the same input with the same config
    on today's main: audit that snapshot instead of writing again, on a branch of this run's own
    (the earlier branch is left alone; the publish drops every branch of the batch).
    Returns its snapshot_info, or None: also when its run may have discarded it meanwhile."""
    for name, ref in java_items(table.refs()):
        if not str(name).startswith(branch_prefix(batch.batch_id)) or not ref.isBranch():
            continue
        info = snapshot_info(spark, t, ref.snapshotId(), table)
        summary = info.summary
        if (summary.get(BATCH_PROPERTY) == batch.batch_id
                and summary.get(FINGERPRINT_PROPERTY) == batch.input_fingerprint
                and summary.get(CONFIG_PROPERTY) == batch.config_fingerprint
                and info.parent_id == main):
            fault_point("resume")
            create_branch(spark, t, batch.branch, table.snapshot(ref.snapshotId()))
            fault_point("resumed")
            if not kept_by_its_run(spark, t, batch, info):
                drop_branch(spark, t, batch.branch)
                log.info("snapshot %s may have been discarded by its run; staging afresh", info.snapshot_id)
                return None
            log.info("resuming batch %s from snapshot %s staged by run %s", batch.batch_id,
                     info.snapshot_id, summary.get(RUN_PROPERTY))
            return info
    return None


def kept_by_its_run(spark, t, batch, info):
    """True if the run whose quarantined rows go with a snapshot can no longer discard them, now
    that this run's branch holds it: its own branch is still there, or the snapshot is on main.
    A run whose files changed drops its branch and then discards its rows unless some ref holds
    its snapshot; once its branch is gone, it may have looked before this run's branch was made
    (whichever branch of the batch this run found there)."""
    table = iceberg_table(spark, t)
    main = ref_id(table, "main")
    return (ref_id(table, run_branch(batch.batch_id, quarantine_owner(info.summary))) is not None
            or main is not None and java(spark.sparkContext._jvm, "org.apache.iceberg.util.SnapshotUtil")
            .isAncestorOf(table, main, info.snapshot_id))


def main():
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    code, _ = run()
    sys.exit(code)


if __name__ == "__main__":
    main()
