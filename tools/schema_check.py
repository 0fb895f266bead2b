#!/usr/bin/env python3
"""Validate modelprof's JSON outputs against their schemas (docs/schema/).

  schema_check.py DIR_OR_FILE... [KIND:FILE...]

Each file's schema comes from its name: a name that starts with
`profile`, `trace`, `train`, `plan` or `chrome_trace` is checked against
docs/schema/NAME.schema.json. The test suite writes every JSON the command
line gives it into a folder (MP_JSON_DUMP, tests/tcli.c) and this checks
them all; exits 1 on the first file that does not validate, naming the file,
the field and the rule."""
import json
import os
import sys

import jsonschema

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KINDS = ("chrome_trace", "profile", "trace", "train", "plan")


def schema_of(kind, cache={}):
    if kind not in cache:
        path = os.path.join(ROOT, "docs", "schema", kind + ".schema.json")
        with open(path, encoding="utf-8") as f:
            s = json.load(f)
        jsonschema.Draft202012Validator.check_schema(s)
        cache[kind] = jsonschema.Draft202012Validator(s)
    return cache[kind]


def kind_of(path):
    if ":" in path and path.split(":", 1)[0] in KINDS:   # KIND:PATH names the schema
        return path.split(":", 1)[0]
    base = os.path.basename(path)
    for k in KINDS:
        if base.startswith(k):
            return k
    return None


def check(path):
    kind = kind_of(path)
    if kind is None:
        return None
    with open(path.split(":", 1)[1] if path.startswith(kind + ":") else path,
              encoding="utf-8") as f:
        doc = json.load(f)
    errs = sorted(schema_of(kind).iter_errors(doc), key=lambda e: list(e.absolute_path))
    for e in errs[:5]:
        where = "/".join(str(p) for p in e.absolute_path) or "(top)"
        print("%s: %s schema: at %s: %s" % (path, kind, where, e.message[:300]))
    return not errs


def main(argv):
    files = []
    for a in argv:
        if os.path.isdir(a):
            files += sorted(os.path.join(a, f) for f in os.listdir(a) if f.endswith(".json"))
        else:
            files.append(a)
    n, by, bad = 0, {}, 0
    for f in files:
        r = check(f)
        if r is None:
            continue
        n += 1
        by[kind_of(f)] = by.get(kind_of(f), 0) + 1
        bad += not r
    print("schema check: %d JSON outputs (%s), %d do not validate"
          % (n, ", ".join("%s %d" % kv for kv in sorted(by.items())), bad))
    return 1 if bad or n == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
