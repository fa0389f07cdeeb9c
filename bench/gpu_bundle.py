"""Gather what bench/gpu_check.py needs on a bare GPU machine with no network into gpu-bundle/ (at most 64 MiB):

    python bench/gpu_bundle.py [--out gpu-bundle] [--list] [--check-imports]

What it carries is computed, not listed: race_nb's run-time requirements (settings.ini `requirements`) and theirs, walked
through the metadata of the packages installed here, with every marker evaluated for the image's CPython 3.12 on Linux
x86_64. A requirement stops the walk where the image already holds it (bench/image-packages.txt, copied from the device
tool's KINDS.md) at a version the requirement admits (where the list gives no version, the image's is taken to do unless
the requirement caps the version: peft>=0.21,<0.22 is carried, pandas>=2.2 is not); every
other one is carried at the version installed here (so race_nb runs there with what it was tested with), and its own
requirements are walked in turn. Then:

- wheels/: those packages for CPython 3.12 on manylinux x86_64 (`pip install --no-index --no-deps` there), and race_nb
  itself, built from this tree;
- data/: GSM8K (train, test) and MATH-500 (test) from RACE_DATA_DIR or ../shared/data.

`--list` prints what would be carried and why, downloads nothing. `--check-imports` imports race_nb and what the GPU check
runs in a Python that hides every installed distribution that is neither on the image's list nor carried (tests run it).

On the GPU machine (bench/GPU.md gives the command as typed):
    python -m pip install -q --no-index --no-deps --target /tmp/site gpu-bundle/wheels/*.whl && export PYTHONPATH=/tmp/site
    python -m ipykernel install --user --name race_nb
    RACE_DATA_DIR=gpu-bundle/data python bench/gpu_check.py --out-dir OUT
"""
import argparse, configparser, importlib.metadata as md, os, re, shutil, subprocess, sys
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
IMAGE_LIST = ROOT / "bench" / "image-packages.txt"
# the markers' environment of the image's Python (bench/image-packages.txt's first line names the version)
TARGET = dict(implementation_name="cpython", platform_python_implementation="CPython", os_name="posix", sys_platform="linux",
              platform_system="Linux", platform_machine="x86_64", platform_release="", platform_version="", implementation_version="3.12.3")
PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64"]
LIMIT = 64 * 2**20
# the modules bench/gpu_check.py's stages import (through race_nb, the papermill cells and trl); --check-imports imports each
CHECKED_IMPORTS = ["race_nb", "race_nb.build", "race_nb.grpo", "race_nb.fastgen", "race_nb.eval", "race_nb.grid", "race_nb.grid.run",
                   "race_nb.grid.plan", "race_nb.rewards.prm", "race_nb.memory", "race_nb.roofline", "race_nb.report", "race_nb.cli",
                   "race_nb.forecast", "race_nb.contract", "race_nb.kernels", "transformers", "transformers.models.qwen2.modeling_qwen2",
                   "peft", "trl", "trl.trainer.grpo_trainer", "datasets", "papermill", "ipykernel.kernelapp", "submitit", "math_verify",
                   "optuna", "nbconvert", "huggingface_hub", "accelerate", "pandas", "pyarrow", "yaml", "scipy.stats", "seaborn"]


def norm(name: str) -> str:
    "A distribution's canonical name (PEP 503)."
    return re.sub(r"[-_.]+", "-", name).lower()


def image_packages(path: Path = IMAGE_LIST) -> dict:
    "{canonical name: version or None} of what the GPU image holds (`python` is the interpreter's version)."
    out = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line: continue
        name, _, ver = line.partition("==")
        out[norm(name)] = ver or None
    return out


def runtime_requirements(settings: Path = ROOT / "settings.ini") -> list[str]:
    "race_nb's run-time requirements (settings.ini `requirements`; `dev_requirements` are the developers')."
    cfg = configparser.ConfigParser(); cfg.read(settings)
    return cfg["DEFAULT"]["requirements"].split()


def _marker_env(extra: str = "") -> dict:
    py = image_packages().get("python") or "3.12.3"
    return {**TARGET, "python_version": ".".join(py.split(".")[:2]), "python_full_version": py, "extra": extra}


def _image_admits(req: Requirement, version: str | None) -> bool:
    "Whether the image's copy meets `req`: its version where the list gives one; else any, unless `req` caps the version (== or <)."
    if version is None: return not any(s.operator in ("==", "===", "<", "<=", "~=") for s in req.specifier)
    return req.specifier.contains(Version(version), prereleases=True)


