"""The package's shape: no import circles, families as folders, small ops files.

These check what `docs/architecture.md` promises a newcomer: the modules
import each other in one direction (ops -> scores/modifiers -> layers ->
decoding -> models), each layer family is a subpackage that says what it
holds, no file in `keras_attention/ops/` grows past ~400 lines or holds
a function past ~80, and no function elsewhere in the package or in the
examples holds more than ~80 lines of code.
"""

import ast
import pathlib

import pytest

import keras_attention as ka

PACKAGE = pathlib.Path(ka.__file__).resolve().parent
FAMILIES = ("recurrent", "transformer", "universal", "memory", "pooling", "vision")
OPS_MAX_FILE_LINES = 400
OPS_MAX_FUNCTION_LINES = 80


def _module_name(path):
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules():
    return {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _imports(path, modules):
    """The package modules `path` imports, at the top or inside a function.

    A deferred import inside a function is an import circle put off, not
    removed: it counts.
    """
    targets = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
            names = [n if n in modules else node.module for n in names]
        else:
            continue
        targets.update(n for n in names if n in modules)
    return targets


def _cycle(graph):
    """One import circle of `graph` as a list of modules, or `None`."""
    state = {}

    def visit(node, stack):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state:
                found = visit(nxt, stack)
                if found:
                    return found
        state[node] = "done"
        stack.pop()
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node, [])
            if found:
                return found
    return None


def test_no_module_imports_itself_through_others():
    modules = _modules()
    graph = {name: _imports(p, modules) for name, p in modules.items()}
    # A package's __init__ re-exports its modules, and those modules import
    # their siblings by full path, which goes through the parent package:
    # Python handles that, so edges into an ancestor package do not count.
    for name in graph:
        graph[name] = {t for t in graph[name] if not name.startswith(t + ".")}
    assert _cycle(graph) is None, f"import circle: {' -> '.join(_cycle(graph))}"


def test_import_circle_finder_finds_one():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


@pytest.mark.parametrize("family", FAMILIES)
def test_each_layer_family_is_a_documented_subpackage(family):
    init = PACKAGE / "layers" / family / "__init__.py"
    docstring = ast.get_docstring(ast.parse(init.read_text()))
    assert docstring and len(docstring.split()) >= 20, family
    assert list((PACKAGE / "layers" / family).glob("[!_]*.py")), family


def test_every_public_layer_lives_in_a_family():
    for name in ka.layers.__all__:
        module = getattr(ka.layers, name).__module__.split(".")
        assert module[:2] == ["keras_attention", "layers"], name
        assert module[2] in FAMILIES, f"{name} lives in {'.'.join(module)}"


def _function_lengths(path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, node.end_lineno - node.lineno + 1


@pytest.mark.parametrize(
    "path", sorted((PACKAGE / "ops").glob("*.py")), ids=lambda p: p.name
)
def test_ops_files_and_functions_stay_readable(path):
    lines = len(path.read_text().splitlines())
    assert lines <= OPS_MAX_FILE_LINES, f"{path.name}: {lines} lines"
    long = {n: k for n, k in _function_lengths(path) if k > OPS_MAX_FUNCTION_LINES}
    assert not long, f"{path.name}: over {OPS_MAX_FUNCTION_LINES} lines: {long}"


def _code_lengths(path):
    """`(name, lines)` of every function in `path`, its docstring left out
    (the `Args:` and `Example:` of a public function are not code to read)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = node.end_lineno - node.lineno + 1
            if ast.get_docstring(node, clean=False) is not None:
                docstring = node.body[0]
                lines -= docstring.end_lineno - docstring.lineno + 1
            yield node.name, lines


def _files_outside_ops():
    examples = PACKAGE.parent / "examples"
    package = [
        p
        for p in PACKAGE.rglob("*.py")
        if "ops" not in p.relative_to(PACKAGE).parts[:1]
    ]
    return sorted(package) + sorted(examples.rglob("*.py"))


def test_functions_outside_ops_fit_on_a_screen():
    """Every function of the package (ops/ has its own test above) and of
    the examples holds at most ~80 lines of code."""
    long = {
        f"{path.relative_to(PACKAGE.parent)}:{name}": lines
        for path in _files_outside_ops()
        for name, lines in _code_lengths(path)
        if lines > OPS_MAX_FUNCTION_LINES
    }
    assert not long, f"over {OPS_MAX_FUNCTION_LINES} lines of code: {long}"
