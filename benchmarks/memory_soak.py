"""Memory under real traffic (issue 32): does a transformer encoder fed variable-length requests grow, on which
engine, and which setting stops it?

Each part below is one `infermeter bench --soak N` run (every case in a worker process of its own, fed the same
seeded stream of lengths 8..512: warm-up, exploration until every length is seen, then a replay of the same
sequence; the growth slope is fitted over the replay). Parts: the three engines with free lengths; the same with
lengths padded into buckets 128/256/512; narrow bounds (lengths 8..128); malloc variants for torch and ONNX
Runtime's shrinking arena (jemalloc preloaded, MALLOC_ARENA_MAX=2; jemalloc from Debian's libjemalloc2); ONNX Runtime's
arena settings and OpenVINO's shape-cache capacity; recycling the session every 1,000 requests.

Usage:
    python benchmarks/memory_soak.py [--requests 5000] [--model minilm] [--out soak-results] [--write-docs]
    python benchmarks/memory_soak.py --quick        # a smoke run: bert_tiny, 300 requests, lengths 8..64

--write-docs writes docs/memory-soak.md (the table, the findings stated from the figures, and one SVG chart per
part under docs/img/). Each part's results file is kept in --out, with an HTML report of them all.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from infermeter.report.soak import soak_labels, soak_remedies, soak_table
from infermeter.results.io import read_results
from infermeter.results.records import SoakRecord, read_record
from infermeter.results.schema import CaseResult

ROOT = Path(__file__).resolve().parent.parent
ENGINES = ("torch", "openvino", "onnxruntime")


@dataclass(frozen=True)
class Part:
    """One bench invocation of the soak: its name, what it shows, and its flags beyond the common ones."""

    name: str
    title: str
    flags: tuple[str, ...]


def parts(quick: bool) -> list[Part]:
    """The soak's parts; --quick keeps one allocator and smaller ranges."""
    wide, narrow, buckets = ("seq=8..64", "seq=8..16", "seq=16,32,64") if quick else ("seq=8..512", "seq=8..128",
                                                                                      "seq=128,256,512")  # fmt: skip
    engines = [flag for engine in ENGINES for flag in ("-b", engine)]
    # tcmalloc (also supported by --allocator) is left out of the full run for time: one torch soak takes ~20 min here.
    allocators = "jemalloc" if quick else "jemalloc,arenas=2"
    return [
        Part("free", "Free lengths", (*engines, "--dynamic", wide)),
        Part("buckets", f"Lengths padded into buckets ({buckets})",
             (*engines, "--dynamic", wide, "--buckets", buckets)),
        Part("narrow", f"Narrow bounds ({narrow})", (*engines, "--dynamic", narrow)),
        # torch goes through glibc malloc, and ONNX Runtime's arena shrinkage hands memory back to it: the two
        # cases where the allocator decides (OpenVINO and ONNX Runtime's default arena keep their own pools).
        Part("allocators", f"Malloc variants ({allocators}; torch, and ONNX Runtime with arena_shrink=on)",
             ("-b", "torch", "-b", "onnxruntime:arena_shrink=on", "--dynamic", wide, "--allocator", allocators)),
        Part("arenas", "ONNX Runtime arena settings, OpenVINO's shape cache",
             ("-b", "onnxruntime:arena_shrink=on", "-b", "onnxruntime:cpu_arena=off",
              "-b", "onnxruntime:arena_extend=same_as_requested", "-b", "openvino:cache_capacity=0",
              "--dynamic", wide)),
        Part("recycle", "Recycling the session every 1,000 requests (serve --recycle-after)",
             ("-b", "torch", "-b", "openvino", "--dynamic", wide, "--soak-recycle", "100" if quick else "1000")),
    ]  # fmt: skip


