"""Secrets never leave the machine through a report."""

from __future__ import annotations

import pytest

from hangwatch.escape.redact import redact_argv, redact_env_value, redact_text, redact_tree


@pytest.mark.parametrize(("text", "expected"), [
    ("https://user:password@host/x", "https://<redacted>@host/x"),
    ("git clone https://ghp_abcdefghijklmnopqrstuvwx@github.com/o/r",
     "git clone https://<redacted>@github.com/o/r"),
    ("HF_TOKEN=hf_secret123 python train.py", "HF_TOKEN=<redacted> python train.py"),
    ('{"api_key": "xyz123"}', '{"api_key": "<redacted>"}'),
    ("python train.py --hf-token abc --lr 1", "python train.py --hf-token <redacted> --lr 1"),
    ("Authorization: Bearer abcdefghijkl", "Authorization: Bearer <redacted>"),
    ("loaded hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567 from cache",
     "loaded <redacted> from cache"),
    # Not secrets: numbers and plain words about tokens stay readable.
    ("max_tokens=4096 num_tokens: 12", "max_tokens=4096 num_tokens: 12"),
    ("token limit exceeded", "token limit exceeded"),
])
def test_text_redaction(text, expected):
    assert redact_text(text) == expected


def test_env_values_are_hidden_by_name_or_by_shape():
    assert redact_env_value("HF_TOKEN", "hf_secret123") == "<redacted>"
    assert redact_env_value("WANDB_API_KEY", "0123") == "<redacted>"
    assert redact_env_value("HF_ENDPOINT", "https://u:p@hub") == "https://<redacted>@hub"
    assert redact_env_value("NCCL_DEBUG", "INFO") == "INFO"


def test_argv_hides_the_value_after_a_secret_flag():
    assert redact_argv(["python", "--hf_token", "abc", "--wandb-api-key=zzz", "--lr", "1"]) == [
        "python", "--hf_token", "<redacted>", "--wandb-api-key=<redacted>", "--lr", "1"]


def test_tree_redacts_every_string_inside():
    tree = {"a": ["x", {"b": "password=hunter2"}], "n": 3, "t": ("https://a:b@h",)}
    assert redact_tree(tree) == {"a": ["x", {"b": "password=<redacted>"}], "n": 3,
                                 "t": ["https://<redacted>@h"]}
