#!/usr/bin/env python3
"""Plants each mutant of test/mutants/*.mutant in a copy of the source tree,
builds it, runs the tests the mutant names, and reports whether the tests
killed it (failed). Exits 1 when a mutant survived or could not be planted.

A mutant file:

    # what: one line saying which bug it plants
    file: path/relative/to/the/source/root
    tests: a ctest -R regular expression
    guest: verbs_tests.sh steps (optional; instead of tests: the steps run
           over verbs in the Soft-RoCE guest, for code only a device reaches)
    guest_tests: a ctest -R expression narrowing the guest's integration step
    find:
    <exact text, one or more lines>
    replace:
    <the text that replaces it>

The find text must occur exactly once in the file, so that a mutant whose
code moved fails loudly instead of planting nothing.

Usage: run.py [--source DIR] [--work DIR] [--jobs N] [MUTANT ...]
"""
import argparse
import glob
import os
import shutil
import subprocess
import sys
import time


def parse(path):
    meta, find, replace, section = {}, [], [], None
    with open(path) as f:
        for line in f.read().split("\n"):
            if section is None and line.startswith("#"):
                if line.startswith("# what:"):
                    meta["what"] = line[len("# what:"):].strip()
                continue
            if section is None and line.startswith("file:"):
                meta["file"] = line[5:].strip()
            elif section is None and line.startswith("tests:"):
                meta["tests"] = line[6:].strip()
            elif section is None and line.startswith("guest:"):
                meta["guest"] = line[6:].split()
            elif section is None and line.startswith("guest_tests:"):
                meta["guest_tests"] = line[12:].strip()
            elif line == "find:":
                section = "find"
            elif line == "replace:":
                section = "replace"
            elif section == "find":
                find.append(line)
            elif section == "replace":
                replace.append(line)
    for key in ("what", "file"):
        if key not in meta:
            raise SystemExit(f"{path}: missing '{key}'")
    if ("tests" in meta) == ("guest" in meta):
        raise SystemExit(f"{path}: needs exactly one of 'tests' and 'guest'")
    while replace and replace[-1] == "":
        replace.pop()
    if not find:
        raise SystemExit(f"{path}: empty 'find:' section")
    meta["find"] = "\n".join(find).rstrip("\n")
    meta["replace"] = "\n".join(replace)
    return meta


def run(cmd, log, cwd=None, env=None):
    with open(log, "a") as out:
        out.write(f"$ {' '.join(cmd)}\n")
        out.flush()
        return subprocess.run(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=env).returncode


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", default=os.path.normpath(os.path.join(here, "..", "..")))
    ap.add_argument("--work", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "smart-mutants"))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("mutants", nargs="*")
    args = ap.parse_args()
    mutants = args.mutants or sorted(glob.glob(os.path.join(here, "*.mutant")))
    if not mutants:
        raise SystemExit("no mutants found")
    src = os.path.join(args.work, "src")
    build = os.path.join(args.work, "build")
    log = os.path.join(args.work, "mutants.log")
    os.makedirs(args.work, exist_ok=True)
    if os.path.exists(src):
        shutil.rmtree(src)
    ignore = shutil.ignore_patterns(".git", "build", "build-*", "softroce-cache", "__pycache__")
    shutil.copytree(args.source, src, ignore=ignore)
    open(log, "w").close()
    configure = ["cmake", "-S", src, "-B", build, "-DCMAKE_BUILD_TYPE=Release"]
    if shutil.which("ninja"):
        configure += ["-G", "Ninja"]
    if shutil.which("ccache"):
        configure.append("-DCMAKE_CXX_COMPILER_LAUNCHER=ccache")
    if run(configure, log) != 0 or run(["cmake", "--build", build, "-j", str(args.jobs)], log) != 0:
        raise SystemExit(f"the unmutated tree does not build; see {log}")

    def guest(name, steps, tests=""):
        env = dict(os.environ, SOFTROCE_CACHE=os.path.join(args.work, "softroce-cache"), SOFTROCE_MEM="3072")
        if tests:
            env.update(SMART_VERBS_TESTS=tests, SOFTROCE_PASS_ENV="SMART_VERBS_TESTS")
        return run([os.path.join(src, "test", "softroce", "guest.sh"), "--timeout", "900", "--out",
                    os.path.join(args.work, "guest-" + name), "--",
                    os.path.join(src, "test", "softroce", "verbs_tests.sh"), build] + steps, log, env=env)

    # A guest step that fails without any mutant would "kill" every mutant
    # that names it: each set of steps must pass on the unmutated tree first.
    parsed = [(path, parse(path)) for path in mutants]
    baseline = {}
    for _, m in parsed:
        key = (tuple(m["guest"]), m.get("guest_tests", "")) if "guest" in m else None
        if key is not None and key not in baseline:
            baseline[key] = guest("unmutated-" + "-".join(key[0]), list(key[0]), key[1])
            if baseline[key] != 0:
                print(f"guest steps {' '.join(key[0])} {key[1]} fail on the unmutated tree (exit {baseline[key]}); "
                      f"see {log}", flush=True)
    survived, broken = [], []
    for path, m in parsed:
        name = os.path.basename(path)
        target = os.path.join(src, m["file"])
        with open(target) as f:
            original = f.read()
        count = original.count(m["find"])
        if count != 1:
            print(f"BROKEN   {name}: its find text occurs {count} times in {m['file']}", flush=True)
            broken.append(name)
            continue
        start = time.time()
        with open(target, "w") as f:
            f.write(original.replace(m["find"], m["replace"]))
        try:
            if run(["cmake", "--build", build, "-j", str(args.jobs)], log) != 0:
                print(f"BROKEN   {name}: does not compile; see {log}", flush=True)
                broken.append(name)
                continue
            if "guest" in m:
                if baseline[(tuple(m["guest"]), m.get("guest_tests", ""))] != 0:
                    print(f"BROKEN   {name}: its guest steps fail without it", flush=True)
                    broken.append(name)
                    continue
                tests = guest(name, m["guest"], m.get("guest_tests", ""))
                # The harness's own failures (77: QEMU or the kernel missing,
                # 124: the guest timed out, 125: boot or setup) say nothing
                # about the mutant.
                if tests in (77, 124, 125):
                    print(f"BROKEN   {name}: the guest failed (exit {tests}); see {log}", flush=True)
                    broken.append(name)
                    continue
            else:
                tests = run(["ctest", "--test-dir", build, "-LE", "softroce", "-R", m["tests"], "--no-tests=error",
                             f"-j{args.jobs}", "--timeout", "120"], log)
            verdict = "killed" if tests != 0 else "SURVIVED"
            if tests == 0:
                survived.append(name)
            print(f"{verdict:8} {name} ({time.time() - start:.0f} s): {m['what']}", flush=True)
        finally:
            with open(target, "w") as f:
                f.write(original)
    # Leave the build matching the source again.
    run(["cmake", "--build", build, "-j", str(args.jobs)], log)
    total = len(mutants)
    print(f"{total - len(survived) - len(broken)} of {total} mutants killed"
          + (f"; survived: {', '.join(survived)}" if survived else "")
          + (f"; broken: {', '.join(broken)}" if broken else ""))
    return 1 if survived or broken else 0


if __name__ == "__main__":
    sys.exit(main())
