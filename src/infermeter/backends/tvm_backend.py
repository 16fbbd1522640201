"""Apache TVM (Relax, LLVM CPU codegen), compiled ahead from the model's ONNX form, optionally auto-tuned.

The build imports the ONNX graph into Relax at the case's static shapes, compiles it for this host's CPU and exports
the library (`export_library`) into the artifact folder; `load` only loads it (`tvm.runtime.load_module`) into a
Relax VM. The target names the host CPU as LLVM knows it (`llvm_get_system_cpu`): `mcpu=native` silently falls
back to a generic CPU (12 LLVM features instead of 99 on a Sapphire/Emerald Rapids host), so the CPU and its
feature count are recorded, and a build that still resolves to a generic CPU carries the `generic_cpu_target`
warning. `num-cores` is the case's threads (MetaSchedule refuses a target without it).

Auto-tuning (`-O tvm.tune_trials=N`, `-O tvm.tune_minutes=M`) runs MetaSchedule in the build
(`_tvm_metaschedule`): its seconds are the build's `tune_s` phase, apart from `compile_s`, and a cache hit keeps
them. A tuned artifact also holds the tuning database (`database/`) and the summary (`tuning.json`, read by
`tuning_summary`). Tuned and untuned cases differ by an option, hence by case id: separate rows.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from infermeter.backends._common import case_shapes, onnx_form_reason
from infermeter.backends._tvm_target import (
    compile_module,
    configure_threads,
    generic_warning,
    host_target,
    set_threads_env,
    target_note,
)
from infermeter.backends._tvm_tuning import DATABASE_DIR, SUMMARY_FILE, TuningPlan, TuningSummary, read_tuning_summary
from infermeter.backends.base import AutoTuning, Backend, Session, package_version
from infermeter.backends.options import CACHE, Integer, Number
from infermeter.core.case import Case
from infermeter.core.errors import BackendError, engine_message
from infermeter.models.convert import onnx_for
from infermeter.models.inputs import Feeds
from infermeter.models.spec import ModelSpec
from infermeter.results.artifact import Artifact, ArtifactReport, BuildOutput, Phase

TUNE_TRIALS = Integer(key="tvm.tune_trials", default=0,
                      help="MetaSchedule auto-tuning: candidate kernels measured, spread over the model's fused "
                           "kernels heaviest first (0: untuned, TVM's default schedules)")  # fmt: skip
TUNE_MINUTES = Number(key="tvm.tune_minutes", default=0.0,
                      help="upper bound on tuning minutes: no new batch of candidates starts past it (0: none; "
                           "alone, tunes until the bound)")  # fmt: skip
LIBRARY_FILE = "model.so"
BUILD_FILE = "build.json"
UNTUNED_NOTE = "tvm: untuned (TVM's default schedules)"
# The cache folder kind under which an interrupted tuning keeps its database until the build completes.
TUNING_KIND = "build-tvm-tuning"


def tuning_summary(artifact: Artifact | str | Path) -> TuningSummary | None:
    """The tuning summary of a tvm artifact (per task: trials, untuned and best latency), None when untuned."""
    return read_tuning_summary(artifact.path if isinstance(artifact, Artifact) else artifact)


def _plan(case: Case) -> TuningPlan | None:
    trials, minutes = TUNE_TRIALS.value(case), TUNE_MINUTES.value(case)
    if not trials and not minutes:
        return None
    return TuningPlan(trials=trials, minutes=minutes, workers=max(1, case.threads))


class TvmSession(Session):
    """A Relax VM running the exported library's `main`; inputs become TVM tensors in `prepare` (untimed)."""

    def __init__(self, vm: Any, input_names: list[str], precision: str) -> None:
        super().__init__()
        import tvm

        self.vm = vm
        self._main = vm["main"]
        self._tensor = tvm.runtime.tensor
        self._device = tvm.cpu()
        self._input_names = input_names
        self._precision = precision

    def prepare(self, feeds: Feeds) -> Any:
        return [self._tensor(np.ascontiguousarray(feeds[name]), self._device) for name in self._input_names]

    def run(self, prepared: Any) -> Any:
        return self._main(*prepared)

    def outputs_to_numpy(self, outputs: Any) -> list[np.ndarray]:
        if hasattr(outputs, "numpy"):
            return [outputs.numpy()]
        return [output.numpy() for output in outputs]

    def effective_precision(self) -> str:
        return self._precision

    def close(self) -> None:
        self._main = None
        self.vm = None


