#!/usr/bin/env bash
# Streaming, then non-streaming chat against a running larderd.
#   clients/curl-chat.sh [BASE_URL]   (default http://127.0.0.1:8080)
# Sends $LARDER_API_KEY as the API key when it is set.
set -euo pipefail
base=${1:-http://127.0.0.1:8080}
auth=()
if [ -n "${LARDER_API_KEY:-}" ]; then auth=(-H "Authorization: Bearer $LARDER_API_KEY"); fi
# -S: say why curl failed; --fail-with-body: an HTTP error exits non-zero
# and still shows larderd's error message.
models=$(curl -sS --fail-with-body "${auth[@]}" "$base/v1/models") || {
  echo "curl-chat.sh: GET $base/v1/models failed: ${models:-no answer}" >&2
  exit 1
}
model=$(printf '%s' "$models" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
echo "model: $model"
curl -sSN --fail-with-body "${auth[@]}" "$base/v1/chat/completions" -H 'Content-Type: application/json' -d "{
  \"model\": \"$model\", \"stream\": true, \"max_tokens\": 40,
  \"stream_options\": {\"include_usage\": true},
  \"messages\": [{\"role\": \"user\", \"content\": \"Tell me a story about a cat.\"}]}"
echo
curl -sS --fail-with-body "${auth[@]}" "$base/v1/chat/completions" -H 'Content-Type: application/json' -d "{
  \"model\": \"$model\", \"max_tokens\": 40, \"temperature\": 0,
  \"messages\": [{\"role\": \"user\", \"content\": \"Tell me a story about a cat.\"}]}"
echo
