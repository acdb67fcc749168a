"""Every option of every command says what it is for, in one vocabulary."""

from __future__ import annotations

from typing import Any

import typer.main
from typer.testing import CliRunner

from elasim.cli import app


def _commands(command: Any, path: str = "elasim"):
    """Every command and subcommand, by duck type: typer has its own copy of click, whose
    groups are no ``click.Group`` (by ``isinstance`` this found the top command alone)."""
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        yield from _commands(sub, f"{path} {name}")


def test_every_option_of_every_command_has_help() -> None:
    missing = []
    for path, command in _commands(typer.main.get_command(app)):
        for param in command.params:
            if getattr(param, "hidden", False):
                continue
            if not (getattr(param, "help", None) or "").strip():
                missing.append(f"{path} {param.opts[0] if param.opts else param.name}")
    assert not missing, "options without help: " + ", ".join(missing)


def _defaults(*names: str) -> dict[str, object]:
    root = typer.main.get_command(app)
    out = {}
    for name in names:
        command = root
        for part in name.split():
            command = command.commands[part]  # type: ignore[attr-defined]
        out[name] = {p.name: p.default for p in command.params}
    return out


def test_cluster_simulate_and_run_share_policy_and_rescale_defaults() -> None:
    both = _defaults("cluster simulate", "cluster run")
    sim, real = both["cluster simulate"], both["cluster run"]
    assert sim["policy"] == real["policy"]
    assert sim["rescale"] == real["rescale"]


def test_cluster_run_takes_gpus_per_node_and_keeps_slots_as_an_alias() -> None:
    result = CliRunner().invoke(app, ["cluster", "run", "--help"], env={"COLUMNS": "200"})
    assert "--gpus-per-node" in result.output
    assert "--slots" not in result.output  # hidden alias


def test_cluster_policies_show_what_each_option_means() -> None:
    result = CliRunner().invoke(app, ["cluster", "policies"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    import elasim.policies.cluster  # noqa: F401 - registers the built-ins
    from elasim.policies.registry import CLUSTER_KIND, describe_policies

    text = " ".join(result.output.split())
    for info in describe_policies(CLUSTER_KIND):
        for option in info.options:
            assert option.doc, f"{info.name}.{option.name} has no doc"
            assert " ".join(option.doc.split()[:3]) in text, (info.name, option.name)


def test_every_help_fits_80_columns_with_names_and_words_whole() -> None:
    """At 80 columns no flag's name is cut (``--checkpoint-inte…`` was all a reader of
    ``simulate --help`` saw of ``--checkpoint-interval-s``), nor a word of its help."""
    runner = CliRunner()
    commands = list(_commands(typer.main.get_command(app)))
    assert {"elasim simulate", "elasim traces show", "elasim cluster run"} <= dict(commands).keys()
    for path, command in commands:
        args = [*path.split()[1:], "--help"]
        result = runner.invoke(app, args, env={"COLUMNS": "80", "TERM": "dumb"})
        assert result.exit_code == 0, (path, result.output)
        assert max(map(len, result.output.splitlines())) <= 80, path
        shown = set(result.output.split())
        assert "…" not in result.output, (path, result.output)
        for param in command.params:
            if getattr(param, "hidden", False) or param.param_type_name != "option":
                continue
            words = [*param.opts, *param.secondary_opts, *(param.help or "").split()]
            cut = [word for word in words if word not in shown]
            assert not cut, (path, param.opts[0], cut)
