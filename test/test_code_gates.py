"""Gates that keep the code as it is meant to be, run with the tests (as ament_flake8 and
ament_copyright run in ROS packages): the lint, the import rules that draw the layers
core ← ros ← nodes ← commands, and the paths the code and docs quote."""
import ast
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, 'contact_estimation')
# What core/ must never import: ROS, or the layers above it.
ROS_MODULES = ('rclpy', 'rosgraph_msgs', 'sensor_msgs', 'geometry_msgs', 'std_msgs',
               'std_srvs', 'visualization_msgs', 'diagnostic_msgs', 'builtin_interfaces',
               'tf2_ros', 'launch', 'launch_ros')
ABOVE_CORE = ('contact_estimation.ros', 'contact_estimation.nodes', 'contact_estimation.commands',
              'contact_estimation.composed', 'contact_estimation.launcher')
TEST_HELPERS = ('contact_estimation.ros.testing',)


def _imports(path: str) -> set[str]:
    """Every module `path` imports, at any depth of the file (lazy imports count)."""
    with open(path, encoding='utf-8') as f:
        tree = ast.parse(f.read(), path)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found |= {f'{node.module}.{alias.name}' for alias in node.names}
    return found


def _modules(folder: str) -> list[str]:
    return [os.path.join(top, name) for top, _, names in os.walk(folder)
            for name in names if name.endswith('.py')]


def _under(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + '.') for p in prefixes)


def test_the_code_passes_the_lint():
    done = subprocess.run([sys.executable, '-m', 'ruff', 'check', '--no-cache', ROOT],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr


def test_core_imports_no_ros_and_nothing_above_it():
    core = os.path.join(PACKAGE, 'core')
    offences = {os.path.relpath(path, ROOT): sorted(
        m for m in _imports(path) if _under(m, ROS_MODULES + ABOVE_CORE))
        for path in _modules(core)}
    assert not {path: bad for path, bad in offences.items() if bad}


def test_no_production_module_imports_the_test_helpers():
    helpers = os.path.join(PACKAGE, 'ros', 'testing.py')
    offences = {os.path.relpath(path, ROOT): sorted(
        m for m in _imports(path) if _under(m, TEST_HELPERS))
        for path in _modules(PACKAGE) if path != helpers}
    assert not {path: bad for path, bad in offences.items() if bad}


def _calls(path: str, names: tuple[str, ...]) -> list[str]:
    """`file:line name` of every call of a method or function called one of `names`."""
    with open(path, encoding='utf-8') as f:
        tree = ast.parse(f.read(), path)
    return [f'{os.path.relpath(path, ROOT)}:{node.lineno} {name}'
            for node in ast.walk(tree) if isinstance(node, ast.Call)
            for name in [getattr(node.func, 'attr', getattr(node.func, 'id', None))]
            if name in names]


def test_parameters_are_declared_by_their_tables_only():
    """One table per node (ros/params.py) is the one place a parameter is declared: a
    `declare_parameter` elsewhere would be a parameter the docs, the shipped YAML and its
    test do not know."""
    tables = os.path.join(PACKAGE, 'ros', 'params.py')
    offences = [call for path in _modules(PACKAGE) if path != tables
                for call in _calls(path, ('declare_parameter', 'declare_parameters'))]
    assert not offences


# A quoted `core/...` or `ros/...` path: a folder, a module (`.py`), or a module and a name
# defined in it (`core/chain/sample.JointSample`), as docstrings and docs cite them.
_QUOTED = re.compile(r'(?<![\w./-])(?:contact_estimation/)?((?:core|ros)(?:/[A-Za-z_]\w*)+)'
                     r'(\.py\b|\.[A-Za-z_]\w*)?')


def _quote_resolves(path: str, tail: str) -> bool:
    module = os.path.join(PACKAGE, path)
    if tail == '.py':
        return os.path.isfile(module + '.py')
    if not tail:
        return os.path.isdir(module) or os.path.isfile(module + '.py')
    if not os.path.isfile(module + '.py'):
        return False
    with open(module + '.py', encoding='utf-8') as f:
        source = f.read()
    name = re.escape(tail[1:])
    return re.search(rf'^\s*(?:class|def) {name}\b|^{name}\b\s*[:=]', source, re.M) is not None


def test_every_quoted_core_or_ros_path_exists():
    """A docstring or doc that names a moved module or name sends the reader nowhere."""
    tracked = subprocess.run(['git', 'ls-files', '*.py', '*.md'], capture_output=True,
                             text=True, cwd=ROOT, check=True).stdout.split()
    stale = []
    for name in sorted(tracked):
        with open(os.path.join(ROOT, name), encoding='utf-8') as f:
            text = f.read()
        for quote in _QUOTED.finditer(text):
            path, tail = quote.group(1), quote.group(2) or ''
            if not _quote_resolves(path, tail):
                stale.append(f'{name}:{text.count(chr(10), 0, quote.start()) + 1}: '
                             f'{quote.group(0)}')
    assert not stale, '\n'.join(stale)


def test_the_chains_process_loads_no_open3d_nor_mujoco():
    """The chain's nodes (nodes.yaml `realtime`) import neither the geometry nor the simulator:
    open3d alone costs the stop's process ~200 MiB and ~1.5 s of start-up."""
    from contact_estimation import manifest
    chain = manifest.process_of('collision_detector')
    modules = [manifest.node(name).module for name in chain.nodes]
    code = (f'import sys, importlib; [importlib.import_module(m) for m in {modules!r}]; '
            "print(sorted({'open3d', 'mujoco'} & set(sys.modules)))")
    loaded = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                            check=True).stdout.strip()
    assert loaded == '[]', f'the chain imports {loaded}'
