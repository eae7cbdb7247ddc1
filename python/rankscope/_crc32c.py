"""CRC-32C (Castagnoli) of the timeline's event blocks, with numpy alone.

The merge stores the CRC-32C of every block of 16,384 rows of a rank's
events (the last block of a rank may be shorter). A byte-at-a-time loop in
Python would take seconds per million events, so this uses the CRC's
linearity over GF(2) to let numpy do the work in bulk:

- without its initial and final inversion (the "raw" CRC), the CRC of a
  message is the XOR of each byte's own contribution, which depends only on
  the byte's value and its distance from the end; so a 64-byte row's raw
  CRC is the XOR of 32 lookups, one per 16-bit word, in tables made once;
- the raw CRC of A followed by B is shift(raw(A), len(B)) XOR raw(B), where
  shift (running the register over len(B) zero bytes) is a 32x32 bit matrix:
  rows are combined pairwise in 14 rounds into blocks of 16,384;
- zero bytes in front leave a raw CRC unchanged, so a short block is padded
  in front to a whole one;
- the inversions add shift(0xFFFFFFFF, length) before the final NOT.
"""

import numpy as np

ROW_BYTES = 64
BLOCK_ROWS = 16384
_POLYNOMIAL = 0x82F63B78  # reflected Castagnoli
_LEVELS = 14  # 2**14 rows a block


def _byte_table():
    crc = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        crc = np.where(crc & 1, (crc >> 1) ^ np.uint32(_POLYNOMIAL), crc >> 1).astype(np.uint32)
    return crc


_TABLE = _byte_table()


def _zero_byte(crc):
    """The raw register after one more zero byte."""
    return (crc >> np.uint32(8)) ^ _TABLE[crc & np.uint32(0xFF)]


class _Shift:
    """Running the raw register over a fixed number of zero bytes: a linear
    map, kept as its images of the 32 unit vectors and applied a byte of the
    register at a time through four 256-entry tables."""

    def __init__(self, columns):
        self.columns = np.asarray(columns, dtype=np.uint32)  # image of bit i
        bits = (np.arange(256, dtype=np.uint32)[:, None] >> np.arange(8, dtype=np.uint32)) & 1
        self.tables = [
            np.bitwise_xor.reduce(np.where(bits == 1, self.columns[8 * j:8 * j + 8], 0).astype(np.uint32), axis=1)
            for j in range(4)
        ]

    def __call__(self, crc):
        crc = np.asarray(crc, dtype=np.uint32)
        t = self.tables
        return (t[0][crc & 0xFF] ^ t[1][(crc >> 8) & 0xFF] ^ t[2][(crc >> 16) & 0xFF] ^ t[3][crc >> 24])

    def then(self, other):
        """This shift followed by `other`."""
        return _Shift(other(self.columns))


def _row_shifts():
    """Shifts by 64 * 2**level bytes, level 0 .. 14."""
    column = np.uint32(1) << np.arange(32, dtype=np.uint32)
    for _ in range(ROW_BYTES):
        column = _zero_byte(column)
    shifts = [_Shift(column)]
    for _ in range(_LEVELS):
        shifts.append(shifts[-1].then(shifts[-1]))
    return shifts


def _word_tables():
    """For each of a row's 32 16-bit words, its raw contribution by value."""
    by_byte = np.empty((ROW_BYTES, 256), dtype=np.uint32)
    contribution = _TABLE.copy()  # a byte's contribution with no bytes after it
    for position in range(ROW_BYTES - 1, -1, -1):
        by_byte[position] = contribution
        contribution = _zero_byte(contribution)
    values = np.arange(65536, dtype=np.uint32)
    return np.stack([by_byte[2 * k][values & 0xFF] ^ by_byte[2 * k + 1][values >> 8] for k in range(ROW_BYTES // 2)])


_SHIFTS = None
_WORDS = None


def _tables():
    global _SHIFTS, _WORDS
    if _SHIFTS is None:
        _SHIFTS, _WORDS = _row_shifts(), _word_tables()
    return _SHIFTS, _WORDS


def _raw_rows(rows):
    """Raw CRC of each 64-byte row."""
    _, words = _tables()
    w16 = rows.view(np.uint16).reshape(len(rows), ROW_BYTES // 2)
    crc = words[0][w16[:, 0]]
    for k in range(1, ROW_BYTES // 2):
        crc ^= words[k][w16[:, k]]
    return crc


def _shift_rows(crc, rows):
    """shift(crc, 64 * rows bytes), rows below 2**15."""
    shifts, _ = _tables()
    for level in range(_LEVELS + 1):
        if rows >> level & 1:
            crc = shifts[level](crc)
    return crc


def block_checksums(rows):
    """CRC-32C of each block of BLOCK_ROWS rows of `rows` (uint8, N x 64),
    the last block possibly shorter: as the merge computes them."""
    count = len(rows)
    if count == 0:
        return np.empty(0, dtype=np.uint32)
    shifts, _ = _tables()
    blocks = -(-count // BLOCK_ROWS)
    padded = np.zeros(blocks * BLOCK_ROWS, dtype=np.uint32)
    short = count - (blocks - 1) * BLOCK_ROWS  # rows in the last block
    padded[:(blocks - 1) * BLOCK_ROWS] = _raw_rows(rows[:(blocks - 1) * BLOCK_ROWS])
    padded[blocks * BLOCK_ROWS - short:] = _raw_rows(rows[(blocks - 1) * BLOCK_ROWS:])
    crc = padded
    for level in range(_LEVELS):
        pairs = crc.reshape(-1, 2)
        crc = shifts[level](pairs[:, 0]) ^ pairs[:, 1]
    init_full = _shift_rows(np.uint32(0xFFFFFFFF), BLOCK_ROWS)
    init = np.full(blocks, init_full, dtype=np.uint32)
    init[-1] = _shift_rows(np.uint32(0xFFFFFFFF), short)
    return ~(crc ^ init)
