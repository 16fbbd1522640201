"""IREE, the MLIR-based compiler and runtime, on the CPU (LLVM codegen), from the model's ONNX form.

The build (`case_build`, once per key of model, shapes, target CPU and compiler flags): ONNX → MLIR with the
ONNX importer that ships in iree-base-compiler, then `iree-compile` for `llvm-cpu` into a `.vmfb` module. It targets
the host's CPU by default (`--iree-llvmcpu-target-cpu=host`): without a target CPU, LLVM emits code for a generic
x86-64 with none of the vector units, many times slower, and IREE only says so on stderr. The CPU and features the
compiler really targeted are read back from its executable configurations and recorded in the build's notes; a
generic build, asked for (`iree.target_cpu=generic`) or fallen back to, carries the `generic_cpu_target` warning.
`load` only maps the module into a runtime context: `local-sync` for one thread (inline on the caller), else
`local-task` with exactly `threads` workers, counted back from the process's threads.
"""

from __future__ import annotations

import re
import tempfile
import time
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from infermeter.backends._common import case_shapes, onnx_form_reason
from infermeter.backends.base import Backend, Session, package_version
from infermeter.backends.options import Choice, Switch
from infermeter.core.case import Case
from infermeter.core.errors import BackendError
from infermeter.models.convert import onnx_for
from infermeter.models.inputs import Feeds, dims_by_name
from infermeter.models.spec import ModelSpec
from infermeter.results.artifact import Artifact, BuildOutput, Phase

TARGET_CPU = Choice(
    key="iree.target_cpu",
    choices=("host", "generic"),
    default="host",
    help="--iree-llvmcpu-target-cpu: this CPU's ISA, or a generic x86-64 (portable, much slower)",
)
CHANNELS_LAST = Switch(
    key="iree.channels_last",
    default=True,
    help="convert NCHW convolutions to NHWC before compiling (IREE's CPU convolutions are NHWC)",
)
DATA_TILING = Switch(
    key="iree.data_tiling", default=False, help="--iree-opt-data-tiling: pack matmul operands into tiled layouts"
)
UKERNELS = Choice(
    key="iree.ukernels",
    choices=("default", "none", "all"),
    default="default",
    help="--iree-llvmcpu-enable-ukernels: IREE's hand-written microkernels",
)
CHANNELS_LAST_PIPELINE = "builtin.module(util.func(iree-preprocessing-convert-conv-to-channels-last))"
# The vector features worth naming in a note (the compiler lists well over a hundred).
NOTABLE_FEATURES = ("avx2", "fma", "avx512f", "avx512vnni", "avx512bf16", "avx512fp16", "amx-tile", "amx-bf16")
# The entry point the ONNX importer names after the graph.
ENTRY = "main_graph"


def compiler_flags(case: Case) -> list[str]:
    """The `iree-compile` flags `case`'s options stand for (the target CPU always explicit)."""
    flags = [f"--iree-llvmcpu-target-cpu={TARGET_CPU.value(case)}"]
    if CHANNELS_LAST.value(case):
        flags.append(f"--iree-preprocessing-pass-pipeline={CHANNELS_LAST_PIPELINE}")
    if DATA_TILING.value(case):
        flags.append("--iree-opt-data-tiling")
    if UKERNELS.value(case) != "default":
        flags.append(f"--iree-llvmcpu-enable-ukernels={UKERNELS.value(case)}")
    return flags


def compiler_message(exc: BaseException) -> str:
    """Why `iree-compile` failed, on one line: its `error:` diagnostics without file positions, else its exit."""
    text = str(exc)
    errors = [re.sub(r"^.*?:\d+:\d+: error: ", "", line.strip()) for line in text.splitlines() if "error:" in line]
    if errors:
        return " ".join(dict.fromkeys(errors))[:400]
    code = re.search(r"Error code: (-?\d+)", text)
    if code and int(code.group(1)) < 0:
        return f"iree-compile crashed (signal {-int(code.group(1))}) without a diagnostic"
    return text.strip().splitlines()[0][:400] if text.strip() else type(exc).__name__


