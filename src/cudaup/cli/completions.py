"""``cudaup completions bash|zsh|fish``: shell completion scripts, from the parser itself.

The scripts are generated from the command table and each command's own
arguments (their flags, their choices, their help), so a new option completes
without anyone editing a script.  ``--platform`` completes NVIDIA's platforms, and
the commands that name a toolkit (``default``, ``pin``, ``run``, ``env``,
``uninstall``) the installed releases, asked of ``cudaup completions --installed``
when the word is completed.  Install, as rustup and uv do::

    cudaup completions bash > ~/.local/share/bash-completion/completions/cudaup
    cudaup completions zsh  > "${fpath[1]}/_cudaup"
    cudaup completions fish > ~/.config/fish/completions/cudaup.fish
"""

from __future__ import annotations

import argparse
import shlex
from dataclasses import dataclass, field

from cudaup.cli.argv import VALUED_GLOBALS
from cudaup.cli.commands import COMMANDS
from cudaup.cli.output import emit_json
from cudaup.cli.parser import build_parser
from cudaup.core.platforms import PLATFORMS
from cudaup.errors import UsageError

SHELLS = ("bash", "zsh", "fish")
#: The values of options that take any text, but mostly one of these.
VALUES: dict[str, tuple[str, ...]] = {"--platform": PLATFORMS}
#: Commands whose first word names an installed toolkit (or a path).
TOOLKIT_COMMANDS = frozenset({"default", "pin", "run", "env", "uninstall"})
#: What the scripts run for the installed releases (quietly: a broken store offers none).
INSTALLED = "command cudaup completions --installed 2>/dev/null"


@dataclass(frozen=True, slots=True)
class Option:
    flags: tuple[str, ...]
    help: str
    takes_value: bool
    choices: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    summary: str
    options: tuple[Option, ...]
    positional_choices: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Spec:
    globals: tuple[Option, ...]
    commands: tuple[Command, ...] = field(default_factory=tuple)


def _options(parser: argparse.ArgumentParser) -> tuple[tuple[Option, ...], tuple[str, ...]]:
    options: list[Option] = []
    positional: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            continue
        choices = tuple(str(c) for c in action.choices) if action.choices else ()
        if not choices:
            choices = next((VALUES[f] for f in action.option_strings if f in VALUES), ())
        if not action.option_strings:
            positional += choices
            continue
        if action.help == argparse.SUPPRESS:
            continue  # a command's hidden copy of a global option
        options.append(
            Option(tuple(action.option_strings), action.help or "", action.nargs != 0, choices)
        )
    return tuple(options), tuple(positional)


def spec() -> Spec:
    """Every command's options, read from the parser each command builds."""
    root = build_parser()
    globals_ = tuple(o for o in _options(root)[0] if not {"--help", "--version"} & set(o.flags))
    commands = []
    for name, info in COMMANDS.items():
        parser = build_parser(name)
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        options, positional = _options(sub.choices[name])
        options = tuple(o for o in options if "--help" not in o.flags)
        commands.append(Command(name, info.summary, options, positional))
    return Spec(globals_, tuple(commands))


def _words(items: list[str]) -> str:
    return " ".join(items)


def bash(spec: Spec) -> str:
    commands = _words([c.name for c in spec.commands])
    globals_ = _words([f for o in spec.globals for f in o.flags])
    valued = "|".join(VALUED_GLOBALS)
    value_cases = []
    option_cases = []
    for command in spec.commands:
        flags = _words([f for o in command.options for f in o.flags])
        choices = _words(list(command.positional_choices))
        installed = (
            f' [[ "$prev" == {command.name} ]] && words="$({INSTALLED})";'
            if command.name in TOOLKIT_COMMANDS
            else ""
        )
        option_cases.append(
            f"        {command.name}) flags={shlex.quote(flags)}; words={shlex.quote(choices)};"
            f"{installed} ;;"
        )
        for option in command.options:
            if option.choices:
                for flag in option.flags:
                    choices = shlex.quote(_words(list(option.choices)))
                    value_cases.append(
                        f'        {command.name}:{flag}) COMPREPLY=($(compgen -W {choices} -- "$cur")); return ;;'
                    )
    for option in spec.globals:
        for flag in option.flags if option.choices else ():
            choices = shlex.quote(_words(list(option.choices)))
            value_cases.append(
                f'        *:{flag}) COMPREPLY=($(compgen -W {choices} -- "$cur")); return ;;'
            )
    return "\n".join(
        [
            "# bash completion for cudaup (generated by `cudaup completions bash`)",
            "_cudaup() {",
            '    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"',
            '    local command="" i word words="" flags=""',
            "    for ((i = 1; i < COMP_CWORD; i++)); do",
            '        word="${COMP_WORDS[i]}"',
            '        case "$word" in',
            f"            {valued}) ((i++)) ;;",
            "            -*) ;;",
            '            *) command="$word"; break ;;',
            "        esac",
            "    done",
            '    case "$command:$prev" in',
            *value_cases,
            "    esac",
            '    if [[ -z "$command" ]]; then',
            f'        COMPREPLY=($(compgen -W "{commands} {globals_}" -- "$cur"))',
            "        return",
            "    fi",
            '    case "$command" in',
            *option_cases,
            "    esac",
            '    if [[ "$cur" == -* ]]; then words="$flags ' + globals_ + '"; fi',
            '    COMPREPLY=($(compgen -W "$words" -- "$cur"))',
            "}",
            "complete -o default -F _cudaup cudaup",
            "",
        ]
    )


