#!/bin/sh
# gpudoctor as a SLURM Prolog: check the node before each job; drain it, with the finding as the reason, when the
# node itself is broken (driver/library mismatch, uncorrectable ECC, leftover processes holding GPU memory, a tiny
# /dev/shm ...).
#
#   slurm.conf:   Prolog=/etc/slurm/gpudoctor/prolog.sh
#   config:       gpudoctor.conf next to slurm.conf (or $GPUDOCTOR_CONF, or /etc/gpudoctor/gpudoctor.conf):
#                 shell assignments, see deploy/slurm/gpudoctor.conf.example
#
# Runs as root on the node, with no PATH (slurmd gives the prolog SLURM_* variables only).
#
# Exit status, as slurmd acts on it:
#   0  the node is fine, or gpudoctor could not judge it: gpudoctor missing, a usage error (exit 2), a gpudoctor
#      bug (exit 3) or the whole check past GPUDOCTOR_TIMEOUT. These are logged and the job runs: a bug in the
#      doctor must never take a healthy cluster out of service.
#   1  gpudoctor exited 1 (a finding at or above GPUDOCTOR_FAIL_ON): the node is drained with the reason gpudoctor
#      writes (--format drain-reason), such as "gpudoctor GD506: GPU 3 (...): uncorrectable ECC errors ... [also
#      GD503] [job 42]". An sbatch job is requeued held: it ends launch_failed_requeued_held (priority 0, "Reason=
#      launch failed requeued held") and waits for `scontrol release JOBID`; an srun job is cancelled.
#      GPUDOCTOR_ACTION=log only logs it and exits 0.
# The full JSON report (gpudoctor.report/1) is kept as $GPUDOCTOR_LOG_DIR/job-$SLURM_JOB_ID.json, one line per job
# goes to $GPUDOCTOR_LOG_DIR/prolog.log, and stderr lands in slurmd's log.

PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH

# --- configuration ---------------------------------------------------------------------------------------------
conf=${GPUDOCTOR_CONF:-}
if [ -z "$conf" ] && [ -n "${SLURM_CONF:-}" ] && [ -f "${SLURM_CONF%/*}/gpudoctor.conf" ]; then
    conf=${SLURM_CONF%/*}/gpudoctor.conf
fi
[ -z "$conf" ] && conf=/etc/gpudoctor/gpudoctor.conf
if [ -f "$conf" ]; then
    # shellcheck disable=SC1090  # the site's config, chosen at run time
    . "$conf"
fi
GPUDOCTOR=${GPUDOCTOR:-gpudoctor}                        # command, may carry words: "/opt/venv/bin/python -m gpudoctor"
GPUDOCTOR_SELECT=${GPUDOCTOR_SELECT-GD105,GD5}           # node rules only (see README: not the job's torch or env)
GPUDOCTOR_IGNORE=${GPUDOCTOR_IGNORE:-}
GPUDOCTOR_FAIL_ON=${GPUDOCTOR_FAIL_ON:-error}            # error | warning | info
GPUDOCTOR_TIMEOUT=${GPUDOCTOR_TIMEOUT:-60}               # seconds for the whole check
GPUDOCTOR_PROBE_TIMEOUT=${GPUDOCTOR_PROBE_TIMEOUT:-15}   # seconds per probe (gpudoctor --timeout)
GPUDOCTOR_LOG_DIR=${GPUDOCTOR_LOG_DIR:-/var/log/gpudoctor}
GPUDOCTOR_ACTION=${GPUDOCTOR_ACTION:-drain}              # drain | log
GPUDOCTOR_POLICY=${GPUDOCTOR_POLICY:-}                   # a site policy (TOML): its rules run with GPUDOCTOR_SELECT's
GPUDOCTOR_ARGS=${GPUDOCTOR_ARGS:-}                       # extra check arguments, e.g. --python /opt/venv/bin/python
SCONTROL=${SCONTROL:-scontrol}

job=${SLURM_JOB_ID:-none}
node=${SLURMD_NODENAME:-$(hostname -s)}

if ! mkdir -p "$GPUDOCTOR_LOG_DIR" 2>/dev/null || ! [ -w "$GPUDOCTOR_LOG_DIR" ]; then
    echo "gpudoctor-prolog: cannot write $GPUDOCTOR_LOG_DIR, using /tmp" >&2
    GPUDOCTOR_LOG_DIR=/tmp
fi
out=$GPUDOCTOR_LOG_DIR/job-$job.json
err=$GPUDOCTOR_LOG_DIR/job-$job.err
because=$GPUDOCTOR_LOG_DIR/job-$job.reason

log() {
    printf '%s job=%s node=%s %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$job" "$node" "$*" \
        >>"$GPUDOCTOR_LOG_DIR/prolog.log" 2>/dev/null
    printf 'gpudoctor-prolog: job %s: %s\n' "$job" "$*" >&2
}

# The rule IDs a site policy defines (`id = "SITE001"` lines), comma-separated: --select is an allowlist, so the
# policy's rules run only when they are named there.
policy_ids() {
    awk '/^[ \t]*id[ \t]*=/ { sub(/^[^=]*=[ \t]*["\047]/, ""); sub(/["\047].*/, ""); ids = ids (ids ? "," : "") $0 }
         END { print ids }' "$1"
}

