"""Canonical CSV loaders and writers: good files, every malformed case, properties."""

from __future__ import annotations

import os
import random
import re
import tempfile
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elasim.traces import (
    CapacityTrace,
    JobTrace,
    TraceError,
    TraceMetadata,
    bundled_trace_names,
    format_capacity_trace,
    load_capacity_trace,
    load_job_trace,
    load_trace,
    reader,
    resolve_trace,
    write_capacity_trace,
    write_job_trace,
)
from elasim.traces.reader import CAPACITY_COLUMNS, JOB_COLUMNS

GOOD_CAPACITY = """\
# instance_type: p3.2xlarge
# gpus_per_node: 1
## a free comment
# region: us-east-2
# on_demand_price_per_hour: 3.06
# source: hand-written test file
# synthetic: true
# duration_s: 400
# collected_by: someone
time_s,available,price_per_hour
0,2,0.9
100,0,0.9

250,3,1.25
"""

GOOD_JOBS = """\
# source: test
# synthetic: true
submit_time_s,duration_s,num_gpus,priority
0,10,1,0
0,5.5,8,2
30,100,4,-1
"""


def write(tmp_path: Path, text: str | bytes, name: str = "t.csv") -> Path:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return path


# --------------------------------------------------------------------------- good files
def test_load_capacity_good(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD_CAPACITY, "spot.csv")
    trace = load_trace(path)
    assert isinstance(trace, CapacityTrace)
    assert trace.name == "spot"
    assert trace.time_s.tolist() == [0.0, 100.0, 250.0]
    assert trace.available.tolist() == [2, 0, 3]
    assert trace.price_per_hour is not None
    assert trace.price_per_hour.tolist() == [0.9, 0.9, 1.25]
    assert trace.duration_s == 400.0
    assert trace.available.dtype == np.int64 and trace.time_s.dtype == np.float64
    assert trace.metadata == TraceMetadata(
        instance_type="p3.2xlarge",
        gpus_per_node=1,
        region="us-east-2",
        on_demand_price_per_hour=3.06,
        source="hand-written test file",
        synthetic=True,
        extra=(("collected_by", "someone"),),
    )
    assert load_capacity_trace(path).duration_s == 400.0


def test_load_capacity_without_price_crlf_bom_and_default_duration(tmp_path: Path) -> None:
    text = "\ufefftime_s,available\r\n0,1\r\n10,2\r\n40,16.0\r\n"
    trace = load_capacity_trace(write(tmp_path, text))
    assert trace.price_per_hour is None
    assert trace.available.tolist() == [1, 2, 16]
    # last time + median gap (gaps 10 and 30 -> median 20)
    assert trace.duration_s == 60.0
    assert trace.metadata == TraceMetadata()


def test_columns_in_any_order(tmp_path: Path) -> None:
    text = "available,price_per_hour,time_s\n3,1.5,0\n1,2,60\n"
    trace = load_capacity_trace(write(tmp_path, text))
    assert trace.time_s.tolist() == [0, 60]
    assert trace.available.tolist() == [3, 1]


def test_load_jobs_good(tmp_path: Path) -> None:
    trace = load_trace(write(tmp_path, GOOD_JOBS, "jobs.csv"))
    assert isinstance(trace, JobTrace)
    assert trace.submit_time_s.tolist() == [0, 0, 30]
    assert trace.duration_s.tolist() == [10, 5.5, 100]
    assert trace.num_gpus.tolist() == [1, 8, 4]
    assert trace.priority.tolist() == [0, 2, -1]
    assert trace.metadata.synthetic is True
    assert load_job_trace(
        write(tmp_path, "submit_time_s,num_gpus,duration_s\n5,2,7\n")
    ).priority.tolist() == [0]


def test_arrays_are_read_only(tmp_path: Path) -> None:
    trace = load_capacity_trace(write(tmp_path, GOOD_CAPACITY))
    with pytest.raises(ValueError):
        trace.available[0] = 99
    jobs = load_job_trace(write(tmp_path, GOOD_JOBS, "j.csv"))
    with pytest.raises(ValueError):
        jobs.num_gpus[0] = 99


