"""Derive the bundled traces in traces/data/ from the real files in shared/traces-real.

Usage (from the repository root):

    python scripts/build_bundled_traces.py [SRC] [--out DIR]

SRC defaults to ../shared/traces-real next to the repository; DIR defaults to
traces/data.  Only the public importers (elasim.traces.import_trace) are used, so
every bundled file can be reproduced with `elasim traces import` as well; the
exact calls are listed in traces/README.md.  The output is deterministic: running
the script twice gives byte-identical files (tests/test_traces_bundled.py checks
that the committed files equal a fresh build).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elasim.traces import TraceError, import_trace, summarize

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SRC = REPO_ROOT.parent / "shared" / "traces-real"
DEFAULT_OUT = REPO_ROOT / "traces" / "data"

SKYPILOT = "skypilot-org/spot-traces@221da1ab9bdfe7966da296265d7694d52dc0c5a6"
DIME = "stanford-futuredata/training_on_a_dime@85f659572ff9da2701e5f309fbad7e828e6be46b"
BAMBOO = "uclasystem/bamboo@80809293289419d40a870b4a9ccb8df0082ce3fb"
ADAPTDL = "petuum/adaptdl@de25dcc90c350b8ade3a710e437a651a8d2efae6 (osdi21-artifact)"

#: AWS public on-demand list price of p3.2xlarge (Linux) in us-east-1, us-east-2 and
#: us-west-2, USD per hour.  Not part of any trace file; stated as such in `source`.
P3_2XLARGE_ON_DEMAND_PER_HOUR = 3.06
#: Wall-clock time that trace t=0 is aligned to in the 2020 price history.  A neutral
#: choice (not picked for its prices); the 16-node traces then fall in Jan 2020.
PRICE_START_UTC = "2020-01-01T00:00:00Z"


@dataclass(frozen=True)
class Step:
    """One import_trace call; `base_from` feeds the previous step's trace as `base`."""

    fmt: str
    src: str
    opts: dict[str, Any] = field(default_factory=dict)
    base_from_previous: bool = False


@dataclass(frozen=True)
class Bundle:
    """One bundled file and the import steps that produce it."""

    out: str
    steps: tuple[Step, ...]


def _spliced_spot(zone: str, region: str) -> Bundle:
    avail = f"availability/16-node/aws-08-27-2023/{zone}_v100_1.json"
    source = (
        f"SPLICED from two real sources of different years: availability = {SKYPILOT} "
        f"{avail} (16 x p3.2xlarge one-time spot requests every 300 s in {zone}, started "
        f"2023-08-27); spot price = {DIME} logs/aws/cost/{region}/*.json (AWS "
        f"describe-spot-price-history, {zone} p3.2xlarge Linux/UNIX, Dec 2019 - Mar 2020) "
        f"aligned so that t=0 is {PRICE_START_UTC}; on_demand_price_per_hour = AWS public "
        f"on-demand list price of p3.2xlarge (Linux, {region}), not from a trace"
    )
    out = "spot_us_east.csv" if region.startswith("us-east") else "spot_us_west.csv"
    return Bundle(
        out,
        (
            Step(
                "skypilot",
                f"skypilot-spot-traces/{avail}",
                {
                    "instance_type": "p3.2xlarge",
                    "region": region,
                    "gpus_per_node": 1,
                    "on_demand_price_per_hour": P3_2XLARGE_ON_DEMAND_PER_HOUR,
                },
            ),
            Step(
                "aws-price",
                f"training-on-a-dime/aws/cost/{region}",
                {"zone": zone, "start": PRICE_START_UTC, "source": source},
                base_from_previous=True,
            ),
        ),
    )


