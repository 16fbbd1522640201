"""One identity for every result: case ids composed in one place (`infermeter.core.case`) and unchanged from the ids
results files already hold, and one comparison group for the plan and the reports (`--data` and constant inputs
included, so `report a.json b.json` never computes a speedup across different inputs)."""

from __future__ import annotations

import json
from pathlib import Path

from crafted_results import make_case, make_results
from infermeter.core.case import Case, DataSource
from infermeter.llm.backends.base import GenerateCase
from infermeter.load.generator import LoadRun
from infermeter.load.verdict import case_result, summarize
from infermeter.report.groups import comparison_group
from infermeter.report.merged import SourceFile, merge_results
from infermeter.report.summary import speedups
from infermeter.results.io import read_results, write_results
from infermeter.results.schema import case_from_dict, case_to_dict


def test_ids_of_every_kind_are_the_ones_older_files_hold() -> None:
    # Literal ids written by infermeter before the composers moved into one place: they must never change.
    plain = Case(
        "tiny_cnn",
        "onnxruntime",
        precision="fp32",
        batch=4,
        shape_mode="static",
        threads=2,
        options=(("onnxruntime.opt_level", "basic"),),
    )
    assert plain.id == "onnxruntime-fp32-b4-static-t2-7301c5d9f7dc"
    full = Case(
        "bert_tiny",
        "openvino",
        precision="int8",
        batch=1,
        shape_mode="dynamic",
        threads=1,
        dynamic=(("seq", (16, 32)),),
        streams=2,
        data=DataSource("/x.npz", "abc123", 3),
        input_values=(("sr", "16000"),),
        machine="xeon",
        allocator="jemalloc",
    )
    assert full.id == "openvino-int8-b1-dynamic-t1-a8856d1b54b1"
    gen = GenerateCase(
        "tiny-llama", "llama-cpp", prompt_len=16, gen_len=8, batch=2, threads=3, options=(("llama-cpp.n_batch", "64"),)
    )
    assert gen.id == "llama-cpp-p16-g8-b2-t3-llama-cpp.n_batch=64-1cbc86be"
    assert GenerateCase("tiny-llama:q4_k_m", "fake").id == "fake-p64-g32-b1-t1-6394d80a"
    run = LoadRun("server", 2.0, target_qps=50.0, latencies_ms=[1.0, 2.0, 3.0], elapsed_s=2.0, issued=3)
    load = case_result(summarize(run, None, batch=2), "tiny_cnn", "onnxruntime", "1", "fp32", "fp32",
                       {"onnxruntime.opt_level": "basic"}, "t", "http://x")  # fmt: skip
    assert load.id == "load-onnxruntime-fp32-b2-server-ea1d0bdddbde"


def test_data_and_constants_are_typed_fields_read_from_older_files_and_written_as_before() -> None:
    old = case_to_dict(make_case("onnxruntime"))
    assert "data" not in old and "input_values" not in old  # absent stays absent
    old["data"] = {"ref": "/d.npz", "content_hash": "h1", "samples": 5}
    old["input_values"] = {"sr": "16000"}
    case = case_from_dict(json.loads(json.dumps(old)))
    assert case.data == DataSource("/d.npz", "h1", 5) and case.input_values == {"sr": "16000"}
    assert "data" not in case.extra and case_to_dict(case) == old


def _with_data(backend: str, p50_ms: float, content_hash: str | None) -> dict[str, object]:
    case = make_case(backend, p50_ms=p50_ms)
    if content_hash is not None:
        case.data = DataSource("/d.npz", content_hash, 4)
    return case_to_dict(case)


def test_report_over_files_of_different_data_computes_no_speedup_across_them(tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    write_results(a, make_results([case_from_dict(_with_data("onnxruntime", 2.0, "data-one"))]))
    write_results(b, make_results([case_from_dict(_with_data("openvino", 1.0, "data-two"))]))
    merged = merge_results([SourceFile(str(p), read_results(p)) for p in (a, b)])
    first, second = merged.cases
    assert comparison_group(first) != comparison_group(second)
    # Each is the baseline of its own group: 1.0x, where one group would have claimed 2x.
    assert [s.ratio for s in speedups(merged.cases).values()] == [1.0, 1.0]
    same = make_results(
        [case_from_dict(_with_data("onnxruntime", 2.0, "d")), case_from_dict(_with_data("openvino", 1.0, "d"))]
    )
    assert [round(s.ratio or 0, 1) for s in speedups(same.cases).values()] == [1.0, 2.0]
    # The plan's group (a case to run) and the report's (a result) are the one definition: data splits both.
    one, two = (Case("m", "onnxruntime", data=DataSource("/d", h, 4)) for h in ("x", "y"))
    assert one.group_key != two.group_key
    assert Case("m", "onnxruntime").group_key == Case("m", "openvino", precision="int8").group_key


def test_a_generation_result_is_grouped_by_model_family_and_output_length_as_its_case() -> None:
    from infermeter.llm.runner import blank_generate_result

    q8, q4, longer = (
        GenerateCase("tiny-llama:q8_0", "fake", prompt_len=8, gen_len=4),
        GenerateCase("tiny-llama:q4_k_m", "fake", prompt_len=8, gen_len=4),
        GenerateCase("tiny-llama:q4_k_m", "fake", prompt_len=8, gen_len=16),
    )
    assert q8.group_key == q4.group_key != longer.group_key
    results = [blank_generate_result(case, "ok") for case in (q8, q4, longer)]
    assert comparison_group(results[0]) == comparison_group(results[1]) != comparison_group(results[2])
    # An inference ref may hold a colon (`file.py:factory`): its model is its own group.
    assert Case("a.py:one", "onnxruntime").group_key != Case("a.py:two", "onnxruntime").group_key