def to_carry(roots: list[str] | None = None, image: dict | None = None) -> dict:
    """{canonical name: (version installed here, why)} of every requirement the image lacks or holds at a version it excludes.
    Raises RuntimeError naming each one that must be carried but is not installed here."""
    image = image_packages() if image is None else image
    roots = runtime_requirements() if roots is None else roots
    carry, walked, missing, todo = {}, set(), [], [(Requirement(r), "race_nb") for r in roots]
    while todo:
        req, parent = todo.pop(0)
        n = norm(req.name)
        if (n, frozenset(req.extras)) in walked: continue
        walked.add((n, frozenset(req.extras)))
        if n in image and _image_admits(req, image[n]): continue
        try: ver = md.version(req.name)
        except md.PackageNotFoundError:
            missing.append(f"{req} (for {parent})"); continue
        on = f"the image has {image[n]}" if n in image else "not on the image"
        carry.setdefault(n, (ver, f"{req} for {parent}; {on}"))
        for sub in md.requires(req.name) or []:
            s = Requirement(sub)
            if s.marker is None or s.marker.evaluate(_marker_env("")) or any(s.marker.evaluate(_marker_env(e)) for e in req.extras):
                todo.append((s, n))
    if missing: raise RuntimeError("must be carried to the GPU image but are not installed here: " + "; ".join(missing))
    return carry


def visible_tree(carry: dict, folder: Path, image: dict | None = None) -> list[str]:
    """Link into `folder` the files of every distribution installed here that is on the image or carried (race_nb comes from
    the tree): a site-packages the GPU machine would have. Returns the installed distributions left out."""
    image = image_packages() if image is None else image
    keep, left = set(image) | set(carry), []
    folder.mkdir(parents=True, exist_ok=True)
    for d in md.distributions():
        n = norm(d.metadata["Name"])
        if n == "race-nb": continue
        if n not in keep: left.append(n); continue
        base = Path(d.locate_file(""))
        for top in {Path(str(f)).parts[0] for f in d.files or [] if not str(f).startswith("..")}:
            src, dst = base / top, folder / top
            if src.exists() and not dst.exists() and top != "__pycache__": dst.symlink_to(src)
    return sorted(set(left))


_IMPORT_CHECK = r"""
import importlib, sys
bad = []
for m in sys.argv[1:]:
    try: importlib.import_module(m)
    except Exception as e: bad.append(f"{m}: {type(e).__name__}: {e}")
print("\n".join(bad) or "ok")
sys.exit(1 if bad else 0)
"""


def check_imports(carry: dict | None = None, modules: list[str] = CHECKED_IMPORTS) -> tuple[bool, str, list[str]]:
    """(ok, what failed, the distributions hidden) of importing `modules` in a fresh Python (no site-packages, `-S`) whose path
    holds this tree and a folder of links to only what the GPU image holds or the bundle carries."""
    import tempfile
    carry = to_carry() if carry is None else carry
    with tempfile.TemporaryDirectory(prefix="race-image-") as tmp:
        hidden = visible_tree(carry, Path(tmp) / "site")
        env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "HF_HUB_OFFLINE": "1",
               "PYTHONPATH": os.pathsep.join([str(ROOT), str(Path(tmp) / "site")]), "MPLCONFIGDIR": tmp}
        r = subprocess.run([sys.executable, "-S", "-c", _IMPORT_CHECK, *modules], capture_output=True, text=True, env=env, cwd=tmp)
    return r.returncode == 0, (r.stdout + r.stderr).strip(), hidden


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / "gpu-bundle"))
    ap.add_argument("--list", action="store_true", help="print what would be carried and why; download nothing")
    ap.add_argument("--check-imports", action="store_true", help="import what the GPU check runs with only the image and the bundle visible")
    a = ap.parse_args()
    try: carry = to_carry()
    except RuntimeError as e: sys.exit(f"gpu_bundle: {e}")
    if a.list or a.check_imports:
        for n, (v, why) in sorted(carry.items()): print(f"{n}=={v:12} {why}")
        if a.check_imports:
            ok, msg, hidden = check_imports(carry)
            print(f"import check of {len(CHECKED_IMPORTS)} modules, {len(hidden)} installed distributions hidden: {msg}")
            sys.exit(0 if ok else 1)
        return
    out = Path(a.out); shutil.rmtree(out, ignore_errors=True); (out / "wheels").mkdir(parents=True)
    pins = [f"{n}=={v}" for n, (v, _) in sorted(carry.items())]
    plat = [f for p in PLATFORMS for f in ("--platform", p)]
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version", "3.12",
                    "--implementation", "cp", *plat, "--platform", "any", "-d", str(out / "wheels"), *pins], check=True)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out / "wheels"), str(ROOT)], check=True)
    src = Path(os.environ.get("RACE_DATA_DIR") or ROOT.parent / "shared" / "data")
    for rel in ("gsm8k/train.jsonl", "gsm8k/test.jsonl", "gsm8k/LICENSE", "math500/test.jsonl"):
        (out / "data" / rel).parent.mkdir(parents=True, exist_ok=True)
        if (src / rel).exists(): shutil.copy2(src / rel, out / "data" / rel)
    (out / "CARRIED.txt").write_text("".join(f"{n}=={v}  # {why}\n" for n, (v, why) in sorted(carry.items())))
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"{out}: {len(list((out / 'wheels').glob('*.whl')))} wheels and the data, {size / 2**20:.1f} MiB (limit {LIMIT / 2**20:.0f})")
    if size > LIMIT: sys.exit(f"gpu-bundle is {size / 2**20:.1f} MiB, over the {LIMIT / 2**20:.0f} MiB a GPU machine takes")


if __name__ == "__main__":
    main()
