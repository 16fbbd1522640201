"""The soak records the sizes it asked for and the shapes the engine ran once buckets padded them, apart."""

from __future__ import annotations

from infermeter.core.case import Case, MeasureSettings
from infermeter.measure.isolation import call_in_worker
from infermeter.measure.soak_case import soak_case
from infermeter.measure.soak_stream import soak_stream
from infermeter.models.resolve import resolve_model
from infermeter.results.records import SoakRecord, read_record

SEQ = (("seq", tuple(range(8, 65))),)
BUCKETS = (("seq", (16, 32, 64)),)


def test_the_stream_tells_requested_from_padded_shapes() -> None:
    stream = soak_stream(SEQ, BUCKETS, 300, "uniform", seed=2)
    assert len(stream.distinct()) == len({s for s in stream.warmup + stream.exploration})
    assert stream.padded(BUCKETS) == {(16,), (32,), (64,)}
    assert stream.padded(()) == stream.distinct()  # without buckets every requested size runs as it is


def test_a_bucketed_soak_records_requested_and_padded_shapes_apart() -> None:
    spec = resolve_model("bert_tiny")
    settings = MeasureSettings(soak_requests=300, soak_sample_every=50)
    case = Case(spec.ref, "null", shape_mode="dynamic", dynamic=SEQ, buckets=BUCKETS, settings=settings,
                options=(("null.latency_ms", "0.02"),))  # fmt: skip
    kind, result = call_in_worker(soak_case, (spec, case), timeout_s=120)
    assert kind == "result", result
    record = read_record(result, SoakRecord)
    assert record is not None
    assert record.padded_shapes == 3 and record.requested_shapes is not None and record.requested_shapes > 3
    assert record.distinct_shapes == record.requested_shapes  # the old field keeps its meaning for old readers
