"""Record what FFCV 1.0.2 gives for the FFCV programs in ``programs/`` (each a module with
``run(tmp_dir) -> {key: numpy array}``, written against FFCV's API only).

    python tests/ffcv/record_programs.py [OUT_DIR]   # default: python/tests/data/ffcv_programs/

Run it with the python of FFCV's venv (``tests/ffcv/ffcv-env.sh``). It writes
``expected.npz``, keyed ``PROGRAM/KEY``. ``python/tests/test_ffcv_programs.py`` runs each
program with ``ffcv`` replaced by ``beton`` in its source and compares shapes, dtypes and
values with the recording (CI has no FFCV); with ``BETON_FFCV_PYTHON`` set it records afresh.
"""
import importlib.util
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAMS = os.path.join(HERE, "programs")


def programs():
    return sorted(f[:-3] for f in os.listdir(PROGRAMS) if f.endswith(".py") and not f.startswith("_"))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "python", "tests", "data",
                                                             "ffcv_programs")
    os.makedirs(out, exist_ok=True)
    res = {}
    for name in programs():
        spec = importlib.util.spec_from_file_location(f"ffcv_program_{name}", os.path.join(PROGRAMS, f"{name}.py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        with tempfile.TemporaryDirectory() as tmp:
            for key, value in module.run(tmp).items():
                res[f"{name}/{key}"] = np.asarray(value)
        print(f"record_programs: {name}", file=sys.stderr)
    np.savez_compressed(os.path.join(out, "expected.npz"), **res)
    print(f"record_programs: wrote {out}")


if __name__ == "__main__":
    main()
