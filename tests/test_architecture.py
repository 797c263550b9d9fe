"""The package's shape: levels, no import circles, families as folders, small ops files.

These check what `docs/architecture.md` promises a newcomer: the modules
import each other in one direction, each level only the levels below it
(`LEVELS`: ops -> scores/modifiers -> layers -> decoding -> models, with
the side modules below or beside them, and inside `ops` the building
blocks -> the three paths -> the dispatch -> `multi_head_attention`); no
module of `keras_attention/`, `benchmarks/` or `examples/` imports itself
through others; only `keras_attention/keras_compat.py` touches Keras'
internals (`keras.src`); each layer family is a subpackage that says what
it holds; and no file under `keras_attention/ops/` grows past ~400 lines or
holds a function past ~80, and no function elsewhere in the package or
in the examples holds more than ~80 lines of code.
"""

import ast
import pathlib

import pytest

import keras_attention as ka

PACKAGE = pathlib.Path(ka.__file__).resolve().parent
ROOT = PACKAGE.parent
SCRIPT_TREES = ("benchmarks", "examples")
FAMILIES = ("recurrent", "transformer", "universal", "memory", "pooling", "vision")
OPS_MAX_FILE_LINES = 400
OPS_MAX_FUNCTION_LINES = 80


# The levels of docs/architecture.md, lowest first. A module belongs to the
# longest prefix that names it; it may import the modules of lower levels and
# those of its own entry (its siblings), never a higher level nor another
# entry of its own level (scores and modifiers do not import each other, nor
# do the three attention paths). A package's `__init__` may import what it
# re-exports (its own submodules).
LEVELS = {
    # side modules below every level: they import nothing from the package
    "keras_attention.validation": 0,
    "keras_attention.keras_compat": 0,
    "keras_attention.initializers": 0,
    # ops, itself in levels: the building blocks (masks, softmax, modifier
    # calls, devices, loops, ...), the three paths, the dispatch that plans
    # them, and `multi_head_attention`, which follows the plan
    "keras_attention.ops": 10,
    "keras_attention.ops.dense": 11,
    "keras_attention.ops.chunked": 11,
    "keras_attention.ops.fused": 11,
    "keras_attention.ops.dispatch": 12,
    "keras_attention.ops.multi_head": 13,
    "keras_attention.scores": 20,
    "keras_attention.modifiers": 20,
    "keras_attention.layers": 30,
    "keras_attention.decoding": 40,
    # the weights collector reads the layers (to know which are attention
    # layers); level 5 of the design's tools, above decoding
    "keras_attention.visualization": 45,
    "keras_attention.models": 50,
    "keras_attention": 60,  # the package's __init__: the public names
}
# Side modules beside the stack: they import nothing from the package, so
# that they work on anyone's layers.
STANDALONE = (
    "keras_attention.testing",
    "keras_attention.distribution",
)
KERAS_COMPAT = PACKAGE / "keras_compat.py"


