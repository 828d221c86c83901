"""Bar chart of a families run: the ratio torch ms / TileLang ms per family/case (above 1,
TileLang is faster), bars coloured by family, a line at parity and at the issue's 0.8x
floor; a wrong result is hatched and labelled, a case that failed is labelled at zero.

    python benchmarks/plot_families.py results.json out.png [--title TEXT]

Needs matplotlib (`pip install tilelang-core[bench]`); runs anywhere, not only on the GPU
host that wrote the JSON (benchmarks/families.py --json).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

FLOOR = 0.8  # issue 14: no family below 0.8x without an explanation of what bounds it


def bar_label(record: dict[str, Any]) -> str:
    return f"{record['name']}\n{record.get('case', '')}"


def plot(records: list[dict[str, Any]], out: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only: the GPU host has no display
    import matplotlib.pyplot as plt

    if not records:
        raise SystemExit("no records to plot: the JSON holds an empty list")
    families = list(dict.fromkeys(r["name"] for r in records))
    colours = {name: plt.get_cmap("tab10")(i % 10) for i, name in enumerate(families)}
    ratios = [r.get("ratio") or 0.0 for r in records]
    fig, ax = plt.subplots(figsize=(max(8.0, 0.55 * len(records) + 2), 5.5))
    bars = ax.bar(range(len(records)), ratios, color=[colours[r["name"]] for r in records], edgecolor="black",
                  linewidth=0.6)
    top = max([*ratios, 1.2])
    for bar, record, ratio in zip(bars, records, ratios, strict=True):
        if record.get("ratio") is None:
            ax.text(bar.get_x() + bar.get_width() / 2, 0.02 * top, "error", rotation=90, ha="center", va="bottom",
                    fontsize=8, color="red")
            continue
        wrong = record.get("correct") is False
        if wrong:
            bar.set_hatch("///")
            bar.set_edgecolor("red")
        ax.text(bar.get_x() + bar.get_width() / 2, ratio + 0.01 * top, f"{ratio:.2f}" + (" wrong" if wrong else ""),
                ha="center", va="bottom", fontsize=7, rotation=90 if wrong else 0)
    ax.axhline(1.0, color="black", linewidth=1.0, label="parity with torch")
    ax.axhline(FLOOR, color="grey", linewidth=1.0, linestyle="--", label=f"{FLOOR}x")
    ax.set_xticks(range(len(records)), [bar_label(r) for r in records], rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("torch time / TileLang time")
    ax.set_ylim(0, top * 1.15)
    ax.set_title(title)
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=130)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path, help="the JSON of benchmarks/families.py --json")
    parser.add_argument("out", type=Path, help="the PNG to write")
    parser.add_argument("--title", default="TileLang vs torch, per benchmark family (higher is better)")
    args = parser.parse_args(argv)
    try:
        records = json.loads(args.results.read_text())
    except (OSError, ValueError) as exc:
        raise SystemExit(f"{args.results}: cannot read the results JSON ({exc}); write it with "
                         "benchmarks/families.py --json") from exc
    if not isinstance(records, list) or not all(isinstance(r, dict) and "name" in r for r in records):
        raise SystemExit(f"{args.results}: not a families run (a list of records with 'name'); "
                         "write it with benchmarks/families.py --json")
    plot(records, args.out, args.title)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
