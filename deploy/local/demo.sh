#!/usr/bin/env bash
# The local stack: a real redis-server, the four reverser services as separate processes, all on
# loopback in a temporary directory, torn down on exit. Shows every service healthy and ready.
#
#   bash deploy/local/demo.sh            run, show, tear down
#   bash deploy/local/demo.sh --keep     keep the stack running until Ctrl-C
set -euo pipefail
cd "$(dirname "$0")/../.."

keep=0
for arg in "$@"; do
  case "$arg" in
    --keep) keep=1 ;;
    -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
    *) echo "demo.sh: unknown argument $arg (try --help)" >&2; exit 2 ;;
  esac
done

bash tools/install-deps.sh
echo "==> building"
bazel build -c opt //services/... //tools/reverserctl >/dev/null 2>/tmp/reverser-demo-build.log || {
  cat /tmp/reverser-demo-build.log >&2; exit 1; }
bin=$(bazel info -c opt bazel-bin 2>/dev/null)

work=$(mktemp -d /tmp/reverser-demo.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_for() {  # wait_for <seconds> <command...>
  local deadline=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.05
  done
}

redis_port=$(free_port)
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" \
  --logfile "$work/redis.log" &
pids+=($!)
wait_for 10 redis-cli -p "$redis_port" ping || { echo "redis did not start" >&2; exit 1; }
echo "==> redis-server on 127.0.0.1:$redis_port"

for svc in catalog materializer splicer gitworker; do
  "$bin/services/$svc/$svc" --listen_address=127.0.0.1 --grpc_port=0 --http_port=0 \
    --endpoints_file="$work/$svc.json" 2>"$work/$svc.log" &
  pids+=($!)
done
for svc in catalog materializer splicer gitworker; do
  wait_for 20 test -s "$work/$svc.json" || { echo "$svc did not start:" >&2; cat "$work/$svc.log" >&2; exit 1; }
  grpc_port=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['grpc_port'])" "$work/$svc.json")
  http_port=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['http_port'])" "$work/$svc.json")
  wait_for 20 curl -sf "http://127.0.0.1:$http_port/readyz"
  health=$("$bin/tools/reverserctl/reverserctl" --addr="127.0.0.1:$grpc_port" health)
  printf '==> %-12s grpc 127.0.0.1:%-5s http 127.0.0.1:%-5s health %s\n' "$svc" "$grpc_port" "$http_port" "$health"
done

echo "==> catalog admin status:"
catalog_grpc=$(python3 -c "import json; print(json.load(open('$work/catalog.json'))['grpc_port'])")
"$bin/tools/reverserctl/reverserctl" --addr="127.0.0.1:$catalog_grpc" status catalog

if [ $keep -eq 1 ]; then
  echo "==> stack running in $work (logs: $work/*.log). Ctrl-C stops it."
  wait
fi
echo "==> stopping"
