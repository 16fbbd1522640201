"""Dynamic-shape plans: size parsing, shape points, bucket padding."""

from __future__ import annotations

import numpy as np
import pytest

from infermeter.core.errors import InputSpecError, UsageError
from infermeter.measure.shapes import asked_shapes, pad_feeds, parse_sizes, plan_shapes
from infermeter.models.inputs import InputSpec, generate_feeds

TEXT = (
    InputSpec("input_ids", "int64", shape=("batch", "seq"), int_range=(5, 50)),
    InputSpec("attention_mask", "int64", shape=("batch", "seq")),
)


def test_parse_sizes_range_and_list() -> None:
    assert parse_sizes("seq=16..128", "--dynamic", points=8) == ("seq", [16, 32, 48, 64, 80, 96, 112, 128])
    assert parse_sizes("batch=4,1,16", "--dynamic") == ("batch", [1, 4, 16])
    assert parse_sizes("seq=3..5", "--dynamic", points=8) == ("seq", [3, 4, 5])
    for bad in ("seq", "seq=", "seq=9..2", "seq=a,b", "seq=0,4"):
        with pytest.raises(UsageError):
            parse_sizes(bad, "--dynamic")


def test_plan_shapes_covers_every_size_and_sets_shared_dims() -> None:
    points = plan_shapes(TEXT, 2, [], [("seq", (8, 16, 32))])
    assert sorted(dict(p.dims)["seq"] for p in points) == [8, 16, 32]
    for point in points:
        seq = dict(point.dims)["seq"]
        assert point.shapes == {"input_ids": (2, seq), "attention_mask": (2, seq)}


def test_plan_shapes_rejects_unknown_dims() -> None:
    with pytest.raises(InputSpecError, match="symbolic dims are batch, seq"):
        plan_shapes(TEXT, 1, [("input_ids", (1, 8)), ("attention_mask", (1, 8))], [("length", (1, 2))])


def test_buckets_pad_with_zeros_up_to_the_nearest_size() -> None:
    points = plan_shapes(TEXT, 1, [], [("seq", (5, 16, 17))], [("seq", (16, 32))])
    by_seq = {dict(p.dims)["seq"]: p for p in points}
    assert by_seq[5].shapes["input_ids"] == (1, 16) and by_seq[17].shapes["input_ids"] == (1, 32)
    assert by_seq[16].label == "seq=16" and by_seq[5].label == "seq=5→16"
    point = by_seq[5]
    feeds = generate_feeds(TEXT, asked_shapes(TEXT, point), 1)[0]
    padded = pad_feeds(TEXT, feeds, point)
    assert padded["input_ids"].shape == (1, 16)
    np.testing.assert_array_equal(padded["input_ids"][:, :5], feeds["input_ids"])
    assert not padded["input_ids"][:, 5:].any() and not padded["attention_mask"][:, 5:].any()
    assert padded["attention_mask"][:, :5].all()
    with pytest.raises(UsageError, match="exceeds the largest bucket"):
        plan_shapes(TEXT, 1, [], [("seq", (40,))], [("seq", (16, 32))])
