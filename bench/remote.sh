#!/usr/bin/env bash
# organ measure of a model served by nginx on loopback (range requests) against the same
# measure of the local file, in the same run: wall time (best of RUNS), bytes fetched,
# requests and peak RSS; also through a location that refuses requests for many ranges
# (nginx's max_ranges 1: organ falls back to single ranges). With SPARSE_GB > 0, also the
# synthetic sparse split model of bench/make-sparse-model.py served the same way, which
# fails the bench if its peak RSS reaches 256 MiB or it fetches more than 1% of the
# model's bytes (the file's bytes received; the multipart framing around them is printed
# beside, as a share of the file too). Figures only otherwise.
# Usage: bench/remote.sh [RUNS=3] [SPARSE_GB=0]
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${1:-3}"
GB="${2:-0}"
MODEL="$(scripts/fetch-model.sh)"
NGINX="$(scripts/setup-nginx.sh)"
source scripts/lib.sh
bench_organ
work=$(mktemp -d "${TMPDIR:-/tmp}/organ-remote.XXXXXX")
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
mkdir -p "$work/www/one" "$work/tmp"
ln -s "$MODEL" "$work/www/$(basename "$MODEL")"
ln -s "$MODEL" "$work/www/one/$(basename "$MODEL")"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat > "$work/nginx.conf" <<CONF
daemon off;
master_process off;
worker_processes 1;
pid $work/nginx.pid;
error_log $work/error.log;
events { worker_connections 64; }
http {
  access_log off;
  client_body_temp_path $work/tmp;
  proxy_temp_path $work/tmp;
  fastcgi_temp_path $work/tmp;
  uwsgi_temp_path $work/tmp;
  scgi_temp_path $work/tmp;
  default_type application/octet-stream;
  server { listen 127.0.0.1:$port; root $work/www; location /one/ { max_ranges 1; } }
}
CONF
"$NGINX" -p "$work" -c "$work/nginx.conf" -e "$work/error.log" &
pid=$!
for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
url="http://127.0.0.1:$port/$(basename "$MODEL")"

# run NAME ARGS...: best wall of RUNS of `organ measure ARGS --stats`, and its stats lines.
run() {
  local name=$1 best="" s e out
  shift
  for _ in $(seq "$RUNS"); do
    s=$(date +%s.%N)
    out=$("$ORGAN" measure --summary-only --stats "$@" 2>&1 >/dev/null)
    e=$(date +%s.%N)
    best=$(python3 -c "t=$e-$s; b='$best'; print(t if not b else min(t, float(b)))")
  done
  echo "$name|$best|$(echo "$out" | grep '^stats:' | tr '\n' '|')"
}
cat "$MODEL" > /dev/null
results=$(
  run "local, mapped" "$MODEL"
  run "local, --stream" --stream "$MODEL"
  run "http, many ranges a request, 8 at once" "$url"
  run "http, no multipart (max_ranges 1)" "http://127.0.0.1:$port/one/$(basename "$MODEL")"
  RUNS=1 run "http, gap 0, 8 at once (1 run)" --remote-gap 0 "$url"
)
python3 - "$(stat -c %s "$MODEL")" "$results" <<'PY'
import re, sys
size = int(sys.argv[1])
print(f"SmolLM2 {size / 1e6:.1f} MB, nginx on loopback; best wall of the runs")
for line in sys.argv[2].splitlines():
    name, wall, *stats = line.split("|")
    stats = " ".join(stats)
    rss = int(re.search(r"peak RSS (\d+)", stats).group(1))
    m = re.search(r"fetched (\d+), requests (\d+), retries (\d+).*framing (\d+)", stats)
    fetched = (f"fetched {int(m.group(1)) / 1e6:6.1f} MB ({int(m.group(1)) / size * 100:5.1f}%, framing "
               f"{int(m.group(4)) / 1e6:4.1f} MB) in {int(m.group(2)):6d} requests") if m else " " * 62
    print(f"  {name:<38} {float(wall):7.3f} s  {fetched}  peak RSS {rss / 1024:6.1f} MiB")
PY

[ "$GB" -gt 0 ] || exit 0
mkdir -p "$work/www/sparse"
paths=$(python3 bench/make-sparse-model.py "$work/www/sparse/moe" "$GB" 4)
first=$(basename "${paths%%$'\n'*}")
size=$(du -cb --apparent-size "$work"/www/sparse/*.gguf | tail -n1 | cut -f1)
s=$(date +%s.%N)
out=$("$ORGAN" measure "http://127.0.0.1:$port/sparse/$first" --summary-only --stats 2>&1 >/dev/null) || {
  echo "organ measure failed on the sparse model over HTTP: $out" >&2
  exit 1
}
e=$(date +%s.%N)
python3 - "$size" "$s" "$e" "$out" <<'PY'
import re, sys
size, s, e = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
out = sys.argv[4]
rss = int(re.search(r"peak RSS (\d+)", out).group(1))
m = re.search(r"fetched (\d+), requests (\d+), retries (\d+).*framing (\d+)", out)
fetched, requests, retries, framing = (int(x) for x in m.groups())
data = fetched - framing
print(f"sparse split model {size / 2**30:.1f} GiB over HTTP: the file's bytes fetched {data / 2**20:.1f} MiB "
      f"({data / size * 100:.3f}% of the file, target <= 1%), plus multipart framing {framing / 2**20:.1f} MiB "
      f"({framing / size * 100:.3f}%; all bodies {fetched / size * 100:.3f}%) in {requests} requests, "
      f"{retries} retries; peak RSS {rss / 1024:.1f} MiB (target < 256 MiB); wall {e - s:.1f} s")
sys.exit(0 if rss < 256 * 1024 and data <= size / 100 else 1)
PY
