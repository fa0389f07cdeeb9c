"""The paper-scale path rehearsed on CPU: Qwen2.5-format toy checkpoints, hf PRM / proxy / judge back-ends,
Polaris-format training data, GSM8K / MATH-500 evaluation, every reward system through papermill."""
import json, os, subprocess, sys
from pathlib import Path

import pytest

from race_nb.core import project_root
from race_nb.arm_flops import reward_model_flops
from race_nb.build import build_trainer, whole_step_check
from race_nb.config import Arm, CellConfig

from conftest import SHARED, require_data
RACE = str(Path(sys.executable).with_name("race"))
TOY = dict(model="qwen2.5-1.5b", model_path="toy:qwen2.5-1.5b", train_data="polaris:train", eval_id="gsm8k:test",
           eval_ood="math500:test", max_completion_length=16, judge_settings=dict(backend="hf", path="toy:judge"))


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    "GSM8K and MATH-500 from the shared folder, and a small training file in Polaris-53K's format (problem, answer)."
    require_data("gsm8k", "test.jsonl")
    d = tmp_path_factory.mktemp("data")
    for name in ("gsm8k", "math500"): (d / name).symlink_to(SHARED / name)
    (d / "polaris").mkdir()
    rows = [json.loads(l) for l in (SHARED / "math500" / "test.jsonl").read_text().splitlines()[:64]]
    (d / "polaris" / "train.jsonl").write_text("".join(json.dumps(dict(problem=r["problem"], answer=r["answer"])) + "\n" for r in rows))
    old = os.environ.get("RACE_DATA_DIR")
    os.environ["RACE_DATA_DIR"] = str(d)
    yield d
    if old is None: os.environ.pop("RACE_DATA_DIR", None)
    else: os.environ["RACE_DATA_DIR"] = old


def test_rehearsal_grid_runs_every_reward_system(data_dir, tmp_path):
    env = {**os.environ, "RACE_DATA_DIR": str(data_dir)}
    grid = project_root() / "grids" / "paper-rehearsal.yaml"
    plan = subprocess.run([RACE, "grid", "plan", str(grid)], capture_output=True, text=True, env=env)
    assert plan.returncode == 0, plan.stderr
    assert "generation cycles" in plan.stdout
    res = subprocess.run([RACE, "grid", "run", str(grid), "--runs", str(tmp_path)],  # workers: one per core, or per GPU where CUDA is
                         capture_output=True, text=True, env=env, timeout=900)
    assert res.returncode == 0, res.stdout + res.stderr
    from race_nb.grid import aggregate
    df = aggregate(tmp_path / "paper-rehearsal")
    assert (df.status == "done").all(), df[["reward", "status", "error"]]
    assert set(df.reward) == {"sparse", "structured", "proxy_prm", "prm"}  # dense cannot score math text: refused
    model = df.set_index("reward")
    assert (model.loc[["prm", "proxy_prm"], "flops_reward"] > 0).all(), model.flops_reward   # the hf back-ends ran and were charged
    assert (model.loc[["sparse", "structured"], "flops_reward"] == 0).all()
    assert (df.steps >= 5).all() and (df.overshoot >= 0).all()
    for cell in df.cell:  # the judge score comes from the hf judge: a sigmoid of a random one-logit head, charged to eval
        from race_nb.ledger import FlopsLedger
        ev = FlopsLedger.load(tmp_path / "paper-rehearsal" / cell / "ledger.parquet").to_frame()
        assert ev[(ev.component == "eval") & (ev.phase == "judge")].flops.sum() > 0
    assert df.judge.between(0.01, 0.99).all(), df.judge


def test_toy_whole_step_matches_flopcountermode(data_dir):
    arm = Arm("check", n=6, m=4, mu=2)
    prm = dict(reward="prm", reward_settings=dict(backend="hf", path="toy:prm", attn_implementation="eager", require_answer=False),
               micro_batches=2, gradient_checkpointing=True)
    eager = whole_step_check(arm, cycles=2, **TOY, **prm)
    assert abs(eager["ratio"] - 1) < 0.01, eager
    assert eager["phases"]["prm"] > 0 and eager["phases"]["old_logprob"] > 0
    sdpa = whole_step_check(arm, cycles=2, **TOY, **prm, attn_implementation="sdpa")
    assert sdpa["ledger"] == eager["ledger"], (sdpa, eager)   # the ledger counts formulas, not attention kernels


