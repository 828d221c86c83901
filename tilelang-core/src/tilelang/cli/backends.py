"""``tilelang backends list [--json]`` and ``tilelang backends show NAME``.

``list`` answers "what is installed, from which distribution, usable here or why not" in one
table: a row per target backend, per execution backend, and per plugin entry point that
contributed nothing (failed, disabled, conflict, incompatible) — a broken plugin must be
visible where users look for their backend. The JSON form is documented in
:mod:`tilelang.cli.report`. ``show`` prints everything known about one name.
"""

from __future__ import annotations

import inspect
import json
import shutil
import sys
import textwrap
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import click

from tilelang.backend.hints import EXECUTION_EXTRAS, install_hint
from tilelang.backend.registry import REGISTRY, origin
from tilelang.backend.resolution import execution_specs
from tilelang.plugins import PluginRecord

from .report import BackendEntry, Report, collect, first_line, plugin_to_json, probe

#: Exit status for an unknown NAME, the same as click's usage errors.
EXIT_UNKNOWN_NAME = 2


class UnknownNameError(click.ClickException):
    """``show`` was given a name that no backend or entry point has."""

    exit_code = EXIT_UNKNOWN_NAME


@click.group("backends")
def backends() -> None:
    """Inspect installed target backends, execution backends and plugins."""


@backends.command("list")
@click.option(
    "--json", "as_json", is_flag=True, help="Print one JSON object (schema: tilelang.cli.report)."
)
@click.option(
    "--probe", is_flag=True,
    help="Also run the availability checks that import TVM (slower: seconds, not a fraction of one).",
)
def list_command(as_json: bool, probe: bool) -> None:
    """List backends, where they come from, and whether they can run here."""
    report = collect(probe_tvm=probe)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
        return
    rows = list_rows(report)
    # On a terminal the status column wraps at spaces to the terminal's width; piped or
    # redirected, nothing wraps. Either way no cell is cut inside a word, so every name,
    # version and reason can be read and grepped whole.
    width = shutil.get_terminal_size().columns if sys.stdout.isatty() else None
    click.echo(f"TileLang {report.tilelang_version} backends")
    click.echo("\n".join(plain_table(LIST_COLUMNS, rows, width)))
    click.echo("\n".join([report.auto_target.describe(), *missing_lines(report)]))


LIST_COLUMNS = ("kind", "name", "entry point", "distribution", "target kinds", "execution backends", "status")


def list_rows(report: Report) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for entry in report.target_backends:
        rows.append(_cells("target", entry, ", ".join(entry.target_kinds), _exec_cell(entry)))
    for entry in report.execution_backends:
        rows.append(_cells("execution", entry, "", ""))
    for record in report.problem_plugins():
        dist = f"{record.distribution} {record.version}".strip()
        status = f"{record.status}: {first_line(record.error)}"
        rows.append(("plugin", record.name, record.name, dist, "", "", status))
    return rows


def missing_lines(report: Report) -> list[str]:
    return [f"not installed: {name} ({hint})" for name, hint in report.missing]


def plain_table(headers: tuple[str, ...], rows: list[tuple[str, ...]], width: int | None = None) -> list[str]:
    """Aligned columns; with a width, the last column wraps at spaces (never inside a word)."""
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows)]
    indent = sum(widths[:-1]) + 2 * (len(widths) - 1)
    last = max(24, width - indent - 1) if width is not None else None

    def lines(cells: tuple[str, ...]) -> list[str]:
        head = "  ".join(cell.ljust(w) for cell, w in zip(cells[:-1], widths))
        wrapped = textwrap.wrap(cells[-1], last, break_long_words=False, break_on_hyphens=False) \
            if last is not None and cells[-1] else [cells[-1]]
        return [f"{head}  {wrapped[0]}".rstrip(), *(" " * indent + part for part in wrapped[1:])]

    rule = "  ".join("-" * w for w in widths[:-1]) + "  " + "-" * min(widths[-1], last or widths[-1])
    return [*lines(headers), rule, *(line for row in rows for line in lines(row))]


def _cells(kind: str, entry: BackendEntry, kinds: str, execs: str) -> tuple[str, ...]:
    dist = f"{entry.distribution} {entry.version}".strip()
    return (kind, entry.name, entry.entry_point or "-", dist, kinds, execs, entry.status_text())


def _exec_cell(entry: BackendEntry) -> str:
    """Execution backends in preference order, flagging those not installed (with the pip
    extra that installs them) and those that serve it from another distribution."""
    cells = []
    for name in entry.execution_backends:
        if name not in REGISTRY.execution_backends:
            cells.append(f"{name} (not installed: {install_hint(name, EXECUTION_EXTRAS)})")
        elif name in entry.external_execution_backends:
            cells.append(f"{name} (from {origin('execution', name)[0]})")
        else:
            cells.append(name)
    return ", ".join(cells)


@backends.command("show")
@click.argument("name")
def show_command(name: str) -> None:
    """Show everything known about one target backend, execution backend or plugin."""
    report = collect(probe_tvm=True)  # one backend's details: every check runs
    sections: list[list[str]] = []
    if name in REGISTRY.backends:
        sections.append(target_lines(name, report))
    if name in REGISTRY.execution_backends:
        sections.append(execution_lines(name, report))
    sections.extend(plugin_lines(r) for r in report.plugins if r.name == name)
    if not sections:
        known = sorted(
            set(REGISTRY.backends) | set(REGISTRY.execution_backends) | {r.name for r in report.plugins}
        )
        raise UnknownNameError(
            f"no target backend, execution backend or plugin named {name!r}; "
            f"known names: {', '.join(known) or 'none'}"
        )
    click.echo("\n\n".join("\n".join(lines) for lines in sections))


