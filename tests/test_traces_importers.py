"""Importers on the real published files (facts from each SOURCE.md) and on tiny inputs."""

from __future__ import annotations

import json
import tempfile
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elasim.traces import (
    IMPORT_FORMATS,
    CapacityTrace,
    JobTrace,
    TraceError,
    import_trace,
    importer_options,
    load_trace,
)

REAL = Path(__file__).resolve().parents[2] / "shared" / "traces-real"
SKY16 = "skypilot-spot-traces/availability/16-node/aws-08-27-2023"
P3 = "bamboo/traces/p3-trace.csv"
G4DN = "bamboo/traces/g4dn-trace.csv"
PHILLY = "pollux-philly/philly.csv"
PRICE_DIR = "training-on-a-dime/aws/cost/us-east-2"


@pytest.fixture(scope="module")
def real() -> Path:
    if not REAL.is_dir():
        pytest.skip("../shared/traces-real is not beside the checkout")
    return REAL


def expand(trace: CapacityTrace, gap: float) -> list[int]:
    """Re-sample a compressed trace at the original ticks."""
    ticks = int(round(trace.duration_s / gap))
    return [trace.value_at(i * gap)[0] for i in range(ticks)]


# --------------------------------------------------------------------------- skypilot
def test_skypilot_16_node_us_east_2b(real: Path) -> None:
    src = real / SKY16 / "us-east-2b_v100_1.json"
    data = json.loads(src.read_text())["data"]
    trace = import_trace("skypilot", src, instance_type="p3.2xlarge", gpus_per_node="1")
    assert isinstance(trace, CapacityTrace)
    assert len(data) == 3247  # SOURCE.md
    assert trace.duration_s == 3247 * 300
    assert trace.max_available == 16 and trace.available.min() == 0
    assert expand(trace, 300) == data  # compression loses nothing
    assert np.all(np.diff(trace.available) != 0)  # and keeps no redundant rows
    assert trace.metadata.instance_type == "p3.2xlarge"


def test_skypilot_every_shared_file_imports(real: Path) -> None:
    files = sorted((real / "skypilot-spot-traces").rglob("*.json"))
    assert len(files) == 34  # SOURCE.md
    for path in files:
        doc = json.loads(path.read_text())
        trace = import_trace("skypilot", path)
        assert trace.max_available == max(doc["data"]), path
        assert trace.duration_s == len(doc["data"]) * doc["metadata"]["gap_seconds"]
        assert (trace.price_per_hour is not None) == ("prices" in doc)


def test_skypilot_prices_column(real: Path) -> None:
    path = real / "skypilot-spot-traces/preemption/1-node/aws-04-22-2023/us-east-1c_v100_1.json"
    trace = import_trace("skypilot", path)
    assert trace.price_per_hour is not None
    assert set(trace.price_per_hour.tolist()) == {0.918}  # SOURCE.md: constant for p3.2xlarge


@pytest.mark.parametrize(
    ("doc", "column", "fragment"),
    [
        ({"data": [1]}, "metadata", "no 'metadata' key"),
        ({"metadata": {"gap_seconds": 0}, "data": [1]}, "metadata.gap_seconds", "positive"),
        ({"metadata": {"gap_seconds": 60}, "data": []}, "data", "non-empty"),
        ({"metadata": {"gap_seconds": 60}, "data": [1, -1]}, "data[1]", "negative"),
        ({"metadata": {"gap_seconds": 60}, "data": [1, 0.5]}, "data[1]", "not an integer"),
        ({"metadata": {"gap_seconds": 60}, "data": [1, True]}, "data[1]", "not an integer"),
        ({"metadata": {"gap_seconds": 60}, "data": [1, 1], "prices": [1]}, "prices", "as long"),
        ({"metadata": {"gap_seconds": 60}, "data": [1], "prices": [0]}, "prices[0]", "positive"),
    ],
)
def test_skypilot_bad_values(tmp_path: Path, doc: dict, column: str, fragment: str) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(TraceError) as info:
        import_trace("skypilot", path)
    assert info.value.column == column and fragment in info.value.message


