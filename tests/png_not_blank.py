#!/usr/bin/env python3
"""Exit 0 when the PNG given has at least two different pixel values (not a blank page).

Decodes the PNG with zlib only (8-bit RGB/RGBA/grey, the kinds Chromium writes)."""
import struct
import sys
import zlib


def rows(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit(f"{path}: not a PNG")
    pos, idat, width, height, channels = 8, b"", 0, 0, 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            if depth != 8 or color not in (0, 2, 6):
                sys.exit(f"{path}: unsupported PNG (depth {depth}, color type {color})")
            channels = {0: 1, 2: 3, 6: 4}[color]
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw, stride = zlib.decompress(idat), width * channels
    prev = bytearray(stride)
    for y in range(height):
        line = raw[y * (stride + 1):(y + 1) * (stride + 1)]
        kind, cur = line[0], bytearray(line[1:])
        for i in range(stride):
            a = cur[i - channels] if i >= channels else 0
            b, c = prev[i], prev[i - channels] if i >= channels else 0
            if kind == 1: cur[i] = (cur[i] + a) & 255
            elif kind == 2: cur[i] = (cur[i] + b) & 255
            elif kind == 3: cur[i] = (cur[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                cur[i] = (cur[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        yield width, height, channels, bytes(cur)
        prev = cur


def main():
    first, distinct, size = None, 0, None
    for width, height, channels, line in rows(sys.argv[1]):
        size = (width, height)
        for i in range(0, len(line), channels):
            px = line[i:i + channels]
            if first is None:
                first = px
            elif px != first:
                distinct += 1
    print(f"{sys.argv[1]}: {size[0]}x{size[1]}, {distinct} pixels differ from the first")
    sys.exit(0 if distinct > 0 else 1)


main()
