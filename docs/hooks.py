"""MkDocs hooks: the notebooks of ``notebooks/`` become pages of the site, listed under "Notebooks".

The notebooks stay where users open them (``notebooks/``, beside the package); the site renders them as
they are stored, without executing them. A notebook added there appears in the navigation by itself,
in file-name order.
"""

from __future__ import annotations

from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files

NOTEBOOKS_DIR = "notebooks"  # beside mkdocs.yml
NAV_SECTION = "Notebooks"  # the nav entry this hook fills


def _notebooks(config: MkDocsConfig) -> list[Path]:
    return sorted((Path(config.config_file_path).parent / NOTEBOOKS_DIR).glob("*.ipynb"))


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    pages = [f"{NOTEBOOKS_DIR}/{p.name}" for p in _notebooks(config)]
    for entry in config.nav or []:
        if isinstance(entry, dict) and NAV_SECTION in entry:
            entry[NAV_SECTION] = pages
    return config


@event_priority(100)  # before mkdocs-jupyter wraps the .ipynb files as pages
def on_files(files: Files, config: MkDocsConfig) -> Files:
    # Source folder: the project root, so a notebook's page sits at notebooks/<name>/ as in the repository.
    root = str(Path(config.config_file_path).parent)
    for path in _notebooks(config):
        files.append(File(f"{NOTEBOOKS_DIR}/{path.name}", root, config.site_dir, config.use_directory_urls))
    return files


CLI_HELP_MARKER = "<!-- latte-lab help -->"  # api/cli.md: replaced by the help of every subcommand


def _cli_help() -> str:
    from latte_lab.cli import build_parser

    parser = build_parser()
    sections = [f"```text\n{parser.format_help()}```"]
    subparsers = next(a for a in parser._actions if a.dest == "command")
    for name, sub in subparsers.choices.items():
        sections.append(f"## latte-lab {name}\n\n```text\n{sub.format_help()}```")
        nested = [a for a in sub._actions if getattr(a, "choices", None) and isinstance(a.choices, dict)]
        for action in nested:
            for sub_name, subsub in action.choices.items():
                sections.append(f"### latte-lab {name} {sub_name}\n\n```text\n{subsub.format_help()}```")
    return "\n\n".join(sections)


def on_page_markdown(markdown: str, page, config: MkDocsConfig, files: Files) -> str:
    if CLI_HELP_MARKER in markdown:
        markdown = markdown.replace(CLI_HELP_MARKER, _cli_help())
    return markdown
