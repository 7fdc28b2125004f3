"""GD612: the rendezvous port a launcher needs is taken — c10d's store could not listen on MASTER_PORT (29500 by
default) because another job on the node, or a run still exiting, holds it. A pure function of `logs` facts."""

from __future__ import annotations

from gpudoctor.checks import check
from gpudoctor.facts.log_evidence import cited, log_events


@check("GD612")
def rendezvous_port_in_use(facts, rule):
    for event in log_events(facts, "port_in_use")[:1]:
        port = event.get("port")
        yield rule.finding(
            f"the rendezvous port{f' {port}' if port else ''} is already in use on this node (MASTER_PORT / "
            "--master_port, 29500 unless set): another job, or a run that has not exited yet, listens on it, so "
            f"c10d's store could not start: {event['line']}",
            evidence={**cited(event), "port": port},
            fix=rule.fix())