def run_part(part: Part, model: str, requests: int, out: Path) -> Path:
    """One `infermeter bench --soak` run; its results file."""
    path = out / f"{part.name}.json"
    # No --case-timeout: a soak's bounds its worker's silences, and the soak reports progress at each sample.
    command = [sys.executable, "-m", "infermeter", "bench", model, *part.flags, "--soak", str(requests),
               "--threads", "1", "--no-roofline", "--no-history", "-o", str(path)]  # fmt: skip
    print(f"== {part.name}: {' '.join(command[2:])}", flush=True)
    started = time.perf_counter()
    subprocess.run(command, check=True, cwd=ROOT)
    print(f"   {time.perf_counter() - started:.0f} s", flush=True)
    return path


def svg_chart(cases: list[CaseResult], title: str) -> str:
    """A plain SVG line chart of RSS against requests, one line per case (no plotting library needed)."""
    labels = soak_labels(cases)
    series = [(labels[c.id], r.samples) for c in cases if (r := read_record(c, SoakRecord)) is not None]
    width, height, left, top, right, bottom = 760, 360, 60, 30, 230, 40
    xs = [row[0] for _, rows in series for row in rows] or [0, 1]
    ys = [row[2] for _, rows in series for row in rows] or [0, 1]
    x_max, y_min, y_max = max(xs) or 1, min(ys), max(ys)
    y_min, y_max = y_min - 0.05 * (y_max - y_min + 1), y_max + 0.05 * (y_max - y_min + 1)
    plot_w, plot_h = width - left - right, height - top - bottom

    def point(x: float, y: float) -> str:
        return f"{left + plot_w * x / x_max:.1f},{top + plot_h * (1 - (y - y_min) / (y_max - y_min)):.1f}"

    colors = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
              "#17becf", "#393b79", "#637939")  # fmt: skip
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
           f'font-size="11"><rect width="100%" height="100%" fill="white"/>',
           f'<text x="{left}" y="18" font-size="13">{title}</text>',
           f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#999"/>']  # fmt: skip
    for fraction in (0, 0.5, 1):
        y_value = y_min + fraction * (y_max - y_min)
        y_pos = top + plot_h * (1 - fraction)
        out.append(f'<text x="{left - 5}" y="{y_pos + 4:.1f}" text-anchor="end">{y_value:.0f}</text>')
        out.append(f'<text x="{left + plot_w * fraction:.1f}" y="{top + plot_h + 15}" text-anchor="middle">'
                   f"{x_max * fraction:,.0f}</text>")  # fmt: skip
    out.append(f'<text x="{left + plot_w / 2}" y="{height - 5}" text-anchor="middle">requests</text>')
    out.append(f'<text x="12" y="{top + plot_h / 2}" transform="rotate(-90 12 {top + plot_h / 2})" '
               'text-anchor="middle">RSS (MB)</text>')  # fmt: skip
    for index, (label, rows) in enumerate(series):
        color = colors[index % len(colors)]
        points = " ".join(point(row[0], row[2]) for row in rows)
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{points}"/>')
        legend_y = top + 14 * index + 8
        out.append(f'<line x1="{width - right + 10}" y1="{legend_y}" x2="{width - right + 25}" y2="{legend_y}" '
                   f'stroke="{color}" stroke-width="2"/>')  # fmt: skip
        out.append(f'<text x="{width - right + 30}" y="{legend_y + 4}">{label}</text>')
    return "\n".join([*out, "</svg>"]) + "\n"


def exploration_growth_mb(record: SoakRecord) -> float:
    """RSS at the start of the replay minus RSS at the start: what the first sight of each length cost."""
    replay_start = record.warmup_requests + record.exploration_requests
    before = [row[2] for row in record.samples if row[0] <= replay_start]
    return (before[-1] if before else record.start_rss_mb) - record.start_rss_mb


