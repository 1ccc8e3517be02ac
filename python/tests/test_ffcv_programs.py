"""FFCV programs run unchanged under beton: each program in ``tests/ffcv/programs/`` is written
against FFCV 1.0.2's API (writer, fields, custom fields, decoders, orders, ``Loader.filter``,
recompiling); this test runs its source with ``ffcv`` replaced by ``beton`` and compares every
array it returns with what FFCV gave (``tests/ffcv/record_programs.py``, recorded into
``data/ffcv_programs/expected.npz``): the same keys, shapes, dtypes and values. Keys listed in
a program's ``TOLERANCE`` (JPEG pixels: two codecs' rounding) compare by mean absolute
difference. With ``BETON_FFCV_PYTHON`` set to FFCV's python, the programs are recorded afresh
with the real FFCV first.
"""

import os
import subprocess
import types

import numpy as np
import pytest

HERE = os.path.dirname(__file__)
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
PROGRAMS = os.path.join(REPO, "tests", "ffcv", "programs")
NAMES = sorted(f[:-3] for f in os.listdir(PROGRAMS) if f.endswith(".py") and not f.startswith("_"))

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def expected(tmp_path_factory):
    live = os.environ.get("BETON_FFCV_PYTHON")
    src = os.path.join(HERE, "data", "ffcv_programs")
    if live:
        src = str(tmp_path_factory.mktemp("ffcv_programs"))
        subprocess.run([live, os.path.join(REPO, "tests", "ffcv", "record_programs.py"), src], check=True,
                       capture_output=True)
    with np.load(os.path.join(src, "expected.npz")) as e:
        return {k: e[k] for k in e.files}


def as_beton(name):
    """Program ``name`` with ``ffcv`` replaced by ``beton`` (the only change an FFCV user makes)."""
    with open(os.path.join(PROGRAMS, f"{name}.py")) as f:
        source = f.read()
    assert "import ffcv" in source or "from ffcv" in source
    module = types.ModuleType(f"beton_program_{name}")
    module.__file__ = os.path.join(PROGRAMS, f"{name}.py")
    exec(compile(source.replace("ffcv", "beton"), module.__file__, "exec"), module.__dict__)
    return module


@pytest.mark.parametrize("name", NAMES)
def test_ffcv_program_gives_ffcvs_arrays(name, expected, tmp_path):
    module = as_beton(name)
    got = {k: np.asarray(v) for k, v in module.run(str(tmp_path)).items()}
    want = {k[len(name) + 1:]: v for k, v in expected.items() if k.startswith(name + "/")}
    assert want, f"nothing recorded for {name}"
    assert sorted(got) == sorted(want)
    tolerance = getattr(module, "TOLERANCE", {})
    for key in sorted(want):
        g, w = got[key], want[key]
        assert g.shape == w.shape, f"{key}: shape {g.shape}, FFCV's {w.shape}"
        assert g.dtype == w.dtype, f"{key}: dtype {g.dtype}, FFCV's {w.dtype}"
        tol = next((t for prefix, t in tolerance.items() if key.startswith(prefix)), None)
        if tol is None:
            np.testing.assert_array_equal(g, w, err_msg=key)
        else:
            diff = np.abs(g.astype(np.float64) - w.astype(np.float64)).mean()
            assert diff <= tol, f"{key}: mean absolute difference {diff:.2f} > {tol}"


def test_every_program_is_recorded(expected):
    recorded = {k.split("/")[0] for k in expected}
    assert recorded == set(NAMES)
