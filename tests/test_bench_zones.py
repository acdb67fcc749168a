"""``benchmarks/bench_zones.py --prices dime``: each zone priced by its own zone's history.

The benchmark's runs take minutes; here only how it builds the priced zones (the
prices of the zone of the same name, a zone without a series left out and named)
and how it classes a move, on small hand-made files, and on the real data where it
lies beside the checkout.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from repo_scripts import load_script

from elasim.traces.model import CapacityTrace
from elasim.traces.zones import ZoneSet

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_zones.py"


@pytest.fixture(scope="module")
def bench():
    return load_script(BENCH)


def _prices(path: Path, records: list[tuple[str, str, str]]) -> None:
    """An AWS describe-spot-price-history file of ``(zone, price, timestamp)`` records."""
    path.parent.mkdir(parents=True, exist_ok=True)
    history = [
        {
            "AvailabilityZone": zone,
            "InstanceType": "p3.2xlarge",
            "ProductDescription": "Linux/UNIX",
            "SpotPrice": price,
            "Timestamp": when,
        }
        for zone, price, when in records
    ]
    path.write_text(json.dumps({"NextToken": "", "SpotPriceHistory": history}))


def _zone(name: str) -> CapacityTrace:
    return CapacityTrace(name, [0, 100], [2, 0], duration_s=300)


def test_each_zone_gets_its_own_zones_prices(bench, tmp_path: Path) -> None:
    start = "2020-01-01T00:00:00Z"
    _prices(
        tmp_path / "z-1" / "p3.2xlarge.json",
        [
            ("z-1a", "1.5", "2019-12-31T00:00:00Z"),
            ("z-1a", "1.75", "2020-01-01T00:02:30Z"),  # t = 150 s
            ("z-1b", "2.5", "2019-12-31T00:00:00Z"),
        ],
    )
    _prices(tmp_path / "z-2" / "p3.2xlarge.json", [("z-2a", "3.5", "2019-12-30T00:00:00Z")])
    # another instance type in the same region: not read
    _prices(tmp_path / "z-1" / "p2.xlarge.json", [("z-1b", "9.0", "2019-12-31T00:00:00Z")])
    zones = ZoneSet(tuple(_zone(n) for n in ("z-1a", "z-9a", "z-1b", "z-2a")))
    priced, missing = bench.priced_zones(zones, tmp_path, start)
    assert priced.names == ("z-1a", "z-1b", "z-2a")
    assert list(missing) == ["z-9a"]
    assert priced.priced and bench._spot_price(priced) is None
    assert bench._spot_price(zones) == bench.SPOT_PRICE
    by = {t.name: t for t in priced.traces}
    assert [by["z-1a"].value_at(t) for t in (0, 149, 150, 200)] == [
        (2, 1.5),
        (0, 1.5),
        (0, 1.75),
        (0, 1.75),
    ]
    assert by["z-1b"].value_at(0) == (2, 2.5)
    assert by["z-2a"].value_at(0) == (2, 3.5)
    assert all(t.duration_s == 300 for t in priced.traces)  # the same windows


def test_move_kinds(bench) -> None:
    a = CapacityTrace("a", [0, 100], [2, 2], price_per_hour=[1.0, 2.0], duration_s=300)
    b = CapacityTrace("b", [0, 100], [1, 4], price_per_hour=[0.5, 1.5], duration_s=300)
    zones = ZoneSet((a, b))
    moves = [
        [0.0, "a", "b"],  # fewer nodes there, but cheaper: for price
        [50.0, "b", "a"],  # more nodes there: for availability
        [150.0, "b", "a"],  # fewer (at 4 nodes) or as many (at 2), dearer: other
        [160.0, "a", "b"],  # more nodes at 4; as many at 2, cheaper: for price
    ]
    assert bench.move_kinds(zones, 0.0, moves, 4) == {"price": 1, "availability": 2, "other": 1}
    assert bench.move_kinds(zones, 0.0, moves, 2) == {"price": 2, "availability": 1, "other": 1}
    # the zones' state at the window's offset plus the move's time
    assert bench.move_kinds(zones, 100.0, moves[:1], 4) == {"availability": 1}
    # as many nodes at the same price (every flat-priced zone): other
    c = CapacityTrace("c", [0], [2], price_per_hour=[1.0], duration_s=300)
    assert bench.move_kinds(ZoneSet((a, c)), 0.0, [[0.0, "a", "c"]], 4) == {"other": 1}


def test_real_prices_of_the_16_node_zones(bench) -> None:
    if not (bench.SKY.is_dir() and bench.DIME.is_dir()):
        pytest.skip("../shared/traces-real is not beside the checkout")
    folder, names, _ = bench.SETS["16-node"]
    priced, missing = bench.priced_zones(bench.zone_set(folder, names))
    assert not missing and priced.names == names
    by = {t.name: t for t in priced.traces}
    # hand-checked against the JSON (as in test_traces_importers): us-east-2b is
    # 0.9188 from 2020-01-05T18:30:05Z and 0.9204 from 2020-01-06T01:03:20Z
    t_0106 = 5 * 86400 + 1 * 3600 + 3 * 60 + 20
    assert by["us-east-2b"].value_at(t_0106 - 1)[1] == 0.9188
    assert by["us-east-2b"].value_at(t_0106)[1] == 0.9204
    assert by["us-west-2a"].value_at(t_0106)[1] == 0.918
    folder, names, _ = bench.SETS["1-node"]
    priced, missing = bench.priced_zones(bench.zone_set(folder, names))
    assert list(missing) == ["us-east-1a"] and len(priced.names) == 8


def test_the_price_line_says_its_units_span_and_ratio(bench) -> None:
    """Over trace days 0 to the shortest zone's end (2 here): zone a's 9.0 after day 2.5
    is not in it; the mean weights each price by its time; the ratio is of the means."""
    day = 86400.0
    a = CapacityTrace(
        "a", [0, day, 2.5 * day], [2, 2, 2], price_per_hour=[1.0, 2.0, 9.0], duration_s=3 * day
    )
    b = CapacityTrace("b", [0, day / 2], [1, 2], price_per_hour=[3.0, 3.0], duration_s=2 * day)
    assert bench.price_summary(ZoneSet((a, b))) == (
        "spot price, USD per node-hour, over trace days 0 to 2.0 (the shortest zone's trace, "
        "where every window starts), per zone time-weighted mean (lowest to highest): "
        "a 1.500 (1.000 to 2.000); b 3.000 (3.000 to 3.000); the dearest zone's mean / the "
        "cheapest's: 2.000"
    )
    flat = ZoneSet((_zone("a"), _zone("b")))
    assert bench.price_summary(flat) == "spot price: 0.918 USD per node-hour in every zone (flat)"
