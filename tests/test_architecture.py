"""The architecture, stated as tests: which module may import which (imports inside functions count too).

FLOORS is the package from the ground up (docs/ARCHITECTURE.md draws it): a module imports only from its own floor
or below, so no import runs up and no two parts import each other across floors."""

import ast
from pathlib import Path

import pytest
from conftest import ROOT

PACKAGE = ROOT / "gpudoctor"
CLI_SHARED = {"gpudoctor.cli", "gpudoctor.cli.common", "gpudoctor.cli.options", "gpudoctor.cli.training"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_statements(path: Path):
    """(module, names) for each import in the file, relative ones made absolute: `import a.b` is ("a.b", []),
    `from .x import y, z` is ("gpudoctor.pkg.x", ["y", "z"])."""
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from ((alias.name, []) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            yield base, [alias.name for alias in node.names]


def imports(path: Path) -> set:
    """Every gpudoctor module the file imports (`from gpudoctor.x import y` counts as x and x.y)."""
    found = set()
    for base, names in import_statements(path):
        found.add(base)
        found.update(f"{base}.{name}" for name in names)
    return {name for name in found if name == "gpudoctor" or name.startswith("gpudoctor.")}


MODULES = {module_name(path): imports(path) for path in sorted(PACKAGE.rglob("*.py"))}
PATHS = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imported_modules(path: Path) -> set:
    """The gpudoctor modules the file's imports load: `from gpudoctor import schema` is gpudoctor.schema, and
    `from gpudoctor import api, __version__` is gpudoctor.api and gpudoctor (the package's face)."""
    found = set()
    for base, names in import_statements(path):
        found.update(f"{base}.{name}" if f"{base}.{name}" in MODULES else base for name in names or [""])
    return {name for name in found if name in MODULES}


FLOORS = [  # (floor, the top-level parts of gpudoctor on it: "" is the package's face, gpudoctor/__init__.py)
    ("ground", {"errors", "version", "data", "units", "waiting", "model", "redact", "spelling", "suppress",
                "files", "adapters", "provenance", "joined", "collector", "training_settings"}),
    ("knowledge", {"knowledge", "schema", "fact_types", "facts", "hub"}),
    ("documents", {"snapshot", "estimate", "remedies"}),
    ("rules", {"checks", "catalog", "verdict", "memo", "engine"}),
    ("output", {"render"}),  # a report formatted: it reads no input file and looks at no machine
    ("job files", {"readers"}),
    ("pasted reports and logs", {"ingest"}),
    ("probes", {"probes"}),
    ("gathering", {"gather", "policy", "bench", "fit", "fleet", "rendezvous", "preflight"}),
    ("fix", {"fix"}),
    ("library", {"", "api", "mcpserver"}),
    ("command line", {"cli", "__main__"}),
]
FLOOR_OF = {part: number for number, (_, parts) in enumerate(FLOORS) for part in parts}


def part(module: str) -> str:
    return module.split(".")[1] if "." in module else ""


def test_every_part_has_a_floor():
    assert sorted({part(name) for name in MODULES} - set(FLOOR_OF)) == []


def test_no_import_runs_up_a_floor():
    """engine → readers, render → fix, files → snapshot, checks → gather … are caught here."""
    offenders = [f"{name} ({FLOORS[FLOOR_OF[part(name)]][0]}) imports {target} ({FLOORS[FLOOR_OF[part(target)]][0]})"
                 for name in MODULES for target in imported_modules(PATHS[name])
                 if FLOOR_OF.get(part(target), -1) > FLOOR_OF.get(part(name), -1)]
    assert offenders == []


def circles(graph: dict) -> list:
    """The groups of modules that import each other, directly or through others (Tarjan's strongly connected
    components of more than one module)."""
    index, low, stack, found = {}, {}, [], []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in sorted(graph[module]):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            group = stack[stack.index(module):]
            del stack[stack.index(module):]
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_no_two_modules_import_each_other():
    """Within a floor too (readers/launch.py ↔ readers/shell/jobs.py once): no circle of imports, those inside
    functions included. A package's face loading its own members (probes/__init__.py's list of probes) is not one."""
    graph = {name: {target for target in imported_modules(PATHS[name])
                    if target != name and not (PATHS[name].name == "__init__.py" and inside(target, name))}
             for name in MODULES}
    assert circles(graph) == []
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_architecture_document_places_every_part():
    """Every part and package, every reader and report parser, and every data file of rules/ (a new one is placed
    the day it is added)."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    parts = {part(name) for name in MODULES} - {""}
    missing = [name for name in sorted(parts)
               if f"gpudoctor/{name}/" not in text and f"gpudoctor/{name}.py" not in text]
    packages = [path.parent.relative_to(PACKAGE).as_posix() + "/" for path in PACKAGE.rglob("*/__init__.py")]
    sources = [path.relative_to(PACKAGE).as_posix() for folder in ("readers", "ingest")
               for path in (PACKAGE / folder).rglob("*.py") if path.name != "__init__.py"]
    data = [path.relative_to(ROOT).as_posix() for path in (ROOT / "rules").glob("*.toml")]
    missing += [name for name in sorted(packages + data) if name not in text]
    missing += [name for name in sorted(sources) if not placed(name, text)]
    assert missing == []


def placed(module: str, text: str) -> bool:
    """`readers/python/tree.py` is placed by its path, or by `tree.py` on a line of `readers/python/`."""
    folder, _, name = module.rpartition("/")
    return module in text or any(f"`{folder}/`" in line and f"`{name}`" in line for line in text.splitlines())


def test_the_scan_sees_imports():
    assert "gpudoctor.gather" in MODULES["gpudoctor.cli.check"]
    assert "gpudoctor.schema" in imported_modules(PATHS["gpudoctor.policy"])  # from gpudoctor import schema
    assert "gpudoctor.cli" in MODULES["gpudoctor.__main__"]


def test_nothing_imports_the_cli_but_main():
    offenders = [f"{name} imports {target}" for name, targets in MODULES.items()
                 if not name.startswith("gpudoctor.cli") and name != "gpudoctor.__main__"
                 for target in targets if target == "gpudoctor.cli" or target.startswith("gpudoctor.cli.")]
    assert offenders == []


def test_no_command_module_imports_another():
    commands = {name for name in MODULES if name.startswith("gpudoctor.cli.") and name not in CLI_SHARED}
    offenders = [f"{name} imports {target}" for name in commands for target in MODULES[name]
                 if target in commands and target != name]
    assert offenders == []
    # the shared CLI modules import no command either (cli/__init__ wires them, and only it)
    shared = [f"{name} imports {target}" for name in CLI_SHARED - {"gpudoctor.cli"} for target in MODULES[name]
              if target in commands]
    assert shared == []


LAYERS = [  # (importing package, packages it must never import)
    ("gpudoctor.checks", ("gpudoctor.render", "gpudoctor.cli", "gpudoctor.probes")),
    ("gpudoctor.probes", ("gpudoctor.checks",)),
    ("gpudoctor.render", ("gpudoctor.probes",)),
    ("gpudoctor.fix", ("gpudoctor.probes",)),
]


def inside(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


@pytest.mark.parametrize("package,forbidden", LAYERS, ids=[layer[0] for layer in LAYERS])
def test_import_layers(package, forbidden):
    offenders = [f"{name} imports {target}" for name, targets in MODULES.items() if inside(name, package)
                 for target in targets if any(inside(target, banned) for banned in forbidden)]
    assert offenders == []


def format_modules() -> set:
    """The modules and packages of gpudoctor/readers/ that define a format: a top-level `detect` and `read`."""
    found = set()
    for path in sorted((PACKAGE / "readers").rglob("*.py")):
        defined = {node.name for node in ast.parse(path.read_text(encoding="utf-8")).body
                   if isinstance(node, ast.FunctionDef)}
        if {"detect", "read"} <= defined:
            found.add(module_name(path))
    return found


def test_every_format_is_one_registry_entry():
    from gpudoctor.readers.registry import FORMATS

    names = [fmt.name for fmt in FORMATS]
    assert len(names) == len(set(names))
    assert {fmt.read.__module__ for fmt in FORMATS} == format_modules()
    for fmt in FORMATS:  # a format's detection and its reader live in one module
        assert fmt.detect.__module__ == fmt.read.__module__, fmt.name


def test_only_the_registry_lists_formats():
    """No other reader, nor gather, keeps its own list of formats (as `detect(...) in ("shell", "yaml")` once did):
    a new format is one registry entry."""
    from gpudoctor.readers.registry import FORMATS

    names = {fmt.name for fmt in FORMATS}
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = module_name(path)
        reading = inside(name, "gpudoctor.readers") or name == "gpudoctor.gather"
        if name == "gpudoctor.readers.registry" or not reading:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                listed = {item.value for item in node.elts if isinstance(item, ast.Constant)} & names
                if len(listed) > 1:
                    offenders.append(f"{module_name(path)}:{node.lineno} {sorted(listed)}")
    assert offenders == []


def test_rule_modules_import_no_rule_module():
    """Rules by family, helpers apart: what two rule modules (or a rule and a benchmark) share is a fact helper in
    gpudoctor/facts/, so no rule module is imported but by the registry that loads them all."""
    rules = {name for name in MODULES if name.startswith("gpudoctor.checks.")}
    offenders = [f"{name} imports {target}" for name in MODULES for target in imported_modules(PATHS[name])
                 if target in rules and target != name]
    assert offenders == []