def _module_name(path, root=ROOT):
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules():
    return {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _imported_names(path):
    """`(name, fallback)` for every name `path` imports, at the top or
    inside a function: `import a.b` gives `("a.b", None)`, `from a import b`
    gives `("a.b", "a")` (`a.b` when it is a module, else a name in `a`).

    A deferred import inside a function is an import circle put off, not
    removed: it counts.
    """
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, None
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                yield f"{node.module}.{alias.name}", node.module


def _imports(path, modules, resolve=None):
    """The modules of `modules` that `path` imports (see `_imported_names`);
    `resolve(name)` maps an imported name to a key of `modules` (default:
    the name itself)."""
    resolve = resolve or (lambda name: name)
    targets = set()
    for name, fallback in _imported_names(path):
        for candidate in (name, fallback):
            if candidate is not None and resolve(candidate) in modules:
                targets.add(resolve(candidate))
                break
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


def _package_graph():
    modules = _modules()
    graph = {name: _imports(p, modules) for name, p in modules.items()}
    # A package's __init__ re-exports its modules, and those modules import
    # their siblings by full path, which goes through the parent package:
    # Python handles that, so edges into an ancestor package do not count.
    for name in graph:
        graph[name] = {t for t in graph[name] if not name.startswith(t + ".")}
    return graph


def test_no_module_imports_itself_through_others():
    graph = _package_graph()
    assert _cycle(graph) is None, f"import circle: {' -> '.join(_cycle(graph))}"


def test_import_circle_finder_finds_one():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def _entry(module):
    """The entry of `LEVELS` that `module` belongs to: its longest prefix."""
    prefixes = [p for p in LEVELS if module == p or module.startswith(p + ".")]
    return max(prefixes, key=len)


def _level_violations(graph):
    """The imports of `graph` (module -> imported modules) that point up or
    sideways: `"a -> b"` for each, sorted."""
    found = []
    for module, targets in graph.items():
        for target in targets:
            if target.startswith(module + "."):
                continue  # a package's __init__ re-exporting its modules
            if module in STANDALONE or target in STANDALONE:
                found.append(f"{module} -> {target}")
                continue
            home, there = _entry(module), _entry(target)
            if there != home and LEVELS[there] >= LEVELS[home]:
                found.append(f"{module} -> {target}")
    return sorted(found)


def test_each_level_imports_only_lower_levels():
    graph = _package_graph()
    assert set(STANDALONE) <= set(graph)
    assert {_entry(m) for m in graph} == set(LEVELS)
    assert _level_violations(graph) == []


def test_level_checker_finds_an_import_up_or_sideways():
    graph = {
        "keras_attention.ops.softmax": {"keras_attention.validation"},
        "keras_attention.ops.chunked.blocks": {"keras_attention.ops.softmax"},
        "keras_attention.ops.fused.plan": {"keras_attention.ops.dispatch.plan"},
        "keras_attention.ops.dense.kernel": {"keras_attention.ops.chunked.blocks"},
        "keras_attention.scores": {"keras_attention.modifiers.base"},
        "keras_attention.layers.a": {"keras_attention.layers.b"},
        "keras_attention.testing": {"keras_attention.ops"},
        "keras_attention.validation": {"keras_attention.ops.softmax"},
        "keras_attention.ops": {"keras_attention.ops.multi_head"},
    }
    assert _level_violations(graph) == [
        "keras_attention.ops.dense.kernel -> keras_attention.ops.chunked.blocks",
        "keras_attention.ops.fused.plan -> keras_attention.ops.dispatch.plan",
        "keras_attention.scores -> keras_attention.modifiers.base",
        "keras_attention.testing -> keras_attention.ops",
        "keras_attention.validation -> keras_attention.ops.softmax",
    ]


def _script_modules(tree):
    """`{name: path}` of the Python files under `ROOT / tree`: each by its
    dotted path from the repository root (`examples.common.cli`)."""
    return {_module_name(p): p for p in (ROOT / tree).rglob("*.py")}


def _script_graph():
    """The imports among the modules of `benchmarks/` and `examples/`.

    Their scripts put their own folder (or another's) on `sys.path` and
    import its modules by their bare name (`import nmt_common`, `from
    bench import ...`): a bare name is resolved in the importer's folder
    first, then to the one module of that name anywhere in the trees.
    """
    modules = {}
    for tree in SCRIPT_TREES:
        modules.update(_script_modules(tree))
    by_bare = {}
    for name in modules:
        by_bare.setdefault(name.rsplit(".", 1)[-1], []).append(name)

    def resolver(importer):
        folder = importer.rsplit(".", 1)[0]

        def resolve(name):
            if name in modules:
                return name
            if f"{folder}.{name}" in modules:
                return f"{folder}.{name}"
            found = by_bare.get(name, [])
            return found[0] if len(found) == 1 and "." not in name else name

        return resolve

    graph = {
        name: _imports(path, modules, resolver(name)) for name, path in modules.items()
    }
    for name in graph:
        graph[name] = {t for t in graph[name] if not name.startswith(t + ".")}
    return graph


def test_benchmarks_and_examples_have_no_import_circle():
    graph = _script_graph()
    assert "benchmarks.gpu_check" in graph and "examples.nlp.nmt_common" in graph
    # the checker sees both ways scripts import each other
    assert "examples.nlp.nmt_common" in graph["examples.nlp.nmt_transformer"]
    assert "benchmarks.bench" in graph["benchmarks.bench_jax"]
    assert _cycle(graph) is None, f"import circle: {' -> '.join(_cycle(graph))}"


def _imports_keras_internals(path):
    """Whether `path` imports `keras.src` (or a module under it), anywhere."""
    return any(
        name == "keras.src" or name.startswith("keras.src.")
        for pair in _imported_names(path)
        for name in pair
        if name is not None
    )


def test_only_keras_compat_imports_keras_internals():
    assert _imports_keras_internals(KERAS_COMPAT)
    importers = [
        str(p.relative_to(ROOT))
        for p in sorted(PACKAGE.rglob("*.py"))
        if p != KERAS_COMPAT and _imports_keras_internals(p)
    ]
    assert importers == []


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
    "path",
    sorted((PACKAGE / "ops").rglob("*.py")),
    ids=lambda p: str(p.relative_to(PACKAGE / "ops")),
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