def test_skypilot_small_by_hand(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    doc = {
        "metadata": {"gap_seconds": 60},
        "data": [0, 0, 2, 2, 2, 1],
        "prices": [1, 1, 1, 2, 2, 2],
    }
    path.write_text(json.dumps(doc))
    trace = import_trace("skypilot", path, tmp_path / "out.csv")
    assert trace.time_s.tolist() == [0, 120, 180, 300]
    assert trace.available.tolist() == [0, 2, 2, 1]
    assert trace.duration_s == 360
    assert trace.name == "out"
    assert load_trace(tmp_path / "out.csv").available.tolist() == [0, 2, 2, 1]


def test_json_syntax_error_has_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text('{"metadata": {"gap_seconds": 60},\n "data": [1, 2,, 3]}')
    with pytest.raises(TraceError) as info:
        import_trace("skypilot", path)
    assert (info.value.line, info.value.column) == (2, 16)  # the second comma


# --------------------------------------------------------------------------- bamboo
def test_bamboo_p3(real: Path) -> None:
    trace = import_trace("bamboo", real / P3)
    lines = (real / P3).read_bytes().split(b"\r\n")
    assert len([x for x in lines if x]) == 344  # SOURCE.md rows
    assert trace.max_available == 32  # SOURCE.md: max concurrent
    assert (trace.time_s[0], trace.available[0]) == (0, 18)  # 18 nodes added at t=0
    assert trace.time_s[-1] == 40920  # last event 40,920,000 ms
    assert trace.available[-1] == 177 - 167  # adds - removes
    assert trace.metadata.get("first_event_ms") is None


def test_bamboo_g4dn_starts_at_first_event(real: Path) -> None:
    trace = import_trace("bamboo", real / G4DN)
    assert trace.max_available == 24  # SOURCE.md
    assert trace.metadata.get("first_event_ms") == "480000"
    assert trace.time_s[-1] == (38_760_000 - 480_000) / 1000
    assert trace.available[-1] == 79 - 74


def test_bamboo_small_by_hand(tmp_path: Path) -> None:
    path = tmp_path / "b.csv"
    path.write_bytes(
        b"0,add,n1\r\n0,add,n2\r\n60000,remove,n1\r\n60000,add,n3\r\n180000,remove,n2\r\n"
    )
    trace = import_trace("bamboo", path)
    # same-instant add+remove at 60 s leaves 2 nodes: merged with the t=0 row
    assert trace.time_s.tolist() == [0, 180]
    assert trace.available.tolist() == [2, 1]
    assert trace.duration_s == 180 + 90  # median of gaps 60, 120
    assert import_trace("bamboo", path, duration_s="1000").duration_s == 1000


@pytest.mark.parametrize(
    ("text", "line", "column", "fragment"),
    [
        ("0,add,n1\n5,remove,n2\n", 2, 3, "remove of node 'n2' that is not present"),
        ("0,add,n1\n5,remove,n1\n6,remove,n1\n", 3, 3, "not present"),
        ("0,add,n1\n5,add,n1\n", 2, 3, "added twice (present since line 1)"),
        ("0,add,n1\n5,boot,n2\n", 2, 2, "'add' or 'remove'"),
        ("10,add,n1\n5,add,n2\n", 2, 1, "time goes backwards"),
        ("delta_ms,event,node\n0,add,n1\n", 1, 1, "headerless"),
        ("0,add\n", 1, 3, "expected 3 fields"),
        ("0,add,n1\n5,add,\n", 2, 3, "empty node name"),
    ],
)
def test_bamboo_errors(tmp_path: Path, text: str, line: int, column: int, fragment: str) -> None:
    path = tmp_path / "b.csv"
    path.write_text(text)
    with pytest.raises(TraceError) as info:
        import_trace("bamboo", path)
    assert (info.value.line, info.value.column) == (line, column)
    assert fragment in info.value.message


# --------------------------------------------------------------------------- aws-price
@pytest.fixture(scope="module")
def sky_east(real: Path) -> CapacityTrace:
    trace = import_trace(
        "skypilot", real / SKY16 / "us-east-2b_v100_1.json", instance_type="p3.2xlarge"
    )
    assert isinstance(trace, CapacityTrace)
    return trace


def test_aws_price_splice_real(real: Path, sky_east: CapacityTrace) -> None:
    trace = import_trace(
        "aws-price",
        real / PRICE_DIR,
        base=sky_east,
        zone="us-east-2b",
        start="2020-01-01T00:00:00Z",
    )
    assert isinstance(trace, CapacityTrace)
    assert trace.duration_s == sky_east.duration_s
    assert trace.metadata.region == "us-east-2"
    # availability untouched at every original tick
    assert expand(trace, 300) == expand(sky_east, 300)
    # hand-checked against the JSON: 2019-12-31T07:16:09Z 0.918 is in effect at t=0;
    # 2020-01-05T18:30:05Z -> 0.9188 and 2020-01-06T01:03:20Z -> 0.9204 (us-east-2b)
    assert trace.value_at(0)[1] == 0.918
    t_0106 = 5 * 86400 + 1 * 3600 + 3 * 60 + 20
    assert trace.value_at(t_0106 - 1)[1] == 0.9188
    assert trace.value_at(t_0106)[1] == 0.9204
    assert trace.metadata.get("price_start_utc") == "2020-01-01T00:00:00Z"
    assert trace.metadata.get("price_note") is None
    assert "spliced" in (trace.metadata.source or "")


def test_aws_price_overlapping_windows_dedup(real: Path, sky_east: CapacityTrace) -> None:
    files = sorted((real / PRICE_DIR).glob("*p3.2xlarge.json"))
    assert len(files) == 5
    once = import_trace("aws-price", files, base=sky_east, zone="us-east-2b", start="2020-02-25")
    twice = import_trace(
        "aws-price", files + files, base=sky_east, zone="us-east-2b", start="2020-02-25"
    )
    assert np.array_equal(once.time_s, twice.time_s)
    assert np.array_equal(once.price_per_hour, twice.price_per_hour)  # type: ignore[arg-type]


def price_file(path: Path, records: list[tuple[str, str, str]]) -> Path:
    doc = {
        "SpotPriceHistory": [
            {
                "AvailabilityZone": zone,
                "InstanceType": "p3.2xlarge",
                "ProductDescription": "Linux/UNIX",
                "SpotPrice": price,
                "Timestamp": ts,
            }
            for ts, zone, price in records
        ]
    }
    path.write_text(json.dumps(doc))
    return path


def test_aws_price_by_hand(tmp_path: Path) -> None:
    base = CapacityTrace("b", [0, 100], [1, 2], duration_s=300)
    prices = price_file(
        tmp_path / "p.json",
        [
            ("2020-01-01T00:03:20.000Z", "z-1a", "2.0"),  # t=200
            ("2020-01-01T00:00:50.000Z", "z-1a", "1.0"),  # t=50
            ("2020-01-01T00:00:50.000Z", "z-1a", "1.0"),  # duplicate
            ("2019-12-31T23:00:00.000Z", "z-1a", "0.5"),  # in effect at t=0
            ("2020-01-01T00:00:10.000Z", "z-1b", "9.0"),  # other zone
        ],
    )
    trace = import_trace("aws-price", prices, base=base, zone="z-1a", start="2020-01-01T00:00:00Z")
    assert trace.time_s.tolist() == [0, 50, 100, 200]
    assert trace.available.tolist() == [1, 1, 2, 2]
    assert trace.price_per_hour.tolist() == [0.5, 1.0, 1.0, 2.0]  # type: ignore[union-attr]
    # the newest record (00:03:20) is before the trace end (00:05:00): price held
    assert trace.metadata.get("price_note") == "price series ends; last price held from t=200 s"
    assert trace.metadata.region == "z-1"


@pytest.mark.parametrize(
    ("records", "opts", "fragment"),
    [
        ([("2020-01-01T00:00:00Z", "z-1a", "1")], {"start": "2019-01-01"}, "before the first"),
        ([("2020-01-01T00:00:00Z", "z-1a", "1")], {"zone": "z-1c"}, "no p3.2xlarge records in"),
        (
            [("2020-01-01T00:00:00Z", "z-1a", "1"), ("2020-01-01T00:00:00Z", "z-1a", "2")],
            {},
            "conflicting",
        ),
        (
            [("2020-01-01T00:00:00Z", "z-1a", "1"), ("2020-01-01T00:00:00Z", "z-1b", "2")],
            {},
            "zone",
        ),
        ([("yesterday", "z-1a", "1")], {}, "ISO 8601"),
        ([("2020-01-01T00:00:00Z", "z-1a", "-1")], {}, "> 0"),
        ([("2020-01-01T00:00:00Z", "z-1a", "1")], {"start": "soon"}, "ISO 8601"),
    ],
)
def test_aws_price_errors(tmp_path: Path, records: list, opts: dict, fragment: str) -> None:
    base = CapacityTrace("b", [0, 100], [1, 2], duration_s=300)
    path = price_file(tmp_path / "p.json", records)
    with pytest.raises(TraceError, match=fragment):
        import_trace("aws-price", path, base=base, **opts)


def test_aws_price_needs_base_and_capacity_base(tmp_path: Path) -> None:
    path = price_file(tmp_path / "p.json", [("2020-01-01T00:00:00Z", "z-1a", "1")])
    with pytest.raises(TraceError, match="needs option base"):
        import_trace("aws-price", path)
    with pytest.raises(TraceError, match="this is a job trace"):
        import_trace("aws-price", path, base="philly_jobs.csv")


# --------------------------------------------------------------------------- philly
@pytest.fixture(scope="module")
def philly(real: Path) -> JobTrace:
    trace = import_trace("philly", real / PHILLY)
    assert isinstance(trace, JobTrace)
    return trace


def test_philly_full(philly: JobTrace) -> None:
    assert philly.num_jobs == 82_247  # SOURCE.md
    assert np.all(np.diff(philly.submit_time_s) >= 0) and philly.submit_time_s[0] == 0
    span = datetime(2017, 12, 22, 8, 2, 11) - datetime(2017, 9, 4, 10, 30, 41)
    assert philly.submit_time_s[-1] == span.total_seconds()
    sizes, counts = np.unique(philly.num_gpus, return_counts=True)
    assert dict(zip(sizes.tolist(), counts.tolist(), strict=True)) == {
        1: 76_627,
        2: 1_818,
        4: 1_870,
        8: 1_643,
        12: 7,
        16: 199,
        24: 7,
        32: 67,
        64: 6,
        128: 3,
    }
    assert philly.duration_s.max() == 4_628_226
    assert np.median(philly.duration_s) == 1_144
    assert philly.metadata.get("start_time_local") == "2017-09-04 10:30:41"


def test_philly_filters(real: Path) -> None:
    assert import_trace("philly", real / PHILLY, pollux_filter="true").num_jobs == 74_428
    vc = import_trace("philly", real / PHILLY, cluster="6214e9")
    assert vc.num_jobs == 41_226  # SOURCE.md
    two = import_trace("philly", real / PHILLY, cluster="6214e9,11cb48")
    assert two.num_jobs == 41_226 + 16_091
    week = import_trace(
        "philly", real / PHILLY, start="2017-11-01 00:00:00", end="2017-12-01 00:00:00"
    )
    assert week.num_jobs == 21_318  # SOURCE.md: November


def test_philly_errors(tmp_path: Path) -> None:
    header = "timestamp,duration,num_gpus,gpu_time,cluster\n"
    cases = [
        (header + "2017-10-09 07:01:55,66.0,1,67.0,11cb48\n", 2, 4, "gpu_time"),
        (header + "2017-10-09,66.0,1,66.0,11cb48\n", 2, 1, "YYYY-MM-DD HH:MM:SS"),
        (header + "2017-10-09 07:01:55,abc,1,66.0,11cb48\n", 2, 2, "not a number"),
        (header + "2017-10-09 07:01:55,66,0,0,11cb48\n", 2, 3, ">= 1"),
        (header + "2017-10-09 07:01:55,66,1,66,\n", 2, 5, "empty"),
        (header + "2017-10-09 07:01:55,66,1\n", 2, 4, "expected 5 fields"),
        ("timestamp,duration,num_gpus,gpu_time\n", 1, None, "missing column(s) cluster"),
        ("timestamp,duration,num_gpus,gpu_time,cluster,x\n", 1, 6, "unknown column"),
    ]
    for text, line, column, fragment in cases:
        path = tmp_path / "p.csv"
        path.write_text(text)
        with pytest.raises(TraceError) as info:
            import_trace("philly", path)
        assert (info.value.line, info.value.column) == (line, column), text
        assert fragment in info.value.message
    with pytest.raises(TraceError, match="no jobs left"):
        path.write_text(header + "2017-10-09 07:01:55,66,1,66,a\n")
        import_trace("philly", path, cluster="b")


# --------------------------------------------------------------------------- wrong formats
RAW = "skypilot-spot-strategy-raw/2022-10-26T22-05/us-west-2a_v100_1.txt"
#: ``csv`` has no native file: without a mapping every file is the wrong format.
NATIVE = {
    "skypilot": f"{SKY16}/us-east-2b_v100_1.json",
    "bamboo": P3,
    "philly": PHILLY,
    "aws-price": f"{PRICE_DIR}/p3.2xlarge.json",
    "skypilot-raw": RAW,
    "csv": None,
}
OTHER_FILES = [*(f for f in NATIVE.values() if f), "bamboo/SOURCE.md"]


@pytest.mark.parametrize(
    ("fmt", "src"),
    [(fmt, src) for fmt in IMPORT_FORMATS for src in OTHER_FILES if src != NATIVE[fmt]],
)
def test_wrong_format_is_a_trace_error(real: Path, fmt: str, src: str) -> None:
    opts = {"base": CapacityTrace("b", [0], [1], duration_s=10)} if fmt == "aws-price" else {}
    with pytest.raises(TraceError) as info:
        import_trace(fmt, real / src, **opts)
    assert info.value.path == str(real / src)
    assert "\n" not in str(info.value)


def test_binary_and_missing_inputs(tmp_path: Path) -> None:
    blob = tmp_path / "x.bin"
    blob.write_bytes(bytes(range(256)))
    for fmt in IMPORT_FORMATS:
        opts = {"base": CapacityTrace("b", [0], [1], duration_s=10)} if fmt == "aws-price" else {}
        with pytest.raises(TraceError):
            import_trace(fmt, blob, **opts)
        with pytest.raises(TraceError, match="no such file"):
            import_trace(fmt, tmp_path / "missing", **opts)


def test_options_are_checked() -> None:
    with pytest.raises(TraceError, match="unknown import format 'parquet'"):
        import_trace("parquet", "x")
    with pytest.raises(TraceError, match="unknown option 'zone' for format skypilot"):
        import_trace("skypilot", "x", zone="a")
    with pytest.raises(TraceError, match="gpus_per_node=two"):
        import_trace("skypilot", "x", gpus_per_node="two")
    with pytest.raises(TraceError, match="pollux_filter=maybe"):
        import_trace("philly", "x", pollux_filter="maybe")
    names = {o.name for o in importer_options("aws-price")}
    assert {"base", "zone", "start", "instance_type"} <= names


# --------------------------------------------------------------------------- fuzz
SMALL_INPUTS = {
    "skypilot-raw": (
        "0,2022-10-26T22:05:04.000Z,0\n1,2022-10-26T22:15:04.000Z,1\n2,2022-10-26T22:25:04.000Z,0\n"
    ),
    "csv": "t,n,p\n0,1,0.9\n60,0,0.9\n120,2,1.1\n",
    "skypilot": '{"metadata": {"gap_seconds": 60}, "data": [0, 2, 2, 1], "prices": [1, 1, 2, 2]}',
    "bamboo": "0,add,n1\r\n0,add,n2\r\n60000,remove,n1\r\n120000,add,n3\r\n",
    "philly": (
        "timestamp,duration,num_gpus,gpu_time,cluster\n"
        "2017-10-09 07:01:55,66.0,1,66.0,11cb48\n2017-10-09 06:13:03,2951.0,2,5902.0,6214e9\n"
    ),
    "aws-price": json.dumps(
        {
            "SpotPriceHistory": [
                {
                    "AvailabilityZone": "z-1a",
                    "InstanceType": "p3.2xlarge",
                    "ProductDescription": "Linux/UNIX",
                    "SpotPrice": "1.5",
                    "Timestamp": "2020-01-01T00:00:00.000Z",
                }
            ]
        }
    ),
}


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(sorted(SMALL_INPUTS)),
    st.lists(st.tuples(st.floats(0, 1), st.integers(0, 3), st.text(max_size=6)), max_size=4),
)
def test_importers_on_corrupted_input_raise_only_trace_error(
    fmt: str, edits: list[tuple[float, int, str]]
) -> None:
    text = SMALL_INPUTS[fmt]
    for where, op, junk in edits:
        i = int(where * len(text))
        if op == 0:
            text = text[:i] + junk + text[i + 1 :]  # replace one character
        elif op == 1:
            text = text[:i]  # truncate
        elif op == 2:
            text = text[:i] + junk + text[i:]  # insert
        else:
            lines = text.split("\n")
            text = "\n".join(reversed(lines))  # reorder rows
    opts: dict = {"base": CapacityTrace("b", [0], [1], duration_s=10)} if fmt == "aws-price" else {}
    if fmt == "csv":
        opts = {"map": "time=t,available=n,price=p"}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "in.txt"
        path.write_bytes(text.encode("utf-8", errors="surrogatepass"))
        try:
            import_trace(fmt, path, **opts)
        except TraceError as err:
            assert err.path == str(path) or err.path is None
            assert "\n" not in str(err)
