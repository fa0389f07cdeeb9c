"""Gather what bench/gpu_check.py needs on a bare GPU machine with no network into gpu-bundle/ (at most 64 MiB):

    python bench/gpu_bundle.py [--python 3.12] [--out gpu-bundle]

- wheels/: race_nb itself (built from this tree), peft and transformers (with huggingface-hub and tokenizers) at the versions tested here (they shadow the image's: race_nb pins transformers),
  and the packages race_nb imports that a CUDA image with PyTorch, accelerate, pandas and pyarrow usually lacks (trl, datasets,
  papermill and its Jupyter kernel, math-verify, fastcore, submitit), at the versions installed here, for CPython `--python` on manylinux x86_64, without their dependencies
  (`pip install --no-index --no-deps` there);
- data/: GSM8K (train, test) and MATH-500 (test) from RACE_DATA_DIR or ../shared/data.

On the GPU machine (README, GPU section):
    python -m pip install -q --no-index --no-deps --target /tmp/site gpu-bundle/wheels/*.whl && export PYTHONPATH=/tmp/site
    python -m ipykernel install --user --name race_nb
    RACE_DATA_DIR=gpu-bundle/data python bench/gpu_check.py --out-dir OUT
"""
import argparse, importlib.metadata as md, os, shutil, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ["peft", "transformers", "huggingface-hub", "tokenizers", "trl", "datasets", "dill", "multiprocess", "fastcore", "math-verify", "latex2sympy2-extended", "antlr4-python3-runtime",
            "latex2mathml", "submitit", "papermill", "nbformat", "nbclient", "jupyter-client", "jupyter-core", "ipykernel", "ipython",
            "ipython-pygments-lexers", "comm", "debugpy", "matplotlib-inline", "nest-asyncio2", "pyzmq", "tornado", "traitlets",
            "entrypoints", "tenacity", "fastjsonschema", "jsonschema", "jsonschema-specifications", "referencing", "rpds-py",
            "platformdirs", "prompt-toolkit", "wcwidth", "jedi", "parso", "pexpect", "ptyprocess", "stack-data", "executing",
            "asttokens", "pure-eval"]
PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64"]
LIMIT = 64 * 2**20


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", default="3.12", help="the GPU machine's Python (the wheels' tag)")
    ap.add_argument("--out", default=str(ROOT / "gpu-bundle"))
    a = ap.parse_args()
    out = Path(a.out); shutil.rmtree(out, ignore_errors=True); (out / "wheels").mkdir(parents=True)
    pins = [f"{p}=={md.version(p)}" for p in PACKAGES]
    plat = [f for p in PLATFORMS for f in ("--platform", p)]
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version", a.python,
                    "--implementation", "cp", *plat, "--platform", "any", "-d", str(out / "wheels"), *pins], check=True)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out / "wheels"), str(ROOT)], check=True)
    src = Path(os.environ.get("RACE_DATA_DIR") or ROOT.parent / "shared" / "data")
    for rel in ("gsm8k/train.jsonl", "gsm8k/test.jsonl", "gsm8k/LICENSE", "math500/test.jsonl"):
        (out / "data" / rel).parent.mkdir(parents=True, exist_ok=True)
        if (src / rel).exists(): shutil.copy2(src / rel, out / "data" / rel)
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"{out}: {len(list((out / 'wheels').glob('*.whl')))} wheels and the data, {size / 2**20:.1f} MiB (limit {LIMIT / 2**20:.0f})")
    if size > LIMIT: sys.exit(f"gpu-bundle is {size / 2**20:.1f} MiB, over the {LIMIT / 2**20:.0f} MiB a GPU machine takes")


if __name__ == "__main__":
    main()
