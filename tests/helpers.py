"""What several test files share: the `race` command, the paper-scale toy cell, small grid files."""
import sys
from pathlib import Path

from race_nb.core import project_root

RACE = str(Path(sys.executable).with_name("race"))

TOY = dict(model="qwen2.5-1.5b", model_path="toy:qwen2.5-1.5b", train_data="polaris:train", eval_id="gsm8k:test",
           eval_ood="math500:test", max_completion_length=16, judge_settings=dict(backend="hf", path="toy:judge"))

GPU_CHECK = project_root() / "bench" / "gpu_check.py"

QWEN_STYLE = {  # completions written the way Qwen2.5-Instruct writes: markdown headings, LaTeX, \boxed{}, a run-on next turn
    "headings and boxed": "#### Step 1: Count\nShe has $3 + 4 = 7$ apples.\n\n#### Step 2: Answer\nSo she has $\\boxed{7}$ apples.",
    "heading, no answer": "#### Step 2: Add them\nShe has $3 + 4 = 7$ apples.",
    "run-on turn": "She has $\\boxed{7}$ apples.<|im_end|>\n<|im_start|>user\nAnd now?<|im_end|>\n<|im_start|>assistant\n#### 8",
    "wrong boxed": "#### Step 1\n$3 + 4 = 8$.\n\nThe answer is $\\boxed{8}$.",
    "gsm8k marker": "She has 3 + 4 = 7 apples.\n#### 7",
}

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


CELL = """name: {name}
fixed: {{n_eval: 10, eval_max_new_tokens: 32, prompts_per_step: 4}}
axes:
  model: [tiny-s]
  arm: [n8-m8-mu2]
budgets: [{budget}]
seeds: [0]
{extra}"""

def grid(tmp_path, name, budget="6.0e10", extra="checkpoint: {steps: 4}\n"):
    p = tmp_path / f"{name}.yaml"
    p.write_text(CELL.format(name=name, budget=budget, extra=extra))
    return p