def findings(by_part: dict[str, list[CaseResult]]) -> list[str]:
    """What the figures say, per engine: did free lengths grow, and which variant stayed flat."""
    lines = []
    records = {(name, c.id): read_record(c, SoakRecord) for name, cases in by_part.items() for c in cases}
    free = by_part.get("free", [])
    for case in free:
        record = records[("free", case.id)]
        if record is None:
            lines.append(f"{case.backend}: {case.status} with free lengths ({case.error})")
            continue
        verdict = "kept growing" if record.growing else "did not keep growing"
        plateau = f", plateau from request {record.plateau_at:,}" if record.plateau_at is not None else ""
        line = (f"{case.backend} with free lengths {verdict} over the replay: {record.slope_mb_per_1k:+.2f} MB per "
                f"1,000 requests{plateau}; RSS {record.start_rss_mb:.0f} → {record.end_rss_mb:.0f} MB, "
                f"{exploration_growth_mb(record):+.0f} MB of it while new lengths were still arriving "
                "(the exploration)")  # fmt: skip
        flat = []
        for name, cases in by_part.items():
            labels = soak_labels(cases)
            for other in cases:
                found = records[(name, other.id)]
                if name != "free" and other.backend == case.backend and found is not None and not found.growing:
                    flat.append(f"{labels[other.id]} ({name}: {found.slope_mb_per_1k:+.2f} MB/1k)")
        if record.growing:
            line += "; stayed flat: " + (", ".join(flat) if flat else "none of its variants")
        bucketed = next((c for c in by_part.get("buckets", []) if c.backend == case.backend and c.ok), None)
        if bucketed is not None and case.latency_ms is not None and bucketed.latency_ms is not None:
            cost = bucketed.latency_ms.mean / case.latency_ms.mean - 1
            line += f"; padding into buckets cost {cost:+.0%} mean latency"
        lines.append(line)
    lines += peak_by_variant(by_part, records)
    growing = [c.backend for c in free if (r := records[("free", c.id)]) is not None and r.growing]
    if free:
        lines.insert(0, f"The seed's growth with free lengths is reproduced here by: {', '.join(growing)}."
                     if growing else "No engine kept growing with free lengths on this machine: the seed's growth "
                     "is not reproduced here (the charts show the replays flat).")  # fmt: skip
    crashed = [(n, c) for n, cases in by_part.items() for c in cases if c.status != "ok"]
    for name, case in crashed:
        lines.append(f"{soak_labels(by_part[name])[case.id]} ({name}): {case.status}: {case.error}")
    return lines


def peak_by_variant(
    by_part: dict[str, list[CaseResult]], records: dict[tuple[str, str], SoakRecord | None]
) -> list[str]:
    """Per engine, each variant's peak RSS against the free-length case's, lowest first: which setting bounds memory."""
    lines = []
    for case in by_part.get("free", []):
        base = records[("free", case.id)]
        if base is None:
            continue
        found = []
        for name, cases in by_part.items():
            labels = full_labels(cases)
            for other in cases:
                record = records[(name, other.id)]
                if name != "free" and other.backend == case.backend and record is not None:
                    change = record.peak_rss_mb / base.peak_rss_mb - 1
                    found.append((record.peak_rss_mb, f"{labels[other.id]} ({name}) {record.peak_rss_mb:,.0f} MB "
                                  f"({change:+.0%})"))  # fmt: skip
        if found:
            ranked = ", ".join(text for _, text in sorted(found))
            lines.append(f"{case.backend}'s peak RSS, free lengths {base.peak_rss_mb:,.0f} MB; its variants, lowest "
                         f"first: {ranked}")  # fmt: skip
    return lines


def full_labels(cases: list[CaseResult]) -> dict[str, str]:
    """The soak table's labels, with the options every case of the part shares added (the table leaves them out)."""
    labels = soak_labels(cases)
    for case in cases:
        shared = [f"{key.rsplit('.', 1)[-1]}={value}" for key, value in sorted(case.options.items())]
        labels[case.id] += "".join(f" {text}" for text in shared if text not in labels[case.id].split())
    return labels


KEPT_START, KEPT_END = (
    "<!-- written by hand: --write-docs keeps this block -->",
    "<!-- end of the hand-written block -->",
)


