"""JUnit XML for CI systems that show test results: one test case, `no stall`, that fails when
`hangwatch run` stopped the job for stalling and passes otherwise (the job's own exit status
is the CI step's to judge; it is recorded as a property).

Text from outside (the command line, the log tail, evidence) is redacted and stripped of what
XML 1.0 cannot hold (`hangwatch.escape.xml`); ElementTree escapes the rest."""

from __future__ import annotations

import shlex
import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

from hangwatch.core.durations import format_duration
from hangwatch.core.events import Incident
from hangwatch.escape.redact import redact_argv
from hangwatch.escape.xml import xml_block, xml_text
from hangwatch.storage.files import write_atomic

TAIL_BYTES = 16 * 1024  # the end of the job's log, kept with a failure


def _log_tail(path: Path) -> str:
    try:
        with path.open("rb") as fh:
            fh.seek(max(0, path.stat().st_size - TAIL_BYTES))
            data = fh.read()
    except OSError:
        return ""
    return data.decode("utf-8", "replace")


def _failure_text(incident: Incident) -> str:
    stall = incident.stall
    lines = [f"phase in progress: {stall.phase_title} ({stall.phase})" if stall.phase
             else "phase in progress: none known",
             f"last completed:    {stall.last_completed or 'none'}",
             f"no progress for:   {format_duration(stall.idle_s)} (threshold "
             f"{format_duration(stall.threshold_s)})"]
    if incident.report:
        lines.append(f"report:            {incident.report}")
    lines += [f"finding: {f}" for f in incident.findings]
    lines += [f"advice: {a.text}\n  because: {a.because}" for a in incident.advice]
    return "\n".join(lines)


def junit_xml(*, command: Sequence[str], incident: Incident | None, exit_status: int,
              duration_s: float, log_path: Path, now: float | None = None) -> bytes:
    seconds = f"{duration_s:.3f}"
    failures = "1" if incident is not None else "0"
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() if now is None
                                                               else now))
    suites = ET.Element("testsuites", name="hangwatch", tests="1", failures=failures,
                        errors="0", time=seconds)
    suite = ET.SubElement(suites, "testsuite", name="hangwatch run", tests="1",
                          failures=failures, errors="0", skipped="0", time=seconds,
                          timestamp=stamp)
    props = ET.SubElement(suite, "properties")
    ET.SubElement(props, "property", name="command",
                  value=xml_text(shlex.join(redact_argv(command))))
    ET.SubElement(props, "property", name="exit_status", value=str(exit_status))
    ET.SubElement(props, "property", name="log", value=xml_text(str(log_path)))
    case = ET.SubElement(suite, "testcase", classname="hangwatch.run", name="no stall",
                         time=seconds)
    if incident is not None:
        stall = incident.stall
        phase = f"{stall.phase_title} ({stall.phase})" if stall.phase else "no known phase"
        failure = ET.SubElement(case, "failure", type="stall",
                                message=xml_text(f"stalled in {phase}: no progress for "
                                                 f"{format_duration(stall.idle_s)}"))
        failure.text = xml_block(_failure_text(incident))
        ET.SubElement(case, "system-out").text = xml_block(_log_tail(log_path))
    ET.indent(suites)
    return ET.tostring(suites, encoding="utf-8", xml_declaration=True)


def write_junit(path: Path, *, command: Sequence[str], incident: Incident | None,
                exit_status: int, duration_s: float, log_path: Path) -> Path:
    """Write the result atomically: a CI system never picks up half a file."""
    data = junit_xml(command=command, incident=incident, exit_status=exit_status,
                     duration_s=duration_s, log_path=log_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, data)
    return path
