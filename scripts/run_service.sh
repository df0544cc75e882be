#!/usr/bin/env bash
# Serve foldwise on embedded SQLite and a local Ray, submit a study once it answers, and keep
# serving until Ctrl-C. Used by `make run`. Auth is on: a local admin token is made (replacing
# the last one) and saved where the CLI and the SDK look for it.
set -euo pipefail
host=$1 port=$2 spec=$3
bin=.venv/bin
url="http://$host:$port"

"$bin/foldwise" db upgrade > /dev/null
token=$("$bin/foldwise" --url "$url" token create local-admin --role admin --replace --save \
  | tail -n 1)

"$bin/foldwise" serve --host "$host" --port "$port" &
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
cat <<MSG
API docs: $url/docs   (Ctrl-C stops the service; the study resumes on the next start)
Signed in as local-admin: .venv/bin/foldwise and foldwise.Client("$url") find the token in
$("$bin/python" -c "from foldwise.credentials import credentials_path; print(credentials_path())").
The dashboard asks for it once:  $token
Others get their own:  .venv/bin/foldwise token create NAME --role member|viewer
MSG
wait "$server"
