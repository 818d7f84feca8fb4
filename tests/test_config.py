"""The repo configuration: Triton defaults, glob semantics, validation with field paths and lines."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from bot.config_file import load_config
from bot.core import bisect
from bot.core.bisect import Budget
from bot.core.config import (
    ConfigError,
    ConfigProblem,
    SluiceConfig,
    Strategy,
    _glob_to_regex,
    all_glob,
    any_glob,
    check_config,
    glob_match,
    parse_config,
)
from bot.core.models import RiskLevel

DOCS = Path(__file__).resolve().parent.parent / "docs" / "configuration.md"

FULL = """\
upstream:
  url: https://git.example/t.git
  branch: release/3.4.x
fork:
  repo: triton-fork/triton
  branch: fork-main
strategy: merge
components:
  - name: llvm-pin
    paths: ["cmake/llvm-hash.txt", "cmake/llvm-info.json"]
    risk: critical
    owners: ["@triton-fork/compiler-infra", "@alice"]
  - name: amd
    paths: ["third_party/amd/"]
    risk: medium
extensions:
  - name: tlx
    paths: ["third_party/tlx/**"]
    interfaces: ["include/triton/Dialect/TritonGPU/IR/**", "lib/Dialect/TritonGPU/Transforms/Pipeliner/**"]
    suites: ["python/test/tlx"]
  - name: autows
    paths: ["third_party/autows/**"]
    interfaces: ["include/triton/Dialect/TritonGPU/IR/**"]
bundles:
  max_commits: 12
  max_changed_lines: 800
risk:
  large_commit_lines: 250
  file_overlap_is_risky: true
recognition:
  subject_patterns:
    - "^\\\\[Pick\\\\] (?P<title>.+)$"
  emergency_patterns: ["^Emergency-Pick: yes$"]