# --------------------------------------------------------------------------- malformed
CAP = "time_s,available,price_per_hour\n"
MALFORMED = [
    # (id, text, line, column, message fragment)
    ("empty", "", None, None, "empty file"),
    ("blank-only", "\n  \n", None, None, "empty file"),
    ("metadata-only", "# source: x\n# region: r\n\n", 3, None, "no header row"),
    ("no-header", "0,1\n10,2\n", 1, None, "no header row"),
    ("unknown-header", "foo,bar\n1,2\n", 1, None, "unrecognised header"),
    ("unknown-column", "time_s,available,foo\n0,1,2\n", 1, 3, "unknown column 'foo'"),
    ("duplicate-column", "time_s,available,time_s\n0,1,2\n", 1, 3, "duplicate column 'time_s'"),
    ("missing-column", "time_s,price_per_hour\n0,1\n", 1, None, "missing column(s) available"),
    ("missing-job-column", "submit_time_s,num_gpus\n0,1\n", 1, None, "duration_s"),
    ("empty-column-name", "time_s,,available\n0,1,2\n", 1, 2, "empty column name"),
    ("no-rows", "# source: x\n" + CAP, 2, None, "no data rows"),
    ("non-numeric", CAP + "0,1,1\n10,abc,1\n", 3, 2, "'abc' is not an integer"),
    ("non-numeric-time", CAP + "0,1,1\nten,1,1\n", 3, 1, "'ten' is not a number"),
    ("nan", CAP + "0,1,1\n10,1,nan\n", 3, 3, "'nan' is not a finite number"),
    ("inf", CAP + "0,1,1\ninf,1,1\n", 3, 1, "'inf' is not a finite number"),
    ("overflow", CAP + "0,1,1\n1e999,1,1\n", 3, 1, "out of range"),
    ("underscore", CAP + "0,1_0,1\n", 2, 2, "not an integer"),
    ("empty-cell", CAP + "0,,1\n", 2, 2, "empty value"),
    ("negative-count", CAP + "0,1,1\n10,-2,1\n", 3, 2, "negative node count -2"),
    ("non-integer-count", CAP + "0,2.5,1\n", 2, 2, "'2.5' is not an integer"),
    (
        "backwards",
        CAP + "0,1,1\n10,2,1\n5,3,1\n",
        4,
        1,
        "time goes backwards, 5 is before 10 on line 3",
    ),
    ("duplicate-time", CAP + "0,1,1\n10,2,1\n10,3,1\n", 4, 1, "duplicate time 10 (also on line 3)"),
    ("first-not-zero", CAP + "5,1,1\n10,2,1\n", 2, 1, "first row must be at time 0"),
    ("price-zero", CAP + "0,1,1\n10,2,0\n", 3, 3, "price must be > 0"),
    ("price-negative", CAP + "0,1,-0.5\n", 2, 3, "price must be > 0"),
    ("too-few-fields", CAP + "0,1,1\n10,2\n", 3, 3, "expected 3 fields"),
    ("too-many-fields", CAP + "0,1,1,7\n", 2, 4, "expected 3 fields"),
    ("bad-quote", CAP + '0,"1,1\n', 2, None, "malformed quoting"),
    ("one-row-no-duration", CAP + "0,1,1\n", 2, None, "needs a '# duration_s: N'"),
    ("duration-too-short", "# duration_s: 5\n" + CAP + "0,1,1\n10,1,1\n", 1, None, "must be after"),
    (
        "meta-bad-int",
        "# gpus_per_node: abc\n" + CAP + "0,1,1\n",
        1,
        None,
        "'abc' is not an integer",
    ),
    ("meta-zero-gpus", "# source: s\n# gpus_per_node: 0\n" + CAP, 2, None, "positive integer"),
    ("meta-bad-price", "# on_demand_price_per_hour: free\n" + CAP, 1, None, "not a number"),
    ("meta-bad-bool", "# synthetic: maybe\n" + CAP, 1, None, "true or false"),
    ("meta-empty", "# region:\n" + CAP, 1, None, "empty value"),
    ("meta-malformed", "# hello world\n" + CAP, 1, None, "malformed metadata line"),
    (
        "meta-duplicate",
        "# region: a\n# region: b\n" + CAP,
        2,
        None,
        "duplicate metadata key 'region'",
    ),
    ("meta-after-header", CAP + "0,1,1\n# source: late\n", 3, None, "before the header"),
    (
        "job-duration-meta",
        "# duration_s: 5\nsubmit_time_s,duration_s,num_gpus\n0,1,1\n",
        1,
        None,
        "only capacity",
    ),
    (
        "job-backwards",
        "submit_time_s,duration_s,num_gpus\n10,1,1\n5,1,1\n",
        3,
        1,
        "time goes backwards",
    ),
    ("job-zero-gpus", "submit_time_s,duration_s,num_gpus\n0,1,0\n", 2, 3, "must be >= 1"),
    ("job-zero-duration", "submit_time_s,duration_s,num_gpus\n0,0,1\n", 2, 2, "must be > 0"),
    ("job-negative-submit", "submit_time_s,duration_s,num_gpus\n-1,1,1\n", 2, 1, "negative time"),
    (
        "job-bad-priority",
        "submit_time_s,duration_s,num_gpus,priority\n0,1,1,high\n",
        2,
        4,
        "not an integer",
    ),
    ("not-utf8", b"time_s,available\n0,1\n\xff\xfe,2\n", 3, None, "not UTF-8"),
    ("nul-byte", "time_s,available\n0,1\n1\x00,2\n", 3, None, "NUL byte"),
]


