"""How many threads run a CPU kernel's blocks (the llvm kind's parallel block loop).

TVM's thread pool is created once per process, at the first parallel launch (or the first
``runtime.NumThreads`` call), with as many workers as its ``MaxConcurrency()`` says:
``TVM_NUM_THREADS``, else ``OMP_NUM_THREADS``, else half of
``std::thread::hardware_concurrency()`` on x86-64, because it assumes two-way SMT
(tvm/src/runtime/threading_backend.cc). On a machine without SMT that halves the cores a
kernel uses: one thread on this project's 2-core CI machine. The pool cannot grow later
(``runtime.config_threadpool`` only lowers the count), so the CPU backend sets
``TVM_NUM_THREADS`` when it is imported — before any kernel runs — unless the user has:

* ``TILELANG_CPU_THREADS=n``: n threads (wins over TVM's variables);
* ``TVM_NUM_THREADS`` / ``OMP_NUM_THREADS``: TVM's own knobs, left as they are;
* neither: every CPU this process may run on (``os.sched_getaffinity``).

After each parallel launch TVM's workers wait for the next one by calling sched_yield up
to ``TVM_THREAD_POOL_SPIN_COUNT`` times; with TVM's default that kept a core busy for
0.1-0.2 s after every launch here, stolen from whatever the process does next (a compile,
numpy, the next test). Unless that variable is set, the backend sets it to ``SPIN_COUNT``
(under a millisecond of spinning, measured here): a worker still catches a launch that
follows at once, then sleeps, and a later launch wakes it, which costs microseconds.

Kernels that use atomics run on one thread whatever the count (launch_to_loops.py). An
invalid ``TILELANG_CPU_THREADS`` leaves the pool alone and makes the backend unavailable,
with the reason (target.unavailable_reason), rather than breaking ``import tilelang``.
"""

from __future__ import annotations

import os

THREADS_ENV = "TILELANG_CPU_THREADS"
_TVM_ENV = ("TVM_NUM_THREADS", "OMP_NUM_THREADS")
SPIN_ENV = "TVM_THREAD_POOL_SPIN_COUNT"
SPIN_COUNT = 1000


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask, which containers narrow)."""
    counter = getattr(os, "process_cpu_count", None)  # Python 3.13+
    if counter is not None:
        return max(1, counter() or 1)
    if hasattr(os, "sched_getaffinity"):
        return max(len(os.sched_getaffinity(0)), 1)
    return os.cpu_count() or 1


def requested_threads() -> int | None:
    """The thread count TILELANG_CPU_THREADS asks for (None when unset or invalid)."""
    raw = os.environ.get(THREADS_ENV, "").strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else None


def setting_error() -> str | None:
    """Why TILELANG_CPU_THREADS cannot be used, and the fix (None when it can)."""
    raw = os.environ.get(THREADS_ENV, "").strip()
    if not raw or requested_threads() is not None:
        return None
    return (f"{THREADS_ENV}={raw!r} is not a positive integer: set it to the number of threads "
            f"CPU kernels should use (1 to {available_cpus()} on this machine), or unset it to use "
            "every available CPU")


def configure_thread_pool() -> int | None:
    """Set TVM_NUM_THREADS (and the spin count) for the pool TVM has not created yet;
    returns the thread count set (None when TVM's own variables, or an invalid
    TILELANG_CPU_THREADS, leave it alone)."""
    if not os.environ.get(SPIN_ENV, "").strip():
        os.environ[SPIN_ENV] = str(SPIN_COUNT)
    count = requested_threads()
    if setting_error() is not None:
        return None
    if count is None:
        if any(os.environ.get(name, "").strip() for name in _TVM_ENV):
            return None
        count = available_cpus()
    os.environ["TVM_NUM_THREADS"] = str(count)
    return count
