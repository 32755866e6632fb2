"""`serve` acting on its config's `alerts:` and `metrics:`: a real process, a real HTTP
receiver on 127.0.0.1, metrics scraped over HTTP, SIGKILL, restarts and SIGHUP."""

from __future__ import annotations

import io
import json
import shutil
import signal
import textwrap
import threading
import time
from pathlib import Path

import yaml

from tests.fakes.receiver import Receiver, free_port
from tests.metrics.test_metrics_server import get, scrape, value
from tests.service.serving import Systemd, saved, wait_until
from tests.service.test_serve_e2e import DONE, PACK, START, watch

MANIFEST = Path(__file__).resolve().parents[2] / "deploy/k8s/training-job-with-hangwatch.yaml"


def config(folder: Path, watches: str, *, webhook: str | None = None, port: int | None = None,
           name: str = "serve.yaml") -> Path:
    (folder / "pack.yaml").write_text(PACK)
    head = "state_dir: state\n"
    if port is not None:
        head += f"metrics: 127.0.0.1:{port}\n"
    if webhook is not None:
        head += f"alerts:\n  - webhook: {webhook}\n"
    path = folder / name
    path.write_text(f"{head}watches:\n{textwrap.indent(watches, '  ')}")
    return path


def events(receiver: Receiver, kind: str) -> list[dict]:
    return [b for b in receiver.bodies() if b["event"] == kind]


def test_one_stall_alert_per_episode_then_recovered_and_metrics_scraped_from_serve(
        tmp_path, serving):
    log = tmp_path / "train.log"
    log.write_text(START)
    port = free_port()
    with Receiver() as receiver:
        serve = serving(tmp_path, ["--config", str(config(
            tmp_path, watch("w1", "train.log", stall="1s"), webhook=receiver.url("/hook/T0K3N"),
            port=port))])
        [stall] = receiver.wait_for(1, timeout=20)
        assert stall["event"] == "stall" and stall["watch"] == "w1" and stall["phase"] == "load"
        wait_until(lambda: (saved(tmp_path / "state", "w1") or {}).get("episode") is not None
                   and saved(tmp_path / "state", "w1")["episode"]["alerted"],
                   what="the episode marked alerted in the state")
        state = saved(tmp_path / "state", "w1")
        assert stall["episode"] == state["episode"]["id"]  # the id the state keeps
        samples = scrape(port)
        assert value(samples, "hangwatch_stalled", watch="w1") == 1
        assert value(samples, "hangwatch_stalls_total", watch="w1") == 1
        assert value(samples, "hangwatch_log_readable", watch="w1", log=str(log)) == 1
        assert value(samples, "hangwatch_lines_total", watch="w1", log=str(log)) == 1
        # the receiver has the POST before the sender has read its answer and counted it
        wait_until(lambda: value(scrape(port), "hangwatch_alerts_total",
                                 target="webhook:127.0.0.1", result="delivered") == 1,
                   what="the delivered alert counted")
        assert get(f"http://127.0.0.1:{port}/healthz") == (200, "ok\n")
        time.sleep(1.5)  # the stall goes on past another threshold: still one alert
        assert len(events(receiver, "stall")) == 1

        with log.open("a") as f:
            f.write(DONE)
        receiver.wait_for(2)
        recovered = events(receiver, "recovered")[0]
        assert recovered["episode"] == stall["episode"]
        assert value(scrape(port), "hangwatch_stalled", watch="w1") == 0
        serve.proc.send_signal(signal.SIGTERM)
        assert serve.proc.wait(timeout=5) == 0, serve.stderr()
    stalls = [b["episode"] for b in events(receiver, "stall")]
    assert len(stalls) == len(set(stalls))  # any later stall is an episode of its own
    assert "T0K3N" not in serve.stderr() + serve.out_path.read_text()


