#!/usr/bin/python3
"""Reruns the commands behind the figures quoted in README.md, docs/*.md and docs/programs/*.md and compares.

A figure is checked when the Markdown says where it comes from, in an HTML comment (invisible
when the page is rendered) just before it:

  <!-- check short: COMMAND -->
  ```
  the program's output, as printed
  ```
      COMMAND runs in a new scratch directory (with `build` there linking to the build tree, so
      `build/tools/...` works as written); every line of the block must be among the lines it
      prints (stdout and stderr), in the same order, once times and speeds are masked (see
      `mask`). Leading `$ ...` lines (the command as typed) are not compared; a line that ends
      in " ..." stands for any line that begins with what comes before it. `check short, continued:`
      runs in the previous block's directory instead (a sample after its training run).

  <!-- check-table short -->
  | task | command | steps | held-out exact ... | wall s | ...
      Each row's `command` runs (plus --quiet); the step at which it reached its target ("not
      reached" when its budget ran out first) and the last exact-match percentage it printed
      must equal the row's "steps" and "exact" columns.
      A row whose "wall s" is above 60 counts as long.

  <!-- check-metrics short: COMMAND -->
  | step | held-out token accuracy | held-out exact | ...
      COMMAND runs (plus --quiet) and each row must match the run's metrics log at that step, to
      the precision the row is written with ("93%" checks 0.93 +- 0.005).

"short" figures run by default (CI runs them); "long" ones only with --long. Times are never
compared: they depend on the machine (the text says where each was measured).

The figures depend on the kernels OpenBLAS runs the matrix products with: each kernel set rounds
a product in its own way (FMA or not, its own order of the partial sums), and a training run
carries such a difference forward. OpenBLAS picks the set at load time from the CPU (Haswell on
AVX2 Intel, Zen on AMD, SkylakeX or Cooperlake with AVX-512, Prescott where it does not
recognise the CPU). The documented figures were made with the Prescott set, which runs on every
x86-64 CPU, so every command runs with OPENBLAS_CORETYPE=Prescott unless --kernels names another
set (--kernels native: the one OpenBLAS picks here). docs/kernels.sh measures what the other sets
change (docs/reproducibility.md).

  docs/check.sh [--long] [--build DIR] [--list] [--kernels SET] [FILE...]
                                                              (default: README.md docs/*.md docs/programs/*.md)

Exit status 0 when every checked figure matches, 1 when one does not (each mismatch printed with
its file and line), 2 for a malformed annotation.
"""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ANNOTATION = re.compile(r"^<!-- (check|check-table|check-metrics) (short|long)(, continued)?(?:: (.*?))? -->$")
LONG_ROW_SECONDS = 60
# The kernel set the documented figures were made with (see the top of this file).
DOCUMENTED_KERNELS = "Prescott"

# Metrics-log keys by the column headings a document may use for them.
METRIC_COLUMNS = {
    "train loss": "train_loss",
    "validation loss": "eval_loss",
    "held-out loss": "eval_loss",
    "held-out token accuracy": "token_acc",
    "token accuracy": "token_acc",
    "held-out exact": "seq_acc",
    "exact": "seq_acc",
}


class Malformed(Exception):
    pass


def mask(line):
    """The line with what depends on the machine's speed replaced by placeholders."""
    line = re.sub(r"\d+(\.\d+)?k? (tok/s|tokens/s|sequences/s)", r"<rate> \2", line)
    line = re.sub(r"ETA \S+", "ETA <time>", line)
    line = re.sub(r"\b(\d+h)?(\d+m)?\d+(\.\d+)?(ms|s)\b", "<time>", line)
    if line.startswith("data parallel:"):  # shares of time spent waiting: timing, not results
        line = re.sub(r"\d+(\.\d+)?", "<n>", line)
    return line.rstrip()


def cells(row):
    return [c.strip() for c in row.strip().strip("|").split("|")]


def read_table(lines, start):
    """The header and rows (with their line numbers) of the table starting at or after `start`."""
    i = start
    while i < len(lines) and not lines[i].startswith("|"):
        if lines[i].strip():
            raise Malformed(f"line {i + 1}: a table must follow the annotation")
        i += 1
    header = cells(lines[i])
    rows = []
    i += 2  # past the header and the |---| line
    while i < len(lines) and lines[i].startswith("|"):
        rows.append((i + 1, cells(lines[i])))
        i += 1
    return header, rows


def read_block(lines, start):
    i = start
    while i < len(lines) and not lines[i].startswith("```"):
        if lines[i].strip():
            raise Malformed(f"line {i + 1}: a fenced block must follow the annotation")
        i += 1
    body = []
    first = i + 2  # the 1-based number of the block's first line
    i += 1
    while i < len(lines) and not lines[i].startswith("```"):
        body.append(lines[i])
        i += 1
    return first, body


