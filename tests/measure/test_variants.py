"""Backend variants (`-b NAME:KEY=VALUE`): one backend under two configurations in one run, interleaved and paired."""

from __future__ import annotations

from pathlib import Path

from cli_helpers import load_json, run_cli


def test_a_variant_is_its_own_case_in_the_same_group_paired_with_the_plain_backend(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    proc = run_cli(
        "bench", "tiny_cnn", "-b", "null", "-b", "null:latency_ms=2", "-O", "null.latency_ms=0.5",
        "--batch", "1", "--max-time", "1", "--min-time", "0.3", "-o", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    plain, variant = load_json(out)["cases"]
    assert plain["id"] != variant["id"] and plain["backend"] == variant["backend"] == "null"
    # The variant's setting wins over -O's; the plain case keeps -O's.
    assert variant["options"]["null.latency_ms"] == "2" and plain["options"]["null.latency_ms"] == "0.5"
    timing = variant["timing"]
    assert len(timing["rounds_p50_ms"]) > 1  # timed in interleaved rounds with the plain backend
    assert timing["paired"]["baseline_id"] == plain["id"] and timing["paired"]["ratio"] < 0.5  # 4x slower by design
    assert "null latency_ms=0.5" in proc.stdout and "null latency_ms=2" in proc.stdout


def test_a_misspelt_variant_is_a_usage_error_with_a_suggestion() -> None:
    proc = run_cli("bench", "tiny_cnn", "-b", "null:latncy_ms=2")
    assert proc.returncode == 2 and "did you mean latency_ms?" in proc.stderr, proc.stderr
    proc = run_cli("bench", "tiny_cnn", "-b", "null:latency_ms")
    assert proc.returncode == 2 and "is not KEY=VALUE" in proc.stderr, proc.stderr


def test_variants_that_differ_only_in_int8_options_are_one_case_at_fp32() -> None:
    from infermeter.measure.plan import Matrix, build_plan
    from infermeter.models.resolve import resolve_model

    matrix = Matrix(
        models=(resolve_model("tiny_cnn"),),
        backends=(("openvino",), ("openvino:int8_source=qdq",)),
        precisions=("fp32", "int8"),
        options=(("quantize.per_channel", "on"),),
    )
    cases = [item.chain[0] for item in build_plan(matrix)]
    # One fp32 case (the INT8 options dropped), two int8 cases (own NNCF graph and the cross-fed QDQ graph).
    assert [(c.precision, dict(c.options)) for c in cases] == [
        ("fp32", {}),
        ("int8", {"quantize.per_channel": "on"}),
        ("int8", {"openvino.int8_source": "qdq", "quantize.per_channel": "on"}),
    ]


def test_a_variant_gets_cold_start_passes_of_its_own() -> None:
    from infermeter.measure.coldstart import PASSES, cold_start_plan
    from infermeter.measure.plan import Matrix, build_plan
    from infermeter.models.resolve import resolve_model

    plan = build_plan(Matrix(models=(resolve_model("tiny_cnn"),), backends=(("null",), ("null:latency_ms=2",))))
    cold = [item.case for item in cold_start_plan(plan)]
    assert len(cold) == 2 * len(PASSES)
    assert sorted({c.option("null.latency_ms", "default") for c in cold}) == ["2", "default"]
