#!/usr/bin/env bash
# Serve foldwise on embedded SQLite and a local Ray, submit a study once it answers, and keep
# serving until Ctrl-C. Used by `make run`.
set -euo pipefail
host=$1 port=$2 spec=$3
bin=.venv/bin
url="http://$host:$port"

"$bin/foldwise" serve --host "$host" --port "$port" --upgrade-db &
server=$!
trap 'kill -INT "$server" 2>/dev/null; wait "$server" 2>/dev/null' EXIT INT TERM

for _ in $(seq 1 120); do
  if "$bin/python" -c "import httpx,sys; httpx.get('$url/health', timeout=2).raise_for_status()" \
      2>/dev/null; then
    break
  fi
  kill -0 "$server" 2>/dev/null || { echo "error: the service did not start" >&2; exit 1; }
  sleep 1
done

"$bin/foldwise" --url "$url" submit "$spec"
echo "API docs: $url/docs   (Ctrl-C stops the service; the study resumes on the next start)"
wait "$server"
