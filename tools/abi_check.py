#!/usr/bin/python3
"""The Python package's view of the C API against include/modelprof.h: one
source of truth, checked at build time (`make`) and in the tests.

  - every struct of python/modelprof/_abi.py (STRUCTS) has the fields of the
    header's struct of that name, in order, with matching types; its size and
    each field's offset are those the C compiler gives (a program compiled
    against the header prints them);
  - every prototype of _abi.py (FUNCTIONS) matches the header's declaration
    (return type, argument count and types);
  - every function the header declares is marked MP_API, and the shared
    library (--lib) exports exactly those functions.

  tools/abi_check.py [--cc CC] [--lib build/libmodelprof.so] [--header H]
  tools/abi_check.py --self-test    (plants mismatches; each must be found)

Prints the problems and exits 1 when there are any."""
import argparse
import ctypes
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(ROOT, "python", "modelprof"))
import _abi  # noqa: E402  (the mirrors only: it loads no library)


# ---- the header, parsed ----
def strip(text):
    """The header without comments and preprocessor lines (macros and their
    continuation lines)."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    out, cont = [], False
    for line in text.split("\n"):
        if cont or line.lstrip().startswith("#"):
            cont = line.rstrip().endswith("\\")
            continue
        out.append(line)
    return "\n".join(out)


def split_decl(decl):
    """'const char *name' -> ('char', 1, 'name'); 'int' -> ('int', 0, '')."""
    decl = re.sub(r"\bconst\b", " ", decl)
    stars = decl.count("*")
    words = decl.replace("*", " ").split()
    if len(words) >= 2:
        return " ".join(words[:-1]), stars, words[-1]
    return " ".join(words), stars, ""


class Header:
    def __init__(self, text):
        s = strip(text)
        self.enums = set()
        for m in re.finditer(r"typedef\s+enum\s+\w*\s*\{.*?\}\s*(\w+)\s*;", s, re.S):
            self.enums.add(m.group(1))
        self.structs = {}   # name -> [(field, base, stars)]
        for m in re.finditer(r"typedef\s+struct\s+\w*\s*\{(.*?)\}\s*(\w+)\s*;", s, re.S):
            fields = []
            for decl in m.group(1).split(";"):
                decl = decl.strip()
                if not decl:
                    continue
                parts = decl.split(",")
                base, stars, name = split_decl(parts[0])
                fields.append((name, base, stars))
                for more in parts[1:]:
                    fields.append((more.replace("*", "").strip(), base, stars + more.count("*")))
            self.structs[m.group(2)] = fields
        self.opaque = set(m.group(2) for m in
                          re.finditer(r"typedef\s+struct\s+(\w+)\s+(\w+)\s*;", s))
        # declarations: what is left outside the typedefs, split at ';'
        rest = re.sub(r"typedef\s+(struct|enum)\s+\w*\s*\{.*?\}\s*\w+\s*;", " ", s, flags=re.S)
        rest = re.sub(r"typedef[^;]*;", " ", rest)
        rest = re.sub(r'extern\s+"C"\s*\{|\}', " ", rest)
        self.functions = {}   # name -> (ret (base, stars), [(base, stars)], exported)
        for stmt in rest.split(";"):
            stmt = " ".join(stmt.split())
            m = re.match(r"^(.*?)\b(mp_\w+)\s*\((.*)\)$", stmt)
            if not m:
                continue
            ret, name, params = m.group(1), m.group(2), m.group(3)
            exported = bool(re.search(r"\bMP_API\b", ret))
            ret = re.sub(r"\bMP_API\b", " ", ret)
            rb, rs, _ = split_decl(ret + " x")
            args = []
            if params.strip() not in ("", "void"):
                for p in params.split(","):
                    b, st, _ = split_decl(p)
                    args.append((b, st))
            self.functions[name] = ((rb, rs), args, exported)


# ---- C types against ctypes ----
C = ctypes
SCALARS = {"int": C.c_int, "int64_t": C.c_int64, "uint64_t": C.c_uint64, "size_t": C.c_size_t,
           "double": C.c_double, "uint32_t": C.c_uint32, "int32_t": C.c_int32, "bool": C.c_bool,
           "float": C.c_float, "mp_status": C.c_int}
MIRRORS = {cls.C_NAME: cls for cls in _abi.STRUCTS}


def allowed(h, base, stars):
    """The ctypes types that stand for a C type (None: void)."""
    if stars == 0:
        if base == "void":
            return [None]
        if base in h.enums:
            return [C.c_int]
        return [SCALARS[base]] if base in SCALARS else []
    if stars == 1:
        if base == "char":
            return [C.c_char_p]
        if base == "void":
            return [C.c_void_p, C.c_char_p]
        if base in h.opaque or base == "FILE":
            return [C.c_void_p]
        if base in h.structs:
            return [C.POINTER(MIRRORS[base])] if base in MIRRORS else []
        if base in SCALARS:
            return [C.POINTER(SCALARS[base])]
        if base in h.enums:
            return [C.POINTER(C.c_int)]
        return []
    return [C.POINTER(C.c_void_p), C.POINTER(C.c_char_p)]


def cname(base, stars):
    return base + " " + "*" * stars if stars else base


def tname(t):
    return "None" if t is None else getattr(t, "__name__", repr(t))


def check_structs(h, problems):
    for cls in _abi.STRUCTS:
        want = h.structs.get(cls.C_NAME)
        if want is None:
            problems.append("%s: no struct %s in the header" % (cls.__name__, cls.C_NAME))
            continue
        have = [(f[0], f[1]) for f in cls._fields_]
        names_c = [f[0] for f in want]
        names_py = [f[0] for f in have]
        if names_c != names_py:
            problems.append("%s: fields %s, the header's %s: %s" % (
                cls.__name__, names_py, cls.C_NAME, names_c))
            continue
        for (name, base, stars), (_, t) in zip(want, have):
            ok = allowed(h, base, stars)
            if t not in ok:
                problems.append("%s.%s: %s, the header's %s (%s)" % (
                    cls.__name__, name, tname(t), cname(base, stars),
                    " or ".join(tname(x) for x in ok) or "no ctypes rule"))


def check_functions(h, problems):
    for name, (restype, argtypes) in sorted(_abi.FUNCTIONS.items()):
        if name not in h.functions:
            problems.append("%s: not declared in the header" % name)
            continue
        (rb, rs), args, _ = h.functions[name]
        if restype not in allowed(h, rb, rs):
            problems.append("%s: returns %s, the header's %s" % (name, tname(restype),
                                                                cname(rb, rs)))
        if len(argtypes) != len(args):
            problems.append("%s: %d arguments, the header's %d" % (name, len(argtypes), len(args)))
            continue
        for i, (t, (b, st)) in enumerate(zip(argtypes, args)):
            if t not in allowed(h, b, st):
                problems.append("%s argument %d: %s, the header's %s" % (name, i + 1, tname(t),
                                                                         cname(b, st)))
    for name, (_, _, exported) in sorted(h.functions.items()):
        if not exported:
            problems.append("%s: declared in the header without MP_API (the shared library "
                            "would not export it)" % name)


def check_layout(header_dir, cc, problems):
    """Sizes and offsets as the C compiler lays the structs out."""
    lines = ['#include <stddef.h>', '#include <stdio.h>', '#include "modelprof.h"',
             "int main(void) {"]
    for cls in _abi.STRUCTS:
        lines.append('    printf("%s %%zu\\n", sizeof(%s));' % (cls.C_NAME, cls.C_NAME))
        for f in cls._fields_:
            lines.append('    printf("%s.%s %%zu\\n", offsetof(%s, %s));'
                         % (cls.C_NAME, f[0], cls.C_NAME, f[0]))
    lines += ["    return 0;", "}"]
    with tempfile.TemporaryDirectory(prefix="mp-abi-") as d:
        src, exe = os.path.join(d, "layout.c"), os.path.join(d, "layout")
        with open(src, "w") as f:
            f.write("\n".join(lines) + "\n")
        r = subprocess.run([cc, "-std=c11", "-I", header_dir, src, "-o", exe],
                           capture_output=True, text=True)
        if r.returncode != 0:
            problems.append("the layout program does not compile against the header (a field "
                            "of _abi.py the struct lacks?):\n" + r.stderr[-1500:])
            return
        out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
    c = dict(line.rsplit(" ", 1) for line in out.split("\n") if line)
    for cls in _abi.STRUCTS:
        if int(c[cls.C_NAME]) != ctypes.sizeof(cls):
            problems.append("%s: %d bytes, C's %s %s" % (cls.__name__, ctypes.sizeof(cls),
                                                        cls.C_NAME, c[cls.C_NAME]))
        for f in cls._fields_:
            off = getattr(cls, f[0]).offset
            key = "%s.%s" % (cls.C_NAME, f[0])
            if int(c[key]) != off:
                problems.append("%s.%s at offset %d, C's at %s" % (cls.__name__, f[0], off, c[key]))


def check_exports(h, lib, problems):
    r = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True)
    if r.returncode != 0:
        problems.append("nm %s: %s" % (lib, r.stderr.strip()))
        return
    syms = set()
    for line in r.stdout.split("\n"):
        parts = line.split()
        if len(parts) == 3 and parts[1] in "TtWiV":
            syms.add(parts[2])
    api = set(n for n, (_, _, exported) in h.functions.items() if exported)
    extra = sorted(s for s in syms - api if not s.startswith("_"))
    missing = sorted(api - syms)
    if extra:
        problems.append("%s exports %d symbols the header does not declare with MP_API: %s"
                        % (lib, len(extra), ", ".join(extra[:20])))
    if missing:
        problems.append("%s does not export %s (declared with MP_API)"
                        % (lib, ", ".join(missing)))


def run_checks(header_path, cc, lib):
    with open(header_path, encoding="utf-8") as f:
        h = Header(f.read())
    problems = []
    check_structs(h, problems)
    check_functions(h, problems)
    check_layout(os.path.dirname(os.path.abspath(header_path)), cc, problems)
    if lib:
        check_exports(h, lib, problems)
    return h, problems


def self_test(cc):
    """Each planted difference must be found; the real header must pass."""
    header = os.path.join(ROOT, "include", "modelprof.h")
    with open(header, encoding="utf-8") as f:
        text = f.read()
    h, problems = run_checks(header, cc, None)
    if problems:
        print("abi_check self-test: the header itself fails:\n  " + "\n  ".join(problems))
        return 1
    plants = [
        ("a field the Python struct lacks (issue 26: ReportOptions without csv_table)",
         "    mp_csv_table csv_table;", "    mp_csv_table csv_table;\n    int extra_field;"),
        ("a field of another type", "    int64_t params;         /*",
         "    int32_t params;         /*"),
        ("a field the header no longer has", "    int keep_timestamps;", ""),
        ("a function without MP_API", "MP_API const char *mp_version(void);",
         "MP_API const char *mp_version(void);\nint mp_unexported(int x);"),
        ("an argument of another type", "mp_model_set_dim(mp_model *m, const char *name, int64_t",
         "mp_model_set_dim(mp_model *m, const char *name, int"),
        ("an argument more", "MP_API mp_status mp_profile_run(mp_exec *pl, mp_profile *p);",
         "MP_API mp_status mp_profile_run(mp_exec *pl, mp_profile *p, int flags);"),
    ]
    failed = 0
    with tempfile.TemporaryDirectory(prefix="mp-abi-self-") as d:
        for what, old, new in plants:
            if text.count(old) != 1:
                print("abi_check self-test: cannot plant '%s' (text not found once)" % what)
                failed += 1
                continue
            path = os.path.join(d, "modelprof.h")
            with open(path, "w", encoding="utf-8") as f:
                f.write(text.replace(old, new))
            _, found = run_checks(path, cc, None)
            print("  %-75s %s" % (what, "found: " + found[0].split("\n")[0][:90] if found
                                  else "NOT FOUND"))
            failed += not found
    print("abi_check self-test: %d of %d planted differences found" % (len(plants) - failed,
                                                                      len(plants)))
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cc", default=os.environ.get("CC", "cc"))
    ap.add_argument("--lib", help="the shared library whose exports are checked")
    ap.add_argument("--header", default=os.path.join(ROOT, "include", "modelprof.h"))
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        return self_test(a.cc)
    h, problems = run_checks(a.header, a.cc, a.lib)
    if problems:
        print("python/modelprof/_abi.py against %s: %d problem%s" % (
            os.path.relpath(a.header, ROOT), len(problems), "" if len(problems) == 1 else "s"))
        for p in problems:
            print("  " + p)
        return 1
    print("abi: %d structs and %d functions of python/modelprof/_abi.py match the header; "
          "%d functions marked MP_API%s" % (
              len(_abi.STRUCTS), len(_abi.FUNCTIONS),
              sum(1 for f in h.functions.values() if f[2]),
              ", all exported by %s and nothing else" % os.path.relpath(a.lib, ROOT)
              if a.lib else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