def kept_block(doc: Path) -> list[str]:
    """The hand-written block of the existing page (status, what the figures mean), which --write-docs keeps."""
    text = doc.read_text() if doc.exists() else ""
    if KEPT_START not in text or KEPT_END not in text:
        return []
    return [KEPT_START + text.split(KEPT_START, 1)[1].split(KEPT_END, 1)[0] + KEPT_END, ""]


def write_docs(by_part: dict[str, list[CaseResult]], titles: dict[str, str], command: str, quick: bool) -> None:
    """docs/memory-soak.md and its charts (docs/img/memory-soak-PART.svg)."""
    images = ROOT / "docs" / "img"
    images.mkdir(parents=True, exist_ok=True)
    doc = ["# Memory under real traffic: a soak with variable lengths", "",
           f"Written by `{command}` (`benchmarks/memory_soak.py`). Each case runs in a worker process of its own, "
           "one thread, fed the same seeded stream of lengths; the slope is fitted over the replay of lengths "
           "already seen, so compiling or caching new shapes is not counted as growth. `growing`: the slope's 95% "
           "interval is above zero and its growth over the replay exceeds 2 MB (or 1% of the peak).", ""]  # fmt: skip
    if quick:
        doc += ["**Smoke run (`--quick`: bert_tiny, few requests, short lengths) on a loaded shared machine: the "
                "figures only show the machinery works. Rerun without --quick for the real figures.**", ""]  # fmt: skip
    page = ROOT / "docs" / "memory-soak.md"
    doc += kept_block(page)
    doc += ["## Findings", "", *[f"- {line}" for line in findings(by_part)], ""]
    for name, cases in by_part.items():
        table = soak_table(cases)
        if table is None:
            continue
        (images / f"memory-soak-{name}.svg").write_text(svg_chart(cases, titles[name]))
        rows = ["| " + " | ".join(row) + " |" for row in table.rows]
        doc += [f"## {titles[name]}", "", "| " + " | ".join(table.columns) + " |", "|" + "---|" * len(table.columns)]
        doc += [*rows, ""]
        doc += [f"- {line}" for line in soak_remedies(cases)]
        doc += ["", f"![{titles[name]}](img/memory-soak-{name}.svg)", ""]
    page.write_text("\n".join(doc).rstrip() + "\n")
    print(f"wrote {page}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smoke run: bert_tiny, 300 requests, lengths 8..64")
    parser.add_argument("--model", help="default minilm (bert_tiny with --quick)")
    parser.add_argument("--requests", type=int, help="requests per case (default 5000; 300 with --quick)")
    parser.add_argument("--out", type=Path, default=Path("soak-results"))
    parser.add_argument("--only", help="comma-separated parts to run (free,buckets,narrow,allocators,arenas,recycle)")
    parser.add_argument("--write-docs", action="store_true")
    parser.add_argument("--reuse", action="store_true", help="keep a part's results file in --out instead of rerunning")
    args = parser.parse_args()
    model = args.model or ("bert_tiny" if args.quick else "minilm")
    requests = args.requests or (300 if args.quick else 5000)
    args.out.mkdir(parents=True, exist_ok=True)
    chosen = [p for p in parts(args.quick) if not args.only or p.name in args.only.split(",")]
    files = {
        part.name: path if args.reuse and (path := args.out / f"{part.name}.json").exists()
        else run_part(part, model, requests, args.out)
        for part in chosen
    }  # fmt: skip
    by_part = {name: read_results(path).cases for name, path in files.items()}
    report = args.out / "report.html"
    subprocess.run([sys.executable, "-m", "infermeter", "report", *map(str, files.values()), "-o", str(report)],
                   check=False, cwd=ROOT)  # fmt: skip
    for line in findings(by_part):
        print(line)
    if args.write_docs:
        command = "python benchmarks/memory_soak.py" + (" --quick" if args.quick else "") + " --write-docs"
        write_docs(by_part, {p.name: p.title for p in chosen}, command, args.quick)


if __name__ == "__main__":
    main()
