#!/usr/bin/env python3
"""Every test binary of the workspace, several side by side.

`cargo test` runs its test binaries one after another. Most of this suite's time is spent
waiting (on a simulated clock, a real sshd, kube-apiserver, ansible-playbook, tmux), so
two cores idled through most of it (docs/perf.md, "The test suite"). This builds what
`cargo test --workspace --all-targets` builds, then runs the same binaries, with the same
arguments (none: each binary's own harness and thread count), the same working directory
(the package's) and the same runtime variables cargo gives them, JOBS at a time, the
longest first (by the last run's wall times, kept in target/test-times.json; on a fresh
clone, tests/test-times.json).

The few binaries that only wait (WAITING below, by their measured CPU) run beside those
JOBS from the start instead of taking one of their slots.

Each binary's whole output is printed when it ends (never interleaved), headed as cargo
heads it, with its wall time; then a table of every binary and the sum of the harness's
counts. Exit 0 only when every binary exited 0; a binary that runs past its time limit is
killed (its whole process group) and counted failed.

Why not cargo-nextest: it would be one more tool to build on a fresh machine, and it runs
every test in its own process, which the suite's per-binary fixtures (one etcd per binary,
exec_supervise's stop-all-children) are not written for.

`--alongside CMD` starts CMD (a shell command) once the build is done and runs it beside the
test binaries (tests/run-all.sh runs clippy there, in its own target directory, on the cores
the waiting tests leave idle); its output is printed when it ends and a non-zero exit fails
the run like a failed binary.

`--clippy ARGS` builds the workspace's own crates with clippy-driver, ARGS its arguments
(tests/run-all.sh: "-D warnings"): the build that makes the test binaries is also clippy's
check of every target (see build()).

usage: tests/run-tests.py [--jobs N] [--limit SECONDS] [--alongside CMD] [--clippy ARGS]
                          [-- ARGS for cargo's build]
"""

import argparse
import json
import os
import re
import resource
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIMES = os.path.join(ROOT, "target", "test-times.json")
SHIPPED_TIMES = os.path.join(ROOT, "tests", "test-times.json")


def clippy_driver():
    """The toolchain's clippy-driver (the one `cargo clippy` runs), or exit naming the fix."""
    try:
        sysroot = subprocess.run(["rustc", "--print", "sysroot"], capture_output=True,
                                 text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit(f"run-tests: cannot ask rustc for its sysroot: {e}")
    driver = os.path.join(sysroot, "bin", "clippy-driver")
    if not os.access(driver, os.X_OK):
        sys.exit(f"run-tests: --clippy: {driver} not found: `rustup component add clippy`")
    return driver


def build(extra, clippy=None):
    """Build every test target; return [(label, executable, package dir, package name)].

    With `clippy` (its arguments, e.g. "-D warnings"), the workspace's own crates are compiled
    by clippy-driver, as `cargo clippy` has them checked: the same driver, the same lints, the
    same targets (`--all-targets`), passed the way cargo-clippy passes them
    (RUSTC_WORKSPACE_WRAPPER, CLIPPY_ARGS). It lints while it compiles, so one build gives the
    test binaries and clippy's verdict: a lint denied fails the build, printed as any
    compiler error. A separate `cargo clippy` compiled every crate a second time (286 s of
    CPU in CI stop 43, a fifth of the run, docs/perf.md "CI's budget")."""
    cmd = [
        "cargo", "test", "--workspace", "--all-targets", "--no-run",
        "--message-format=json-render-diagnostics",
    ] + extra
    env = dict(os.environ)
    if clippy is not None:
        env["RUSTC_WORKSPACE_WRAPPER"] = clippy_driver()
        env["CLIPPY_ARGS"] = "".join(f"{arg}__CLIPPY_HACKERY__" for arg in shlex.split(clippy))
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True, env=env)
    found = []
    for line in proc.stdout:
        try:
            m = json.loads(line)
        except ValueError:
            continue
        if m.get("reason") != "compiler-artifact" or not m.get("executable"):
            continue
        if not m["profile"]["test"] and "bench" not in m["target"]["kind"]:
            continue
        kind = m["target"]["kind"][0]
        pkg_dir = os.path.dirname(m["manifest_path"])
        pkg = os.path.basename(pkg_dir) if pkg_dir != ROOT else "hk-console"
        label = f"{pkg} {kind} {m['target']['name']}"
        found.append((label, m["executable"], pkg_dir, pkg))
    if proc.wait() != 0:
        sys.exit(f"run-tests: `{' '.join(cmd)}` failed (exit {proc.returncode})")
    return found