"""


# --- defaults ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "{}", "~", "# only a comment\n", "---\n"])
def test_an_empty_file_gives_the_defaults(text: str) -> None:
    config = parse_config(text)

    assert config == SluiceConfig()
    assert config.upstream.url == "https://github.com/triton-lang/triton.git"
    assert (config.upstream.branch, config.fork.branch, config.fork.repo) == ("main", "main", "")
    assert config.strategy is Strategy.CHERRY_PICK
    assert config.extensions == ()
    assert (config.bundles.max_commits, config.bundles.max_changed_lines) == (30, 3000)
    assert (config.risk.large_commit_lines, config.risk.file_overlap_is_risky) == (500, False)


@pytest.mark.parametrize(
    ("path", "component", "risk"),
    [
        ("cmake/llvm-hash.txt", "llvm-pin", RiskLevel.CRITICAL),
        ("cmake/llvm-info.json", "llvm-pin", RiskLevel.CRITICAL),
        ("cmake/nvidia-toolchain-version.json", "toolchain-pin", RiskLevel.CRITICAL),
        ("cmake/amd-toolchain-version.json", "toolchain-pin", RiskLevel.CRITICAL),
        ("lib/Dialect/TritonGPU/Transforms/Pipeliner/SoftwarePipeliner.cpp", "core-passes", RiskLevel.HIGH),
        ("lib/Analysis/Allocation.cpp", "core-passes", RiskLevel.HIGH),
        ("lib/Conversion/TritonGPUToLLVM/LoadStoreOpToLLVM.cpp", "codegen", RiskLevel.HIGH),
        ("third_party/nvidia/lib/TritonNVIDIAGPUToLLVM/DotOpToLLVM/MMAv5.cpp", "codegen", RiskLevel.HIGH),
        ("third_party/amd/lib/TritonAMDGPUToLLVM/BufferOpsEmitter.cpp", "codegen", RiskLevel.HIGH),
        ("python/src/ir.cc", "bindings", RiskLevel.HIGH),
        ("python/triton/runtime/jit.py", "runtime-abi", RiskLevel.HIGH),
        ("third_party/nvidia/backend/driver.c", "runtime-abi", RiskLevel.HIGH),
        ("third_party/amd/backend/driver.py", "runtime-abi", RiskLevel.HIGH),
        ("include/triton/Dialect/TritonGPU/IR/TritonGPUOps.td", "dialect-ir", RiskLevel.MEDIUM),
        ("lib/Dialect/TritonGPU/IR/Dialect.cpp", "dialect-ir", RiskLevel.MEDIUM),
        ("python/triton/language/core.py", "frontend", RiskLevel.LOW),
        ("python/triton/compiler/code_generator.py", "frontend", RiskLevel.LOW),
        ("test/TritonGPU/combine.mlir", "tests", RiskLevel.LOW),
        ("python/test/unit/language/test_core.py", "tests", RiskLevel.LOW),
        ("docs/getting-started/installation.rst", "docs", RiskLevel.LOW),
        ("README.md", "docs", RiskLevel.LOW),
        ("python/tutorials/README.md", "docs", RiskLevel.LOW),
        # first match wins: a README inside codegen is codegen
        ("lib/Conversion/README.md", "codegen", RiskLevel.HIGH),
    ],
)
def test_default_components_classify_triton_paths(path: str, component: str, risk: RiskLevel) -> None:
    found = SluiceConfig().component_for(path)

    assert found is not None
    assert (found.name, found.risk) == (component, risk)


@pytest.mark.parametrize("path", ["setup.py", "bin/triton-opt.cpp", "cmake/FindLLVM.cmake", "Makefile"])
def test_paths_outside_every_default_component_have_none(path: str) -> None:
    assert SluiceConfig().component_for(path) is None


@pytest.mark.parametrize("doc", [DOCS, DOCS.parent.parent / "README.md"], ids=lambda p: p.name)
def test_the_documented_default_file_is_the_default(doc: Path) -> None:
    block = re.search(r"<!-- default-config -->\n```yaml\n(.*?)```", doc.read_text(), re.DOTALL)

    assert block is not None, f"{doc.name} lost its default-config block"
    assert parse_config(block.group(1)) == SluiceConfig()


# --- globs ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("cmake/llvm-hash.txt", "cmake/llvm-hash.txt", True),
        ("cmake/llvm-hash.txt", "x/cmake/llvm-hash.txt", False),
        ("lib/*", "lib/a.cpp", True),
        ("lib/*", "lib/Dialect/a.cpp", False),  # `*` stays inside one segment
        ("lib/*.cpp", "lib/.hidden.cpp", True),
        ("lib/**", "lib/Dialect/TritonGPU/IR/Dialect.cpp", True),
        ("lib/**", "lib", True),  # zero segments
        ("lib/**", "libx/a.cpp", False),
        ("lib/**/IR/*.cpp", "lib/IR/a.cpp", True),
        ("lib/**/IR/*.cpp", "lib/Dialect/TritonGPU/IR/a.cpp", True),
        ("lib/**/IR/*.cpp", "lib/Dialect/TritonGPUIR/a.cpp", False),
        ("**/CMakeLists.txt", "CMakeLists.txt", True),
        ("**/CMakeLists.txt", "lib/Analysis/CMakeLists.txt", True),
        ("**", "any/path/at/all", True),
        ("lib/Dialect/*/Transforms/**", "lib/Dialect/TritonGPU/Transforms/Pipeliner/Schedule.cpp", True),
        ("lib/Dialect/*/Transforms/**", "lib/Dialect/Triton/GPU/Transforms/a.cpp", False),
        ("a**b", "a/b", False),  # `**` inside a segment is a plain `*`
        ("a**b", "axxb", True),
        ("test/?.mlir", "test/a.mlir", True),
        ("test/?.mlir", "test/ab.mlir", False),
        ("a?b", "a/b", False),  # `?` never matches `/`
        ("driver.[ch]", "third_party/nvidia/backend/driver.c", True),
        ("driver.[!ch]", "third_party/nvidia/backend/driver.c", False),
        ("driver.[!ch]", "third_party/amd/backend/driver.py", False),
        ("driver.[^ch]*", "third_party/amd/backend/driver.py", True),
        ("x/[a-c]", "x/b", True),
        ("x/[a-c]", "x/d", False),
        ("[]]", "]", True),  # a leading `]` in a class is literal
        ("a[", "a[", True),  # an unclosed `[` is literal
        ("*.md", "README.md", True),  # no `/`: the basename anywhere
        ("*.md", "docs/a/b.md", True),
        ("*.md", "docs/a.mdx", False),
        ("README.md", "python/tutorials/README.md", True),
        ("/README.md", "README.md", True),  # a leading `/` anchors at the root
        ("/README.md", "python/README.md", False),
        ("third_party/tlx/", "third_party/tlx/language/core.py", True),  # a trailing `/`: everything under
        ("third_party/tlx/", "third_party/tlxx/a.py", False),
        ("a+b/(x)", "a+b/(x)", True),  # regex metacharacters are literal
        ("a.c", "abc", False),
    ],
)
def test_glob_semantics(pattern: str, path: str, matches: bool) -> None:
    assert glob_match(pattern, path) is matches


def test_any_and_all_glob_match_paths_against_several_globs_as_glob_match_does() -> None:
    globs = ("docs/**", "*.md", "/setup.py")
    assert any_glob(globs, ["lib/a.cpp", "python/README.md"])
    assert not any_glob(globs, ["lib/a.cpp", "python/setup.py"])  # `/setup.py` is anchored at the root
    assert all_glob(globs, ["docs/x/y.rst", "a/b.md", "setup.py"])
    assert not all_glob(globs, ["docs/x/y.rst", "lib/a.cpp"])
    assert all_glob(globs, []) and not any_glob(globs, [])


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("*?" * 8 + "*Q", "test/TritonGPU/amd/accelerate-amd-matmul-mfma-decompose-scaled-dot.mlir", False),
        ("*?" * 8 + "*r", "test/TritonGPU/amd/accelerate-amd-matmul-mfma-decompose-scaled-dot.mlir", True),
        ("lib/" + "*a" * 12 + "*b", "lib/" + "a" * 40 + "c", False),
        ("lib/" + "*a" * 12 + "*b", "lib/" + "a" * 40 + "b", True),
        ("/".join(["**", "a"] * 7) + "/**/b", "/".join(["a"] * 30) + "/c", False),
        ("/".join(["**", "a"] * 7) + "/**/b", "/".join(["a"] * 30) + "/b", True),
        ("**/*b/**/**", "ba/ba/ba/b/ba", True),  # a `*b` piece must end where its segment does
    ],
    ids=lambda v: str(v)[:24],
)
def test_a_glob_with_many_wildcards_matches_without_trying_every_split(
    pattern: str, path: str, matches: bool
) -> None:
    """Planning matches the config's globs against every changed path: `*?*?…` or `**/a/**/a/…` once tried
    exponentially many ways (25 s for one path); their pieces now take their first fit, atomically."""
    assert glob_match(pattern, path) is matches


def test_atomic_groups_change_no_globs_answer() -> None:
    """The atomic groups only stop backtracking: the same regex with plain groups (which tries every split)
    gives the same answer, on random globs and paths small enough for it."""
    import random

    rng = random.Random(7)
    parts = ["a", "b", "*", "**", "a*", "*b", "?", "[ab]", "[!a]", "*a*", "a?b"]
    for _ in range(5000):
        pattern = "/".join(rng.choice(parts) for _ in range(rng.randint(1, 6)))
        pattern = rng.choice(["", "/"]) + pattern + rng.choice(["", "", "/"])
        path = "/".join(rng.choice(["a", "b", "ab", "ba", "aba", "c"]) for _ in range(rng.randint(1, 6)))
        atomic = _glob_to_regex(pattern)
        plain = atomic.replace("(?>", "(?:")
        assert (re.fullmatch(atomic, path) is None) == (re.fullmatch(plain, path) is None), (pattern, path)


# --- a full configuration ---------------------------------------------------------------------------------


def test_a_full_configuration_is_read_as_written() -> None:
    config = parse_config(FULL)

    assert (config.upstream.url, config.upstream.branch) == ("https://git.example/t.git", "release/3.4.x")
    assert (config.fork.repo, config.fork.branch) == ("triton-fork/triton", "fork-main")
    assert config.strategy is Strategy.MERGE
    assert [c.name for c in config.components] == ["llvm-pin", "amd"]  # replaces the defaults
    assert config.components[0].owners == ("@triton-fork/compiler-infra", "@alice")
    assert config.component_for("third_party/amd/lib/x.cpp") == config.components[1]
    assert config.component_for("lib/Conversion/a.cpp") is None
    assert [e.name for e in config.extensions] == ["tlx", "autows"]
    assert config.extensions[0].suites == ("python/test/tlx",)
    assert (config.bundles.max_commits, config.bundles.max_changed_lines) == (12, 800)
    assert (config.risk.large_commit_lines, config.risk.file_overlap_is_risky) == (250, True)
    assert config.recognition.emergency_patterns == ("^Emergency-Pick: yes$",)


def test_a_full_configuration_round_trips_through_yaml() -> None:
    config = parse_config(FULL)

    again = parse_config(yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False))

    assert again == config
    assert again.digest() == config.digest()


def test_a_partial_section_keeps_the_other_defaults() -> None:
    config = parse_config("recognition:\n  emergency_patterns: ['^HOTFIX']\nbundles:\n  max_commits: 5\n")

    assert config.recognition.match_subject("[Cherry-pick] 'Fix (#1)'") is not None
    assert config.bundles.max_changed_lines == 3000
    assert config.components == SluiceConfig().components


@pytest.mark.parametrize(
    ("path", "interface_of", "owned_by"),
    [
        ("include/triton/Dialect/TritonGPU/IR/TritonGPUAttrDefs.td", ["tlx", "autows"], []),
        ("lib/Dialect/TritonGPU/Transforms/Pipeliner/Schedule.cpp", ["tlx"], []),
        ("third_party/tlx/language/tlx/core.py", [], ["tlx"]),
        ("lib/Analysis/Allocation.cpp", [], []),
    ],
)
def test_extensions_by_interface_and_by_own_path(
    path: str, interface_of: list[str], owned_by: list[str]
) -> None:
    config = parse_config(FULL)

    assert [e.name for e in config.extensions_for_interface(path)] == interface_of
    assert [e.name for e in config.extensions_for_path(path)] == owned_by


# --- recognition ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("subject", "pr", "title"),
    [
        ("[Cherry-pick] 'Fix the pipeliner (#1234)'", "1234", "Fix the pipeliner"),
        ("[Cherry-pick] Fix the pipeliner (#1234)", "1234", "Fix the pipeliner"),
        ("[Cherry-pick] '[AMD] Use (#n) in buffer ops (#8031)'", "8031", "[AMD] Use (#n) in buffer ops"),
        # FBTriton's landed forms: tags before, tags after, and the fork PR's own (#M) that is never the pr
        ("[triton][beta] [Cherry-pick] 'Fix the pipeliner (#1234)' (#2877)", "1234", "Fix the pipeliner"),
        ("[Cherry-pick][RESOLVED] 'Fix the pipeliner (#1234)'", "1234", "Fix the pipeliner"),
        ("[Cherry-pick] Fix the pipeliner (#1234) (#2877)", "1234", "Fix the pipeliner"),
        ("[Cherry-pick] 'Fix the pipeliner' (#2877)", None, "Fix the pipeliner"),
    ],
)
def test_default_subject_patterns_recognise_fbtriton_picks(subject: str, pr: str, title: str) -> None:
    picked = SluiceConfig().recognition.match_subject(subject)

    assert picked is not None
    assert (picked.pr, picked.title) == (pr, title)


@pytest.mark.parametrize(
    "subject",
    ["Fix the pipeliner (#1234)", "[Cherry-pick] Fix the pipeliner", "Revert \"[Cherry-pick] 'Fix (#1)'\""],
)
def test_default_subject_patterns_ignore_other_subjects(subject: str) -> None:
    assert SluiceConfig().recognition.match_subject(subject) is None


def test_a_bundle_pick_names_every_upstream_pr_but_not_its_own() -> None:
    subject = "[Cherry-pick][BUNDLE] Cherry-pick 15 upstream(#10702 #10689 #10650 …) (#2877)"
    picked = SluiceConfig().recognition.match_subject(subject)

    assert picked is not None
    assert (picked.pr, picked.prs) == (None, ("10702", "10689", "10650"))


@pytest.mark.parametrize(
    "group", [r"(?P<pr>\w+)", r"(?P<pr>.+)", r"(?P<pr>[^)]+)", r"(?P<pr>\d+|x)", r"(?P<pr>[0-9a-f]+)"]
)
def test_a_pr_group_must_match_digits_only(group: str) -> None:
    (problem,) = check_config(f"recognition: {{subject_patterns: ['^Pick {group}']}}", filename="s.yml")

    assert "the group `pr` must match digits only" in problem.message


@pytest.mark.parametrize("group", [r"(?P<pr>\d+)", r"(?P<pr>[0-9]{1,6})", r"(?:#(?P<pr>\d+))?"])
def test_digit_pr_groups_are_accepted(group: str) -> None:
    assert not check_config(f"recognition: {{subject_patterns: ['^Pick {group}']}}", filename="s.yml")


def test_a_title_only_subject_pattern_gives_no_pr() -> None:
    picked = parse_config(FULL).recognition.match_subject("[Pick] Fix the pipeliner")

    assert picked is not None
    assert (picked.pr, picked.title) == (None, "Fix the pipeliner")


@pytest.mark.parametrize(
    ("message", "emergency"),
    [
        ("Fix a crash\n\nEmergency-Pick: yes\n", True),
        ("Fix a crash\n\nEmergency-Pick: no\n", False),
        ("Fix a crash", False),
    ],
)
def test_emergency_patterns_search_the_whole_message(message: str, emergency: bool) -> None:
    assert parse_config(FULL).recognition.is_emergency(message) is emergency


# --- digest -----------------------------------------------------------------------------------------------


def test_the_digest_is_stable_and_ignores_spelling() -> None:
    spelled_out = "upstream:\n  branch: main\nstrategy: cherry-pick\nbundles: {max_commits: 30}\n"

    assert re.fullmatch(r"[0-9a-f]{64}", SluiceConfig().digest())
    assert parse_config("").digest() == SluiceConfig().digest()
    assert parse_config(spelled_out).digest() == SluiceConfig().digest()
    assert parse_config(FULL).digest() == parse_config(FULL).digest()


@pytest.mark.parametrize(
    "text",
    [
        "strategy: merge",
        "bundles: {max_commits: 31}",
        "risk: {file_overlap_is_risky: true}",
        "fork: {repo: org/triton}",
        "recognition: {emergency_patterns: ['^HOTFIX']}",
        "components: []",
    ],
)
def test_the_digest_changes_with_the_config(text: str) -> None:
    assert parse_config(text).digest() != SluiceConfig().digest()


# --- validation -------------------------------------------------------------------------------------------

SEVERAL = """\
upstream:
  url: ""
  branch: feature..x
