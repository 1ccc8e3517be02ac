"""Re-lays an FFCV-typed .beton onto 4 KiB pages so that a whole valid file with payloads fits in
the fuzzer's input limit. Usage: python3 small_pages.py IN.beton OUT.beton (prints nothing; exits
1 when a sample does not fit a 4 KiB page or the file has custom fields)."""
import struct, sys

PAGE = 4096
SLOTS = {0: (8, 8, None), 1: (8, 8, None), 2: (13, 1, 5), 3: (16, 1, 0), 4: (8, 8, 0), 5: (16, 1, 0), 6: (8, 8, 0)}

data = open(sys.argv[1], "rb").read()
version, nf, page, n, alloc_ptr = struct.unpack_from("<HHIQQ", data, 0)
types = [data[24 + 1041 * k] for k in range(nf)]
if any(t not in SLOTS for t in types):
    sys.exit(1)
offsets, end, align = [], 0, 1
for t in types:
    size, a, _ = SLOTS[t]
    end = -(-end // a) * a
    offsets.append(end)
    end += size
    align = max(align, a)
row = -(-end // align) * align
t0 = 24 + 1041 * nf
rows = bytearray(data[t0:t0 + n * row])
allocs = [struct.unpack_from("<QQQ", data, p) for p in range(alloc_ptr, len(data), 24)]
allocs.sort()
data_start = -(-(t0 + n * row) // PAGE) * PAGE
pages, new_allocs, moved, cur = bytearray(), [], {}, None
for sid in range(n):
    mine = [a for a in allocs if a[0] == sid]
    total = sum(a[2] for a in mine)
    if total > PAGE:
        sys.exit(1)
    if cur is None or cur + total > PAGE:
        pages += bytes(PAGE)
        cur = 0
    base = len(pages) - PAGE
    for s, ptr, size in mine:
        new = data_start + base + cur
        pages[base + cur:base + cur + size] = data[ptr:ptr + size]
        moved[(sid, ptr)] = new
        new_allocs.append((sid, new, size))
        cur += size
for sid in range(n):
    for k, t in enumerate(types):
        at = SLOTS[t][2]
        if at is None:
            continue
        o = sid * row + offsets[k] + at
        (old,) = struct.unpack_from("<Q", rows, o)
        struct.pack_into("<Q", rows, o, moved[(sid, old)])
new_alloc_ptr = data_start + len(pages) if new_allocs else t0 + n * row
out = bytearray(struct.pack("<HHIQQ", version, nf, PAGE, n, new_alloc_ptr))
out += data[24:t0] + rows
if new_allocs:
    out += bytes(data_start - len(out)) + pages
for a in new_allocs:
    out += struct.pack("<QQQ", *a)
open(sys.argv[2], "wb").write(out)
