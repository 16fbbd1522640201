"""`bench --data` and `--input NAME=VALUE`: real samples rotated and batched through the timed loop, constants for
control inputs, on ONNX Runtime with models whose inputs' values decide whether they run."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from real_input_models import branch_model, image_model, lookup_model

from cli_helpers import load_json, run_cli, run_main
from infermeter.core.case import DataSource
from infermeter.core.errors import InputSpecError, UsageError
from infermeter.models.feeds_data import batched_sets, constant_array, data_note
from infermeter.models.input_flags import parse_input_flags
from infermeter.models.inputs import InputSpec
from infermeter.models.samples import load_samples

pytest.importorskip("onnxruntime")
FAST = ["-b", "onnxruntime", "--warmup", "1", "--iterations", "5", "--min-time", "0.05", "--max-time", "1"]
FAST += ["--target-ci", "0", "--no-history", "--no-roofline"]


def _bench(*args: str, out: Path) -> tuple[int, str, list[dict]]:
    proc = run_cli("bench", *args, *FAST, "-o", str(out))
    cases = load_json(out)["cases"] if out.is_file() else []
    return proc.returncode, proc.stdout + proc.stderr, cases


def test_input_flags_split_shapes_from_values() -> None:
    shapes, values = parse_input_flags(["x:1x4", "sr=16000", "gain = 0.5", "flag=true"])
    assert shapes == (("x", (1, 4)),)
    assert values == (("sr", "16000"), ("gain", "0.5"), ("flag", "1"))
    with pytest.raises(UsageError, match="not a number"):
        parse_input_flags(["sr=fast"])
    with pytest.raises(UsageError, match="two values"):
        parse_input_flags(["sr=1", "sr=2"])


def test_constants_take_the_input_dtype_and_shape() -> None:
    scalar = constant_array(InputSpec("sr", "int64", shape=()), "16000", ())
    assert scalar.shape == () and scalar.dtype == np.int64 and int(scalar) == 16000
    state = constant_array(InputSpec("state", "float32", shape=(2, "batch", 8)), "0", (2, 3, 8))
    assert state.shape == (2, 3, 8) and not state.any()
    with pytest.raises(InputSpecError, match="whole numbers"):
        constant_array(InputSpec("sr", "int64", shape=()), "0.5", ())


def test_samples_are_stacked_along_the_batch_and_wrap_around(tmp_path: Path) -> None:
    spec = InputSpec("idx", "int64", shape=("batch", 1))
    np.savez(tmp_path / "three.npz", idx=np.array([[0], [1], [2]]))
    samples = load_samples([spec], str(tmp_path / "three.npz"))
    sets = batched_sets([spec], samples, 4, 2)
    assert [s["idx"].ravel().tolist() for s in sets] == [[0, 1, 2, 0], [1, 2, 0, 1]]
    source = DataSource("three.npz", "abc", samples.count)
    assert "reused" in (data_note(source, 4, 2) or "")
    assert "2 of its 3 samples" in (data_note(source, 1, 2) or "")
    assert data_note(source, 1, 3) is None


def test_a_control_input_set_with_input_runs_the_branch_generated_values_break(tmp_path: Path) -> None:
    model = branch_model(tmp_path / "branch.onnx")
    code, output, generated = _bench(model, "--batch", "2", out=tmp_path / "generated.json")
    assert code == 0, output
    assert generated[0]["status"] == "failed" and "Gather" in generated[0]["error"], generated[0]["error"]
    code, output, cases = _bench(
        model, "--batch", "2", "--input", "sr=16000", "--input", "x:1x4", out=tmp_path / "r.json"
    )
    assert code == 0, output
    case = cases[0]
    assert case["status"] == "ok", case["error"]
    assert case["input_values"] == {"sr": "16000"}
    assert case["shapes"]["input_shapes"] == {"x": [2, 4], "sr": []}
    assert case["id"] != generated[0]["id"]  # a constant is part of what was measured


def test_npz_with_fewer_samples_than_the_batch_is_reused_with_a_note(tmp_path: Path) -> None:
    model = lookup_model(tmp_path / "lookup.onnx")
    np.savez(tmp_path / "three.npz", idx=np.array([[0], [5], [9]], dtype=np.int64))
    code, output, cases = _bench(model, "--batch", "4", "--data", str(tmp_path / "three.npz"), out=tmp_path / "r.json")
    assert code == 0, output
    assert "3 samples for 4 input sets of batch 4 (16 rows): samples are reused" in " ".join(output.split())
    case = cases[0]
    assert case["status"] == "ok", case["error"]
    assert case["shapes"]["input_shapes"] == {"idx": [4, 1]}
    assert case["data"]["samples"] == 3 and case["data"]["ref"] == str(tmp_path / "three.npz")
    assert any("reused" in note for note in case["notes"])
    # Other data, another case: results on different data never share an id.
    np.savez(tmp_path / "three.npz", idx=np.array([[1], [2], [3]], dtype=np.int64))
    resumed = run_main("bench", "--resume", str(tmp_path / "r.json"))  # refused before any work: in this process
    assert resumed.returncode == 2 and "data" in resumed.stderr and "has changed" in resumed.stderr, resumed.stderr
    code, output, again = _bench(model, "--batch", "4", "--data", str(tmp_path / "three.npz"), out=tmp_path / "r2.json")
    assert code == 0, output
    assert again[0]["status"] == "ok" and again[0]["id"] != case["id"]
    assert again[0]["data"]["content_hash"] != case["data"]["content_hash"]


def test_an_image_folder_feeds_an_image_model(tmp_path: Path) -> None:
    image = pytest.importorskip("PIL.Image")
    folder = tmp_path / "images"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for index in range(5):
        image.fromarray(rng.integers(0, 256, (12, 10, 3), dtype=np.uint8)).save(folder / f"img{index}.png")
    model = image_model(tmp_path / "image.onnx")
    code, output, cases = _bench(model, "--batch", "2", "--data", str(folder), out=tmp_path / "r.json")
    assert code == 0, output
    case = cases[0]
    assert case["status"] == "ok", case["error"]
    assert case["shapes"]["input_shapes"] == {"x": [2, 3, 8, 8]}
    assert case["data"]["samples"] == 5


def test_a_python_function_yields_the_samples(tmp_path: Path) -> None:
    model = lookup_model(tmp_path / "lookup.onnx")
    source = tmp_path / "samples.py"
    source.write_text(
        "import numpy as np\n\n\ndef feeds():\n    for i in range(10):\n        yield {'idx': np.array([[i]])}\n"
    )
    code, output, cases = _bench(model, "--batch", "2", "--data", f"{source}:feeds", out=tmp_path / "r.json")
    assert code == 0, output
    assert cases[0]["status"] == "ok", cases[0]["error"]
    assert cases[0]["data"]["samples"] == 10
    assert "8 of its 10 samples are rotated" in " ".join(output.split())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--input", "rate=3"], "not an input of the model (its inputs: idx)"),
        (["--data", "missing.npz"], "does not exist"),
        (["--data", "{tmp}/wrong.npz"], "no array named 'idx'"),
        (["--data", "{tmp}/three.npz", "--shape-mode", "dynamic"], "--data feeds --shape-mode static"),
    ],
)
def test_bad_real_inputs_are_one_line_usage_errors(tmp_path: Path, args: list[str], message: str) -> None:
    model = lookup_model(tmp_path / "lookup.onnx")
    np.savez(tmp_path / "three.npz", idx=np.array([[0], [5], [9]], dtype=np.int64))
    np.savez(tmp_path / "wrong.npz", a=np.zeros((3, 1)), b=np.zeros((3, 1)))
    proc = run_main("bench", model, *[a.format(tmp=tmp_path) for a in args], *FAST)  # refused before any work
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in " ".join(proc.stderr.split()), proc.stderr
    assert "Traceback" not in proc.stderr


def test_parity_takes_a_constant_input_too(tmp_path: Path) -> None:
    model = branch_model(tmp_path / "branch.onnx")
    proc = run_cli("parity", model, "-b", "onnxruntime", "--input", "sr=16000", "--input", "x:2x4")
    assert proc.returncode == 0 and "PASS" in proc.stdout, proc.stdout + proc.stderr
    bad = run_main("parity", model, "-b", "onnxruntime", "--input", "rate=16000")
    assert bad.returncode == 2 and "rate" in bad.stderr, bad.stderr
