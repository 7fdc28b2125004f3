#!/bin/sh
# gpudoctor as a SLURM TaskProlog: hand the task the SAFE environment fixes for the environment it is about to run
# with (NCCL_DEBUG=INFO left on -> NCCL_DEBUG=WARN, CUDA_LAUNCH_BLOCKING=1 -> unset, ...).
#
#   slurm.conf:   TaskProlog=/etc/slurm/gpudoctor/taskprolog.sh
#   config:       the same gpudoctor.conf as prolog.sh (next to slurm.conf, or $GPUDOCTOR_CONF, or
#                 /etc/gpudoctor/gpudoctor.conf); GPUDOCTOR_TASK_SELECT picks the rules (default GD4, the
#                 NCCL/CUDA environment rules), GPUDOCTOR_TASK_TIMEOUT bounds the run (default 30 s).
#
# slurmstepd runs it as the job's user, once per task, with the task's environment, and reads its stdout:
# `export NAME=value` sets a variable in the task, `unset NAME` removes one. This prints exactly the lines of
# `gpudoctor fix --format slurm` (safe fixes only: never --unsafe) and nothing else. It always exits 0: a missing,
# slow or failing gpudoctor leaves the task's environment as it is and never stops the task.

conf=${GPUDOCTOR_CONF:-}
if [ -z "$conf" ] && [ -n "${SLURM_CONF:-}" ] && [ -f "${SLURM_CONF%/*}/gpudoctor.conf" ]; then
    conf=${SLURM_CONF%/*}/gpudoctor.conf
fi
[ -z "$conf" ] && conf=/etc/gpudoctor/gpudoctor.conf
if [ -f "$conf" ]; then
    # shellcheck disable=SC1090  # the site's config, chosen at run time
    . "$conf"
fi
GPUDOCTOR=${GPUDOCTOR:-gpudoctor}
GPUDOCTOR_TASK_SELECT=${GPUDOCTOR_TASK_SELECT-GD4}
GPUDOCTOR_TASK_TIMEOUT=${GPUDOCTOR_TASK_TIMEOUT:-30}
GPUDOCTOR_TASK_ARGS=${GPUDOCTOR_TASK_ARGS:-}

set -f
# shellcheck disable=SC2086  # split into words on purpose, never globbed
set -- $GPUDOCTOR
command -v "$1" >/dev/null 2>&1 || exit 0
# shellcheck disable=SC2086
# --quick: torch's and NCCL's versions from package metadata, never `import torch` (seconds, once per task)
fixes=$(timeout -k 5 "$GPUDOCTOR_TASK_TIMEOUT" "$@" fix --format slurm --quiet --quick \
    --select "$GPUDOCTOR_TASK_SELECT" $GPUDOCTOR_TASK_ARGS </dev/null 2>/dev/null)
# 0: done; 1: a conflict was left alone (the other changes still stand); anything else: print nothing
case $? in 0 | 1) ;; *) exit 0 ;; esac
printf '%s\n' "$fixes" | grep -E '^(export [A-Za-z_][A-Za-z0-9_]*=|unset [A-Za-z_][A-Za-z0-9_]*$)'
exit 0
