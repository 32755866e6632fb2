"""Secrets never leave the machine through a report."""

from __future__ import annotations

import pytest

from hangwatch.escape.redact import (
    redact_argv,
    redact_env_value,
    redact_text,
    redact_tree,
    redact_url,
)


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


# Real shapes of each kind of token (made-up values of the right length and alphabet).
TOKENS = {
    "aws access key id": "AKIAIOSFODNN7EXAMPLE",
    "aws temporary key id": "ASIAY34FZKBOKMUTVV7A",
    "hugging face": "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",
    "hugging face org": "api_org_jKzQpWnXcVbNmLkJhGfDsAqWeRtYuIoP",
    "github classic": "ghp_1a2B3c4D5e6F7g8H9i0JkLmNoPqRsTuVwXyZ",
    "github fine-grained": "github_pat_11ABCDEFG0abcdefghijkl_" + "a1B2c3D4e5F6g7H8i9J0" * 3,
    "github app": "ghs_16C7e42F292c6912E7710c838347Ae178B4a",
    "openai": "sk-" + "Ab3dEf6hIj9lMn2pQr5tUv8xYz1B4cD7fG0iJk3m",
    "openai project": "sk-proj-" + "Ab3dEf6hIj9lMn2pQr5t_Uv8xYz1B4cD7fG0iJk3m-Zx9",
    "anthropic": "sk-ant-api03-" + "Ab3dEf6hIj9lMn2pQr5tUv8xYz1B4cD7fG0iJk3m",
    "slack bot": "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "slack app": "xapp-1-A0123456789-1234567890123-abcdef0123456789abcdef",
    "google": "AIzaSyA-1234567890abcdefghijklmnopqrstu",
    "gitlab": "glpat-xY9zW8vU7tS6rQ5pO4nM",
    "w&b local server": "local-" + "0123456789abcdef" * 2 + "01234567",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
           "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
}
WANDB_KEY = "0123456789abcdef0123456789abcdef01234567"  # a bare 40-hex key, like a git sha


@pytest.mark.parametrize("token", TOKENS.values(), ids=TOKENS.keys())
@pytest.mark.parametrize("template", [
    "{t}",
    "[rank0] using token {t} for the upload",
    "curl -H 'Authorization: Bearer {t}' https://api.example",
    "python train.py --api-key {t} --lr 3e-4",
    "--token={t}",
    "https://user:{t}@host.example/repo.git",
])
def test_real_token_formats_are_redacted_anywhere(token, template):
    text = template.format(t=token)
    out = redact_text(text)
    assert token not in out and "<redacted>" in out


@pytest.mark.parametrize(("text", "expected"), [
    ("curl -H 'Authorization: token abc123secret'",
     "curl -H 'Authorization: token <redacted>'"),
    ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "Authorization: Basic <redacted>"),
    ("Cookie: session=abc; csrftoken=def", "Cookie: <redacted>"),
    (f"wandb login {WANDB_KEY}", "wandb login <redacted>"),
    (f"wandb login --relogin {WANDB_KEY}", "wandb login --relogin <redacted>"),
    (f"machine api.wandb.ai login user password {WANDB_KEY}",
     "machine api.wandb.ai login user password <redacted>"),
    (f"WANDB_API_KEY={WANDB_KEY}", "WANDB_API_KEY=<redacted>"),
    ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
     "aws_secret_access_key = <redacted>"),
    ("https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXXXXXXXXXX failed",
     "https://hooks.slack.com/services/<redacted> failed"),
    ("post https://discord.com/api/webhooks/123/abcDEF", "post https://discord.com/api/webhooks/<redacted>"),
    ("GET https://b.s3.amazonaws.com/k?X-Amz-Signature=abc123&X-Amz-Expires=60",
     "GET https://b.s3.amazonaws.com/k?X-Amz-Signature=<redacted>&X-Amz-Expires=60"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----",
     "-----BEGIN PRIVATE KEY----- <redacted>"),
    # Left alone: what a person debugging needs, and words that only look like secrets.
    (f"commit {WANDB_KEY}", f"commit {WANDB_KEY}"),
    ("from huggingface_hub import hf_hub_download; hf_transfer on",
     "from huggingface_hub import hf_hub_download; hf_transfer on"),
    ("NCCL_IB_PKEY=0 MASTER_ADDR=10.0.0.1 MASTER_PORT=29500", "NCCL_IB_PKEY=0 MASTER_ADDR="
     "10.0.0.1 MASTER_PORT=29500"),
    ("tokenizer: loaded, max_new_tokens=512", "tokenizer: loaded, max_new_tokens=512"),
    ("python train.py --tokenizer gpt2", "python train.py --tokenizer gpt2"),
])
def test_redaction_beyond_the_environment(text, expected):
    assert redact_text(text) == expected


def test_command_lines_hide_secret_arguments():
    argv = ["python", "train.py", "--api-key", TOKENS["openai"], f"--token={WANDB_KEY}",
            "-H", "Authorization: Bearer abcdefghijklmnop", "https://u:pw@host/x"]
    assert redact_argv(argv) == [
        "python", "train.py", "--api-key", "<redacted>", "--token=<redacted>", "-H",
        "Authorization: Bearer <redacted>", "https://<redacted>@host/x"]
    assert redact_argv(["wandb", "login", WANDB_KEY]) == ["wandb", "login", "<redacted>"]


@pytest.mark.parametrize("name", [
    "NCCL_DEBUG", "NCCL_IB_PKEY", "NCCL_SOCKET_IFNAME", "NCCL_ASYNC_ERROR_HANDLING",
    "TORCH_NCCL_BLOCKING_WAIT", "MASTER_ADDR", "MASTER_PORT", "GLOO_SOCKET_IFNAME"])
def test_distributed_variables_stay_readable(name):
    assert redact_env_value(name, "eth0") == "eth0"


@pytest.mark.parametrize("name", ["HF_TOKEN", "WANDB_API_KEY", "AWS_SECRET_ACCESS_KEY",
                                  "AWS_SESSION_TOKEN", "GITHUB_TOKEN", "OPENAI_API_KEY",
                                  "SLACK_WEBHOOK_URL_SECRET", "HANGWATCH_WEBHOOK_AUTH"])
def test_secret_variables_are_hidden_by_name(name):
    assert redact_env_value(name, "value") == "<redacted>"


@pytest.mark.parametrize(("url", "shown"), [
    ("https://hooks.slack.com/services/T000/B000/XXXX", "https://hooks.slack.com/<redacted>"),
    ("https://user:pw@alerts.example:9093/api/v2/alerts?token=x",
     "https://alerts.example:9093/<redacted>"),
    ("http://127.0.0.1:8080/", "http://127.0.0.1:8080"),
    ("http://[::1]:9093/x", "http://[::1]:9093/<redacted>"),
    ("not a url", "<redacted>"),
])
def test_redact_url_keeps_only_where_it_goes(url, shown):
    assert redact_url(url) == shown
