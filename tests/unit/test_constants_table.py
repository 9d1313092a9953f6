"""docs/CONSTANTS.md names every tunable (issue 37 §6): a row for each setting of `Settings` (core/config.py, its
`retrieval` section being core/query_config.py) and each module constant of core/query_config.py, and each row
states its setting's current default.

The matching rule: a row's first column names settings as backticked dotted paths of `Settings`
(`retrieval.archrag.ef`) and module constants as backticked `core/<file>.py NAME`; any other text of the column
is a label. A setting counts as covered only when its exact path is named so in some row's first column.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from pydantic import BaseModel

import core.query_config as query_config
from core.config import Settings

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "CONSTANTS.md"
HEADER = "| setting | value | origin |"
SETTING = re.compile(r"^[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)+$")
CONSTANT = re.compile(r"^(core/[\w/]+\.py) (_?[A-Z][A-Z0-9_]*)$")

# Fields of Settings that are not tunables: nothing is chosen for them, they say who may do what, where data lives,
# which backend or model serves, or hold a secret. Every other field needs a row. Keep this short and reviewed.
NOT_TUNABLES: dict[str, str] = {
    "auth.mode": "access control: how users sign in",
    "auth.oidc_provider": "access control: which identity provider",
    "auth.proxy_header": "access control: the header naming the user",
    "auth.trusted_proxies": "access control: network addresses of trusted proxies",
    "auth.service_user": "access control: the identity the CLI and workers act as",
    "auth.admins": "access control: who administers",
    "storage.home": "storage location (STRATA_HOME)",
    "storage.sample_on_start": "deployment switch: whether the app builds the bundled sample; nothing reads it "
                               "during a build or a question",
    "storage.database_url": "storage location (a database URL)",
    "storage.chroma_url": "storage location (a vector server URL)",
    "storage.chroma_token": "secret",
    "storage.chroma_ca": "storage location's certificate (a file path)",
    "backend.kind": "backend choice (offline, Ollama, OpenAI API)",
    "backend.ollama_host": "backend URL",
    "backend.openai_base_url": "backend URL",
    "backend.api_key": "secret",
    "backend.hosts": "backend URLs",
    "backend.chat_model": "backend choice: which model serves",
    "backend.embed_model": "backend choice: which embedding model a server runs",
    "embed.embedder": "backend choice: which embedder (bundled MiniLM, Ollama, OpenAI API)",
    "embed.minilm_runtime": "backend choice: the bundled MiniLM's runtime (auto: `exact`, whose row is in the table)",
}

# module constants issue 37 §6 names: they keep a row even though they are not settings
NAMED_BY_THE_ISSUE = (
    "core/algorithms/attributed.py LEIDEN_ITERATIONS",
    "core/algorithms/leiden.py LEIDEN_TOLERANCE",
    "core/pipeline/stages/layers.py DESCRIPTION_CHARS",
    "core/algorithms/layer_gmm.py REL_TOL",
    "core/algorithms/layer_gmm.py N_INIT",
)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def table_rows(text: str) -> list[list[str]]:
    """The rows of the table under HEADER, as cells (an escaped `\\|` stays inside its cell)."""
    lines = text.splitlines()
    assert HEADER in lines, f"{DOC.name} has no table headed {HEADER!r}"
    rows = []
    for line in lines[lines.index(HEADER) + 2:]:
        if not line.startswith("|"):
            break
        cells = _cells(line)
        assert len(cells) == 3, f"a row of {DOC.name} has {len(cells)} cells, not 3: {line[:120]}"
        rows.append(cells)
    return rows


def named(first_cell: str) -> tuple[set[str], set[str]]:
    """(settings paths, module constants) a row's first column names."""
    spans = re.findall(r"`([^`]+)`", first_cell)
    return {s for s in spans if SETTING.match(s)}, {s for s in spans if CONSTANT.match(s)}


def settings_leaves(model: BaseModel, prefix: str = "") -> dict[str, object]:
    """Every field of `model` that is not itself a section, by dotted path, with its default."""
    out: dict[str, object] = {}
    for name in type(model).model_fields:
        value = getattr(model, name)
        if isinstance(value, BaseModel):
            out.update(settings_leaves(value, f"{prefix}{name}."))
        else:
            out[f"{prefix}{name}"] = value
    return out


def missing_rows(text: str) -> list[str]:
    covered = set().union(*(named(cells[0])[0] for cells in table_rows(text)))
    return sorted(set(settings_leaves(Settings())) - covered - set(NOT_TUNABLES))