def test_bad_input_is_refused_before_training(data_dir, tmp_path):
    with pytest.raises(ValueError, match="cannot score gsm8k, math500 text"):  # the tiny character-level judge on math
        build_trainer(CellConfig(**{**TOY, "judge_settings": {}}, budget=1e12), tmp_path)
    with pytest.raises(ValueError, match="cannot score gsm8k, polaris text"):
        build_trainer(CellConfig(**{**TOY, "reward": "proxy_prm"}, budget=1e12), tmp_path)
    with pytest.raises(FileNotFoundError, match=r"/no/such/qwen \(from model_path of qwen2.5-1.5b\)"):
        build_trainer(CellConfig(**{**TOY, "model_path": "/no/such/qwen"}, budget=1e12), tmp_path)
    gpt2 = tmp_path / "gpt2"; gpt2.mkdir()
    (gpt2 / "config.json").write_text(json.dumps(dict(model_type="gpt2", architectures=["GPT2LMHeadModel"], n_embd=8)))
    with pytest.raises(ValueError, match="cannot count model_type 'gpt2'"):
        build_trainer(CellConfig(**{**TOY, "model": str(gpt2), "model_path": None}, budget=1e12), tmp_path)
    with pytest.raises(RuntimeError, match="reward_settings.prm.path"):  # offline, an unknown hub PRM cannot be counted: say what to set
        reward_model_flops("prm", dict(backend="hf", hub_id="someone/some-prm"))
    with pytest.raises(ValueError, match="micro_batches=3 must divide"):
        build_trainer(CellConfig(**TOY, micro_batches=3, budget=1e12), tmp_path)


def test_template_declares_every_cell_field_and_overrides_work(tmp_path):
    "Issue 66: the template's parameters cell is every CellConfig field with its typed default (written from the dataclass) and the "
    "cell's own parameters; a field given with -p and overrides both reach the CellConfig over the params file."
    import nbformat, yaml
    from race_nb.contract import cell_parameters_source
    tpl = project_root() / "nbs" / "experiments" / "grpo_cell.ipynb"
    params = next(c for c in nbformat.read(tpl, as_version=4).cells if "parameters" in c.metadata.get("tags", []))
    assert params.source == cell_parameters_source(), "nbs/experiments/grpo_cell.ipynb's parameters cell is not what cell_parameters_source writes"
    CellConfig(budget=3e10, n_eval=5, prompts_per_step=4, eval_max_new_tokens=32).to_yaml(tmp_path / "params.yaml")
    out = tmp_path / "cell"
    import papermill as pm
    from race_nb.kernels import SOCKET_ENV, warm_manager
    warm = dict(kernel_manager_class=warm_manager()) if os.environ.get(SOCKET_ENV) else {}  # the kernel forks from the session's server, as a grid's cells do
    pm.execute_notebook(str(tpl), str(tmp_path / "out.ipynb"), kernel_name="race_nb", cwd=str(tmp_path), progress_bar=False,
                        parameters=dict(params_file=str(tmp_path / "params.yaml"), output_dir=str(out), seed=2, overrides=dict(arm="n8-m4")),
                        log_output=False, **warm)
    got = yaml.safe_load((out / "params.yaml").read_text())
    assert (got["budget"], got["n_eval"], got["seed"], got["arm"]) == (3e10, 5, 2, "n8-m4")
    assert (out / "metrics.json").exists()


def test_a_misspelt_papermill_parameter_fails_the_cell(tmp_path):
    "Issue 66: `papermill ... -p budgett 5e10` exits non-zero naming `budget`, and writes no metrics; with --inject-output-path and no "
    "output_dir the cell's folder is beside the output notebook; nothing is written into the repository."
    tpl = project_root() / "nbs" / "experiments" / "grpo_cell.ipynb"
    pm = str(Path(sys.executable).with_name("papermill"))
    before = set(os.listdir(project_root()))
    res = subprocess.run([pm, str(tpl), str(tmp_path / "out.ipynb"), "-k", "race_nb", "--inject-output-path", "-p", "budgett", "5e10"],
                         capture_output=True, text=True, timeout=300, cwd=project_root())
    assert res.returncode != 0 and "unknown parameter 'budgett' (did you mean 'budget'?)" in res.stdout + res.stderr, res.stderr[-2000:]
    assert not list(tmp_path.rglob("metrics.json")) and set(os.listdir(project_root())) == before
    own = project_root() / "nbs" / "experiments" / "own_run.ipynb"
    res = subprocess.run([pm, str(own), str(tmp_path / "own.ipynb"), "-k", "race_nb", "-p", "bugdet", "4e9"], capture_output=True, text=True,
                         timeout=300, cwd=tmp_path)
    assert res.returncode != 0 and "unknown parameter 'bugdet' (did you mean 'budget'" in res.stdout + res.stderr, res.stderr[-2000:]


