#!/usr/bin/env python3
"""Independent reference decoder for GGML quantized blocks, written from
docs/quant-formats.md (not from llama.cpp's C code), and fixture generator.

Each value is computed exactly with fractions and rounded once to the nearest
binary32 (ties to even), which is what the formats' f32 arithmetic gives
because every product in them is exact in binary32 (see the doc).

Usage: ref_dequant.py [OUT_DIR]   (default: tests/gguf/fixtures next to this repo)
Writes OUT_DIR/<TYPE>.bin for each type:
  char magic[4] = "LQF1"; u32 type_id; u32 n_blocks; u32 block_bytes;
  u32 values_per_block; u8 blocks[n_blocks * block_bytes];
  f32 values[n_blocks * values_per_block]   (all little endian)
Run `ref_dequant.py --self-test` to check the decoder on hand-made blocks.
"""
import os
import struct
import sys
from fractions import Fraction

import numpy as np

# type name -> (ggml type id, values per block, bytes per block)
TYPES = {
    "Q4_0": (2, 32, 18), "Q4_1": (3, 32, 20), "Q5_0": (6, 32, 22),
    "Q5_1": (7, 32, 24), "Q8_0": (8, 32, 34), "Q2_K": (10, 256, 84),
    "Q3_K": (11, 256, 110), "Q4_K": (12, 256, 144), "Q5_K": (13, 256, 176),
    "Q6_K": (14, 256, 210), "IQ4_NL": (20, 32, 18), "IQ4_XS": (23, 256, 136),
}


def f16(b, off):
    """Exact value of the little-endian binary16 at b[off:off+2]."""
    bits = b[off] | (b[off + 1] << 8)
    sign = -1 if bits & 0x8000 else 1
    exp = (bits >> 10) & 31
    mant = bits & 1023
    assert exp != 31, "fixtures use finite f16 only"
    if exp == 0:
        return sign * Fraction(mant, 1 << 24)
    return sign * Fraction(1024 + mant, 1024) * Fraction(2) ** (exp - 15)


def round_f32(v):
    """Nearest binary32 to the exact rational v, ties to even."""
    c = np.float32(float(v))  # within one f32 ulp of v
    cands = [c, np.nextafter(c, np.float32(np.inf)), np.nextafter(c, np.float32(-np.inf))]
    best = None
    for x in cands:
        err = abs(Fraction(float(x)) - v)
        key = (err, int(x.view(np.uint32)) & 1)  # smaller error, then even significand
        if best is None or key < best[0]:
            best = (key, x)
    return best[1]


def nib_lo(x):
    return x & 15


def nib_hi(x):
    return x >> 4


# ---- legacy 32-value blocks -----------------------------------------------
def q4_quants(qs):
    return [nib_lo(qs[j]) for j in range(16)] + [nib_hi(qs[j]) for j in range(16)]


def q5_quants(qh, qs):
    word = qh[0] | (qh[1] << 8) | (qh[2] << 16) | (qh[3] << 24)
    return [q + 16 * ((word >> i) & 1) for i, q in enumerate(q4_quants(qs))]


def dec_q4_0(b):
    d = f16(b, 0)
    return [d * (q - 8) for q in q4_quants(b[2:18])]


def dec_q4_1(b):
    d, m = f16(b, 0), f16(b, 2)
    return [d * q + m for q in q4_quants(b[4:20])]


def dec_q5_0(b):
    d = f16(b, 0)
    return [d * (q - 16) for q in q5_quants(b[2:6], b[6:22])]


def dec_q5_1(b):
    d, m = f16(b, 0), f16(b, 2)
    return [d * q + m for q in q5_quants(b[4:8], b[8:24])]


def dec_q8_0(b):
    d = f16(b, 0)
    return [d * (q - 256 if q > 127 else q) for q in b[2:34]]


# ---- k-quants ----------------------------------------------------------------
def two_bit(qs, i):
    h, g, l = i // 128, (i % 128) // 32, i % 32
    return (qs[32 * h + l] >> (2 * g)) & 3


