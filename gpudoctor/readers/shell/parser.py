"""Shell and batch scripts (bash, sbatch, PBS/LSF wrappers): the variables the job's processes get.

Read, never run: a small tokenizer that knows bash's quoting (single, double, `$'…'`), line continuations,
comments, here-documents (their bodies are skipped), `$(…)`, backticks and `${…}` (kept verbatim), and a command
walker that knows what sets the environment:
  `export NAME=value` / `declare -x` / `typeset -x`, `export NAME` of a variable assigned earlier, `set -a`,
  `NAME=value cmd` prefixes, `env NAME=value cmd`, `unset NAME`,
  `#SBATCH --export=ALL,NAME=value` (only in the leading comment block, as sbatch does), `srun/sbatch --export=`,
  `mpirun -x NAME=value`, `mpiexec -genv NAME value`, `docker|podman run -e/--env`, `apptainer|singularity --env`,
  `SINGULARITYENV_NAME=` / `APPTAINERENV_NAME=`, `enroot start --env`.
An assignment inside if/case/loops/functions or after `&&`/`||` is marked conditional. `$VAR` is resolved from a
literal, unconditional assignment earlier in the same script; anything else that depends on the run is unknown.
Megatron/NeMo tensor-parallel flags on command lines become `requests.tensor_parallel` evidence (GD408).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from gpudoctor.readers.commands import arithmetic
from gpudoctor.readers.env import Assignment, ReadResult, is_env_name

OPERATORS = sorted([";;&", ";;", ";&", "&&", "||", "|&", "<<<", "<<-", "<<", ">>", "&>>", "&>", "<&", ">&", ">|",
                    "<>", ";", "&", "|", "(", ")", "<", ">"], key=len, reverse=True)
REDIRECTIONS = {"<", ">", ">>", "&>", "&>>", "<&", ">&", ">|", "<>", "<<<"}
SLURM = {"srun", "sbatch", "salloc"}
# reserved words that start a command: (the block it opens, the block it closes, whether the rest is left unread)
RESERVED = {"if": ("if", "", False), "while": ("loop", "", False), "until": ("loop", "", False),
            **dict.fromkeys(("then", "else", "elif", "do", "!", "time"), ("", "", False)),
            "for": ("loop", "", True), "select": ("loop", "", True), "case": ("case", "", True), "{": ("{", "", False),
            "fi": ("", "if", False), "done": ("", "loop", False), "esac": ("", "case", False), "}": ("", "{", False),
            "function": ("", "", True)}
# the commands that change the environment, and the Walker method that reads each
BUILTINS = {**dict.fromkeys(("export", "declare", "typeset", "local", "readonly"), "declare"), "unset": "unset",
            "set": "set_options", "env": "env_command"}
MPI = {"mpirun", "mpiexec", "orterun", "oshrun", "mpiexec.hydra", "prun", "aprun"}
CONTAINERS = {"docker", "podman", "nvidia-docker", "enroot", "apptainer", "singularity"}
# which family of environment options each launcher takes (Walker.<family>_option reads them)
LAUNCHER_FAMILIES = {**dict.fromkeys(SLURM, "slurm"), **dict.fromkeys(MPI, "mpi"),
                     **dict.fromkeys(CONTAINERS, "container")}
CONTAINER_ENV_PREFIXES = ("SINGULARITYENV_", "APPTAINERENV_")
SBATCH = re.compile(r"^SBATCH\s+(.*)$")  # the text of a `#SBATCH` comment
PLAIN_RUN = re.compile(r"[^ \t\r\n;&|()<>\\'\"$`~]+")  # unquoted characters that mean nothing to the shell
QUOTED_RUN = re.compile(r"[^\"\\$`\n]+")  # characters inside double quotes that mean nothing to the shell
SIMPLE_VAR = re.compile(r"^\$(?:([A-Za-z_][A-Za-z0-9_]*)|\{([A-Za-z_][A-Za-z0-9_]*)(?:\[[@*]\])?(?:(:?-)([^}]*))?\})$")


def runtime_variable(name: str) -> bool:
    """Set by the scheduler or launcher in every job (rules/launch.toml `runtime_variables`)."""
    from gpudoctor.knowledge import table

    for pattern in table("launch").get("runtime_variables", []):
        if name == pattern or pattern.endswith("*") and name.startswith(pattern[:-1]):
            return True
    return False


@dataclass
class Word:
    parts: List[Tuple[str, str]] = field(default_factory=list)  # ("lit", text) | ("exp", raw text)
    line: int = 1

    @property
    def text(self) -> str:
        return "".join(text for _, text in self.parts)

    @property
    def dynamic(self) -> bool:
        return any(kind == "exp" for kind, _ in self.parts)

    def add(self, kind: str, text: str) -> None:
        if kind == "lit" and self.parts and self.parts[-1][0] == "lit":
            self.parts[-1] = ("lit", self.parts[-1][1] + text)
        elif text:
            self.parts.append((kind, text))

    def split_assignment(self) -> Optional[Tuple[str, Word]]:
        """(NAME, value word) when this word is `NAME=value` with an unquoted, literal NAME; `NAME+=more` appends, as
        bash does: its value is `${NAME}more`."""
        if not self.parts or self.parts[0][0] != "lit":
            return None
        match = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)(\+?)=", self.parts[0][1])
        if not match:
            return None
        appended = [("exp", f"${{{match.group(1)}}}")] if match.group(2) else []
        rest = Word(appended + [("lit", self.parts[0][1][match.end():])] + self.parts[1:], self.line)
        rest.parts = [part for part in rest.parts if part[1]]
        return match.group(1), rest


class _Parts:
    """A word's parts as the tokenizer reads them: literal pieces are joined once, when an expansion or the end
    of the word comes, so a long word is read in linear time."""

    def __init__(self, line: int):
        self.word = Word(line=line)
        self.pending: List[str] = []

    def lit(self, text: str) -> None:
        self.pending.append(text)

    def exp(self, text: str) -> None:
        self._flush()
        self.word.add("exp", text)

    def done(self) -> Word:
        self._flush()
        return self.word

    def _flush(self) -> None:
        if self.pending:
            self.word.add("lit", "".join(self.pending))
            self.pending = []


@dataclass
class Token:
    kind: str  # word | op | newline | comment
    line: int
    text: str = ""
    word: Optional[Word] = None


class Tokenizer:
    def __init__(self, text: str):
        self.text = text
        self.i = 0
        self.line = 1
        self.tokens: List[Token] = []
        self.heredocs: List[Tuple[str, bool]] = []
        self.errors: List[Tuple[str, int]] = []
        self.expect_delimiter: Optional[bool] = None  # strip-tabs flag while waiting for a heredoc delimiter
        self._start = 0  # where the word being read starts
        self._first_equals: Optional[int] = None  # where its first `=` is, once a `~` asks

    def run(self) -> List[Token]:
        text, n = self.text, len(self.text)
        while self.i < n:
            c = text[self.i]
            if c == "\\" and text.startswith("\\\n", self.i):
                self.i += 2
                self.line += 1
            elif c == "\\" and text.startswith("\\\r\n", self.i):
                self.i += 3
                self.line += 1
            elif c in " \t\r\f\v":
                self.i += 1
            elif c == "\n":
                self.tokens.append(Token("newline", self.line, "\n"))
                self.i += 1
                self.line += 1
                self._heredoc_bodies()
            elif c == "#":
                end = text.find("\n", self.i)
                end = n if end < 0 else end
                self.tokens.append(Token("comment", self.line, text[self.i + 1:end]))
                self.i = end
            elif c in ";&|()<>":
                op = next(op for op in OPERATORS if text.startswith(op, self.i))
                self.tokens.append(Token("op", self.line, op))
                self.i += len(op)
                if op in ("<<", "<<-"):
                    self.expect_delimiter = op == "<<-"
            else:
                word = self._word()
                if self.expect_delimiter is not None:
                    self.heredocs.append((re.sub(r"[\"'\\]", "", word.text), self.expect_delimiter))
                    self.expect_delimiter = None
                self.tokens.append(Token("word", word.line, word.text, word))
        return self.tokens

    def _heredoc_bodies(self) -> None:
        while self.heredocs:
            delimiter, strip_tabs = self.heredocs.pop(0)
            while self.i < len(self.text):
                end = self.text.find("\n", self.i)
                end = len(self.text) if end < 0 else end
                body_line = self.text[self.i:end].rstrip("\r")
                self.i = min(end + 1, len(self.text))
                self.line += 1
                if (body_line.lstrip("\t") if strip_tabs else body_line) == delimiter:
                    break

    def _count(self, chunk: str) -> None:
        self.line += chunk.count("\n")

    def _word(self) -> Word:
        text, n = self.text, len(self.text)
        word = _Parts(self.line)
        self._start, self._first_equals = self.i, None
        while self.i < n and text[self.i] not in " \t\r\n;&|()<>":
            run = PLAIN_RUN.match(text, self.i)
            if run:
                word.lit(run.group())
                self.i = run.end()
            else:  # one of the characters PLAIN_RUN leaves out
                WORD_PARTS[text[self.i]](self, word)
        return word.done()

    def _escaped(self, word: _Parts) -> None:
        """`\\x` is x; a backslash before the line's end joins the next line."""
        text = self.text
        if text.startswith("\\\n", self.i) or text.startswith("\\\r\n", self.i):
            self.i += 2 if text[self.i + 1] == "\n" else 3
            self.line += 1
        else:
            word.lit(text[self.i + 1:self.i + 2])
            self.i += 2

    def _single_quoted(self, word: _Parts) -> None:
        end = self.text.find("'", self.i + 1)
        if end < 0:
            self.errors.append(("unterminated ' quote: bash stops with \"unexpected EOF while looking for "
                                "matching\"", self.line))
            end = len(self.text)
        chunk = self.text[self.i + 1:end]
        word.lit(chunk)
        self._count(chunk)
        self.i = end + 1

    def _dollar(self, word: _Parts) -> None:
        """`$'…'` (ANSI-C quoting), `$"…"` (a double-quoted string), else an expansion."""
        if self.text.startswith("$'", self.i):
            end = self._ansi_end(self.i + 2)
            chunk = self.text[self.i + 2:end]
            try:
                word.lit(chunk.encode("latin-1", "backslashreplace").decode("unicode-escape"))
            except UnicodeDecodeError:
                word.lit(chunk)
            self._count(chunk)
            self.i = end + 1
        elif self.text.startswith('$"', self.i):
            self.i += 1
            self._double_quoted(word)
        else:
            word.exp(self._expansion())

    def _backquoted(self, word: _Parts) -> None:
        word.exp(self._expansion())

    def _tilde(self, word: _Parts) -> None:
        """`~` at the start of the word, or of an assignment's value, is $HOME; elsewhere itself."""
        text, start = self.text, self._start
        if self.i != start and text[self.i - 1] == "=" and self._first_equals is None:
            self._first_equals = text.find("=", start)
        if self.i == start or text[self.i - 1] == "=" and self._first_equals == self.i - 1:
            word.exp("~")
        else:
            word.lit("~")
        self.i += 1

    def _ansi_end(self, j: int) -> int:
        while j < len(self.text) and self.text[j] != "'":
            j += 2 if self.text[j] == "\\" else 1
        return min(j, len(self.text))

    def _double_quoted(self, word: _Parts) -> None:
        text, n = self.text, len(self.text)
        start_line = self.line
        self.i += 1
        while self.i < n and text[self.i] != '"':
            c = text[self.i]
            run = QUOTED_RUN.match(text, self.i)
            if run:
                word.lit(run.group())
                self.i = run.end()
            elif c == "\\" and self.i + 1 < n and text[self.i + 1] in '$`"\\\n':
                if text[self.i + 1] == "\n":
                    self.line += 1
                else:
                    word.lit(text[self.i + 1])
                self.i += 2
            elif c == "$" and self.i + 1 < n and (text[self.i + 1] in "({`" or text[self.i + 1].isalnum()
                                                  or text[self.i + 1] in "_@*#?$!-"):
                word.exp(self._expansion())
            elif c == "`":
                word.exp(self._expansion())
            else:
                if c == "\n":
                    self.line += 1
                word.lit(c)
                self.i += 1
        if self.i >= n:
            self.errors.append(('unterminated " quote: bash stops with "unexpected EOF while looking for matching"',
                                start_line))
        self.i += 1

    def _expansion(self) -> str:
        """One `$…` or backtick expansion, returned verbatim; the position moves past it."""
        text, n, start = self.text, len(self.text), self.i
        if text[start] == "`":
            j = start + 1
            while j < n and text[j] != "`":
                j += 2 if text[j] == "\\" else 1
            end = min(j + 1, n)
        elif text.startswith("$(", start) or text.startswith("${", start):
            opener, closer = text[start + 1], ")" if text[start + 1] == "(" else "}"
            depth, j, quote = 0, start + 1, ""
            while j < n:
                ch = text[j]
                if quote:
                    if ch == "\\" and quote == '"':
                        j += 1
                    elif ch == quote:
                        quote = ""
                elif ch in "'\"":
                    quote = ch
                elif ch == "\\":
                    j += 1
                elif ch == opener:
                    depth += 1
                elif ch == closer:
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            end = min(j + 1, n)
        else:
            match = re.compile(r"\$(?:[A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!-])?").match(text, start)
            end = match.end() if match else start + 1  # it matches: the text is at a `$`
        chunk = text[start:end]
        self._count(chunk)
        self.i = end
        return chunk


