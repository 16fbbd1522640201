"""infermeter's pytest plugin: `infermeter check` inside a team's own test suite.

Registered through the `pytest11` entry point, so it loads in every pytest run of an environment where infermeter
is installed; it is inert until a test asks for it: importing it imports pytest and the standard library only,
and it adds one marker and one fixture.

    # pyproject.toml
    [tool.infermeter.check]
    model = "src/mymodel/model.py:build"
    baseline = "git:origin/main"
    backends = ["onnxruntime"]
    threshold = "5%"

    # tests/test_model_ci.py
    def test_model_ci(infermeter_check):
        infermeter_check()                      # fails the test, naming each failed check

    @pytest.mark.infermeter_check(model="src/mymodel/other.py:build", backends=["onnxruntime", "openvino"])
    def test_other_model(infermeter_check):
        report = infermeter_check(raise_on_failure=False)
        assert report.ok

Settings: the table in the pyproject.toml of pytest's rootdir, then the marker's keywords, then the fixture call's
keywords. A relative model path is taken from the rootdir. The markdown summary is attached to the test's report
(shown with `-rA` or on failure) and appended to $GITHUB_STEP_SUMMARY when set.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

MARKER = "infermeter_check"


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker (a project with --strict-markers may use it)."""
    config.addinivalue_line(
        "markers",
        f"{MARKER}(**settings): settings for the infermeter_check fixture, as in [tool.infermeter.check] "
        "(model, baseline, backends, threshold, min_time, ...)",
    )


@pytest.fixture
def infermeter_check(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """A function that runs `infermeter check` with the project's settings and returns its `CheckReport`;
    unless called with `raise_on_failure=False`, a failed check fails the test with each failure's reason."""

    def run(raise_on_failure: bool = True, **settings: Any) -> Any:
        from infermeter.modelci.config import anchor_ref, apply_settings, config_from_pyproject
        from infermeter.modelci.run import run_check
        from infermeter.modelci.summary import render_markdown, step_summary_path, write_text

        root = Path(request.config.rootpath)
        pyproject = root / "pyproject.toml"
        config = config_from_pyproject(pyproject if pyproject.is_file() else None)
        marker = request.node.get_closest_marker(MARKER)
        config = apply_settings(config, dict(marker.kwargs) if marker else {}, f"@pytest.mark.{MARKER}")
        config = apply_settings(config, settings, "infermeter_check()")
        anchored = {"model": anchor_ref(config.model, root), "baseline": anchor_ref(config.baseline, root)}
        config = apply_settings(config, anchored, "infermeter_check()")
        report = run_check(config)
        markdown = render_markdown(report)
        request.node.add_report_section("call", "infermeter check", markdown)
        github = step_summary_path()
        if github is not None:
            write_text(github, markdown, append=True)
        if raise_on_failure and not report.ok:
            lines = [f"{outcome.name}: {outcome.reason}" for outcome in report.failures]
            pytest.fail("infermeter check failed:\n" + "\n".join(lines), pytrace=False)
        return report

    return run
