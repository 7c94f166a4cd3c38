"""A repro.py assembled from the harness (fuzzer/cases/harness/), read as text: head.py's opening and the imports
the script uses, then every definition its entry block reaches, in the harness's order, with the case's values in
place of head.py's placeholders (its assignments of a literal)."""

from __future__ import annotations

import ast
import builtins
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

HARNESS = Path(__file__).with_name("harness")
ENTRY = "__main__"  # the `if __name__ == "__main__":` block: what it reaches is copied
SCRIPT_NAMES = frozenset(dir(builtins)) | {"__file__", "__name__"}


class HarnessError(Exception):
    """A harness module that the assembly cannot read: a convsmith bug, never the user's."""


@dataclass(frozen=True)
class Part:
    """A top-level definition of a harness module: its name, its lines (with the comment lines just above), the
    names it reads (`free`: those it does not bind itself), and the columns of its value when it is a one-line
    assignment."""

    name: str
    lines: tuple[str, ...]
    reads: frozenset[str]
    free: frozenset[str]
    value: tuple[int, int] | None = None

    def text(self, value: str | None = None) -> str:
        """The part's source, its assigned value replaced by `value` when one is given."""
        if value is None:
            return "\n".join(self.lines)
        if self.value is None:
            raise HarnessError(f"{self.name}: a placeholder must be a one-line assignment")
        line = self.lines[-1].encode()  # ast's columns count bytes
        start, end = self.value
        return "\n".join((*self.lines[:-1], (line[:start] + value.encode() + line[end:]).decode()))

    def renamed(self, name: str) -> Part:
        """The same function, defined under `name` (a dispatcher's choice takes the dispatcher's place)."""
        lines = list(self.lines)
        at = next(i for i, line in enumerate(lines) if line.startswith(f"def {self.name}("))
        lines[at] = lines[at].replace(f"def {self.name}(", f"def {name}(", 1)
        return Part(name, tuple(lines), self.reads, self.free, self.value)


@dataclass(frozen=True)
class Module:
    """A harness module, parsed: its parts in order, and in head.py's case the script's opening and imports."""

    parts: tuple[Part, ...]
    opening: tuple[str, ...]  # the lines up to the end of the docstring
    imports: tuple[tuple[frozenset[str], str], ...]  # each line of the import block, with the names it imports
    import_reads: frozenset[str]  # what the import block itself reads (a failed import's message)
    placeholders: frozenset[str]


def reads(node: ast.AST) -> frozenset[str]:
    """Every name a statement mentions (its own bindings too: reaching a local by mistake only copies more)."""
    return frozenset(n.id for n in ast.walk(node) if isinstance(n, ast.Name))


def binds(node: ast.AST) -> frozenset[str]:
    """The names a statement binds anywhere inside it: assigned, arguments, imported, caught, defined."""
    names: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            names.add(n.id)
        elif isinstance(n, ast.arg):
            names.add(n.arg)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            names.update(_imported(n))
        elif isinstance(n, ast.ExceptHandler) and n.name:
            names.add(n.name)
        elif isinstance(n, (ast.FunctionDef, ast.ClassDef)):
            names.add(n.name)
    return frozenset(names)


def _imported(node: ast.Import | ast.ImportFrom) -> frozenset[str]:
    return frozenset((a.asname or a.name).split(".")[0] for a in node.names)


def parse_part(text: str) -> Part:
    """The part a piece of rendered source defines (a rendered function or class)."""
    module = parse_module(text)
    if len(module.parts) != 1:
        raise HarnessError(f"rendered source must define one name, not {len(module.parts)}")
    return module.parts[0]


def parse_module(source: str) -> Module:
    """A harness module's parts, imports and placeholders, from its source."""
    lines = source.splitlines()
    tree = ast.parse(source)
    documented = ast.get_docstring(tree) is not None
    opening = tuple(lines[:tree.body[0].end_lineno]) if documented else ()
    parts, imports, placeholders = [], [], set()
    for node in tree.body[1:] if documented else tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.Try)):
            imports.append(node)
            continue
        first = node.lineno - 1
        while first > 0 and lines[first - 1].lstrip().startswith("#"):
            first -= 1
        part = Part(_defined(node), tuple(lines[first:node.end_lineno]), reads(node), reads(node) - binds(node),
                    _value_columns(node))
        parts.append(part)
        if isinstance(node, ast.Assign) and _is_literal(node.value):
            placeholders.add(part.name)
    import_reads = frozenset().union(*(reads(node) for node in imports))
    return Module(tuple(parts), opening, _import_block(imports, lines), import_reads, frozenset(placeholders))