def write_mlir(model: ModelSpec, case: Case, target: Path) -> None:
    """The model's ONNX form as MLIR bytecode at `target` (torch-mlir's ONNX dialect; bytecode keeps the weights as
    bytes, where text would spell them in hex), its inputs in the model's order, fixed to the case's shapes in
    static mode (symbolic dims stay dynamic otherwise)."""
    import onnx
    from iree.compiler.extras import onnx_importer
    from iree.compiler.ir import Context

    proto = onnx.load(str(onnx_for(model).path))
    graph = proto.graph
    weights = {init.name for init in graph.initializer}
    by_name = {value.name: value for value in graph.input if value.name not in weights}
    ordered = [by_name[spec.name] for spec in model.inputs if spec.name in by_name]
    if len(ordered) != len(by_name):
        raise BackendError(f"the ONNX inputs of {model.ref} ({', '.join(by_name)}) are not the model's inputs")
    kept = [type(value)() for value in ordered]
    for copy, value in zip(kept, ordered, strict=True):
        copy.CopyFrom(value)
    del graph.input[:]  # old exporters list weights as inputs too: they would become function arguments
    graph.input.extend(kept)
    if case.shape_mode == "static":
        _fix_shapes(graph, case_shapes(model, case), dims_by_name(model.inputs, case_shapes(model, case)))
    proto = onnx.shape_inference.infer_shapes(proto, data_prop=True)
    context = Context()
    info = onnx_importer.ModelInfo(proto)
    module = info.create_module(context=context).operation
    onnx_importer.NodeImporter.define_function(info.main_graph, module).import_all()
    module.verify()
    with target.open("wb") as handle:
        module.write_bytecode(handle)


def _fix_shapes(graph: Any, shapes: dict[str, tuple[int, ...]], named: dict[str, int]) -> None:
    """Fix the graph's inputs to `shapes`, and its outputs' symbolic dims that share an input dim's name."""
    for value in graph.input:
        for dim, size in zip(value.type.tensor_type.shape.dim, shapes[value.name], strict=True):
            dim.dim_value = size  # setting the value clears the symbolic name
    for value in graph.output:
        for dim in value.type.tensor_type.shape.dim:
            if dim.HasField("dim_param") and dim.dim_param in named:
                dim.dim_value = named[dim.dim_param]


def read_target(dump_folder: Path) -> tuple[str, list[str]]:
    """(CPU, features) the compiler targeted, from the executable configurations it dumped ("" and []: none)."""
    for path in sorted(dump_folder.iterdir()):
        text = path.read_text(errors="replace")
        cpu = re.search(r'cpu = "([^"]*)"', text)
        if cpu:
            features = re.search(r'cpu_features = "([^"]*)"', text)
            found = features.group(1).split(",") if features and features.group(1) else []
            return cpu.group(1), [f.lstrip("+") for f in found if not f.startswith("-")]
    return "", []


def target_note(cpu: str, features: list[str]) -> str:
    """The target as a note: the CPU and the vector features that matter, with the total count."""
    notable = [f for f in NOTABLE_FEATURES if f in features]
    return f"iree: target cpu {cpu or 'generic'}, {len(features)} features" + (
        f" ({', '.join(notable)})" if notable else " (no vector extensions beyond the x86-64 baseline)"
    )


