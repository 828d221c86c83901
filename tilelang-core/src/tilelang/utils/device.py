"""Upstream's ``tilelang.utils.device`` helpers its benchmarks import."""

from __future__ import annotations


def get_available_cpu_count() -> int:
    """The CPUs this process may run on (its affinity mask, else the machine's count):
    the compile pools' worker count."""
    from ..cpu.threads import available_cpus

    return available_cpus()


__all__ = ["get_available_cpu_count"]
