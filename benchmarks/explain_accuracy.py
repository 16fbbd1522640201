"""How far `infermeter explain` can be trusted (issue 46's targets), measured on this machine:

1. closure: each engine's attributed time (its units, data movement included) against its own timed P50, at 1
   and at 2 threads (target: within ±10% at 1 thread), for three pairs (ONNX Runtime vs OpenVINO, torch eager vs
   ONNX Runtime, torch eager vs TorchScript) on resnet18 and bert_tiny;
2. alignment: the share of the original ONNX nodes each engine's units cover (target ≥ 95%), the rest listed;
3. planted node: a model with one expensive MatMul among tiny ops; its block must rank first on every engine, and
   its share must agree within ±10 points with what removing it saves in measured P50 (the ablated twin replaces
   the MatMul by a Tile of the same output shape);
4. wall time of `explain` of two engines on resnet18, both profiling runs included (target ≤ 60 s on 2 cores);
5. torch eager vs TorchScript at batch 16: the gap and how much of it the profile explains.

    python benchmarks/explain_accuracy.py [--smoke] [-o explain_accuracy.json]

--smoke runs every step once on tiny_cnn and a small planted model with few iterations: it checks that the script
works; its figures mean nothing. Run the full form on a quiet machine (nothing else on the cores).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from infermeter.explain.run import ExplainRequest, explain_model
from infermeter.results.explain import ExplainRecord

PAIRS = (("onnxruntime", "openvino"), ("torch", "onnxruntime"), ("torch", "torchscript"))
CLOSURE_TOLERANCE = 0.10
COVERAGE_TARGET = 0.95
ABLATION_TOLERANCE_POINTS = 10.0
WALL_TARGET_S = 60.0
PLANTED = "planted_matmul"


@dataclass
class Settings:
    """What one form of the benchmark runs."""

    models: tuple[str, ...]
    threads: tuple[int, ...]
    iterations: int
    planted_width: int
    gap_batch: int
    gap_model: str


FULL = Settings(("resnet18", "bert_tiny"), (1, 2), 50, 512, 16, "resnet18")
SMOKE = Settings(("tiny_cnn",), (1,), 3, 64, 2, "tiny_cnn")


@dataclass
class Report:
    """Every figure, by step."""

    machine: dict[str, Any]
    closure: list[dict[str, Any]] = field(default_factory=list)
    planted: list[dict[str, Any]] = field(default_factory=list)
    wall: dict[str, Any] = field(default_factory=dict)
    gap: dict[str, Any] = field(default_factory=dict)


def _explain(model: str, engines: tuple[str, ...], threads: int, settings: Settings, batch: int = 1) -> ExplainRecord:
    request = ExplainRequest(
        model=model, engines=engines, threads=threads, batch=batch, iterations=settings.iterations, flops=False
    )
    return explain_model(request)


def closure_rows(record: ExplainRecord, pair: tuple[str, ...]) -> list[dict[str, Any]]:
    """Per engine of one explain run: attributed / P50, whether within the tolerance, coverage and the nodes left."""
    rows = []
    for engine in record.engines:
        ratio = engine.attributed_us / engine.p50_us if engine.attributed_us and engine.p50_us else None
        rows.append({
            "model": record.model, "pair": "/".join(pair), "threads": record.threads, "engine": engine.engine,
            "p50_us": engine.p50_us, "attributed_us": engine.attributed_us,
            "data_movement_us": engine.data_movement_us, "attributed_over_p50": ratio,
            "within_10pct": None if ratio is None else abs(ratio - 1) <= CLOSURE_TOLERANCE,
            "coverage": engine.coverage,
            "coverage_met": None if engine.coverage is None else engine.coverage >= COVERAGE_TARGET,
            "uncovered_nodes": engine.uncovered_nodes, "error": engine.error, "notes": engine.notes,
        })  # fmt: skip
    return rows


def planted_pair(folder: Path, width: int) -> tuple[Path, Path]:
    """The planted model (tiny ops around one [16, width] x [width, 4 width] MatMul) and its ablated twin."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)

    def build(planted: bool, path: Path) -> Path:
        heavy = (
            helper.make_node("MatMul", ["a2", "W"], ["m"], name=PLANTED)
            if planted
            else helper.make_node("Tile", ["a2", "reps"], ["m"], name="tile_instead")
        )
        nodes = [
            helper.make_node("Add", ["x", "b0"], ["a0"], name="add0"),
            helper.make_node("Relu", ["a0"], ["a1"], name="relu0"),
            helper.make_node("Mul", ["a1", "s0"], ["a2"], name="mul0"),
            heavy,
            helper.make_node("Sigmoid", ["m"], ["g"], name="sigmoid0"),
            helper.make_node("ReduceMean", ["g"], ["y"], name="mean0", keepdims=1),
        ]
        inits = [
            numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)
            for name, shape in (("b0", (width,)), ("s0", (width,)), ("W", (width, 4 * width)))
        ] + [numpy_helper.from_array(np.array([1, 4], np.int64), "reps")]
        graph = helper.make_graph(
            nodes, "planted", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16, width])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits,
        )  # fmt: skip
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        onnx.save(model, str(path))
        return path

    return build(True, folder / "planted.onnx"), build(False, folder / "ablated.onnx")


