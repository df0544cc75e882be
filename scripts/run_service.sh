#!/usr/bin/env bash
# Serve foldwise on embedded SQLite and a local Ray, submit a study once it answers, follow it to
# its end, and keep serving until Ctrl-C. Used by `make run`. Auth is on: a local admin token is
# made (replacing the last one) and saved where the CLI and the SDK look for it. The commands it
# prints run from the repository in a new shell, where the virtual environment is not on PATH.
set -euo pipefail
host=$1 port=$2 spec=$3
bin=.venv/bin
url="http://$host:$port"
cli=$bin/foldwise
[ "$url" = http://127.0.0.1:8000 ] || cli="$bin/foldwise --url $url"

"$bin/foldwise" db upgrade > /dev/null
token=$("$bin/foldwise" --url "$url" token create local-admin --role admin --replace --save \
  | tail -n 1)

"$bin/foldwise" serve --host "$host" --port "$port" &
server=$!
stop_server() {
  if kill -0 "$server" 2>/dev/null; then kill -TERM "$server" 2>/dev/null || true; fi
  wait "$server" 2>/dev/null || true
}
# Ctrl-C, or a SIGTERM to the process group (a supervisor, `kill -- -PGID`), reaches the server
# too: let it stop by itself, and signal it only if it is still up after 30 s (a signal sent to
# this script alone). A signal it gets while it stops is only noted, never a second stop. A
# SIGTERM ends the script as the server ended (0: a clean stop), Ctrl-C as an interrupt (130).
wait_for_server() {  # $1: the script's exit status, or "server" for the server's own
  for _ in $(seq 1 60); do
    kill -0 "$server" 2>/dev/null || break
    sleep 0.5
  done
  if kill -0 "$server" 2>/dev/null; then kill -TERM "$server" 2>/dev/null || true; fi
  status=0
  wait "$server" 2>/dev/null || status=$?
  if [ "$1" = server ]; then exit "$status"; fi
  exit "$1"
}
trap stop_server EXIT
trap 'wait_for_server 130' INT
trap 'wait_for_server server' TERM

for _ in $(seq 1 120); do
  if "$bin/python" -c "import httpx,sys; httpx.get('$url/health', timeout=2).raise_for_status()" \
      2>/dev/null; then
    break
  fi
  kill -0 "$server" 2>/dev/null || { echo "error: the service did not start" >&2; exit 1; }
  sleep 1
done

cat <<MSG
Signed in as local-admin: $bin/foldwise and foldwise.Client("$url") find the token in
$("$bin/python" -c "from foldwise.credentials import credentials_path; print(credentials_path())").
The dashboard, $url/dashboard, asks for it once:  $token
Others get their own:  $bin/foldwise token create NAME --role member|viewer
MSG
# Follows the study to its end, then prints how long it took and the commands that show it.
"$bin/foldwise" --url "$url" submit --watch "$spec" || true
cat <<MSG
Still serving $url (API docs: $url/docs); Ctrl-C stops it, and a study resumes on the next start.
Another study:  $cli submit $spec
MSG
wait "$server"
