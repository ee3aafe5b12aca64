#!/usr/bin/env bash
# Soak: the demo console idle in a tmux pane for MINUTES (default 60), its resident set
# sampled once a minute from /proc. Prints "minute rss_kib threads" lines, then the first,
# last, min and max. Use a release build:
#   cargo build --release && bash tests/perf/soak.sh target/release/hk-console 60 [SCENARIO]
# The point is the shape of the curve over an hour of an incident, not one figure.
set -euo pipefail
BIN=${1:?usage: soak.sh BIN [MINUTES] [SCENARIO]}
MINUTES=${2:-60}
SCENARIO=${3:-healthy}
BIN=$(readlink -f "$BIN")
SESSION="hk-soak-$$"
DIR=$(mktemp -d)
trap 'tmux kill-session -t "$SESSION" 2>/dev/null || true; rm -rf "$DIR"' EXIT
tmux new-session -d -s "$SESSION" -x 160 -y 45 "exec $BIN demo --scenario $SCENARIO --dir $DIR/demo"
sleep 5
PANE_PID=$(tmux display-message -p -t "$SESSION" '#{pane_pid}')
[ -r "/proc/$PANE_PID/status" ] || { echo "soak: the console did not start" >&2; exit 2; }
# The Live screen is the busiest view: every watcher's update is drawn.
tmux send-keys -t "$SESSION" l
echo "# $(date -u +%FT%TZ) $BIN demo --scenario $SCENARIO, pid $PANE_PID, 160x45, Live screen"
echo "# minute rss_kib threads"
for ((m = 0; m <= MINUTES; m++)); do
  if [ ! -r "/proc/$PANE_PID/status" ]; then
    echo "soak: the console exited at minute $m" >&2
    tmux capture-pane -p -t "$SESSION" >&2 || true
    exit 1
  fi
  rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$PANE_PID/status")
  thr=$(awk '/^Threads:/ {print $2}' "/proc/$PANE_PID/status")
  echo "$m $rss $thr"
  [ "$m" -lt "$MINUTES" ] && sleep 60
done