class IreeSession(Session):
    """An IREE runtime context holding the compiled module; `run` calls its entry function once."""

    def __init__(self, context: Any, function: Any, input_names: list[str], precision: str) -> None:
        super().__init__()
        self._context = context
        self._function = function
        self._input_names = input_names
        self._precision = precision

    def prepare(self, feeds: Feeds) -> Any:
        return [np.ascontiguousarray(feeds[name]) for name in self._input_names]

    def run(self, prepared: Any) -> Any:
        # The exported function returns once the inference is done (IREE's default execution model waits inside
        # it), its results already in host memory on a CPU device: nothing is left to wait for or copy.
        outputs = self._function(*prepared)
        return list(outputs) if isinstance(outputs, tuple | list) else [outputs]

    def outputs_to_numpy(self, outputs: Any) -> list[np.ndarray]:
        # Copied: `to_host` maps the device's own buffer, which is freed with the session.
        return [np.array(output.to_host()) for output in outputs]

    def effective_precision(self) -> str:
        return self._precision

    def close(self) -> None:
        self._function = None
        self._context = None


def worker_threads() -> int | None:
    """IREE's task-system worker threads in this process (None where /proc cannot say)."""
    tasks = Path("/proc/self/task")
    if not tasks.is_dir():
        return None
    names = [(task / "comm").read_text(errors="replace").strip() for task in tasks.iterdir()]
    return sum(1 for name in names if name.startswith("iree-worker"))


def await_workers(expected: int, timeout_s: float = 2.0) -> int | None:
    """The worker count once it reaches `expected` or stops growing for `timeout_s` (a new worker names its thread
    a moment after the driver returns)."""
    deadline = time.perf_counter() + timeout_s
    count = worker_threads()
    while count is not None and count < expected and time.perf_counter() < deadline:
        time.sleep(0.005)
        count = worker_threads()
    return count


