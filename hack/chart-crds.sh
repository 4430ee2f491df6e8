#!/usr/bin/env bash
# Copies the generated CRDs (config/crd/bases, written by `make generate`) into
# the Helm chart's crds/ directory, byte for byte. test/e2e/chart_test.go
# fails when the two drift; run this after changing api/v1alpha1.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
SRC="$ROOT/config/crd/bases"
DST="$ROOT/charts/snapflow/crds"

mkdir -p "$DST"
# Remove CRDs whose kind no longer exists, then copy the current set.
for f in "$DST"/*.yaml; do
  [[ -e "$f" ]] || continue
  [[ -e "$SRC/$(basename "$f")" ]] || rm -f "$f"
done
cp "$SRC"/*.yaml "$DST"/
echo "chart CRDs synced from config/crd/bases ($(ls "$SRC"/*.yaml | wc -l) files)"
