"""Interfaces named by NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME, read from a fake /sys."""

from __future__ import annotations

import pytest

from hangwatch.doctor import network
from tests.fakes.doctor import by_id, context, fake_net

ADDRESSES = {"lo": ["127.0.0.1"], "eth0": ["10.0.0.5"], "eth1": ["10.1.0.5"],
             "docker0": ["172.17.0.1"]}


@pytest.fixture
def sysfs(tmp_path):
    return fake_net(tmp_path, {"lo": True, "eth0": True, "eth1": False, "docker0": True})


def run(sysfs, **env: str):
    checks, _ = network.run(context(env, sysfs=sysfs, interfaces=lambda: ADDRESSES,
                                    resolve=lambda host: {"node-a": ["10.0.0.5"],
                                                          "node-b": ["10.9.9.9"],
                                                          "localhost": ["127.0.0.1"]}[host]))
    return checks


@pytest.mark.parametrize(("value", "selected"), [
    ("eth", "eth0"), ("=eth0", "eth0"), ("^docker,lo", "eth0"), ("eth0,ib", "eth0"),
])
def test_nccl_ifname_selecting_an_interface_that_is_up_passes(sysfs, value, selected):
    check = by_id(run(sysfs, NCCL_SOCKET_IFNAME=value), "network.nccl_ifname")
    assert check.status == "ok"
    assert check.detail == f"NCCL_SOCKET_IFNAME={value} selects {selected}"


def test_nccl_ifname_matching_nothing_fails_listing_the_interfaces(sysfs):
    check = by_id(run(sysfs, NCCL_SOCKET_IFNAME="ib"), "network.nccl_ifname")
    assert check.status == "fail"
    assert "matches no interface (this node has docker0, eth0, eth1 (down), lo)" in check.detail


def test_nccl_ifname_on_a_down_interface_fails(sysfs):
    check = by_id(run(sysfs, NCCL_SOCKET_IFNAME="=eth1"), "network.nccl_ifname")
    assert (check.status, check.detail.split(" (")[0]) == ("fail",
                                                            "NCCL_SOCKET_IFNAME==eth1 is down")


def test_gloo_ifname_must_name_exact_interfaces_that_are_up(sysfs):
    assert by_id(run(sysfs, GLOO_SOCKET_IFNAME="eth0"), "network.gloo_ifname").status == "ok"
    check = by_id(run(sysfs, GLOO_SOCKET_IFNAME="eth"), "network.gloo_ifname")
    assert check.status == "fail" and "eth: no such interface" in check.detail


def test_unset_ifnames_are_skipped(sysfs):
    statuses = {c.id: c.status for c in run(sysfs)}
    assert statuses == {"network.nccl_ifname": "skip", "network.gloo_ifname": "skip",
                        "network.master_address": "skip"}


def test_master_address_on_a_local_interface_that_is_up_passes(sysfs):
    check = by_id(run(sysfs, MASTER_ADDR="node-a", RANK="0"), "network.master_address")
    assert (check.status, check.detail) == ("ok", "node-a is 10.0.0.5 on eth0 (up)")


def test_loopback_master_for_a_job_across_nodes_fails(sysfs):
    check = by_id(run(sysfs, MASTER_ADDR="localhost", WORLD_SIZE="16", LOCAL_WORLD_SIZE="8"),
                  "network.master_address")
    assert check.status == "fail" and "the others cannot reach it" in check.detail


def test_rank0_whose_master_address_is_elsewhere_is_warned(sysfs):
    check = by_id(run(sysfs, MASTER_ADDR="node-b", RANK="0"), "network.master_address")
    assert check.status == "warn" and "resolves to 10.9.9.9" in check.detail
    worker = by_id(run(sysfs, MASTER_ADDR="node-b", RANK="3"), "network.master_address")
    assert worker.status == "ok"