class TvmBackend(Backend):
    """Apache TVM (`apache-tvm`): ONNX -> Relax at static shapes -> LLVM for the host CPU, run by the Relax VM.

    Options: `tvm.tune_trials` N (MetaSchedule auto-tuning, 0: untuned, the default); `tvm.tune_minutes` M (time
    bound on the tuning); `cache=off` builds (and tunes) afresh for the case. Threads: the target's `num-cores` and
    the runtime's thread pool (TVM_NUM_THREADS), read back."""

    name = "tvm"
    description = "Apache TVM Relax, LLVM for the host CPU, optional MetaSchedule auto-tuning"
    options = (TUNE_TRIALS, TUNE_MINUTES, CACHE)
    consumes_onnx = True
    slow_to_load = True
    runs_by_default = False  # a build of minutes: run when named (-b)
    # About 1 s per trial on resnet18 and 1.7 s on tiny_cnn (whose total includes the builder pool's start), on
    # the 2-vCPU VM of docs/compilers.md; the prior errs on the slow side.
    auto_tuning = AutoTuning(TUNE_TRIALS.key, TUNE_MINUTES.key, prior_s_per_trial=2.0)
    model_files = (".onnx",)
    distribution = "apache-tvm"
    install_extra: ClassVar[str | None] = "compilers"
    artifact_suffix = "/"

    @classmethod
    def artifact_report(cls, artifact: Artifact) -> ArtifactReport | None:
        """The kernels auto-tuning worked on, heaviest first: trials, TVM's untuned time, the best found, the gain."""
        summary = tuning_summary(artifact)
        if summary is None:
            return None

        def ms(value: float | None) -> str:
            return "—" if value is None else f"{value:.4f}"

        rows = tuple(
            (task.name, f"{task.flop / 1e6:,.1f}", str(task.weight), f"{task.valid}/{task.trials}",
             ms(task.untuned_ms), ms(task.best_ms), "—" if task.speedup is None else f"{task.speedup:.2f}x",
             "yes" if task.applied else "no")
            for task in summary.tasks
        )  # fmt: skip
        bound = " (stopped by tvm.tune_minutes)" if summary.stopped_by_time else ""
        title = f"auto-tuning: {summary.trials} trials in {summary.tune_s:.0f} s{bound}; {summary.cost_model}"
        columns = ("task (fused kernel)", "MFLOP", "calls", "valid/trials", "untuned ms", "best ms", "gain", "used")
        notes = (f"{summary.resumed} trials resumed from an interrupted tuning",) if summary.resumed else ()
        return ArtifactReport(title, columns, rows, notes)

    @classmethod
    def available(cls) -> str | None:
        # ONNX Runtime folds the graph's shape arithmetic before the import (`onnxruntime.folded_graph`).
        missing = [d for d in ("apache-tvm", "onnx", "onnxruntime") if package_version(d) is None]
        return cls.not_installed(f"Apache TVM ({', '.join(missing)})") if missing else None

    @classmethod
    def unsupported_reason(cls, model: ModelSpec, case: Case) -> str | None:
        reason = onnx_form_reason(model, cls.name)
        if reason:
            return reason
        if case.shape_mode != "static":
            return (
                "the tvm backend compiles and tunes for the case's static shapes; Relax kernels with symbolic "
                "shapes cannot be tuned by MetaSchedule here: use --shape-mode static"
            )
        if case.streams > 1:
            return "the tvm backend runs one inference at a time on its VM: --streams > 1 is not supported"
        if case.precision != "fp32":
            return f"the tvm backend compiles fp32 graphs as they are; {case.precision} is not supported"
        return None

    def artifact_key(self, model: ModelSpec, case: Case) -> dict[str, object] | None:
        # The host's CPU and ISA are in the build stage's part of the key; the TVM version too (`version`).
        return {
            "shapes": case_shapes(model, case),
            "num_cores": case.threads,
            "tune": {"trials": TUNE_TRIALS.value(case), "minutes": TUNE_MINUTES.value(case)},
            "tvm_ffi": package_version("apache-tvm-ffi"),
            # What TVM imports: the graph ONNX Runtime folded at the case's shapes (`onnxruntime.folded_graph`).
            "import": ["onnxruntime-basic-folded", package_version("onnxruntime")],
        }

    def build(self, model: ModelSpec, case: Case, target: Path) -> BuildOutput:
        set_threads_env(case.threads)
        mod, facts = self._relax_module(model, case)
        device_target, resolved = host_target(case.threads)
        phases: dict[str, float] = {}
        plan = _plan(case)
        summary, database = None, None
        with tempfile.TemporaryDirectory(prefix="infermeter-tvm-tune-") as scratch:
            if plan is not None:
                work_dir = self._tuning_dir(model, case, Path(scratch))
                summary, database = self._tune(mod, device_target, plan, work_dir)
                phases[Phase.TUNE] = summary.tune_s
            compile_start = time.perf_counter()
            executable = compile_module(model, mod, device_target, database)
            phases[Phase.COMPILE] = time.perf_counter() - compile_start + facts.pop("import_s")
            serialize_start = time.perf_counter()
            executable.export_library(str(target / LIBRARY_FILE))
            (target / BUILD_FILE).write_text(json.dumps({**facts, **resolved}))
            if summary is not None:
                self._store_tuning(work_dir, target, summary)
            phases[Phase.SERIALIZE] = time.perf_counter() - serialize_start
        output = BuildOutput(phases, [target_note(resolved), _tuning_note(summary) if summary else UNTUNED_NOTE])
        warning = generic_warning(resolved)
        if warning:
            output.warnings.append(warning)
        return output

    @staticmethod
    def _relax_module(model: ModelSpec, case: Case) -> tuple[Any, dict[str, Any]]:
        """The model's ONNX form imported into Relax at the case's shapes, decomposed for inference; and the facts
        `load` needs (input order, graph precision), with the import's seconds under `import_s`."""
        import onnx
        from tvm import relax
        from tvm.relax.frontend.onnx import from_onnx

        from infermeter.backends.onnxruntime import folded_graph
        from infermeter.models.spec import onnx_graph_precision

        start = time.perf_counter()
        path = str(onnx_for(model).path)
        with tempfile.TemporaryDirectory(prefix="infermeter-tvm-") as folder:
            graph = onnx.load(str(folded_graph(model, case, Path(folder) / "folded.onnx")))
        initializers = {init.name for init in graph.graph.initializer}
        names = [i.name for i in graph.graph.input if i.name not in initializers]
        shapes = case_shapes(model, case)
        dtypes = {i.name: i.dtype for i in model.inputs}
        try:
            mod = from_onnx(graph, shape_dict={n: list(shapes[n]) for n in names},
                            dtype_dict={n: dtypes.get(n, "float32") for n in names})  # fmt: skip
            mod = relax.transform.DecomposeOpsForInference()(mod)
            mod = relax.transform.CanonicalizeBindings()(mod)
        except Exception as exc:
            raise BackendError(f"TVM could not import the ONNX form of {model.ref}: {engine_message(exc)}") from exc
        facts = {
            "inputs": names,
            "precision": onnx_graph_precision(path),
            "shapes": {name: list(shapes[name]) for name in names},
            "tvm": package_version("apache-tvm"),
            "import_s": time.perf_counter() - start,
        }
        return mod, facts

    def _tuning_dir(self, model: ModelSpec, case: Case, scratch: Path) -> Path:
        """Where the tuning database is written while tuning runs: beside the cache under the artifact's identity
        (`artifact_identity`: for an INT8 case the model is the INT8 graph, so its quantization is in the key), so
        an interrupted tuning is resumed by the next build of the same case; in `scratch` with `cache=off`."""
        if not CACHE.value(case):
            return scratch
        from infermeter.models.convert import cache_root, key_digest

        folder = cache_root() / TUNING_KIND / key_digest(self.artifact_identity(model, case))
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    @staticmethod
    def _tune(mod: Any, device_target: Any, plan: TuningPlan, work_dir: Path) -> tuple[TuningSummary, Any]:
        from infermeter.backends._tvm_metaschedule import tune_model

        try:
            return tune_model(mod, device_target, plan, work_dir)
        except BackendError:
            raise
        except Exception as exc:
            raise BackendError(f"TVM's MetaSchedule tuning failed: {engine_message(exc)}") from exc

    @staticmethod
    def _store_tuning(work_dir: Path, target: Path, summary: TuningSummary) -> None:
        """The database and summary into the artifact; the resumption folder is then no longer needed."""
        import shutil

        from infermeter.backends._tvm_tuning import copy_database

        copy_database(work_dir, target / DATABASE_DIR)
        (target / SUMMARY_FILE).write_text(json.dumps(summary.to_dict(), indent=1))
        if work_dir.parent.name == TUNING_KIND:
            shutil.rmtree(work_dir, ignore_errors=True)

    def load(self, model: ModelSpec, case: Case, artifact: Artifact | None = None) -> Session:
        if artifact is None:
            raise BackendError("the tvm backend runs a library compiled by the build stage, and none was given")
        folder = Path(artifact.path)
        facts = json.loads((folder / BUILD_FILE).read_text())
        start = time.perf_counter()
        set_threads_env(case.threads)
        import tvm
        from tvm import relax

        imported = time.perf_counter()
        threads = configure_threads(case.threads)
        try:
            library = tvm.runtime.load_module(str(folder / LIBRARY_FILE))
        except Exception as exc:
            raise BackendError(f"TVM could not load the compiled {model.ref}: {engine_message(exc)}") from exc
        loaded = time.perf_counter()
        session = TvmSession(relax.VirtualMachine(library, tvm.cpu()), list(facts["inputs"]), facts["precision"])
        session.load_phases_s = {
            Phase.IMPORT: imported - start,
            Phase.DESERIALIZE: loaded - imported,
            Phase.SESSION_CREATE: time.perf_counter() - loaded,
        }
        session.notes.append(f"tvm: runtime threads set {case.threads}, read back {threads}")
        return session


def _tuning_note(summary: TuningSummary) -> str:
    tuned = [task for task in summary.tasks if task.valid]
    applied = [task for task in summary.tasks if task.applied]
    stop = ", stopped at the time bound" if summary.stopped_by_time else ""
    resumed = f", {summary.resumed} resumed from an interrupted tuning" if summary.resumed else ""
    return (
        f"tvm: MetaSchedule tuned {len(tuned)} of {len(summary.tasks)} kernels with {summary.trials} trials "
        f"in {summary.tune_s:.1f} s{stop}{resumed}; {len(applied)} beat TVM's default and are used (asked: "
        f"{summary.trials_asked} trials, {summary.minutes_asked:g} min; cost model {summary.cost_model})"
    )