def module_constants(path: Path) -> set[str]:
    """Names assigned at module level in upper case (the module's constants)."""
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) else []
        names |= {t.id for t in targets if isinstance(t, ast.Name) and CONSTANT.match(f"core/x.py {t.id}")}
    return names


def renderings(value: object) -> list[str]:
    """How a default may be written in a row."""
    if value is None:
        return ["none", "None"]
    if isinstance(value, bool):
        return ["on", "true", "True"] if value else ["off", "false", "False"]
    if isinstance(value, int):
        return [str(value), f"{value:,}"]
    if isinstance(value, float):
        return list(dict.fromkeys([str(value), f"{value:g}", f"{value:.2f}", f"{value * 100:g} %",
                                   f"{value * 100:g}%"]))
    return [str(value)]


def states(row: str, value: object) -> bool:
    if isinstance(value, list):
        return all(states(row, v) for v in value)
    return any(re.search(rf"(?<![\w.]){re.escape(form)}(?!\w|\.\d)", row) for form in renderings(value))


def _doc() -> str:
    return DOC.read_text()


def test_every_setting_has_a_row():
    missing = missing_rows(_doc())
    assert not missing, (f"{len(missing)} setting(s) of core/config.py / core/query_config.py have no row in "
                         "docs/CONSTANTS.md (name each as a backticked dotted path in a row's first column, with its "
                         "value and origin): " + ", ".join(missing))


def test_a_removed_row_is_named_as_missing():
    """The check above can fail: the table without the row of `retrieval.archrag.ef` misses exactly that."""
    lines = _doc().splitlines()
    kept = [line for line in lines if not (line.startswith("| ") and named(_cells(line)[0])[0] == {"retrieval.archrag.ef"})]
    assert len(kept) == len(lines) - 1, "expected one row naming `retrieval.archrag.ef` alone"
    assert missing_rows("\n".join(kept)) == ["retrieval.archrag.ef"]


def test_exclusions_are_real_fields_without_a_row():
    leaves = settings_leaves(Settings())
    assert not set(NOT_TUNABLES) - set(leaves), f"excluded fields that do not exist: {set(NOT_TUNABLES) - set(leaves)}"
    rowed = set().union(*(named(cells[0])[0] for cells in table_rows(_doc())))
    assert not rowed & set(NOT_TUNABLES), f"fields both excluded and in the table: {sorted(rowed & set(NOT_TUNABLES))}"


def test_every_named_setting_and_constant_exists():
    leaves = settings_leaves(Settings())
    unknown = []
    for cells in table_rows(_doc()):
        paths, constants = named(cells[0])
        unknown += sorted(p for p in paths if p not in leaves)
        for c in sorted(constants):
            file, name = c.split(" ")
            if not (ROOT / file).exists() or name not in module_constants(ROOT / file):
                unknown.append(c)
    assert not unknown, "docs/CONSTANTS.md names settings or constants that do not exist: " + ", ".join(unknown)


def test_query_config_is_all_reached():
    """query_config's constants have rows, and each of its models is a section of Settings (so its fields count)."""
    constants = {f"core/query_config.py {n}" for n in module_constants(ROOT / "core" / "query_config.py")}
    rowed = set().union(*(named(cells[0])[1] for cells in table_rows(_doc())))
    assert not constants - rowed, f"constants of core/query_config.py with no row: {sorted(constants - rowed)}"

    def sections(model: BaseModel) -> set[type]:
        found = {type(model)}
        for name in type(model).model_fields:
            if isinstance(value := getattr(model, name), BaseModel):
                found |= sections(value)
        return found

    models = {v for v in vars(query_config).values() if isinstance(v, type) and issubclass(v, BaseModel)
              and v is not BaseModel and v.__module__ == query_config.__name__}
    assert models <= sections(Settings()), f"models of core/query_config.py outside Settings: {models - sections(Settings())}"


def test_constants_named_by_issue_37_have_rows():
    rowed = set().union(*(named(cells[0])[1] for cells in table_rows(_doc())))
    assert not set(NAMED_BY_THE_ISSUE) - rowed, f"no row for {sorted(set(NAMED_BY_THE_ISSUE) - rowed)}"


def test_rows_state_the_current_defaults():
    """A row naming a setting writes its default somewhere in the row (a changed default needs its row changed)."""
    leaves = settings_leaves(Settings())
    stale = []
    for cells in table_rows(_doc()):
        row = " | ".join(cells)
        stale += [f"{p} = {leaves[p]!r}" for p in sorted(named(cells[0])[0]) if p in leaves and not states(row, leaves[p])]
    assert not stale, "rows of docs/CONSTANTS.md that do not state their setting's default: " + "; ".join(stale)