def run_one(label, exe, pkg_dir, pkg, limit):
    env = dict(os.environ)
    env["CARGO_MANIFEST_DIR"] = pkg_dir
    env["CARGO_PKG_NAME"] = pkg
    env.setdefault("CARGO", "cargo")
    with tempfile.TemporaryFile() as out:
        start = time.monotonic()
        p = subprocess.Popen([exe], cwd=pkg_dir, env=env, stdout=out, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, start_new_session=True)
        RUNNING.add(p)
        timed_out = False
        try:
            # wait4, not wait: the binary's CPU time with every child it waited for
            # (ansible-playbook, kustomize, the console it drove), for the table.
            while True:
                pid, status, usage = os.wait4(p.pid, os.WNOHANG)
                if pid:
                    break
                if not timed_out and time.monotonic() - start > limit:
                    os.killpg(p.pid, signal.SIGKILL)
                    timed_out = True
                time.sleep(0.1)
            code = os.waitstatus_to_exitcode(status)
            p.returncode = code
            cpu = usage.ru_utime + usage.ru_stime
        finally:
            RUNNING.discard(p)
        wall = time.monotonic() - start
        out.seek(0)
        text = out.read().decode("utf-8", "replace")
    if timed_out:
        text += f"\nrun-tests: {label} ran past its limit of {limit} s and was killed\n"
    return label, exe, code, timed_out, wall, cpu, text


RUNNING = set()

# Binaries that spend nearly all their wall time waiting, not computing: they run beside
# the JOBS at a time from the start, each in a slot of its own, so they do not hold one of
# the JOBS slots the computing binaries queue for. Measured on CI's machine (2026-12-06, the
# CPU column of this script): repo_operator 208 s wall for 20 s of CPU (the four-node
# demo's soaks between nodes), sim_kube_memory 60 s wall for 0.5 s (a fixed window of
# requests while it reads its own RSS). Named here, not judged from the last run, so a
# slow run cannot move a computing binary out of the queue.
WAITING = {"hk-console test repo_operator", "hk-sim test sim_kube_memory"}


def cpu_times():
    """(busy, total) jiffies of every core, from /proc/stat (None where there is none)."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields) - idle, sum(fields)


def run_alongside(cmd):
    """Run the shell command `cmd`; (exit code, wall seconds, output)."""
    start = time.monotonic()
    p = subprocess.Popen(cmd, shell=True, cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                         start_new_session=True)
    RUNNING.add(p)
    try:
        out = p.communicate()[0].decode("utf-8", "replace")
    finally:
        RUNNING.discard(p)
    return p.returncode, time.monotonic() - start, out


def stop(signum, _frame):
    """Ctrl-C or SIGTERM: stop every test binary's process group, then exit as signalled."""
    for p in list(RUNNING):
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
    sys.exit(128 + signum)


