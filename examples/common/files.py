"""File helpers shared by the example scripts."""

import hashlib


def sha256(path):
    """Hex SHA-256 of a file, read in 1 MiB blocks (checksums of datasets)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
