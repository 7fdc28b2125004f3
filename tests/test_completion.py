"""`gpudoctor completion bash|zsh|fish`: generated from the parser, and completed by the real shells: a command, an
option and an option's choices (every --format, sarif included) come back as the parser has them today."""

import shutil
import subprocess

import pytest
from conftest import cli_in_process, required_or_skip

from gpudoctor.render import NAMES


def script(shell, tmp_path, name):
    result = cli_in_process("completion", shell)
    assert result.returncode == 0, result.stderr
    path = tmp_path / name
    path.write_text(result.stdout)
    return path


def need(shell):
    if shutil.which(shell) is None:
        required_or_skip("GPUDOCTOR_REQUIRE_TOOLS", f"{shell} not installed (apt-get install {shell})")


def bash_complete(path, words):
    """What bash's programmable completion offers for the last of `words`, through the script's function."""
    line = " ".join(words)
    code = (f'source {path}; COMP_WORDS=({" ".join(repr(word) for word in words)}); COMP_CWORD={len(words) - 1}; '
            f'COMP_LINE={line!r}; COMP_POINT=${{#COMP_LINE}}; '
            f'_shtab_gpudoctor gpudoctor {words[-1]!r} {words[-2]!r}; printf "%s\\n" "${{COMPREPLY[@]}}"')
    done = subprocess.run(["bash", "-c", code], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return set(done.stdout.split())


def test_bash_completes_commands_options_and_formats(tmp_path):
    need("bash")
    path = script("bash", tmp_path, "gpudoctor.bash")
    assert bash_complete(path, ["gpudoctor", "li"]) == {"lint"}
    assert "--skip-unknown" in bash_complete(path, ["gpudoctor", "lint", "--sk"])
    assert bash_complete(path, ["gpudoctor", "lint", "--format", ""]) == set(NAMES)


def test_fish_completes_commands_options_and_formats(tmp_path):
    need("fish")
    path = script("fish", tmp_path, "gpudoctor.fish")

    def complete(line):
        done = subprocess.run(["fish", "--no-config", "-c", f"source {path}; complete -C {line!r}"],
                              capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        return {row.split("\t")[0] for row in done.stdout.splitlines()}

    assert {"bench", "check", "lint", "completion"} <= complete("gpudoctor ")
    assert complete("gpudoctor bench ") >= {"nccl", "train", "compare"}
    assert complete("gpudoctor lint --format ") == set(NAMES)
    assert "--plot" in complete("gpudoctor bench compare --pl")


def test_zsh_loads_the_completion_function(tmp_path):
    need("zsh")
    folder = tmp_path / "functions"
    folder.mkdir()
    script("zsh", folder, "_gpudoctor")
    code = (f"fpath=({folder} $fpath); autoload -Uz compinit; compinit -u -d {tmp_path}/zcompdump; "
            "print -r -- $_comps[gpudoctor]")
    done = subprocess.run(["zsh", "-f", "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "_gpudoctor", done.stderr
    assert subprocess.run(["zsh", "-n", str(folder / "_gpudoctor")]).returncode == 0


@pytest.mark.parametrize("shell", ["tcsh", ""])
def test_other_shells_are_a_usage_error(shell):
    result = cli_in_process("completion", shell)
    assert result.returncode == 2 and "bash" in result.stderr
