#!/usr/bin/env python3
"""Prints the colour of one pixel of a PNG as "R G B" (test support: checks Chromium's screenshot).

Usage: png_pixel.py FILE X Y. Reads 8-bit RGB or RGBA, non-interlaced PNGs (what Chromium writes) with
the standard library only; anything else exits 2 with the reason.
"""
import struct
import sys
import zlib


def pixel(path, x, y):
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit(f"{path}: not a PNG")
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in (2, 6) or interlace:
        print(f"{path}: depth {depth}, colour type {colour}, interlace {interlace}: unsupported", file=sys.stderr)
        sys.exit(2)
    bpp = 3 if colour == 2 else 4
    stride = width * bpp
    raw = zlib.decompress(idat)
    prev = bytearray(stride)
    for row in range(y + 1):
        start = row * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + b) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        prev = line
    if not (0 <= x < width and 0 <= y < height):
        sys.exit(f"{path}: pixel {x},{y} outside {width}x{height}")
    return prev[x * bpp:x * bpp + 3]


if __name__ == "__main__":
    r, g, b = pixel(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
    print(r, g, b)