def main():
    # A handler, not an inherited SIG_IGN: a suite started in the background (`cmd &` in a
    # script) inherits SIGINT and SIGQUIT ignored, every test binary and its children with
    # it, and a test that stops a child with SIGINT then waits in vain (seen: exec_ansible's
    # polite process outlived its SIGINT). A handled signal is reset to the default in each
    # child at exec, as it is under a terminal.
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("HK_TEST_JOBS", "3")))
    ap.add_argument("--limit", type=int, default=1200, help="seconds one binary may run")
    ap.add_argument("--alongside", help="a shell command run beside the tests, after the build")
    ap.add_argument("--clippy", metavar="ARGS",
                    help="compile the workspace's crates with clippy, these its arguments")
    ap.add_argument("cargo_args", nargs="*")
    a = ap.parse_args()

    t0 = time.monotonic()
    bins = build(a.cargo_args, a.clippy)
    built = time.monotonic() - t0
    print(f"run-tests: {len(bins)} test binaries built in {built:.0f} s; running {a.jobs} at a time, "
          f"and beside them the ones that wait ({', '.join(sorted(WAITING))})", flush=True)
    # The last run's times on this machine; on a fresh clone, the ones checked in beside this
    # script (a run of the same suite), so the longest binaries still start first.
    last = {}
    for path in (TIMES, SHIPPED_TIMES):
        try:
            with open(path) as f:
                last = json.load(f)
            break
        except (OSError, ValueError):
            continue
    # The longest first, unknown ones before all (they may be long).
    bins.sort(key=lambda b: -last.get(b[0], 1e9))

    lock = threading.Lock()
    results = []
    cpu0 = cpu_times()
    ch0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    run0 = time.monotonic()
    beside = None
    waiting = [b for b in bins if b[0] in WAITING]
    computing = [b for b in bins if b[0] not in WAITING]
    with ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool, \
            ThreadPoolExecutor(max_workers=len(waiting) + (1 if a.alongside else 0) or 1) as side:
        if a.alongside:
            beside = side.submit(run_alongside, a.alongside)
        futs = [side.submit(run_one, *b, a.limit) for b in waiting]
        futs += [pool.submit(run_one, *b, a.limit) for b in computing]
        for f in as_completed(futs):
            label, exe, code, timed_out, wall, cpu, text = f.result()
            with lock:
                print(f"\n     Running {label} ({exe})  [{wall:.1f} s, cpu {cpu:.1f} s, "
                      f"exit {code}]", flush=True)
                sys.stdout.write(text)
                sys.stdout.flush()
            results.append((label, code, timed_out, wall, text, cpu))
        tests_wall = time.monotonic() - run0
        cpu1 = cpu_times()
        beside_code = 0
        if beside is not None:
            beside_code, beside_wall, beside_out = beside.result()
            print(f"\n     Alongside: {a.alongside}  [{beside_wall:.1f} s, exit {beside_code}]",
                  flush=True)
            sys.stdout.write(beside_out)

    passed = failed = ignored = 0
    for _, _, _, _, text, _ in results:
        for m in re.finditer(r"test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored", text):
            passed += int(m.group(1))
            failed += int(m.group(2))
            ignored += int(m.group(3))
    bad = [r for r in results if r[1] != 0]
    total = time.monotonic() - t0
    print("\nrun-tests: wall and CPU time per binary (CPU: the binary and the children it "
          "waited for; longest first)")
    for label, code, timed_out, wall, _, cpu in sorted(results, key=lambda r: -r[3]):
        state = "KILLED (limit)" if timed_out else ("ok" if code == 0 else f"FAILED (exit {code})")
        print(f"  {wall:8.1f} s  cpu {cpu:7.1f} s  {label}  {state}")
    ch1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    spent = (ch1.ru_utime + ch1.ru_stime) - (ch0.ru_utime + ch0.ru_stime)
    in_bins = sum(r[5] for r in results)
    print(f"run-tests: {spent:.0f} s of CPU while the tests ran: {in_bins:.0f} s in the test "
          f"binaries, {spent - in_bins:.0f} s in the command alongside")
    print(f"run-tests: {len(results)} binaries, {passed} passed, {failed} failed, {ignored} ignored; "
          f"build {built:.0f} s, tests {tests_wall:.0f} s, total {total:.0f} s, {a.jobs} at a time")
    if cpu0 and cpu1 and cpu1[1] > cpu0[1]:
        busy = 100.0 * (cpu1[0] - cpu0[0]) / (cpu1[1] - cpu0[1])
        print(f"run-tests: the cores were {busy:.0f}% busy while the tests ran"
              + (" (with the command alongside)" if a.alongside else ""))
    if beside_code != 0:
        bad.append(("alongside: " + a.alongside, beside_code, False, 0.0, "", 0.0))
    if bad:
        print("run-tests: FAILED: " + ", ".join(r[0] for r in bad))
    os.makedirs(os.path.dirname(TIMES), exist_ok=True)
    with open(TIMES, "w") as f:
        json.dump({r[0]: round(r[3], 1) for r in results}, f, indent=1, sort_keys=True)
    return 101 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