@pytest.mark.parametrize(
    ("text", "line", "column", "fragment"),
    [case[1:] for case in MALFORMED],
    ids=[case[0] for case in MALFORMED],
)
def test_malformed_reports_line_and_column(
    tmp_path: Path, text: str | bytes, line: int | None, column: int | None, fragment: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(TraceError) as info:
        load_trace(path)
    err = info.value
    assert (err.path, err.line, err.column) == (str(path), line, column)
    assert fragment in err.message
    prefix = ":".join(str(p) for p in (path, line, column) if p is not None)
    assert str(err) == f"{prefix}: {err.message}"
    assert "\n" not in str(err)


def test_wrong_kind_for_specific_loader(tmp_path: Path) -> None:
    jobs = write(tmp_path, GOOD_JOBS, "jobs.csv")
    with pytest.raises(TraceError, match=r"jobs.csv:3: this is a job trace .* expected a capacity"):
        load_capacity_trace(jobs)
    cap = write(tmp_path, GOOD_CAPACITY, "cap.csv")
    with pytest.raises(TraceError, match=r"cap.csv:10: this is a capacity trace"):
        load_job_trace(cap)


def test_missing_file_lists_bundled(tmp_path: Path) -> None:
    with pytest.raises(TraceError) as info:
        load_trace(tmp_path / "nope.csv")
    assert "spot_us_east.csv" in str(info.value)
    with pytest.raises(TraceError, match="no such trace file"):
        load_trace("definitely_not_bundled.csv")
    with pytest.raises(TraceError, match="is a directory"):
        load_trace(tmp_path)


def test_resolve_bare_name_prefers_bundled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "spot_us_east.csv").write_text("not a trace\n")
    bundled = resolve_trace("spot_us_east.csv")
    assert bundled.parent.name == "data" and bundled != tmp_path / "spot_us_east.csv"
    assert resolve_trace("spot_us_east") == bundled
    assert resolve_trace("./spot_us_east.csv").resolve() == (tmp_path / "spot_us_east.csv")
    (tmp_path / "mine.csv").write_text("time_s,available\n0,1\n5,2\n")
    assert load_trace("mine.csv").name == "mine"


# --------------------------------------------------------------------------- writer
def test_writer_is_canonical_and_atomic(tmp_path: Path) -> None:
    trace = load_capacity_trace(write(tmp_path, GOOD_CAPACITY))
    out = tmp_path / "out.csv"
    out.write_text("old content")
    os.chmod(out, 0o640)
    write_capacity_trace(trace, out)
    assert oct(out.stat().st_mode & 0o777) == oct(0o640)  # mode of the replaced file kept
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temp left
    assert out.read_text() == (
        "# instance_type: p3.2xlarge\n# gpus_per_node: 1\n# region: us-east-2\n"
        "# on_demand_price_per_hour: 3.06\n# source: hand-written test file\n# synthetic: true\n"
        "# duration_s: 400\n# collected_by: someone\n"
        "time_s,available,price_per_hour\n0,2,0.9\n100,0,0.9\n250,3,1.25\n"
    )
    again = load_capacity_trace(out)
    assert format_capacity_trace(again) == out.read_text()


def test_writer_failure_keeps_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trace = load_capacity_trace(write(tmp_path, GOOD_CAPACITY))
    out = tmp_path / "keep.csv"
    out.write_text("precious")

    def boom(*_args: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", boom)
    with pytest.raises(OSError, match="disk full"):
        write_capacity_trace(trace, out)
    assert out.read_text() == "precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.csv", "t.csv"]