def target_lines(name: str, report: Report) -> list[str]:
    module = REGISTRY.backends[name]
    entry = next(e for e in report.target_backends if e.name == name)
    lines = [f"target backend {name!r}", *_common_lines(entry, report, "backends")]
    lines.append(f"  target kinds: {', '.join(module.target_kinds)}")
    predicate = module.supports_target
    lines.append(
        f"  supports_target: {_describe(predicate) if predicate else 'every target of its kinds'}"
    )
    lines.append(f"  aliases: {', '.join(module.aliases) or 'none'}")
    if module.default_target is not None:
        lines.append(f"  default target: {_safe_call(module.default_target)}")
    if module.canonicalize_target is not None:
        lines.append(f"  canonicalize_target: {_describe(module.canonicalize_target)}")
    lines += _table_lines("pipelines", module.pipelines)
    lines += _table_lines("device codegens", module.device_codegens)
    lines += _table_lines("host codegens", module.host_codegens)
    lines.append("    (any other host kind: TVM's target.build.<kind>)")
    lines += _list_lines("host codegen hooks", module.host_codegen_hooks)
    lines.append(f"  device toolchain: {_describe(module.toolchain) if module.toolchain is not None else 'none'}")
    lines.append(f"  priority: {module.priority}")
    lines.append(
        "  accepts execution backends from other distributions: "
        + _yes(module.accepts_external_execution_backends)
    )
    lines.append("  execution backends (auto preference order):")
    for i, spec in enumerate(execution_specs(module), 1):
        impl = REGISTRY.execution_backends.get(spec.name)
        if impl is None:
            state = f"not installed ({install_hint(spec.name, EXECUTION_EXTRAS)})"
        else:
            # Both sides must agree, as in context resolution: the execution backend's
            # own check, then the target backend's per-spec check.
            why = probe(impl.unavailable_reason) or probe(spec.is_available)
            dist, version = origin("execution", spec.name)
            state = f"from {dist} {version}".strip()
            if module.spec(spec.name) is None:
                state += " (not listed: it says it serves this backend)"
            state += f", unavailable: {why}" if why else ", available"
        lines.append(f"    {i}. {spec.name}: {state}")
        lines.append(
            f"       requires host codegen: {_yes(spec.requires_host_codegen)}; "
            f"requires device compile: {_yes(spec.requires_device_compile)}"
            + (f"; supports_target: {_describe(spec.supports_target)}" if spec.supports_target else "")
        )
    return lines


def execution_lines(name: str, report: Report) -> list[str]:
    backend = REGISTRY.execution_backends[name]
    entry = next(e for e in report.execution_backends if e.name == name)
    lines = [f"execution backend {name!r}", *_common_lines(entry, report, "execution_backends")]
    lines.append(f"  implementation: {_describe(type(backend))}")
    lines.append(f"  version (cache key): {_safe_call(lambda: backend.version, str)}")
    lines.append(f"  used by target backends: {', '.join(entry.used_by) or 'none'}")
    for group in entry.serves:
        lines.append(
            f"  serves: target backends {', '.join(group['target_backends']) or 'any that accept it'}; "
            f"target kinds {', '.join(group['target_kinds']) or 'any'}"
        )
    return lines


def plugin_lines(record: PluginRecord) -> list[str]:
    data = plugin_to_json(record)
    lines = [f"plugin entry point {record.name!r}"]
    lines.append(f"  distribution: {record.distribution} {record.version}".rstrip())
    lines.append(f"  value: {record.value}")
    lines.append(f"  status: {record.status}")
    for key in ("backends", "execution_backends", "detectors", "language_extensions"):
        lines.append(f"  {key.replace('_', ' ')}: {', '.join(data[key]) or 'none'}")
    if record.error:
        lines.append("  error:")
        lines += [f"    {line}" for line in record.error.rstrip().splitlines()]
    return lines


def _common_lines(entry: BackendEntry, report: Report, attr: str) -> list[str]:
    """Origin, status and description: what every backend section starts with."""
    providers = [r.name for r in report.plugins if entry.name in getattr(r, attr)]
    lines = [
        f"  distribution: {entry.distribution} {entry.version}".rstrip(),
        f"  plugin entry point: {', '.join(providers) or 'none (registered by hand)'}",
        f"  status: {entry.status}",
    ]
    if entry.reason is not None:
        lines.append(f"  reason: {entry.reason}")
    lines.append(f"  description: {entry.description or '-'}")
    return lines


def _table_lines(title: str, table: Mapping[str, Any]) -> list[str]:
    if not table:
        return [f"  {title}: none"]
    return [f"  {title}:", *(f"    {key}: {_describe(value)}" for key, value in table.items())]


def _list_lines(title: str, items: Iterable[Any]) -> list[str]:
    described = [_describe(item) for item in items]
    if not described:
        return [f"  {title}: none"]
    return [f"  {title}:", *(f"    {d}" for d in described)]


def _describe(value: Any) -> str:
    """A reference as written, a function or class as module:qualname, else repr."""
    if isinstance(value, str):
        return value
    if inspect.isfunction(value) or inspect.isclass(value) or inspect.ismethod(value):
        return f"{value.__module__}:{value.__qualname__}"
    return repr(value)


def _safe_call(func: Callable[[], Any], show: Callable[[Any], str] = repr) -> str:
    """Call a zero-argument manifest hook for display; its failure is displayed, not raised."""
    try:
        return show(func())
    except Exception as err:  # noqa: BLE001
        return f"<raised {type(err).__name__}: {err}>"


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"
