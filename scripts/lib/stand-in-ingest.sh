# Sourced by the agent's benchmark scripts: a local mosquitto on a free loopback port and a stand-in ingest that
# acknowledges every batch of site `bench`. Needs `work` (a directory) and `pids` (an array) set by the caller;
# sets `port`, adds its processes to `pids` and its own cleanup to the EXIT trap.
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
printf 'listener %s 127.0.0.1\nallow_anonymous true\nset_tcp_nodelay true\nmax_queued_messages 100000\n' "$port" >"$work/mosquitto.conf"
mosquitto -c "$work/mosquitto.conf" >/dev/null 2>&1 &
pids+=($!)
sleep 0.5

# The stand-in ingest: reads each batch's sequence (protobuf field 5) and acknowledges it on its agent's topic.
mosquitto_sub -p "$port" -t 'beaconflow/v1/bench/+/batch' -F '%t %x' | python3 -c '
import subprocess, sys
def varint(b, i):
    v = s = 0
    while True:
        c = b[i]; i += 1; v |= (c & 0x7F) << s; s += 7
        if c < 0x80: return v, i
for line in sys.stdin:
    topic, payload = line.split()
    b = bytes.fromhex(payload); i = 0
    while i < len(b):
        key, i = varint(b, i); field, kind = key >> 3, key & 7
        if kind == 0:
            value, i = varint(b, i)
            if field == 5:
                subprocess.run(["mosquitto_pub", "-p", sys.argv[1], "-t", topic.replace("/batch", "/ack"), "-r", "-q", "1",
                                "-m", "{\"committed_through\": %d}" % value])
                break
        elif kind == 1: i += 8
        elif kind == 5: i += 4
        elif kind == 2:
            n, i = varint(b, i); i += n
        else: break
' "$port" &
pids+=($!)
trap 'pkill -f "mosquitto_sub -p $port " || true; for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT

