"""``--format csv --map``: any CSV as a capacity or job trace, and the ``skypilot-raw`` preset."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from elasim.cli import app
from elasim.traces import TraceError, import_trace, load_trace


def write(tmp_path: Path, text: str, name: str = "in.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_capacity_by_header_names_seconds_counts_and_price(tmp_path: Path) -> None:
    path = write(tmp_path, "# a comment\nsecs,nodes,usd\n0,2,0.9\n60,2,0.9\n120,0,1.1\n180,3,1.1\n")
    trace = import_trace("csv", path, map="time=secs,available=nodes,price=usd")
    assert trace.kind == "capacity"
    assert list(trace.time_s) == [0.0, 120.0, 180.0]  # the repeated row is merged
    assert list(trace.available) == [2, 0, 3]
    assert list(trace.price_per_hour) == [0.9, 1.1, 1.1]
    assert trace.duration_s == 240.0  # last row + the median gap
    assert "map time=secs" in trace.metadata.source
    assert not trace.metadata.synthetic


def test_capacity_from_iso_times_and_failure_flags(tmp_path: Path) -> None:
    text = "0,2022-10-26T22:05:04Z,0\n1,2022-10-26T22:15:04Z,1\n2,2022-10-26T22:25:04Z,0\n"
    path = write(tmp_path, text, "raw.txt")
    trace = import_trace("csv", path, map="time=2,fail=3", nodes="4")
    assert list(trace.time_s) == [0.0, 600.0, 1200.0]
    assert list(trace.available) == [4, 0, 4]
    same = import_trace("skypilot-raw", path, nodes="4")
    assert list(same.available) == list(trace.available)
    later = import_trace("skypilot-raw", path, start="2022-10-26T22:20:04Z")
    assert list(later.time_s) == [0.0, 300.0] and list(later.available) == [0, 1]
    with pytest.raises(TraceError, match="before the first row"):
        import_trace("skypilot-raw", path, start="2022-10-26T21:05:04Z")


def test_time_units(tmp_path: Path) -> None:
    path = write(tmp_path, "t,n\n0,1\n2,0\n")
    assert list(import_trace("csv", path, map="time=t,available=n", time_unit="min").time_s) == [
        0.0,
        120.0,
    ]
    with pytest.raises(TraceError, match="time_unit"):
        import_trace("csv", path, map="time=t,available=n", time_unit="fortnight")


def test_job_trace_with_end_times_and_fractional_gpus(tmp_path: Path, caplog) -> None:
    text = (
        "id,start,finish,gpus\n"
        "a,2020-01-01 00:00:00,2020-01-01 01:00:00,0.5\n"
        "b,2020-01-01 00:10:00,2020-01-01 00:40:00,2\n"
        "c,2020-01-01 00:20:00,2020-01-01 00:21:00,1.25\n"
    )
    path = write(tmp_path, text)
    trace = import_trace("csv", path, map="submit=start,end=finish,gpus=gpus")
    assert trace.kind == "jobs"
    assert list(trace.submit_time_s) == [0.0, 600.0, 1200.0]
    assert list(trace.duration_s) == [3600.0, 1800.0, 60.0]
    assert list(trace.num_gpus) == [1, 2, 2]
    assert dict(trace.metadata.extra)["gpus_rounded_up"] == "2"
    assert "rounded 2 fractional GPU counts" in caplog.text


def test_job_trace_with_durations(tmp_path: Path) -> None:
    path = write(tmp_path, "0,30,4\n10,5,1\n")
    trace = import_trace("csv", path, map="submit=1,duration=2,gpus=3", time_unit="min")
    assert list(trace.submit_time_s) == [0.0, 600.0]
    assert list(trace.duration_s) == [1800.0, 300.0]


@pytest.mark.parametrize(
    ("text", "mapping", "where", "fragment"),
    [
        ("t,n\n0,1\n60,x\n", "time=t,available=n", (3, 2), "not a number"),
        ("t,n\n0,1\n60,1.5\n", "time=t,available=n", (3, 2), "not a node count"),
        ("t,n\n60,1\n0,1\n", "time=t,available=n", (3, 1), "time goes backwards"),
        ("t,n\n0,1\nyesterday,1\n", "time=t,available=n", (3, 1), "ISO 8601"),
        ("t,n\n0,1\n60\n", "time=t,available=n", (3, None), "needs 2"),
        ("t,n\n0,1\n", "time=t,available=nodes", (1, None), "no column named 'nodes'"),
        ("s,d,g\n0,10,0\n", "submit=s,duration=d,gpus=g", (2, 3), "gpus (column g) must be > 0"),
    ],
)
def test_errors_name_file_line_and_column(
    tmp_path: Path, text: str, mapping: str, where: tuple, fragment: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(TraceError) as info:
        import_trace("csv", path, map=mapping)
    assert (info.value.line, info.value.column) == where
    assert info.value.path == str(path)
    assert fragment in info.value.message


@pytest.mark.parametrize(
    ("mapping", "fragment"),
    [
        (None, "needs a column mapping"),
        ("time", "expected field=column"),
        ("when=1,available=2", "unknown field 'when'"),
        ("time=1,available=2,fail=3", "exactly one of available=COL and fail=COL"),
        ("available=2", "needs time=COL"),
        ("submit=1,gpus=2", "one of duration, end"),
    ],
)
def test_bad_mappings(tmp_path: Path, mapping: str | None, fragment: str) -> None:
    path = write(tmp_path, "0,1,0\n")
    options = {} if mapping is None else {"map": mapping}
    with pytest.raises(TraceError, match=fragment):
        import_trace("csv", path, **options)


def test_cli_maps_columns_and_fails_in_one_line(tmp_path: Path) -> None:
    source = write(tmp_path, "t,n,p\n0,2,0.9\n300,0,0.9\n")
    out = tmp_path / "out.csv"
    runner = CliRunner()
    args = ["traces", "import", "--format", "csv", str(source), str(out)]
    ok = runner.invoke(app, [*args, "--map", "time=t", "--map", "available=n,price=p"])
    assert ok.exit_code == 0, ok.output
    assert "capacity trace, 2 rows" in ok.output
    assert list(load_trace(out).available) == [2, 0]
    bad = write(tmp_path, "t,n\n0,1\n60,x\n", "bad.csv")
    failed = runner.invoke(app, [*args[:4], str(bad), str(out), "--map", "time=t,available=n"])
    assert failed.exit_code == 2
    assert f"{bad}:3:2: available (column n): 'x' is not a number" in failed.output
    assert failed.output.count("\n") == 1


def test_skypilot_raw_preset_matches_the_published_json(shared_traces: Path) -> None:
    """The raw probe logs are the source of the 10-26-2022 JSON traces (SOURCE.md)."""
    raw = shared_traces / "skypilot-spot-strategy-raw" / "2022-10-26T22-05"
    sky = shared_traces / "skypilot-spot-traces" / "availability" / "1-node" / "aws-10-26-2022"
    name = "us-west-2b_v100_1"
    from_raw = import_trace("skypilot-raw", raw / f"{name}.txt")
    data = json.loads((sky / f"{name}.json").read_text())["data"]
    changes = [v for i, v in enumerate(data) if i == 0 or v != data[i - 1]]
    assert list(from_raw.available) == changes
    gaps = np.diff(from_raw.time_s)
    assert np.all(gaps > 0)


#: A pod table like Alibaba's GPU trace: one pending pod ran 0 s, two pods have no GPU.
PODS = (
    "name,status,submit,duration,gpu\n"
    "a,Terminated,0,100,1\n"
    "b,Terminated,10,50,0\n"
    "c,Pending,20,0,2\n"
    "d,Terminated,30,40,\n"
    "e,Terminated,40,30,4\n"
)
PODS_MAP = "submit=submit,duration=duration,gpus=gpu"


def left_out(metadata) -> list[tuple[str, int]]:
    """What the importer recorded that it left out (``# rows_left_out:``)."""
    from elasim.traces import rows_left_out

    return rows_left_out(metadata)


def test_where_keeps_only_matching_rows_and_says_how_many_it_left_out(tmp_path: Path) -> None:
    path = write(tmp_path, PODS)
    trace = import_trace("csv", path, map=PODS_MAP, where=["gpu>0", "status==Terminated"])
    assert list(trace.submit_time_s) == [0.0, 40.0]
    assert list(trace.num_gpus) == [1, 4]
    assert left_out(trace.metadata) == [("where gpu>0", 2), ("where status==Terminated", 1)]


def test_skip_invalid_skips_rows_that_fail_validation_and_counts_each_reason(
    tmp_path: Path,
) -> None:
    path = write(tmp_path, PODS)
    with pytest.raises(TraceError) as strict:
        import_trace("csv", path, map=PODS_MAP)
    assert (strict.value.line, strict.value.column) == (4, 4)  # still one error, located
    trace = import_trace("csv", path, map=PODS_MAP, skip_invalid=True)
    assert list(trace.submit_time_s) == [0.0, 40.0]
    assert left_out(trace.metadata) == [
        ("invalid: gpus (column gpu) must be > 0", 1),
        ("invalid: duration (column duration) must be > 0", 1),
        ("invalid: gpus (column gpu): empty value", 1),
    ]


@pytest.mark.parametrize(
    ("clause", "fragment"),
    [
        ("gpu", "expected COLUMN OP VALUE"),
        ("gpus>0", "no column named 'gpus'"),
        ("gpu>lots", "'lots' is not a number"),
        ("__import__('os')>0", "no column named"),
    ],
)
def test_bad_where_is_one_line(tmp_path: Path, clause: str, fragment: str) -> None:
    path = write(tmp_path, PODS)
    with pytest.raises(TraceError, match=fragment):
        import_trace("csv", path, map=PODS_MAP, where=[clause])


def test_cli_where_and_skip_invalid_print_one_line_per_reason(tmp_path: Path) -> None:
    source = write(tmp_path, PODS)
    out = tmp_path / "out.csv"
    args = ["traces", "import", "-f", "csv", str(source), str(out), "--map", PODS_MAP]
    result = CliRunner().invoke(app, [*args, "--where", "status==Terminated", "--skip-invalid"])
    assert result.exit_code == 0, result.output
    assert "(jobs trace, 2 rows)" in result.output
    assert "left out 1 row: where status==Terminated" in result.output
    assert "left out 1 row: invalid: gpus (column gpu) must be > 0" in result.output
    assert "left out 1 row: invalid: gpus (column gpu): empty value" in result.output
    assert "# rows_left_out:" in out.read_text()
    bad = CliRunner().invoke(app, args)  # without the options: one line, exit 2
    assert bad.exit_code == 2
    assert f"{source}:4:4: job runs 0 s: duration must be > 0" in bad.output
    assert bad.output.count("\n") == 1


def test_opt_help_lists_the_options_rather_than_pointing_at_itself() -> None:
    result = CliRunner().invoke(app, ["traces", "import", "--help"], env={"COLUMNS": "200"})
    assert "see `elasim traces import --help`" not in result.output
    assert "elasim traces formats" in result.output
    listed = CliRunner().invoke(app, ["traces", "formats"], env={"COLUMNS": "200"})
    assert listed.exit_code == 0, listed.output
    assert "time_unit" in listed.output and "unit of plain-number times" in listed.output


@pytest.mark.parametrize(("clause", "meant"), [("gpu=>0", "gpu>=0"), ("gpu=<2", "gpu<=2")])
def test_a_swapped_operator_is_refused_not_read_as_text(tmp_path: Path, clause, meant) -> None:
    """``gpu=>0`` used to be ``gpu == '>0'`` (then "no data rows left")."""
    path = write(tmp_path, PODS)
    with pytest.raises(TraceError) as info:
        import_trace("csv", path, map=PODS_MAP, where=[clause])
    message = str(info.value)
    assert repr(clause) in message and "== != >= <= > <" in message
    assert repr(meant) in message
    assert "\n" not in message


def test_a_bad_cell_names_the_users_column(tmp_path: Path) -> None:
    """The mapped column is named as the user wrote it, beside the field it fills."""
    path = write(tmp_path, "start_s,dur,gpu\n0,10,1\nsoon,10,1\n", "badpods.csv")
    with pytest.raises(TraceError) as info:
        import_trace("csv", path, map="submit=start_s,duration=dur,gpus=gpu")
    assert "submit (column start_s)" in str(info.value)
    path = write(tmp_path, "start_s,dur,gpu\n0,10,1\n5,10,x\n", "badgpus.csv")
    with pytest.raises(TraceError) as info:
        import_trace("csv", path, map="submit=start_s,duration=dur,gpus=gpu")
    assert "gpus (column gpu)" in str(info.value)
