# Sourced by the GPU machine's campaign scripts (device_exl3_campaign.sh, device_moe_campaign.sh,
# device_noise.sh): one way to follow a registered run that was started detached (`frank experiment run RUN
# --detach --stop-after S`), and one way to register a design once across calls. The caller defines PY, W, LOG,
# runs_dir, frank, stamp and left (seconds the call has left).

register() {  # DESIGN -> prints the run id (kept in $W/run-NAME: a later call reuses it)
    local name; name=$(basename "$1" .toml)
    if [ ! -f "$W/run-$name" ]; then
        frank experiment register "$1" --json >"$LOG/register-$name.json" || exit 1
        "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["run_id"])' "$LOG/register-$name.json" >"$W/run-$name"
    fi
    cat "$W/run-$name"
}

status_of() {  # RUN: its status (registered, running, finished, ...)
    "$PY" -c 'import json,sys; print(json.load(sys.stdin)["status"])' < <(frank experiment status "$1" --json)
}

follow_run() {  # RUN: wait while its job runs; at the call's deadline cancel it (the cell in flight is redone
    # on resume); then its last events and its status; 0 if finished
    local run=$1
    while "$PY" -c 'import json,sys; sys.exit(0 if json.load(sys.stdin)["state"] == "running" else 1)' \
            < <(frank jobs status "$run" --json 2>/dev/null); do
        if [ "$(left)" -le 15 ]; then
            stamp "the call's deadline: cancel the runner (the cell in flight is redone on resume)"
            frank jobs cancel "$run" >/dev/null 2>&1; sleep 8; break
        fi
        sleep 3
    done
    grep -h '"event"' "$runs_dir/$run/job.log" | tail -n 30 | cut -c1-240
    frank experiment status "$run" | tee "$LOG/status-$run.txt"
    [ "$(status_of "$run")" = finished ]
}

restore_work() {  # TARBALL WORK [MARK...]: a previous session's packed work (a campaign tarball of its $OUT)
    # unpacked into a fresh work folder, so that its registered runs go on from their journals on a new
    # machine. Only the done marks named are kept: the setup's (wheels, extension, model) are the machine's
    # that made them, and a new one sets up again. A work folder that has run here already is left alone.
    local tarball=$1 work=$2 mark name keep
    shift 2
    [ -f "$work/campaign-calls" ] && return 0
    [ -f "$tarball" ] || { echo "restore_work: $tarball: no such file" >&2; return 1; }
    mkdir -p "$work/done"
    tar -xzf "$tarball" -C "$work" || return 1
    for mark in "$work"/done/*; do
        [ -e "$mark" ] || continue
        keep=
        for name in "$@"; do [ "${mark##*/}" = "$name" ] && keep=1; done
        [ -n "$keep" ] || rm -f "$mark"
    done
}