GPU_CHECK = project_root() / "bench" / "gpu_check.py"


def test_gpu_check_refuses_to_pass_without_cuda():
    "Without CUDA and without --smoke the GPU check exits non-zero and names CUDA (it used to run its CPU path and exit 0)."
    import torch
    if torch.cuda.is_available(): pytest.skip("a CUDA device is visible: the refusal is for machines without one")
    res = subprocess.run([sys.executable, str(GPU_CHECK)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "no CUDA device" in res.stderr, res.stdout + res.stderr


def test_the_staged_gpu_check_runs_on_cpu_at_toy_shapes(tmp_path):
    "The staged GPU check on the CPU at toy shapes (what CI runs): each stage a subprocess writing its own JSON; S1 the worst "
    "cell's cycle with the memory marks per phase, S2 the random stream unchanged across an evaluation and a 2-cell grid stopped "
    "by a checkpoint request and resumed, S3 ledger = FlopCounterMode per component with the real-format PRM; it finds the "
    "shared data without RACE_DATA_DIR; P probes the versions and imports what the check runs, D times each generation path's decode step, G measures fast generation's peak."
    require_data("gsm8k", "test.jsonl")
    env = {k: v for k, v in os.environ.items() if k != "RACE_DATA_DIR"}
    out = tmp_path / "gpu_check"
    res = subprocess.run([sys.executable, str(GPU_CHECK), "--smoke", "--out-dir", str(out)], capture_output=True, text=True, env=env, timeout=1500)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    s1, s2, s3 = (json.loads((out / f"S{i}.json").read_text()) for i in (1, 2, 3))
    p, d, g = (json.loads((out / f"{k}.json").read_text()) for k in ("P", "D", "G"))
    assert p["status"] == "ok" and p["transformers"] and "vllm" in p and p["imports_checked"] > 20 and not p["imports_failed"], p
    paths = {r["path"] for r in d["rows"]}  # each path's decode step timed at each context, none failed
    assert d["status"] == "ok" and len(d["rows"]) == 10 and paths == {"fastgen", "fastgen-graphs", "fastgen-graphs-merged", "fastgen-sdpa", "transformers"}, d
    assert all(r["graphs"] == ("captured" if "graphs" in r["path"] else "off") and r["kernel_split_us"] for r in d["rows"]), d["rows"]
    assert g["status"] == "ok" and g["planned_gib"] > 0 and g["tokens"] == 24, g
    from race_nb.roofline import measured_efficiency
    assert json.loads((out / "decode.json").read_text())["smoke"] and measured_efficiency("H100", out / "decode.json") is None
    assert s1["status"] == "ok" and set(s1["marks"]) == {"generation", "scoring", "update"} and s1["marks"]["generation"]["rollouts"] == 4 * 16
    assert s1["cycle_seconds"] > 0 and s1["predicted_gib"]["generation"] > 0
    assert s2["rng_unchanged"] and s2["after_first_run"].get("interrupted") == 1 and s2["after_resume"] == {"done": 1} and s2["resumed_from"], s2
    assert abs(s3["ratio"] - 1) < 0.01 and all(abs(v - 1) < 0.01 for v in s3["components"].values()) and s3["phases"]["prm"] > 0
    assert json.loads((out / "gpu_check.json").read_text())["smoke"]


QWEN_STYLE = {  # completions written the way Qwen2.5-Instruct writes: markdown headings, LaTeX, \boxed{}, a run-on next turn
    "headings and boxed": "#### Step 1: Count\nShe has $3 + 4 = 7$ apples.\n\n#### Step 2: Answer\nSo she has $\\boxed{7}$ apples.",
    "heading, no answer": "#### Step 2: Add them\nShe has $3 + 4 = 7$ apples.",
    "run-on turn": "She has $\\boxed{7}$ apples.<|im_end|>\n<|im_start|>user\nAnd now?<|im_end|>\n<|im_start|>assistant\n#### 8",
    "wrong boxed": "#### Step 1\n$3 + 4 = 8$.\n\nThe answer is $\\boxed{8}$.",
    "gsm8k marker": "She has 3 + 4 = 7 apples.\n#### 7",
}


def test_every_reward_system_on_qwen_style_text(data_dir):
    "Each reward system on policy text as Qwen2.5 writes it: graded on the boxed answer (never on a heading), run-on turns cut, "
    "model scores finite and in [0, 1], and dense refused on math text before anything is scored."
    from race_nb.rewards import make_reward
    names, texts = list(QWEN_STYLE), list(QWEN_STYLE.values())
    batch = dict(answer=["7"] * len(texts), task=["gsm8k"] * len(texts), question=["Ann has 3 apples and gets 4. How many?"] * len(texts))
    sparse = dict(zip(names, make_reward("sparse")(None, texts, **batch)))
    assert sparse == {"headings and boxed": 1.0, "heading, no answer": 0.0, "run-on turn": 1.0, "wrong boxed": 0.0, "gsm8k marker": 1.0}
    structured = dict(zip(names, make_reward("structured")(None, texts, **batch)))
    assert structured["headings and boxed"] >= 0.6 > structured["heading, no answer"] and structured["wrong boxed"] < 0.6
    with pytest.raises(ValueError, match="dense cannot score gsm8k text"):
        make_reward("dense").check_tasks({"gsm8k"})
    for name, settings in (("prm", dict(path="toy:qwen-prm")), ("proxy_prm", dict(path="toy:proxy-prm")), ("judge", dict(path="toy:judge", require_answer=False))):
        r = make_reward(name, backend="hf", attn_implementation="eager", **settings)
        scores = r(None, texts, **batch)
        assert all(0.0 <= s <= 1.0 for s in scores), (name, scores)
        if name != "judge": assert scores[names.index("heading, no answer")] == 0.0  # no final answer: not scored, 0 (as sparse)
        else: assert len(set(round(s, 6) for s in scores)) > 1, scores  # the bounded judge still tells completions apart


def test_training_leaves_nothing_resident_before_evaluation(data_dir, tmp_path):
    "The trainer and the hf PRM it scored with are gone once train_cell returns; evaluation loads one scorer at a time and drops it."
    import gc, weakref
    from race_nb import eval as ev
    from race_nb.rewards import prm
    built, scorers = {}, []
    orig_build, orig_scorer = ev.build_trainer, prm.hf_scorer
    def build(*a, **k):
        tr = orig_build(*a, **k); built["trainer"] = weakref.ref(tr); return tr
    def scorer(*a, **k):
        s = orig_scorer(*a, **k); scorers.append(weakref.ref(s.model)); return s
    ev.build_trainer, prm.hf_scorer = build, scorer
    try:
        cfg = CellConfig(**{**TOY, "reward": "prm", "reward_settings": dict(backend="hf", path="toy:qwen-prm", require_answer=False),
                            "prompts_per_step": 4, "n_eval": 4, "eval_max_new_tokens": 8, "budget": 6e10})  # 3+ cycles: what stays resident does not depend on how many (was 2e11)
        trained = ev.train_cell(cfg, tmp_path / "cell")
        gc.collect()
        assert built["trainer"]() is None and scorers and all(r() is None for r in scorers)
        assert not prm._HF_SCORERS
        n_train = len(scorers)
        ev.finish_cell(cfg, trained, tmp_path / "cell")
        gc.collect()
        assert len(scorers) > n_train and all(r() is None for r in scorers) and not prm._HF_SCORERS  # PRM and judge dropped after scoring
    finally:
        ev.build_trainer, prm.hf_scorer = orig_build, orig_scorer
    assert json.loads((tmp_path / "cell" / "metrics.json").read_text())["flops_reward"] > 0


DEAD = """name: {name}
fixed:
  train_data: polaris:train
  eval_id: gsm8k:test
  eval_ood: math500:test
  n_eval: 8
  eval_max_new_tokens: 16
  max_completion_length: 16
  prompts_per_step: 4
  milestones: 0  # its checks read no learning curve
  model_path: "toy:qwen2.5-1.5b"
  reward_settings:
    prm: {{backend: hf, path: "toy:qwen-prm"}}  # require_answer: true (the default): the toy policy never states an answer
  judge_settings: {{backend: hf, path: "toy:judge"}}
axes:
  model: [qwen2.5-1.5b]
  reward: [prm]
  arm: [n8-m4]
budgets: [4.0e10]  # the warned cell trains to the end: 5 steps, enough for 2 in a row without signal
seeds: [0]
no_signal_steps: 2
{extra}"""


def test_a_dead_reward_fails_its_cell_or_warns_and_is_marked(data_dir, tmp_path):
    "Issue 37's dead reward: an answer-gated PRM on a policy that never states an answer gives 0 everywhere. Default: the cell fails with "
    "the reason after no_signal_steps; on_no_signal: warn trains on, says so in cell.log, and status marks the cell."
    from race_nb.grid import aggregate, grid_status
    procs = {}
    for name, extra in (("deadfail", ""), ("deadwarn", "on_no_signal: warn\n")):  # the two one-cell grids side by side, one core each
        (tmp_path / f"{name}.yaml").write_text(DEAD.format(name=name, extra=extra))
        core = {sorted(os.sched_getaffinity(0))[len(procs) % len(os.sched_getaffinity(0))]}  # one core each: their cells run one thread each
        procs[name] = subprocess.Popen([RACE, "grid", "run", str(tmp_path / f"{name}.yaml"), "--runs", str(tmp_path / "runs"), "--workers", "1",
                                        "--min-cycles", "0"], stdout=open(tmp_path / f"{name}.log", "w"), stderr=subprocess.STDOUT,
                                       preexec_fn=lambda core=core: os.sched_setaffinity(0, core))
    for name, p in procs.items():  # `race grid run` exits 1 when a cell failed
        assert p.wait(timeout=900) == (1 if name == "deadfail" else 0), (tmp_path / f"{name}.log").read_text()[-3000:]
    fail, warn = (grid_status(tmp_path / "runs" / name).iloc[0] for name in procs)
    assert fail.status == "failed" and "no learning signal for 2 optimizer steps in a row" in fail.error, fail.error
    assert "no completion stated a final answer (0% did" in fail.error and "prm" in fail.error, fail.error
    log = (tmp_path / "runs" / "deadwarn" / warn.cell / "cell.log").read_text()
    assert warn.status == "done" and "no learning signal for 2 optimizer steps in a row" in log, log[-2000:]
    assert "dead reward: prm carried a learning signal in 0% of its" in log, log[-2000:]  # and the end of its training says it once more
    assert warn.signal == 0.0 and warn.low_signal, warn
    m = aggregate(tmp_path / "runs" / "deadwarn").iloc[0]
    assert m.signal_share == 0.0 and m.no_signal_steps == m.steps and m.answer_share == 0.0 and m.dead_reward, m
    st = subprocess.run([RACE, "grid", "status", str(tmp_path / "runs" / "deadwarn")], capture_output=True, text=True)
    assert st.returncode == 0 and f"low signal {warn.cell}: only 0% of its prompt groups" in st.stdout, st.stdout
    from race_nb.report import render_report
    with pytest.raises(ValueError, match="unknown report page 'computes'; valid: index, reproduction, method, grid/index, grid/compute"):  # checked before a page runs
        render_report(tmp_path / "runs" / "deadwarn", tmp_path / "site", "fallback", only=["computes"])
    with pytest.raises(ValueError, match=r"only=\[\] names no report page"):
        render_report(tmp_path / "runs" / "deadwarn", tmp_path / "site", "fallback", only=[])
    first, _ = render_report(tmp_path / "runs" / "deadwarn", tmp_path / "site", "fallback", only=["compute"])  # the page that marks it
    assert first == tmp_path / "site" / "grid" / "compute.html" and [p.relative_to(tmp_path / "site").as_posix() for p in (tmp_path / "site").rglob("*.html")] == ["grid/compute.html"]
    assert "learned from too little signal" in first.read_text()
    print(fail.error)


def test_a_short_cell_says_its_dead_reward(tmp_path):
    "Issue 54: a cell shorter than the signal watch (no_signal_steps 16) run directly with papermill, as a new user would: an answer-"
    "gated PRM on a policy that never states an answer carried no signal, and the end of its training says so in one line naming the "
    "reward, the shares and what to change (on_no_signal's default, fail, stops the cell with it). The same cell with the PRM not "
    "answer-gated carries a signal and says nothing of the kind."
    require_data("gsm8k", "test.jsonl")
    import nbformat, papermill as pm
    from race_nb.kernels import SOCKET_ENV, warm_manager
    tpl = project_root() / "nbs" / "experiments" / "grpo_cell.ipynb"
    warm = dict(kernel_manager_class=warm_manager()) if os.environ.get(SOCKET_ENV) else {}
    base = dict(model="qwen2.5-1.5b", model_path="toy:qwen2.5-1.5b", train_data="gsm8k:train", eval_id="gsm8k:test", eval_ood="math500:test",
                n_eval=4, eval_max_new_tokens=16, max_completion_length=16, prompts_per_step=4, milestones=0, reward="prm", arm="n8-m4",
                budget=2.5e10, judge_settings=dict(backend="hf", path="toy:judge"))
    outs = {}
    for name, gated in (("dead", True), ("live", False)):
        over = dict(base, reward_settings=dict(backend="hf", path="toy:qwen-prm", require_answer=gated))
        nb_out = tmp_path / f"{name}.ipynb"
        try:
            pm.execute_notebook(str(tpl), str(nb_out), kernel_name="race_nb", cwd=str(tmp_path), progress_bar=False, log_output=False,
                                parameters=dict(output_dir=str(tmp_path / name), overrides=over), **warm)
            err = None
        except pm.PapermillExecutionError as e: err = e
        text = "\n".join(str(o.get("text", "")) + str(o.get("evalue", "")) + "".join(o.get("traceback", []))
                         for c in nbformat.read(nb_out, as_version=4).cells if c.cell_type == "code" for o in c.get("outputs", []))
        outs[name] = (err, text)
    err, text = outs["dead"]
    assert err is not None and err.ename == "NoSignal", err
    line = next((l for l in err.evalue.splitlines() if "dead reward:" in l), None)
    assert line is not None and line.startswith("dead reward: prm carried a learning signal in 0% of its "), err.evalue
    steps = int(line.split(" of its ")[1].split()[0])
    assert 1 <= steps < 16, line  # shorter than the watch: the end-of-run check, not the watch, said it
    assert "0% of completions stated a final answer" in line and "require_answer: false" in line and "max_completion_length (now 16" in line, line
    assert "dead reward:" in text  # in the executed notebook the user opens
    err, text = outs["live"]
    assert err is None and "dead reward" not in text and "no learning signal" not in text, (err, text[-2000:])
    m = json.loads((tmp_path / "live" / "metrics.json").read_text())
    assert m["signal_step_share"] > 0.1 and m["dead_reward"] is False and m["steps"] < 16, m


def test_preflight_refuses_a_model_that_does_not_load_before_any_cell(data_dir, tmp_path):
    "Issue 52: a grid whose judge path is missing (or whose PRM folder holds a broken config) is refused within a minute, before "
    "any cell starts, in one line naming the grid key and the path; a real local folder passes."
    import time
    from race_nb.grid import load_grid, preflight
    from race_nb.models import resolve_path
    judge = resolve_path("toy:judge")  # a real local checkpoint folder
    broken = tmp_path / "broken-prm"; broken.mkdir(); (broken / "config.json").write_text("{not json")
    cases = {"nojudge": ("{backend: hf, path: toy:qwen-prm}", f"{{backend: hf, path: {tmp_path / 'no-such-judge'}}}",
                         f"fixed.judge_settings.path: the judge cannot be loaded from {tmp_path / 'no-such-judge'}: no such folder"),
             "badprm": (f"{{backend: hf, path: {broken}}}", f"{{backend: hf, path: {judge}}}",
                        f"fixed.reward_settings.prm.path: the prm reward model cannot be loaded from {broken}: ")}
    for name, (prm, jud, want) in cases.items():
        grid = tmp_path / f"{name}.yaml"
        grid.write_text(DEAD.format(name=name, extra="").replace('  prm: {backend: hf, path: "toy:qwen-prm"}', f"  prm: {prm}").replace('judge_settings: {backend: hf, path: "toy:judge"}', f"judge_settings: {jud}"))
        t0 = time.time()
        res = subprocess.run([RACE, "grid", "run", str(grid), "--runs", str(tmp_path / "runs"), "--min-cycles", "0"], capture_output=True, text=True, timeout=120)
        out = res.stdout + res.stderr
        assert res.returncode != 0 and want in out and "nothing was run" in out, out[-2000:]
        assert time.time() - t0 < 60 and not (tmp_path / "runs" / name).exists(), out[-2000:]  # refused before any cell folder
    grid = tmp_path / "good.yaml"
    grid.write_text(DEAD.format(name="good", extra="").replace('judge_settings: {backend: hf, path: "toy:judge"}', f"judge_settings: {{backend: hf, path: {judge}}}"))
    checked = preflight(load_grid(grid))
    assert [m["key"] for m in checked] == ["fixed.judge_settings.path"], checked  # toy: references are built here, not checked
