#!/usr/bin/env python3
"""Validate modelprof's JSON outputs against their schemas (docs/schema/).

  schema_check.py DIR_OR_FILE... [KIND:FILE...]

Each file's schema comes from its name: a name that starts with
`profile`, `trace_diff`, `trace`, `train`, `plan` or `chrome_trace` is checked against
docs/schema/NAME.schema.json. The test suite writes every JSON the command
line gives it into a folder (MP_JSON_DUMP, tests/tcli.c) and this checks
them all; exits 1 on the first file that does not validate, naming the file,
the field and the rule.

  schema_check.py --self-test DIR_OR_FILE...

The schemas must catch the old convention: for one valid output of each kind
found, every mutation below (a time in microseconds, a rate in TFLOPS, a
share in percent, a number field turned into an object, a finding with a
"rank", an unknown cost written as 0, a known one made null) must make it
fail; exits 1 naming the mutation that got through. A profile with unknown
costs (a figure null) is mutated too, besides the output with the most kinds
of field."""
import json
import os
import sys

import jsonschema

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KINDS = ("chrome_trace", "profile", "trace_diff", "trace", "train", "plan", "digest")


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


def _first(doc, pred, path=()):
    """The path of the first member (depth-first) for which pred(key, value)."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            if pred(k, v):
                return path + (k,)
        for k, v in doc.items():
            r = _first(v, pred, path + (k,))
            if r:
                return r
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            r = _first(v, pred, path + (i,))
            if r:
                return r
    return None


def _at(doc, path):
    for p in path:
        doc = doc[p]
    return doc


def _mutations(doc):
    """(name, mutated copy) pairs, each breaking the convention once."""
    import copy
    out = []
    num = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
    for suffix, what in (("_s", "seconds"), ("flops_per_s", "rate"), ("fraction", "share")):
        path = _first(doc, lambda k, v, suffix=suffix: k.endswith(suffix) and num(v))
        if not path:
            continue
        key = path[-1]
        old = {"_s": key[:-2] + "_us", "flops_per_s": key.replace("flops_per_s", "tflops"),
               "fraction": key.replace("fraction", "percent")}[suffix]
        d = copy.deepcopy(doc)
        parent = _at(d, path[:-1])
        parent[old] = parent.pop(key) * 1e6
        out.append(("%s %s renamed %s" % (what, "/".join(map(str, path)), old), d))
        d = copy.deepcopy(doc)
        _at(d, path[:-1])[old] = _at(doc, path) * 1e6
        out.append(("%s %s beside %s" % (what, old, "/".join(map(str, path))), d))
        d = copy.deepcopy(doc)
        _at(d, path[:-1])[key] = {"median_" + key: 1.0}
        out.append(("%s %s made an object" % (what, "/".join(map(str, path))), d))
    # a profile's cost figures: null exactly where unknown (docs/JSON.md,
    # "Unknown figures"); the old convention wrote 0
    figs = ("macs", "flops", "bytes_read", "bytes_written", "act_bytes")
    path = _first(doc, lambda k, v: k in figs and v is None)
    if path:
        d = copy.deepcopy(doc)
        _at(d, path[:-1])[path[-1]] = 0
        out.append(("an unknown figure %s written as 0" % "/".join(map(str, path)), d))
    path = _first(doc, lambda k, v: k in figs and num(v)) if "total" in doc else None
    if path:
        d = copy.deepcopy(doc)
        _at(d, path[:-1])[path[-1]] = None
        out.append(("a known figure %s made null" % "/".join(map(str, path)), d))
    if isinstance(doc.get("findings"), list) and doc["findings"]:
        d = copy.deepcopy(doc)
        d["findings"][0]["rank"] = 1
        out.append(("a finding with a rank", d))
    return out


def self_test(argv):
    files = []
    for a in argv:
        if os.path.isdir(a):
            files += sorted(os.path.join(a, f) for f in os.listdir(a) if f.endswith(".json"))
        else:
            files.append(a)
    num = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
    best = {}   # kind -> (score, file, doc): the output with the most kinds of field
    unknown = {}   # kind -> (file, doc): a profile with an unknown figure (null)
    for f in files:
        kind = kind_of(f)
        if kind is None or os.path.getsize(f.split(":", 1)[1] if f.startswith(kind + ":") else f) > 4 << 20:
            continue
        with open(f.split(":", 1)[1] if f.startswith(kind + ":") else f, encoding="utf-8") as fh:
            doc = json.load(fh)
        score = sum(1 for suf in ("_s", "flops_per_s", "fraction")
                    if _first(doc, lambda k, v, suf=suf: k.endswith(suf) and num(v)))
        score += bool(isinstance(doc, dict) and doc.get("findings"))
        if score > best.get(kind, (-1,))[0] and schema_of(kind).is_valid(doc):
            best[kind] = (score, f, doc)
        if (kind not in unknown and isinstance(doc, dict) and isinstance(doc.get("total"), dict)
                and doc["total"].get("macs", 0) is None and schema_of(kind).is_valid(doc)):
            unknown[kind] = (f, doc)
    done, bad = {}, 0
    todo = sorted(best.items()) + [(k, (0, f, d)) for k, (f, d) in sorted(unknown.items())
                                   if best.get(k, (0, None))[1] != f]
    for kind, (_, f, doc) in todo:
        muts = _mutations(doc) if isinstance(doc, dict) else []
        done[kind] = done.get(kind, 0) + len(muts)
        for name, d in muts:
            if schema_of(kind).is_valid(d):
                print("%s schema: accepts %s (%s)" % (kind, name, f))
                bad += 1
    print("schema self-test: %s; %d mutations got through"
          % (", ".join("%s %d mutations" % kv for kv in sorted(done.items())) or "nothing", bad))
    return 1 if bad or not done else 0


def main(argv):
    if argv and argv[0] == "--self-test":
        return self_test(argv[1:])
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
