"""The generic layer names what frameworks print at each place of a job's life, whatever the
framework: lines as their source prints them (the source is cited beside each shape in
rules/generic.yaml), read by the generic layer alone, no pack loaded."""

from __future__ import annotations

import functools

import pytest

from hangwatch.core.databases import compile_database
from hangwatch.core.prefilter import _entries
from hangwatch.core.rules import RuleSet
from hangwatch.core.translate import line_forms
from hangwatch.packs.load import load_builtin_packs, load_rule_set

NAMED = [
    # distributed init: TensorFlow, JAX, DeepSpeed, accelerate, c10d, torchelastic (NCCL's own
    # INFO lines are the torch-distributed pack's, loaded whatever the framework: a generic
    # word for them would make every one of thousands of start-up lines a phase START)
    ("INFO:tensorflow:Using MirroredStrategy with devices ('/job:localhost/replica:0/task:0/"
     "device:GPU:0',)", "distributed_init"),
    ("Enabled multi-worker collective ops with available devices: ['/job:worker/replica:0/"
     "task:0/device:CPU:0']", "distributed_init"),
    ("Connecting to JAX distributed service on 10.0.0.1:1234", "distributed_init"),
    ("[INFO] [comm.py:637:init_distributed] Initializing TorchBackend in DeepSpeed with "
     "backend nccl", "distributed_init"),
    ("Distributed environment: MULTI_GPU  Backend: nccl", "distributed_init"),
    ("[I socket.cpp:480] [c10d] The server socket has started to listen on [::]:29500.",
     "distributed_init"),
    ("INFO:torch.distributed.elastic.agent.server.api:[default] Starting worker group",
     "distributed_init"),
    # a model built or loaded
    ("Building model...", "model_load"),
    ("=> creating model 'resnet50'", "model_load"),
    ("Creating model: vit_base_patch16_224", "model_load"),
    ("loading weights file model.safetensors from cache at /root/.cache/hub", "model_load"),
    # the training loop
    ("***** Running training *****", "train_loop"),
    ("begin training epoch 1", "train_loop"),
    ("iter 100: loss 2.3405, time 52.31ms, mfu 31.20%", "train_loop"),
    ("Step 100 | loss: 2.31 | lr: 3e-4", "train_loop"),
    # evaluation, checkpoints, builds, data, resources, shutdown
    ("Start inference on 500 batches", "evaluation"),
    ("***** Running Evaluation *****", "evaluation"),
    ("Saving model checkpoint to output/checkpoint-500", "checkpoint_save"),
    ("Emitting ninja build file /root/.cache/torch_extensions/py310_cu118/fused_adam/"
     "build.ninja...", "build"),
    ("Map (num_proc=8):  45%|####5     | 4500/10000 [00:10<00:12, 450 examples/s]",
     "data_load"),
    ("srun: job 12345 queued and waiting for resources", "resource_wait"),
    ("0/4 nodes are available: 4 Insufficient nvidia.com/gpu.", "resource_wait"),
    ("Destroying process group", "shutdown"),
    # a training step counter, whatever follows its colon
    ("Step 12/100: loss=2.3140 lr=3.0e-04", "train_loop"),
    ("Step 12/100: train acc 0.91", "train_loop"),
]
NOT_THERE = [
    # Megatron's model-parallel groups are process groups, not a model being built
    ("> initializing model parallel with size 2", "model_load"),
    ("Distributed environment: NO", "distributed_init"),  # accelerate on one process
    ("step 10 | eval_loss: 2.31", "train_loop"),  # an evaluation's loss
    # a launcher's or provisioning script's own progress, not a training step
    ("Step 12/12: Running health checks", "train_loop"),
    ("Step 3/7: Provisioning instances", "train_loop"),
    ("Step 2/5: Installing...", "train_loop"),
]


@functools.cache
def generic() -> RuleSet:
    return RuleSet([p for p in load_builtin_packs() if p.name == "generic"])


def starts(line: str) -> list[str]:
    found = generic().match(line)
    return [r.id for r in found.phase_starts] if found is not None else []


@pytest.mark.parametrize(("line", "phase"), NAMED)
def test_the_generic_layer_names_the_place_frameworks_print(line: str, phase: str):
    assert f"generic:{phase}" in starts(line)


@pytest.mark.parametrize(("line", "phase"), NOT_THERE)
def test_lines_that_only_look_like_a_place_are_not_named_so(line: str, phase: str):
    assert f"generic:{phase}" not in starts(line)


def test_every_built_in_pattern_fits_hyperscan_in_both_forms():
    # A phase's alternatives are one pattern; past Hyperscan's length limit (16000 bytes,
    # a caseless letter counting several times in the loose form) the prefilter falls back
    # to trying each pattern alone and matching that one on every line: once it made the
    # engine fifteen times slower with every test still passing.
    pytest.importorskip("hyperscan")
    for form in ("strict", "loose"):
        patterns = {f"{rule.id} {kind}": getattr(line_forms(pattern), form)
                    for kind, rule, pattern in _entries(load_rule_set())}
        if compile_database(list(patterns.values())) is None:
            refused = [i for i, p in patterns.items() if compile_database([p]) is None]
            pytest.fail(f"Hyperscan refuses the {form} form of {refused}")