fork:
  repo: just-a-name
  branch: -wip
stratgy: merge
components:
  - name: llvm-pin
    paths: []
    risk: severe
  - name: llvm-pin
    paths: ["x/**"]
    risk: low
    owner: ["@a"]
  - paths: ["y/**"]
bundles:
  max_commits: 0
  max_changed_lines: "10"
recognition:
  subject_patterns: ["(unclosed", "no groups here"]
  emergency_patterns: ["[x"]
"""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            SEVERAL,
            [
                ("upstream.url", 2),
                ("upstream.branch", 3),
                ("fork.repo", 5),
                ("fork.branch", 6),
                ("stratgy", 7),
                ("components.0.paths", 10),
                ("components.0.risk", 11),
                ("components.1.name", 12),
                ("components.1.owner", 15),
                ("components.2.name", 16),  # missing keys: the line of their mapping
                ("components.2.risk", 16),
                ("bundles.max_commits", 18),
                ("bundles.max_changed_lines", 19),
                ("recognition.subject_patterns.0", 21),
                ("recognition.subject_patterns.1", 21),
                ("recognition.emergency_patterns.0", 22),
            ],
            id="several-problems-in-one-file",
        ),
        pytest.param("strategy: rebase\n", [("strategy", 1)], id="unknown-strategy"),
        pytest.param(
            "\n\nbundles:\n  max_commits: 5\n  max_comits: 5\n",
            [("bundles.max_comits", 5)],
            id="typo-in-a-section",
        ),
        pytest.param(
            "risk:\n  large_commit_lines: 0\n  file_overlap_is_risky: sometimes\n",
            [("risk.large_commit_lines", 2), ("risk.file_overlap_is_risky", 3)],
            id="risk-values",
        ),
        pytest.param(
            "extensions:\n  - name: tlx\n    paths: []\n    interfaces: ['../x', '']\n"
            "  - name: tlx\n    paths: [a/]\n",
            [
                ("extensions.0.paths", 3),
                ("extensions.0.interfaces.0", 4),
                ("extensions.0.interfaces.1", 4),
                ("extensions.1.name", 5),
            ],
            id="extensions",
        ),
        pytest.param(
            "components:\n  - name: x\n    paths: 'lib/**'\n    risk: high\n    owners: [alice]\n",
            [("components.0.paths", 3), ("components.0.owners.0", 5)],
            id="a-string-where-a-list-goes-and-a-bad-owner",
        ),
        pytest.param("upstream: main\nfork: [a]\n", [("upstream", 1), ("fork", 2)], id="scalar-sections"),
        pytest.param("fork:\n  branch: yes\n", [("fork.branch", 2)], id="yaml-boolean-for-a-branch"),
        pytest.param(
            "risk:\n  large_commit_lines: 10\nrisk:\n  large_commit_lines: 20\n",
            [("risk", 3)],
            id="duplicate-key",
        ),
        pytest.param("strategy: merge\n  bad: indent\n", [("", 2)], id="yaml-syntax"),
        pytest.param("components: [\n", [("", 2)], id="yaml-unclosed-list"),
        pytest.param("\n- a\n- b\n", [("", 2)], id="top-level-list"),
        pytest.param("42\n", [("", 1)], id="top-level-number"),
        pytest.param("a: 1\nb: \x00\n", [("", 2)], id="binary-junk"),
        pytest.param("x: !!python/object/apply:os.system ['true']\n", [("", 1)], id="unsafe-tag"),
    ],
)
def test_every_problem_is_reported_with_its_field_and_line(
    text: str, expected: list[tuple[str, int]]
) -> None:
    problems = check_config(text, filename="sluice.yml")

    assert [(p.field, p.line) for p in problems] == expected
    assert all(p.message for p in problems)
    with pytest.raises(ConfigError) as raised:
        parse_config(text)
    assert raised.value.problems == problems


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("stratgy: merge", "unknown key 'stratgy'; did you mean 'strategy'?"),
        ("bundles: {zzz: 1}", "unknown key 'zzz'; expected one of: max_commits, max_changed_lines"),
        ("strategy: rebase", "expected one of 'cherry-pick' or 'merge', got 'rebase'"),
        ("components: [{name: x, paths: [a]}]", "missing required key 'risk'"),
        ("components: [{name: x, paths: [], risk: low}]", "must not be empty"),
        ("bundles: {max_commits: 0}", "must be at least 1, got 0"),
        ("fork: {branch: 1.5}", "expected a string, got a number (quote it)"),
        ("components: [{name: a, paths: [a], risk: low}, {name: a, paths: [b], risk: low}]", "duplicate"),
        ("recognition: {subject_patterns: ['(x']}", "invalid regular expression: missing ), unterminated"),
        ("recognition: {subject_patterns: ['^Pick (\\d+)']}", "needs a named group `pr`, `prs` or `title`"),
        ("upstream: {branch: 'a b'}", "not a valid git branch name"),
        ("fork: {repo: 'a/b/c'}", "expected 'owner/name'"),
        ("risk: {}\nrisk: {}", "duplicate key (first at line 1)"),
        ("- a", "the top level must be a mapping, got a list"),
        ("a: [", "invalid YAML"),
    ],
)
def test_problem_messages_say_what_is_wrong(text: str, message: str) -> None:
    (problem,) = check_config(text, filename="sluice.yml")

    assert message in problem.message


@pytest.mark.parametrize(
    "branch",
    ["main", "release/3.4.x", "fb/main-2026", "2026-01-01", "feature_x", "user@host", "a.b"],
)
def test_valid_branch_names(branch: str) -> None:
    config = parse_config(yaml.safe_dump({"upstream": {"branch": branch}, "fork": {"branch": branch}}))

    assert config.upstream.branch == config.fork.branch == branch


@pytest.mark.parametrize(
    "branch",
    [
        "",
        "-main",
        "a..b",
        "a b",
        "a~1",
        "a^",
        "a:b",
        "a?",
        "a*",
        "a[b",
        "a\\b",
        "a\tb",
        "a\x7fb",
        "main.lock",
        "a.lock/b",
        "main/",
        "/main",
        "a//b",
        "main.",
        ".hidden",
        "a/.b",
        "a@{1}",
        "@",
        "HEAD",
        "a$b",  # git allows these; every git call Sluice makes refuses them (bot.core.refs)
        "$(id)",
        "a;b",
        "m\u0430in",  # a Cyrillic a
    ],
)
def test_invalid_branch_names(branch: str) -> None:
    problems = check_config(yaml.safe_dump({"upstream": {"branch": branch}}), filename="sluice.yml")

    assert [(p.field, "not a valid git branch name" in p.message) for p in problems] == [
        ("upstream.branch", True)
    ]


@pytest.mark.parametrize(
    ("repo", "valid"),
    [
        ("", True),
        ("triton-lang/triton", True),
        ("facebookexperimental/triton", True),
        ("intel/intel-xpu-backend-for-triton", True),
        ("org/my.repo_1", True),
        ("triton", False),
        ("a/b/c", False),
        ("/triton", False),
        ("org/", False),
        ("org/..", False),
        ("https://github.com/org/triton", False),
    ],
)
def test_fork_repo_is_owner_slash_name(repo: str, valid: bool) -> None:
    problems = check_config(yaml.safe_dump({"fork": {"repo": repo}}), filename="sluice.yml")

    assert (problems == ()) is valid


def test_config_error_lists_every_problem_as_file_line_field_message() -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config("strategy: rebase\nbundles:\n  max_commits: 0\n", filename="fork/.github/sluice.yml")

    assert str(raised.value).splitlines() == [
        "fork/.github/sluice.yml:1: strategy: expected one of 'cherry-pick' or 'merge', got 'rebase'",
        "fork/.github/sluice.yml:3: bundles.max_commits: must be at least 1, got 0",
        "  → fix it (`sluice config check fork/.github/sluice.yml` lists every problem)",
    ]


def test_a_problem_without_a_field_or_line_renders_without_them() -> None:
    assert ConfigProblem("", None, "no such file").render("x.yml") == "x.yml: no such file"
    assert ConfigProblem("", 3, "invalid YAML: boom").render("x.yml") == "x.yml:3: invalid YAML: boom"


@pytest.mark.parametrize(
    "text",
    [
        "- a\n- b",
        "42",
        "'just a string'",
        "upstream: 5",
        "components: 7",
        "components: [1, 2]",
        "components: [{name: [x], paths: {a: b}, risk: [low]}]",
        "extensions: {tlx: {}}",
        "recognition: {subject_patterns: [[a]]}",
        "1: 2",
        "? [a]\n: 1",
        "a: &a [*a]",
        "recognition: {subject_patterns: &x [*x]}",
        "fork: {branch: !!timestamp 2026-13-01}",
        "[" * 3000,
        "\x00\x01\x02\xff",
        "\ufeffstrategy: merge\n  - x",
        "a: 1\n---\nb: 2",
        "%YAML 9.9\n---\na: 1",
    ],
)
def test_bad_input_only_ever_raises_config_error(text: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config(text)

    assert raised.value.problems


def test_aliases_that_repeat_a_long_list_are_refused_before_validation_expands_them() -> None:
    row = "[" + ",".join(["1"] * 20_000) + "]"
    text = f"numerics:\n  blocks: [&r {row}]\n  shapes: [{','.join(['*r'] * 20_000)}]\n"  # about 100 KB
    assert check_config(text) == (
        ConfigProblem("", 3, "invalid YAML: aliases repeat more than 10,000 values; write the values out"),
    )


def test_aliases_nested_to_a_billion_values_are_refused() -> None:
    text = "a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n"
    for name, before in zip("bcdefghi", "abcdefgh", strict=True):
        text += f"{name}: &{name} [{', '.join([f'*{before}'] * 10)}]\n"

    (problem,) = check_config(text)

    assert problem.line == 4 and "aliases repeat more than 10,000 values" in problem.message


def test_a_few_aliases_are_still_read() -> None:
    text = "tiers:\n  l1:\n    suites: &suites [{name: smoke, builtin: smoke}]\n  l2:\n    suites: *suites\n"

    config = parse_config(text)

    assert config.tiers.l2.suites == config.tiers.l1.suites


def test_a_file_over_the_size_limit_is_refused_unread() -> None:
    comment = "# " + "x" * 78 + "\n"
    broken = "bundles:\n  max_commits: 0\n"  # a problem no one is told of: the file is not read

    assert check_config(comment * 3300 + broken) == (
        ConfigProblem("", None, "the file is 267,326 bytes; Sluice reads at most 262,144 (256 KiB)"),
    )
    assert check_config(comment * 3000 + broken) == (
        ConfigProblem("bundles.max_commits", 3002, "must be at least 1, got 0"),
    )


@pytest.mark.parametrize(
    "url",
    [
        "sluice-bot:S3cretPassw0rd@github.com/acme/triton.git",  # no scheme
        "https:/sluice-bot:S3cretPassw0rd@github.com/acme/triton.git",  # one slash
        "https//sluice-bot:S3cretPassw0rd@github.com/acme/triton.git",  # no colon
        "oauth2:glpat-S3cretPassw0rd@gitlab.example.com:acme/triton.git",  # ssh's short form, with a token
        "S3cretPassw0rd@github.com/acme/triton.git",  # a token as the user, no scheme
        "https://S3cretPassw0rd@github.com/acme/triton.git",
    ],
)
def test_credentials_in_a_malformed_upstream_url_are_refused_and_never_repeated(url: str) -> None:
    (problem,) = check_config(f"upstream:\n  url: '{url}'\n", trusted_url_prefixes=("https://",))

    assert problem.field == "upstream.url" and "carries credentials" in problem.message
    assert "S3cretPassw0rd" not in problem.message


@pytest.mark.parametrize(
    ("url", "code", "at"),
    [
        (r"https://github.com/triton-lang/triton.git\n", "U+000A", 42),
        (r"https://github.com/triton-lang/tri\tton.git", "U+0009", 35),
        (r"https://github.com/triton-lang/triton.git\x01", "U+0001", 42),
        (r"https://github.com/triton-lang/triton.git\x7f", "U+007F", 42),
        (r"https://github.com/triton-lang/tri ton.git", "U+0020", 35),
    ],
)
def test_an_upstream_url_with_a_space_or_control_character_is_refused(url: str, code: str, at: int) -> None:
    """urlsplit drops a tab or newline silently and git refuses the URL: the check says so first."""
    problems = check_config(f'upstream:\n  url: "{url}"\n', trusted_url_prefixes=("https://",))

    assert problems == (
        ConfigProblem(
            "upstream.url", 2, f"the upstream URL has a space or control character ({code}) at character {at}"
        ),
    )


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("ssh://git@internal.example/x.git", "'ssh://internal.example/…'"),  # ssh's user is no secret
        ("git@host.example:x.git", "the URL"),
        ("file:///srv/git/secret.git", "'file://…'"),
        ("/srv/git/secret.git", "the URL"),
        ("http://mirror.example/team/secret.git?token=s3cret", "'http://mirror.example/…'"),
    ],
)
def test_a_url_that_is_not_https_is_refused_naming_no_more_than_its_scheme_and_host(
    url: str, shown: str
) -> None:
    (problem,) = check_config(f"upstream:\n  url: '{url}'\n")

    assert problem.field == "upstream.url"
    assert problem.message.startswith(f"{shown} is not an https:// URL; Sluice fetches upstreams over https")


@pytest.mark.parametrize(
    ("text", "field", "line"),
    [
        ("trunk_watch:\n  enabled: true\n  off: 1\n", "trunk_watch.off", 3),
        ("fork:\n  branch: main\n  on: x\n", "fork.on", 3),
        ("Yes: 1\n", "Yes", 1),
    ],
)
def test_a_key_yaml_1_1_reads_as_a_boolean_is_named_as_written(text: str, field: str, line: int) -> None:
    """`on:` was True to PyYAML: the problem said `fork.1: keys must be strings`, at the parent's line."""
    (problem,) = check_config(text)

    assert (problem.field, problem.line) == (field, line)
    assert problem.message.startswith(f"unknown key '{field.rpartition('.')[2]}'")


