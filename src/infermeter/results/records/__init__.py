"""Typed records a case carries beside its core fields (parity, accuracy, roofline, optimize, generation, load, int8,
node, soak, footprint, processes, serving level, server metrics), each stored in the case's `extra` in its on-disk
form, so files written before these records existed read unchanged. Read one with `read_record(case, ParityRecord)`,
store one with `write_record(case, record)`.

`CASE_RECORDS` is the registry: every record a case may carry. `tests/results/test_records.py` round-trips each
through JSON; a new record is added here.
"""

from __future__ import annotations

from infermeter.results.records.accuracy import Accuracy, AccuracyError, QuantizedVariant
from infermeter.results.records.base import Record, copy_record, read_record, write_record
from infermeter.results.records.engine_log import EngineLog, EngineWarning, engine_log_footnotes
from infermeter.results.records.generate import SLO, Distribution, GenerationCase, GenerationSummary, GgufQuality
from infermeter.results.records.int8_run import Int8Run, LayerMix, LayerProfile, LayerTime, NodeGroup, why_int8
from infermeter.results.records.load import LoadRecord, TunePoint
from infermeter.results.records.node import LostAttempt, NodeRecord
from infermeter.results.records.optimize import OptimizeStep
from infermeter.results.records.parity import OutputMetrics, ParityRecord, Tolerance
from infermeter.results.records.precision import ComputePrecision
from infermeter.results.records.processes import ProcessRecord, ProcessRun, most_processes
from infermeter.results.records.roofline import Roofline, RooflineError
from infermeter.results.records.serving import ServerMetrics, ServerSample, ServingLevel
from infermeter.results.records.soak import Footprint, SoakRecord

CASE_RECORDS: tuple[type[Record], ...] = (
    ParityRecord,
    Accuracy,
    AccuracyError,
    QuantizedVariant,
    Roofline,
    RooflineError,
    OptimizeStep,
    GenerationSummary,
    GenerationCase,
    GgufQuality,
    LoadRecord,
    TunePoint,
    Int8Run,
    NodeRecord,
    SoakRecord,
    Footprint,
    ProcessRecord,
    ServingLevel,
    ServerMetrics,
    ComputePrecision,
    EngineLog,
)

__all__ = [
    "CASE_RECORDS",
    "SLO",
    "Accuracy",
    "AccuracyError",
    "ComputePrecision",
    "Distribution",
    "EngineLog",
    "EngineWarning",
    "Footprint",
    "GenerationCase",
    "GenerationSummary",
    "GgufQuality",
    "Int8Run",
    "LayerMix",
    "LayerProfile",
    "LayerTime",
    "LoadRecord",
    "LostAttempt",
    "NodeGroup",
    "NodeRecord",
    "OptimizeStep",
    "OutputMetrics",
    "ParityRecord",
    "ProcessRecord",
    "ProcessRun",
    "QuantizedVariant",
    "Record",
    "Roofline",
    "RooflineError",
    "ServerMetrics",
    "ServerSample",
    "ServingLevel",
    "SoakRecord",
    "Tolerance",
    "TunePoint",
    "copy_record",
    "engine_log_footnotes",
    "most_processes",
    "read_record",
    "why_int8",
    "write_record",
]
