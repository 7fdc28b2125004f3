"""Jobs started by sbatch and shell scripts: each command that runs a Python script, with the script's `#SBATCH`
resources. The shell parser's tokenizer and walker do the quoting and variables (and, in the same walk, record
what reaches the environment and the `#SBATCH` directives); values they cannot know stay unknown."""

from __future__ import annotations

import os
import re
from typing import List, Optional, Tuple

from gpudoctor.readers import commands
from gpudoctor.readers.env import CVD, ReadResult
from gpudoctor.readers.launch import RANK_ENV, finish_job
from gpudoctor.readers.shell import parser as reader
from gpudoctor.readers.shell import slurm

SHELLS = {"bash", "sh", "zsh", "dash", "ksh"}
FOLDER_COMMANDS = ("cd", "pushd", "popd")
JOB_FOLDER = re.compile(r"""["']*(\$\{?(SLURM_SUBMIT_DIR|PBS_O_WORKDIR|PWD)\}?"""  # the folder a job is submitted from
                        r"""|\$\(\s*dirname\s+["']*\$\{?(0|BASH_SOURCE(\[0\])?)\}?["']*\s*\))["']*""")  # or its own



class LaunchWalker(reader.Walker):
    """The env walker, also recording the commands that start Python scripts."""

    def __init__(self, path: str, lines: List[str], line_offset: int = 0, scope: str = "", context: str = ""):
        super().__init__(path, ReadResult(), scope or path, context, line_offset)
        self.lines = lines
        self.found: List[dict] = []
        self.prefix_cvd: Optional[tuple] = None
        self.batch = slurm.Directives()  # a script embedded in another file (line_offset) has none
        self.folders: List[Optional[str]] = [""]  # the working folder relative to the script's (None: not known)

    def started(self, token):
        super().started(token)
        if not self.offset:
            self.batch.command(token.line, self.lines[token.line - 1] if token.line <= len(self.lines) else "")

    def comment(self, token, own_line):
        super().comment(token, own_line)
        if not self.offset:
            self.batch.comment(token.text, token.line, own_line)

    def sbatch(self, words, line):
        super().sbatch(words, line)
        if not self.offset:
            self.batch.read(words, line)

    def add(self, name, word, line, conditional, how="", unset=False, defaults=(), scope=None):
        if name == CVD and how.startswith("for the command") and word is not None:
            value, reason = self.resolve(word)
            self.prefix_cvd = (value if reason is None else None, self.line(line), word.text)
        super().add(name, word, line, conditional, how, unset, defaults, scope)

    def builtin(self, words, conditional):
        if words[0].text in FOLDER_COMMANDS:
            self.change_folder(words[0].text, words[1:])
            return
        self.launch(words, conditional, [])
        self.prefix_cvd = None
        super().builtin(words, conditional)

    def launch(self, words, conditional, outer: List[dict], depth: int = 0) -> None:
        resolved = [self.said(word.text, *self.resolve_defaults(word)) for word in words]
        line = self.line(words[0])
        parsed = commands.parse([(value, reason is None, self.line(word))
                                 for word in words for value, reason in self.fields(word)], line)
        if parsed is None:
            self.inner_script(words, resolved, conditional, outer, line, depth)
            return
        self.found.append({"line": line, "conditional": conditional, "launchers": outer + parsed["launchers"],
                           "script": self.in_folder(parsed["script"]), "cvd": self.visible_devices(),
                           "command": " ".join(word.text for word in words)[:200]})

    def change_folder(self, command: str, args) -> None:
        """`cd DIR`, `pushd DIR`, `popd`: where the commands after it run, relative to the script's folder (the
        folder a job is submitted from: `cd "$SLURM_SUBMIT_DIR"`, `cd "$(dirname "$0")"`); None once unknown."""
        operands = [word for word in args if not word.text.startswith("-") or word.text == "-"]
        if command == "popd":
            if len(self.folders) > 1:
                self.folders.pop()
            return
        value, reason = self.resolve(operands[0]) if operands else ("", None)
        if reason is not None:
            start = JOB_FOLDER.match(operands[0].text)
            rest = operands[0].text[start.end():].strip("\"'/") if start else "$"
            folder = None if "$" in rest or "`" in rest else os.path.normpath(rest or ".").replace("\\", "/")
            folder = "" if folder == "." else folder
        elif value in ("", "~", "-") or value.startswith(("/", "~")):
            folder = None if value else ""  # home or elsewhere on the machine: not the job folder
        else:
            current = self.folders[-1]
            folder = None if current is None else os.path.normpath(os.path.join(current, value)).replace("\\", "/")
            folder = "" if folder == "." else folder
        if command == "pushd":
            self.folders.append(folder)
        else:
            self.folders[-1] = folder

    def in_folder(self, script: dict) -> dict:
        """The script's path as written relative to the folder the command runs in (`cd src && python train.py`
        starts src/train.py); where that folder is not known, `folder_unknown` says so."""
        path, folder = script.get("path"), self.folders[-1]
        if not path or path.startswith(("/", "~", "$")) or folder == "":
            return script
        if folder is None:
            return {**script, "folder_unknown": True}
        return {**script, "path": f"{folder}/{path}"}

    def fields(self, word, depth: int = 0) -> List[Tuple[str, Optional[str]]]:
        """The words one command word becomes, each (value, why it is unknown): `$CMD` whose value is
        `accelerate launch --num_processes $((N * 4)) train.py` splits as the shell splits an unquoted expansion,
        the words it spells out known and the ones that depend on the run unknown (`--num_processes` known, its
        count not). A word with no expansion of a variable the script assigns stays one word."""
        whole = [self.said(word.text, *self.resolve_defaults(word))]
        pieces = self.expand(word.parts, depth)
        if not any(split for _, _, split in pieces):
            return whole
        fields: List[List[Tuple[str, Optional[str]]]] = [[]]
        for text, reason, split in pieces:
            chunks = re.split(r"(\s+)", text) if split and reason is None else [text]
            for chunk in chunks:
                if chunk and chunk.isspace():
                    fields.append([])
                elif chunk:
                    fields[-1].append((chunk, reason))
        found = [("".join(text for text, _ in field), next((r for _, r in field if r), None))
                 for field in fields if field]
        if len(found) == 1 and found[0][1] and not commands.gpu_count(found[0][0].split("=", 1)[-1]):
            return whole  # unknown either way: said as written
        return found

    def expand(self, parts, depth: int) -> List[Tuple[str, Optional[str], bool]]:
        """(text, why unknown, came from an expansion) for each part: a variable assigned in the script from other
        expansions is replaced by its own parts (a few levels deep), the rest resolved as `resolve_defaults` does."""
        out: List[Tuple[str, Optional[str], bool]] = []
        for kind, text in parts:
            match = reader.SIMPLE_VAR.match(text) if kind == "exp" else None
            var = self.vars.get(match.group(1) or match.group(2)) if match and not match.group(3) else None
            if var is not None and not var.literal and not var.conditional and var.word is not None and depth < 4:
                out += [(t, r, True) for t, r, _ in self.expand(var.word.parts, depth + 1)]
                continue
            out.append(self.said(text, *self.resolve_defaults(reader.Word([(kind, text)], 0))) + (kind == "exp",))
        return out

    @staticmethod
    def said(text: str, value: str, reason: Optional[str], defaults: list) -> Tuple[str, Optional[str]]:
        """(value, why unknown); `${GPUS:-8}`, 8 only if the caller does not set GPUS, is unknown, said as written."""
        return (text, "a default the caller may override") if defaults and reason is None else (value, reason)

    def inner_script(self, words, resolved, conditional, outer, line, depth) -> None:
        """A shell started by the command, under the launchers before it: `srun bash -c "torchrun … train.py"`
        (`sh -xeuc '…'` too) is read in place; `srun bash run.sh` or `srun ./run.sh` becomes a job whose script is
        that shell script, whose own jobs readers/follow.py reads where the file is there."""
        index = next((index for index, (value, reason) in enumerate(resolved) if reason is None
                      and (value.rsplit("/", 1)[-1] in SHELLS or value.endswith(".sh"))), None)
        if index is None or depth >= 3:
            return
        shell = resolved[index][0].rsplit("/", 1)[-1] in SHELLS
        head = commands.parse([(v, r is None) for v, r in resolved[:index] if v not in ("$@", "$*")]
                              + [("python", True), ("x", True)], line)
        if head is None and index:
            return  # `echo run.sh`, `cp a.sh b.sh`: not a launcher before it
        launchers = outer + (head["launchers"][:-1] if head else [])
        rest, command_string = _shell_operand(resolved, index + 1) if shell else (index, False)
        if command_string:
            if rest < len(words):
                self.command_string(words[rest], conditional, launchers, line, depth)
        elif rest < len(resolved) and resolved[rest][1] is None and resolved[rest][0].endswith(".sh"):
            self.found.append({"line": line, "conditional": conditional, "launchers": launchers,
                               "script": self.in_folder({"path": resolved[rest][0], "line": line, "shell": True}),
                               "cvd": self.visible_devices(),
                               "command": " ".join(word.text for word in words)[:200]})

    def command_string(self, word, conditional, launchers, line, depth) -> None:
        """The script of `bash -c WORD`, its variables expanded where the script knows them."""
        tokens = reader.Tokenizer("".join(text for text, _, _ in self.expand(word.parts, 0))).run()
        inner = [t.word for t in tokens if t.kind == "word"]
        for word in inner:
            word.line = line - self.offset
        if inner:
            self.launch(inner, conditional, launchers, depth + 1)

    def visible_devices(self) -> Optional[dict]:
        if self.prefix_cvd is not None:
            value, line, text = self.prefix_cvd
        else:
            var = self.vars.get(CVD)
            if var is None or not var.exported:
                return None
            value, line, text = (var.value if var.literal else None), self.line(var.line), var.value
        if value is None:
            return {"count": None, "line": line, "what": f"{CVD}={text}", "unresolved": text}
        ids = [item for item in value.split(",") if item.strip()]
        return {"count": len(ids), "line": line, "what": f"{CVD}={value}"}

    def env_sets(self) -> List[str]:
        return [name for name in RANK_ENV if name in self.vars and self.vars[name].exported]


