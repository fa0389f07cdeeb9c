"""The reward systems on Qwen-format text, and a reward that carries no signal: the cell fails or warns and is marked, however short it is."""
import json, os, subprocess

import pytest

from race_nb.core import project_root
from race_nb.grid import grid_status

from conftest import require_data
from helpers import DEAD, QWEN_STYLE, RACE



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


def test_a_dead_reward_fails_its_cell_or_warns_and_is_marked(data_dir, tmp_path):
    "Issue 37's dead reward: an answer-gated PRM on a policy that never states an answer gives 0 everywhere. Default: the cell fails with "
    "the reason after no_signal_steps; on_no_signal: warn trains on, says so in cell.log, and status marks the cell."
    from race_nb.grid import aggregate
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