def dec_q2_k(b):
    scales, qs = b[0:16], b[16:80]
    d, dmin = f16(b, 80), f16(b, 82)
    out = []
    for i in range(256):
        s = scales[i // 16]
        out.append(d * nib_lo(s) * two_bit(qs, i) - dmin * nib_hi(s))
    return out


def q3_scale(S, s):
    low = nib_lo(S[s]) if s < 8 else nib_hi(S[s - 8])
    high = (S[8 + s % 4] >> (2 * (s // 4))) & 3
    return low | (high << 4)


def dec_q3_k(b):
    hmask, qs, S = b[0:32], b[32:96], b[96:108]
    d = f16(b, 108)
    out = []
    for i in range(256):
        h, g, l = i // 128, (i % 128) // 32, i % 32
        hb = (hmask[l] >> (4 * h + g)) & 1
        q = two_bit(qs, i) - (0 if hb else 4)
        out.append(d * (q3_scale(S, i // 16) - 32) * q)
    return out


def k4_scale_min(S, s):
    if s < 4:
        return S[s] & 63, S[s + 4] & 63
    return (nib_lo(S[s + 4]) | ((S[s - 4] >> 6) << 4),
            nib_hi(S[s + 4]) | ((S[s] >> 6) << 4))


def q4k_nibble(qs, i):
    c, l = i // 64, i % 32
    byte = qs[32 * c + l]
    return nib_lo(byte) if (i % 64) < 32 else nib_hi(byte)


def dec_q4_k(b):
    d, dmin, S, qs = f16(b, 0), f16(b, 2), b[4:16], b[16:144]
    out = []
    for i in range(256):
        sc, m = k4_scale_min(S, i // 32)
        out.append(d * sc * q4k_nibble(qs, i) - dmin * m)
    return out


def dec_q5_k(b):
    d, dmin, S, qh, qs = f16(b, 0), f16(b, 2), b[4:16], b[16:48], b[48:176]
    out = []
    for i in range(256):
        s = i // 32
        sc, m = k4_scale_min(S, s)
        q = q4k_nibble(qs, i) + 16 * ((qh[i % 32] >> s) & 1)
        out.append(d * sc * q - dmin * m)
    return out


def dec_q6_k(b):
    ql, qh, sc, d = b[0:128], b[128:192], b[192:208], f16(b, 208)
    out = []
    for i in range(256):
        h, g, l = i // 128, (i % 128) // 32, i % 32
        lbyte = ql[64 * h + l + (32 if g in (1, 3) else 0)]
        low = nib_lo(lbyte) if g < 2 else nib_hi(lbyte)
        high = (qh[32 * h + l] >> (2 * g)) & 3
        q = (low | (high << 4)) - 32
        s = sc[i // 16]
        s = s - 256 if s > 127 else s
        out.append(d * s * q)
    return out


# ---- 4-bit non-linear (i-quants) ----------------------------------------------
# The sixteen values a 4-bit index stands for (docs/quant-formats.md).
IQ4_VALUES = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113]


def dec_iq4_nl(b):
    d = f16(b, 0)
    return [d * IQ4_VALUES[q] for q in q4_quants(b[2:18])]


def dec_iq4_xs(b):
    d = f16(b, 0)
    scales_h = b[2] | (b[3] << 8)
    scales_l, qs = b[4:8], b[8:136]
    out = []
    for ib in range(8):
        ls = ((scales_l[ib // 2] >> (4 * (ib % 2))) & 15) | (((scales_h >> (2 * ib)) & 3) << 4)
        out.extend(d * (ls - 32) * IQ4_VALUES[q] for q in q4_quants(qs[16 * ib:16 * ib + 16]))
    return out


DECODERS = {
    "Q4_0": dec_q4_0, "Q4_1": dec_q4_1, "Q5_0": dec_q5_0, "Q5_1": dec_q5_1,
    "Q8_0": dec_q8_0, "Q2_K": dec_q2_k, "Q3_K": dec_q3_k, "Q4_K": dec_q4_k,
    "Q5_K": dec_q5_k, "Q6_K": dec_q6_k, "IQ4_NL": dec_iq4_nl, "IQ4_XS": dec_iq4_xs,
}

# Offsets of the f16 fields in each block (set to chosen finite values).
F16_FIELDS = {
    "Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q8_0": [0],
    "Q2_K": [80, 82], "Q3_K": [108], "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208],
    "IQ4_NL": [0], "IQ4_XS": [0],
}

SPECIAL_F16 = [0x0000, 0x8000, 0x0001, 0x03FF, 0x0400, 0x7BFF, 0xFBFF, 0x3C00]


def random_f16(rng, k):
    """Finite binary16 bits: mostly typical scales, some arbitrary, some special."""
    r = rng.random()
    if k < len(SPECIAL_F16) and r < 0.15:
        return SPECIAL_F16[int(rng.integers(len(SPECIAL_F16)))]
    if r < 0.75:
        exp = int(rng.integers(1, 15))  # 2^-14 .. 2^-1
    else:
        exp = int(rng.integers(0, 31))  # anything finite, subnormals too
    return (int(rng.integers(2)) << 15) | (exp << 10) | int(rng.integers(1024))


def make_blocks(name, n_blocks, rng):
    _, _, nbytes = TYPES[name]
    blocks = []
    for k in range(n_blocks):
        b = bytearray(rng.integers(0, 256, nbytes, dtype=np.uint8).tobytes())
        for off in F16_FIELDS[name]:
            struct.pack_into("<H", b, off, random_f16(rng, k))
        blocks.append(bytes(b))
    return blocks


def write_fixture(path, name, blocks):
    tid, per, nbytes = TYPES[name]
    vals = []
    for b in blocks:
        vals.extend(round_f32(v) for v in DECODERS[name](b))
    with open(path, "wb") as f:
        f.write(b"LQF1" + struct.pack("<4I", tid, len(blocks), nbytes, per))
        for b in blocks:
            f.write(b)
        f.write(np.array(vals, dtype="<f4").tobytes())


def self_test():
    """Hand-made blocks with values worked out from the doc."""
    one = struct.pack("<H", 0x3C00)  # 1.0
    half = struct.pack("<H", 0x3800)  # 0.5
    # Q4_0: qs[j] = 0x9 | 0x7 << 4 -> low 9 (x = 1), high 7 (x = -1)
    b = one + bytes([0x79] * 16)
    assert dec_q4_0(b) == [1] * 16 + [-1] * 16
    # Q5_0: qh bit i set for i = 0 and 31 -> q + 16
    b = one + bytes([1, 0, 0, 0x80]) + bytes([0] * 16)
    v = dec_q5_0(b)
    assert v[0] == 0 and v[1] == -16 and v[31] == 0 and v[16] == -16
    # Q4_K: d = 1, dmin = 0.5, sc[0] = 2, m[0] = 3, all nibbles 5 -> 2*5 - 1.5
    S = bytes([2, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0])
    b = one + half + S + bytes([0x55] * 128)
    v = dec_q4_k(b)
    assert v[0] == Fraction(17, 2) and v[31] == Fraction(17, 2) and v[32] == 0
    # Q4_K high entries: s = 4 takes S[8] low nibble + S[0] top bits.
    S = bytes([0xC0, 0, 0, 0, 0xC0, 0, 0, 0, 0x21, 0, 0, 0])
    sc, m = k4_scale_min(S, 4)
    assert (sc, m) == (1 | (3 << 4), 2 | (3 << 4)), (sc, m)
    # Q6_K: ql = 0, qh = 0 -> q = -32; scales[0] = -1 -> x = 32
    b = bytes(128) + bytes(64) + bytes([0xFF] + [1] * 15) + one
    v = dec_q6_k(b)
    assert v[0] == 32 and v[16] == -32
    # Q3_K: hmask all set, qs = 0 -> q = 0 -> x = 0; hmask 0 -> q = -4
    S = bytes([1] * 8 + [0] * 4)  # sc[0..7] = 1, sc[8..15] = 0 -> (sc - 32)
    b = bytes(32) + bytes(64) + S + one
    v = dec_q3_k(b)
    assert v[0] == (1 - 32) * -4 and v[128] == (0 - 32) * -4
    # IQ4_NL: index 8 -> 1, index 0 -> -127; d = 0.5
    b = half + bytes([0x08] * 16)
    v = dec_iq4_nl(b)
    assert v[0] == Fraction(1, 2) and v[16] == Fraction(-127, 2)
    # IQ4_XS: sub-block 0 scale 33 (low nibble 1, high bits 2 -> 1 | 2 << 4 = 33): 33 - 32 = 1;
    # sub-block 1 scale 0 -> -32. Index 15 -> 113.
    b = one + struct.pack("<H", 0x0002) + bytes([0x01, 0, 0, 0]) + bytes([0xFF] * 128)
    v = dec_iq4_xs(b)
    assert v[0] == 113 and v[31] == 113 and v[32] == -32 * 113, (v[0], v[32])
    print("self-test ok")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--self-test":
        self_test()
        return
    here = os.path.dirname(os.path.abspath(__file__))
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "..", "tests", "gguf", "fixtures")
    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.default_rng(20260401)
    for name, (_, per, _) in TYPES.items():
        n_blocks = 48 if per == 32 else 12
        write_fixture(os.path.join(out_dir, name + ".bin"), name, make_blocks(name, n_blocks, rng))
        print("wrote", name, n_blocks, "blocks")


if __name__ == "__main__":
    main()