def read_script(text: str, path: str, line_offset: int = 0, scope: str = "", context: str = "") \
        -> Tuple[ReadResult, List[dict]]:
    """The env and the jobs of one shell/sbatch script, from one walk; or of a `bash -c` script embedded at
    `line_offset` in another file (its assignments in `scope`, said to be in `context`)."""
    text = text.lstrip("\ufeff")
    tokenizer = reader.Tokenizer(text)
    tokens = tokenizer.run()
    walker = LaunchWalker(path, text.split("\n"), line_offset, scope, context)
    for message, line in tokenizer.errors:
        walker.result.error(message, line + line_offset)
    return walker.result, _jobs(walker, tokens, path, context)


def _jobs(walker: LaunchWalker, tokens, path: str, context: str = "") -> List[dict]:
    from gpudoctor.knowledge import table

    walker.tp = table("nccl_env").get("tensor_parallel", {})
    walker.walk(tokens)
    batch, ignored = walker.batch.options, walker.batch.ignored
    found = []
    for command in walker.found:
        launchers = [dict(entry) for entry in command["launchers"]]
        srun = next((entry for entry in launchers if entry["name"] == "srun"), None)
        tasks, tasks_what = slurm.tasks_per_node(srun["options"] if srun else {}, batch)
        if srun is not None:
            srun["ranks_per_node"], srun["source"] = tasks, tasks_what
        gpus = command["cvd"] or slurm.gpus_per_node(srun["options"] if srun else {}, batch,
                                                      tasks if srun else 1, srun["line"] if srun else None) \
            or slurm.other_gpus(walker.batch.other)
        job = {"path": path, "line": command["line"], "kind": "sbatch" if batch else "shell",
               "context": context, "conditional": command["conditional"], "command": command["command"],
               "launchers": launchers, "gpus": gpus, "script": command["script"], "env_sets": walker.env_sets()}
        if gpus is not None:
            gpus.setdefault("path", path)
        nodes = slurm.nodes(batch)
        if nodes is not None:
            job["nodes"] = nodes
        if ignored:
            job["ignored_directives"] = ignored
        found.append(finish_job(job))
    return found


def _shell_operand(resolved, index: int) -> Tuple[int, bool]:
    """Where a shell's operand is after its options (`bash -xe run.sh`, `sh --login -c "…"`), and whether `-c`
    makes it a command string."""
    while index < len(resolved) and re.fullmatch(r"-[a-z]+|--login|--norc", resolved[index][0]):
        if "c" in resolved[index][0].lstrip("-") and not resolved[index][0].startswith("--"):
            return index + 1, True
        index += 1
    return index, False