BUNDLES: tuple[Bundle, ...] = (
    _spliced_spot("us-east-2b", "us-east-2"),
    _spliced_spot("us-west-2a", "us-west-2"),
    Bundle(
        "spot_p3_bamboo.csv",
        (
            Step(
                "bamboo",
                "bamboo/traces/p3-trace.csv",
                {
                    "source": (
                        f"{BAMBOO} traces/p3-trace.csv (Bamboo NSDI'23 node add/remove events "
                        "of an AWS p3 spot cluster; instance size, region, date and prices "
                        "not recorded, so gpus_per_node 1 is an assumption; t=0 is the first "
                        "event; duration = last event + median gap)"
                    ),
                },
            ),
        ),
    ),
    Bundle(
        "philly_jobs.csv",
        (
            Step(
                "philly",
                "pollux-philly/philly.csv",
                {
                    "cluster": "6214e9",
                    "start": "2017-11-06 00:00:00",
                    "end": "2017-11-13 00:00:00",
                    "source": (
                        f"{ADAPTDL} simulator/traces/philly.csv (Pollux-condensed Microsoft "
                        "Philly trace, CC BY 4.0): virtual cluster 6214e9, jobs submitted "
                        "2017-11-06 00:00 to 2017-11-13 00:00 local time, no other filter; "
                        "t=0 is the first job"
                    ),
                },
            ),
        ),
    ),
)


def build(src: Path, out: Path) -> list[Path]:
    """Write every bundled trace from the real files under `src` into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for bundle in BUNDLES:
        trace = None
        for i, step in enumerate(bundle.steps):
            last = i == len(bundle.steps) - 1
            opts = dict(step.opts)
            if step.base_from_previous:
                opts["base"] = trace
            trace = import_trace(
                step.fmt,
                src / step.src,
                out / bundle.out if last else None,
                name=Path(bundle.out).stem,
                **opts,
            )
        written.append(out / bundle.out)
    return written


#: The Pollux cluster-scheduling data, copied byte for byte (see traces/README.md):
#: the eight evaluation workloads and the six measured application profiles.
CLUSTER_WORKLOADS = tuple(range(1, 9))
CLUSTER_APPLICATIONS = ("bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3")


def build_cluster(src: Path, out: Path) -> list[Path]:
    """Copy the Pollux workloads and application profiles under ``out/cluster``.

    Byte copies, not a derived form: the files are small (about 620 KiB in all) and
    byte identity is what makes their provenance checkable against the upstream
    blobs.  Every file is parsed on the way (``elasim.traces.cluster.read_workload_csv`` /
    ``load_application``), so a damaged source fails the build, not a later run.
    """
    from elasim.traces.cluster import load_application, read_workload_csv

    root = src / "pollux-philly"
    written = []
    work_dir = out / "cluster" / "workloads"
    work_dir.mkdir(parents=True, exist_ok=True)
    for i in CLUSTER_WORKLOADS:
        target = work_dir / f"pollux-workload-{i}.csv"
        target.write_bytes((root / "workloads" / f"workload-{i}.csv").read_bytes())
        read_workload_csv(target)
        written.append(target)
    for app in CLUSTER_APPLICATIONS:
        app_dir = out / "cluster" / "applications" / app
        app_dir.mkdir(parents=True, exist_ok=True)
        for source in sorted((root / "applications" / app).glob("*.csv")):
            target = app_dir / source.name
            target.write_bytes(source.read_bytes())
            written.append(target)
        load_application(app_dir)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src", nargs="?", type=Path, default=DEFAULT_SRC)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    if not args.src.is_dir():
        print(f"error: {args.src}: not a directory (the shared real traces)", file=sys.stderr)
        return 2
    try:
        paths = build(args.src, args.out)
        cluster = build_cluster(args.src, args.out)
    except TraceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from elasim.traces import load_trace

    print(f"{args.out / 'cluster'}: {len(cluster)} files (Pollux workloads and applications)")
    for path in paths:
        info = summarize(load_trace(path))
        if info["kind"] == "capacity":
            detail = f"{info['duration_h']:.1f} h, max {info['max_available']} nodes"
        else:
            detail = f"{info['jobs']} jobs over {info['span_h']:.1f} h"
        size_kb = path.stat().st_size / 1024
        print(f"{path}: {info['rows']} rows, {detail}, {size_kb:.0f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