def test_sigkill_then_restart_delivers_the_spooled_alert_once_and_never_alerts_it_again(
        tmp_path, serving):
    log = tmp_path / "train.log"
    log.write_text(START)
    port = free_port()  # nothing listens there yet: the receiver is down
    args = ["--config", str(config(tmp_path, watch("w1", "train.log", stall="1s"),
                                   webhook=f"http://127.0.0.1:{port}/hook"))]
    state = tmp_path / "state"
    first = serving(tmp_path, args)
    first.wait_event(lambda e: e["event"] == "stall", timeout=20)
    wait_until(lambda: (saved(state, "w1") or {}).get("episode") is not None
               and saved(state, "w1")["episode"]["alerted"], what="alert spooled")
    episode = saved(state, "w1")["episode"]["id"]
    first.kill()

    with Receiver(port) as receiver:
        second = serving(tmp_path, args)
        [stall] = receiver.wait_for(1, timeout=20)
        assert stall["event"] == "stall" and stall["episode"] == episode
        time.sleep(2.5)  # past the threshold again: a restored episode stays silent
        assert [b["event"] for b in receiver.bodies()] == ["stall"]
        with log.open("a") as f:
            f.write(DONE)
        [_, recovered] = receiver.wait_for(2)
        assert recovered["event"] == "recovered" and recovered["episode"] == episode
        second.kill()


def test_an_alert_the_state_kept_but_no_spool_took_is_sent_after_a_restart(tmp_path, serving):
    """As if killed after the state was written and before the alert reached the spool."""
    log = tmp_path / "train.log"
    log.write_text(START)
    state = tmp_path / "state"
    with Receiver() as receiver:
        args = ["--config", str(config(tmp_path, watch("w1", "train.log", stall="1s"),
                                       webhook=receiver.url()))]
        first = serving(tmp_path, args)
        [stall] = receiver.wait_for(1, timeout=20)
        wait_until(lambda: (saved(state, "w1") or {}).get("kept", {}).get("alerts", {})
                   .get("open"), what="the open episode kept")
        first.kill()
        kept = saved(state, "w1")
        kept["episode"]["alerted"] = False
        kept["kept"]["alerts"]["unspooled"] = kept["kept"]["alerts"]["open"]
        (state / "w1.json").write_text(json.dumps(kept))
        shutil.rmtree(state / "alert-spool")

        second = serving(tmp_path, args)
        [_, again] = receiver.wait_for(2, timeout=20)
        assert again == stall  # the same alert, the same episode: receivers dedupe
        wait_until(lambda: saved(state, "w1")["episode"]["alerted"]
                   and not saved(state, "w1")["kept"]["alerts"]["unspooled"],
                   what="the state told the alert is spooled")
        time.sleep(1.5)
        assert len(receiver.bodies()) == 2
        second.kill()


def test_a_deleted_log_is_a_blind_alert_in_status_and_metrics_then_readable(tmp_path, serving):
    log = tmp_path / "train.log"
    log.write_text(START)
    port = free_port()
    systemd = Systemd()
    try:
        with Receiver() as receiver:
            serve = serving(tmp_path, ["--config", str(config(
                tmp_path, watch("w1", "train.log", stall="1s"), webhook=receiver.url(),
                port=port))], systemd)
            systemd.wait_for("READY=1")
            log.unlink()
            wait_until(lambda: events(receiver, "blind"), what="a blind alert")
            [blind] = events(receiver, "blind")
            assert blind["log"] == str(log) and blind["what"] == "log"
            assert blind["blind_s"] >= 1.0
            assert value(scrape(port), "hangwatch_log_readable", watch="w1", log=str(log)) == 0
            systemd.receive_for(5.5)  # STATUS= comes every 5 s
            assert any("BLIND" in s for s in systemd.fields("STATUS=w1"))

            log.write_text(START)
            wait_until(lambda: [r for r in events(receiver, "recovered")
                                if r.get("recovered_from") == "blind"], what="readable")
            assert value(scrape(port), "hangwatch_log_readable", watch="w1", log=str(log)) == 1
            assert len(events(receiver, "blind")) == 1
            serve.kill()
    finally:
        systemd.close()