def test_a_kernel_named_like_a_boolean_is_that_kernel() -> None:
    config = parse_config("performance:\n  kernels:\n    yes: {k: 2.0}\n    'no': {k: 3.0}\n")

    assert config.performance.threshold_for("yes", 1.0) == 2.0
    assert config.performance.threshold_for("no", 1.0) == 3.0


# --- loading ----------------------------------------------------------------------------------------------


def test_load_config_without_a_path_gives_the_defaults() -> None:
    assert load_config(None) == SluiceConfig()


def test_load_config_reads_the_file(tmp_path: Path) -> None:
    path = tmp_path / "sluice.yml"
    path.write_text(FULL)

    assert load_config(path) == parse_config(FULL)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "{path}: no such file"),
        (b"strategy: merge\nfork: \xff\xfe\n", "{path}:2: not UTF-8 text"),
        (b"strategy: rebase\n", "{path}:1: strategy: expected one of"),
    ],
)
def test_load_config_reports_unusable_files(tmp_path: Path, content: bytes | None, message: str) -> None:
    path = tmp_path / "sluice.yml"
    if content is not None:
        path.write_bytes(content)

    with pytest.raises(ConfigError) as raised:
        load_config(path)

    assert str(raised.value).startswith(message.format(path=path))


def test_load_config_reports_a_directory(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(tmp_path)

    assert str(raised.value).startswith(f"{tmp_path}: cannot read")


def test_the_documented_check_output_is_what_check_config_reports() -> None:
    docs = DOCS.read_text()
    example = re.search(r"For this file:\n\n```yaml\n(.*?)```", docs, re.DOTALL)
    printed = re.search(
        r"it prints:\n\n```console\n\$ sluice config check (\S+)\n(.*?)\$ echo", docs, re.DOTALL
    )
    assert example is not None and printed is not None, "docs/configuration.md lost its check example"

    problems = check_config(example.group(1), filename=printed.group(1))

    assert [p.render(printed.group(1)) for p in problems] == printed.group(2).splitlines()


def test_duplicate_names_are_refused_when_built_in_python_too() -> None:
    llvm = SluiceConfig().components[0]

    with pytest.raises(ValidationError, match="duplicate component name 'llvm-pin'"):
        SluiceConfig(components=(llvm, llvm))


# --- resolver and auto_resolve ----------------------------------------------------------------------------


def test_the_resolver_is_off_and_everything_may_be_auto_resolved_by_default() -> None:
    config = SluiceConfig()

    assert config.resolver.command == ()
    assert config.resolver.timeout_seconds == 120
    assert config.auto_resolve.exclude == ()
    assert config.auto_resolve_allowed("cmake/llvm-hash.txt")


def test_resolver_and_auto_resolve_are_read_as_written() -> None:
    config = parse_config(
        "resolver:\n"
        "  command: [/opt/agents/resolve, --model, large, '--prompt=keep fork semantics']\n"
        "  timeout_seconds: 600\n"
        "auto_resolve:\n"
        "  exclude: ['cmake/**', 'third_party/tlx/', '*.td']\n"
    )

    assert config.resolver.command == (
        "/opt/agents/resolve",
        "--model",
        "large",
        "--prompt=keep fork semantics",
    )
    assert config.resolver.timeout_seconds == 600
    assert config.auto_resolve.exclude == ("cmake/**", "third_party/tlx/", "*.td")
    assert parse_config(yaml.safe_dump(config.model_dump(mode="json"))) == config
    assert config.digest() != SluiceConfig().digest()


@pytest.mark.parametrize(
    ("path", "allowed"),
    [
        ("cmake/llvm-hash.txt", False),
        ("third_party/tlx/language/tlx/core.py", False),
        ("include/triton/Dialect/TritonGPU/IR/TritonGPUOps.td", False),  # `*.td` at any depth
        ("lib/Dialect/TritonGPU/Transforms/Pipeliner/Schedule.cpp", True),
        ("third_party/tlxx/a.py", True),
        ("python/triton/language/core.py", True),
    ],
)
def test_auto_resolve_allowed_outside_the_excluded_globs(path: str, allowed: bool) -> None:
    config = parse_config("auto_resolve:\n  exclude: ['cmake/**', 'third_party/tlx/', '*.td']\n")

    assert config.auto_resolve_allowed(path) is allowed


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            "resolver:\n  command: claude-resolve --json\n  timeout_seconds: 0\n",
            [
                ("resolver.command", 2, "expected a list of arguments"),
                ("resolver.timeout_seconds", 3, "at least 1"),
            ],
            id="a-command-line-string-and-no-time",
        ),
        pytest.param(
            "\nresolver:\n  command:\n    - agent\n    - ''\n    - 3\n  timeout_seconds: 7200\n",
            [
                ("resolver.command.1", 5, "must not be empty"),
                ("resolver.command.2", 6, "expected a string, got an integer"),
                ("resolver.timeout_seconds", 7, "must be at most 3600, got 7200"),
            ],
            id="bad-arguments-and-too-long",
        ),
        pytest.param(
            "resolver:\n  timeout_seconds: 1.5\n  shell: true\n",
            [
                ("resolver.timeout_seconds", 2, "expected an integer"),
                ("resolver.shell", 3, "unknown key 'shell'"),
            ],
            id="fractional-timeout-and-unknown-key",
        ),
        pytest.param(
            "auto_resolve:\n  exclude: ['../cmake/**', 'lib\\\\x']\n  exlude: []\n",
            [
                ("auto_resolve.exclude.0", 2, "'.' or '..' segments"),
                ("auto_resolve.exclude.1", 2, "paths use '/'"),
                ("auto_resolve.exlude", 3, "did you mean 'exclude'?"),
            ],
            id="bad-globs-and-a-typo",
        ),
        pytest.param("auto_resolve: [cmake/**]\n", [("auto_resolve", 1, "expected a mapping")], id="a-list"),
    ],
)
def test_resolver_and_auto_resolve_problems_have_fields_and_lines(
    text: str, expected: list[tuple[str, int, str]]
) -> None:
    problems = check_config(text, filename="sluice.yml")

    assert [(p.field, p.line) for p in problems] == [(field, line) for field, line, _ in expected]
    for problem, (_, _, message) in zip(problems, expected, strict=True):
        assert message in problem.message


