"""Model files across format versions: a file written before the per-size layer stored
only what differs (format 1) is still read, and predicts what it predicted then.

``tests/data/model_format1.json`` was written by the kit at 1da3baf (format 1: every
repeated size with its location, band share and a nine-level shape, a two-band regime);
``model_format1.predictions.json`` holds that kit's quantiles and draws from it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from kit.model.io import FORMAT_VERSION, dumps, read_model

DATA = Path(__file__).parent / "data"


def test_a_format_1_file_predicts_what_it_did() -> None:
    mf = read_model(DATA / "model_format1.json")
    ps = mf.model.per_size_
    assert ps is not None and ps.version == 1 and ps.has_shape() and len(ps.sizes) > 30
    assert any(r.is_mixture for r in mf.model.regimes_)
    want = json.loads((DATA / "model_format1.predictions.json").read_text())
    sizes = np.asarray(want["sizes"])
    np.testing.assert_allclose(mf.model.predict_quantiles(sizes, want["levels"]),
                               want["quantiles"], rtol=1e-12)
    np.testing.assert_allclose(mf.model.sample(sizes[:5], 4, random_state=want["sample_seed"]),
                               want["sample"], rtol=1e-12)


def test_a_format_1_layer_saved_again_stays_format_1_inside(tmp_path: Path) -> None:
    """Re-saving an old model writes the current format_version with the old layer marked
    as such (no "version" key: 1), so it reads back to the same predictions."""
    mf = read_model(DATA / "model_format1.json")
    text = dumps(mf.model, mf.provenance, mf.validation)
    doc = json.loads(text)
    assert doc["format_version"] == FORMAT_VERSION and "version" not in doc["per_size"]
    path = tmp_path / "again.json"
    path.write_text(text)
    again = read_model(path).model
    sizes = np.geomspace(1, 2e6, 40)
    np.testing.assert_array_equal(again.predict_quantiles(sizes, [0.05, 0.5, 0.95]),
                                  mf.model.predict_quantiles(sizes, [0.05, 0.5, 0.95]))


def test_a_newer_format_is_refused(tmp_path: Path) -> None:
    import pytest

    from kit.core.errors import ModelError

    doc = json.loads((DATA / "model_format1.json").read_text())
    doc["format_version"] = FORMAT_VERSION + 1
    path = tmp_path / "new.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ModelError, match="newer than this kit reads"):
        read_model(path)