class IreeBackend(Backend):
    """IREE (`iree-base-compiler` + `iree-base-runtime`), llvm-cpu target, compiled ahead from the ONNX form.

    Options: `iree.target_cpu` host|generic (default host); `iree.channels_last` (default on); `iree.data_tiling`
    (default off); `iree.ukernels` default|none|all. Threads: `local-sync` for 1, `local-task` with that many
    workers otherwise. Static shape mode compiles for the case's shapes, dynamic keeps the symbolic dimensions."""

    name = "iree"
    description = "IREE MLIR compiler (llvm-cpu, host ISA) and runtime"
    options = (TARGET_CPU, CHANNELS_LAST, DATA_TILING, UKERNELS)
    consumes_onnx = True
    shape_aware = True
    slow_to_load = True
    runs_by_default = False  # a build of minutes: run when named (-b)
    model_files = (".onnx",)
    distribution = "iree-base-compiler"
    install_extra: ClassVar[str | None] = "compilers"
    artifact_suffix = ".vmfb"

    @classmethod
    def available(cls) -> str | None:
        missing = [d for d in ("iree-base-compiler", "iree-base-runtime", "onnx") if package_version(d) is None]
        return cls.not_installed(f"IREE ({', '.join(missing)})") if missing else None

    @classmethod
    def unsupported_reason(cls, model: ModelSpec, case: Case) -> str | None:
        reason = onnx_form_reason(model, cls.name)
        if reason:
            return reason
        if case.streams > 1:
            return "the iree backend runs one inference at a time on its context: --streams > 1 is not supported"
        if case.precision != "fp32":
            return f"the iree backend compiles fp32 graphs as they are; {case.precision} is not supported"
        return None

    def artifact_key(self, model: ModelSpec, case: Case) -> dict[str, object] | None:
        shapes: object = case_shapes(model, case) if case.shape_mode == "static" else "dynamic"
        return {"flags": compiler_flags(case), "shapes": shapes, "runtime": package_version("iree-base-runtime")}

    def build(self, model: ModelSpec, case: Case, target: Path) -> BuildOutput:
        import iree.compiler as compiler

        start = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="infermeter-iree-") as folder:
            source, dumps = Path(folder) / "model.mlirbc", Path(folder) / "configurations"
            try:
                write_mlir(model, case, source)
            except BackendError:
                raise
            except Exception as exc:
                raise BackendError(f"IREE could not import the ONNX form of {model.ref}: {exc}") from exc
            imported = time.perf_counter()
            dumps.mkdir()
            flags = [*compiler_flags(case), f"--iree-hal-dump-executable-configurations-to={dumps}"]
            try:
                compiler.compile_file(str(source), target_backends=["llvm-cpu"], output_file=str(target),
                                      extra_args=flags)  # fmt: skip
            except Exception as exc:
                raise BackendError(f"IREE could not compile {model.ref}: {compiler_message(exc)}") from exc
            cpu, features = read_target(dumps)
        compiled = time.perf_counter()
        output = BuildOutput({Phase.COMPILE: compiled - start})
        output.notes.append(
            f"iree: ONNX → MLIR {imported - start:.2f} s, iree-compile {compiled - imported:.2f} s "
            f"({' '.join(compiler_flags(case))})"
        )
        output.notes.append(target_note(cpu, features))
        warning = generic_target_warning(TARGET_CPU.value(case), cpu)
        if warning:
            output.warnings.append(warning)
        return output

    def load(self, model: ModelSpec, case: Case, artifact: Artifact | None = None) -> Session:
        if artifact is None:
            raise BackendError("the iree backend runs a module compiled by the build stage, and none was given")
        start = time.perf_counter()
        import iree.runtime as runtime

        from infermeter.models.spec import onnx_graph_precision

        imported = time.perf_counter()
        config = runtime.Config(device=self._device(runtime, case))
        context = runtime.SystemContext(config=config)
        made = time.perf_counter()
        try:
            module = runtime.VmModule.mmap(config.vm_instance, artifact.path)
        except Exception as exc:
            raise BackendError(f"IREE could not read the compiled module of {model.ref}: {exc}") from exc
        mapped = time.perf_counter()
        context.add_vm_module(module)
        session = IreeSession(context, context.modules.module[ENTRY], [i.name for i in model.inputs],
                              onnx_graph_precision(str(onnx_for(model).path)))  # fmt: skip
        session.load_phases_s = {
            Phase.IMPORT: imported - start,
            Phase.DESERIALIZE: mapped - made,
            Phase.SESSION_CREATE: (made - imported) + (time.perf_counter() - mapped),
        }
        session.notes.append(self._threads_note(case))
        return session

    @staticmethod
    def _device(runtime: Any, case: Case) -> Any:
        """A device of `local-sync` (1 thread) or `local-task` with `case.threads` workers. The task system is
        made once per process, with the worker count the flags say when the driver is first created."""
        if case.threads == 1:
            return runtime.get_driver("local-sync").create_default_device()
        runtime.flags.parse_flags(f"--task_topology_group_count={case.threads}")
        device = runtime.get_driver("local-task").create_default_device()
        count = await_workers(case.threads)
        if count is not None and count != case.threads:
            raise BackendError(
                f"IREE's task system in this process has {count} workers and this case asks for {case.threads}: "
                "it is made once per process, so run each thread count in a process of its own (isolated cases)"
            )
        return device

    @staticmethod
    def _threads_note(case: Case) -> str:
        if case.threads == 1:
            return "iree: driver local-sync, inference inline on the calling thread (1 thread)"
        return f"iree: driver local-task, {worker_threads()} worker threads read back (asked {case.threads})"


def generic_target_warning(asked: str, targeted: str) -> tuple[str, str] | None:
    """The `generic_cpu_target` warning for a build whose code targets a generic CPU (None for a host build)."""
    if targeted not in ("", "generic"):
        return None
    how = "asked for (iree.target_cpu=generic)" if asked == "generic" else f"fallen back to (asked {asked})"
    return (
        "generic_cpu_target",
        f"iree compiled for a generic x86-64 CPU, {how}: the code uses none of this CPU's vector extensions, so "
        "its speed is not this machine's; build for the host (-O iree.target_cpu=host) to compare engines",
    )