class Runner:
    def __init__(self, build, kernels):
        self.build = build
        self.dirs = []
        self.previous = None
        self.env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        if kernels != "native":
            self.env["OPENBLAS_CORETYPE"] = kernels

    def kernels_in_use(self):
        """The kernel set OpenBLAS loads with in this environment, as it names it ("?" if unknown)."""
        program = os.path.join(self.build, "tools", "train_sequence")
        p = subprocess.run([program, "--help"], env=dict(self.env, OPENBLAS_VERBOSE="2"), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, errors="replace")
        m = re.search(r"^Core: (\S+)", p.stdout, re.M)
        return m.group(1) if m else "?"

    def directory(self, continued):
        if continued and self.previous:
            return self.previous
        d = tempfile.mkdtemp(prefix="attograd-docs-")
        os.symlink(self.build, os.path.join(d, "build"))
        self.dirs.append(d)
        self.previous = d
        return d

    def run(self, command, continued=False):
        d = self.directory(continued)
        p = subprocess.run(["bash", "-c", command], cwd=d, env=self.env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, errors="replace")
        return d, p.returncode, p.stdout

    def clean(self):
        for d in self.dirs:
            shutil.rmtree(d, ignore_errors=True)


def column(header, *names):
    for i, h in enumerate(header):
        if any(h.lower().startswith(n) for n in names):
            return i
    return None


def reached_step(output):
    m = re.search(r"reached the target after (\d+) steps", output)
    return m.group(1) if m else None


def last_exact(output):
    found = re.findall(r"exact[^%\n]*?(\d+(?:\.\d+)?)%", output)
    return found[-1] + "%" if found else None


def same_at_precision(documented, value):
    """Whether `value` (a fraction for a percentage) rounds to the documented text."""
    text = documented.replace(",", "").strip()
    percent = text.endswith("%")
    number = text.rstrip("%")
    decimals = len(number.split(".")[1]) if "." in number else 0
    measured = value * 100 if percent else value
    return f"{measured:.{decimals}f}" == number


