"""The JUnit XML result of `hangwatch run`."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from hangwatch.core.events import Advice, Incident, StallEvent
from hangwatch.reporters.junit import junit_xml, write_junit


def stall_incident() -> Incident:
    stall = StallEvent(phase="dist_init", phase_title="Distributed init", last_completed=None,
                       idle_s=5.2, threshold_s=5.0, wall=0.0)
    return Incident(stall, "reports/r1", (Advice("Start every rank", "phase dist_init"),))


def test_a_stall_is_one_failed_case_with_the_verdict_advice_and_log_tail(tmp_path):
    log = tmp_path / "job.log"
    log.write_bytes(b"\x1b[31mred\x1b[0m\n[rank0] calling init_process_group\n")
    root = ET.fromstring(junit_xml(command=["python", "train.py", "--lr", "1e-3"],
                                   incident=stall_incident(), exit_status=3, duration_s=6.5,
                                   log_path=log))
    assert root.get("tests") == "1" and root.get("failures") == "1"
    [case] = root.iter("testcase")
    assert case.get("name") == "no stall" and case.get("time") == "6.500"
    failure = case.find("failure")
    assert failure is not None
    assert failure.get("message") == ("stalled in Distributed init (dist_init): no progress "
                                      "for 5s")
    assert "phase in progress: Distributed init (dist_init)" in (failure.text or "")
    assert "advice: Start every rank" in (failure.text or "")
    # terminal colour codes cannot be held by XML 1.0: they are shown escaped
    assert case.findtext("system-out") == ("\\x1b[31mred\\x1b[0m\n"
                                           "[rank0] calling init_process_group\n")
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert props == {"command": "python train.py --lr 1e-3", "exit_status": "3",
                     "log": str(log)}


def test_no_stall_passes_even_when_the_job_failed(tmp_path):
    root = ET.fromstring(junit_xml(command=["false"], incident=None, exit_status=1,
                                   duration_s=0.1, log_path=tmp_path / "missing.log"))
    assert root.get("failures") == "0"
    assert next(root.iter("testcase")).find("failure") is None


def test_written_atomically_into_a_new_folder(tmp_path):
    path = write_junit(tmp_path / "results" / "hangwatch.xml", command=["true"], incident=None,
                       exit_status=0, duration_s=1.0, log_path=tmp_path / "job.log")
    assert ET.parse(path).getroot().tag == "testsuites"
    assert [p.name for p in path.parent.iterdir()] == ["hangwatch.xml"]