@pytest.mark.parametrize("doc", [DOCS, DOCS.parent.parent / "README.md"], ids=lambda p: p.name)
def test_the_documented_default_file_spells_out_every_section(doc: Path) -> None:
    block = re.search(r"<!-- default-config -->\n```yaml\n(.*?)```", doc.read_text(), re.DOTALL)
    assert block is not None

    assert list(yaml.safe_load(block.group(1))) == list(SluiceConfig.model_fields)


def test_a_model_path_on_this_machine_is_a_persons_own_choice_never_a_repositorys() -> None:
    text = "risk:\n  model: /etc/passwd\n"
    assert check_config(text) == ()  # `sluice plan --config` on a person's own machine: their file
    (problem,) = check_config(text, machine_paths=False)  # a repository's file, as the service reads it
    assert (problem.field, problem.line) == ("risk.model", 2)
    assert "a path on Sluice's own machine" in problem.message and "'/etc/passwd'" in problem.message
    assert check_config("risk:\n  model: models/risk.json\n", machine_paths=False) == ()


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("bisect:\n  hours_per_run: true\n", "expected a number, got a boolean"),
        ('risk:\n  bundle_culprits: "0.5"\n', "expected a number, got a string"),
        ('performance:\n  k: "3"\n', "expected a number, got a string"),
        (
            'numerics:\n  tolerances:\n    float16: {atol: "1e-2", rtol: 0.01}\n',
            "expected a number, got a string",
        ),
    ],
)
def test_a_number_setting_takes_a_number_not_a_boolean_or_a_quoted_string(text: str, problem: str) -> None:
    (found,) = check_config(text)
    assert found.message == problem


