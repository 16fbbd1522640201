"""`infermeter deploy`: a Triton model repository (and a KServe InferenceService) from an optimize folder or a
results file, every value taken from the measurements."""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape

from infermeter.cli.common import stderr, stdout
from infermeter.core.errors import UsageError


@click.command("deploy")
@click.argument("source", type=click.Path(path_type=Path))
@click.option("--target", type=click.Choice(["triton", "kserve"]), default="triton", show_default=True)
@click.option("--output", "-o", type=click.Path(path_type=Path), help="Folder to write (default: SOURCE-deploy).")
@click.option("--case", "case_id", help="The case of a results file to deploy (needed when it holds several).")
@click.option(
    "--which",
    type=click.Choice(["chosen", "runner_up", "fallback"]),
    default="chosen",
    show_default=True,
    help="Which configuration of an optimize folder.",
)
@click.option(
    "--load",
    "load_file",
    type=click.Path(path_type=Path),
    help="Results of `infermeter load -o` / `tune-batching -o`: batching, instances and the replayed load.",
)
@click.option("--name", help="Model name in the repository (default: from the model).")
def deploy(
    source: Path,
    target: str,
    output: Path | None,
    case_id: str | None,
    which: str,
    load_file: Path | None,
    name: str | None,
) -> None:
    """Write a Triton model repository for SOURCE: the output folder of `infermeter optimize` (its pick) or a
    results file (with --case). `--target kserve` adds an InferenceService manifest. DEPLOY.md lists the files,
    each setting's origin and the perf_analyzer command that replays the measured load."""
    from infermeter.deploy.kserve import check_manifest, manifest, render_manifest, resources
    from infermeter.deploy.markdown import render_deploy_md
    from infermeter.deploy.source import read_source
    from infermeter.deploy.triton import write_repository

    if not source.exists():
        raise UsageError(f"{source} does not exist: give an optimize output folder or a results file")
    plan = read_source(source, case_id, which, load_file, name)
    folder = output or source.with_name(source.name.removesuffix(".json") + "-deploy")
    if folder.exists() and any(folder.iterdir()) and not (folder / "DEPLOY.md").is_file():
        raise UsageError(f"{folder} exists and was not written by deploy; choose another --output")
    repo = write_repository(plan, folder / "model_repository")
    manifest_path = None
    kube = None
    if target == "kserve":
        if plan.case.memory.peak_rss_mb is None:
            raise UsageError(f"case {plan.case.id} has no measured peak memory: the manifest's memory needs it")
        problems = check_manifest(manifest(plan))
        if problems:
            raise UsageError(f"the InferenceService would be invalid: {'; '.join(problems)}")
        kube = resources(plan)
        manifest_path = folder / "inference-service.yaml"
        manifest_path.write_text(render_manifest(plan))
    deploy_md = folder / "DEPLOY.md"
    deploy_md.write_text(render_deploy_md(plan, repo, manifest_path, kube, deploy_md))
    stderr.print(f"deploying case {escape(plan.case.id)} ({escape(plan.case.backend)} {plan.case.precision})")
    for path in (repo.config, repo.model, manifest_path, deploy_md):
        if path is not None:
            stdout.print(escape(str(path)))