def test_job_writer_round_trip(tmp_path: Path) -> None:
    jobs = load_job_trace(write(tmp_path, GOOD_JOBS, "j.csv"))
    out = write_job_trace(jobs, tmp_path / "j2.csv")
    back = load_job_trace(out)
    for field in ("submit_time_s", "duration_s", "num_gpus", "priority"):
        assert np.array_equal(getattr(back, field), getattr(jobs, field))
    assert back.metadata == jobs.metadata
    no_prio = JobTrace("x", [0, 1], [1, 2], [1, 1])
    text = write_job_trace(no_prio, tmp_path / "np.csv").read_text()
    assert "priority" not in text and "gpus_per_node" not in text


# --------------------------------------------------------------------------- properties
_TEXT = (
    st.text(
        alphabet=st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")),
        min_size=1,
        max_size=30,
    )
    .map(str.strip)
    .filter(bool)
)
_KEYS = st.from_regex(r"[a-z_][a-z0-9_]{0,10}", fullmatch=True).filter(
    lambda k: (
        k
        not in {
            "instance_type",
            "gpus_per_node",
            "region",
            "on_demand_price_per_hour",
            "source",
            "synthetic",
            "duration_s",
        }
    )
)


@st.composite
def capacity_traces(draw: st.DrawFn) -> CapacityTrace:
    n = draw(st.integers(1, 40))
    gaps = draw(
        st.lists(
            st.floats(1e-3, 1e6, allow_nan=False, allow_infinity=False), min_size=n, max_size=n
        )
    )
    times = np.concatenate([[0.0], np.cumsum(gaps[:-1])]) if n > 1 else np.array([0.0])
    if n > 1 and not np.all(np.diff(times) > 0):
        times = np.arange(n, dtype=float) * 7.5
    duration = float(times[-1] + gaps[-1])
    available = draw(st.lists(st.integers(0, 10**9), min_size=n, max_size=n))
    has_price = draw(st.booleans())
    prices = (
        draw(st.lists(st.floats(1e-6, 1e4, allow_nan=False), min_size=n, max_size=n))
        if has_price
        else None
    )
    extra_keys = draw(st.lists(_KEYS, max_size=3, unique=True))
    meta = TraceMetadata(
        instance_type=draw(st.none() | _TEXT),
        gpus_per_node=draw(st.integers(1, 64)),
        region=draw(st.none() | _TEXT),
        on_demand_price_per_hour=draw(st.none() | st.floats(1e-3, 1e3)),
        source=draw(st.none() | _TEXT),
        synthetic=draw(st.booleans()),
        extra=tuple((k, draw(_TEXT)) for k in extra_keys),
    )
    return CapacityTrace("rt", times, available, prices, meta, duration)


@settings(max_examples=120, deadline=None)
@given(capacity_traces())
def test_round_trip_is_exact(trace: CapacityTrace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = write_capacity_trace(trace, Path(tmp) / "rt.csv")
        back = load_capacity_trace(path)
    assert back.name == "rt"
    assert np.array_equal(back.time_s, trace.time_s)
    assert np.array_equal(back.available, trace.available)
    if trace.price_per_hour is None:
        assert back.price_per_hour is None
    else:
        assert back.price_per_hour is not None
        assert np.array_equal(back.price_per_hour, trace.price_per_hour)
    assert back.duration_s == trace.duration_s
    assert back.metadata == trace.metadata


_GARBAGE = [
    "",
    " ",
    "nan",
    "NaN",
    "inf",
    "-inf",
    "1e999",
    "1e-400",
    "abc",
    "-1",
    "-0",
    "0x10",
    "1_000",
    "1.5",
    '"',
    '"1"',
    ",",
    ",,",
    "#",
    "# k: v",
    "\r",
    "\x00",
    "é",
    "\ufeff",
    "9" * 40,
    "\t3",
]


@st.composite
def corrupted(draw: st.DrawFn) -> str:
    base = draw(st.sampled_from([GOOD_CAPACITY, GOOD_JOBS]))
    lines = base.split("\n")
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["cell", "truncate", "shuffle", "delete", "duplicate", "insert"]))
        i = rng.randrange(len(lines))
        if op == "cell":
            cells = lines[i].split(",")
            j = rng.randrange(len(cells))
            cells[j] = draw(st.sampled_from(_GARBAGE) | st.text(max_size=8))
            lines[i] = ",".join(cells)
        elif op == "truncate":
            lines[i] = lines[i][: rng.randrange(len(lines[i]) + 1)]
        elif op == "shuffle":
            header = next(k for k, line in enumerate(lines) if line and not line.startswith("#"))
            body = lines[header + 1 :]
            rng.shuffle(body)
            lines[header + 1 :] = body
        elif op == "delete" and len(lines) > 1:
            del lines[i]
        elif op == "duplicate":
            lines.insert(i, lines[i])
        else:
            lines.insert(i, draw(st.text(max_size=20)))
    return "\n".join(lines)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corrupted())