def _unquoted(default: str) -> str:
    """A `${NAME:-default}`'s default: in `${NGPU:-"8"}` the quotes are the shell's."""
    if len(default) > 1 and default[0] == default[-1] and default[0] in "'\"":
        return default[1:-1]
    return default


def _unknown(text: str) -> Tuple[str, Optional[str], List[str]]:
    """An expansion whose value is known only when the script runs: as written, and why."""
    return text, f"set by `{text}` at run time" if text != "~" else "`~` expands to $HOME", []


# How a word goes on at each character PLAIN_RUN stops at (those that end a word aside).
WORD_PARTS = {"\\": Tokenizer._escaped, "'": Tokenizer._single_quoted, '"': Tokenizer._double_quoted,
              "$": Tokenizer._dollar, "`": Tokenizer._backquoted, "~": Tokenizer._tilde}


@dataclass
class ShellVar:
    value: str
    line: int
    literal: bool
    conditional: bool
    exported: bool = False
    word: Optional[Word] = None
    defaults: List[str] = field(default_factory=list)  # `${NAME:-d}` defaults its value took


class Walker:
    """Goes through the commands of a script and records what reaches the environment."""

    def __init__(self, path: str, result: ReadResult, scope: str, context: str = "", line_offset: int = 0,
                 tp: Optional[dict] = None):
        self.path = path
        self.result = result
        self.scope = scope
        self.context = context
        self.offset = line_offset
        self.stack: List[str] = []
        self.allexport = False
        self.exported: Dict[str, bool] = {}
        self.vars: Dict[str, ShellVar] = {}
        self.first_command: Optional[int] = None  # the line of the script's first word
        self.tp = tp or {}

    # -- values ---------------------------------------------------------------------------------------
    def resolve(self, word: Word) -> Tuple[str, Optional[str]]:
        """The word's value, and why it is unknown (None when it is a literal)."""
        value, reason, _ = self.resolve_defaults(word)
        return value, reason

    def resolve_defaults(self, word: Word) -> Tuple[str, Optional[str], List[str]]:
        """The word's value, why it is unknown, and the `${NAME:-default}` expansions whose default it took: a
        name the script does not set is the caller's, so its default applies when the caller does not set it
        (never for a variable the scheduler or launcher always sets: those stay unknown)."""
        out, reason, defaults = [], None, []
        for kind, text in word.parts:
            value, why, taken = (text, None, []) if kind == "lit" else self.expanded(text)
            out.append(value)
            defaults += taken
            reason = reason or why
        return "".join(out), reason, defaults

    def expanded(self, text: str) -> Tuple[str, Optional[str], List[str]]:
        """One expansion of a word: its value (as written where unknown), why it is unknown, the defaults taken."""
        match = SIMPLE_VAR.match(text)
        if match is None:
            return self.computed(text) if text.startswith("$((") else _unknown(text)
        name = match.group(1) or match.group(2)
        var = self.vars.get(name)
        op, default = match.group(3), _unquoted(match.group(4) or "")  # `${NAME:-default}`, `${NAME-default}`
        if var is not None and var.literal and not var.conditional:
            # `NGPU=${NGPU:-8}` then `$NGPU`: still the caller's to change
            return (default if op == ":-" and var.value == "" else var.value), None, list(var.defaults)
        if op and var is None and not re.search(r"[$`]", default) and not runtime_variable(name):
            return default, None, [f"the default of `{text}`, which applies when the caller does not set {name}"]
        return _unknown(text)

    def computed(self, text: str) -> Tuple[str, Optional[str], List[str]]:
        """`$((…))` of the integers the script sets: its value, else it as written and why it is unknown."""
        value, shown = arithmetic(text, {name: known.value for name, known in self.vars.items()
                                         if known.literal and not known.conditional
                                         and re.fullmatch(r"-?\d+", known.value.strip())})
        return (str(value), None, []) if value is not None else (shown, f"set by `{shown}` at run time", [])

    def stored(self, word: Word) -> Word:
        """The word as the shell stores it in a variable: `$NAME` of a variable set before (unconditionally) is
        replaced by that variable's own word, so `ARGS="$ARGS --x"` extends the earlier value instead of naming
        itself, and a later change to NAME does not reach it."""
        out = Word(line=word.line)
        for kind, text in word.parts:
            match = SIMPLE_VAR.match(text) if kind == "exp" else None
            var = self.vars.get(match.group(1) or match.group(2)) if match and not match.group(3) else None
            for part in var.word.parts if var is not None and not var.conditional and var.word is not None \
                    else [(kind, text)]:
                out.add(*part)
        return out

    def line(self, word_or_line) -> int:
        return (word_or_line.line if isinstance(word_or_line, Word) else word_or_line) + self.offset

    def add(self, name: str, word: Optional[Word], line: int, conditional: bool, how: str = "",
            unset: bool = False, defaults: Tuple[str, ...] = (), scope: Optional[str] = None) -> None:
        if not is_env_name(name):
            return
        scope = scope or self.scope
        if unset:
            self.result.assignments.append(Assignment(name, None, self.path, self.line(line), None, conditional,
                                                      self.scope, self.context, unset=True))
            return
        value, reason, found = self.resolve_defaults(word) if word is not None else ("", None, [])
        taken = list(defaults) + found
        context = ", ".join(part for part in (self.context, how, *([] if reason else taken)) if part)
        self.result.assignments.append(Assignment(name, value, self.path, self.line(line), reason, conditional,
                                                  scope, context))
        for prefix in CONTAINER_ENV_PREFIXES:
            if name.startswith(prefix) and len(name) > len(prefix):
                self.result.assignments.append(Assignment(
                    name[len(prefix):], value, self.path, self.line(line), reason, conditional, scope,
                    ", ".join(p for p in (self.context, f"inside the container via {name}") if p)))

    # -- commands -------------------------------------------------------------------------------------
    def walk(self, tokens: List[Token]) -> None:
        words: List[Word] = []
        chained = False
        previous: Optional[Token] = None
        i = 0
        while i < len(tokens):
            token = tokens[i]
            if token.kind == "comment":
                self.comment(token, previous is None or previous.line < token.line)
            elif token.word is not None:  # a word
                if self.first_command is None:
                    self.started(token)
                words.append(token.word)
            elif token.kind == "op" and token.text == "(" and len(words) == 1 and words[0].text.endswith("=") \
                    and words[0].split_assignment():
                i = self.array(words.pop(), tokens, i + 1, chained)
            elif token.kind == "op" and (token.text in REDIRECTIONS or token.text in ("<<", "<<-")):
                if i + 1 < len(tokens) and tokens[i + 1].kind == "word":
                    i += 1  # the redirection's target (or heredoc delimiter) is not an argument
            else:  # separator or newline
                self.command(words, chained)
                words = []
                self.nest(token.text)
                if token.text in ("&&", "||"):
                    chained = True
                elif token.text not in ("|", "|&"):
                    chained = False
            previous = tokens[i]
            i += 1
        self.command(words, chained)

    def array(self, head: Word, tokens: List[Token], i: int, chained: bool) -> int:
        """`ARGS=( --nproc_per_node 8 … )`: the elements, up to the closing `)`, become the variable's value as
        `${ARGS[@]}` expands it (elements joined by spaces); the index of the `)`."""
        elements: List[Word] = []
        while i < len(tokens) and not (tokens[i].kind == "op" and tokens[i].text == ")"):
            word = tokens[i].word
            if word is not None:
                elements.append(word)
            i += 1
        self.tensor_parallel(elements)  # Megatron's `GPT_ARGS=( --tensor-model-parallel-size 8 … )`
        value = Word(line=head.line)
        appended = head.text.endswith("+=")  # `ARGS+=( --more )`: after the elements it had
        for n, element in enumerate(elements):
            for kind, text in ([("lit", " ")] if n or appended else []) + element.parts:
                value.add(kind, text)
        if appended:
            value.parts.insert(0, ("exp", f"${{{head.text[:-2]}}}"))
        value = self.stored(value)
        literal_value, reason, defaults = self.resolve_defaults(value)
        self.vars[head.text[:-1].rstrip("+")] = ShellVar(literal_value, head.line, reason is None,
                                                         chained or bool(self.stack), False, value, defaults)
        return min(i, len(tokens) - 1)

    def nest(self, separator: str) -> None:
        if separator == "(":
            self.stack.append("(")
        elif separator == ")" and self.stack and self.stack[-1] == "(":
            self.stack.pop()

    def started(self, token: Token) -> None:
        """The first word of the script: the leading comment block (where sbatch reads directives) ends here."""
        self.first_command = token.line

    def comment(self, token: Token, own_line: bool) -> None:
        """A comment; `#SBATCH …` in the leading comment block is read once into its words (`sbatch`)."""
        match = SBATCH.match(token.text) if self.first_command is None else None
        if match:
            words = [t.word for t in Tokenizer(match.group(1)).run() if t.word is not None]
            for word in words:
                word.line = token.line
            self.sbatch(words, token.line)

    def command(self, written: List[Word], chained: bool) -> None:
        words = self.reserved(written)
        if not words:
            return
        conditional = chained or bool(self.stack)
        self.tensor_parallel(words)
        prefix = []
        for word in words:
            split = word.split_assignment()
            if split is None:
                break
            prefix.append((split, word))
        rest = words[len(prefix):]
        if not rest:  # plain shell assignments
            for (name, value), word in prefix:
                value = self.stored(value)
                literal_value, reason, defaults = self.resolve_defaults(value)
                if self.allexport or self.exported.get(name):
                    self.add(name, value, word.line, conditional)
                self.vars[name] = ShellVar(literal_value, word.line, reason is None, conditional,
                                           self.exported.get(name, False), value, defaults)
            return
        for (name, value), word in prefix:  # `A=1 cmd`: A is for that one command (its own environment)
            self.add(name, value, word.line, conditional, f"for the command `{rest[0].text}`",
                     scope=f"{self.scope}:command@{self.line(rest[0].line)}")
        self.builtin(rest, conditional)

    def reserved(self, words: List[Word]) -> Optional[List[Word]]:
        """The command once the reserved words that start it (`if`, `then`, `fi`, `{` …) are read into the block
        stack (RESERVED); None when the rest is not a command to read (`for …`, `case …`, `function …`)."""
        while words:
            head = words[0].text if not words[0].dynamic else ""
            if head not in RESERVED:
                return words
            opens, closes, stops = RESERVED[head]
            if head == "function":
                opens = "{" if any(w.text == "{" for w in words) else ""
            if opens:
                self.stack.append(opens)
            if closes and closes in self.stack:
                while self.stack and self.stack.pop() != closes:
                    pass
            if stops:
                return None
            words = words[1:]
        return words

    def builtin(self, words: List[Word], conditional: bool) -> None:
        """A command that changes the environment (`export`, `unset`, `set -a`, `env A=1 cmd` …), dispatched on its
        name through BUILTINS; any other command may pass variables to a launcher (`launcher_env`)."""
        handler = BUILTINS.get(words[0].text)
        if handler is None:
            self.launcher_env(words, conditional)
        else:
            getattr(self, handler)(words[0].text, words[1:], conditional)

    def declare(self, head: str, args: List[Word], conditional: bool) -> None:
        """export, declare, typeset, local, readonly: `-x` exports, `export -n` unexports."""
        flags = "".join(w.text[1:] for w in args if w.text.startswith("-") and not w.text.startswith("--"))
        export = head == "export" or "x" in flags
        unexport = head == "export" and "n" in flags
        for word in args:
            split = word.split_assignment()
            name = split[0] if split else word.text
            if word.text.startswith("-") or not is_env_name(name):
                continue
            if unexport:
                self.exported[name] = False
                self.add(name, None, word.line, conditional, unset=True)
                continue
            if export:
                self.exported[name] = True
            if split:
                self.assign_declared(name, split[1], word.line, conditional or head == "local", conditional, export)
            elif export and name in self.vars:
                self.export_assigned(name, conditional)

    def export_assigned(self, name: str, conditional: bool) -> None:
        """`export NAME` of a variable assigned before: the job gets the value it was given."""
        var = self.vars[name]
        original = Word([("lit", var.value)], var.line) if var.literal or var.word is None else var.word
        self.add(name, original, var.line, conditional or var.conditional,
                 defaults=tuple(var.defaults if var.literal else ()))

    def assign_declared(self, name: str, value: Word, line: int, scoped: bool, conditional: bool,
                        export: bool) -> None:
        value = self.stored(value)
        literal_value, reason, defaults = self.resolve_defaults(value)
        if export or self.allexport or self.exported.get(name):
            self.add(name, value, line, scoped)
        self.vars[name] = ShellVar(literal_value, line, reason is None, conditional, export, value, defaults)

    def unset(self, head: str, args: List[Word], conditional: bool) -> None:
        if any(w.text == "-f" for w in args):
            return
        for word in args:
            if is_env_name(word.text):
                self.vars.pop(word.text, None)
                self.add(word.text, None, word.line, conditional, unset=True)

    def set_options(self, head: str, args: List[Word], conditional: bool) -> None:
        """`set -a` / `set -o allexport` export every later assignment; `+a` / `+o` stop it."""
        for index, word in enumerate(args):
            if word.text.startswith(("-", "+")) and not word.text.startswith(("--", "++")) and "a" in word.text:
                self.allexport = word.text.startswith("-")
            if word.text in ("-o", "+o") and index + 1 < len(args) and args[index + 1].text == "allexport":
                self.allexport = word.text == "-o"

    def env_command(self, head: str, args: List[Word], conditional: bool) -> None:
        """`env [-u NAME] A=1 cmd …`: the assignments, then the command it runs."""
        index = 0
        while index < len(args):
            text = args[index].text
            split = args[index].split_assignment()
            if split:
                self.add(split[0], split[1], args[index].line, conditional, "set by `env`")
            elif text in ("-u", "--unset") and index + 1 < len(args):
                index += 1
            elif not text.startswith("-"):
                self.builtin(args[index:], conditional)
                return
            index += 1

    def launcher_env(self, words: List[Word], conditional: bool) -> None:
        """Environment options of launchers anywhere on the command line (srun … docker run -e …): after each
        launcher, its family's options (`slurm_option`, `mpi_option`, `container_option`) are read."""
        family = ""
        index = 0
        while index < len(words):
            starts = LAUNCHER_FAMILIES.get(words[index].text.rsplit("/", 1)[-1])
            if starts:
                family = starts
            elif family:
                index += getattr(self, f"{family}_option")(words, index, conditional)
            index += 1

    def slurm_option(self, words: List[Word], index: int, conditional: bool) -> int:
        """`--export=…` or `--export …`; how many more words it took."""
        word, nxt = words[index], words[index + 1] if index + 1 < len(words) else None
        text = word.text
        if not (text.startswith("--export=") or text == "--export" and nxt):
            return 0
        base = text.rsplit("/", 1)[-1]
        self.slurm_export(self._option_value(word, nxt, "--export"), conditional, f"`{base}`" if base else "")
        return 1 if text == "--export" else 0

    def mpi_option(self, words: List[Word], index: int, conditional: bool) -> int:
        """`-x NAME=value`, `-genv NAME=value` or `-genv NAME value`; how many more words it took."""
        text, nxt = words[index].text, words[index + 1] if index + 1 < len(words) else None
        if nxt is None or text not in ("-x", "-genv", "-env", "--env"):  # --env NAME=value: Cray PALS mpiexec
            return 0
        split = nxt.split_assignment()
        if split:
            self.add(split[0], split[1], nxt.line, conditional,
                     "passed by `mpirun -x`" if text == "-x" else f"passed by `{text}`")
            return 1
        if text == "-x":
            return 1
        if index + 2 < len(words) and is_env_name(nxt.text):
            self.add(nxt.text, words[index + 2], nxt.line, conditional, f"passed by `{text}`")
            return 2
        return 0

    def container_option(self, words: List[Word], index: int, conditional: bool) -> int:
        """`-e NAME=value`, `--env NAME`, `--env=…`, `-eNAME=…`; how many more words it took."""
        word, nxt = words[index], words[index + 1] if index + 1 < len(words) else None
        text = word.text
        if text in ("-e", "--env"):
            if nxt is None:
                return 0
            self.container_env(nxt, conditional)
            return 1
        if text.startswith("--env=") or re.match(r"^-e[A-Za-z_]", text):
            self.container_env(self._strip(word, len("--env=") if text.startswith("--env=") else 2), conditional)
        return 0

    @staticmethod
    def _strip(word: Word, count: int) -> Word:
        parts, remaining = [], count
        for kind, text in word.parts:
            if remaining and kind == "lit":
                take = min(remaining, len(text))
                text, remaining = text[take:], remaining - take
            if text:
                parts.append((kind, text))
        return Word(parts, word.line)

    def _option_value(self, word: Word, nxt: Optional[Word], option: str) -> Optional[Word]:
        if word.text == option:
            return nxt
        return self._strip(word, len(option) + 1)

    def container_env(self, word: Word, conditional: bool) -> None:
        for item in self._split_commas(word):
            split = item.split_assignment()
            if split:
                self.add(split[0], split[1], item.line, conditional, "passed into the container")

    def _split_commas(self, word: Word) -> List[Word]:
        items, current = [], Word(line=word.line)
        for kind, text in word.parts:
            if kind == "exp":
                current.add(kind, text)
                continue
            pieces = text.split(",")
            for n, piece in enumerate(pieces):
                if n:
                    items.append(current)
                    current = Word(line=word.line)
                current.add("lit", piece)
        items.append(current)
        return [item for item in items if item.parts]

    def slurm_export(self, word: Optional[Word], conditional: bool, how: str = "") -> None:
        if word is None:
            return
        for item in self._split_commas(word):
            split = item.split_assignment()
            if split:
                self.add(split[0], split[1], item.line, conditional, f"exported by {how} --export".replace("  ", " "))

    def sbatch(self, words: List[Word], line: int) -> None:
        """The words of one `#SBATCH` line of the leading comment block: its `--export=…`."""
        for index, word in enumerate(words):
            if word.text.startswith("--export=") or word.text == "--export" and index + 1 < len(words):
                target = self._option_value(word, words[index + 1] if index + 1 < len(words) else None, "--export")
                if target is not None:
                    target.line = line
                    self.slurm_export(target, False, "#SBATCH")

    # -- tensor parallelism (GD408) --------------------------------------------------------------------
    def tensor_parallel(self, words: List[Word]) -> None:
        flags = set(self.tp.get("flags", []))
        key = self.tp.get("override_key", "")
        for index, word in enumerate(words):
            text = word.text
            value_word, shown, frameworks = None, "", ["megatron"]
            if text in flags and index + 1 < len(words):
                value_word, shown = words[index + 1], f"{text} {words[index + 1].text}"
            elif "=" in text and text.split("=", 1)[0] in flags:
                value_word, shown = self._strip(word, len(text.split("=", 1)[0]) + 1), text
            elif key and re.match(r"^\+{0,2}(?:[\w.]+\.)?" + re.escape(key) + "=", text):
                value_word, shown = self._strip(word, text.index("=") + 1), text
                frameworks = ["nemo"]
            if value_word is None:
                continue
            value, reason = self.resolve(value_word)
            if reason is None and re.fullmatch(r"\d+", value.strip()):
                self.result.tensor_parallel.append({
                    "source": self.path, "line": self.line(word), "what": shown if value == value_word.text
                    else f"{shown} (= {value})", "size": int(value), "frameworks": frameworks})