def _defined(node: ast.stmt) -> str:
    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
        return node.name
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        return node.targets[0].id
    if isinstance(node, ast.If) and "__name__" in reads(node.test):
        return ENTRY
    raise HarnessError(f"line {node.lineno}: a top-level statement must define one name")


def _value_columns(node: ast.stmt) -> tuple[int, int] | None:
    if isinstance(node, ast.Assign) and node.lineno == node.end_lineno:
        return node.value.col_offset, node.value.end_col_offset or 0
    return None


def _is_literal(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError):
        return False
    return True


def _import_block(nodes: list[ast.stmt], lines: list[str]) -> tuple[tuple[frozenset[str], str], ...]:
    """The lines from the first import statement to the last (a try block of imports included), each with the names
    its import binds (none for a line that imports nothing)."""
    if not nodes:
        return ()
    bound: dict[int, frozenset[str]] = {}
    for node in (n for top in nodes for n in ast.walk(top) if isinstance(n, (ast.Import, ast.ImportFrom))):
        names = _imported(node)
        bound.update((number, names) for number in range(node.lineno, (node.end_lineno or node.lineno) + 1))
    first, last = nodes[0].lineno, nodes[-1].end_lineno or nodes[-1].lineno
    return tuple((bound.get(number, frozenset()), lines[number - 1]) for number in range(first, last + 1))


def harness(names: Sequence[str]) -> tuple[Module, ...]:
    """The named modules of fuzzer/cases/harness/, parsed, in the order given (head.py's first)."""
    return tuple(parse_module((HARNESS / f"{name}.py").read_text()) for name in names)


def assemble(parsed: Sequence[Module], values: Mapping[str, str], opening: Mapping[str, str],
             chosen: Mapping[str, str], rendered: Mapping[str, str]) -> str:
    """The script made of harness modules (head.py's first): `values` the source of each placeholder's value,
    `opening` the fields of head.py's docstring, `chosen` each dispatcher's choice (a function that takes its name),
    `rendered` the source of definitions made for the case (its module, its converter's call)."""
    head = parsed[0]
    if set(values) != head.placeholders:
        raise HarnessError(f"values for {sorted(values)}, but head.py's placeholders are {sorted(head.placeholders)}")
    order = [part.name for module in parsed for part in module.parts]
    if len(set(order)) != len(order):
        raise HarnessError(f"harness modules define {sorted(n for n in set(order) if order.count(n) > 1)} twice")
    found = {part.name: part for module in parsed for part in module.parts}
    found.update({name: parse_part(text) for name, text in rendered.items()})
    found.update({name: found[choice].renamed(name) for name, choice in chosen.items()})
    needed = _reached(found, {ENTRY, *values})
    unbound = set().union(*(found[name].free for name in needed)) - set(found) - SCRIPT_NAMES
    unbound -= set().union(*(bound for bound, _ in head.imports))
    if unbound:  # a harness module's own imports are not copied: the script would fail with a NameError
        raise HarnessError(f"the script would read {sorted(unbound)}, which it does not define")
    used = head.import_reads.union(*(found[name].reads for name in needed))
    imports = [line for bound, line in head.imports if not bound or bound & used]
    # The entry block last: a module after the one that has it (a converter's own harness module) defines what the
    # script runs before it starts.
    parts = [found[name] for name in order if name in needed and name != ENTRY] + [found[ENTRY]]
    return "\n".join(head.opening).format_map(opening) + "\n" + "\n".join(imports) + "\n\n" + _joined(parts, values)


def _joined(parts: Sequence[Part], values: Mapping[str, str]) -> str:
    """The parts' source, two blank lines apart, but for a run of one-line assignments."""
    text = ""
    for previous, part in zip([None, *parts], parts):
        compact = previous is not None and previous.value is not None and part.value is not None
        text += ("\n" if compact else "\n\n\n" if previous else "") + part.text(values.get(part.name))
    return text + "\n"


def _reached(found: Mapping[str, Part], roots: set[str]) -> set[str]:
    """The names of the definitions `roots` read, directly or through others."""
    seen: set[str] = set()
    todo = [name for name in roots if name in found]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += [read for read in found[name].reads if read in found and read not in seen]
    return seen


__all__ = ["HARNESS", "HarnessError", "Module", "assemble", "harness", "parse_module"]
