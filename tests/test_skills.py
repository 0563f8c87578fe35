"""agentcore.skills: loading SKILL.md folders, their rules, the listing and the `skill` tool."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from agentcore import AgentError, skills, tools
from agentcore.testing import ModelServer

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "skills" / "skills"


def write_skill(root: Path, folder: str, front: str, body: str = "Do the thing.\n") -> Path:
    path = root / folder
    path.mkdir(parents=True, exist_ok=True)
    (path / "SKILL.md").write_text(f"---\n{front}\n---\n{body}", encoding="utf-8")
    return path


def config_error(root: Path) -> str:
    with pytest.raises(AgentError) as caught:
        skills.load(root)
    assert caught.value.kind == "config"
    return caught.value.message


def test_loads_the_example_skills_with_front_matter_fields() -> None:
    found = skills.load(EXAMPLE)
    assert found.names == ["commit-message", "release-notes"]
    commit = found["commit-message"]
    assert commit.description.startswith("Write a git commit message")
    assert commit.metadata == {"author": "agentcore examples", "version": "1.0"}
    assert commit.fields["license"] == "MIT"
    assert commit.body.startswith("# Writing a commit message")
    assert "---" not in commit.body.splitlines()[0]
    notes = found["release-notes"]  # a folded (>) description
    assert notes.description == (
        "Turn a list of merged changes into release notes grouped as Added, Changed and Fixed. "
        "Use when preparing a release."
    )


def test_one_skill_folder_or_a_folder_of_skills_and_later_wins(tmp_path: Path) -> None:
    write_skill(tmp_path / "a", "pdf", "name: pdf\ndescription: first")
    write_skill(tmp_path / "b", "pdf", "name: pdf\ndescription: second")
    assert skills.load(tmp_path / "a", tmp_path / "b")["pdf"].description == "second"
    assert skills.load(tmp_path / "a" / "pdf").names == ["pdf"]
    (tmp_path / "a" / "notes").mkdir()  # a folder without SKILL.md is not a skill
    assert len(skills.load(tmp_path / "a")) == 1


def test_quoted_values_comments_and_escapes(tmp_path: Path) -> None:
    front = (
        "# a comment\n"
        "name: 'quoted'\n"
        'description: "Says \\"hi\\": it\'s fine # not a comment"\n'
        "compatibility: needs git  # trailing comment\n"
        "metadata:\n  team: 'docs'\n  # inner comment\n  level: \"2\""
    )
    skill = skills.load(write_skill(tmp_path, "quoted", front))["quoted"]
    assert skill.description == 'Says "hi": it\'s fine # not a comment'
    assert skill.fields["compatibility"] == "needs git"
    assert skill.metadata == {"team": "docs", "level": "2"}


@pytest.mark.parametrize(
    ("folder", "front", "problem"),
    [
        ("pdf", "description: x", "'name' is required"),
        ("pdf", "name: pdf", "'description' is required"),
        ("pdf", "name: pdf\ndescription: ''", "'description' is required"),
        ("pdf", "name: other\ndescription: x", "must equal its folder's name 'pdf'"),
        ("PDF", "name: PDF\ndescription: x", "lowercase letters"),
        ("-pdf", "name: -pdf\ndescription: x", "no leading, trailing or double hyphen"),
        ("pdf-", "name: pdf-\ndescription: x", "no leading, trailing or double hyphen"),
        ("pd--f", "name: pd--f\ndescription: x", "double hyphen"),
        ("pdf_x", "name: pdf_x\ndescription: x", "lowercase letters"),
        ("a" * 65, f"name: {'a' * 65}\ndescription: x", "longer than 64"),
        ("pdf", f"name: pdf\ndescription: {'d' * 1025}", "at most 1024"),
        ("pdf", "name: pdf\ndescription: x\nname: pdf", "given twice"),
        ("pdf", "name: pdf\ndescription: x\n  stray: indent", "indented lines after it"),
        ("pdf", 'name: pdf\ndescription: "open', "unterminated quoted string"),
        ("pdf", "name: pdf\ndescription: x\nnot a pair", "expected 'key: value'"),
        ("pdf", "name: pdf\ndescription: x\nmetadata:\n  - a list", "expected indented 'key: value'"),
    ],
)
def test_malformed_skills_are_config_errors_naming_the_file(
    tmp_path: Path, folder: str, front: str, problem: str
) -> None:
    write_skill(tmp_path, folder, front)
    message = config_error(tmp_path)
    assert problem in message
    assert str(tmp_path / folder / "SKILL.md") in message


def test_front_matter_must_open_and_close(tmp_path: Path) -> None:
    (tmp_path / "pdf").mkdir()
    (tmp_path / "pdf" / "SKILL.md").write_text("# no front matter\n")
    assert "missing front matter" in config_error(tmp_path)
    (tmp_path / "pdf" / "SKILL.md").write_text("---\nname: pdf\ndescription: x\n")
    assert "no closing '---'" in config_error(tmp_path)


def test_a_missing_folder_is_a_config_error(tmp_path: Path) -> None:
    assert "does not exist" in config_error(tmp_path / "nope")


def test_the_limits_themselves_are_accepted(tmp_path: Path) -> None:
    name = "a" * 64
    write_skill(tmp_path, name, f"name: {name}\ndescription: {'d' * 1024}")
    assert skills.load(tmp_path).names == [name]


def test_system_lists_names_and_descriptions_only() -> None:
    found = skills.load(EXAMPLE)
    listing = found.system()
    assert "<name>commit-message</name>" in listing and "<name>release-notes</name>" in listing
    assert found["commit-message"].description in listing
    assert "Read `templates/conventional.txt`" not in listing  # bodies stay out of the prompt
    assert "`skill` tool" in listing
    assert skills.load().system() == ""
    empty = tools.load([skills.load().tool()])
    unknown = tools.execute("skill", {"name": "x"}, empty)
    assert "no skill named 'x'; the skills are: (none)" in unknown["error"]


def test_the_tool_returns_a_body_or_a_file_of_the_folder() -> None:
    toolset = tools.load([skills.load(EXAMPLE).tool()])
    schema = toolset.schema["skill"]["input_schema"]
    assert schema["properties"]["name"]["enum"] == ["commit-message", "release-notes"]
    body = tools.execute("skill", {"name": "release-notes"}, toolset)["output"]["value"]
    assert body.startswith("# Release notes")
    template = tools.execute(
        "skill", {"name": "commit-message", "file": "templates/conventional.txt"}, toolset
    )
    assert template["output"]["value"].startswith("<area>:")


def test_reads_outside_the_folder_are_refused(tmp_path: Path) -> None:
    folder = write_skill(tmp_path / "skills", "pdf", "name: pdf\ndescription: x")
    (tmp_path / "secret.txt").write_text("top secret")
    (folder / "inner.txt").write_text("inside")
    os.symlink(tmp_path / "secret.txt", folder / "escape.txt")
    os.symlink(tmp_path, folder / "up")
    os.symlink(folder / "inner.txt", folder / "alias.txt")
    toolset = tools.load([skills.load(tmp_path / "skills").tool()])

    def read(file: str) -> dict[str, Any]:
        return tools.execute("skill", {"name": "pdf", "file": file}, toolset)

    for file, problem in [
        ("../secret.txt", "'..' is not allowed"),
        ("sub/../../secret.txt", "'..' is not allowed"),
        (str(tmp_path / "secret.txt"), "absolute path"),
        ("escape.txt", "points outside"),
        ("up/secret.txt", "points outside"),
        ("missing.txt", "has no file 'missing.txt'"),
    ]:
        result = read(file)
        assert problem in result["error"], (file, result)
        assert "top secret" not in str(result)
    assert read("alias.txt")["output"]["value"] == "inside"  # a link that stays inside is fine
    unknown = tools.execute("skill", {"name": "nope"}, toolset)  # the schema's enum refuses it
    assert "'nope' is not one of ['pdf']" in unknown["error"]


def test_an_agent_reads_a_skill_through_the_tool(server: ModelServer, make_agent: Any) -> None:
    found = skills.load(EXAMPLE)
    server.add({"tool_calls": [{"name": "skill", "arguments": {"name": "release-notes"}}]}, "Done.")
    agent = make_agent(server, tools=[found.tool()], no_tool_rounds=1, system=found.system())
    assert agent.send("Prepare the release notes").text == "Done."
    assert "Group every change" in str(agent.history[2]["content"])
    assert "<available_skills>" in str(server.requests[0])
