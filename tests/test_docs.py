"""The README and docs/ tell the truth about the CLIs and each other: every command they show parses
against the typer app it names, every `make` target exists, and every link resolves (file and heading)."""

from __future__ import annotations

import importlib
import importlib.util
import re
import shlex
from pathlib import Path

import pytest
import typer.main

from ocr_app.cli.read import with_ray_address

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CLIS = {
    "ocr-read": "ocr_app.cli.read",
    "ocr-eval": "ocr_app.cli.eval",
    "ocr-ui": "ui.cli",
    "ocr-train-mtp": "ocr_app.cli.train_mtp",
    "ocr-train-ocr": "ocr_app.cli.train_ocr",
}
TOOLS = ("make", "python", "python3")
COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)  # lines left for features not merged yet
CODE_BLOCK = re.compile(r"^```[^\n]*\n(.*?)^```", re.DOTALL | re.MULTILINE)
INLINE_CODE = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#+ (.+)$", re.MULTILINE)


def visible(page: Path) -> str:
    return COMMENT.sub("", page.read_text(encoding="utf-8"))


def block_commands(text: str) -> list[list[str]]:
    """Each shell line of the fenced blocks, continuations joined, comments and `.venv/bin/` dropped."""
    commands = []
    for block in CODE_BLOCK.findall(text):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"^\s*([A-Z_]+=\S*\s+)*", "", line)  # OCR_APP_VLLM_EAGER=1 ocr-eval ...
            if line.split()[:1] and line.split()[0].removeprefix(".venv/bin/") in (*CLIS, *TOOLS):
                words = shlex.split(line, comments=True)  # only shell lines: output and layouts have stray quotes
                commands.append([words[0].removeprefix(".venv/bin/"), *words[1:]])
    return commands


def command_for(cli: str, args: list[str]):
    """The click command `cli args` runs (a group's subcommand included), its own args, and a parent context.
    (Typer carries its own copy of click, hence duck typing rather than click's classes.)"""
    command = typer.main.get_command(importlib.import_module(CLIS[cli]).app)
    parent = command.context_class(command, info_name=cli)
    if hasattr(command, "list_commands") and args:  # a group, and a subcommand named
        sub = command.get_command(parent, args[0]) if args else None
        assert sub is not None, f"`{cli} {' '.join(args)}`: no such subcommand"
        return sub, args[1:], parent
    return command, args, parent


def page_commands() -> list[tuple[str, list[str]]]:
    return [(page.name, words) for page in PAGES for words in block_commands(visible(page))]


@pytest.mark.parametrize(("page", "words"), page_commands(), ids=lambda value: " ".join(value)[:60] if isinstance(value, list) else value)
def test_every_shown_command_is_one_the_tools_accept(page, words):
    cli, args = words[0], words[1:]
    if cli == "ocr-read":
        args = with_ray_address(args)  # as ocr-read's main() does before click parses
    if cli in CLIS:
        command, own_args, parent = command_for(cli, args)
        command.make_context(command.name, own_args, parent=parent)  # raises a UsageError on a bad or missing flag
    elif cli == "make":
        phony = re.search(r"^\.PHONY:(.*)$", (ROOT / "Makefile").read_text(), re.MULTILINE).group(1).split()
        assert [arg for arg in args if "=" not in arg][0] in phony
    elif cli in ("python", "python3") and args[:1] == ["-m"] and not args[1].startswith(("venv", "vllm")):
        assert importlib.util.find_spec(args[1]) is not None, f"no module {args[1]}"
    elif cli in ("python", "python3") and args and args[0].endswith(".py"):
        assert (ROOT / args[0]).is_file(), f"no script {args[0]}"


@pytest.mark.parametrize("cli", sorted(CLIS))
def test_option_help_keeps_its_brackets(cli):
    """Typer renders help as Rich markup, where `[regions]` is a tag and vanishes from `--help`: a bracketed
    word in an option's help must be escaped (`\\[regions]`)."""
    command, _, parent = command_for(cli, [])
    is_group = hasattr(command, "list_commands")
    for each in [command.get_command(parent, name) for name in command.list_commands(parent)] if is_group else [command]:
        for param in each.params:
            help_text = getattr(param, "help", None) or ""
            assert not re.search(r"(?<!\\)\[[A-Za-z]", help_text), f"{cli} {each.name} {param.opts}: unescaped [ in {help_text!r}"


def test_the_examples_in_ocr_read_help_parse():
    from ocr_app.cli.read import EXAMPLES

    examples = block_commands(f"```\n{EXAMPLES}\n```\n")
    assert len(examples) >= 3
    for words in examples:
        test_every_shown_command_is_one_the_tools_accept("ocr-read --help", words)


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_options_named_in_the_text_exist(page):
    """Inline `ocr-... --flag` fragments need not be whole commands, but their subcommands and flags must exist."""
    text = CODE_BLOCK.sub("", visible(page))
    for span in INLINE_CODE.findall(text):
        words = span.split()
        if words[0].removeprefix(".venv/bin/") not in CLIS:
            continue
        command, args, parent = command_for(words[0].removeprefix(".venv/bin/"), words[1:])
        known = {opt for param in command.get_params(parent) for opt in (*param.opts, *param.secondary_opts)}
        unknown = [arg for arg in args if arg.startswith("-") and arg not in known]
        assert not unknown, f"{page.name}: `{span}` names options {unknown} that {words[0]} does not have"


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_link_resolves_to_a_file_and_heading(page):
    for target in LINK.findall(visible(page)):
        if target.startswith(("http://", "https://")):
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        assert resolved.exists(), f"{page.name}: link to {target}: no such file"
        if anchor:
            anchors = {slug(heading) for heading in HEADING.findall(CODE_BLOCK.sub("", resolved.read_text(encoding="utf-8")))}
            assert anchor in anchors, f"{page.name}: link to {target}: no such heading"


def test_the_readme_links_every_docs_page():
    readme = visible(ROOT / "README.md")
    assert not [page.name for page in PAGES[1:] if f"(docs/{page.name})" not in readme]


SERVER_PROGRAMS = (["vllm", "serve"], ["python", "-m", "vllm.entrypoints.openai.api_server", "--model"])


@pytest.mark.parametrize("page", [ROOT / "README.md", ROOT / "docs" / "speculative-decoding.md"], ids=lambda page: page.name)
def test_the_server_command_shown_is_serve_command(page):
    """The `vllm serve` line a page shows is the one `serve_command` builds for the real preset (which
    `make check-full-size` starts), so the flags a user copies are the ones the check ran."""
    from ocr_app.config import load_model_preset
    from ocr_app.engines.remote import serve_command

    shown = [words for block in CODE_BLOCK.findall(visible(page)) for line in block.replace("\\\n", " ").splitlines()
             if (words := shlex.split(line, comments=True)) and any(words[: len(p)] == p for p in SERVER_PROGRAMS)]
    assert shown, f"{page.name} shows no server command"
    preset = load_model_preset("qwen3.5-2b-ocr-tr")
    built = serve_command(preset, preset.drafts["bulk"])
    assert built[3] == "--model" and built[4] == str(preset.resolved_path())
    for words in shown:
        program = next(p for p in SERVER_PROGRAMS if words[: len(p)] == p)
        assert words[len(program)] == str(preset.path)
        assert words[len(program) + 1 :] == built[5:]
