"""The extras as the program names them: install lines, the missing-package safety net, and their agreement with
pyproject.toml and the Makefile (one torch pin, one list of extras)."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

import pytest

from infermeter.backends.registry import backend_names, get_backend, require_torch_form
from infermeter.core.errors import MissingExtra
from infermeter.core.extras import (
    MODULE_EXTRAS,
    install_line,
    missing_extra_error,
    require_extra,
    torch_requirement,
)
from infermeter.models.resolve import resolve_model
from venv_cells import ROOT, optional_dependencies


def test_every_named_extra_exists_in_pyproject() -> None:
    declared = set(optional_dependencies())
    named = set(MODULE_EXTRAS.values())
    named |= {extra for name in backend_names() if (extra := get_backend(name).install_extra)}
    assert named <= declared, named - declared


def test_the_torch_pin_is_written_once() -> None:
    pins = [r for r in optional_dependencies()["torch"] if r.startswith("torch")]
    assert pins == [torch_requirement()]  # the installed metadata agrees with the source
    makefile = (ROOT / "Makefile").read_text()
    assert "TORCH_VERSION := $(shell" in makefile, "the Makefile must read the pin from pyproject.toml"
    others = [r for extra in optional_dependencies().values() for r in extra if re.match(r"torch\W", r)]
    assert others == pins, "only the torch extra pins torch; the others include it"


def test_install_lines_put_the_cpu_torch_first_where_torch_comes() -> None:
    assert install_line("onnxruntime") == "pip install 'infermeter[onnxruntime]'"
    for extra in ("torch", "text-models", "all-cpu"):
        line = install_line(extra)
        first, then = line.split(", then ")
        assert first == f"pip install {torch_requirement()} --index-url https://download.pytorch.org/whl/cpu"
        assert then == f"pip install 'infermeter[{extra}]'"


def test_missing_module_becomes_its_extra_through_causes() -> None:
    cause = ModuleNotFoundError("No module named 'openvino'", name="openvino.runtime")
    try:
        try:
            raise cause
        except ImportError as exc:
            raise RuntimeError("wrapped") from exc
    except RuntimeError as wrapped:
        error = missing_extra_error(wrapped)
    assert isinstance(error, MissingExtra) and "pip install 'infermeter[openvino]'" in str(error)
    metadata = missing_extra_error(importlib.metadata.PackageNotFoundError("ai-edge-litert"))
    assert metadata is not None and "'infermeter[tflite]'" in str(metadata)
    assert missing_extra_error(ModuleNotFoundError("x", name="infermeter.nope")) is None  # a bug stays a bug
    assert missing_extra_error(ValueError("torch")) is None


def test_require_extra_names_what_is_missing() -> None:
    require_extra("serve", ["json"], "nothing")  # present: no error
    with pytest.raises(MissingExtra, match=r"`x` needs no_such_mod_xyz, not installed here: pip install 'infermeter\["):
        require_extra("serve", ["json", "no_such_mod_xyz"], "`x`")


def test_a_torch_model_without_torch_is_refused_only_for_real_backends(monkeypatch: pytest.MonkeyPatch) -> None:
    import infermeter.core.extras as extras

    monkeypatch.setattr(extras, "missing_modules", lambda modules: list(modules))
    spec = resolve_model("tiny_cnn")
    require_torch_form([spec], ["null"])  # the synthetic backend never reads the model
    with pytest.raises(MissingExtra, match=r"tiny_cnn is defined in PyTorch, which is not installed: pass an \.onnx"):
        require_torch_form([spec], ["null", "onnxruntime"])


def test_an_uncaught_missing_module_is_one_line_not_an_internal_error(tmp_path: Path) -> None:
    # A command module whose import fails the way a missing optional package does, run through the real entry point.
    code = (
        "import sys, click; from infermeter.cli import app as a\n"
        "@click.command('boom')\n"
        "def boom():\n"
        "    raise ModuleNotFoundError(\"No module named 'nncf'\", name='nncf')\n"
        "a.app.add_command(boom); a.main(['boom'])\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == "error: nncf is not installed: pip install 'infermeter[quantize]'"
