"""What every run pays before it judges anything: the rule data read through a parse cache that is never stale, and
only the check modules of the rules that run imported."""

import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT

from gpudoctor.data import cache_dir, load_tomls, rules_dir, tomllib

RULE_FILES = sorted(rules_dir().rglob("*.toml"))


def _parse(paths):
    return [tomllib.loads(path.read_text(encoding="utf-8")) for path in paths]


def test_the_cache_gives_what_tomllib_parses_for_every_rule_file(tmp_path, monkeypatch):
    """Cold (parsed and written) and warm (read back): the same data as tomllib, for every TOML file of rules/."""
    monkeypatch.setenv("GPUDOCTOR_CACHE_DIR", str(tmp_path))
    expected = _parse(RULE_FILES)
    assert load_tomls(RULE_FILES) == expected
    assert len(list(tmp_path.glob("toml-*.json"))) == 1
    assert load_tomls(RULE_FILES) == expected


def test_a_changed_added_or_removed_file_is_seen_at_once(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUDOCTOR_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "catalog"
    shutil.copytree(rules_dir() / "catalog", folder)
    paths = sorted(folder.glob("GD*.toml"))
    first = load_tomls(paths)
    target = folder / "GD101.toml"
    text = target.read_text(encoding="utf-8")
    changed = text.replace('severity = "error"', 'severity = "xxxxx"', 1)  # the same size, within a second
    assert changed != text and len(changed) == len(text)
    target.write_text(changed, encoding="utf-8")
    os.utime(target, ns=(os.stat(paths[0]).st_atime_ns, os.stat(paths[0]).st_mtime_ns))
    second = load_tomls(paths)
    assert second[paths.index(target)]["severity"] == "xxxxx" and second != first
    (folder / "GD999.toml").write_text('id = "GD999"\n', encoding="utf-8")
    assert load_tomls(sorted(folder.glob("GD*.toml")))[-1] == {"id": "GD999"}
    target.unlink()
    assert len(load_tomls(sorted(folder.glob("GD*.toml")))) == len(paths)


def test_a_broken_or_unwritable_cache_only_costs_a_parse(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUDOCTOR_CACHE_DIR", str(tmp_path))
    paths = RULE_FILES[:5]
    load_tomls(paths)
    (cached,) = tmp_path.glob("toml-*.json")
    cached.write_text("[{\"truncated", encoding="utf-8")
    assert load_tomls(paths) == _parse(paths)
    assert json.loads(cached.read_text(encoding="utf-8")) == _parse(paths)  # written again whole
    blocked = tmp_path / "a-file-not-a-folder"
    blocked.write_text("", encoding="utf-8")
    monkeypatch.setenv("GPUDOCTOR_CACHE_DIR", str(blocked))
    assert load_tomls(paths) == _parse(paths)


def test_the_cache_folder_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("GPUDOCTOR_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir() == tmp_path / "gpudoctor"


def _modules_after(code: str, tmp_path) -> set:
    env = {**os.environ, "GPUDOCTOR_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code + "\nimport sys, json\n"
                           "print(json.dumps(sorted(m for m in sys.modules if m.startswith('gpudoctor.checks.'))))"],
                          capture_output=True, text=True, env=env, timeout=60, check=True)
    return set(json.loads(done.stdout.splitlines()[-1]))


@pytest.mark.slow
def test_only_the_families_that_run_are_imported(tmp_path):
    """Loading the catalog imports no check module; running a GD1 rule imports the GD1 family's modules only."""
    from gpudoctor.catalog import FAMILIES

    assert _modules_after("from gpudoctor.catalog import load_catalog; load_catalog()", tmp_path) == set()
    ran = _modules_after("from gpudoctor.catalog import find_rule; assert find_rule('GD105').check", tmp_path)
    assert ran == {f"gpudoctor.checks.{name}" for name in FAMILIES["GD1"].modules}