@pytest.mark.parametrize("value", [".inf", "-.inf", ".nan"])
@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("risk:\n  chain_share: {}\n", "risk.chain_share"),
        ("risk:\n  bundle_culprits: {}\n", "risk.bundle_culprits"),
        ("performance:\n  floor: {}\n", "performance.floor"),
        ("performance:\n  k: {}\n", "performance.k"),
        ("performance:\n  fdr: {}\n", "performance.fdr"),
        ("performance:\n  confidence: {}\n", "performance.confidence"),
        ("performance:\n  kernels: {{matmul: {{floor: {}}}}}\n", "performance.kernels.matmul.floor"),
        ("performance:\n  kernels: {{matmul: {{k: {}}}}}\n", "performance.kernels.matmul.k"),
        ("bisect:\n  max_runner_hours: {}\n", "bisect.max_runner_hours"),
        ("bisect:\n  hours_per_run: {}\n", "bisect.hours_per_run"),
        (
            "numerics:\n  tolerances:\n    float32: {{atol: {}, rtol: 0.01}}\n",
            "numerics.tolerances.float32.atol",
        ),
        (
            "numerics:\n  tolerances:\n    float32: {{atol: 0.01, rtol: {}}}\n",
            "numerics.tolerances.float32.rtol",
        ),
    ],
)
def test_no_number_setting_takes_an_infinity_or_nan(text: str, field: str, value: str) -> None:
    problems = check_config(text.format(value))

    assert [p.field for p in problems] == [field]
    assert problems[0].message.startswith(("expected a finite number, got ", "must be"))  # -.inf: too low


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("bisect:\n  max_runner_hours: 1e300\n", "must be at most 100000.0, got 1e+300"),
        ("bisect:\n  hours_per_run: 1e-300\n", "must be at least 0.01, got 1e-300"),
    ],
)
def test_the_bisection_budget_is_bounded_so_it_counts_runs(text: str, message: str) -> None:
    (problem,) = check_config(text)
    assert problem.message == message
    most = parse_config("bisect:\n  max_runner_hours: 100000\n  hours_per_run: 0.01\n").bisect
    budget = Budget(max_runs=None, max_runner_hours=most.max_runner_hours, hours_per_run=most.hours_per_run)

    state = bisect.start("ing-1", ["a" * 40, "b" * 40, "c" * 40], tier="l1", budget=budget)

    assert bisect.next_probes(state, free=1)  # not an OverflowError


