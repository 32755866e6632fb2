"""The systemd unit passes systemd's own check; the Kubernetes example has the sidecar shape."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
UNIT = REPO / "systemd" / "hangwatch@.service"
MANIFEST = REPO / "deploy" / "k8s" / "training-job-with-hangwatch.yaml"


@pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                    reason="systemd-analyze is not installed (.ci/run installs systemd)")
def test_unit_passes_systemd_analyze_verify_without_a_warning(tmp_path):
    instance = tmp_path / "hangwatch@gkd.service"
    instance.write_text(UNIT.read_text())
    result = subprocess.run(["systemd-analyze", "verify", str(instance)], capture_output=True,
                            text=True, timeout=60)
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


def test_unit_is_a_hardened_notify_service_with_watchdog_and_reload():
    lines = [line.strip() for line in UNIT.read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    settings = dict(line.split("=", 1) for line in lines if "=" in line)
    assert settings["Type"] == "notify"
    assert settings["ExecStart"].endswith("serve --config /etc/hangwatch/%i.yaml")
    assert settings["ExecReload"] == "/bin/kill -HUP $MAINPID"
    assert settings["Restart"] == "on-failure" and settings["WatchdogSec"]
    for key in ("NoNewPrivileges", "PrivateTmp", "ProtectKernelTunables"):
        assert settings[key] == "yes"
    assert settings["ProtectSystem"] == "strict"
    assert settings["CapabilityBoundingSet"] == "CAP_SYS_PTRACE CAP_DAC_READ_SEARCH"
    for key in ("StateDirectory", "CacheDirectory", "ReadWritePaths", "RestrictAddressFamilies"):
        assert settings[key]


def test_manifest_runs_hangwatch_as_a_native_sidecar_sharing_logs_and_processes():
    docs = list(yaml.safe_load_all(MANIFEST.read_text()))
    config_map = next(d for d in docs if d["kind"] == "ConfigMap")
    job = next(d for d in docs if d["kind"] == "Job")
    pod = job["spec"]["template"]["spec"]
    [sidecar] = pod["initContainers"]
    assert sidecar["restartPolicy"] == "Always"
    assert pod["shareProcessNamespace"] is True
    assert "SYS_PTRACE" in sidecar["securityContext"]["capabilities"]["add"]
    assert sidecar["livenessProbe"]["httpGet"]["port"] == "metrics"
    volumes = {v["name"]: v for v in pod["volumes"]}
    trainer_mounts = {m["name"] for c in pod["containers"] for m in c["volumeMounts"]}
    sidecar_mounts = {m["name"]: m for m in sidecar["volumeMounts"]}
    shared = trainer_mounts & set(sidecar_mounts)
    assert shared and all("emptyDir" in volumes[name] for name in shared)
    config_volume = next(v for v in volumes.values()
                         if v.get("configMap", {}).get("name") == config_map["metadata"]["name"])
    assert config_volume["name"] in sidecar_mounts


def test_configmap_holds_a_config_serve_accepts(tmp_path):
    from hangwatch.service.config import load_service_config

    docs = list(yaml.safe_load_all(MANIFEST.read_text()))
    [config_map] = [d for d in docs if d["kind"] == "ConfigMap"]
    path = tmp_path / "hangwatch.yaml"
    path.write_text(config_map["data"]["hangwatch.yaml"])
    config = load_service_config(path, env={})
    assert [w.name for w in config.watches] == ["gkd-7b"] and config.metrics is not None
