#!/usr/bin/python3
"""The man page modelprof.1 from the command's own --help texts.

  tools/manpage.py MODELPROF OUT.1        write the page
  tools/manpage.py --check MODELPROF PAGE  exit 1 when PAGE differs from
                                           what --help gives now (drift)
"""
import subprocess
import sys

VERSION_LINE = '.TH MODELPROF 1 "" "modelprof %s" "User Commands"\n'


def esc(line):
    line = line.replace("\\", "\\e").replace("-", "\\-")
    if line.startswith((".", "'")):
        line = "\\&" + line
    return line


def section(title, text):
    out = [".SH %s\n" % title, ".nf\n"]
    for line in text.rstrip("\n").split("\n"):
        out.append(esc(line) + "\n")
    out.append(".fi\n")
    return out


def page(binary):
    run = lambda *a: subprocess.run([binary, *a], check=True, capture_output=True,
                                    text=True).stdout
    main, trace, version = run("--help"), run("trace", "--help"), run("--version").split()[-1]
    plan = run("plan", "--help")
    memory = run("memory", "--help")
    out = [VERSION_LINE % version, ".SH NAME\n",
           "modelprof \\- profiler for neural networks (ONNX static profile, measured run, "
           "torch.profiler traces, CUDA memory snapshots)\n"]
    out += section("SYNOPSIS AND OPTIONS", main)
    out += section("TRACE ANALYSIS", trace)
    out += section("TRAINING PLANNER", plan)
    out += section("MEMORY SNAPSHOTS", memory)
    out += [".SH SEE ALSO\n", "The README and docs/ of the modelprof sources; "
            "the Python package modelprof (get_model_profile, FlopsProfiler).\n"]
    return "".join(out)


def main(argv):
    if len(argv) == 4 and argv[1] == "--check":
        want = page(argv[2])
        have = open(argv[3], encoding="utf-8").read()
        if want != have:
            sys.stderr.write("%s: out of date with `%s --help` (run tools/manpage.py %s %s)\n"
                             % (argv[3], argv[2], argv[2], argv[3]))
            return 1
        print("man page %s matches --help" % argv[3])
        return 0
    if len(argv) == 3:
        with open(argv[2], "w", encoding="utf-8") as f:
            f.write(page(argv[1]))
        return 0
    sys.stderr.write(__doc__)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
