"""Reading a Triton model repository back (`infermeter serve REPO`): the pbtxt reader, the settings it yields,
and malformed or hand-broken repositories, each one clear error naming the file and the field."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from deploy_helpers import ORT_ID

from cli_helpers import run_cli
from infermeter.core.errors import UsageError
from infermeter.deploy.pbtxt import PbtxtError, parse
from infermeter.deploy.repository import read_repository
from infermeter.deploy.source import read_source
from infermeter.deploy.triton import write_repository


def test_pbtxt_reader_handles_the_syntax_triton_files_use() -> None:
    message = parse(
        """
        name: "m"  # a comment
        max_batch_size: 8
        input [ { name: "x" dims: [ -1, 3 ] data_type: TYPE_FP32 }, { name: 'y', dims: 1 } ]
        dynamic_batching { preferred_batch_size: [ 4, 8 ] max_queue_delay_microseconds: 100 }
        parameters { key: "k" value: { string_value: "v" } }
        parameters: { key: "k2" value < string_value: "w\\"" > };
        """
    )
    assert message.first("name") == "m" and message.first("max_batch_size") == 8
    inputs = message.messages("input")
    assert [i.first("name") for i in inputs] == ["x", "y"] and inputs[0].all("dims") == [-1, 3]
    assert inputs[0].first("data_type") == "TYPE_FP32"
    assert message.messages("dynamic_batching")[0].all("preferred_batch_size") == [4, 8]
    values = [p.messages("value")[0].first("string_value") for p in message.messages("parameters")]
    assert values == ["v", 'w"']
    with pytest.raises(PbtxtError, match="line 2"):
        parse('name: "m"\ninput [ { name: "x" }')
    with pytest.raises(PbtxtError, match="line 1"):
        parse("max_batch_size 8")


@pytest.fixture(scope="module")
def repo(optimize_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ORT FP32 case of the optimize folder written as a repository (model tiny_cnn)."""
    source = read_source(optimize_folder / "results.json", ORT_ID, "chosen", None, None)
    return write_repository(source, tmp_path_factory.mktemp("repo") / "model_repository").root


def test_settings_read_back_are_the_deployed_ones(repo: Path) -> None:
    model = read_repository(repo)
    assert (model.name, model.backend, model.precision) == ("tiny_cnn", "onnxruntime", "fp32")
    assert (model.max_batch, model.workers, model.threads) == (4, 1, 2)
    assert model.model_file == repo / "tiny_cnn" / "1" / "model.onnx"
    assert read_repository(repo / "tiny_cnn") == model  # a model folder alone reads the same


def _broken(repo: Path, tmp_path: Path, old: str = "", new: str = "") -> Path:
    copy = tmp_path / "model_repository"
    shutil.copytree(repo, copy)
    config = copy / "tiny_cnn" / "config.pbtxt"
    text = config.read_text()
    assert old in text
    config.write_text(text.replace(old, new, 1))
    return copy


@pytest.mark.parametrize(
    ("old", "new", "field", "says"),
    [
        ("dims: [ 3, 32, 32 ]", "dims: [ 3, 64, 64 ]", "input[0].dims", "disagree with model.onnx"),
        ("dims: [ 10 ]", "dims: [ 10, 2 ]", "output[0].dims", "logits is [-1, 10]"),
        ('platform: "onnxruntime_onnx"', 'platform: "onnxruntime_onxx"', "platform", "unknown platform"),
        ('platform: "onnxruntime_onnx"', 'platform: "tensorrt_plan"', "platform", "runs in Triton only"),
        ("TYPE_FP32", "TYPE_FP16", "input[0].data_type", "TYPE_FP16 but model.onnx has TYPE_FP32"),
        ("max_batch_size: 4", "max_batch_sise: 4", "max_batch_sise", "not a field of Triton's ModelConfig"),
        ("kind: KIND_CPU", "kind: KIND_GPU", "instance_group[0].kind", "runs on the CPU"),
        ('name: "tiny_cnn"', 'name: "other"', "name", "differs from the model folder"),
    ],
)
def test_hand_broken_config_names_file_and_field(
    repo: Path, tmp_path: Path, old: str, new: str, field: str, says: str
) -> None:
    broken = _broken(repo, tmp_path, old, new)
    with pytest.raises(UsageError) as error:
        read_repository(broken)
    message = str(error.value)
    assert message.startswith(f"{broken / 'tiny_cnn' / 'config.pbtxt'}: {field}: ") and says in message, message


def test_missing_version_folder_is_named(repo: Path, tmp_path: Path) -> None:
    broken = _broken(repo, tmp_path)
    shutil.rmtree(broken / "tiny_cnn" / "1")
    with pytest.raises(UsageError, match=r"config.pbtxt: version folder: .* has no numbered version folder"):
        read_repository(broken)


def test_serve_refuses_a_broken_repository_with_one_line(repo: Path, tmp_path: Path) -> None:
    broken = _broken(repo, tmp_path, "dims: [ 3, 32, 32 ]", "dims: [ 3, 32 ]")
    proc = run_cli("serve", str(broken), "--port", "0", timeout=60)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "config.pbtxt: input[0].dims" in lines[0]
