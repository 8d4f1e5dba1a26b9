"""The dev stack's ports as asked for: two asking for one port clash (0, any free port, never
does), and the refusal names the flags."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from wow_temporal.dev.ports import DevPort, clashing, dev_ports


def test_a_clash_names_both_flags_and_the_port() -> None:
    ports = dev_ports(temporal=7233, ui=8088, host=8089, api=8088, metrics=9464)
    assert clashing(ports.all()) == (
        "--ui-port (Temporal Web UI) and --api-port (control API) both ask for port 8088; "
        "give one of them another (0: any free port)"
    )


def test_headless_and_pushed_metrics_have_no_port_to_clash() -> None:
    ports = dev_ports(temporal=7233, ui=None, host=8089, api=8088, metrics=None)
    assert [p.flag for p in ports.all()] == ["--temporal-port", "--host-port", "--api-port"]
    assert clashing(ports.all()) is None


@given(st.lists(st.integers(min_value=0, max_value=20), max_size=6))
def test_only_two_same_ports_other_than_0_clash(numbers: list[int]) -> None:
    ports = [DevPort(f"port {i}", n, f"--p{i}", f"P{i}") for i, n in enumerate(numbers)]
    asked = [n for n in numbers if n]
    assert (clashing(ports) is None) == (len(asked) == len(set(asked)))


def test_a_port_asked_for_is_kept_and_0_is_picked_apart_from_the_others() -> None:
    ports = dev_ports(temporal=0, ui=0, host=0, api=0, metrics=0).chosen()
    picked = [ports.host.port, ports.api.port, ports.metrics.port if ports.metrics else 0]
    assert 0 not in picked and len(set(picked)) == 3
    assert (ports.temporal.port, ports.ui.port if ports.ui else None) == (0, 0)  # the server's
    kept = dev_ports(temporal=1, ui=2, host=3, api=4, metrics=5).chosen()
    assert [p.port for p in kept.all()] == [1, 2, 5, 3, 4]