def test_sighup_adds_a_webhook_and_a_metrics_endpoint(tmp_path, serving):
    log = tmp_path / "train.log"
    log.write_text(START + DONE)
    path = config(tmp_path, watch("w1", "train.log", stall="1s"))
    serve = serving(tmp_path, ["--config", str(path)])
    serve.wait_event(lambda e: e["event"] == "phase" and e["state"] == "completed")
    port = free_port()
    with Receiver() as receiver:
        config(tmp_path, watch("w1", "train.log", stall="1s"), webhook=receiver.url(), port=port)
        serve.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: "configuration reloaded" in serve.stderr(), what="reloaded")
        assert get(f"http://127.0.0.1:{port}/healthz") == (200, "ok\n")
        with log.open("a") as f:
            f.write("LOAD weights START\n")
        wait_until(lambda: events(receiver, "stall"), what="a stall alert after the reload")
        assert events(receiver, "stall")[0]["phase"] == "load"
        assert value(scrape(port), "hangwatch_stalled", watch="w1") == 1
        serve.kill()


def test_the_manifest_config_serves_healthz_for_the_probes(tmp_path, serving):
    [config_map] = [d for d in yaml.safe_load_all(MANIFEST.read_text())
                    if d["kind"] == "ConfigMap"]
    doc = yaml.safe_load(config_map["data"]["hangwatch.yaml"])
    host, _, _ = doc["metrics"].rpartition(":")
    assert host == "0.0.0.0"  # the kubelet probes the Pod's address, not loopback
    port = free_port()
    doc["metrics"] = f"127.0.0.1:{port}"  # tests bind loopback only
    doc["state_dir"] = str(tmp_path / "state")
    for w in doc["watches"]:
        w["logs"] = [str(tmp_path / p.lstrip("/")) for p in w["logs"]]
        w["report_dir"] = str(tmp_path / "reports")
    # Where `torchrun --log-dir /logs` writes rank 0's output: the manifest's globs find it.
    rank0 = tmp_path / "logs" / "gkd_7b_x1" / "attempt_0" / "0"
    rank0.mkdir(parents=True)
    (rank0 / "stdout.log").write_text("step 1\n")
    (rank0 / "stderr.log").write_text("")
    (tmp_path / "hangwatch.yaml").write_text(yaml.safe_dump(doc))
    serve = serving(tmp_path, ["--config", str(tmp_path / "hangwatch.yaml")])
    wait_until(lambda: _answers(port), what="the metrics endpoint")
    assert get(f"http://127.0.0.1:{port}/healthz") == (200, "ok\n")
    name = doc["watches"][0]["name"]
    assert value(scrape(port), "hangwatch_stalled", watch=name) == 0
    stdout_log = str(rank0 / "stdout.log")
    wait_until(lambda: scrape(port).get(
        ("hangwatch_lines_total", (("log", stdout_log), ("watch", name)))) == 1,
               what="rank 0's stdout.log read through the manifest's globs")
    serve.kill()


def _answers(port: int) -> bool:
    try:
        return get(f"http://127.0.0.1:{port}/healthz")[0] == 200
    except OSError:
        return False


def test_healthz_of_serve_fails_while_its_loop_is_stuck_and_recovers(tmp_path, monkeypatch):
    """In this process: the service's loop really blocks (work posted to it sleeps)."""
    from hangwatch.service import outputs
    from hangwatch.service.config import load_service_config
    from hangwatch.service.server import Service, load_watch_rules

    monkeypatch.setattr(outputs, "PERIOD_S", 0.2)
    (tmp_path / "train.log").write_text(START)
    port = free_port()
    cfg = load_service_config(config(tmp_path, watch("w1", "train.log"), port=port), env={})
    service = Service(cfg, load_watch_rules(cfg.watches), make_reporters=lambda _w: [],
                      err=io.StringIO())
    url = f"http://127.0.0.1:{port}/healthz"
    seen: list[int] = []

    def probe() -> None:
        try:
            wait_until(lambda: service.ready and _answers(port), what="ready")
            seen.append(get(url)[0])
            service.post(lambda: time.sleep(1.5))  # the loop is stuck in here
            wait_until(lambda: get(url)[0] == 503, timeout=5, what="healthz failing")
            seen.append(503)
            wait_until(lambda: get(url)[0] == 200, timeout=5, what="healthz back")
            seen.append(200)
        finally:
            service._queue.put((None, signal.SIGTERM))  # as the signal relay puts it

    prober = threading.Thread(target=probe, daemon=True)
    prober.start()
    assert service.run() == 0
    prober.join(5)
    assert seen == [200, 503, 200]
