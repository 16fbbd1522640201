"""The samples `quantize` calibrates and evaluates on, shaped and completed by `--input` as `bench` is:
`NAME:DIMS` sizes the generated samples' symbolic dims, `NAME=VALUE` sets a constant input (a sample rate, a
control vector) that data need not hold."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from infermeter.models.input_flags import Sizes, Values
from infermeter.models.inputs import InputSpec
from infermeter.models.samples import SampleSet, load_samples, random_samples


@dataclass(frozen=True)
class ModelInputs:
    """A model's inputs with the `--input` shapes and constants given for them."""

    inputs: tuple[InputSpec, ...]
    shapes: Sizes = ()
    values: Values = ()

    def check(self) -> None:
        """Every shape and constant names an input and fits it (InputSpecError otherwise), before any slow step."""
        from infermeter.models.feeds_data import check_input_values

        check_input_values(self.inputs, self.values)
        self._shapes()

    @property
    def data_inputs(self) -> tuple[InputSpec, ...]:
        """The inputs that take data: every one not set to a constant."""
        constant = {name for name, _ in self.values}
        return tuple(spec for spec in self.inputs if spec.name not in constant)

    def load(self, ref: str, limit: int | None = None) -> SampleSet:
        """DATA's samples for the data inputs, with the constants."""
        return self._completed(load_samples(self.data_inputs, ref, limit))

    def random(self, count: int, seed: int) -> SampleSet:
        """`count` generated samples at the `--input` shapes, with the constants."""
        return self._completed(random_samples(self.data_inputs, count, seed, overrides=self.shapes))

    def _shapes(self, sequence_length: int = 16) -> dict[str, tuple[int, ...]]:
        """The inputs' shapes for one sample: the `--input` ones, and those sharing their named dims (an
        attention_mask beside input_ids), the other free dims `sequence_length` (as `random_samples`)."""
        from infermeter.models.inputs import resolve_shapes
        from infermeter.models.samples import sized_by_default

        return resolve_shapes(sized_by_default(self.inputs, sequence_length), 1, self.shapes)

    def _completed(self, samples: SampleSet) -> SampleSet:
        if not self.values:
            return samples
        from infermeter.models.feeds_data import constant_array
        from infermeter.models.inputs import batched_inputs

        shapes = self._shapes()
        batched = batched_inputs(self.inputs)
        by_name = {spec.name: spec for spec in self.inputs}
        constants = tuple(
            (name, constant_array(by_name[name], text, shapes[name]), name in batched and bool(shapes[name]))
            for name, text in self.values
        )
        return replace(samples, constants=constants)


def sample_shapes(samples: SampleSet) -> Sizes:
    """The shapes of one sample of each data input (batch 1), for timing a model on them."""
    return tuple((name, (1, *array.shape[1:])) for name, array in samples.arrays.items())


def own(inputs: Sequence[InputSpec], shapes: Sizes, values: Values) -> ModelInputs:
    """The `--input` flags as a ModelInputs of `inputs`, checked."""
    model_inputs = ModelInputs(tuple(inputs), shapes, values)
    model_inputs.check()
    return model_inputs