# --- run the check ---------------------------------------------------------------------------------------------
select=$GPUDOCTOR_SELECT
if [ -n "$GPUDOCTOR_POLICY" ]; then
    ids=$(policy_ids "$GPUDOCTOR_POLICY" 2>/dev/null)
    if [ -z "$ids" ]; then
        log "policy $GPUDOCTOR_POLICY: unreadable or no rule ids: node not checked, job allowed"
        exit 0
    fi
    select=${select:+$select,}$ids
    set -- --policy "$GPUDOCTOR_POLICY"
else
    set --
fi
set -f  # GPUDOCTOR and GPUDOCTOR_ARGS are split into words on purpose, never globbed
# shellcheck disable=SC2086
set -- $GPUDOCTOR check "$@"
if ! command -v "$1" >/dev/null 2>&1; then
    log "gpudoctor not found ($1): node not checked, job allowed"
    exit 0
fi
rm -f "$out" "$because"
# gpudoctor writes the drain reason itself (--format drain-reason: the worst finding at or above FAIL_ON, then the
# other rules that fired) and the whole report beside it (--json-report)
# shellcheck disable=SC2086
timeout -k 5 "$GPUDOCTOR_TIMEOUT" "$@" --format drain-reason --output "$because" --json-report "$out" \
    --select "$select" --ignore "$GPUDOCTOR_IGNORE" --fail-on "$GPUDOCTOR_FAIL_ON" \
    --timeout "$GPUDOCTOR_PROBE_TIMEOUT" $GPUDOCTOR_ARGS </dev/null >/dev/null 2>"$err"
rc=$?
set +f
detail=$(head -c 300 "$err" 2>/dev/null | tr '\n' ' ')

case $rc in
0)
    if grep -q '^    "passed": 0,' "$out" && grep -q '^  "findings": \[\],' "$out"; then
        log "no rule could be evaluated (see \"unknown\" and \"not_applicable\" in $out): node not judged, job allowed"
    else
        log "ok ($out)"
    fi
    rm -f "$err" "$because"
    exit 0
    ;;
1)
    reason=$(head -n 1 "$because" 2>/dev/null)
    reason="${reason:-gpudoctor: findings at or above $GPUDOCTOR_FAIL_ON} [job $job]"
    if [ "$GPUDOCTOR_ACTION" = log ]; then
        log "would drain: $reason ($out)"
        exit 0
    fi
    if "$SCONTROL" update nodename="$node" state=drain reason="$reason"; then
        log "drained: $reason ($out)"
    else
        log "scontrol failed; slurmd drains with 'Prolog error': $reason ($out)"
    fi
    exit 1
    ;;
124 | 137)
    log "check exceeded ${GPUDOCTOR_TIMEOUT}s: node not judged, job allowed"
    ;;
126 | 127)
    log "cannot run $GPUDOCTOR (exit $rc): node not checked, job allowed: $detail"
    ;;
2)
    log "usage error (exit 2, check the config $conf): node not checked, job allowed: $detail"
    ;;
*)
    log "gpudoctor failed (exit $rc, a gpudoctor bug): node not checked, job allowed: $detail"
    ;;
esac
exit 0
