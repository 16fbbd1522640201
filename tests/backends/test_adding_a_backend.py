"""docs/adding-a-backend.md is a test: its module, registry line and test are taken from the page, the module is
registered the way the page says a backend outside infermeter is, and it must honour the backend contract, pass its
own test and run through the real CLI."""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

import backend_contract as contract
from cli_helpers import load_json, run_cli
from infermeter.backends.base import Backend
from infermeter.backends.registry import ENV_VAR, REGISTRY, backend_names, get_backend, register, unregister

DOC = Path(__file__).resolve().parents[2] / "docs" / "adding-a-backend.md"
# The module's name while tested: not the one the page gives, so that nothing in the package is shadowed.
MODULE = "adding_a_backend_example"


def example_blocks() -> dict[str, str]:
    """The page's example code blocks by marker (`<!-- example: NAME -->` before a python block)."""
    pattern = re.compile(r"<!-- example: (\w+) -->\n```python\n(.*?)```", re.DOTALL)
    return dict(pattern.findall(DOC.read_text()))


def registry_line() -> tuple[str, str, str]:
    """(name, task, module:Class) of the page's registry line, which must be one `Registered(...)` call."""
    line = example_blocks()["registry"].strip()
    assert line.count("\n") == 0 and line.endswith(","), "the registry entry is one line of the REGISTRY tuple"
    call = ast.parse(line.rstrip(","), mode="eval").body
    assert isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "Registered"
    name, task, target = (str(arg.value) for arg in call.args if isinstance(arg, ast.Constant))
    return name, task, target


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """The page's module written to a temporary folder and registered; (backend name, that folder)."""
    folder = tmp_path_factory.mktemp("example")
    (folder / f"{MODULE}.py").write_text(example_blocks()["module"])
    name, task, target = registry_line()
    sys.path.insert(0, str(folder))  # spawned workers receive the parent's sys.path
    register(name, f"{MODULE}:{target.split(':')[1]}", task)
    try:
        yield name, folder
    finally:
        unregister(name)
        sys.path.remove(str(folder))
        sys.modules.pop(MODULE, None)


def test_the_page_adds_a_backend_in_three_files() -> None:
    blocks = example_blocks()
    assert set(blocks) == {"module", "registry", "test"}
    name, task, target = registry_line()
    module, _, cls = target.partition(":")
    # The module lives with the built-in backends, and the class it names is the one the module defines.
    assert task == "infer" and module.startswith("infermeter.backends.")
    assert name not in {entry.name for entry in REGISTRY}, "the example is not shipped as a built-in backend"
    assert f"class {cls}(Backend):" in blocks["module"] and f'name = "{name}"' in blocks["module"]
    text = DOC.read_text()
    three = (
        "src/infermeter/backends/<name>.py",
        "src/infermeter/backends/registry.py",
        "tests/backends/test_<name>.py",
    )
    assert "**three files**" in text and all(f"`{path}`" in text for path in three)


def test_the_example_backend_honours_the_contract(example: tuple[str, Path], tmp_path: Path) -> None:
    name, _ = example
    cls = get_backend(name)
    assert issubclass(cls, Backend) and name in backend_names()
    contract.check_declaration(cls, name)
    contract.check_capabilities(cls)
    spec = contract.contract_model(cls, tmp_path)
    case = contract.contract_case(spec, name)
    precision = contract.check_runs(cls, spec, case)
    assert precision == "fp32"
    contract.check_isolated(spec, case, precision)
    onnx_file = contract.onnx_file_model()  # it reads ONNX, so it takes an .onnx file as it is
    contract.check_runs(cls, onnx_file, contract.contract_case(onnx_file, name, batch=1))


def test_the_example_test_passes(example: tuple[str, Path]) -> None:
    module = ModuleType("example_test")
    exec(compile(example_blocks()["test"], str(DOC), "exec"), module.__dict__)  # the page's own test code
    tests = [value for key, value in vars(module).items() if key.startswith("test_") and callable(value)]
    assert tests, "the page's test block defines no test"
    for test in tests:
        test()


def test_the_cli_runs_the_example_registered_through_the_environment(example: tuple[str, Path], tmp_path: Path) -> None:
    name, folder = example
    env = {ENV_VAR: f"{name}={MODULE}:{registry_line()[2].split(':')[1]}", "PYTHONPATH": str(folder)}
    bad = run_cli("bench", "tiny_cnn", "--backend", name, "-O", f"{name}.check_shapes=maybe", env=env)
    assert bad.returncode == 2, bad.stderr
    assert f"{name}.check_shapes='maybe'" in bad.stderr + bad.stdout
    out = tmp_path / "results.json"
    fast = ("--iterations", "3", "--warmup", "1", "--min-time", "0.2", "--max-time", "2", "--target-ci", "0")
    done = run_cli(
        "bench", "tiny_cnn", "--backend", name, "--batch", "1", *fast, "--no-history", "--no-roofline",
        "-O", f"{name}.check_shapes=on", "-o", str(out), env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (case,) = load_json(out)["cases"]
    assert (case["backend"], case["status"], case["precision_effective"]) == (name, "ok", "fp32"), case.get("error")
    assert case["options"] == {f"{name}.check_shapes": "on"}
