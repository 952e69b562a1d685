#!/usr/bin/env bash
# Synthesize the nodewright stack with the pinned CDK CLI, offline and
# without AWS credentials: `make synth` runs this.
#
#   infra/synth.sh [extra cdk synth arguments]
#   infra/synth.sh --install-only    (just install the pinned CLI)
#
# CLUSTER_NAME (default: example) and CONFIG_DIR (default: the example
# configuration in infra/testdata/config) choose what to synthesize; the
# functions' code comes from dist/ (`make build`), with placeholders for any
# function not built yet (a synth check, not a deployable assembly).
# The CLI is installed with `npm ci` into infra/node_modules (ignored by git),
# again only when package-lock.json changes.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

lock_hash=$(sha256sum infra/package-lock.json | cut -d' ' -f1)
stamp=infra/node_modules/.nodewright-lock-hash
if [[ ! -x infra/node_modules/.bin/cdk || "$(cat "$stamp" 2>/dev/null)" != "$lock_hash" ]]; then
  (cd infra && npm ci --no-audit --no-fund --loglevel=error)
  echo "$lock_hash" > "$stamp"
fi
if [[ "${1:-}" == "--install-only" ]]; then
  exit 0
fi

# No telemetry, no notices, no version check: synth makes no network call.
export CDK_DISABLE_CLI_TELEMETRY=true
export CDK_DISABLE_VERSION_CHECK=1
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20

exec infra/node_modules/.bin/cdk synth --quiet \
  -c clusterName="${CLUSTER_NAME:-example}" \
  -c configDir="${CONFIG_DIR:-infra/testdata/config}" \
  -c placeholderAssets="${PLACEHOLDER_ASSETS:-true}" \
  "$@"
