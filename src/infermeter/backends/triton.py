"""How Triton serves what a backend ran, declared once on the backend class (`Backend.triton`) and read both ways:
`deploy` writes a case's settings into config.pbtxt from it (`deploy/triton.py`), `infermeter serve REPO` reads a
config.pbtxt back into a backend's settings from it (`deploy/repository.py`). Parameter keys, platform names and
graph levels are Triton's (`model_configuration.md` and the READMEs of its engine backends)."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass

# What of a case a parameter carries, besides one of our option keys.
THREADS = "threads"
PRECISION = "precision"


@dataclass(frozen=True)
class TritonParameter:
    """One `parameters { key value }` entry of config.pbtxt. `setting` is what of the case it carries: THREADS,
    PRECISION or one of our option keys. `values` pairs our value with Triton's (empty: the same text, in capitals
    when `upper`); a value of ours not among them is written as `fallback`'s. `default`: our value when the case
    did not set the option (and when the entry is absent on reading); `only_when_set`: written only when the case
    set the option, else left to the engine. `fixed`: a value written whatever the case (its origin `why`), never
    read back."""

    key: str
    setting: str
    _: KW_ONLY  # the rest by keyword
    values: tuple[tuple[str, str], ...] = ()
    fallback: str = ""
    default: str = ""
    upper: bool = False
    only_when_set: bool = False
    fixed: str | None = None
    why: str = ""

    def triton_value(self, ours: str) -> str:
        """Triton's spelling of our value `ours`."""
        if self.values:
            table = dict(self.values)
            return table.get(ours, table.get(self.fallback, ours))
        return ours.upper() if self.upper else ours

    def our_value(self, theirs: str) -> str | None:
        """Our value for Triton's `theirs`; None when `values` has no such spelling."""
        if self.values:
            return {triton: ours for ours, triton in self.values}.get(theirs)
        return theirs.lower() if self.upper else theirs


@dataclass(frozen=True)
class TritonGraphLevel:
    """Our graph-optimization option as `optimization { graph { level } }`: `levels` pairs our value with Triton's
    level; a value of ours not among them (the option's `default` when unset) is the Triton backend's default and
    writes no field."""

    option: str
    default: str
    levels: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class TritonTarget:
    """How Triton runs what a backend ran: `key` is `platform` or `backend` in config.pbtxt, `name` its value,
    `filename` the model file in the version folder. `writable`: the file is the ONNX the case ran (TensorRT plans
    and TorchScript files are not kept by bench, so their repository cannot be filled from a results file).
    `aliases`: other spellings of `name` in config.pbtxt files (Triton's backend name for a platform).

    The engine settings: `parameters` (written in this order, read back by `serve`), `graph_level`, `accelerator`
    (the GPU execution accelerator the case ran on, whose `precision_mode` is the case's precision),
    `precision_in_file` (the model file fixes its precision: nothing to write), and `streams_option`: the option
    by which the engine ran concurrent streams inside one model instance (a case that set it deploys one
    instance; one measured with our `--streams` and not it deploys one instance per stream)."""

    key: str
    name: str
    _: KW_ONLY  # the rest by keyword
    filename: str
    writable: bool = True
    aliases: tuple[str, ...] = ()
    parameters: tuple[TritonParameter, ...] = ()
    graph_level: TritonGraphLevel | None = None
    accelerator: str | None = None
    precision_in_file: bool = False
    streams_option: str | None = None

    def parameter(self, setting: str) -> TritonParameter | None:
        """The parameter that carries `setting` (THREADS, PRECISION or an option key), None when none does."""
        return next((p for p in self.parameters if p.setting == setting and p.fixed is None), None)


def servable_engines() -> dict[str, str]:
    """Triton platform or backend value -> the backend `infermeter serve` runs it with: the CPU backends whose
    model file a case writes (`Backend.triton`), the first registered for a platform several share."""
    from infermeter.backends.registry import inference_backends

    servable: dict[str, str] = {}
    for cls in inference_backends():
        target = cls.triton
        if target is not None and target.writable and cls.device == "cpu":
            for word in (target.name, *target.aliases):
                servable.setdefault(word, cls.name)
    return servable
