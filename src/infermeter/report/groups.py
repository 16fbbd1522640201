"""Which results compare with which: a result's comparison group (speedups never cross one), and the machine class
it ran on."""

from __future__ import annotations

from infermeter.core.case import comparison_key, model_family
from infermeter.results.records import GenerationCase, NodeRecord, read_record
from infermeter.results.schema import CaseResult


def comparison_group(case: CaseResult) -> tuple[object, ...]:
    """The comparison group of a result (`case.comparison_key`, as `Case.group_key` for a case to run): speedups are
    within one, so never across inputs (`--data`, `--input NAME=VALUE`) or machine classes."""
    shapes = tuple(sorted((name, tuple(dims)) for name, dims in case.shapes.input_shapes.items()))
    model = case.model
    generation = read_record(case, GenerationCase)
    if generation is not None:  # a generation case: its GGUF levels compared, as `GenerateCase.group_key` does
        model = model_family(case.model)
        shapes += (("generated", (case.batch, generation.gen_len)),)
    data_hash = case.data.content_hash if case.data is not None else None
    values = case.input_values.items()
    return comparison_key(
        model, case.batch, case.shape_mode, shapes, case.threads, case.streams, data_hash, values, machine_of(case)
    )


def machine_of(case: CaseResult) -> str | None:
    """The class of cluster node the case ran on (`bench --cluster`), None for a case run here."""
    node = read_record(case, NodeRecord)
    return node.machine if node is not None else None