def test_corruption_only_raises_trace_error_with_line(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bad.csv"
        path.write_bytes(text.encode("utf-8", errors="surrogatepass"))
        try:
            load_trace(path)
        except TraceError as err:
            assert err.line is not None, str(err)
            assert str(err).startswith(f"{path}:{err.line}:"), str(err)
            assert "\n" not in str(err)
            assert re.fullmatch(r".+:\d+(:[^:]+)?: .+", str(err), flags=re.S)


# --------------------------------------------------------------------------- bulk path
#: cells that the bulk path's alphabet allows, good and bad (its refusals must be the
#: strict path's errors, its values the strict path's values)
_BULK_CELLS = ["0", "1", "-0", "+3", "7", "12", "1.5", "1e3", "1E-2", ".5", "5.", "16.0", "007"]
_BULK_CELLS += ["-1", "1e999", "9" * 18, "9" * 19, "", "e5", "1e", "+", ".", "1.2.3", "2-1", "E"]


@st.composite
def bulk_texts(draw: st.DrawFn) -> str:
    """Small traces of either kind, mostly clean, with cells from :data:`_BULK_CELLS`."""
    kind = draw(st.sampled_from([CAPACITY_COLUMNS, JOB_COLUMNS]))
    names = list(kind[: draw(st.sampled_from([len(kind) - 1, len(kind)]))])
    names = draw(st.permutations(names))
    rows, time_s = [], 0
    for _ in range(draw(st.integers(0, 6))):
        row = {n: str(time_s) if n in ("time_s", "submit_time_s") else "2" for n in names}
        time_s += draw(st.sampled_from([0, 5, 10]))  # ties: legal for jobs only
        for name in draw(st.lists(st.sampled_from(names), max_size=1)):
            row[name] = draw(st.sampled_from(_BULK_CELLS))
        rows.append(",".join(row[n] for n in names))
    end = draw(st.sampled_from(["\n", "\r\n"]))
    body = end.join([",".join(names), *rows])
    return body + (end if draw(st.booleans()) else "")


def _outcome(path: Path) -> tuple[str, ...]:
    """What loading gives: the error, or every array's dtype and bytes."""
    try:
        trace = load_trace(path)
    except TraceError as err:
        return ("error", str(err))
    if isinstance(trace, JobTrace):
        arrays = [trace.submit_time_s, trace.duration_s, trace.num_gpus, trace.priority]
    else:
        arrays = [trace.time_s, trace.available, trace.price_per_hour]
        arrays.append(np.asarray(trace.duration_s))
    return tuple(repr(None if a is None else (a.dtype.str, a.tobytes())) for a in arrays)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bulk_texts())
def test_bulk_path_reads_what_the_strict_path_reads(text: str) -> None:
    """Same arrays, bit for bit, or the same error at the same line and column."""
    with tempfile.TemporaryDirectory() as tmp:
        path = write(Path(tmp), text)
        fast = _outcome(path)
        with mock.patch.object(reader, "bulk_columns", lambda *_: None):
            strict = _outcome(path)
    assert fast == strict


def test_clean_traces_are_read_in_bulk(tmp_path: Path) -> None:
    """The bundled traces and an imported-looking job trace never go cell by cell."""
    rows = "".join(f"{i},{1 + i % 7}.5,{1 + i % 8}\r\n" for i in range(2000))
    jobs = write(tmp_path, "# source: test\r\nsubmit_time_s,duration_s,num_gpus\r\n" + rows)
    read, original = [], reader.bulk_columns

    def spy(*args: object) -> object:
        read.append(original(*args))  # type: ignore[arg-type]
        return read[-1]

    with mock.patch.object(reader, "bulk_columns", spy):
        assert load_job_trace(jobs).duration_s[3] == 4.5
        for name in bundled_trace_names():
            load_trace(name)
    assert read and all(r is not None for r in read)
    assert read[0] is not None and read[0][1] == 2000
