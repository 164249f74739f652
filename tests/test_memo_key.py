"""A memo key is the digest of its arrays' bytes, exactly: regime fits seed their
subsamples from it (kit.model.memo.content_rng), so a key that changed with its input's
memory layout, or with how it is hashed, would change every fitted model."""

from __future__ import annotations

import hashlib

import numpy as np

from kit.model.memo import ContentMemo


def _reference(*arrays: np.ndarray, extra: tuple = ()) -> bytes:
    h = hashlib.blake2b(repr(extra).encode(), digest_size=20)
    for a in arrays:
        c = np.ascontiguousarray(a)
        h.update(repr((c.dtype.str, c.shape)).encode())
        h.update(c.tobytes())
    return h.digest()


def test_the_key_is_the_digest_of_the_bytes_whatever_the_layout() -> None:
    rng = np.random.default_rng(2)
    m = rng.random((40, 6))
    cases = [rng.random(1000), rng.integers(0, 9, (30, 7)), np.arange(5, dtype=np.uint8),
             m[:, 1], m.T, m[::3], np.zeros(0), np.array([True, False, True])]
    for a in cases:
        assert ContentMemo.key(a) == _reference(a)
        assert ContentMemo.key(a, a[::-1], extra=("x", 1)) == _reference(a, a[::-1],
                                                                          extra=("x", 1))
    # the same values in another layout are the same key; other values are not
    assert ContentMemo.key(m[:, 1]) == ContentMemo.key(m[:, 1].copy())
    assert ContentMemo.key(m[:, 1]) != ContentMemo.key(m[:, 2])
