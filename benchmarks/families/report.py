"""The markdown table of a families run (one row per family/case)."""

from __future__ import annotations

from typing import Any


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, dict):
        return " ".join(f"{k}={v}" for k, v in value.items())
    return str(value).replace("|", "\\|").replace("\n", " ")


def _verdict(record: dict[str, Any]) -> str:
    if record.get("error") and record.get("tl_ms") is None:
        return "ERROR"
    return {True: "yes", False: "NO", None: ""}[record.get("correct")]


def markdown(records: list[dict[str, Any]], dry_run: bool = False) -> str:
    """Ratio = torch ms / TileLang ms (above 1: TileLang faster). A dry run lists each
    case's lowering/compile status instead of timings."""
    if dry_run:
        lines = ["| family | case | shape | status | variants | error |", "|---|---|---|---|---|---|"]
        for r in records:
            variants = r.get("variants") or []
            done = sum(v.get("status") != "failed" for v in variants)
            lines.append(f"| {r['name']} | {_cell(r.get('case'))} | {_cell(r.get('shape'))} | "
                         f"{_cell(r.get('status', 'failed'))} | {done}/{len(variants)} | {_cell(r.get('error'))} |")
        return "\n".join(lines) + "\n"
    header = ("| family | case | shape | config | TileLang ms | torch ms | metric | TileLang | torch | ratio "
              "| correct | max err (atol, rtol) | error |")
    lines = [header, "|" + "---|" * 13]
    for r in records:
        tol = f"{_cell(r.get('max_err'))} ({_cell(r.get('atol'))}, {_cell(r.get('rtol'))})" if "atol" in r else ""
        lines.append(" | ".join([
            f"| {r['name']}", _cell(r.get("case")), _cell(r.get("shape")), _cell(r.get("config")),
            _cell(r.get("tl_ms")), _cell(r.get("ref_ms")), _cell(r.get("metric")), _cell(r.get("tl_value")),
            _cell(r.get("ref_value")), _cell(r.get("ratio")), _verdict(r), tol, _cell(r.get("error")) + " |"]))
    return "\n".join(lines) + "\n"
