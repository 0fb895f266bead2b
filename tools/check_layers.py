#!/usr/bin/python3
"""The folders' layering, checked on the objects and the includes.

    /usr/bin/python3 tools/check_layers.py [--build build] [--self-test]

src/LAYERS lists each folder of src/ and the folders directly under it; a
folder may include and call its own folder and every folder below it
(the closure). Checked:
  * calls: every undefined symbol of an object of folder F that another
    object of the library defines must be defined in F or below it;
  * includes: every `#include "G/..."` of a file of F (sources and headers)
    names G = F or a folder below it.
Exit 1 listing each arrow that goes the wrong way (file, symbol or header).
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def read_layers(path):
    below = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.split('#', 1)[0].strip()
            if not line:
                continue
            if ':' not in line:
                sys.exit(f"{path}:{n}: expected 'folder: lower folders'")
            name, rest = line.split(':', 1)
            name = name.strip()
            lower = rest.split()
            for g in lower:
                if g not in below:
                    sys.exit(f"{path}:{n}: '{g}' must be listed before '{name}' (a folder names only folders above its line)")
            below[name] = set(lower)
    closed = {}
    for name in below:  # listed bottom-up: each lower folder is closed already
        c = set()
        for g in below[name]:
            c |= {g} | closed[g]
        closed[name] = c
    return closed


def folder_of(path):
    parts = os.path.normpath(path).split(os.sep)
    if 'src' in parts:
        i = len(parts) - 1 - parts[::-1].index('src')
        if i + 2 < len(parts) + 1 and i + 1 < len(parts) - 1:
            return parts[i + 1]
    return None


def nm(args, objs):
    out = subprocess.run(['nm', '-A'] + args + objs, capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        # path:  U sym  |  path:0000 T sym
        path, rest = line.split(':', 1)
        f = rest.split()
        yield path, f[-2], f[-1]


def check(src, objdir, layers):
    errors = []
    folders = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
    for d in folders:
        if d not in layers:
            errors.append(f"src/{d}/: not listed in src/LAYERS")
    objs = []
    for d in folders:
        od = os.path.join(objdir, 'src', d)
        if os.path.isdir(od):
            objs += [os.path.join(od, o) for o in sorted(os.listdir(od)) if o.endswith('.o')]
    if not objs:
        sys.exit(f"check_layers: no objects under {objdir}/src (build first)")
    defined = {}
    for path, kind, sym in nm(['--defined-only'], objs):
        if kind in 'TDBRCVWtdbr' and kind.isupper() or kind in 'VW':
            defined.setdefault(sym, folder_of(path))
    for path, kind, sym in nm(['-u'], objs):
        f = folder_of(path)
        g = defined.get(sym)
        if g is None or g == f or f not in layers:
            continue
        if g not in layers[f]:
            errors.append(f"{os.path.relpath(path, ROOT)}: calls {sym}, defined in src/{g}/ (above src/{f}/)")
    inc = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/')
    for d in folders:
        for name in sorted(os.listdir(os.path.join(src, d))):
            if not name.endswith(('.c', '.h')):
                continue
            p = os.path.join(src, d, name)
            with open(p, errors='replace') as fh:
                for n, line in enumerate(fh, 1):
                    m = inc.match(line)
                    if m and m.group(1) != d and d in layers and m.group(1) in layers and m.group(1) not in layers[d]:
                        errors.append(f"src/{d}/{name}:{n}: includes {m.group(1)}/ (above src/{d}/)")
    return errors, len(objs)


def self_test():
    import tempfile
    with tempfile.TemporaryDirectory() as t:
        src = os.path.join(t, 'src')
        for d in ('lo', 'hi'):
            os.makedirs(os.path.join(src, d))
            os.makedirs(os.path.join(t, 'obj', 'src', d))
        with open(os.path.join(t, 'LAYERS'), 'w') as f:
            f.write('lo:\nhi: lo\n')
        layers = read_layers(os.path.join(t, 'LAYERS'))
        open(os.path.join(src, 'hi', 'h.h'), 'w').write('int hi_fn(void);\n')
        open(os.path.join(src, 'hi', 'h.c'), 'w').write('#include "lo/l.h"\nint lo_fn(void);\nint hi_fn(void) { return lo_fn(); }\n')
        open(os.path.join(src, 'lo', 'l.h'), 'w').write('int lo_fn(void);\n')
        bad = '#include "hi/h.h"\nint lo_fn(void) { return hi_fn(); }\n'
        good = 'int lo_fn(void) { return 1; }\n'
        for text, want in ((good, 0), (bad, 2)):
            open(os.path.join(src, 'lo', 'l.c'), 'w').write(text)
            for d, n in (('lo', 'l'), ('hi', 'h')):
                subprocess.run(['cc', '-c', '-I', src, os.path.join(src, d, n + '.c'), '-o',
                                os.path.join(t, 'obj', 'src', d, n + '.o')], check=True)
            errors, _ = check(src, os.path.join(t, 'obj'), layers)
            if len(errors) != want:
                sys.exit(f"check_layers self-test: {len(errors)} errors where {want} were planted: {errors}")
    print("check_layers self-test: a planted upward include and call are both caught")


def main():
    args = sys.argv[1:]
    if '--self-test' in args:
        self_test()
        return
    build = 'build'
    if '--build' in args:
        build = args[args.index('--build') + 1]
    layers = read_layers(os.path.join(ROOT, 'src', 'LAYERS'))
    errors, n = check(os.path.join(ROOT, 'src'), os.path.join(ROOT, build, 'obj'), layers)
    if errors:
        print("check-layers: arrows that go up (src/LAYERS gives the order):", file=sys.stderr)
        for e in errors:
            print("  " + e, file=sys.stderr)
        sys.exit(1)
    print(f"check-layers: {n} objects in {len(layers)} folders, every include and call goes to its own folder or a lower one")


if __name__ == '__main__':
    main()
