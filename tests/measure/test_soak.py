"""The soak (`bench --soak N`): its stream, its bookkeeping (slope, plateau, the warning) on the null backend with a
simulated leak and a simulated plateau, and the CLI end to end."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from cli_helpers import load_json, run_cli, run_main
from infermeter.core.case import Case, MeasureSettings
from infermeter.measure.isolation import call_in_worker
from infermeter.measure.soak_analysis import (
    MemorySample,
    growth_slope,
    growth_warning,
    is_growing,
    latency_windows,
    plateau_at,
)
from infermeter.measure.soak_case import soak_case
from infermeter.measure.soak_stream import bucket_of, soak_stream
from infermeter.models.resolve import resolve_model
from infermeter.results.records import Footprint, SoakRecord, read_record

SEQ = (("seq", tuple(range(8, 65))),)


def test_the_stream_is_seeded_phased_and_explores_every_size_before_its_replay() -> None:
    stream = soak_stream(SEQ, (), 1000, "uniform", seed=3)
    assert stream == soak_stream(SEQ, (), 1000, "uniform", seed=3)  # the same for every case of a run
    assert stream != soak_stream(SEQ, (), 1000, "uniform", seed=4)
    assert {sizes[0] for sizes in stream.exploration} == set(SEQ[0][1])  # every size seen in the exploration
    start = len(stream.warmup) + len(stream.exploration)
    assert stream.phase(0) == "warmup" and stream.phase(start - 1) == "exploration" and stream.phase(start) == "replay"
    # The replay is the exploration's sequence again.
    assert [stream.request(start + i) for i in range(50)] == list(stream.exploration[:50])
    # Too few requests for every size: the exploration is completed anyway.
    short = soak_stream(SEQ, (), 20, "uniform")
    assert {sizes[0] for sizes in short.exploration} == set(SEQ[0][1])


def test_with_buckets_the_exploration_needs_only_every_bucket_and_zipf_favours_short_sizes() -> None:
    buckets = (("seq", (16, 32, 64)),)
    stream = soak_stream(SEQ, buckets, 40, "uniform", seed=1)
    assert {bucket_of(s[0], (16, 32, 64)) for s in stream.exploration} == {16, 32, 64}
    zipf = soak_stream(SEQ, (), 4000, "zipf", seed=1)
    sizes = [s[0] for s in zipf.exploration]
    assert sum(s < 20 for s in sizes) > 2 * sum(s > 52 for s in sizes)


def _samples(rss: list[float], step: int = 100) -> list[MemorySample]:
    return [MemorySample(i * step, i * 0.1, value, value) for i, value in enumerate(rss)]


def test_slope_interval_plateau_and_warning_on_synthetic_memory() -> None:
    leak = _samples([100 + 0.5 * i for i in range(40)])  # +0.5 MB per 100 requests = +5 MB per 1k
    slope = growth_slope([s.request for s in leak], [s.rss_mb for s in leak])
    assert slope is not None and slope.mb_per_1k == pytest.approx(5.0)
    assert slope.low <= 5.0 <= slope.high
    assert is_growing(slope, 4000, 2.0) and plateau_at(leak, 2.0) is None
    warning = growth_warning(True, slope, 4000)
    assert warning is not None and warning.code == "memory_growing" and "--buckets" in warning.message
    # Growth that stops at request 1500, then flat with noise: a plateau there, no growth after it.
    flat = _samples([100 + min(i, 15) * 3 + (0.3 if i % 2 else -0.3) for i in range(40)])
    assert plateau_at(flat, 2.0) == 1500
    late = [s for s in flat if s.request >= 2000]
    flat_slope = growth_slope([s.request for s in late], [s.rss_mb for s in late])
    assert not is_growing(flat_slope, 2000, 2.0)
    # Still rising in the last fifth: too late to call it a plateau.
    assert plateau_at(_samples([100 + min(i, 36) * 3 for i in range(40)]), 2.0) is None
    assert growth_slope([1, 2], [1.0, 2.0]) is None
    windows = latency_windows([1.0] * 50 + [2.0] * 50, windows=2)
    assert windows == [[0, 49, 1.0, 1.0], [50, 99, 2.0, 2.0]]


def _soak(options: tuple[tuple[str, str], ...], requests: int = 2500, recycle: int = 0) -> tuple[SoakRecord, list[str]]:
    spec = resolve_model("bert_tiny")
    settings = MeasureSettings(soak_requests=requests, soak_sample_every=50, soak_recycle_after=recycle)
    case = Case(spec.ref, "null", shape_mode="dynamic", dynamic=SEQ, settings=settings,
                options=(("null.latency_ms", "0.02"), *options))  # fmt: skip
    # In a fresh process, as bench runs a soak: RSS in a process that has freed memory before (this test
    # process) rises later than the simulated leak does, since new allocations first reuse freed pages.
    kind, result = call_in_worker(soak_case, (spec, case), timeout_s=120)
    assert kind == "result", result
    assert result.status == "ok", result.error
    record = read_record(result, SoakRecord)
    assert record is not None and read_record(result, Footprint) is not None
    assert result.latency_ms is not None and result.memory.rss_timeline_mb
    return record, [w.code for w in result.warnings]


def test_a_simulated_leak_is_measured_as_growth_with_the_warning() -> None:
    record, warnings = _soak((("null.leak_kb", "64"),))  # 64 KB per request = 62.5 MB per 1,000 requests
    assert record.growing and record.plateau_at is None
    assert record.slope_mb_per_1k == pytest.approx(62.5, rel=0.1)
    assert record.slope_ci_mb_per_1k is not None and record.slope_ci_mb_per_1k[0] > 50
    assert record.replay_requests > 1000 and record.end_rss_mb - record.start_rss_mb > 100
    assert "memory_growing" in warnings


def test_a_simulated_plateau_is_found_and_not_called_growth() -> None:
    record, warnings = _soak((("null.leak_kb", "64"), ("null.leak_until", "600")))
    assert not record.growing and "memory_growing" not in warnings
    assert record.plateau_at is not None and 550 <= record.plateau_at <= 700
    assert record.slope_mb_per_1k is not None and abs(record.slope_mb_per_1k) < 1.0
    assert record.peak_rss_mb - record.start_rss_mb > 30  # it did grow, before the plateau


def test_recycling_the_session_stops_a_simulated_leak_from_growing() -> None:
    record, warnings = _soak((("null.leak_kb", "64"),), recycle=400)
    assert not record.growing and "memory_growing" not in warnings
    assert record.peak_rss_mb - record.start_rss_mb < 40  # at most ~400 requests' worth held at once (25 MB)
    assert record.recycle_after == 400


def test_bench_soak_runs_each_variant_in_its_own_worker_and_reports_slope_plateau_and_chart(tmp_path: Path) -> None:
    out = tmp_path / "soak.json"
    proc = run_cli(
        "bench", "bert_tiny", "-b", "null", "-b", "null:leak_kb=64", "-O", "null.latency_ms=0.02",
        "--soak", "1500", "--dynamic", "seq=8..64", "--buckets", "seq=16,32,64", "--no-roofline", "-o", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    cases = load_json(out)["cases"]
    assert [c["batch"] for c in cases] == [1, 1]  # a soak defaults to batch 1
    plain, leaking = (c["soak"] for c in cases)
    assert not plain["growing"] and leaking["growing"]
    assert plain["buckets"] == {"seq": [16, 32, 64]} and plain["requests"] == 1500
    assert cases[0]["shapes"]["dynamic"]["seq"] == list(range(8, 65))  # a soak draws from every length of the range
    assert "soak: memory over the replay" in proc.stdout and "stayed flat" in proc.stdout
    html = tmp_path / "r.html"
    report = run_main("report", str(out), "-o", str(html))  # in this process: the file is what is checked
    assert report.returncode == 0, report.stderr
    assert "chart-soak-memory" in html.read_text()
    markdown = tmp_path / "r.md"
    assert run_main("report", str(out), "-o", str(markdown)).returncode == 0
    assert "## Soak: memory over the replay" in markdown.read_text() and "| null leak_kb=64 buckets | growing |" in (
        markdown.read_text()
    )


def test_soak_usage_errors() -> None:
    # Refused before any work: the CLI's entry point in this process (the bench runs above go end to end).
    proc = run_main("bench", "bert_tiny", "-b", "null", "--soak", "100")
    assert proc.returncode == 2 and "--dynamic" in proc.stderr
    proc = run_main("bench", "bert_tiny", "-b", "null", "--soak", "100", "--dynamic", "seq=8..64", "--no-isolation")
    assert proc.returncode == 2 and "--no-isolation" in proc.stderr
    proc = run_main("bench", "bert_tiny", "-b", "null", "--memory-limit", "lots")
    assert proc.returncode == 2 and "memory size" in proc.stderr
    proc = run_main("bench", "bert_tiny", "-b", "null", "--allocator", "hoard")
    assert proc.returncode == 2 and "jemalloc" in proc.stderr


def _cgroup_v2_writable() -> bool:
    from infermeter.measure.memlimit import make_limit

    limit = make_limit(64, "probe")
    if limit.cgroup:
        Path(limit.cgroup).rmdir()
    return limit.cgroup is not None


@pytest.mark.parametrize("via", ["cgroup", "rlimit"])
def test_memory_limit_below_a_case_peak_is_oom_and_a_case_under_it_is_measured(tmp_path: Path, via: str) -> None:
    """Both ways a limit is imposed: a cgroup v2 (where one can be made here) and RLIMIT_AS (forced, so it runs on
    every machine). The OOM case records the peak it reached, or says plainly that none could be seen."""
    from infermeter.measure.memlimit import LIMIT_VIA_VARIABLE
    from infermeter.measure.worker import run_isolated

    if via == "cgroup" and not _cgroup_v2_writable():
        pytest.skip("no writable cgroup v2 with the memory controller here: the RLIMIT_AS case covers this machine")
    spec = resolve_model("tiny_cnn")
    settings = MeasureSettings(warmup_iterations=1, min_time_s=0.1, min_iterations=5, max_time_s=2, target_ci=0.0,
                               interleave=False)  # fmt: skip
    heavy = Case(spec.ref, "null", options=(("null.load_mb", "700"),), settings=settings)
    measured = run_isolated(spec, heavy)
    assert measured.status == "ok" and measured.memory.peak_rss_mb is not None and measured.memory.peak_rss_mb > 700
    limit_mb = 600  # below the heavy case's measured peak, above what a plain null worker needs
    assert limit_mb < measured.memory.peak_rss_mb
    out = tmp_path / "limit.json"
    proc = run_cli(
        "bench", "tiny_cnn", "-b", "null:load_mb=700", "-b", "null", "--batch", "1", "--warmup", "1", "--iterations",
        "5", "--min-time", "0", "--max-time", "1", "--rounds", "2", "--target-ci", "0",
        "--memory-limit", f"{limit_mb}MB", "--no-roofline", "-o", str(out),
        env={LIMIT_VIA_VARIABLE: via},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    heavy_result, light_result = load_json(out)["cases"]  # the sweep went on past the oom case
    assert heavy_result["status"] == "oom", heavy_result
    assert "--memory-limit 600 MB" in heavy_result["error"]
    peak = heavy_result["memory"]["peak_rss_mb"]
    assert (peak is not None and peak > 0) or "no resident peak could be seen" in heavy_result["error"]
    assert ("RLIMIT_AS counts address space" in heavy_result["error"]) == (via == "rlimit")
    assert light_result["status"] == "ok" and light_result["memory"]["peak_rss_mb"] < limit_mb
    how = "RLIMIT_AS" if via == "rlimit" else "cgroup v2 memory.max"
    assert any("memory limit 600 MB" in note and how in note for note in light_result["notes"])


def test_an_oom_worker_that_ended_before_any_sample_says_so_plainly() -> None:
    from infermeter.measure.execute import blank_result
    from infermeter.measure.memlimit import MemoryLimit, mark_oom

    spec = resolve_model("tiny_cnn")
    result = blank_result(spec, Case(spec.ref, "null"), "crashed", "the worker process was killed by SIGSEGV")
    mark_oom(result, MemoryLimit(600), seen_peak_mb=0.0)
    assert result.status == "oom" and result.memory.peak_rss_mb is None
    assert "no resident peak could be seen" in (result.error or "")


def test_an_allocator_is_a_case_of_its_own_run_with_its_environment() -> None:
    from infermeter.measure.allocator import allocator_environment, allocator_unavailable, check_allocator

    assert allocator_environment("arenas=2") == {"MALLOC_ARENA_MAX": "2"}
    assert allocator_environment("glibc") == {}
    assert check_allocator("tcmalloc") == "tcmalloc"
    spec = resolve_model("bert_tiny")
    base = Case(spec.ref, "null")
    assert replace(base, allocator="jemalloc").id != base.id
    reason = allocator_unavailable("jemalloc")
    assert reason is None or "libjemalloc2" in reason


def test_a_timed_soak_stops_at_its_minutes_and_data_lengths_shape_the_stream() -> None:
    spec = resolve_model("bert_tiny")
    settings = MeasureSettings(soak_minutes=0.02, soak_sample_every=50)
    case = Case(spec.ref, "null", shape_mode="dynamic", dynamic=SEQ, settings=settings,
                options=(("null.latency_ms", "0.5"),))  # fmt: skip
    record = read_record(soak_case(spec, case), SoakRecord)
    assert record is not None and record.stopped_by == "minutes" and 0 < record.requests < 5000
    # Lengths found in data: only those sizes are drawn (beyond the exploration's one of each).
    stream = soak_stream(SEQ, (), 2000, "data", seed=0, data_lengths=[10] * 90 + [60] * 10)
    drawn = [s[0] for s in stream.exploration]
    assert drawn.count(10) > 5 * drawn.count(60) > 0 and set(drawn) == set(SEQ[0][1])


def test_a_cgroup_v2_limit_on_a_fake_tree(tmp_path: Path) -> None:
    from infermeter.measure import memlimit

    root = tmp_path / "cgroup"
    root.mkdir()
    (root / "cgroup.controllers").write_text("cpu memory\n")
    (root / "cgroup.subtree_control").write_text("memory\n")
    # This process's cgroup is read from /proc/self/cgroup; point it at the fake root.
    own = memlimit._own_cgroup
    memlimit._own_cgroup = lambda _root: root  # type: ignore[assignment]
    try:
        limit = memlimit.make_limit(256, "case-1", root)
    finally:
        memlimit._own_cgroup = own  # type: ignore[assignment]
    assert limit.cgroup is not None and "cgroup v2 memory.max" in limit.how
    folder = Path(limit.cgroup)
    assert (folder / "memory.max").read_text() == str(256 * 2**20)
    (folder / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    (folder / "memory.peak").write_text(str(300 * 2**20))
    assert memlimit.cgroup_outcome(limit) == (True, 300.0)
    # Without a writable cgroup v2 the worker falls back to RLIMIT_AS, and says what it counts.
    fallback = memlimit.make_limit(256, "case-2", tmp_path / "absent")
    assert fallback.cgroup is None and "counts address space" in fallback.how


def test_a_soak_longer_than_its_case_timeout_goes_on_while_it_reports_progress_and_a_hung_one_is_stopped() -> None:
    from infermeter.measure.soak_run import run_soak

    spec = resolve_model("bert_tiny")
    # 250 requests slept 40 ms each: 10 s of soak whatever the load, over the 8 s --case-timeout, which bounds the
    # worker's silences only (it reports progress at each memory sample, every 20 requests (0.8 s) here).
    settings = MeasureSettings(soak_requests=250, soak_sample_every=20, case_timeout_s=8.0)
    case = Case(spec.ref, "null", shape_mode="dynamic", dynamic=SEQ, settings=settings,
                options=(("null.latency_ms", "40"), ("null.wait", "sleep")))  # fmt: skip
    result = run_soak(spec, case)
    assert result.status == "ok", result.error
    assert result.duration_s is not None and result.duration_s > settings.case_timeout_s
    hung = replace(case, options=(("null.hang", "run"),), settings=replace(settings, case_timeout_s=3.0))
    stopped = run_soak(spec, hung)
    assert stopped.status == "timeout" and "no progress reported for 3 s" in (stopped.error or "")