class Checker:
    def __init__(self, runner, long, listing):
        self.runner, self.long, self.listing = runner, long, listing
        self.failures = self.checked = self.skipped = 0

    def fail(self, where, message):
        self.failures += 1
        print(f"{where}: {message}")

    def wanted(self, tier, where, what):
        if self.listing:
            print(f"{where}: {tier}: {what}")
            return False
        if tier == "long" and not self.long:
            self.skipped += 1
            return False
        print(f"{where}: {what} ...", flush=True)
        return True

    def block(self, path, line, tier, continued, command, body):
        where = f"{path}:{line}"
        if not self.wanted(tier, where, command):
            return
        self.checked += 1
        _, status, output = self.runner.run(command, continued)
        if status != 0:
            self.fail(where, f"`{command}` exited with {status}:\n{output[-2000:]}")
            return
        got = [mask(x) for x in output.rstrip("\n").split("\n")]
        want = [(line + i, mask(x)) for i, x in enumerate(body)]
        while want and want[0][1].startswith("$ "):  # the command as typed, continued by "\"
            echo = want.pop(0)[1]
            while echo.endswith("\\") and want:
                echo = want.pop(0)[1]
        # Every documented line, in order, among the printed ones (an excerpt may leave lines out).
        def matches(printed, documented):  # "text ..." stands for a line that starts with "text"
            if documented.endswith(" ..."):
                return printed.startswith(documented[:-4])
            return printed == documented

        at = 0
        for number, text in want:
            while at < len(got) and not matches(got[at], text):
                at += 1
            if at == len(got):
                closest = max(got, key=lambda g: len(os.path.commonprefix([g, text])), default="")
                self.fail(f"{path}:{number}", f"documented line not printed (in this order) now:\n    {text}\n"
                          f"  printed instead:\n    {closest}\n"
                          f"  the output, masked:\n    " + "\n    ".join(got[-40:]))
                return
            at += 1

    def table(self, path, tier, header, rows):
        c_cmd = column(header, "command")
        c_steps = column(header, "steps")
        c_exact = column(header, "held-out exact", "exact")
        c_wall = column(header, "wall s")
        if c_cmd is None or c_steps is None:
            raise Malformed(f"{path}: a checked table needs 'command' and 'steps' columns: {header}")
        for line, row in rows:
            command = row[c_cmd].strip("`")
            row_tier = tier
            if c_wall is not None and row[c_wall] and float(row[c_wall]) > LONG_ROW_SECONDS:
                row_tier = "long"
            where = f"{path}:{line}"
            if not self.wanted(row_tier, where, command):
                continue
            self.checked += 1
            _, status, output = self.runner.run(command + " --quiet")
            if status != 0:
                self.fail(where, f"`{command}` exited with {status}:\n{output[-2000:]}")
                continue
            steps = reached_step(output) or "not reached"
            if steps != row[c_steps].replace(",", ""):
                self.fail(where, f"steps: documented {row[c_steps]}, measured {steps}")
            if c_exact is not None and last_exact(output) != row[c_exact]:
                self.fail(where, f"exact: documented {row[c_exact]}, measured {last_exact(output)}")

    def metrics(self, path, tier, command, header, rows):
        where = f"{path}:{rows[0][0] if rows else 0}"
        if column(header, "step") != 0:
            raise Malformed(f"{where}: a metrics table starts with a 'step' column")
        keys = []
        for h in header[1:]:
            if h.lower() not in METRIC_COLUMNS:
                raise Malformed(f"{where}: no metrics-log key for the column '{h}' (known: {sorted(METRIC_COLUMNS)})")
            keys.append(METRIC_COLUMNS[h.lower()])
        if not self.wanted(tier, where, command):
            return
        self.checked += 1
        d, status, output = self.runner.run(command + " --quiet")
        if status != 0:
            self.fail(where, f"`{command}` exited with {status}:\n{output[-2000:]}")
            return
        logs = glob.glob(os.path.join(d, "runs", "*", "*", "latest", "metrics.jsonl"))
        if len(logs) != 1:
            self.fail(where, f"`{command}` left {len(logs)} metrics logs, not one")
            return
        by_step = {}
        with open(logs[0]) as f:
            for text in f:
                record = json.loads(text)
                by_step[record["step"]] = record
        for line, row in rows:
            step = int(row[0].replace(",", ""))
            if step not in by_step:
                self.fail(f"{path}:{line}", f"the run logged no evaluation at step {step}")
                continue
            for key, documented in zip(keys, row[1:]):
                value = by_step[step][key]
                if value is None or not same_at_precision(documented, value):
                    self.fail(f"{path}:{line}", f"step {step} {key}: documented {documented}, measured {value}")

    def file(self, path):
        with open(os.path.join(ROOT, path)) as f:
            lines = f.read().split("\n")
        for i, text in enumerate(lines):
            if not text.startswith("<!-- check"):
                continue
            m = ANNOTATION.match(text)
            if not m:
                raise Malformed(f"{path}:{i + 1}: not an annotation this script reads: {text}")
            kind, tier, continued, command = m.groups()
            if kind == "check":
                if not command:
                    raise Malformed(f"{path}:{i + 1}: the annotation names no command")
                line, body = read_block(lines, i + 1)
                self.block(path, line, tier, bool(continued), command, body)
            elif kind == "check-table":
                header, rows = read_table(lines, i + 1)
                self.table(path, tier, header, rows)
            else:
                header, rows = read_table(lines, i + 1)
                self.metrics(path, tier, command, header, rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="*", help="Markdown files, relative to the repository (default: README.md docs/*.md docs/programs/*.md)")
    parser.add_argument("--long", action="store_true", help="also the figures whose commands run for minutes")
    parser.add_argument("--build", default=os.path.join(ROOT, "build"), help="the build tree (default: build/)")
    parser.add_argument("--list", action="store_true", help="print the checked figures and their commands, run nothing")
    parser.add_argument("--kernels", default=DOCUMENTED_KERNELS, metavar="SET",
                        help=f"OpenBLAS's kernel set for every command (OPENBLAS_CORETYPE; default {DOCUMENTED_KERNELS}, "
                             "the one the figures were made with; 'native': the one OpenBLAS picks on this CPU)")
    args = parser.parse_args()
    if not re.fullmatch(r"[A-Za-z0-9]+", args.kernels):
        print(f"docs/check: --kernels: expected a kernel set's name (Prescott, Haswell, ...) or 'native', "
              f"got '{args.kernels}'", file=sys.stderr)
        return 2
    files = args.files or ["README.md"] + sorted(
        os.path.relpath(p, ROOT) for pattern in ("*.md", "programs/*.md") for p in glob.glob(os.path.join(ROOT, "docs", pattern)))
    build = os.path.abspath(args.build)
    if not os.path.isdir(os.path.join(build, "tools")):
        print(f"docs/check: '{build}' holds no tools/: build first (ninja -C build)", file=sys.stderr)
        return 2
    runner = Runner(build, args.kernels)
    checker = Checker(runner, args.long, args.list)
    in_use = "" if args.list else runner.kernels_in_use()
    if in_use:
        asked = "as OpenBLAS picks them here" if args.kernels == "native" else f"OPENBLAS_CORETYPE={args.kernels}"
        print(f"docs/check: OpenBLAS's {in_use} kernels ({asked}); the figures were made with {DOCUMENTED_KERNELS}'s",
              flush=True)
        if args.kernels != "native" and in_use.lower() != args.kernels.lower():
            print(f"docs/check: OpenBLAS did not load the {args.kernels} kernels asked for: the figures may differ",
                  flush=True)
    try:
        for path in files:
            runner.previous = None
            checker.file(path)
    except Malformed as e:
        print(f"docs/check: {e}", file=sys.stderr)
        return 2
    finally:
        runner.clean()
    if not args.list:
        print(f"docs/check: {checker.checked} checked, {checker.failures} differ, "
              f"{checker.skipped} long ones skipped{'' if args.long else ' (--long runs them)'}, "
              f"with OpenBLAS's {in_use} kernels")
    return 1 if checker.failures else 0


if __name__ == "__main__":
    sys.exit(main())
