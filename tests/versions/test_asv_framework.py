"""tools/asv_framework.py: the asv configuration that runs gradmem's benchmarks over a
framework's own commits (its `repo` the framework's checkout, gradmem a fixed wheel
installed with --no-deps at every commit, the sweep narrowed to that framework). The
real run (asv find over HIPS autograd's history) is in docs/asv.md; this checks what
is written and the refusals."""

import json
import os
import subprocess
import sys

import pytest

PROJECT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(PROJECT, "tools", "asv_framework.py")


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    repo = tmp_path_factory.mktemp("framework")
    subprocess.run(["git", "init", "-q", "-b", "trunk", str(repo)], check=True)
    return str(repo)


def tool(*args):
    return subprocess.run([sys.executable, TOOL, *args], cwd=PROJECT, capture_output=True, text=True, timeout=600)


def test_writes_a_config_on_the_frameworks_history(checkout, tmp_path):
    done = tool("--framework", "autograd", "--repo", checkout, "--dir", str(tmp_path / "asv"),
                "--workloads", "rnn_fanout,chained_dot", "--size", "tiny")
    assert done.returncode == 0, done.stderr
    config = json.loads((tmp_path / "asv" / "asv.conf.json").read_text())
    assert config["repo"] == checkout and config["branches"] == ["trunk"] and config["project"] == "autograd"
    assert config["benchmark_dir"] == os.path.join(PROJECT, "benchmarks")  # gradmem's own benchmarks
    wheel = config["install_command"][1].split()[-2]
    assert os.path.basename(wheel).startswith("gradmem-") and os.path.exists(wheel)
    assert config["install_command"][1].endswith("--no-deps")  # a fixed dependency, nothing re-resolved
    assert config["matrix"]["req"]["numpy"] == [__import__("numpy").__version__]
    assert config["matrix"]["req"]["scipy"] == [__import__("scipy").__version__]  # the autograd adapter's
    assert config["matrix"]["env_nobuild"]["GRADMEM_ASV_FRAMEWORKS"] == ["autograd"]
    assert config["matrix"]["env_nobuild"]["GRADMEM_ASV_WORKLOADS"] == ["rnn_fanout,chained_dot"]
    assert config["matrix"]["env_nobuild"]["GRADMEM_ASV_SIZE"] == ["tiny"]
    for key in ("env_dir", "results_dir", "html_dir"):
        assert config[key].startswith(str(tmp_path / "asv"))


@pytest.mark.parametrize(
    "args, says",
    [
        (["--framework", "reference"], "reference is gradmem's own engine"),
        (["--framework", "jaxx"], "unknown framework 'jaxx'"),
        (["--framework", "autograd", "--workloads", "lstm"], "unknown workload 'lstm'"),
    ],
)
def test_bad_arguments_exit_2(checkout, tmp_path, args, says):
    done = tool(*args, "--repo", checkout, "--dir", str(tmp_path / "asv"))
    assert done.returncode == 2 and says in done.stderr


def test_not_a_checkout_exits_2(tmp_path):
    done = tool("--framework", "autograd", "--repo", str(tmp_path), "--dir", str(tmp_path / "asv"))
    assert done.returncode == 2 and "not a git checkout" in done.stderr
