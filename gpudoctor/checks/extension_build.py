"""GD310: a CUDA extension build (DeepSpeed's JIT ops, apex, flash-attn, a project's own kernels) that nvcc
refused — a GPU architecture newer than the toolkit, or a host compiler newer than it supports. A pure function
of `logs` facts."""

from __future__ import annotations

from gpudoctor.checks import check
from gpudoctor.facts.log_evidence import cited, log_events


@check("GD310")
def extension_build_toolchain(facts, rule):
    for event in log_events(facts, "nvcc_arch_unsupported")[:1]:
        arch = event.get("arch")
        what = f"building {event['extension']}" if event.get("extension") else "a CUDA extension build"
        yield rule.finding(
            f"{what} failed: nvcc does not know the GPU architecture {arch}, so the CUDA toolkit that builds it is "
            f"older than the GPU it targets ({event['where']}: {event['line']})",
            evidence={**cited(event), "arch": arch, "extension": event.get("extension")},
            fix=rule.fix(case="arch", values={"arch": arch}))
    for event in log_events(facts, "host_compiler_unsupported")[:1]:
        yield rule.finding(
            f"nvcc refused the host compiler ({event.get('compiler')}: {event.get('detail')}): the C++ compiler is "
            f"newer than this CUDA toolkit supports, so no CUDA extension builds: {event['line']}",
            evidence={**cited(event), "compiler": event.get("compiler")},
            fix=rule.fix(case="host_compiler"))