def test_a_number_in_e_notation_without_a_dot_is_a_number_as_yaml_1_2_reads_it() -> None:
    text = "numerics:\n  tolerances:\n    float16: {atol: 1e-2, rtol: 5E-3}\nperformance:\n  k: 3\n"
    config = parse_config(text)
    assert (config.numerics.tolerances.float16.atol, config.numerics.tolerances.float16.rtol) == (0.01, 0.005)
    assert config.performance.k == 3.0


def test_the_default_pins_are_the_llvm_pin_components_files() -> None:
    """Upstream moved the LLVM pin from llvm-hash.txt to llvm-info.json: a bump of either is recognised."""
    (llvm,) = [c for c in SluiceConfig().components if c.name == "llvm-pin"]
    assert (
        set(SluiceConfig().recognition.pins)
        == set(llvm.paths)
        == {"cmake/llvm-hash.txt", "cmake/llvm-info.json"}
    )


@pytest.mark.parametrize(
    ("text", "where", "message"),
    [
        pytest.param(
            "fork:\n  repo: a/b\nbranch: main\n",
            ("branch", 3),
            "unknown key 'branch' here; did you mean `upstream.branch` or `fork.branch`?",
            id="a-key-of-another-section",
        ),
        pytest.param(
            "performance:\n  kernels:\n    matmul: {flor: 0.05}\n",
            ("performance.kernels.matmul.flor", 3),
            "unknown key 'flor'; did you mean 'floor'?",
            id="in-a-mapping-of-names",
        ),
        pytest.param(
            "gate:\n  required_tiers: [l1, L2]\n",
            ("gate.required_tiers.1", 2),
            "expected one of 'l1', 'l2' or 'l3', got 'L2'",
            id="a-literal",
        ),
        pytest.param(
            "tiers:\n  l3:\n    suites:\n      - {name: bench, builtin: bench}\n"
            "trunk_watch:\n  l3_suites:\n    - bnech\n",
            ("trunk_watch.l3_suites.0", 7),
            "'bnech' is none of L3's suites (bench)",
            id="a-check-across-sections",
        ),
    ],
)
def test_each_problem_is_named_at_its_line_with_what_would_be_right(
    text: str, where: tuple[str, int], message: str
) -> None:
    (problem,) = check_config(text)
    assert ((problem.field, problem.line), problem.message) == (where, message)