def _zsh_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _zsh_item(name: str, text: str) -> str:
    return _zsh_quote(name.replace(":", "\\:") + ":" + text)


def zsh(spec: Spec) -> str:
    valued = "|".join(VALUED_GLOBALS)
    commands = " ".join(_zsh_item(c.name, c.summary) for c in spec.commands)
    globals_ = " ".join(_zsh_item(f, o.help) for o in spec.globals for f in o.flags)
    value_cases = []
    option_cases = []
    for command in spec.commands:
        items = [_zsh_item(f, o.help) for o in command.options for f in o.flags]
        positional = " ".join(_zsh_quote(c) for c in command.positional_choices)
        installed = (
            f' [[ ${{words[CURRENT-1]}} == {command.name} ]] && positional+=(${{(f)"$({INSTALLED})"}});'
            if command.name in TOOLKIT_COMMANDS
            else ""
        )
        option_cases.append(
            f"    ({command.name}) options=({' '.join(items)}); positional=({positional});"
            f"{installed} ;;"
        )
        for option in command.options:
            if option.choices:
                choices = " ".join(_zsh_quote(c) for c in option.choices)
                for flag in option.flags:
                    value_cases.append(
                        f"    ({command.name}:{flag}) compadd -- {choices}; return ;;"
                    )
    for option in spec.globals:
        for flag in option.flags if option.choices else ():
            choices = " ".join(_zsh_quote(c) for c in option.choices)
            value_cases.append(f"    (*:{flag}) compadd -- {choices}; return ;;")
    return "\n".join(
        [
            "#compdef cudaup",
            "# zsh completion for cudaup (generated by `cudaup completions zsh`)",
            "_cudaup() {",
            "  local command='' i word",
            "  local -a commands globals options positional",
            "  for ((i = 2; i < CURRENT; i++)); do",
            "    word=${words[i]}",
            "    case $word in",
            f"      ({valued}) ((i++)) ;;",
            "      (-*) ;;",
            "      (*) command=$word; break ;;",
            "    esac",
            "  done",
            '  case "$command:${words[CURRENT-1]}" in',
            *value_cases,
            "  esac",
            f"  globals=({globals_})",
            "  if [[ -z $command ]]; then",
            f"    commands=({commands})",
            "    _describe -t commands 'cudaup command' commands",
            "    _describe -t options 'global option' globals",
            "    return",
            "  fi",
            "  case $command in",
            *option_cases,
            "  esac",
            "  _describe -t options 'option' options",
            "  _describe -t options 'global option' globals",
            "  (( ${#positional} )) && compadd -- $positional",
            "  _files",
            "}",
            'if [[ "$funcstack[1]" = "_cudaup" ]]; then _cudaup "$@"; else compdef _cudaup cudaup; fi',
            "",
        ]
    )


def _fish_quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _fish_option(option: Option, condition: str) -> str:
    words = [f"complete -c cudaup -n {_fish_quote(condition)}"]
    for flag in option.flags:
        if flag.startswith("--"):
            words.append(f"-l {flag[2:]}")
        else:
            words.append(f"-s {flag[1:]}")
    if option.takes_value:
        words.append("-r")
    if option.choices:
        words.append("-f -a " + _fish_quote(" ".join(option.choices)))
    words.append("-d " + _fish_quote(option.help))
    return " ".join(words)


def fish(spec: Spec) -> str:
    names = " ".join(c.name for c in spec.commands)
    lines = [
        "# fish completion for cudaup (generated by `cudaup completions fish`)",
        "complete -c cudaup -f",
    ]
    for command in spec.commands:
        lines.append(
            f"complete -c cudaup -n {_fish_quote('not __fish_seen_subcommand_from ' + names)} "
            f"-a {command.name} -d {_fish_quote(command.summary)}"
        )
    for option in spec.globals:
        lines.append(_fish_option(option, "true"))
    for command in spec.commands:
        seen = f"__fish_seen_subcommand_from {command.name}"
        for option in command.options:
            lines.append(_fish_option(option, seen))
        if command.name in TOOLKIT_COMMANDS:
            first = f"{seen}; and test (count (commandline -opc)) -le 2"
            lines.append(f"complete -c cudaup -n {_fish_quote(first)} -a '({INSTALLED})'")
        if command.positional_choices:
            lines.append(
                f"complete -c cudaup -n {_fish_quote(seen)} -a "
                f"{_fish_quote(' '.join(command.positional_choices))}"
            )
        else:
            lines.append(f"complete -c cudaup -n {_fish_quote(seen)} -F")
    return "\n".join(lines) + "\n"


RENDERERS = {"bash": bash, "zsh": zsh, "fish": fish}


def add_completions(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("shell", nargs="?", choices=SHELLS, help="the shell to complete for")
    # What the scripts ask when completing a toolkit: not for people, so not in --help.
    parser.add_argument("--installed", action="store_true", help=argparse.SUPPRESS)
    parser.set_defaults(handler=cmd_completions)


def cmd_completions(args: argparse.Namespace) -> int:
    if args.installed:
        from cudaup.install.store import Store  # noqa: PLC0415 - only this answer needs it

        versions = dict.fromkeys(t.version for t in Store.from_env().runnable())
        print("\n".join(versions), end="\n" if versions else "")
        return 0
    if args.shell is None:
        raise UsageError(f"name the shell: cudaup completions {'|'.join(SHELLS)}")
    script = RENDERERS[args.shell](spec())
    if args.json:
        emit_json({"shell": args.shell, "script": script})
    else:
        print(script, end="")
    return 0
