"""Running candidates: does a program's output still contain the message?

* ``subproc``: each candidate in a fresh ``python`` process.
* ``runner``: worker interpreters that stay up and run candidate after candidate (imports
  are paid once). A worker runs a candidate as ``__main__`` with its file descriptors 1 and
  2 sent to files, so native output (a compiler's) is seen too; one that hangs past the
  timeout is killed and replaced.

Either way a candidate runs from its own temporary directory, as a file of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

BACKENDS = ("runner", "subproc")

#: what a worker runs: read a candidate's path from stdin, run it, answer with its output files
_WORKER = r"""
import json, os, runpy, sys, traceback
for line in sys.stdin:
    job = json.loads(line)
    out = os.open(job["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    saved = os.dup(1), os.dup(2)
    sys.stdout.flush(); sys.stderr.flush()
    os.dup2(out, 1); os.dup2(out, 2)
    sys.stdin = open(os.devnull)  # the job protocol is on the real stdin
    try:
        os.chdir(os.path.dirname(job["path"]))
        sys.argv = [job["path"]]
        runpy.run_path(job["path"], run_name="__main__")
    except SystemExit:
        pass
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush(); sys.stderr.flush()
        os.dup2(saved[0], 1); os.dup2(saved[1], 2); os.close(out); os.close(saved[0]); os.close(saved[1])
    print(json.dumps({"done": job["out"]}), flush=True)
"""


class Runner:
    """Runs candidate sources and reports which contain ``message`` in their output."""

    def __init__(self, message: str, backend: str = "runner", timeout: float = 60.0, jobs: int = 1) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"autodd: unknown backend {backend!r}; choose from {', '.join(BACKENDS)}")
        self.message, self.backend, self.timeout, self.jobs = message, backend, timeout, max(1, jobs)
        self._dir = tempfile.TemporaryDirectory(prefix="tilelang-autodd-")
        self._workers: list[_Worker | None] = [None] * self.jobs
        self._lock = threading.Lock()
        self._count = 0

    def output(self, source: str, slot: int = 0) -> str:
        """The candidate's stdout and stderr together (a timeout's note if it hung)."""
        with self._lock:
            self._count += 1
            work = Path(self._dir.name) / f"c{self._count}"
        work.mkdir()
        path = work / "candidate.py"
        path.write_text(source)
        if self.backend == "subproc":
            try:
                done = subprocess.run([sys.executable, str(path)], check=False, cwd=work, capture_output=True, text=True,
                                      timeout=self.timeout, errors="replace")
            except subprocess.TimeoutExpired:
                return f"autodd: candidate timed out after {self.timeout} s"
            return done.stdout + done.stderr
        worker = self._workers[slot]
        if worker is None or not worker.alive():
            worker = self._workers[slot] = _Worker()
        text = worker.run(path, work / "output.txt", self.timeout)
        if text is None:
            worker.kill()
            self._workers[slot] = None
            return f"autodd: candidate timed out after {self.timeout} s"
        return text

    def reproduces(self, sources: list[str]) -> list[bool]:
        """Which of ``sources`` (at most ``jobs``) print the message, run concurrently."""
        if len(sources) == 1:
            return [self.message in self.output(sources[0])]
        with ThreadPoolExecutor(max_workers=len(sources)) as pool:
            outputs = list(pool.map(self.output, sources, range(len(sources))))
        return [self.message in text for text in outputs]

    def close(self) -> None:
        for worker in self._workers:
            if worker is not None:
                worker.kill()
        self._dir.cleanup()

    def __enter__(self) -> Runner:  # noqa: PYI034
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Worker:
    def __init__(self) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", _WORKER], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, bufsize=1,
                                        env={**os.environ, "PYTHONUNBUFFERED": "1"})

    def alive(self) -> bool:
        return self.process.poll() is None

    def run(self, path: Path, out: Path, timeout: float) -> str | None:
        """The candidate's output, or None when it did not finish within ``timeout``."""
        assert self.process.stdin is not None and self.process.stdout is not None
        try:
            self.process.stdin.write(json.dumps({"path": str(path), "out": str(out)}) + "\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            return out.read_text(errors="replace") if out.exists() else ""
        answer: list[str] = []
        reader = threading.Thread(target=lambda: answer.append(self.process.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout)
        if reader.is_alive():
            return None
        text = out.read_text(errors="replace") if out.exists() else ""
        if not answer or not answer[0]:  # the worker died mid-candidate (a crash is output too)
            text += f"\nautodd: the worker exited with status {self.process.wait()}"
        return text

    def kill(self) -> None:
        if self.alive():
            self.process.kill()
        self.process.wait()


def check_source(runner: Runner, source: str) -> tuple[bool, str]:
    """Whether the original program shows the message, and its output."""
    text = runner.output(source)
    return runner.message in text, text

