"""`--format junit`: the report as JUnit XML, for the CI systems that show test results (GitLab, Jenkins, Azure).

One test case per finding (a failure whose type is its severity, named by the rule and placed in its file), one per
passed rule, and one skipped case per rule that could not be judged (unknown) or had nothing to judge (not
applicable), with the reason: a rule that did not run is never shown as passed."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import IO

from gpudoctor.model import Report

SUITE = "gpudoctor"


def _case(suite: ET.Element, classname: str, name: str) -> ET.Element:
    return ET.SubElement(suite, "testcase", classname=classname, name=name, time="0")


def to_xml(report: Report) -> ET.Element:
    suites = ET.Element("testsuites", name=SUITE)
    suite = ET.SubElement(suites, "testsuite", name=SUITE, time=f"{report.seconds:.3f}")
    names = report.rule_names
    for finding in report.findings:
        where = str(finding.location) if finding.location else ""
        case = _case(suite, finding.location.path if finding.location else SUITE,
                     f"{finding.rule} {finding.name}" + (f" ({where})" if where else ""))
        failure = ET.SubElement(case, "failure", type=str(finding.severity), message=finding.message)
        failure.text = "\n".join(filter(None, (f"{where} {finding.message}".strip(),
                                              f"fix: {finding.fix.summary}" if finding.fix else "")))
    for rule in report.passed:
        _case(suite, SUITE, f"{rule} {names.get(rule, '')}".strip())
    for item in report.unknown:
        case = _case(suite, SUITE, f"{item.rule} {names.get(item.rule, '')}".strip())
        ET.SubElement(case, "skipped", message=f"unknown: {item.reason or 'missing ' + item.missing}")
    for item in report.not_applicable:
        case = _case(suite, SUITE, f"{item.rule} {names.get(item.rule, '')}".strip())
        ET.SubElement(case, "skipped", message=f"not applicable: {item.reason}")
    counts = {"tests": len(suite), "failures": len(report.findings), "errors": 0,
              "skipped": len(report.unknown) + len(report.not_applicable)}
    for element in (suites, suite):
        element.attrib.update({key: str(value) for key, value in counts.items()})
    return suites


def render(report: Report, stream: IO, quiet: bool = False) -> None:
    """The XML, control characters escaped first as for a person (XML 1.0 cannot hold most of them)."""
    from gpudoctor.render.printable import printable_data

    root = to_xml(printable_data(report))
    ET.indent(root)
    stream.write('<?xml version="1.0" encoding="UTF-8"?>\n')
    stream.write(ET.tostring(root, encoding="unicode"))
    stream.write("\n")
