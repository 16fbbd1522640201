"""A model's graph loaded with every shape known: shape inference, then the shapes it left unknown recovered by a
run (`graph.shape_capture`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from infermeter.core.errors import ModelError
from infermeter.graph.model import GraphView, fix_input_shapes, graph_view, infer_shapes
from infermeter.graph.shape_capture import recover_shapes
from infermeter.models.spec import ModelSpec

if TYPE_CHECKING:
    import onnx


@dataclass
class LoadedGraph:
    """A model resolved for analysis: the ONNX file it came from, the concrete input shapes and the view."""

    spec: ModelSpec
    path: Path
    input_shapes: dict[str, tuple[int, ...]]
    model: onnx.ModelProto
    view: GraphView
    notes: list[str] = field(default_factory=list)


def load_graph(
    ref: str | ModelSpec,
    batch: int = 1,
    overrides: Sequence[tuple[str, tuple[int, ...]]] = (),
) -> LoadedGraph:
    """Resolve MODEL (zoo name, .onnx path or a ModelSpec), get its ONNX form (cached export for zoo models),
    fix the symbolic dims to `batch`/`overrides`, and infer every shape."""
    try:
        import onnx
    except ImportError as exc:
        from infermeter.core.extras import install_line

        raise ModelError(f"graph analysis needs the onnx package: {install_line('onnxruntime')}") from exc
    from infermeter.models.convert import onnx_for
    from infermeter.models.dim_defaults import plan_shapes
    from infermeter.models.resolve import resolve_model

    spec = resolve_model(ref) if isinstance(ref, str) else ref
    artifact = onnx_for(spec)
    # A free dim nobody set: its stated default, said in the notes (FLOPs are at those shapes).
    shapes, sizing = plan_shapes(spec.inputs, batch, overrides)
    try:
        model = onnx.load(str(artifact.path))
    except Exception as exc:
        raise ModelError(f"{artifact.path} is not a readable ONNX model ({type(exc).__name__}: {exc})") from exc
    fix_input_shapes(model, shapes)
    from infermeter.models.inputs import generate_feeds

    recovered = recover_shapes(infer_shapes(model), lambda: generate_feeds(spec.inputs, shapes, 1)[0])
    view = graph_view(recovered.model)
    notes = ([artifact.note] if artifact.note else []) + ([sizing] if sizing else []) + recovered.notes
    uncounted = view.uncounted_nodes()
    if uncounted:
        ops = Counter(node.op_type for node in uncounted).most_common()
        notes.append(
            f"{len(uncounted)} nodes uncounted ({', '.join(f'{op} ×{n}' for op, n in ops)}): their shapes stay "
            "unknown, so FLOPs, bytes and % peak are lower bounds"
        )
    view.notes.extend(notes)
    return LoadedGraph(spec, artifact.path, shapes, recovered.model, view, notes)