def planted_rows(settings: Settings, folder: Path) -> list[dict[str, Any]]:
    """Per engine: whether the planted block ranks first, its share, and the P50 saving of the ablated twin."""
    planted, ablated = planted_pair(folder, settings.planted_width)
    engines = ("onnxruntime", "openvino")
    full = _explain(str(planted), engines, 1, settings, batch=16)
    twin = _explain(str(ablated), engines, 1, settings, batch=16)
    rows = []
    for engine in engines:
        first = max(full.blocks, key=lambda b: b.time_us.get(engine, 0.0))
        block = next(b for b in full.blocks if PLANTED in b.nodes)
        p50 = next(e.p50_us for e in full.engines if e.engine == engine)
        p50_twin = next(e.p50_us for e in twin.engines if e.engine == engine)
        saving = (p50 - p50_twin) / p50 if p50 and p50_twin else None
        share = block.share.get(engine)
        points = abs(share - saving) * 100 if share is not None and saving is not None else None
        rows.append({
            "engine": engine, "ranks_first": PLANTED in first.nodes, "share": share, "ablation_saving": saving,
            "difference_points": points,
            "within_10_points": None if points is None else points <= ABLATION_TOLERANCE_POINTS,
        })  # fmt: skip
    return rows


def gap_figures(settings: Settings) -> dict[str, Any]:
    """torch eager vs TorchScript at the gap batch: both P50s, what each profile attributes, and the blocks that
    differ most (TorchScript's units are its operators' module scopes, placed by the eager call order)."""
    record = _explain(settings.gap_model, ("torch", "torchscript"), 1, settings, batch=settings.gap_batch)
    rows = {e.engine: e for e in record.engines}
    eager, script = rows["torch"], rows["torchscript"]
    top = [{"block": b.label, "torch_us": b.time_us.get("torch"), "torchscript_us": b.time_us.get("torchscript"),
            "difference_share": b.difference_share} for b in record.blocks[:5]]  # fmt: skip
    return {
        "model": settings.gap_model, "batch": settings.gap_batch, "torch_p50_us": eager.p50_us,
        "torchscript_p50_us": script.p50_us, "torch_unattributed_us": eager.unattributed_us,
        "torchscript_unattributed_us": script.unattributed_us, "top_blocks_by_difference": top,
        "findings": [f.text for f in record.findings][:10], "torchscript": script.error or "; ".join(script.notes),
    }  # fmt: skip


def machine() -> dict[str, Any]:
    """The CPU this ran on and how loaded it was."""
    import platform

    from infermeter.machine.environment import collect_environment

    env = collect_environment()
    return {"cpu_model": env.get("cpu_model"), "physical_cores": env.get("physical_cores"),
            "load_average": os.getloadavg(), "python": platform.python_version()}  # fmt: skip


def run(settings: Settings) -> Report:
    """Every step of the benchmark under `settings`."""
    report = Report(machine())
    for model in settings.models:
        for threads in settings.threads:
            for pair in PAIRS:
                start = time.perf_counter()
                record = _explain(model, pair, threads, settings)
                wall_s = time.perf_counter() - start
                report.closure += closure_rows(record, pair)
                if pair == PAIRS[0] and threads == settings.threads[0] and model == settings.models[0]:
                    report.wall = {"model": model, "pair": "/".join(pair), "wall_s": wall_s,
                                   "within_target": wall_s <= WALL_TARGET_S}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="explain-planted-") as folder:
        report.planted = planted_rows(settings, Path(folder))
    report.gap = gap_figures(settings)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="tiny models, few iterations: checks the script only")
    parser.add_argument("-o", "--output", type=Path, default=Path("explain_accuracy.json"))
    args = parser.parse_args()
    # A cache of its own: the wall time counts the ONNX export and every compilation, as a first run does.
    os.environ["INFERMETER_CACHE_DIR"] = tempfile.mkdtemp(prefix="explain-accuracy-cache-")
    report = run(SMOKE if args.smoke else FULL)
    args.output.write_text(json.dumps(report.__dict__, indent=2, default=str))
    for row in report.closure:
        ratio = "—" if row["attributed_over_p50"] is None else f"{row['attributed_over_p50']:.2f}"
        coverage = "—" if row["coverage"] is None else f"{row['coverage']:.0%}"
        print(f"{row['model']} {row['pair']} t{row['threads']} {row['engine']}: attributed/P50 {ratio}, "
              f"coverage {coverage}{' ' + row['error'] if row['error'] else ''}")  # fmt: skip
    for row in report.planted:
        share, saving = row["share"], row["ablation_saving"]
        print(f"planted {row['engine']}: ranks first {row['ranks_first']}, share {share}, ablation saving {saving}")
    print(f"wall: {report.wall}")
    print(f"gap: {report.gap['torch_p50_us']} vs {report.gap['torchscript_p50_us']} µs ({report.gap['torchscript']})")
    print(f"figures: {args.output}" + (" (smoke run: the figures mean nothing)" if args.smoke else ""))


if __name__ == "__main__":
    main()
