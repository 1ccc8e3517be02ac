#!/usr/bin/env bash
# Seeds the fuzz corpus (gitignored) with the FFCV fixtures and the bad-file registry.
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p corpus/open_read
for f in ../tests/data/ffcv/*.beton.gz; do
  name=$(basename "$f" .gz)
  # A leading 0 byte: default options (the target's first byte picks the options).
  { printf '\0'; gunzip -c "$f"; } > "corpus/open_read/$name"
done
for f in ../tests/data/bad/*.beton; do { printf '\0'; cat "$f"; } > "corpus/open_read/bad-$(basename "$f")"; done
# custom_field with its real layout: an odd first byte b picks size b % 17, align 1 << ((b >> 1) % 4);
# 0x39 = 57 -> size 6, align 1.
{ printf '\x39'; gunzip -c ../tests/data/ffcv/custom_field.beton.gz; } > corpus/open_read/custom_field_layout
# Small-page copies of the fixtures: whole valid files with payloads under the 64 KiB input limit.
tmp=$(mktemp)
for f in ../tests/data/ffcv/*.beton.gz; do
  name=$(basename "$f" .beton.gz)
  gunzip -c "$f" > "$tmp"
  if python3 small_pages.py "$tmp" "$tmp.small" 2>/dev/null && [ "$(stat -c %s "$tmp.small")" -le 65536 ]; then
    { printf '\0'; cat "$tmp.small"; } > "corpus/open_read/small-$name"
  fi
done
rm -f "$tmp" "$tmp.small"
ls corpus/open_read | wc -l
